"""``mire adapt``: what the adaptive OpenMP runtime tried and kept.

    mire adapt                 # every site of every machine's store
    mire adapt --json          # the same, one JSON object per site and bucket
    mire adapt --forget        # drop the stores (the next runs explore again)

Programs built with ``adapt_openmp`` (``MIRECC_ADAPT_OPENMP=1``) carry the
runtime; it writes its verdicts per user and machine under
``<cache>/adapt/`` (:mod:`mirecc.runtime.store`).
"""
from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    p.add_argument("--store", default=None,
                   help="a store directory (default: <cache>/adapt, or MIRECC_ADAPT_STORE's "
                        "folder)")
    p.add_argument("--json", action="store_true", help="one JSON object per site and bucket")
    p.add_argument("--forget", action="store_true",
                   help="remove the store files: later runs explore again")


def _directory(args):
    import os
    from pathlib import Path

    from mirecc.runtime.store import store_dir

    if args.store:
        return Path(args.store)
    named = os.environ.get("MIRECC_ADAPT_STORE")
    return Path(named).parent if named else store_dir()


def run(args) -> int:
    from dataclasses import asdict

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
