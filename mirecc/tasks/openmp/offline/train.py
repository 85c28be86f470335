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
  (:mod:`mirecc.tasks.openmp.features`); IR2Vec (the module's vector, PyPI
  ``ir2vec``); a random-init encoder's and mirecc's encoder's embedding of
  the region's outlined function (each with the statistics). The forest
  acts only where a low quantile of its trees still promises ``min_gain``
  (:func:`mirecc.tasks.loop_vectorize.head.choose`), else the default stays;
* ``verified``, per forest and for a random order: what ``mire tune`` does
  where a guess cannot be trusted. The region's first ``--verify``
  configurations in the forest's order (its trees' ``quantile``, best
  first; no gate) are measured against the default, and one is kept only
  where it beats the best so far as the tune's rule says
  (:func:`mirecc.tune.beats`: median and minimum beyond the threshold and
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
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from mirecc.tasks.openmp.offline.dataset import combine, geomean, oracle
from mirecc.tasks.loop_vectorize.offline.dataset import read_rows
from mirecc.tune import KEEP_THRESHOLD

#: the log speedup a configuration that failed or changed the output counts as
BAD = math.log(0.5)
FEATURE_SETS = ("statistics", "ir2vec", "random-init", "encoder")
#: feature sets the driver can compute (IR2Vec is not in the driver)
SHIPPABLE = {"statistics": ["region_statistics"],
             "encoder": ["region_statistics", "function_embedding"]}
DEFAULT_LABELS = Path(".work/omp-labels")
#: random orders averaged for the verified policy's random baseline
RANDOM_ORDERS = 20


def add_arguments(p) -> None:
    p.add_argument("--labels", default=str(DEFAULT_LABELS),
                   help="the dataset directory of mire omp-data (default: %(default)s)")
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
                   help="log speedup the quantile must promise (default: %(default)s)")
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
    speedups), and the timed rounds behind them."""

    def __init__(self, rows: list[dict]):
        o = oracle(rows)
        # (program, size, region, configuration) -> (default's, its) kernel
        # times, round by round (both timed in the same shuffled rounds)
        timed = {(r["program"], r["size"], r["region"], r["config_key"]):
                 ((r.get("default") or {}).get("times_s") or [], r.get("times_s") or [])
                 for r in rows if "config_key" in r}
        suites = {r["program"]: (r.get("suite"), r.get("group")) for r in rows}
        configs = sorted({r["config_key"] for r in rows if "config_key" in r})
        self.classes = configs
        self.keys, self.apps, self.Y, self.parents = [], [], [], {}
        self.unsafe = []        # (N, classes): not a candidate (failed, output changed, not timed)
        self.rounds = []        # per region, per class: (default's times, its times) or None
        for (prog, size), p in sorted(o["per"].items()):
            if p["racy"] or not p["regions"]:
                continue
            suite, group = suites.get(prog, (None, None))
            app = f"{group} (family)" if suite == "kernels" else prog
            for rid, g in p["regions"].items():
                if g["default_s"] is None:
                    continue
                self.keys.append((prog, size, rid))
                self.apps.append(app)
                self.Y.append([math.log(g["by_config"][c]) if c in g["by_config"] else BAD
                               for c in configs])
                self.unsafe.append([c not in g["by_config"] for c in configs])
                self.rounds.append([_paired(*timed[(prog, size, rid, c)])
                                    if c in g["by_config"] else None for c in configs])
                self.parents[(prog, size, rid)] = p["parents"].get(rid)
        self.Y = np.asarray(self.Y, dtype=np.float64).reshape(len(self.keys), len(configs))
        self.unsafe = np.asarray(self.unsafe, dtype=bool).reshape(self.Y.shape)
        self.apps = np.asarray(self.apps)

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
    best so far (:func:`mirecc.tune.beats`). Returns (the class most often kept, or
    None for the default; the speedup)."""
    import statistics

    from mirecc.tune import beats

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
    import gzip

    if (labels / "labels.jsonl").is_file():
        return read_rows(labels / "labels.jsonl")
    if (labels / "labels.jsonl.gz").is_file():
        with gzip.open(labels / "labels.jsonl.gz", "rt") as f:
            return [json.loads(line) for line in f if line.strip()]
    return []


def _kernel_index(labels: Path) -> dict | None:
    for path in (labels / "kernels" / "index.json", labels / "kernels-index.json"):
        if path.is_file():
            return json.loads(path.read_text())
    return None


def _program_index(labels: Path, work: Path) -> dict:
    """Program name -> Program: PolyBench's, and the generated kernels
    written again into ``work`` from the seed and families the dataset
    recorded (the generator is deterministic)."""
    from mirecc.tasks.openmp.offline.programs import kernel_programs, polybench_programs

    progs = {p.name: p for p in polybench_programs()}
    index = _kernel_index(labels)
    if index:
        for p in kernel_programs(work / "kernels", seed=index.get("seed", 0),
                                 per_family=index.get("per_family"),
                                 families=index.get("families")):
            progs[p.name] = p
    return progs


def region_features(table: Table, kinds: list[str], labels: Path, cc: str,
                    work: Path) -> dict:
    """kind -> (N, d) rows aligned with ``table.keys``; rows a kind cannot
    make (an embedding that failed) are NaN and make that region unusable
    for that kind."""
    import tempfile

    from tqdm import tqdm

    from mirecc.tasks.openmp.features import NAMES, region_statistics
    from mirecc.tasks.openmp.offline.dataset import Builder
    from mirecc.tasks.openmp.sites import emit_ir

    progs = _program_index(labels, work)
    missing = sorted({p for p, _, _ in table.keys if p not in progs})
    if missing:
        raise ValueError(f"{labels}: labels of programs not found: {', '.join(missing[:5])}")
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
        from mirecc.tasks.opencl.offline.features import embed_ir2vec
        texts = {f"{p}|{s}": ("ir", ir[(p, s)][1]) for p, s in units}
        vecs, _ = embed_ir2vec(texts, cache_root=cache)
        dim = len(next(iter(vecs.values()))) if vecs else 0
        out["ir2vec"] = np.hstack([S, np.asarray(
            [vecs.get(f"{p}|{s}", [np.nan] * dim) for p, s, _ in table.keys])])
    from mirecc.tasks.opencl.offline.features import embed_graph_sets, encoder_model_dirs

    models = encoder_model_dirs(kinds, cache)
    if models:
        from mirecc.encoder.runtime import compile_to_ir
        from mirecc.graph import build_graph_any
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
    from mirecc.tasks.loop_vectorize.forest import ForestConfig, fit_forest, tree_predictions
    from mirecc.tasks.loop_vectorize.head import choose

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
        test = np.flatnonzero(table.apps == app)
        train = np.flatnonzero(table.apps != app)

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


def summarize(result: dict, table: Table) -> dict:
    oracle_ = result["oracle"]
    out = {}
    for policy, per in result.items():
        if policy == "unsafe":
            continue
        apps = sorted(per)
        share = {a: per[a] / oracle_[a] for a in apps}
        poly = [a for a in apps if not a.endswith("(family)")]
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
    from mirecc.plots import pyplot, save

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
               cv: dict) -> None:
    import yaml

    from mirecc.fsutil import replace_dir
    from mirecc.tasks.loop_vectorize.forest import ForestConfig, fit_forest, onnx_bytes
    from mirecc.tasks.openmp.features import NAMES

    ok = np.all(np.isfinite(X), axis=1)
    model = fit_forest(X[ok], table.Y[ok], ForestConfig(trees=args.trees, seed=0))
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.model import load_model

    spec = {"task": "openmp", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version,
            "features": SHIPPABLE[kind], "region_statistics": NAMES,
            "classes": table.classes, "cores": os.cpu_count(),
            "quantile": args.quantile, "min_gain": args.min_gain,
            "metrics": "metrics.json"}
    header = ("# The OpenMP head: a forest over region features predicting each "
              "configuration's log speedup\n# over the runtime's default. Written by "
              "mire omp-train --write-head " + kind + "; see mirecc/tasks/openmp/head.py.\n")
    metrics = {"feature_set": kind, "rows": int(ok.sum()), "cv": cv}
    # the committed labels (labels/, and labels-full/ of the full space) live
    # in the head's folder: kept
    kept = {f"{folder.name}/{p.name}": p.read_bytes()
            for folder in (directory / "labels", directory / "labels-full") if folder.is_dir()
            for p in sorted(folder.glob("*")) if p.is_file()}
    replace_dir(directory, {**kept,
        "spec.yaml": (header + yaml.safe_dump(spec, sort_keys=False)).encode(),
        "head.onnx": onnx_bytes(model, X.shape[1]),
        "metrics.json": (json.dumps(metrics, indent=1) + "\n").encode()})


def run_bench(args) -> int:
    """``mire bench openmp``: the judging of :func:`run`, with its defaults,
    written to ``--out``; no head is written."""
    import argparse

    p = argparse.ArgumentParser()
    add_arguments(p)
    train_args = p.parse_args(["--labels", args.omp_labels])
    if args.out != "mirecc-bench":
        train_args.out = args.out
    return run(train_args)


def run(args) -> int:
    labels = Path(args.labels)
    rows = read_labels(labels)
    if args.sizes:
        sizes = set(args.sizes.split(","))
        rows = [r for r in rows if r.get("size") in sizes]
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
        X = region_features(table, sorted(set(kinds) | ({args.write_head} - {None})), labels,
                            args.cc, Path(args.work))
    except ValueError as exc:
        print(f"mire omp-train: {exc}", file=sys.stderr)
        return 2
    from mirecc.tasks.openmp.offline.tune_bench import default_config_key
    default_key = default_config_key(labels)
    if args.verify and default_key is None:
        print(f"mire omp-train: {labels}/meta.json does not give the machine's cores (the "
              "runtime's default, which --verify measures against)", file=sys.stderr)
        return 2
    result = judge(table, X, kinds, args.quantile, args.min_gain, args.trees, args.seeds,
                   args.verify, args.threshold, default_key)
    summary = summarize(result, table)
    meta = {"labels": str(labels), "sizes": args.sizes or "all", "regions": len(table.keys),
            "applications": len(set(table.apps.tolist())), "classes": len(table.classes),
            "trees": args.trees, "seeds": args.seeds, "quantile": args.quantile,
            "min_gain": args.min_gain, "cc": args.cc, "verify": args.verify,
            "threshold": args.threshold}
    text = report(summary, meta)
    out = Path(args.out or labels)
    from mirecc.fsutil import atomic_write_bytes
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "omp-train.md", text.encode())
    atomic_write_bytes(out / "omp-train.json",
                       json.dumps({"meta": meta, "summary": summary}, indent=1).encode())
    plot(summary, out / "omp-train.png", args.verify)
    print(text)
    if args.write_head:
        cv = summary.get(f"forest: {args.write_head}", {})
        write_head(table, X[args.write_head], args.write_head, args, args.head_dir, cv)
        print(f"wrote {args.head_dir}")
    return 0
