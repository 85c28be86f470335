"""``mire bench encoder``: each representation judged where the tasks'
decisions are verified (:mod:`mirecc.learn.judge`), one table per task that
declares its rankings (``Task.judged``), written to ``--judge-md``.

    mire bench encoder [--judge-tasks loop-nests,cuda-block]
                       [--judge-kinds statistics,encoder,...] [--judge-model NAME=DIR ...]
"""
from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from mirecc.taskapi.registry import task, tasks

ROOT = Path(__file__).resolve().parents[2]
#: the representations judged by default: statistics alone, IR2Vec, the
#: random-init and the shipped encoder (module vectors and the decision's
#: function alone), and the statistics with each encoder's components
KINDS = ("statistics", "ir2vec", "random-init", "encoder", "statistics+encoder",
         "random-init@function", "encoder@function", "statistics+random-init@function",
         "statistics+encoder@function")


def add_arguments(p) -> None:
    p.add_argument("--judge-tasks", default="",
                   help="encoder: the tasks judged (default: every task that declares "
                        "its rankings)")
    p.add_argument("--judge-kinds", default=",".join(KINDS),
                   help="encoder: the representations (default: %(default)s)")
    p.add_argument("--judge-model", action="append", default=[], metavar="NAME=DIR",
                   help="encoder: one more encoder, usable as NAME in --judge-kinds "
                        "(NAME, NAME@function, statistics+NAME...)")
    p.add_argument("--judge-draws", type=int, default=2000,
                   help="encoder: resamples of programs for the intervals (default: "
                        "%(default)s)")
    p.add_argument("--judge-fractions", default="0.1,0.25,0.5",
                   help="encoder: label efficiency, the shares of each fold's training "
                        "programs the heads are trained on ('': none) (default: %(default)s)")
    p.add_argument("--judge-efficiency-kinds", default="statistics,encoder,statistics+encoder",
                   help="encoder: the representations of the label-efficiency table "
                        "(default: %(default)s)")
    p.add_argument("--judge-seeds", type=int, default=3,
                   help="encoder: draws of the training programs per share (default: "
                        "%(default)s)")
    p.add_argument("--judge-jobs", type=int, default=1,
                   help="encoder: tasks judged at once, one process each (default: "
                        "%(default)s)")
    p.add_argument("--judge-md", type=Path,
                   default=ROOT / "docs" / "results" / "encoder-judge.md",
                   help="encoder: the page written, its data beside it (.json) "
                        "(default: %(default)s)")


def _models(specs: list[str]) -> dict[str, Path]:
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not Path(path).is_dir():
            raise SystemExit(f"mire bench encoder: --judge-model {spec!r}: want NAME=DIR "
                             "with DIR an exported encoder")
        out[name] = Path(path)
    return out


def _task(name: str, kinds, out: Path, models: dict, args) -> list:
    """One task's sections and data (run in a worker: rankings hold closures,
    so everything of a task happens where its rankings are made)."""
    from mirecc.learn import judge as J  # lazy: numpy; mire's parser imports this module

    print(f"mire bench encoder: {name}", file=sys.stderr)
    got = task(name).judged(kinds, out / name, models)
    done = []
    for j in got if isinstance(got, list) else [got]:
        results = J.judge(j, args.judge_draws)
        data = {"protocol": j.protocol, "candidates": j.candidates, "results": results}
        ref = results.get(j.reference)
        wins = [f"{k} ({J.beats(r, ref)})" for k, r in results.items()
                if ref is not None and J.beats(r, ref)]
        text = (f"## {j.task}\n\n{j.protocol}. Guess: the first candidate "
                f"where its score exceeds {j.min_gain:g}; at most {j.candidates} "
                f"candidates per case.\n\n{J.markdown(j, results)}\n\n"
                f"Beats {j.reference} alone beyond the interval: "
                f"{', '.join(wins) if wins else 'none'}.\n")
        fractions = [float(f) for f in args.judge_fractions.split(",") if f]
        few = [k for k in args.judge_efficiency_kinds.split(",") if k in results]
        if fractions and j.refit is not None and few:
            eff = J.efficiency(j, few, fractions, seeds=args.judge_seeds)
            data["efficiency"] = eff
            text += (f"\nLabel efficiency: each fold's heads trained on a share of its "
                     f"training programs ({args.judge_seeds} draws, means): the guess's "
                     f"share of the oracle / candidates per case.\n\n"
                     f"{J.efficiency_markdown(eff, results)}\n")
        done.append((j.task, text, data))
    return done


def run(args) -> int:
    # lazy: the process pool and the learners (numpy): mire's parser imports this module
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    from mirecc.learn import adapter as A
    from mirecc.learn import judge as J

    models = _models(args.judge_model)
    kinds = [k for k in args.judge_kinds.split(",") if k]
    declared = [name for name, t in tasks().items() if t.has("judged")]
    chosen = [t for t in args.judge_tasks.split(",") if t] or list(declared)
    unknown = [t for t in chosen if t not in declared]
    if unknown:
        raise SystemExit(f"mire bench encoder: no rankings declared by {', '.join(unknown)} "
                         f"(those that have: {', '.join(declared)})")
    out = Path(args.out) / "encoder"
    t0 = time.time()
    jobs = [(n, kinds, out, models, args) for n in chosen]
    if args.judge_jobs > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(args.judge_jobs, mp_context=get_context("spawn")) as pool:
            parts = list(pool.map(_task, *zip(*jobs)))
    else:
        parts = [_task(*job) for job in jobs]
    sections = [text for part in parts for _, text, _ in part]
    data = {task: d for part in parts for task, _, d in part}
    md = (f"# The encoder judged as trials saved\n\nWritten by `mire bench encoder` in "
          f"{time.time() - t0:.0f} s on {platform.processor() or platform.machine()}, "
          f"models: shipped encoder"
          + "".join(f", {n} = `{p}`" for n, p in models.items()) + ". "
          f"Per task and representation, held out by program: the guess's share of the "
          f"oracle's log gain (the first candidate applied where the ranking's score clears "
          f"the task's bar); candidates per case: how many of its candidates, in the "
          f"ranking's order and each measured beside the baseline (the fastest correct "
          f"kept, as `mire tune`, the code-size search and the adaptive runtime do), a case "
          f"with a gain measures until it has {J.REACH:.0%} of its own oracle's log gain, "
          f"mean over those cases; K90: the same K for every case, for the whole set to "
          f"reach {J.REACH:.0%}. Intervals: {J.COVERAGE:.0%}, {args.judge_draws} resamples "
          f"of programs (a drawn program brings all its cases); `vs`: the difference from "
          f"the reference on the same draws. `@function`: the vector of the decision's "
          f"function alone (its part of the program graph), not the module's; "
          f"`statistics+`: the task's statistics and the embedding's principal components; "
          f"`adapter:`: a small network over the whole vector (mirecc.learn.adapter: "
          f"{A.HIDDEN} hidden units, {A.MEMBERS} seeds) in place of the forest. "
          f"A representation beats the reference when its guess gains 10 points or it needs "
          f"a third fewer candidates per case, the difference's interval clear of zero."
          f"\n\n" + "\n".join(sections))
    from mirecc.util.fsutil import atomic_write_bytes  # lazy: as above

    args.judge_md.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.judge_md, md.encode())
    atomic_write_bytes(args.judge_md.with_suffix(".json"),
                       json.dumps(data, indent=1, default=float).encode())
    print(md)
    return 0
