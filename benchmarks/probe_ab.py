"""What a configure probe costs through mirecc at two commits: the same
probes as ``benchmarks/probes.py`` (``-E``, ``-c -O2``, ``-c -Oz`` of a
three-line ``conftest.c``, each a fresh source), driven through
``python -m mirecc`` from a worktree of each commit, for a refactoring that
must leave the driver's path as it was.

Usage::

    .venv/bin/python benchmarks/probe_ab.py --before b99e3b2 [--after HEAD]
        [--rounds 30] [--cc /usr/bin/clang-14] [--md docs/results/probe-ab.md]

Protocol: both trees' modules compiled to bytecode first (a call must not
pay for compiling them); ``--rounds`` rounds, in each every probe kind once
per side, the sides alternating (``before`` first in odd rounds); each call
timed alone, wall milliseconds from process start to exit; median, min and
max.  mirecc runs with its defaults, its own empty cache per side, in
process (no server).  Machine: whatever runs it (named in the output).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = (("-E",), ("-c", "-O2"), ("-c", "-Oz"))


def worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(where),
                    rev], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(where / "mirecc")],
                   check=True, stdout=subprocess.DEVNULL)
    return where


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", required=True, help="the commit to compare against")
    p.add_argument("--after", default="HEAD")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--cc", default="/usr/bin/clang-14")
    p.add_argument("--md", type=Path, default=None, help="also write the table to this page")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirecc-probe-ab-") as tmp:
        work = Path(tmp)
        trees = {}
        try:
            for side in ("before", "after"):
                trees[side] = worktree(getattr(args, side), work / side)
            times = {side: {kind: [] for kind in KINDS} for side in trees}
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for kind in KINDS:
                    for side in order:
                        src = work / f"conftest-{side}-{r}-{kind[-1]}.c"
                        src.write_text("int main(void) {\n  return 0;\n}\n")
                        env = {k: v for k, v in os.environ.items()
                               if not k.startswith("MIRECC_")}
                        env.update(PYTHONPATH=str(trees[side]), MIRECC_CC=args.cc,
                                   MIRECC_SERVER="0",
                                   XDG_CACHE_HOME=str(work / f"cache-{side}"))
                        cmd = [sys.executable, "-m", "mirecc", *kind, str(src), "-o",
                               str(work / f"out-{side}")]
                        start = time.perf_counter()
                        subprocess.run(cmd, cwd=trees[side], env=env, check=True,
                                       capture_output=True)
                        times[side][kind].append(1000 * (time.perf_counter() - start))
                print(f"\rround {r + 1}/{args.rounds}", end="", file=sys.stderr)
            print(file=sys.stderr)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                str(tree)], check=False)
    sys.path.insert(0, str(REPO))
    from mirecc.util.fsutil import atomic_write_bytes
    from mirecc.util.machine import cpu_model

    lines = [f"{cpu_model()}, {os.cpu_count()} cores; {args.cc}; {args.rounds} rounds, sides "
             f"alternating; before {args.before}, after {args.after}; wall ms from process "
             f"start to exit: median (min-max)", "",
             "| probe | before | after | after/before |", "|---|---:|---:|---:|"]
    for kind in KINDS:
        b, a = times["before"][kind], times["after"][kind]
        lines.append(f"| `{' '.join(kind)}` | {statistics.median(b):.1f} "
                     f"({min(b):.1f}-{max(b):.1f}) | {statistics.median(a):.1f} "
                     f"({min(a):.1f}-{max(a):.1f}) "
                     f"| {statistics.median(a) / statistics.median(b):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.md:
        command = " ".join(["benchmarks/probe_ab.py", *(argv or sys.argv[1:])])
        atomic_write_bytes(args.md, (f"# A configure probe's cost at two commits\n\n"
                                     f"Written by `.venv/bin/python {command}`.\n\n"
                                     + text).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
