"""``mire vectorize-data``: generate loop kernels and measure every (VF, IF)."""

from __future__ import annotations

import sys
from pathlib import Path

from mirecc.learn.labels import read_rows
from mirecc.tasks.loop_vectorize.offline import dataset


def add_arguments(p) -> None:
    p.add_argument("--out", default=".work/vectorize/default",
                   help="output directory: kernels/, labels.jsonl, machine.json "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    p.add_argument("--per-family", type=int, default=None,
                   help="kernels per family (default: 12, ~190 kernels)")
    p.add_argument("--cc", default="clang-14", help="clang to measure (default: %(default)s)")
    p.add_argument("--target-flags", default="",
                   help="extra target flags, e.g. '-march=native' (default: none)")
    p.add_argument("--repeats", type=int, default=5,
                   help="timing rounds over all configurations (default: %(default)s)")
    p.add_argument("--target-ms", type=float, default=10.0,
                   help="length of one measurement in ms (default: %(default)s)")
    p.add_argument("--families", default=None, help="comma-separated families (default: all)")
    p.add_argument("--limit", type=int, default=None, help="at most this many rows")
    p.add_argument("--no-fast-math", action="store_true",
                   help="no extra -ffast-math rows for kernels that need reassociation")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: all CPUs)")
    p.add_argument("--summary-only", action="store_true",
                   help="only print the summary of an existing labels file")
    p.add_argument("--export", type=Path, metavar="DIR", default=None,
                   help="then write the labels (gzip) and machine.json into DIR, e.g. "
                        "heads/loop-vectorize/labels (what the shipped head is trained on)")


def run(args) -> int:
    out = Path(args.out)
    if not args.summary_only:
        fams = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
        try:
            dataset.run_dataset(out, seed=args.seed, per_family=args.per_family, cc=args.cc,
                                target_flags=args.target_flags, repeats=args.repeats,
                                families=fams, limit=args.limit,
                                fast_math_rows=not args.no_fast_math,
                                target_ns=args.target_ms * 1e6, jobs=args.jobs)
        except ValueError as exc:
            print(f"mire vectorize-data: {exc}", file=sys.stderr)
            return 2

    rows = read_rows(out / "labels.jsonl")
    print(f"labels: {out / 'labels.jsonl'}")
    print(dataset.summarize(rows))
    if args.export:
        try:
            written = dataset.export(out, args.export)
        except ValueError as exc:
            print(f"mire vectorize-data: {exc}", file=sys.stderr)
            return 2
        print(f"exported: {', '.join(map(str, written))}")
    return 0
