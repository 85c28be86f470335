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


def run(args) -> int:
    from mirecc.learn import judge as J
    from mirecc.taskapi.api import load_attribute
    from mirecc.taskapi.registry import tasks

    models = _models(args.judge_model)
    kinds = [k for k in args.judge_kinds.split(",") if k]
    declared = {name: t for name, t in tasks().items() if t.judged}
    chosen = [t for t in args.judge_tasks.split(",") if t] or list(declared)
    unknown = [t for t in chosen if t not in declared]
    if unknown:
        raise SystemExit(f"mire bench encoder: no rankings declared by {', '.join(unknown)} "
                         f"(those that have: {', '.join(declared)})")
    out = Path(args.out) / "encoder"
    sections, data = [], {}
    t0 = time.time()
    for name in chosen:
        print(f"mire bench encoder: {name}", file=sys.stderr)
        got = load_attribute(declared[name].judged)(kinds, out / name, models)
        for j in got if isinstance(got, list) else [got]:
            results = J.judge(j, args.judge_draws)
            data[j.task] = {"protocol": j.protocol, "candidates": j.candidates,
                            "results": results}
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
                eff = J.efficiency(j, few, fractions)
                data[j.task]["efficiency"] = eff
                text += (f"\nLabel efficiency: each fold's heads trained on a share of its "
                         f"training programs (3 draws, means): the guess's share of the "
                         f"oracle / candidates per case.\n\n"
                         f"{J.efficiency_markdown(eff, results)}\n")
            sections.append(text)
    md = (f"# The encoder judged as trials saved\n\nWritten by `mire bench encoder` in "
          f"{time.time() - t0:.0f} s on {platform.processor() or platform.machine()}, "
          f"models: shipped encoder"
          + "".join(f", {n} = `{p}`" for n, p in models.items()) + ". "
          f"Per task and representation, leave one program out: the guess's share of the "
          f"oracle's log gain, and K90, the candidates each case measures (its first K by "
          f"the ranking, the fastest correct kept) for the set to reach {J.REACH:.0%} of the "
          f"oracle's log gain; intervals: {J.COVERAGE:.0%}, {args.judge_draws} resamples of "
          f"programs (a drawn program brings all its cases); `vs`: the difference from the "
          f"reference on the same draws. `@function`: the vector of the decision's function "
          f"alone (its part of the program graph), not the module's. A representation beats "
          f"the reference when its guess gains 10 points or its K90 is a third lower, with "
          f"the difference's interval clear of zero.\n\n" + "\n".join(sections))
    from mirecc.util.fsutil import atomic_write_bytes

    args.judge_md.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.judge_md, md.encode())
    atomic_write_bytes(args.judge_md.with_suffix(".json"),
                       json.dumps(data, indent=1, default=float).encode())
    print(md)
    return 0
