"""Code size on a real project: bzip2 1.0.8 (``apt-get source``) built by
its own Makefile with ``CFLAGS=-Oz -g``, once with plain clang and once
with mirecc at ``MIRECC_SIZE_SEARCH=K``; total ``.text`` bytes of the
objects, per object and in all, and whether bzip2's own ``make test``
(part of its default target) passed.

    .venv/bin/python benchmarks/code_size.py [--k 5] [--work DIR]

Code size is deterministic: one build per side.  The compiler is the one
mirecc drives (clang-14 after ``scripts/setup.sh``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402  (fetch helpers)

from mirecc import stats  # noqa: E402
from mirecc.config import Config  # noqa: E402
from mirecc.tasks.code_size.build import text_bytes  # noqa: E402

CFLAGS = "-Wall -Winline -Oz -g -D_FILE_OFFSET_BITS=64"


def build(tree: Path, cc: str, env: dict) -> tuple[dict, bool]:
    """{object: .text bytes} and whether make (with its tests) passed."""
    proc = subprocess.run(["make", "-j1", f"CC={cc}", f"CFLAGS={CFLAGS}"], cwd=tree, env=env,
                          capture_output=True, text=True)
    sizes = {p.name: text_bytes(str(p)) for p in sorted(tree.glob("*.o"))}
    return sizes, proc.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=5, help="MIRECC_SIZE_SEARCH (default 5)")
    parser.add_argument("--work", type=Path, default=rp.DEFAULT_WORK,
                        help=f"work directory, sources under WORK/src (default: {rp.DEFAULT_WORK})")
    args = parser.parse_args()
    src = rp.fetch_source("bzip2", args.work / "src", logs=args.work / "logs")
    mirecc = str(rp.find_mirecc())
    cc = rp.real_compiler(Path(mirecc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")
           and k not in ("CC", "CFLAGS", "MAKEFLAGS")}
    results = {}
    with tempfile.TemporaryDirectory(prefix="mirecc-code-size-") as tmp:
        for side, compiler, extra in (("clang", cc, {}),
                                      ("mirecc", mirecc, {"MIRECC_SIZE_SEARCH": str(args.k),
                                                          "MIRECC_CACHE_DIR": f"{tmp}/cache"})):
            tree = Path(tmp) / side
            shutil.copytree(src, tree, symlinks=True)
            print(f"building bzip2 with {side} ...", file=sys.stderr)
            results[side] = build(tree, compiler, {**env, **extra})
        counts = stats.read(Config(cache_dir=f"{tmp}/cache"))
    (plain, plain_ok), (ours, ours_ok) = results["clang"], results["mirecc"]
    print(f"bzip2 ({src.name}), CFLAGS={CFLAGS}, {cc}, MIRECC_SIZE_SEARCH={args.k}\n")
    print("| object | clang -Oz .text | mirecc .text | change |\n|---|---:|---:|---:|")
    def change(a, b):
        return f"{100 * (b - a) / a:+.1f}%" if a else "-"
    for name in plain:
        a, b = plain[name], ours.get(name, 0)
        print(f"| {name} | {a} | {b} | {change(a, b)} |")
    a, b = sum(plain.values()), sum(ours.values())
    print(f"| **total** | {a} | {b} | {change(a, b)} |")
    print(f"\nmirecc built candidates for {counts.get('verified.code-size', 0)} TUs; a "
          f"candidate was smaller in {counts.get('verified.code-size.improved', 0)} "
          f"(mire stats)")
    print(f"make and its tests: clang {'passed' if plain_ok else 'FAILED'}, "
          f"mirecc {'passed' if ours_ok else 'FAILED'}")
    return 0 if plain_ok and ours_ok else 1


if __name__ == "__main__":
    sys.exit(main())
