"""What a configure probe costs through mirecc: ``-E``, ``-c`` and a compile
and link of a three-line ``conftest.c``, each with a new source (as
configure writes one per check), timed against clang.

Usage::

    .venv/bin/python benchmarks/probes.py [--cc clang-14] [--rounds 20]
        [--md docs/results/code-size-probes.md]

Protocol: ``--rounds`` rounds; in each, every probe kind runs once per side,
the sides alternating (clang first in odd rounds), each call timed alone
(wall milliseconds from the start of the process to its exit; median,
min-max).  mirecc runs with its defaults (code size on at ``-Oz``, the
object gate on) and an empty cache of its own, so each ``-c`` probe is a
first compile: its own compile, the gate, and its object kept.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402  (spread, publish)

from mirecc.cli.bench import machine_description  # noqa: E402

MIRECC = str(Path(sys.executable).with_name("mirecc"))
KINDS = {"-E": ["-E"], "-c": ["-c"], "link": []}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cc", default="clang-14")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--md", type=Path)
    args = p.parse_args()
    cc = shutil.which(args.cc) or args.cc
    work = Path(tempfile.mkdtemp(prefix="mirecc-probes-"))
    env = {**os.environ, "MIRECC_CC": cc, "MIRECC_CACHE_DIR": str(work / "cache")}
    env.pop("MAKEFLAGS", None)
    sides = {"clang": [cc], "mirecc": [MIRECC]}
    times = {(kind, side): [] for kind in KINDS for side in sides}
    try:
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for kind, flags in KINDS.items():
                for side in order:
                    src = work / f"conftest{r}{kind[-1]}{side}.c"
                    src.write_text(f"#include <stdio.h>\nint probe_{r}_{side} = {r};\n"
                                   f"int main(void) {{ puts(\"ok\"); return 0; }}\n")
                    out = ["-o", str(src.with_suffix(".out"))] if kind != "-E" else []
                    cmd = [*sides[side], "-Oz", *flags, str(src), *out]
                    started = time.perf_counter()
                    subprocess.run(cmd, cwd=work, env=env, check=True,
                                   stdout=subprocess.DEVNULL)
                    times[kind, side].append(1e3 * (time.perf_counter() - started))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m = machine_description(cc)
    lines = [f"# Configure probes through mirecc, written by `benchmarks/probes.py "
             f"{' '.join(sys.argv[1:])}`", "",
             f"Machine: {m['cpu']}, {m['cores']} cores; {m['compiler']}; `-Oz`; mirecc's "
             f"defaults, an empty cache; {args.rounds} rounds, sides alternating; wall ms per "
             f"call, median (min-max).", "",
             "| probe | clang | mirecc | mirecc - clang | ratio |", "|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        c, mm = times[kind, "clang"], times[kind, "mirecc"]
        mc, mmed = statistics.median(c), statistics.median(mm)
        lines.append(f"| `{kind}` | {rp.spread(c, 0)} | {rp.spread(mm, 0)} | {mmed - mc:+.0f} | "
                     f"{mmed / mc:.2f}x |")
    started = time.perf_counter()
    for _ in range(10):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    lines += ["", f"The Python interpreter alone (`{Path(sys.executable).name} -c pass`, 10 "
                  f"runs): {100 * (time.perf_counter() - started):.0f} ms a call.", ""]
    rp.publish("\n".join(lines), args.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
