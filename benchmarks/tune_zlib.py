"""``mire tune`` on a real project: Debian's zlib, its own ``minigzip``
compressing a fixed input, then the profile applied by a rebuild and
checked apart.

    .venv/bin/python benchmarks/tune_zlib.py [--budget 60] [--repeats 3] [--check 10]
                                             [--save-profile examples/zlib/mirecc.profile]

Protocol
--------
* Source: ``apt-get source zlib`` (Debian bookworm, fetched once into
  ``.work/src``), copied to ``--work``; ``./configure --static`` with the
  real clang.
* Input: 24 MiB made here, the same every time: zlib's own C sources
  repeated, interleaved with seeded pseudo-random words (compressible, not
  trivially).  The run is ``./minigzip -6 < input | cksum``: its output is
  the compressed stream's checksum, so a changed output is caught.
* The tune: ``mire tune --build "make -B CC=mirecc CFLAGS=-O3 minigzip"
  --run ... --artifact minigzip --budget B --repeats R`` with the shipped
  heads (perf picks the loops when it can sample the run; the best build
  and the candidate alternate).
* Checked apart from the tune's own timings: minigzip built by plain
  clang -O3 and by mirecc -O3 with the profile (the rebuild applying it,
  ``MIRECC_PROFILE``), outputs compared, ``--check`` runs each
  alternating; median (min-max) and the ratio of the medians.  The
  rebuild's ``--explain`` lines that name the profile are printed.

Writes ``tune_zlib.json`` in the work folder; ``--save-profile`` copies the
profile (sources named relative to the zlib tree) to a path in the repo.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from real_projects import fetch_source   # noqa: E402

INPUT_MIB = 24
RUN = "./minigzip -6 < ../input.bin | cksum"


def make_input(tree: Path, path: Path) -> None:
    rng = random.Random(19)
    sources = b"".join(p.read_bytes() for p in sorted(tree.glob("*.c")))
    words = [bytes(rng.choice(b"etaoinshrdlucmfw") for _ in range(rng.randint(2, 9)))
             for _ in range(4000)]
    out = bytearray()
    while len(out) < INPUT_MIB * 2**20:
        out += sources[:rng.randint(1, len(sources))]
        out += b" ".join(rng.choice(words) for _ in range(rng.randint(500, 5000)))
    path.write_bytes(bytes(out[:INPUT_MIB * 2**20]))


def sh(command: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", type=int, default=10)
    parser.add_argument("--cc", default="/usr/bin/clang-14")
    parser.add_argument("--work", default=str(ROOT / ".work" / "tune-zlib"))
    parser.add_argument("--save-profile", default="")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = fetch_source("zlib", ROOT / ".work" / "src")
    tree = work / "zlib"
    shutil.copytree(source, tree, symlinks=True)
    make_input(tree, work / "input.bin")
    sh("./configure --static", tree, CC=args.cc)

    mirecc = BIN / "mirecc"
    build = f"make -B CC={mirecc} CFLAGS=-O3 minigzip"
    started = time.perf_counter()
    tune = subprocess.run([str(BIN / "mire"), "tune", "--build", build, "--run", RUN,
                           "--budget", str(args.budget), "--repeats", str(args.repeats),
                           "--artifact", "minigzip", "--work", "../tune-state",
                           "--profile", "mirecc.profile"],
                          cwd=tree, capture_output=True, text=True)
    tune_s = time.perf_counter() - started
    print(tune.stderr, file=sys.stderr)
    if tune.returncode != 0:
        print(f"mire tune failed ({tune.returncode})", file=sys.stderr)
        return 1
    profile = tree / "mirecc.profile"
    kept = [ln for ln in profile.read_text().splitlines() if ln.strip() and not ln.startswith("#")]

    # checked apart: plain clang -O3, then the rebuild that applies the profile
    sh(f"make -B CC={args.cc} CFLAGS=-O3 minigzip && cp minigzip ../minigzip.plain", tree)
    rebuild = sh(f"make -B CC='{mirecc} --explain' CFLAGS=-O3 minigzip && "
                 f"cp minigzip ../minigzip.tuned", tree, MIRECC_PROFILE=str(profile))
    applied = [ln for ln in (rebuild.stderr + rebuild.stdout).splitlines() if "profile" in ln]
    variants = ("plain", "tuned")
    run = {v: RUN.replace("./minigzip", f"./minigzip.{v}").replace("../input.bin", "input.bin")
           for v in variants}
    outputs = {v: sh(run[v], work).stdout for v in variants}
    times = {v: [] for v in variants}
    for i in range(args.check):
        for v in (variants if i % 2 == 0 else variants[::-1]):
            t0 = time.perf_counter()
            sh(run[v], work)
            times[v].append(time.perf_counter() - t0)
    med = {v: statistics.median(t) for v, t in times.items()}
    result = {"machine": f"{platform.processor() or platform.machine()}, "
                         f"{os.cpu_count()} cores",
              "compiler": args.cc, "budget": args.budget, "repeats": args.repeats,
              "kept": kept, "applied_lines": applied, "tune_seconds": tune_s,
              "same_output": outputs["plain"] == outputs["tuned"], "times": times,
              "speedup": med["plain"] / med["tuned"], "tune_log": tune.stderr.splitlines()}
    (work / "tune_zlib.json").write_text(json.dumps(result, indent=1))
    print(f"zlib {source.name}: minigzip -6 on {INPUT_MIB} MiB; {len(kept)} decision(s) kept "
          f"in {tune_s:.0f} s (budget {args.budget}, {args.repeats} runs per candidate)")
    for ln in kept:
        print(f"  {ln}")
    print("rebuild with the profile (--explain):")
    for ln in applied:
        print(f"  {ln}")
    for v in variants:
        t = times[v]
        print(f"  {v:5s}: median {med[v]:.4f} s (min {min(t):.4f}, max {max(t):.4f}), "
              f"{args.check} runs")
    print(f"same output: {'yes' if result['same_output'] else 'NO'}; "
          f"speedup of the tuned build over clang -O3: {result['speedup']:.3f}x")
    if args.save_profile:
        dest = ROOT / args.save_profile
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(profile, dest)
        print(f"profile saved to {dest}")
    return 0 if result["same_output"] else 1


if __name__ == "__main__":
    sys.exit(main())
