"""``mire omp-data``: time every (threads, schedule, chunk) of every OpenMP
region of PolyBench-ACC's OpenMP programs (and the generated kernel
families), resumable; ``--summary``: the best configuration per region and
the oracle.

    mire omp-data --out .work/omp-labels --space small --repeats 3
    mire omp-data --out .work/omp-labels --families --programs gemm,syrk
    mire omp-data --out .work/omp-labels --summary
    mire omp-data --out .work/omp-labels --export heads/openmp/labels   # merge, commit
"""

from __future__ import annotations

import sys
from pathlib import Path

from mirecc.tasks.openmp.offline import dataset
from mirecc.tasks.openmp.offline import programs as P


def add_arguments(p) -> None:
    p.add_argument("--out", default=".work/omp-labels",
                   help="output directory: labels.jsonl, meta.json, summary.md, work/ "
                        "(default: %(default)s)")
    p.add_argument("--programs", default=None,
                   help="comma-separated program names (default: all PolyBench-ACC OpenMP "
                        "programs, and the generated kernels with --families)")
    p.add_argument("--sizes", default="SMALL,STANDARD",
                   help="comma-separated PolyBench dataset sizes: MINI, SMALL, STANDARD, "
                        "LARGE (default: %(default)s)")
    p.add_argument("--families", nargs="?", const="all", default=None,
                   help="also the generated OpenMP kernel families (all, or a comma-separated "
                        "list: triangular, irregular, small_regions, reduction, nested)")
    p.add_argument("--per-family", type=int, default=None,
                   help="generated programs per family (default: 3)")
    p.add_argument("--no-polybench", action="store_true",
                   help="only the generated kernels")
    p.add_argument("--polybench", default=None,
                   help="the PolyBench-ACC OpenMP folder (default: polybench-acc/OpenMP of "
                        "$MIRECC_DATASETS, else of ../shared/datasets)")
    p.add_argument("--space", choices=("full", "small"), default="full",
                   help="full: threads 1,2,4 x static,dynamic,guided x chunk default,1,8,32,"
                        "64,128,256,512 (72); small: 10 for quick runs (default: %(default)s)")
    p.add_argument("--configs", default=None,
                   help="comma-separated configurations instead of a space, e.g. "
                        "t1-static-default,t2-dynamic-8")
    p.add_argument("--repeats", type=int, default=5,
                   help="timing rounds (default: %(default)s)")
    p.add_argument("--cc", default="clang-14", help="clang to build with (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per program run (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: all CPUs)")
    p.add_argument("--seed", type=int, default=0,
                   help="kernel generator and shuffling seed (default: %(default)s)")
    p.add_argument("--summary", action="store_true",
                   help="only summarise an existing labels file (also written to summary.md)")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="only merge --out's labels into the committed form in DIR "
                        "(labels.jsonl.gz, meta.json, summary.md, kernels-index.json), "
                        "keeping DIR's other rows")


def _list(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def run(args) -> int:
    out = Path(args.out)
    if args.export:
        try:
            n = dataset.export_labels(out, args.export)
        except (OSError, ValueError) as exc:
            print(f"mire omp-data: {exc}", file=sys.stderr)
            return 2
        print(f"mire omp-data: {n} rows in {args.export}")
        return 0
    if not args.summary:
        try:
            sizes = [s.upper() for s in _list(args.sizes) or []]
            bad = [s for s in sizes if s not in P.SIZES]
            if bad or not sizes:
                raise ValueError(f"unknown size(s) {', '.join(bad) or '(none)'} "
                                 f"(known: {', '.join(P.SIZES)})")
            progs = [] if args.no_polybench else P.polybench_programs(args.polybench)
            if args.families:
                fams = None if args.families == "all" else _list(args.families)
                progs += P.kernel_programs(out / "kernels", args.seed, args.per_family, fams)
            progs = P.select(progs, _list(args.programs))
            configs = dataset.space_configs(args.space, _list(args.configs))
            dataset.run_dataset(out, progs, sizes=sizes, configs=configs, space=args.space,
                                cc=args.cc, repeats=args.repeats, timeout=args.timeout,
                                jobs=args.jobs, seed=args.seed)
        except (ValueError, RuntimeError) as exc:
            print(f"mire omp-data: {exc}", file=sys.stderr)
            return 2
    labels = out / "labels.jsonl"
    if not labels.is_file():
        print(f"mire omp-data: no labels at {labels}", file=sys.stderr)
        return 2
    print(f"labels: {labels}")
    print(dataset.write_summary(out))
    print(f"summary: {out / 'summary.md'}")
    return 0
