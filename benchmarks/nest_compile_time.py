#!/usr/bin/env python3
"""Compile time of a loop-heavy suite with the loop-nests task on: the
PolyBench-ACC OpenMP sources clang compiles (as C without -fopenmp) and
mirecc's own 20 loop nests, each compiled ``-O3 -c`` by clang and by mirecc with
``MIRECC_APPLY_LOOP_NESTS=1`` (the shipped head decides and its schedules
are applied), one file after the other.

    .venv/bin/python benchmarks/nest_compile_time.py --repeats 3 --md docs/results/nest-compile-time.md

Protocol: ``--repeats`` rounds; a round compiles the suite once with each
compiler, clang first in even rounds and mirecc first in odd ones; every
mirecc round starts with an empty result cache (``MIRECC_CACHE_DIR`` fresh:
every TU reads its IR, nothing is replayed); the per-user server is on, as
by default (started before the first round).  Wall time of the whole suite
per side: median, min and max; the ratio of the medians.  Also counted:
the TUs whose object the decisions changed (``mire stats``'
``tus.applied``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def sources(root: Path, own: Path, cc: str) -> list[Path]:
    """PolyBench-ACC's sources clang compiles (floyd-warshall's does not),
    then mirecc's own loop nests (written to ``own``)."""
    from mirecc.tasks.loop_nests.offline.families import write_programs

    listed = (root / "utilities" / "benchmark_list").read_text().split()
    out = []
    for p in listed:
        ok = subprocess.run([cc, "-fsyntax-only", "-w", "-I", str(root / "utilities"),
                             str(root / p)], capture_output=True).returncode == 0
        if ok:
            out.append(root / p)
        else:
            print(f"left out (clang cannot compile it): {p}", file=sys.stderr)
    return out + write_programs(own)


def compile_suite(cc: str, files: list[Path], util: Path, env: dict, out: Path) -> float:
    t0 = time.perf_counter()
    for f in files:
        subprocess.run([cc, "-O3", "-DSTANDARD_DATASET", "-DPOLYBENCH_TIME", "-w",
                        "-Wno-unknown-pragmas", "-I", str(util), "-I", str(f.parent), "-c",
                        str(f), "-o", str(out / (f.stem + ".o"))], env=env, check=True,
                       capture_output=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default="/usr/bin/clang-14")
    ap.add_argument("--root", type=Path,
                    default=ROOT.parent / "shared" / "datasets" / "polybench-acc" / "OpenMP")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--md", type=Path, default=None)
    args = ap.parse_args(argv)
    util = args.root / "utilities"
    base = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    times = {"clang": [], "mirecc": []}
    applied = []
    with tempfile.TemporaryDirectory(prefix="nest-ct-") as tmp:
        tmp = Path(tmp)
        (tmp / "out").mkdir()
        files = sources(args.root, tmp / "own", args.cc)
        mirecc = str(BIN / "mirecc")
        for r in range(args.repeats):
            for side in (("clang", "mirecc") if r % 2 == 0 else ("mirecc", "clang")):
                env = dict(base)
                if side == "mirecc":
                    cache = tmp / f"cache{r}"
                    env.update(MIRECC_CC=args.cc, MIRECC_APPLY_LOOP_NESTS="1",
                               MIRECC_CACHE_DIR=str(cache))
                t = compile_suite(args.cc if side == "clang" else mirecc, files, util, env,
                                  tmp / "out")
                times[side].append(t)
                if side == "mirecc":
                    st = subprocess.run([str(BIN / "mire"), "stats", "--json"], env=env,
                                        capture_output=True, text=True).stdout
                    applied.append(json.loads(st or "{}").get("tus.applied", 0))
                    shutil.rmtree(cache, ignore_errors=True)
                print(f"round {r + 1}/{args.repeats} {side}: {t:.2f} s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    version = subprocess.run([args.cc, "--version"], capture_output=True,
                             text=True).stdout.splitlines()[0]
    text = (f"# Compile time with the loop-nests task on: a loop-heavy suite\n\n"
            f"Written by `benchmarks/nest_compile_time.py --repeats {args.repeats}`: the "
            f"{len(files)} files (PolyBench-ACC's OpenMP sources as C, no -fopenmp, and "
            f"mirecc's own loop nests), `-O3 -c` one after the other, {version}, {platform.machine()} with {os.cpu_count()} cores; "
            f"mirecc with MIRECC_APPLY_LOOP_NESTS=1 and an empty result cache each round, its "
            f"server on; sides alternating.\n\n"
            f"| side | median s | min | max |\n|---|---:|---:|---:|\n" +
            "".join(f"| {k} | {med[k]:.2f} | {min(v):.2f} | {max(v):.2f} |\n"
                    for k, v in times.items()) +
            f"\nmirecc / clang: **{med['mirecc'] / med['clang']:.2f}x** (ratio of the "
            f"medians); TUs whose object a schedule changed per mirecc round: {applied}.\n")
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
