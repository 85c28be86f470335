"""``mire omp-train``: the OpenMP head, judged leave one application out.

From the timed dataset of ``mire omp-data`` (``labels.jsonl``), every
region of every race-free program and size is a row: its features and, per
configuration of the space, the measured log speedup over the runtime's
default (a configuration that failed, changed the output or was not timed
counts as :data:`BAD`, so no policy learns to pick it).

Policies, each judged on applications it never saw (a PolyBench program is
one application; a generated family is one, because its programs are
siblings), side by side in one run:

* ``default``: nothing changed (1.0 by definition);
* ``best single``: the configuration with the best mean log speedup over the
  training applications (each weighs the same), forced everywhere (the
  paper's "one setting for all");
* a forest per feature set (:data:`FEATURE_SETS`): static region statistics
  (:mod:`mirecc.ir.region_stats`); IR2Vec (the module's vector, PyPI
  ``ir2vec``); a random-init encoder's and mirecc's encoder's embedding of
  the region's outlined function (each with the statistics). The forest
  acts only where a low quantile of its trees still promises ``min_gain``
  (:func:`mirecc.learn.forest.choose`), else the default stays;
* ``verified``, per forest and for a random order: what ``mire tune`` does
  where a guess cannot be trusted. The region's first ``--verify``
  configurations in the forest's order (its trees' ``quantile``, best
  first; no gate) are measured against the default, and one is kept only
  where it beats the best so far as the tune's rule says
  (:func:`mirecc.learn.keep.beats`: median and minimum beyond the threshold and
  the default's spread, the slowest run beyond the threshold), else the
  default stays. Judged honestly on rounds
  that chose nothing: per timed round, the tune measures on the others and
  its pick is judged on that round (:func:`verify`).

Per application: its speedup (the geomean over its sizes of the program's
speedup, regions combined as :func:`..dataset.combine` does), its share of
the oracle's, whether it reaches 0.9 of the oracle and whether it is slower
than 0.95x the default (both as the issue and the MIREncoder paper count).
``--write-head`` fits the chosen feature set on every row and writes
``heads/openmp`` (``spec.yaml``, ``head.onnx``, ``metrics.json``).

The apply gate (``min_gain``) it ships is calibrated first (:mod:`mirecc.learn.gates`,
:func:`gate_sweep`): for each of ``--gate-thresholds``, every application is
held out in turn, including the programs of ``--held-out`` label folders
(generated kernels the training labels never held, each judged as its own
application with every program of its family, in any folder, left out of
training), and runs with the decisions that threshold lets through. The
admissible threshold (no application below 0.95x, something applied) with
the best geomean is shipped; where none is, the spec says
``refuse_forcing`` and why, and the driver records decisions without
applying them. The head is then fitted on every folder's rows.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.encoder.runtime import compile_to_ir
from mirecc.graph import build_graph_any
from mirecc.ir.region_stats import NAMES, region_statistics
from mirecc.ir.regions import emit_ir
from mirecc.learn.embeddings import embed_graph_sets, embed_ir2vec, encoder_model_dirs
from mirecc.learn.forest import ForestConfig, choose, fit_forest, onnx_bytes, tree_predictions
from mirecc.learn.gates import FLOOR, calibrate, gate_document, gate_row, refusal_reason
from mirecc.tasks.openmp.offline.dataset import MERGE_KEYS, Builder, combine, geomean, oracle
from mirecc.learn.labels import read_rows
from mirecc.learn.keep import KEEP_THRESHOLD, beats
from mirecc.tasks.openmp.offline.programs import kernel_programs, polybench_programs
from mirecc.util.fsutil import atomic_write_bytes, replace_dir
from mirecc.util.modelfiles import load_model
from mirecc.util.plots import pyplot, save

#: the log speedup a configuration that failed or changed the output counts as
BAD = math.log(0.5)
FEATURE_SETS = ("statistics", "ir2vec", "random-init", "encoder")
#: feature sets the driver can compute (IR2Vec is not in the driver)
SHIPPABLE = {"statistics": ["region_statistics"],
             "encoder": ["region_statistics", "function_embedding"]}
DEFAULT_LABELS = Path(".work/omp-labels")
#: random orders averaged for the verified policy's random baseline
RANDOM_ORDERS = 20
#: min_gain values (log speedups) the apply gate is calibrated over
GATE_THRESHOLDS = (0.0, 0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3)


def default_config_key(labels: Path) -> str | None:
    """The runtime's default (a team of all cores, static, default chunk) as
    a configuration key of the labels' machine (``meta.json``); None when
    the labels do not say how many cores it had."""
    meta = labels / "meta.json"
    cores = json.loads(meta.read_text()).get("cores") if meta.is_file() else None
    return f"t{cores}-static-default" if cores else None


def add_arguments(p) -> None:
    p.add_argument("--labels", default=str(DEFAULT_LABELS),
                   help="the dataset directory of mire omp-data (default: %(default)s)")
    p.add_argument("--held-out", action="append", default=[], metavar="DIR",
                   help="labels of programs outside --labels (repeatable; same compiler, "
                        "cores and protocol): each of its programs is judged as its own "
                        "application with its whole family left out of training, the gate "
                        "is calibrated on them too, and --write-head fits on them as well")
    p.add_argument("--gate-thresholds", default=",".join(f"{t:g}" for t in GATE_THRESHOLDS),
                   help="min_gain values (log speedup) --write-head calibrates the apply "
                        "gate over, leave one application out (default: %(default)s)")
    p.add_argument("--work", default=".work/omp-train",
                   help="builds, regenerated kernels and feature caches (default: %(default)s)")
    p.add_argument("--cc", default="clang-14", help="the clang the labels were measured "
                   "with (features are computed from its IR) (default: %(default)s)")
    p.add_argument("--features", default=",".join(FEATURE_SETS),
                   help="feature sets to judge (default: %(default)s)")
    p.add_argument("--sizes", default=None,
                   help="comma-separated sizes to use (default: every size in the labels)")
    p.add_argument("--quantile", type=float, default=0.3)
    p.add_argument("--min-gain", type=float, default=0.05,
                   help="log speedup the quantile must promise; with --write-head, the "
                        "gate before calibration, the threshold the calibrated one replaces "
                        "(and ships, refusing to force, where none is admissible) "
                        "(default: %(default)s)")
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--seeds", type=int, default=3, help="forest seeds averaged (default: 3)")
    p.add_argument("--verify", type=int, default=3, metavar="K",
                   help="also judge verified policies: the first K configurations of a "
                        "region in an order measured, as mire tune does (0: not judged; "
                        "default: %(default)s)")
    p.add_argument("--threshold", type=float, default=KEEP_THRESHOLD,
                   help="the verified policies' keep threshold, as mire tune's "
                        "(default: %(default)s)")
    p.add_argument("--out", default=None, help="where to write omp-train.md/.json "
                   "(default: <labels>)")
    p.add_argument("--write-head", default=None, metavar="FEATURES",
                   help="fit this feature set (statistics or encoder) on all rows and "
                        "write heads/openmp")
    p.add_argument("--head-dir", type=Path, default=Path("heads/openmp"),
                   help="where --write-head writes the head (default: %(default)s)")


# ------------------------------------------------------------------ the table

class Table:
    """Regions of race-free programs: keys, application, targets (log
    speedups), and the timed rounds behind them.

    An application is what one held-out run is judged on: a PolyBench
    program, or a generated family. ``groups`` is what is left out of
    training with it: the application itself, except for a program of a
    held-out folder (rows marked ``"held_out": true`` in memory, see
    :func:`load_labels`), which is its own application (``"<program> (held
    out)"``) left out with every program of its family."""

    def __init__(self, rows: list[dict]):
        o = oracle(rows)
        # (program, size, region, configuration) -> (default's, its) kernel
        # times, round by round (both timed in the same shuffled rounds)
        timed = {(r["program"], r["size"], r["region"], r["config_key"]):
                 ((r.get("default") or {}).get("times_s") or [], r.get("times_s") or [])
                 for r in rows if "config_key" in r}
        suites = {r["program"]: (r.get("suite"), r.get("group"), bool(r.get("held_out")))
                  for r in rows}
        configs = sorted({r["config_key"] for r in rows if "config_key" in r})
        self.classes = configs
        self.keys, self.apps, self.groups, self.Y, self.parents = [], [], [], [], {}
        self.kernel_apps = set()     # applications of generated kernels
        self.unsafe = []        # (N, classes): not a candidate (failed, output changed, not timed)
        self.rounds = []        # per region, per class: (default's times, its times) or None
        for (prog, size), p in sorted(o["per"].items()):
            if p["racy"] or not p["regions"]:
                continue
            suite, group, held = suites.get(prog, (None, None, False))
            family = f"{group} (family)" if suite == "kernels" else prog
            app = f"{prog} (held out)" if held else family
            if suite == "kernels":
                self.kernel_apps.add(app)
            for rid, g in p["regions"].items():
                if g["default_s"] is None:
                    continue
                self.keys.append((prog, size, rid))
                self.apps.append(app)
                self.groups.append(family)
                self.Y.append([math.log(g["by_config"][c]) if c in g["by_config"] else BAD
                               for c in configs])
                self.unsafe.append([c not in g["by_config"] for c in configs])
                self.rounds.append([_paired(*timed[(prog, size, rid, c)])
                                    if c in g["by_config"] else None for c in configs])
                self.parents[(prog, size, rid)] = p["parents"].get(rid)
        self.Y = np.asarray(self.Y, dtype=np.float64).reshape(len(self.keys), len(configs))
        self.unsafe = np.asarray(self.unsafe, dtype=bool).reshape(self.Y.shape)
        self.apps = np.asarray(self.apps)
        self.groups = np.asarray(self.groups)
        self.group_of = dict(zip(self.apps.tolist(), self.groups.tolist()))

    def split(self, app: str) -> tuple[np.ndarray, np.ndarray]:
        """(the rows of ``app``, the rows trained on while it is held out)."""
        return (np.flatnonzero(self.apps == app),
                np.flatnonzero(self.groups != self.group_of[app]))

    def program_speedups(self, idx: np.ndarray, chosen: list[int | None],
                         ratios: list[float] | None = None) -> dict:
        """(program, size) -> the program's speedup when region ``idx[i]``
        runs configuration ``chosen[i]`` (None: default), each region's
        speedup the labels' (or ``ratios[i]``); regions combined."""
        by_unit: dict[tuple, dict] = {}
        for n, (i, c) in enumerate(zip(idx, chosen)):
            prog, size, rid = self.keys[i]
            ratio = (ratios[n] if ratios is not None
                     else 1.0 if c is None else math.exp(self.Y[i, c]))
            by_unit.setdefault((prog, size), {})[rid] = ratio
        return {u: combine(r, {rid: self.parents[(u[0], u[1], rid)] for rid in r})
                for u, r in by_unit.items()}


def _paired(default: list[float], times: list[float]):
    """Both lists of times, when they hold the same rounds (every run of
    both ran); else None."""
    return (default, times) if default and len(default) == len(times) else None


def verify(table: Table, i: int, order: list[int], k: int, threshold: float):
    """What a tune keeps for region ``i`` after measuring the first ``k``
    configurations of ``order`` against the default, judged on rounds it did
    not measure: per timed round r, the tune measures on the other rounds
    and its pick is judged on round r alone; the region's speedup is the
    median over r (one slow judged round, which this VM has, moves no
    median). A candidate that failed, changed the output or was not timed
    costs its try and is never kept; one is kept only where it beats the
    best so far (:func:`mirecc.learn.keep.beats`). Returns (the class most often kept, or
    None for the default; the speedup)."""
    # a tune needs two measured rounds (a median and a spread), and one is judged
    tried = [c for c in order[:k] if not table.unsafe[i, c] and table.rounds[i][c]
             and len(table.rounds[i][c][0]) >= 3]
    if not tried:
        return None, 1.0
    default = table.rounds[i][tried[0]][0]
    picks, ratios = [], []
    for r in range(len(default)):
        def measured(times):
            return times[:r] + times[r + 1:]
        kept, best = None, measured(default)
        for c in tried:
            times = table.rounds[i][c][1]
            if beats(measured(times), best, threshold):
                kept, best = c, measured(times)
        picks.append(kept)
        ratios.append(1.0 if kept is None else default[r] / table.rounds[i][kept][1][r])
    return max(picks, key=picks.count), statistics.median(ratios)


def forest_order(tree_gains: np.ndarray, quantile: float, candidates: list[int]) -> list[int]:
    """``candidates`` best first by the ``quantile`` of the trees' predicted
    log speedups (``tree_gains``: trees x classes, one region)."""
    q = np.quantile(tree_gains, quantile, axis=0)
    return sorted(candidates, key=lambda c: -q[c])


# --------------------------------------------------------------- the features

def read_labels(labels: Path) -> list[dict]:
    """The rows of ``labels/labels.jsonl``, or of the committed
    ``labels.jsonl.gz`` (``heads/openmp/labels``)."""
    if (labels / "labels.jsonl").is_file():
        return read_rows(labels / "labels.jsonl")
    if (labels / "labels.jsonl.gz").is_file():
        with gzip.open(labels / "labels.jsonl.gz", "rt") as f:
            return [json.loads(line) for line in f if line.strip()]
    return []


def load_labels(labels: Path, held_out: list[Path] = (), sizes: set[str] | None = None
                ) -> list[dict]:
    """The rows of ``labels`` and of each ``held_out`` folder (those marked
    ``"held_out": true``, in memory only), of ``sizes`` (None: all).
    ValueError where a held-out folder was measured with another compiler,
    core count or protocol, or labels a program another folder labels."""
    def facts(folder: Path) -> dict:
        meta = folder / "meta.json"
        m = json.loads(meta.read_text()) if meta.is_file() else {}
        return {"cc_version": m.get("cc_version"), "cores": m.get("cores"),
                **{key: (m.get("protocol") or {}).get(key) for key in MERGE_KEYS}}

    rows = read_labels(Path(labels))
    seen = {r["program"]: Path(labels) for r in rows}
    for folder in map(Path, held_out):
        more = read_labels(folder)
        if not more:
            raise ValueError(f"{folder}: no labels")
        for key, a in facts(Path(labels)).items():
            if facts(folder)[key] != a:
                raise ValueError(f"{folder} was measured with {key} "
                                 f"{facts(folder)[key]!r}, {labels} with {a!r}: not comparable")
        names = {r["program"] for r in more}
        clash = sorted(n for n in names if n in seen)
        if clash:
            raise ValueError(f"{folder} labels {', '.join(clash[:5])}, which "
                             f"{seen[clash[0]]} labels too: held-out programs must be new")
        seen.update(dict.fromkeys(names, folder))
        rows += [{**r, "held_out": True} for r in more]
    return [r for r in rows if sizes is None or r.get("size") in sizes]


def _kernel_index(labels: Path) -> dict | None:
    for path in (labels / "kernels" / "index.json", labels / "kernels-index.json"):
        if path.is_file():
            return json.loads(path.read_text())
    return None


def _program_index(labels: Path | list[Path], work: Path) -> dict:
    """Program name -> Program: PolyBench's, and the generated kernels
    written again into ``work`` from the seed and families the dataset
    recorded (the generator is deterministic). With several folders (the
    labels, then held-out ones), each writes its kernels apart and gives
    only the programs it labels after the first."""
    folders = [Path(labels)] if isinstance(labels, (str, Path)) else list(map(Path, labels))
    progs = {p.name: p for p in polybench_programs()}
    for n, folder in enumerate(folders):
        index = _kernel_index(folder)
        if not index:
            continue
        labelled = None if n == 0 else {r["program"] for r in read_labels(folder)}
        for p in kernel_programs(work / ("kernels" if n == 0 else f"kernels-{n}"),
                                 seed=index.get("seed", 0),
                                 per_family=index.get("per_family"),
                                 families=index.get("families")):
            if labelled is None or p.name in labelled:
                progs[p.name] = p
    return progs


def region_features(table: Table, kinds: list[str], labels: Path | list[Path], cc: str,
                    work: Path) -> dict:
    """kind -> (N, d) rows aligned with ``table.keys`` (``labels``: the
    folder, or the folders, the rows came from); rows a kind cannot
    make (an embedding that failed) are NaN and make that region unusable
    for that kind."""
    progs = _program_index(labels, work)
    missing = sorted({p for p, _, _ in table.keys if p not in progs})
    if missing:
        where = labels if isinstance(labels, (str, Path)) else ", ".join(map(str, labels))
        raise ValueError(f"{where}: labels of programs not found: {', '.join(missing[:5])}")
    builder = Builder(cc, work / "build")
    units = sorted({(p, s) for p, s, _ in table.keys})
    ir, stats = {}, {}
    for prog, size in tqdm(units, desc="region statistics", unit="program", disable=None):
        program = progs[prog]
        text = emit_ir(program.source, cc, builder.base_flags(program, size))
        # the sites with the source's clauses marked, as the driver's head sees them
        ir[(prog, size)] = (program, text, builder.sites(program, size))
        stats[(prog, size)] = region_statistics(text, ir[(prog, size)][2])
    S = np.asarray([stats[(p, s)].get(rid, [np.nan] * len(NAMES)) for p, s, rid in table.keys],
                   dtype=np.float64)
    out = {"statistics": S}
    cache = work / "features"
    if "ir2vec" in kinds:
        texts = {f"{p}|{s}": ("ir", ir[(p, s)][1]) for p, s in units}
        vecs, _ = embed_ir2vec(texts, cache_root=cache)
        dim = len(next(iter(vecs.values()))) if vecs else 0
        out["ir2vec"] = np.hstack([S, np.asarray(
            [vecs.get(f"{p}|{s}", [np.nan] * dim) for p, s, _ in table.keys])])

    models = encoder_model_dirs(kinds, cache)
    if models:
        graphs = {}
        with tempfile.TemporaryDirectory(prefix="mire-omp-train-") as tmp:
            for n, (prog, size) in enumerate(units):
                program = ir[(prog, size)][0]
                bc = Path(tmp) / f"{n}.bc"
                compile_to_ir(program.source, bc, cc, builder.base_flags(program, size))
                graphs[(prog, size)] = build_graph_any(bc)
        for kind, by_unit in embed_graph_sets(graphs, models).items():
            dim = len(next(iter(by_unit.values())).module)
            rows = []
            for prog, size, rid in table.keys:
                sites = ir[(prog, size)][2]
                outlined = next((x.outlined for x in sites if x.kind == "parallel"
                                 and x.id == rid), None)
                fn = by_unit[(prog, size)].functions.get(outlined)
                rows.append(fn if fn is not None else [np.nan] * dim)
            out[kind] = np.hstack([S, np.asarray(rows, dtype=np.float64)])
    return out


# ----------------------------------------------------------------- judging

def judge(table: Table, X: dict, kinds: list[str], quantile: float, min_gain: float,
          trees: int, seeds: int, verify_k: int = 0, threshold: float = KEEP_THRESHOLD,
          default_key: str | None = None) -> dict:
    """Leave one application out: policy -> application -> speedup; and
    under ``"unsafe"``, policy -> how many region choices (over seeds) were
    configurations not known to keep the output (failed, changed it, or
    not timed). With ``verify_k``, also the verified policies (module
    docstring): per forest, and for random orders (:data:`RANDOM_ORDERS`);
    ``default_key``, the runtime's default, is not a candidate."""
    apps = sorted(set(table.apps.tolist()))
    candidates = [c for c, key in enumerate(table.classes) if key != default_key]
    verified = ([f"verified {verify_k}: forest: {k}" for k in kinds]
                + [f"verified {verify_k}: random order"]) if verify_k else []
    result = {"default": {}, "best single": {}, "oracle": {}}
    for k in kinds:
        result[f"forest: {k}"] = {}
    for name in verified:
        result[name] = {}
    unsafe = dict.fromkeys(result, 0)
    for app in apps:
        test, train = table.split(app)

        def app_speedup(chosen, policy):
            unsafe[policy] += int(sum(c is not None and table.unsafe[i, c]
                                      for i, c in zip(test, chosen)))
            return geomean(list(table.program_speedups(test, chosen).values()))
        result["default"][app] = 1.0
        best = [int(table.Y[i].argmax()) if table.Y[i].max() > 0 else None for i in test]
        result["oracle"][app] = app_speedup(best, "oracle")
        # each training application weighs the same, however many regions it has
        weights = np.asarray([1.0 / np.sum(table.apps[train] == a) for a in table.apps[train]])
        single = int((table.Y[train] * weights[:, None]).sum(axis=0).argmax())
        result["best single"][app] = app_speedup([single] * len(test), "best single")
        def verified_speedup(orders: list[list[int]]) -> float:
            picks = [verify(table, i, order, verify_k, threshold) for i, order in zip(test, orders)]
            return geomean(list(table.program_speedups(
                test, [c for c, _ in picks], [r for _, r in picks]).values()))
        for k in kinds:
            ok_train = train[np.all(np.isfinite(X[k][train]), axis=1)]
            speeds, verified_speeds = [], []
            for seed in range(seeds):
                model = fit_forest(X[k][ok_train], table.Y[ok_train],
                                   ForestConfig(trees=trees, seed=seed))
                chosen, orders = [], []
                for i in test:
                    if not np.all(np.isfinite(X[k][i])):     # no features: the default
                        chosen.append(None)
                        orders.append([])
                        continue
                    G = tree_predictions(model, X[k][i:i + 1])
                    chosen.append(choose(G, quantile, min_gain)[0][0])
                    orders.append(forest_order(G[0], quantile, candidates))
                speeds.append(app_speedup(chosen, f"forest: {k}"))
                if verify_k:
                    verified_speeds.append(verified_speedup(orders))
            result[f"forest: {k}"][app] = geomean(speeds)
            if verify_k:
                result[f"verified {verify_k}: forest: {k}"][app] = geomean(verified_speeds)
        if verify_k:
            rng = np.random.default_rng(0)
            result[f"verified {verify_k}: random order"][app] = geomean([
                verified_speedup([list(rng.permutation(candidates)) for _ in test])
                for _ in range(RANDOM_ORDERS)])
    result["unsafe"] = unsafe
    return result


def gate_sweep(table: Table, X: np.ndarray, quantile: float, thresholds: list[float],
               trees: int, seeds: int) -> dict[float, dict[str, float | None]]:
    """Leave one application out (:meth:`Table.split`) for every gate
    threshold at once: threshold -> application -> its speedup with the
    decisions the forest's gate (:func:`mirecc.learn.forest.choose`
    with ``min_gain`` = the threshold) lets through, as :func:`judge`
    computes it (the geomean over seeds of the geomean over its programs and
    sizes), or None where no seed applied a decision. ``X``: one feature
    set's rows; a region without features keeps the default."""
    out = {float(t): {} for t in thresholds}
    for app in sorted(set(table.apps.tolist())):
        test, train = table.split(app)
        ok_train = train[np.all(np.isfinite(X[train]), axis=1)]
        ok_test = [n for n, i in enumerate(test) if np.all(np.isfinite(X[i]))]
        speeds = {t: [] for t in out}
        applied = dict.fromkeys(out, False)
        for seed in range(seeds):
            model = fit_forest(X[ok_train], table.Y[ok_train], ForestConfig(trees=trees, seed=seed))
            G = tree_predictions(model, X[test[ok_test]]) if ok_test else None
            for t in out:
                chosen = [None] * len(test)
                if G is not None:
                    for n, (c, _, _) in zip(ok_test, choose(G, quantile, t)):
                        chosen[n] = c
                applied[t] |= any(c is not None for c in chosen)
                speeds[t].append(geomean(list(table.program_speedups(test, chosen).values())))
        for t in out:
            out[t][app] = geomean(speeds[t]) if applied[t] else None
    return out


def gate(table: Table, X: np.ndarray, quantile: float, thresholds: list[float], before: float,
         trees: int, seeds: int) -> dict:
    """The ``"gate"`` entry of metrics.json (:func:`mirecc.learn.gates.gate_document`)
    from :func:`gate_sweep`: ``before``, the threshold the calibration
    replaces, is swept too."""
    thresholds = sorted({float(t) for t in thresholds} | {float(before)})
    sweep = gate_sweep(table, X, quantile, thresholds, trees, seeds)
    rows = [gate_row(t, sweep[t]) for t in thresholds]
    chosen = calibrate(rows)
    apps = sorted(set(table.apps.tolist()))
    held = [a for a in apps if a != table.group_of[a]]
    protocol = (f"leave one application out over {len(apps)} applications ({len(held)} of "
                "them programs outside the training labels, each held out with its whole "
                f"family), quantile {quantile}, {seeds} forest seeds of {trees} trees")
    return gate_document(protocol, "application", before, rows, chosen,
                         None if chosen else refusal_reason(rows, "application"))


def summarize(result: dict, table: Table) -> dict:
    oracle_ = result["oracle"]
    out = {}
    for policy, per in result.items():
        if policy == "unsafe":
            continue
        apps = sorted(per)
        share = {a: per[a] / oracle_[a] for a in apps}
        poly = [a for a in apps if a not in table.kernel_apps]
        out[policy] = {
            "geomean": geomean([per[a] for a in apps]),
            "geomean_polybench": geomean([per[a] for a in poly]),
            "at_0.9_oracle": sum(share[a] >= 0.9 for a in apps),
            "at_0.9_oracle_polybench": sum(share[a] >= 0.9 for a in poly),
            "slower_than_0.95": sum(per[a] < 0.95 for a in apps),
            "unsafe_choices": result["unsafe"][policy],
            "applications": len(apps), "polybench": len(poly),
            "per": per, "share": share}
    return out


def report(summary: dict, meta: dict) -> str:
    policies = list(summary)
    apps = sorted(summary["default"]["per"])
    lines = ["# OpenMP head: leave one application out", "",
             f"- labels: {meta['labels']}, sizes {meta['sizes']} ({meta['regions']} regions of "
             "race-free programs, "
             f"{meta['applications']} applications: PolyBench programs, and generated "
             f"families as one application each); {meta['classes']} configurations",
             f"- forest: {meta['trees']} trees, {meta['seeds']} seeds averaged, acts where the "
             f"{meta['quantile']} quantile of its trees promises > {math.exp(meta['min_gain']):.3f}x",
             "- speedup: over the runtime's default (all cores, static), the program's kernel "
             "time; a configuration that failed or changed the output counts as 0.5x",
             *([f"- verified K: per region the first {meta['verify']} configurations in the "
                "order (the forest's trees' quantile, best first; random: mean of "
                f"{RANDOM_ORDERS} orders) measured against the default, one kept where it beats the best so far (median and minimum, slowest run, "
                f"by more than {meta['threshold']:.0%} and the default's spread); judged "
                "per round on a tune that did not measure that round, the median over "
                "rounds"] if meta.get("verify") else []), "",
             "| policy | geomean | PolyBench geomean | >= 0.9 oracle | PolyBench >= 0.9 "
             "| slower than 0.95x | output not known kept |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in policies:
        s = summary[p]
        lines.append(f"| {p} | {s['geomean']:.3f} | {s['geomean_polybench'] or 0:.3f} | "
                     f"{s['at_0.9_oracle']}/{s['applications']} | "
                     f"{s['at_0.9_oracle_polybench']}/{s['polybench']} | "
                     f"{s['slower_than_0.95']} | {s['unsafe_choices']} |")
    lines += ["", "Per application (speedup over the default):", "",
              "| application | " + " | ".join(policies) + " |",
              "|---|" + "---:|" * len(policies)]
    for a in apps:
        lines.append(f"| {a} | " + " | ".join(f"{summary[p]['per'][a]:.3f}" for p in policies)
                     + " |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path, verify_k: int) -> None:
    """Per application, the speedup of the oracle, the best single
    configuration, mirecc's forest (guessing, and verified) and a verified
    random order, on a log scale, with the 0.95x line; nothing without
    matplotlib."""
    plt = pyplot()
    if plt is None:
        return
    guess = "forest: encoder" if "forest: encoder" in summary else next(
        (p for p in summary if p.startswith("forest: ")), None)
    policies = [p for p in ("oracle", "best single", guess, f"verified {verify_k}: {guess}",
                            f"verified {verify_k}: random order") if p in summary]
    apps = sorted(summary["oracle"]["per"])
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(apps)), 5.5))
    width = 0.8 / len(policies)
    for k, p in enumerate(policies):     # bars up (faster) or down (slower) from 1
        ax.bar(np.arange(len(apps)) + k * width, [summary[p]["per"][a] - 1 for a in apps],
               width, bottom=1,
               label=f"{p} ({summary[p]['at_0.9_oracle']}/{len(apps)} at 0.9 of the oracle, "
                     f"{summary[p]['slower_than_0.95']} below 0.95x)")
    ax.set_yscale("log")
    values = [summary[p]["per"][a] for p in policies for a in apps] + [0.95, 1.0]
    low, high = min(values) / 1.1, max(values) * 1.1
    ticks = [t for t in (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12) if low <= t <= high]
    ax.set_ylim(low, high)
    ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(0.95, color="red", linestyle=":", linewidth=1)
    ax.set_xticks(np.arange(len(apps)) + 0.4 - width / 2, apps, rotation=40, ha="right",
                  fontsize=8)
    ax.set_ylabel("speedup over the runtime's default (log)")
    ax.set_title("OpenMP, leave one application out")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2)
    save(fig, path)


# ------------------------------------------------------------------ the head

def write_head(table: Table, X: np.ndarray, kind: str, args, directory: Path,
               cv: dict, gate: dict | None = None, trained_on: list[str] | None = None
               ) -> None:
    """Fit ``kind`` on every row of ``table`` and write ``directory``. With
    ``gate`` (:func:`gate`), its chosen threshold is the spec's
    ``min_gain``; where it chose none, ``args.min_gain`` stays and the spec
    says ``refuse_forcing``: the driver records decisions, applies none."""
    ok = np.all(np.isfinite(X), axis=1)
    model = fit_forest(X[ok], table.Y[ok], ForestConfig(trees=args.trees, seed=0))

    spec = {"task": "openmp", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version,
            "features": SHIPPABLE[kind], "region_statistics": NAMES,
            "classes": table.classes, "cores": os.cpu_count(),
            "quantile": args.quantile,
            "min_gain": (gate["chosen"] if gate and gate["chosen"] is not None
                         else args.min_gain),
            **({"refuse_forcing": gate["refuse_forcing"]}
               if gate and gate.get("refuse_forcing") else {}),
            "metrics": "metrics.json"}
    header = ("# The OpenMP head: a forest over region features predicting each "
              "configuration's log speedup\n# over the runtime's default. Written by "
              "mire omp-train --write-head " + kind + "; see mirecc/tasks/openmp/head.py.\n")
    metrics = {"feature_set": kind, "rows": int(ok.sum()), "cv": cv,
               **({"trained_on": trained_on} if trained_on else {}),
               **({"gate": gate} if gate else {})}
    # the committed labels (labels/, labels-full/ of the full space,
    # labels-heldout/ of the gate's held-out programs) live in the head's
    # folder: kept
    kept = {f"{folder.name}/{p.name}": p.read_bytes()
            for folder in sorted(directory.glob("labels*")) if folder.is_dir()
            for p in sorted(folder.glob("*")) if p.is_file()}
    replace_dir(directory, {**kept,
        "spec.yaml": (header + yaml.safe_dump(spec, sort_keys=False)).encode(),
        "head.onnx": onnx_bytes(model, X.shape[1]),
        "metrics.json": (json.dumps(metrics, indent=1) + "\n").encode()})


def add_bench_arguments(p) -> None:
    """``mire bench openmp`` (and ``tune --tune-task openmp``): the labels."""
    p.add_argument("--omp-labels", default=".work/omp-labels",
                   help="openmp: the dataset directory of mire omp-data (default: %(default)s)")


def run_bench(args) -> int:
    """``mire bench openmp``: the judging of :func:`run`, with its defaults,
    written to ``--out``; no head is written."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    train_args = p.parse_args(["--labels", args.omp_labels])
    if args.out != "mirecc-bench":
        train_args.out = args.out
    return run(train_args)


def gate_table(doc: dict) -> str:
    """The sweep of a ``"gate"`` document as a markdown table."""
    lines = [f"Apply gate, {doc['protocol']}:", "",
             f"| min_gain | applied | geomean | slowest | below {FLOOR} |",
             "|---:|---:|---:|---:|---:|"]
    for r in doc["sweep"]:
        mark = " (before)" if r["threshold"] == doc["before"] else ""
        mark += " (chosen)" if r["threshold"] == doc["chosen"] else ""
        lines.append(f"| {r['threshold']:g}{mark} | {r['applied']}/{r['applications']} | "
                     f"{r['geomean']:.3f} | {r['slowest']:.3f} | {r[f'below_{FLOOR}']} |")
    lines.append("")
    lines.append(f"refuse forcing: {doc['refuse_forcing']}" if doc["refuse_forcing"]
                 else f"chosen min_gain: {doc['chosen']:g}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    labels = Path(args.labels)
    held_out = [Path(d) for d in getattr(args, "held_out", None) or []]
    try:
        rows = load_labels(labels, held_out,
                           set(args.sizes.split(",")) if args.sizes else None)
    except (OSError, ValueError) as exc:
        print(f"mire omp-train: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"mire omp-train: {labels}: no labels (run mire omp-data first)",
              file=sys.stderr)
        return 2
    table = Table(rows)
    kinds = [k.strip() for k in args.features.split(",") if k.strip()]
    bad = [k for k in kinds if k not in FEATURE_SETS]
    if bad:
        print(f"mire omp-train: unknown feature set {bad[0]!r} (known: "
              f"{', '.join(FEATURE_SETS)})", file=sys.stderr)
        return 2
    if args.write_head and args.write_head not in SHIPPABLE:
        print(f"mire omp-train: --write-head takes {' or '.join(SHIPPABLE)} (the features "
              "the driver computes)", file=sys.stderr)
        return 2
    try:
        X = region_features(table, sorted(set(kinds) | ({args.write_head} - {None})),
                            [labels, *held_out], args.cc, Path(args.work))
    except ValueError as exc:
        print(f"mire omp-train: {exc}", file=sys.stderr)
        return 2
    default_key = default_config_key(labels)
    if args.verify and default_key is None:
        print(f"mire omp-train: {labels}/meta.json does not give the machine's cores (the "
              "runtime's default, which --verify measures against)", file=sys.stderr)
        return 2
    # the apply gate of the head written: calibrated first, the forests then
    # judged at the threshold it ships
    gate_doc, min_gain = None, args.min_gain
    if args.write_head:
        try:
            thresholds = [float(t) for t in args.gate_thresholds.split(",") if t.strip()]
        except ValueError:
            print(f"mire omp-train: --gate-thresholds {args.gate_thresholds!r}: not numbers",
                  file=sys.stderr)
            return 2
        gate_doc = gate(table, X[args.write_head], args.quantile, thresholds, args.min_gain,
                        args.trees, args.seeds)
        if gate_doc["chosen"] is not None:
            min_gain = gate_doc["chosen"]
    result = judge(table, X, kinds, args.quantile, min_gain, args.trees, args.seeds,
                   args.verify, args.threshold, default_key)
    summary = summarize(result, table)
    meta = {"labels": ", ".join(map(str, [labels, *held_out])) + (
                " (held out: each program its own application)" if held_out else ""),
            "sizes": args.sizes or "all", "regions": len(table.keys),
            "applications": len(set(table.apps.tolist())), "classes": len(table.classes),
            "trees": args.trees, "seeds": args.seeds, "quantile": args.quantile,
            "min_gain": min_gain, "cc": args.cc, "verify": args.verify,
            "threshold": args.threshold}
    text = report(summary, meta) + ("\n" + gate_table(gate_doc) if gate_doc else "")
    out = Path(args.out or labels)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "omp-train.md", text.encode())
    atomic_write_bytes(out / "omp-train.json",
                       json.dumps({"meta": meta, "summary": summary,
                                   **({"gate": gate_doc} if gate_doc else {})},
                                  indent=1).encode())
    plot(summary, out / "omp-train.png", args.verify)
    print(text)
    if args.write_head:
        cv = summary.get(f"forest: {args.write_head}", {})
        write_head(table, X[args.write_head], args.write_head, args, args.head_dir, cv,
                   gate=gate_doc, trained_on=[str(labels), *map(str, held_out)])
        print(f"wrote {args.head_dir}" + (f" (forcing refused: {gate_doc['refuse_forcing']})"
                                          if gate_doc["refuse_forcing"] else ""))
    return 0
