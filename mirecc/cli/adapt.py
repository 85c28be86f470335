"""``mire adapt``: what the adaptive runtime tried and kept (OpenMP regions,
functions in versions).

    mire adapt                 # every site of every machine's store
    mire adapt --json          # the same, one JSON object per site and bucket
    mire adapt --forget        # drop the stores (the next runs explore again)
    mire adapt --seed mirecc.profile   # start from what mire tune kept

Programs built with ``adapt_openmp`` (``MIRECC_ADAPT_OPENMP=1``) or
``adapt_loops`` (``MIRECC_ADAPT_LOOPS=1``) carry the runtime; it writes its
verdicts per user and machine under
``<cache>/adapt/`` (:mod:`mirecc.runtime.store`).  ``--seed`` (and ``mire
tune --seed-adapt``) writes the regions a decisions profile keeps as decided
verdicts for this machine, keyed by the region's digest as the adaptive
sites are: the program's first invocation of each runs the kept
configuration, and the runtime's default is re-checked now and then as for
any verdict.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from mirecc.runtime import store


def add_arguments(p) -> None:
    p.add_argument("--store", default=None,
                   help="a store directory or file (default: the file MIRECC_ADAPT_STORE "
                        "names, else <cache>/adapt)")
    p.add_argument("--json", action="store_true", help="one JSON object per site and bucket")
    p.add_argument("--forget", action="store_true",
                   help="remove the store files: later runs explore again")
    p.add_argument("--seed", metavar="PROFILE", default=None,
                   help="write the OpenMP regions a decisions profile keeps (mire tune's) "
                        "as this machine's verdicts")


def run(args) -> int:
    if args.store and not os.path.exists(args.store):
        print(f"mire adapt: --store {args.store}: no such file or directory", file=sys.stderr)
        return 2
    if args.seed:
        from mirecc.taskapi.profile import ProfileError  # lazy: --seed only
        try:
            target = None
            if args.store:
                target = Path(args.store) if os.path.isfile(args.store) else \
                    Path(args.store) / f"{store.machine_descriptor()}.txt"
            store.seed_profile(args.seed, target)
        except (ProfileError, OSError) as exc:
            print(f"mire adapt: {exc}", file=sys.stderr)
            return 2
        return 0

    paths = store.store_files(args.store)
    where = args.store or os.environ.get("MIRECC_ADAPT_STORE") or store.store_dir()
    if args.forget:
        # only the runtime's own files: a folder may hold others
        removed = [p for p in paths if store.is_store(p)]
        for path in removed:
            path.unlink()
        print(f"removed {len(removed)} store file{'s' if len(removed) != 1 else ''} "
              f"from {where}")
        return 0
    cells, problems = store.read_all(paths)
    for problem in problems:
        print(f"mire adapt: warning: {problem}; skipped", file=sys.stderr)
    if args.json:
        for c in cells:
            print(json.dumps({**asdict(c), "speedup": c.speedup, "tried": c.tried}))
        return 0
    if not cells:
        print(f"no adaptive sites have run yet (store: {where}); build with "
              f"MIRECC_ADAPT_OPENMP=1 and -fopenmp, or MIRECC_ADAPT_LOOPS=1, then run the "
              f"program")
        return 0
    sys.stdout.write(store.table(cells))
    return 0
