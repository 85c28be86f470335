"""Functions in versions (``adapt_loops``) on a real library: Debian's zlib
(the source ``scripts/setup.sh`` fetches), built by clang -O3 and by mirecc
-O3 with ``MIRECC_ADAPT_LOOPS=1``.

    .venv/bin/python benchmarks/adapt_loops_zlib.py [--rounds 12] [--out docs/results/adapt-loops-zlib.md]

Per side: ``./configure && make`` (wall time, the result cache off),
``make test``, the text bytes of ``libz.so`` and of the static
``minigzip``; then ``minigzip`` compressing a 16 MB text file and
decompressing it, ``--rounds`` rounds each, sides alternating, the adapted
build from an empty verdict store (first run, steady state = the second
half's median, slowest run, against clang's median), outputs compared; and
what the runtime kept per function (``mire adapt``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.cli.bench import fetched_library  # noqa: E402
from mirecc.frontend.toolchain import installed_driver  # noqa: E402
from mirecc.runtime.store import read_store  # noqa: E402
from mirecc.util.machine import cpu_model  # noqa: E402

CLANG = "clang-14"


def text_bytes(path: Path) -> int:
    out = subprocess.run(["size", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


def build(tree: Path, side: str, work: Path) -> dict:
    src = work / side
    shutil.copytree(tree, src)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    cc = CLANG
    if side == "adapt":
        cc = installed_driver("mirecc")
        env.update(MIRECC_CC=CLANG, MIRECC_CACHE="0", MIRECC_ADAPT_LOOPS="1",
                   MIRECC_ADAPT_STORE=str(work / "test-store.txt"))
    t0 = time.perf_counter()
    for cmd in (["./configure"], ["make", "-j2"]):
        subprocess.run(cmd, cwd=src, env={**env, "CC": cc, "CFLAGS": "-O3"}, check=True,
                       capture_output=True)
    seconds = time.perf_counter() - t0
    test = subprocess.run(["make", "test"], cwd=src, env=env, capture_output=True, text=True)
    lib = next(src.glob("libz.so.*.*"))
    return {"build_s": seconds, "tests": test.stdout.count("test OK"),
            "libz": text_bytes(lib), "minigzip": text_bytes(src / "minigzip"),
            "exe": str(src / "minigzip")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "adapt-loops-zlib.md")
    args = p.parse_args(argv)
    tree = fetched_library()
    if tree is None:
        print("no zlib source here (scripts/setup.sh fetches it into .work/src/zlib)",
              file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="adapt-zlib-"))
    sides = {s: build(tree, s, work) for s in ("clang", "adapt")}
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9)))
             for _ in range(5000)]
    data = "".join(rng.choice(words) + (" " if i % 12 else "\n")
                   for i in range(2_500_000)).encode()
    packed = subprocess.run([sides["clang"]["exe"], "-c"], input=data, capture_output=True,
                            check=True).stdout
    store = work / "run-store.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env["MIRECC_ADAPT_STORE"] = str(store)
    rows = []
    for what, flags, stdin in (("compress 16 MB", ["-c"], data),
                               ("decompress", ["-d", "-c"], packed)):
        times, outputs = {"clang": [], "adapt": []}, {"clang": set(), "adapt": set()}
        for r in range(args.rounds):
            for side in (("clang", "adapt") if r % 2 == 0 else ("adapt", "clang")):
                t0 = time.perf_counter()
                out = subprocess.run([sides[side]["exe"], *flags], input=stdin, env=env,
                                     capture_output=True, check=True).stdout
                times[side].append(time.perf_counter() - t0)
                outputs[side].add(hashlib.sha256(out).hexdigest())
        base, a = statistics.median(times["clang"]), times["adapt"]
        rows.append(f"| {what} | {base:.3f} | {base / a[0]:.3f}x | "
                    f"{base / statistics.median(a[len(a) // 2:]):.3f}x | {base / max(a):.3f}x | "
                    f"{'yes' if outputs['clang'] == outputs['adapt'] else 'NO'} |")
    cells = read_store(store) if store.exists() else []
    kept = sorted({c.name for c in cells if c.phase == 1 and c.best != "default"})
    decided = sum(c.phase == 1 for c in cells)
    c, a = sides["clang"], sides["adapt"]
    lines = [
        "# Functions in versions on a real library: zlib", "",
        f"Written by `benchmarks/adapt_loops_zlib.py` ({time.strftime('%Y-%m-%d')}). Machine: "
        f"{cpu_model()}, {os.cpu_count()} cores; {tree.name} built by {CLANG} -O3 and by mirecc "
        f"-O3 with `MIRECC_ADAPT_LOOPS=1` (3 versions per function, the result cache off). "
        f"Runs: `minigzip` (static), {args.rounds} rounds, sides alternating, the adapted build "
        f"from an empty store; first / steady (median of the second half) / slowest run: "
        f"clang's median over the adapted run's.", "",
        "| | clang | mirecc, adapt_loops |", "|---|---|---|",
        f"| configure + make (s) | {c['build_s']:.1f} | {a['build_s']:.1f} |",
        f"| `make test` | {c['tests']} of 3 'test OK' | {a['tests']} of 3 'test OK' |",
        f"| text bytes, libz.so | {c['libz']} | {a['libz']} ({a['libz'] / c['libz']:.2f}x) |",
        f"| text bytes, minigzip | {c['minigzip']} | {a['minigzip']} "
        f"({a['minigzip'] / c['minigzip']:.2f}x) |", "",
        "| run | clang median (s) | first | steady | slowest | same output |",
        "|---|---|---|---|---|---|", *rows, "",
        f"Sites that ran (function and input size): {len(cells)}; decided: {decided}; a "
        f"version other than LLVM's kept: {len(kept)}"
        + (f" ({', '.join(kept)})" if kept else "") + "."]
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
