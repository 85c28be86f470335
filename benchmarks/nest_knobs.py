#!/usr/bin/env python3
"""Which loop-nest knobs move run time on this machine: PolyBench-ACC's
OpenMP kernels built sequentially (no ``-fopenmp``: the pragmas are
ignored) with clang ``-O3`` and each configuration below, timed with the
programs' own timer (``-DPOLYBENCH_TIME``), outputs checked.

    .venv/bin/python benchmarks/nest_knobs.py --cc clang-14 --size STANDARD --repeats 3 \
        --md docs/results/nest-knobs.md

Protocol: every (program, configuration) is built twice: a timing build at
``--size`` and a check build at ``--check-size`` with
``-DPOLYBENCH_DUMP_ARRAYS`` (the arrays printed to stderr), whose output is
compared byte for byte with clang ``-O3``'s (a configuration that changes
it is "changed"; PolyBench's arrays are doubles printed with %0.2lf).
Then ``--repeats`` rounds: each round runs every program's configurations
once, one process at a time, pinned to CPU 0, in an order rotated per
round; the median per (program, configuration), min and max kept.
Results are appended to ``--work``/runs.jsonl as they come (a rerun skips
what is there), the machine and compiler recorded.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: name -> clang flags beside -O3
CONFIGS = {
    "llvm": [],
    "polly": ["-mllvm", "-polly"],
    "polly-no-matmul": ["-mllvm", "-polly", "-mllvm", "-polly-pattern-matching-based-opts=false"],
    "polly-tile64": ["-mllvm", "-polly", "-mllvm", "-polly-default-tile-size=64"],
    "polly-tile128-2nd": ["-mllvm", "-polly", "-mllvm", "-polly-default-tile-size=128",
                          "-mllvm", "-polly-2nd-level-tiling"],
    "polly-stripmine": ["-mllvm", "-polly", "-mllvm", "-polly-vectorizer=stripmine"],
    "unroll-and-jam": ["-mllvm", "-enable-unroll-and-jam"],
    "loop-distribute": ["-mllvm", "-enable-loop-distribute"],
}


def programs(root: Path) -> list[Path]:
    listed = (root / "utilities" / "benchmark_list").read_text().split()
    return [root / p for p in listed if (root / p).is_file()]


def build(cc: str, src: Path, root: Path, flags: list[str], defines: list[str], out: Path):
    cmd = [cc, "-O3", *flags, *defines, "-Wno-unknown-pragmas", "-w",
           "-I", str(root / "utilities"), "-I", str(src.parent), str(src),
           str(root / "utilities" / "polybench.c"), "-lm", "-o", str(out)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, round(time.monotonic() - t0, 3), proc.stderr[-300:]


def run_timed(exe: Path, timeout: float) -> float | None:
    try:
        proc = subprocess.run(["taskset", "-c", "0", str(exe)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"([0-9]+\.[0-9]+)\s*$", proc.stdout.strip())
    return float(m[1]) if proc.returncode == 0 and m else None


def checksum(exe: Path, timeout: float) -> str | None:
    try:
        proc = subprocess.run([str(exe)], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return hashlib.sha256(proc.stderr).hexdigest()[:16] if proc.returncode == 0 else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default="clang-14")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2]
                    / "shared" / "datasets" / "polybench-acc" / "OpenMP")
    ap.add_argument("--size", default="STANDARD")
    ap.add_argument("--check-size", default="SMALL")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--work", type=Path, default=Path(".work/nest-knobs"))
    ap.add_argument("--md", type=Path, default=None)
    args = ap.parse_args(argv)
    configs = {c: CONFIGS[c] for c in args.configs.split(",")}
    progs = programs(args.root)
    if args.only:
        progs = [p for p in progs if p.stem in args.only.split(",")]
    work = args.work
    (work / "bin").mkdir(parents=True, exist_ok=True)
    runs = work / "runs.jsonl"
    done = [json.loads(x) for x in runs.read_text().splitlines()] if runs.is_file() else []
    version = subprocess.run([args.cc, "--version"], capture_output=True, text=True).stdout
    meta = {"cc": args.cc, "version": version.splitlines()[0], "size": args.size,
            "check_size": args.check_size, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "configs": configs}
    (work / "machine.json").write_text(json.dumps(meta, indent=1))

    jobs = []
    for p in progs:
        for c, flags in configs.items():
            for kind, size, extra in (("time", args.size, ["-DPOLYBENCH_TIME"]),
                                      ("check", args.check_size, ["-DPOLYBENCH_DUMP_ARRAYS"])):
                exe = work / "bin" / f"{p.stem}.{c}.{kind}"
                if not exe.exists():
                    jobs.append((p, c, flags, [f"-D{size}_DATASET", *extra], exe))
    built = {}
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for n, ((p, c, _, _, exe), res) in enumerate(zip(
                jobs, pool.map(lambda j: build(args.cc, j[0], args.root, j[2], j[3], j[4]),
                               jobs))):
            built[exe.name] = res
            print(f"\rbuilt {n + 1}/{len(jobs)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    sums = {}
    for p in progs:
        for c in configs:
            exe = work / "bin" / f"{p.stem}.{c}.check"
            sums[(p.stem, c)] = checksum(exe, args.timeout) if exe.exists() else None
    have = {(d["program"], d["config"], d["round"]) for d in done}
    with runs.open("a") as fh:
        for r in range(args.repeats):
            names = list(configs)
            shift = r % len(names)
            order = names[shift:] + names[:shift]
            for p in progs:
                for c in order:
                    if (p.stem, c, r) in have:
                        continue
                    exe = work / "bin" / f"{p.stem}.{c}.time"
                    t = run_timed(exe, args.timeout) if exe.exists() else None
                    rec = {"program": p.stem, "config": c, "round": r, "seconds": t}
                    done.append(rec)
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
            print(f"round {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    # the table
    times: dict = {}
    for d in done:
        if d["seconds"]:
            times.setdefault((d["program"], d["config"]), []).append(d["seconds"])
    lines = [f"# Loop-nest knobs on this machine: PolyBench-ACC kernels, sequential",
             "", f"Written by `benchmarks/nest_knobs.py --cc {args.cc} --size {args.size} "
             f"--repeats {args.repeats}`. {meta['version']}; {meta['cpus']} CPUs "
             f"({meta['machine']}), runs pinned to CPU 0, configurations rotated per round; "
             f"the programs' own timer (POLYBENCH_TIME), median of {args.repeats} (min-max in "
             f"runs.jsonl). Speedup over clang -O3 (`llvm`); `!` = output differs from "
             f"-O3's at {args.check_size} (arrays dumped); `-` = no time.", "",
             "| program | -O3 s | " + " | ".join(c for c in configs if c != "llvm") + " |",
             "|---|---:|" + "---:|" * (len(configs) - 1)]
    per_config: dict = {c: [] for c in configs}
    best = []
    for p in progs:
        base = times.get((p.stem, "llvm"))
        if not base:
            lines.append(f"| {p.stem} | - |" + " - |" * (len(configs) - 1))
            continue
        b = statistics.median(base)
        cells, speeds = [], {"llvm": 1.0}
        for c in configs:
            if c == "llvm":
                continue
            t = times.get((p.stem, c))
            changed = sums.get((p.stem, c)) != sums.get((p.stem, "llvm"))
            if not t:
                cells.append("-")
                continue
            s = b / statistics.median(t)
            if not changed:
                speeds[c] = s
                per_config[c].append(s)
            cells.append(f"{s:.2f}" + ("!" if changed else ""))
        best.append(max(speeds.values()))
        lines.append(f"| {p.stem} | {b:.3f} | " + " | ".join(cells) + " |")

    def gm(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    lines += ["", "| configuration | geomean over -O3 (same outputs) | below 0.95x | above 1.05x |",
              "|---|---:|---:|---:|"]
    for c, xs in per_config.items():
        if c != "llvm" and xs:
            lines.append(f"| {c} | {gm(xs):.3f} | {sum(x < 0.95 for x in xs)} | "
                         f"{sum(x > 1.05 for x in xs)} |")
    lines += ["", f"Best configuration per program (oracle over these, outputs unchanged): "
                  f"geomean {gm(best):.3f}x over -O3 on {len(best)} programs."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
