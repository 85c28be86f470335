"""``mire adapt``: what the adaptive OpenMP runtime tried and kept.

    mire adapt                 # every site of every machine's store
    mire adapt --json          # the same, one JSON object per site and bucket
    mire adapt --forget        # drop the stores (the next runs explore again)
    mire adapt --seed mirecc.profile   # start from what mire tune kept

Programs built with ``adapt_openmp`` (``MIRECC_ADAPT_OPENMP=1``) carry the
runtime; it writes its verdicts per user and machine under
``<cache>/adapt/`` (:mod:`mirecc.runtime.store`).  ``--seed`` (and ``mire
tune --seed-adapt``) writes the regions a decisions profile keeps as decided
verdicts for this machine, keyed by the region's digest as the adaptive
sites are: the program's first invocation of each runs the kept
configuration, and the runtime's default is re-checked now and then as for
any verdict.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("--store", default=None,
                   help="a store directory (default: <cache>/adapt, or MIRECC_ADAPT_STORE's "
                        "folder)")
    p.add_argument("--json", action="store_true", help="one JSON object per site and bucket")
    p.add_argument("--forget", action="store_true",
                   help="remove the store files: later runs explore again")
    p.add_argument("--seed", metavar="PROFILE", default=None,
                   help="write the OpenMP regions a decisions profile keeps (mire tune's) "
                        "as this machine's verdicts")


def _directory(args):
    import os

    from mirecc.runtime.store import store_dir

    if args.store:
        return Path(args.store)
    named = os.environ.get("MIRECC_ADAPT_STORE")
    return Path(named).parent if named else store_dir()


def run(args) -> int:
    from dataclasses import asdict

    if args.seed:
        from mirecc.runtime.store import machine_descriptor, seed_profile
        from mirecc.taskapi.profile import ProfileError
        try:
            seed_profile(args.seed, Path(args.store) / f"{machine_descriptor()}.txt"
                         if args.store else None)
        except ProfileError as exc:
            print(f"mire adapt: {exc}", file=sys.stderr)
            return 2
        return 0

    from mirecc.runtime.store import read_all, table

    directory = _directory(args)
    if args.forget:
        removed = 0
        for path in sorted(directory.glob("*.txt")) if directory.is_dir() else []:
            path.unlink()
            removed += 1
        print(f"removed {removed} store file{'s' if removed != 1 else ''} from {directory}")
        return 0
    cells, problems = read_all(directory)
    for problem in problems:
        print(f"mire adapt: warning: {problem}; skipped", file=sys.stderr)
    if args.json:
        for c in cells:
            print(json.dumps({**asdict(c), "speedup": c.speedup, "tried": c.tried}))
        return 0
    if not cells:
        print(f"no adaptive sites have run yet (store: {directory}); build with "
              f"MIRECC_ADAPT_OPENMP=1 and -fopenmp, then run the program")
        return 0
    sys.stdout.write(table(cells))
    return 0
