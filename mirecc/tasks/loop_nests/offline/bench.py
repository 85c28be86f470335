"""``mire bench nests``: loop-nest schedule rankings, leave one program out,
replayed on the labels timed on this machine (``mire nests-data``,
``heads/loop-nests/labels``).

    mire bench nests [--out mirecc-bench] [--nests-write-head heads/loop-nests]

A case is a (program, input size) with LLVM's time and at least one
schedule of :data:`..schedules.SPACE` timed; every size of a program is
held out together.  Its target function is the one whose nest does the most
(:func:`..features.dominant`: PolyBench's kernel).  Rankings, side by side
on the same folds:

- LLVM's schedule (the baseline), Polly always on, the best single schedule
  (the best mean log speedup over the training programs);
- a forest of regression trees (ExtraTrees) over the case's numbers,
  predicting every schedule's log speedup over LLVM's (a schedule that
  changed an output or failed counts :data:`PENALTY`), on five feature sets:
  loop-nest statistics (:mod:`..features`), IR2Vec, a random-init encoder,
  mirecc's encoder (module embeddings reduced to :data:`PCA` principal
  components fitted on the training programs), and the statistics with the
  encoder's components.

Cases whose ``-O3`` run takes less than :data:`MIN_SECONDS` are left out.
Each guesses (its first schedule where the trees' :data:`QUANTILE` predicts
more than :data:`MIN_GAIN` log gain, else LLVM's) and is verified with K =
1, 2, 5 (:mod:`mirecc.learn.rankbench`).  Compile time: the chosen
schedule's ``-c`` time over LLVM's (the labels' ``compile_s``).

``--nests-write-head`` trains the statistics forest on every case and
writes the head (``head.onnx``, ``spec.yaml``, ``metrics.json``).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mirecc.learn import rankbench
from mirecc.learn.adapter import fit_adapter, split_kind
from mirecc.learn.embeddings import embedding_of, representation_vectors
from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions, write_forest_head
from mirecc.learn.gates import gate_document
from mirecc.learn.judge import Judged, complete, fold_vectors, training_programs
from mirecc.tasks.loop_nests import features as F
from mirecc.tasks.loop_nests.features import FEATURES
from mirecc.tasks.loop_nests.head import TASK
from mirecc.tasks.loop_nests.offline import dataset
from mirecc.tasks.loop_nests.offline.dataset import polybench_root
from mirecc.tasks.loop_nests.schedules import SPACE, TIMED
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "loop-nests" / "labels"
FEATURE_SETS = ("statistics", "ir2vec", "random-init", "encoder", "statistics+encoder")
PCA = 6
KS = (1, 2, 5)
#: the forest and the head's rule: apply a schedule only where the trees'
#: QUANTILE predicts more than MIN_GAIN (log speedup over LLVM's)
TREES, LEAF, QUANTILE, MIN_GAIN = 100, 3, 0.3, 0.1
#: the training target of a schedule that changed an output or failed
PENALTY = math.log(0.5)
#: cases whose -O3 run is shorter are left out: their speedups are noise
MIN_SECONDS = 0.002


@dataclass
class Case:
    program: str
    suite: str
    size: str
    base_s: float                          # LLVM's median seconds
    speed: dict                            # schedule -> speedup over LLVM's (same output)
    bad: set = field(default_factory=set)  # schedules that changed an output or failed
    compile_s: dict = field(default_factory=dict)
    feats: dict = field(default_factory=dict)
    function: str = ""
    ir: str = ""

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])

    def target(self, schedule: str) -> float:
        return math.log(self.speed[schedule]) if schedule in self.speed else PENALTY


def _median(xs):
    xs = sorted(x for x in xs if x)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def read_cases(paths) -> tuple[list[Case], list[dict]]:
    """The cases of label files, and each file's machine line."""
    cases, metas = [], []
    for path in paths:
        rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        metas += [r["meta"] for r in rows if "meta" in r]
        by: dict = {}
        for r in rows:
            if "meta" not in r:
                by.setdefault((r["program"], r["suite"], r["size"]), {})[r["config"]] = r
        for (program, suite, size), configs in sorted(by.items()):
            base = configs.get("llvm")
            if not base or not any(base["seconds"]) or not base["check"]:
                continue
            b = _median(base["seconds"])
            if b < MIN_SECONDS:
                continue
            case = Case(program, suite, size, b, {},
                        compile_s={c: r.get("compile_s") for c, r in configs.items()})
            for c in SPACE:
                r = configs.get(c)
                if r is None:
                    continue
                if r["check"] != base["check"] or len([s for s in r["seconds"] if s]) \
                        < len([s for s in base["seconds"] if s]):
                    case.bad.add(c)
                else:
                    case.speed[c] = b / _median(r["seconds"])
            if case.speed or case.bad:
                cases.append(case)
    return cases, metas


def source_of(case: Case, out: Path) -> Path:
    for suite, p in dataset.programs([case.suite], out):
        if p.stem == case.program:
            return p
    raise FileNotFoundError(f"no source for {case.suite} program {case.program}")


def attach_features(cases: list[Case], out: Path, cc: str) -> list[Case]:
    """Each case's IR (the front end's, as the driver reads it; cached in
    ``out``/ir) and its dominant function's statistics."""
    kept = []
    for case in cases:
        cached = out / "ir" / f"{case.program}-{case.size}.ll"
        if not cached.is_file():
            src = source_of(case, out)
            cached.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([cc, "-O3", f"-D{case.size}_DATASET", "-DPOLYBENCH_TIME", "-w",
                            "-I", str(polybench_root() / "utilities"), "-I", str(src.parent),
                            "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes", str(src),
                            "-o", str(cached)], check=True)
        case.ir = cached.read_text()
        feats = F.function_features(case.ir)
        case.function = F.dominant(feats) or ""
        if not case.function:
            print(f"mire bench nests: {case.program} {case.size}: no loop nest; left out",
                  file=sys.stderr)
            continue
        case.feats = feats[case.function]
        kept.append(case)
    return kept


def case_vectors(cases, kind: str, emb: dict, train_idx, test_idx) -> np.ndarray:
    return fold_vectors(np.asarray([F.row(c.feats) for c in cases]), emb, kind, train_idx,
                        test_idx, PCA)


def fit(X, Y, seed=0):
    return fit_forest(X, Y, ForestConfig(trees=TREES, min_samples_leaf=LEAF,
                                         max_features=0.5, seed=seed))


def targets(cases) -> np.ndarray:
    return np.asarray([[c.target(s) for s in SPACE] for c in cases])


def rank_forest(cases, kind, emb, held: str, keep: set | None = None) -> dict:
    """``keep``: the training programs (default: every other); an
    ``adapter:`` kind ranks with the adapter instead of the forest."""
    train = [i for i, c in enumerate(cases) if c.program != held
             and (keep is None or c.program in keep)]
    test = [i for i, c in enumerate(cases) if c.program == held]
    V = case_vectors(cases, kind, emb, train, test)
    if split_kind(kind)[0]:
        members = fit_adapter(V[train], targets([cases[i] for i in train])).predictions(V[test])
    else:
        members = tree_predictions(fit(V[train], targets([cases[i] for i in train])), V[test])
    Q = np.quantile(members, QUANTILE, axis=1)
    return {i: sorted(zip(SPACE, map(float, q)), key=lambda t: -t[1]) for i, q in zip(test, Q)}


def rank_single(cases, held: str) -> dict:
    """The schedules by mean training target over the training cases."""
    train = [c for c in cases if c.program != held]
    mean = targets(train).mean(0)
    order = sorted(zip(SPACE, map(float, mean)), key=lambda t: -t[1])
    return {i: order for i, c in enumerate(cases) if c.program == held}


def evaluate(cases, emb, kinds=FEATURE_SETS, fraction: float = 1.0, draw: int = 0) -> dict:
    """Every ranking, leave one program out; ``fraction`` < 1: the forests
    of each fold trained on that share of its training programs."""
    programs = sorted({c.program for c in cases})
    rankings = {"Polly always on": {i: [("polly", math.inf)] for i in range(len(cases))},
                "best single schedule": {}, **{k: {} for k in kinds}}
    for n, held in enumerate(programs):
        print(f"\rmire bench nests: leave one program out {n + 1}/{len(programs)}",
              end="", file=sys.stderr, flush=True)
        rankings["best single schedule"].update(rank_single(cases, held))
        keep = training_programs(programs, held, fraction, draw)
        for kind in kinds:
            if embedding_of(kind) is None or embedding_of(kind) in emb:
                rankings[kind].update(rank_forest(cases, kind, emb, held, keep))
    print(file=sys.stderr)
    return complete(rankings, cases)


def compile_ratio(cases, ranked) -> float:
    """Geomean over cases of the guessed schedule's compile time over LLVM's."""
    logs = []
    for i, c in enumerate(cases):
        s, score = ranked[i][0]
        chosen = s if score > MIN_GAIN else "llvm"
        a, b = c.compile_s.get(chosen), c.compile_s.get("llvm")
        if a and b:
            logs.append(math.log(a / b))
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def per_program(cases, rankings, results) -> str:
    lines = ["| program | size | -O3 s | Polly always | best single | statistics guess | "
             "statistics K=5 | oracle |", "|---|---|---:|---:|---:|---|---:|---|"]
    stats = rankings.get("statistics", {})
    for i, c in enumerate(cases):
        def cell(name, how):
            return f"{results[name][how]['speeds'][i]:.2f}" if name in results else "-"
        guess = stats.get(i, [("llvm", 0.0)])[0]
        chosen = guess[0] if guess[1] > MIN_GAIN else "llvm"
        best = max(c.speed, key=c.speed.get) if c.oracle > 1 else "llvm"
        lines.append(f"| {c.program} | {c.size} | {c.base_s:.3f} | "
                     f"{cell('Polly always on', 'guess')} | "
                     f"{cell('best single schedule', 'guess')} | "
                     f"{cell('statistics', 'guess')} ({chosen}) | {cell('statistics', 'K=5')} | "
                     f"{c.oracle:.2f} ({best}) |")
    return "\n".join(lines)


#: the apply thresholds (log gain of the trees' quantile) the gate sweep tries
THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5)


def gate_sweep(cases, ranked: dict) -> tuple[list, object, str | None]:
    """:func:`mirecc.learn.rankbench.gate_sweep` over :data:`THRESHOLDS`: a
    schedule that changed an output counts :data:`PENALTY`."""
    return rankbench.gate_sweep(cases, ranked, THRESHOLDS, math.exp(PENALTY))


def gate_markdown(rows, chosen) -> str:
    return rankbench.gate_markdown(rows, chosen, "a schedule")


def knob_table(paths) -> str:
    """Every timed configuration (:data:`..schedules.TIMED`, the two LLVM
    knobs too) per program and size, over LLVM's: the survey of which knobs
    move run time here.  ``!``: the output changed; ``-``: no time."""
    def gm(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    names = [c for c in TIMED if c != "llvm"]
    out = []
    for path in paths:
        rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        by: dict = {}
        for r in rows:
            if "meta" not in r:
                by.setdefault((r["suite"], r["program"]), {})[r["config"]] = r
        size = next((r["size"] for r in rows if "size" in r), "?")
        lines = [f"### {size} ({Path(path).name})", "",
                 "| program | -O3 s | " + " | ".join(names) + " |",
                 "|---|---:|" + "---:|" * len(names)]
        per: dict = {c: [] for c in names}
        best = []
        for (suite, program), cfg in sorted(by.items()):
            base = cfg.get("llvm")
            if not base or not any(base["seconds"]):
                lines.append(f"| {program} | - |" + " - |" * len(names))
                continue
            b = _median(base["seconds"])
            cells, speeds = [], [1.0]
            for c in names:
                r = cfg.get(c)
                if not r or not any(r["seconds"]):
                    cells.append("-")
                    continue
                x = b / _median(r["seconds"])
                changed = r["check"] != base["check"]
                if not changed and b >= MIN_SECONDS:
                    per[c].append(x)
                    speeds.append(x)
                cells.append(f"{x:.2f}" + ("!" if changed else ""))
            if b >= MIN_SECONDS:
                best.append(max(speeds))
            lines.append(f"| {program} | {b:.3f} | " + " | ".join(cells) + " |")
        lines += ["", f"Over the {len(best)} programs whose -O3 run takes at least "
                      f"{MIN_SECONDS} s, outputs unchanged:", "",
                  "| configuration | geomean over -O3 | below 0.95x | above 1.05x |",
                  "|---|---:|---:|---:|"]
        for c, xs in per.items():
            lines.append(f"| {c} | {gm(xs):.3f} | {sum(x < 0.95 for x in xs)} | "
                         f"{sum(x > 1.05 for x in xs)} |")
        lines += ["", f"The best configuration per program: geomean {gm(best):.3f}x.", ""]
        out += lines
    return "\n".join(out)


def add_arguments(p) -> None:
    """``mire bench nests``'s own arguments (the results go to ``--out``)."""
    p.add_argument("--nests-labels", type=Path, nargs="*", default=None,
                   help="nests: label files (default: every file in heads/loop-nests/labels)")
    p.add_argument("--nests-cc", default="clang-14",
                   help="nests: the clang the IR is read from (default: %(default)s)")
    p.add_argument("--nests-md", type=Path, default=ROOT / "docs" / "results" / "loop-nests.md",
                   help="nests: the markdown page written, a plot beside it (default: %(default)s)")
    p.add_argument("--nests-knobs-md", type=Path,
                   default=ROOT / "docs" / "results" / "nest-knobs.md",
                   help="nests: the page of every timed configuration per program "
                        "(default: %(default)s)")
    p.add_argument("--nests-features", default=",".join(FEATURE_SETS[1:]),
                   help="nests: the rankings besides the statistics (default: %(default)s)")
    p.add_argument("--nests-write-head", type=Path, default=None, metavar="DIR",
                   help="nests: train the statistics forest on every case and write the head")


def judged(kinds, out: Path, models: dict):
    """The rankings of every representation of ``kinds`` on the labels, for
    ``mire bench encoder`` (:mod:`mirecc.learn.judge`); the case's function
    is its dominant one."""
    cases, metas = read_cases(sorted(LABELS.glob("*.jsonl")))
    cases = attach_features(cases, out, "clang-14")
    emb = representation_vectors(kinds, [c.ir for c in cases], [c.function for c in cases],
                                 out / "embeddings", models)
    rankings = evaluate(cases, emb, kinds)
    machine = metas[0] if metas else {}

    def refit(kinds, fraction, draw):
        return evaluate(cases, emb, kinds, fraction, draw)

    return Judged("loop-nest schedules", cases, {k: rankings[k] for k in kinds if k in rankings},
                  MIN_GAIN, len(SPACE),
                  f"{len(cases)} cases of {len({c.program for c in cases})} PolyBench and "
                  f"mirecc programs timed on {machine.get('cpu_model', '?')} "
                  f"({machine.get('cc_version', '?')}); speedup over clang -O3; "
                  f"{len(SPACE)} schedules; ExtraTrees, {PCA} principal components of an "
                  f"embedding; the function: the one whose nest does the most", refit=refit)


def run(args) -> int:
    out = Path(args.out) / "nests"
    paths = args.nests_labels or sorted(LABELS.glob("*.jsonl"))
    cases, metas = read_cases(paths)
    cases = attach_features(cases, out, args.nests_cc)
    wanted = [k for k in args.nests_features.split(",") if k]

    emb = representation_vectors(wanted, [c.ir for c in cases], [c.function for c in cases],
                                 out / "embeddings")
    rankings = evaluate(cases, emb, ("statistics", *wanted))
    gate = gate_sweep(cases, rankings["statistics"])
    text, results = rankbench.table(cases, rankings, KS, "LLVM's schedule (-O3)", MIN_GAIN)
    ratios = "\n".join(f"| {name} | {compile_ratio(cases, ranked):.2f} |"
                       for name, ranked in rankings.items())
    programs = sorted({c.program for c in cases})
    machine = metas[0] if metas else {}
    md = (f"# Loop-nest schedules: rankings, leave one program out\n\n"
          f"Written by `mire bench nests`. Labels: {', '.join(Path(p).name for p in paths)} "
          f"({machine.get('cpu_model', '?')}, {machine.get('cores', '?')} cores, "
          f"{machine.get('cc_version', '?')}; {machine.get('protocol', '')}). "
          f"{len(cases)} cases (program x input size) of {len(programs)} programs "
          f"({sum(c.suite == 'own' for c in cases)} cases of mirecc's own families; cases "
          f"whose -O3 run takes under {MIN_SECONDS} s are left out); each "
          f"program's sizes held out together. Speedups are over clang -O3 (LLVM's schedule) "
          f"on unchanged outputs. Guess: the first schedule where the trees' {QUANTILE:.2f} "
          f"quantile predicts more than {MIN_GAIN:.2f} log gain, else LLVM's. K = k: the first "
          f"k schedules measured beside LLVM's, the fastest correct kept (replayed on the "
          f"labels). Forests: ExtraTrees, {TREES} trees, leaves of at least {LEAF}, a schedule "
          f"that changed an output or failed trained as {math.exp(PENALTY):.2f}x; embeddings "
          f"(the TU's module vector) reduced to {PCA} principal components fitted on the "
          f"training programs.\n\n{text}\n\n![rankings](loop-nests.png)\n\n"
          f"The statistics forest's apply gate (`mirecc.learn.gates`): per threshold on the "
          f"trees' {QUANTILE:.2f} quantile (log gain), each program held out with the "
          f"guesses it lets through, its slowest size counted (a changed output as "
          f"{math.exp(PENALTY):.2f}x); the head ships the admissible threshold with the best "
          f"geomean (none below 0.95x), else refuses forcing. Chosen on these same folds, so "
          f"its row is optimistic.\n\n{gate_markdown(gate[0], gate[1])}\n\n"
          + (f"No threshold is admissible: {gate[2]}.\n\n" if gate[2] else "") +
          f"Compile time of the guessed schedule over LLVM's (`-O3 -c`, geomean over cases):\n\n"
          f"| ranking | compile time |\n|---|---:|\n{ratios}\n\n"
          f"Per case (speedup over -O3; the statistics forest's guess and its schedule):\n\n"
          f"{per_program(cases, rankings, results)}\n")
    out.mkdir(parents=True, exist_ok=True)

    atomic_write_bytes(args.nests_md, md.encode())
    knobs = (f"# Loop-nest knobs on this machine\n\nWritten by `mire bench nests` from the "
             f"labels of `mire nests-data` ({machine.get('cpu_model', '?')}, "
             f"{machine.get('cc_version', '?')}; {machine.get('protocol', '')}; median of the "
             f"rounds). Speedup of each configuration over clang -O3 (`llvm`); `!`: the output "
             f"differs from -O3's at the check size (arrays dumped); `-`: no time (failed or "
             f"over the time limit).\n\n{knob_table(paths)}")
    atomic_write_bytes(args.nests_knobs_md, knobs.encode())
    rankbench.plot(results, args.nests_md.with_suffix(".png"), KS,
                   "Loop-nest schedules, leave one program out", lines=(90,))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(md)
    if args.nests_write_head:
        write_head(cases, results, gate, args.nests_write_head)
    return 0


# ------------------------------------------------------------------ the shipped head

SPEC = """# Written by `mire bench nests --nests-write-head heads/loop-nests`; do not edit (head.onnx is trained for exactly these inputs).
task: {task}
languages: [c, c++]
head: head.onnx
# the head reads loop-nest statistics, no embedding (none added to them in the bench)
encoder: none
features: [loop_nest_statistics]
# the trees' quantile of each schedule's predicted log speedup over LLVM's ranks
# them; the first is applied (apply_loop_nests) only where it exceeds min_gain,
# the apply gate calibrated leave one program out (metrics.json "gate")
quantile: {quantile}
min_gain: {min_gain}
classes: {classes}
loop_nest_statistics:
{features}
"""


def write_head(cases, results: dict, gate, out: Path) -> None:
    """The loop-nests head (``mire bench nests --nests-write-head DIR``): the
    statistics forest fitted on every labelled case, with the
    leave-one-program-out figures of the same run.  ``gate``:
    :func:`gate_sweep`'s (rows, chosen row, refusal): the chosen threshold
    is the spec's ``min_gain``; with none, ``refuse_forcing``.  Same labels,
    same files: fixed seeds, one thread."""
    rows, chosen, refusal = gate
    idx = list(range(len(cases)))
    X = case_vectors(cases, "statistics", {}, idx, [])
    Y = targets(cases)
    spec = SPEC.format(task=TASK, quantile=QUANTILE,
                       min_gain=chosen.threshold if chosen else MIN_GAIN,
                       classes=json.dumps(list(SPACE)),
                       features="\n".join(f"- {f}" for f in FEATURES))
    if refusal:
        spec += f"refuse_forcing: {json.dumps(refusal)}\n"
    metrics = {"trained_on": {"cases": len(cases), "programs": sorted({c.program for c in cases}),
                              "mean_target": np.round(Y.mean(0), 4).tolist()},
               "gate": gate_document(f"leave one program out over {len(cases)} cases of "
                                     f"{len({c.program for c in cases})} programs", "program",
                                     MIN_GAIN, rows, chosen, refusal)}
    write_forest_head(out, fit(X, Y), X.shape[1], spec, metrics,
                      {"trees": TREES, "min_samples_leaf": LEAF, "max_features": 0.5,
                       "seed": 0}, results, "mire bench nests")


def write_held_out_head(out: Path, held_out, work: Path, cc: str = "clang-14") -> list[str]:
    """The statistics forest fitted on every labelled case but those of the
    ``held_out`` programs, written as a head into ``out`` (as the shipped
    one, forcing refused: it ranks and records): a head that never saw
    them, for measuring ``mire tune`` on them (``benchmarks/tune_programs.py
    --suite nests``).  ``work``: the IR cache.  Returns the programs it was
    trained on."""
    cases, _ = read_cases(sorted(LABELS.glob("*.jsonl")))
    unknown = set(held_out) - {c.program for c in cases}
    if unknown:
        raise KeyError(f"no labelled loop-nest program {', '.join(sorted(unknown))}")
    train = attach_features([c for c in cases if c.program not in set(held_out)], work, cc)
    why = f"held out {', '.join(sorted(held_out))} for a benchmark: it ranks and records only"
    write_head(train, {}, ([], None, why), out)
    return sorted({c.program for c in train})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="mirecc-bench")
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
