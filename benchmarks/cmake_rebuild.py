"""A CMake build through mirecc at ``-Oz``: zlib's own CMakeLists.txt (the
Makefile generator, whose rules ask clang for ``-MD -MT -MF`` dependency
files), configure, a first build, then ``make clean`` and a rebuild with the
cache the first build filled; against clang.

Usage::

    .venv/bin/python benchmarks/cmake_rebuild.py [--cc clang-14] [--rounds 3]
        [--work .work/cmake-rebuild] [--md docs/results/code-size-cmake.md]

Protocol: ``--rounds`` rounds, the sides alternating (clang first in odd
rounds); each round a fresh build folder and, for mirecc, an emptied cache
of its own; ``make -j2``; wall seconds, median (min-max).  After the
rebuild, mirecc's objects must be byte for byte those of its first build.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402

from mirecc.tu import stats  # noqa: E402
from mirecc.cli.bench import machine_description  # noqa: E402
from mirecc.taskapi.config import Config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MIRECC = str(Path(sys.executable).with_name("mirecc"))


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    started = time.monotonic()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def objects(build: Path) -> dict:
    return {str(p.relative_to(build)): p.read_bytes() for p in sorted(build.rglob("*.o"))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cc", default="clang-14")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work", type=Path, default=ROOT / ".work" / "cmake-rebuild")
    p.add_argument("--md", type=Path)
    args = p.parse_args()
    work = args.work.resolve()
    cc = shutil.which(args.cc) or args.cc
    src = rp.fetch_source("zlib", work / "src", logs=work / "logs")
    steps = ("configure", "first build", "rebuild")
    times = {(side, s): [] for side in ("clang", "mirecc") for s in steps}
    counters = {}
    for r in range(args.rounds):
        for side in (("clang", "mirecc") if r % 2 == 0 else ("mirecc", "clang")):
            build, cache, tree = work / "build" / side, work / "cache", work / "tree"
            for d in (build, cache, tree):
                shutil.rmtree(d, ignore_errors=True)
            build.mkdir(parents=True)
            # a fresh copy (zlib's CMakeLists.txt renames zconf.h in the source
            # tree); Debian's tarball lacks the Windows resource file it names
            shutil.copytree(src, tree, symlinks=True)
            (tree / "win32").mkdir(exist_ok=True)
            (tree / "win32" / "zlib1.rc").touch()
            env = {**os.environ, "CC": cc if side == "clang" else MIRECC,
                   "MIRECC_CC": cc, "MIRECC_CACHE_DIR": str(cache)}
            env.pop("MAKEFLAGS", None)
            times[side, "configure"].append(timed(
                ["cmake", "-G", "Unix Makefiles", "-DCMAKE_BUILD_TYPE=None",
                 "-DCMAKE_C_FLAGS=-Oz", str(tree)], build, env))
            times[side, "first build"].append(timed(["make", "-j2"], build, env))
            first = objects(build)
            subprocess.run(["make", "clean"], cwd=build, env=env, check=True,
                           stdout=subprocess.DEVNULL)
            times[side, "rebuild"].append(timed(["make", "-j2"], build, env))
            if side == "mirecc":
                if objects(build) != first:
                    raise SystemExit("mirecc's rebuild gave other objects than its first build")
                counters = stats.read(Config(cache_dir=str(cache)))
            rp.log(f"round {r + 1} {side}: " + ", ".join(
                f"{s} {times[side, s][-1]:.2f} s" for s in steps))
    m = machine_description(cc)
    lines = [f"# A CMake build (zlib) through mirecc, written by `benchmarks/cmake_rebuild.py "
             f"{' '.join(sys.argv[1:])}`", "",
             f"Machine: {m['cpu']}, {m['cores']} cores; {m['compiler']}; zlib "
             f"{rp.source_version(src)}, its CMakeLists.txt, `Unix Makefiles`, "
             f"`CMAKE_C_FLAGS=-Oz`, `make -j2`; mirecc's defaults; {args.rounds} rounds, sides "
             f"alternating; wall seconds, median (min-max).", "",
             "| step | clang | mirecc | mirecc / clang |", "|---|---:|---:|---:|"]
    for s in steps:
        c, mm = times["clang", s], times["mirecc", s]
        lines.append(f"| {s} | {rp.spread(c)} | {rp.spread(mm)} | "
                     f"{statistics.median(mm) / statistics.median(c):.2f}x |")
    shown = ("verified.code-size", "verified.code-size.not-searched",
             "verified.code-size.from-twin", "tus.object")
    lines += ["", "mirecc's counters in the last round (first build and rebuild): "
              + ", ".join(f"{k} {counters.get(k, 0)}" for k in shown)
              + "; the rebuild's objects are its first build's, byte for byte.", ""]
    rp.publish("\n".join(lines), args.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
