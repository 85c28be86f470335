"""``mire numa-regions``: map the NUMA/prefetcher dataset's regions to the
IR of their programs, and say which cannot be mapped and why.

    mire numa-regions --out .work/numa
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mirecc.learn.datasets import default_root
from mirecc.tasks.numa.offline.regions import RegionsError, map_regions
from mirecc.util.fsutil import atomic_write_bytes


def add_arguments(p) -> None:
    p.add_argument("--dataset", default=None,
                   help="the numa-prefetch folder (default: numa-prefetch of "
                        "$MIRECC_DATASETS, else of ../shared/datasets)")
    p.add_argument("--out", default=".work/numa",
                   help="output folder: regions.json and the programs' IR under ir/ "
                        "(default: %(default)s)")
    p.add_argument("--cc", default="clang-14", help="C compiler (default: %(default)s)")
    p.add_argument("--cxx", default="clang++-14", help="C++ compiler (default: %(default)s)")


def run(args) -> int:
    dataset = Path(args.dataset) if args.dataset else default_root() / "numa-prefetch"
    out = Path(args.out)
    try:
        regions = map_regions(dataset, out, args.cc, args.cxx)
    except RegionsError as exc:
        print(f"mire numa-regions: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    report = {"dataset": str(dataset.resolve()), "compiler": args.cc,
              "regions": [r.to_dict() for r in regions]}
    atomic_write_bytes(out / "regions.json", json.dumps(report, indent=2).encode())
    mapped = [r for r in regions if r.mapped]
    print(f"mire numa-regions: {len(mapped)} of {len(regions)} regions mapped to their "
          f"outlined functions ({out / 'regions.json'})")
    for r in regions:
        if r.mapped:
            print(f"  {r.name}: {r.source}:{r.line} -> {r.outlined}")
    for r in regions:
        if not r.mapped:
            print(f"  not mapped: {r.name}: {r.why}")
    return 0
