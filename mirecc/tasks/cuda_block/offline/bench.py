"""``mire bench cuda``: block-shape rankings, leave one program out, replayed
on the labels timed on a lent H100 (``heads/cuda-block/labels``).

    mire bench cuda [--out mirecc-bench] [--cuda-write-head heads/cuda-block]

A case is a (program, input size) with its source's shape and at least one
other timed; every kernel and size of a program is held out together.  The
rankings, side by side on the same folds:

- the source's shape; the best fixed shape (the best geomean over the
  training programs, as ``cuda_label_baselines`` picks it);
- a forest of regression trees over (source, shape) rows predicting the log
  speedup over the source's shape, on four feature sets: kernel statistics
  (:mod:`..features`), IR2Vec, a random-init encoder and mirecc's encoder
  (the device module's embedding, reduced to :data:`PCA` components fitted
  on the training programs), each with the shape's own features; and the
  statistics with the encoder's components added.

Each guesses (its first shape, or the source's where no shape is predicted
to gain) and is verified with K = 1, 2, 3 candidates: the first K shapes
measured beside the source's, the fastest correct one kept (a wrong output
is seen by the check, so never kept).  Metrics per ranking: error (1 - best
time / chosen time, mean over cases), geomean speedup over the source's
shape, share of the oracle's log gain, cases below 0.95x, wrong outputs
(a guessed shape that changed an output or failed in the labels).

The statistics forest's apply gate (:mod:`mirecc.learn.gates`) is calibrated
on the same folds: for each threshold of :data:`THRESHOLDS` on the trees'
quantile, each held-out program runs with the guesses it lets through (its
slowest size counted, a guessed shape that changed an output or failed as
:data:`WRONG`, a program with none let through 1.0x); the admissible
threshold (no program below :data:`mirecc.learn.gates.FLOOR`, something
applied) with the best geomean is the head's ``min_gain``, and with none
admissible the head ships ``refuse_forcing``.  The table's guess rows use
:data:`MIN_GAIN` (the gate before calibration); the ``calibrated gate`` row
guesses with the shipped threshold.

``--cuda-write-head`` trains the statistics forest on every case and writes
the head with the calibrated gate (its sweep in metrics.json's ``"gate"``):
the driver's head reads no embedding, as the table shows none adds to the
statistics.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from mirecc.frontend import nvcc
from mirecc.frontend.compiler import find_compiler
from mirecc.frontend.launches import HEADER_DIR, scan_source
from mirecc.frontend.nvcc import kernel_names, source_name
from mirecc.learn import rankbench
from mirecc.learn.adapter import embedding_block, fit_adapter, split_kind
from mirecc.learn.datasets import default_root
from mirecc.learn.embeddings import embedding_of, representation_vectors
from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions, write_forest_head
from mirecc.learn.gates import gate_document
from mirecc.learn.judge import Judged, complete, training_programs
from mirecc.taskapi.config import load_config
from mirecc.taskapi.context import device_context
from mirecc.tasks.cuda_block import features as F
from mirecc.tasks.cuda_block import launches
from mirecc.tasks.cuda_block.head import INPUTS, TASK, program_key
from mirecc.tasks.cuda_block.offline import cuda_labels as cl
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "cuda-block" / "labels"
#: the other suites' labels (``suite_labels run``) and the machine they were timed on
SUITE_FILE, SUITE_MACHINE = "suites.jsonl.gz", "suites-machine.json.gz"
LABEL_FILES = ("h100-polybench.jsonl.gz", "h100-polybench-larger.jsonl.gz",
               "h100-own-kernels.jsonl.gz", SUITE_FILE)
#: where ``suite_labels prepare`` put the other suites' programs (their
#: sources: a suite case's device IR and plan)
SUITES = ROOT / ".work" / "cuda-suites"
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
FEATURE_SETS = ("statistics", "ir2vec", "random-init", "encoder", "statistics+encoder")
#: principal components of an embedding the forest reads
PCA = 6
KS = (1, 2, 3)
#: the forest (ExtraTrees) and the head's rule: apply a shape only where the
#: trees' QUANTILE predicts more than MIN_GAIN (log speedup); MIN_GAIN is the
#: gate before calibration, the shipped one is calibrated (:func:`gate_sweep`)
TREES, LEAF, QUANTILE, MIN_GAIN = 100, 3, 0.5, 0.05
#: the apply thresholds (log gain of the trees' quantile) the gate sweep tries
THRESHOLDS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7)
#: a held-out guess that changed an output or failed counts as this speedup
WRONG = 0.5


@dataclass
class Case:
    program: str
    size: str
    source: tuple[int, int]                 # the source's block (its first kernel's)
    speed: dict[tuple[int, int], float]     # shape -> speedup over the source's (correct)
    bad: set = field(default_factory=set)   # shapes that changed an output or failed
    feats: dict = field(default_factory=dict)
    ir: str = ""
    key: str = ""                           # the head's name for the program
    kernels: tuple = ()                     # the tunable kernels' symbols in the IR
    suite: str = ""                         # another suite's program (suite_labels)
    blocks: dict = field(default_factory=dict)  # suite: shape -> its first kernel's block

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])


def _first_block(text: str) -> tuple[int, int]:
    """The first kernel's block of a label's ``block`` ("32x8", "1:256x1 2:32x8")."""
    x, _, y = text.split()[0].rpartition(":")[2].partition("x")
    return int(x), int(y or 1)


def suite_machine(labels: Path) -> str:
    """The GPU the other suites' labels were timed on (``nvidia-smi``'s name
    in ``suite_labels run``'s machine file, gzipped beside them)."""
    try:
        with gzip.open(labels / SUITE_MACHINE, "rt") as fh:
            smi = json.load(fh)["machine"]["nvidia_smi"]
        return smi.splitlines()[1].split(",")[0].strip()
    except (OSError, KeyError, IndexError, ValueError):
        return "GPU not recorded"


def read_labels(paths) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for path in paths:
        with gzip.open(path, "rt") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        for r in rows:
            groups.setdefault((r["program"], r["size"]), []).append(r)
    return groups


def cases_of(groups) -> list[Case]:
    """The (program, size) groups with the source's shape and another timed;
    shapes are the paper's (x, y) as the labeller named them (applied with
    the launch's fixed axis kept)."""
    out = []
    for (program, size), runs in sorted(groups.items()):
        table, src = cl.classify(runs)
        if src not in table or table[src]["bad"] or not table[src]["median"] or len(table) < 2:
            continue
        first = next(r for r in runs if r["shape"] == src and r.get("block"))
        case = Case(program, size, _first_block(first["block"]), {},
                    suite=first.get("suite") or "")
        names = {r["shape"]: (r["shape_x"], r["shape_y"]) for r in runs
                 if r.get("shape_x") and r.get("shape_y")}
        if case.suite:     # the blocks the knobs gave (the labeller's, as the head's)
            case.blocks = {names[r["shape"]]: _first_block(r["block"]) for r in runs
                           if r.get("block") and r["shape"] != src}
        for label, t in table.items():
            if label == src or label not in names:
                continue
            if t["bad"] or not t["median"]:
                case.bad.add(names[label])
            else:
                case.speed[names[label]] = table[src]["median"] / t["median"]
        if case.speed or case.bad:
            out.append(case)
    return out


# ------------------------------------------------------------------ device IR

def _suite_program(case: Case, suites: Path) -> tuple[str, list[str], str | None]:
    """A suite case's CUDA source, flags and the nvcc it was built with, from
    ``suite_labels prepare``'s bundle."""
    plan = suites / "plan.json"
    if not plan.is_file():
        raise SystemExit(f"mire bench cuda: {plan}: missing; the labels of {case.program} "
                         f"({case.suite}) need its sources: python -m "
                         "mirecc.tasks.cuda_block.offline.suite_labels prepare --out "
                         f"{suites} (docs/cuda.md)")
    bundle = json.loads(plan.read_text())
    spec = bundle["programs"][case.program]
    flags = [f if not f.startswith("-I") else "-I" + str(suites / f[2:]) for f in spec["flags"]]
    return (str(suites / spec["cu"]), [f for f in flags if not f.startswith("-arch")],
            bundle.get("nvcc"))


def _device_ir(case: Case, src_root: Path, work: Path,
               suites: Path = SUITES) -> tuple[str, object]:
    """The case's device IR text (cached in ``work``) and its launch plan."""
    where = work / "sources" / f"{case.program}-{case.size}"
    built_with = None
    if case.suite:
        cu, flags, built_with = _suite_program(case, suites)
        args = [*flags, cu, "-c"]
    elif case.program in cl.TUNABLE:
        cu = cl.prepare_build(str(src_root), case.program, case.size, {}, str(where), "define")
        sized = [] if (case.program, case.size) in cl.CUSTOM_SIZES else \
            cl.size_defines(case.program, case.size)
        args = ["-O3", cl.COMPAT_FLAG, *sized, "-I", str(src_root / cl.UTILITIES), cu, "-c"]
    else:
        cu = str(KERNEL_DIR / f"{case.program}.cu")
        args = ["-O3", "-isystem", str(HEADER_DIR), cu, "-c"]
    cmd = nvcc.parse(args)
    plan = launches.plan_source(scan_source(cu, cmd), cmd)
    cached = work / "ir" / f"{case.program}-{case.size}.ll"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mire-cuda-") as tmp:
            compiler = built_with if built_with and os.path.exists(built_with) else \
                nvcc.find_nvcc()
            bc = nvcc.device_ir(cu, cmd, nvcc.toolkit_of(compiler),
                                find_compiler(load_config(), cxx=True),
                                Path(tmp) / "d.bc")
            text = device_context(cu, cmd, bc).ir_text
        cached.write_text(text)
    return cached.read_text(), plan


def attach_features(cases: list[Case], src_root: Path, work: Path,
                    suites: Path = SUITES) -> list[Case]:
    kept = []
    for case in cases:
        case.ir, plan = _device_ir(case, src_root, work, suites)
        try:
            case.feats, tunable = F.plan_features(plan, case.ir)
            case.key = program_key(plan.source, tunable)
            case.kernels = tuple(s for s in kernel_names(case.ir) if source_name(s) in tunable)
        except ValueError as exc:
            print(f"mire bench cuda: {case.program} {case.size}: {exc}; left out",
                  file=sys.stderr)
            continue
        kept.append(case)
    return kept


# ------------------------------------------------------------------ rankings

def applied(case: Case, shape: tuple[int, int]) -> tuple[int, int]:
    """The block ``shape`` gives the case's (first) launch: a y that cannot be
    set stays the source's (a suite case: the block its knob took)."""
    if case.suite and shape in case.blocks:
        return case.blocks[shape]
    return shape[0], shape[1] if case.feats["y_settable"] else case.source[1]


def _rows(cases, case_vectors, blocks_of):
    X, owner, blocks = [], [], []
    for i, c in enumerate(cases):
        for b in blocks_of(c):
            X.append([*case_vectors[i], *F.shape_features(*applied(c, b),
                                                          c.feats["log2_row"])])
            owner.append(i)
            blocks.append(b)
    return np.asarray(X, np.float32), np.asarray(owner), blocks


def case_vectors(cases, kind: str, emb: dict, train_idx, test_idx):
    """Per case, the numbers a ranking of ``kind`` reads (before the shape's)."""
    stats = np.asarray([[c.feats[f] for f in F.SOURCE_FEATURES] for c in cases])
    shape = np.asarray([F.source_shape_features(*c.source) for c in cases])
    name = embedding_of(kind)
    if name is None:
        return np.hstack([stats, shape])
    adapter, base = split_kind(kind)
    out = embedding_block(emb[name], train_idx, test_idx, PCA, adapter)
    return np.hstack([stats, shape, out]) if base.startswith("statistics+") else \
        np.hstack([out, shape])


def fit(X, y, seed=0):
    return fit_forest(X, y, ForestConfig(trees=TREES, min_samples_leaf=LEAF,
                                                         max_features=0.5, seed=seed))


def candidates(case: Case) -> list[tuple[int, int]]:
    """The shapes a held-out case is ranked over: the paper's, each that
    gives a different block of at most 1024 threads, not the source's (a
    suite case: those its knobs took, as the head's ``shape_blocks``)."""
    if case.suite:
        return [s for s in cl.paper_shapes() if s in case.blocks]
    out, seen = [], {case.source}
    for shape in cl.paper_shapes():
        b = applied(case, shape)
        if b[0] * b[1] <= 1024 and b not in seen:
            seen.add(b)
            out.append(shape)
    return out


def rank_forest(cases, kind, emb, held: str, keep: set | None = None):
    """Per held-out case: the candidate blocks best first with the trees'
    quantile prediction (an ``adapter:`` kind: its members'); ``keep``: the
    training programs (default: every other)."""
    train = [i for i, c in enumerate(cases) if c.program != held
             and (keep is None or c.program in keep)]
    test = [i for i, c in enumerate(cases) if c.program == held]
    V = case_vectors(cases, kind, emb, train, test)
    Xtr, own, blocks = _rows([cases[i] for i in train], V[train], lambda c: list(c.speed))
    ytr = np.asarray([math.log(cases[train[o]].speed[b]) for o, b in zip(own, blocks)])
    if split_kind(kind)[0]:
        predictions = fit_adapter(Xtr, ytr).predictions
    else:
        model = fit(Xtr, ytr)
        predictions = lambda X: tree_predictions(model, X)   # noqa: E731
    out = {}
    for i in test:
        c = cases[i]
        cand = candidates(c)
        X, _, blocks = _rows([c], V[[i]], lambda _c: cand)
        q = np.quantile(predictions(X)[:, :, 0], QUANTILE, axis=1)
        order = np.argsort(-q, kind="stable")
        out[i] = [(blocks[j], float(q[j])) for j in order]
    return out


def rank_fixed(cases, held: str):
    """The shapes by geomean speedup over the training programs' cases (a
    shape missing or wrong there counts 1.0), the same order for each case."""
    train = [c for c in cases if c.program != held]
    shapes = cl.paper_shapes()
    score = {s: sum(math.log(c.speed.get(s, 1.0)) for c in train) / len(train) for s in shapes}
    out = {}
    for i, c in enumerate(cases):
        if c.program == held:
            out[i] = sorted(((s, score[s]) for s in candidates(c)), key=lambda t: -t[1])
    return out


def evaluate(cases, emb, kinds=FEATURE_SETS, fraction: float = 1.0,
             draw: int = 0) -> dict[str, dict[int, list]]:
    """Every ranking, leave one program out; ``fraction`` < 1: the forests
    of each fold trained on that share of its training programs."""
    programs = sorted({c.program for c in cases})
    rankings = {name: {} for name in ("fixed shape", *kinds)}
    for n, held in enumerate(programs):
        print(f"\rmire bench cuda: leave one program out {n + 1}/{len(programs)}",
              end="", file=sys.stderr, flush=True)
        rankings["fixed shape"].update(rank_fixed(cases, held))
        keep = training_programs(programs, held, fraction, draw)
        for kind in kinds:
            if embedding_of(kind) is None or embedding_of(kind) in emb:
                rankings[kind].update(rank_forest(cases, kind, emb, held, keep))
    print(file=sys.stderr)
    return complete(rankings, cases)


#: the results' name of the statistics forest's guess with the calibrated gate
GATED = "guess, calibrated gate"


def table(cases, rankings, gate=None) -> tuple[str, dict]:
    """The rankings' table; with ``gate`` (:func:`gate_sweep`'s), the
    statistics forest's guess with the calibrated gate too (:data:`GATED`)."""
    more = {"statistics": {GATED: gated(cases, rankings["statistics"], gate)}} \
        if gate is not None and "statistics" in rankings else None
    return rankbench.table(cases, rankings, KS, "source shape", MIN_GAIN, more=more)


def gate_sweep(cases, ranked: dict, thresholds=THRESHOLDS) -> tuple[list, object, str | None]:
    """:func:`mirecc.learn.rankbench.gate_sweep` of a ranking of shapes: a
    shape that changed an output or failed counts :data:`WRONG`."""
    return rankbench.gate_sweep(cases, ranked, thresholds, WRONG)


def gate_markdown(rows, chosen) -> str:
    return rankbench.gate_markdown(rows, chosen, "a shape", before=MIN_GAIN)


def gated(cases, ranked: dict, gate) -> dict:
    """The statistics forest's guess with the calibrated gate (:func:`gate_sweep`'s
    result): the chosen threshold, or nothing applied where forcing is refused."""
    _, chosen, _ = gate
    return rankbench.judge(cases, ranked, None, chosen.threshold if chosen else math.inf)


def suites_section(cases, rankings: dict, gate) -> str:
    """The other suites' programs alone (their folds are the same: each
    program held out): the rankings' table on their cases, and per program
    the oracle and the statistics forest's guess with the calibrated gate,
    its geomean and worst size; "" where no case is a suite's."""
    index = [i for i, c in enumerate(cases) if c.suite]
    if not index:
        return ""
    sub = [cases[i] for i in index]
    ranked = {name: {j: r[i] for j, i in enumerate(index)} for name, r in rankings.items()}
    text, results = table(sub, ranked, gate)
    guess = results["statistics"].get(GATED) or results["statistics"]["guess"]
    lines = [f"## Other suites' programs ({len(sub)} cases of "
             f"{len({c.program for c in sub})} programs)", "", text, "",
             "| program | suite | sizes | oracle | guess, calibrated gate | its worst size |",
             "|---|---|---:|---:|---:|---:|"]
    for program in sorted({c.program for c in sub}):
        mine = [j for j, c in enumerate(sub) if c.program == program]
        speeds = [guess["speeds"][j] for j in mine]
        oracle = math.exp(sum(math.log(sub[j].oracle) for j in mine) / len(mine))
        lines.append(f"| {program} | {sub[mine[0]].suite} | {len(mine)} | {oracle:.3f} | "
                     f"{math.exp(sum(map(math.log, speeds)) / len(speeds)):.3f} | "
                     f"{min(speeds):.3f} |")
    return "\n".join(lines) + "\n"


def plot(results, path: Path) -> None:
    rankbench.plot(results, path, KS, "CUDA block shapes, leave one program out (H100 labels)")


def add_arguments(p) -> None:
    """``mire bench cuda``'s own arguments (the results go to ``--out``)."""
    p.add_argument("--cuda-labels", type=Path, default=LABELS,
                   help="cuda: the folder of the timed labels (default: %(default)s)")
    p.add_argument("--cuda-polybench", type=Path, default=None,
                   help="cuda: PolyBench-ACC's CUDA folder (default: the shared datasets')")
    p.add_argument("--cuda-suites", type=Path, default=SUITES,
                   help="cuda: the other suites' programs, where their labels "
                        "(suites.jsonl.gz) are read (suite_labels prepare's --out; "
                        "default: %(default)s)")
    p.add_argument("--cuda-md", type=Path, default=ROOT / "docs" / "results" / "cuda-block.md",
                   help="cuda: the markdown table written, a plot beside it "
                        "(default: %(default)s)")
    p.add_argument("--cuda-features", default=",".join(FEATURE_SETS[1:]),
                   help="cuda: the rankings besides the statistics (default: %(default)s)")
    p.add_argument("--cuda-write-head", type=Path, default=None, metavar="DIR",
                   help="cuda: train the statistics forest on every case and write the head")


def judged(kinds, out: Path, models: dict):
    """The rankings of every representation of ``kinds`` on the H100 labels,
    for ``mire bench encoder`` (:mod:`mirecc.learn.judge`); a case's
    functions are its tunable kernels."""
    groups = read_labels([LABELS / f for f in LABEL_FILES if (LABELS / f).is_file()])
    cases = attach_features(cases_of(groups), default_root() / "polybench-acc" / "CUDA", out)
    emb = representation_vectors(kinds, [c.ir for c in cases], [c.kernels for c in cases],
                                 out / "embeddings", models)
    rankings = evaluate(cases, emb, kinds)

    def refit(kinds, fraction, draw):
        return evaluate(cases, emb, kinds, fraction, draw)

    return Judged("CUDA block shapes", cases, {k: rankings[k] for k in kinds if k in rankings},
                  MIN_GAIN, max(len(candidates(c)) for c in cases),
                  f"{len(cases)} cases of {len({c.program for c in cases})} programs timed on "
                  f"an NVIDIA H100 (nvcc -O3); speedup over the source's block shape; "
                  f"ExtraTrees, {PCA} principal components of an embedding; the functions: "
                  f"the tunable kernels (their mean)", refit=refit)


def run(args) -> int:
    src_root = args.cuda_polybench or default_root() / "polybench-acc" / "CUDA"
    labels, out = args.cuda_labels, Path(args.out) / "cuda"
    present = [f for f in LABEL_FILES if (labels / f).is_file()]
    groups = read_labels([labels / f for f in present])
    cases = attach_features(cases_of(groups), src_root, out, args.cuda_suites)
    wanted = [k for k in args.cuda_features.split(",") if k]

    emb = representation_vectors(wanted, [c.ir for c in cases], [c.kernels for c in cases],
                                 out / "embeddings")
    rankings = evaluate(cases, emb, ("statistics", *wanted))
    gate = gate_sweep(cases, rankings["statistics"])
    text, results = table(cases, rankings, gate)
    programs = sorted({c.program for c in cases})
    rows, chosen, refusal = gate
    md = (f"# CUDA block shapes: rankings, leave one program out\n\n"
          f"Written by `mire bench cuda`. Labels: "
          f"{', '.join(f for f in present if f != SUITE_FILE)} (NVIDIA H100 80GB "
          f"HBM3, nvcc -O3 -arch=sm_90, median GPU time of 2-3 rounds per shape)"
          + (f"; {SUITE_FILE} ({suite_machine(labels)}, mirecc-nvcc -O3 -arch=sm_90, the "
             f"kernels' CUPTI time, median of the rounds)" if SUITE_FILE in present else "")
          + ". "
          f"{len(cases)} cases (program x input size) of {len(programs)} programs; each "
          f"program's cases held out together. Guess: the first shape where the trees' "
          f"{QUANTILE:.2f} quantile predicts more than {MIN_GAIN:.2f} log gain, else the "
          f"source's. K = k: the first k shapes measured beside the source's, the fastest "
          f"correct kept (replayed on the labels). Forests: ExtraTrees, {TREES} trees, leaves "
          f"of at least {LEAF}; embeddings reduced to {PCA} principal components fitted on "
          f"the training programs. `{GATED}`: the statistics forest's guess with the "
          f"threshold the gate below ships"
          + (f" ({chosen.threshold:g})" if chosen else " (none: forcing refused, nothing "
             "applied)") +
          f".\n\n{text}\n\n![rankings](cuda-block.png)\n\n"
          f"The statistics forest's apply gate (`mirecc.learn.gates`): per threshold on the "
          f"trees' {QUANTILE:.2f} quantile (log gain), each program held out with the "
          f"guesses it lets through, its slowest size counted (a shape that changed an "
          f"output or failed as {WRONG:.2f}x; a program with none let through 1.0x); the "
          f"head ships the admissible threshold with the best geomean (no program below "
          f"0.95x, something applied) as its min_gain, else refuses forcing. Chosen on "
          f"these same folds, so its row is optimistic.\n\n{gate_markdown(rows, chosen)}\n"
          + (f"\nNo threshold is admissible: {refusal}.\n" if refusal else "")
          + ("\n" + suites if (suites := suites_section(cases, rankings, gate)) else ""))
    out.mkdir(parents=True, exist_ok=True)

    atomic_write_bytes(args.cuda_md, md.encode())
    plot(results, args.cuda_md.with_suffix(".png"))
    (out / "results.json").write_text(json.dumps(
        {n: {h: {k: v for k, v in r.items()} for h, r in m.items()} for n, m in results.items()},
        indent=1))
    print(md)
    if args.cuda_write_head:
        write_head(cases, results, emb, args.cuda_write_head, gate)
    return 0


# ------------------------------------------------------------------ the shipped head

SPEC = """# Written by `mire bench cuda --cuda-write-head heads/cuda-block`; do not edit (head.onnx is trained for exactly these inputs).
task: {task}
languages: [cuda]
head: head.onnx
# the trees' quantile of the predicted log speedup ranks the shapes; the first
# is applied (apply_cuda_block) only where it exceeds min_gain, the apply gate
# calibrated leave one program out (metrics.json "gate")
quantile: {quantile}
min_gain: {min_gain}
shapes: {shapes}
# per program (source file: tunable kernels), the shapes that changed an output
# or failed in the labels at some size: never its candidates
excluded: {excluded}
features:
{features}
"""


def excluded(cases) -> dict[str, list]:
    """Program key -> the shapes wrong or failed at any of its sizes."""
    out: dict[str, set] = {}
    for c in cases:
        if c.bad:
            out.setdefault(c.key, set()).update(c.bad)
    return {k: [list(s) for s in sorted(v)] for k, v in out.items()}



def shipped_gate(spec: Path = ROOT / "heads" / "cuda-block" / "spec.yaml"):
    """The shipped head's gate: its ``min_gain`` and ``refuse_forcing`` (or None)."""
    data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
    return float(data["min_gain"]), data.get("refuse_forcing")


def write_head(cases, results: dict, emb, out: Path, gate=None) -> None:
    """The block-shape head (``mire bench cuda --cuda-write-head DIR``): the
    statistics forest fitted on every labelled case, with the
    leave-one-program-out figures of the same run.  ``gate``:
    :func:`gate_sweep`'s (rows, chosen row, refusal): the chosen threshold
    is the spec's ``min_gain``; with none, ``refuse_forcing``; the sweep
    goes into metrics.json's ``"gate"``.  Without it (a head trained on a
    subset, as ``benchmarks/cuda_confirm.py --leave-one-out`` writes), the
    shipped head's gate (:func:`shipped_gate`) and no sweep.  Same labels,
    same files: fixed seeds, one thread."""
    idx = list(range(len(cases)))
    V = case_vectors(cases, "statistics", emb, idx, [])
    X, own, shapes = _rows(cases, V, lambda c: list(c.speed))
    y = np.asarray([math.log(cases[o].speed[s]) for o, s in zip(own, shapes)])
    if X.shape[1] != len(INPUTS):
        raise RuntimeError(f"{X.shape[1]} inputs, the head declares {len(INPUTS)}")
    if gate is not None:
        rows, chosen, refusal = gate
        min_gain = chosen.threshold if chosen else MIN_GAIN
    else:
        min_gain, refusal = shipped_gate()
    spec = SPEC.format(task=TASK, quantile=QUANTILE, min_gain=min_gain,
                       shapes=json.dumps([list(s) for s in cl.paper_shapes()]),
                       excluded=json.dumps(excluded(cases), sort_keys=True),
                       features="\n".join(f"- {f}" for f in INPUTS))
    if refusal:
        spec += f"refuse_forcing: {json.dumps(refusal)}\n"
    programs = sorted({c.program for c in cases})
    metrics = {"trained_on": {"cases": len(cases), "rows": int(len(y)), "programs": programs}}
    if gate is not None:
        metrics["gate"] = gate_document(f"leave one program out over {len(cases)} cases of "
                                        f"{len(programs)} programs (a program's slowest "
                                        f"size), quantile {QUANTILE}", "program", MIN_GAIN,
                                        rows, chosen, refusal)
    write_forest_head(out, fit(X, y), X.shape[1], spec, metrics,
                      {"trees": TREES, "min_samples_leaf": LEAF, "max_features": 0.5,
                       "seed": 0}, results, "mire bench cuda")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="mirecc-bench")
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
