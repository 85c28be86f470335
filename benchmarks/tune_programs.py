"""``mire tune`` on small kernels, each tuned several times, then re-measured apart.

    .venv/bin/python benchmarks/tune_programs.py [--budget 10] [--repeats 2]
        [--tunes 3] [--check 10] [--cc clang-14] [--out docs/results/tune-kernels.md]

Protocol
--------
* The kernels: the bundled programs (``benchmarks/programs``) and the two of
  ``benchmarks/tune_kernels``; none is in a head's training data.
* Each kernel is tuned ``--tunes`` times, each time from scratch in its own
  work folder: ``mire tune --build "mirecc -O3 -c K.c && clang K.o -o K -lm"
  --run ./K --artifact K --budget B --repeats R`` with the shipped heads
  (the tune keeps a candidate only when its slowest run beats the best's
  median, and re-checks what it kept against the baseline at the end).
* Each tune's profile is then applied by a rebuild (``MIRECC_PROFILE``),
  apart from the tune's own timings (which chose the winners): the plain
  clang -O3 build and the tuned build run ``--check`` times each,
  alternating; the outputs must be the same.  Reported per tune: the
  decisions kept and the ratio of the medians (min and max beside);
  identical binaries are reported as 1.000x without timing.

Writes the table to ``--out`` (and stdout) and the raw times beside it as JSON.
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
import time
from pathlib import Path

from mirecc.util.machine import cpu_model

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KERNEL_DIRS = (ROOT / "benchmarks" / "programs", ROOT / "benchmarks" / "tune_kernels")


def check_apart(work: Path, name: str, cc: str, profile: Path, runs: int) -> dict:
    """Plain clang -O3 against mirecc -O3 with ``profile``, alternating."""
    subprocess.run([cc, "-O3", f"{name}.c", "-o", f"{name}.plain", "-lm"], cwd=work, check=True)
    subprocess.run(f"MIRECC_PROFILE={profile} {BIN / 'mirecc'} -O3 -c {name}.c -o {name}.t.o "
                   f"&& {cc} {name}.t.o -o {name}.tuned -lm", shell=True, cwd=work, check=True)
    outputs = {v: subprocess.run([f"./{name}.{v}"], cwd=work, capture_output=True).stdout
               for v in ("plain", "tuned")}
    same_binary = (work / f"{name}.plain").read_bytes() == (work / f"{name}.tuned").read_bytes()
    times: dict[str, list[float]] = {"plain": [], "tuned": []}
    if not same_binary:
        for r in range(runs):
            for variant in (("plain", "tuned") if r % 2 == 0 else ("tuned", "plain")):
                t0 = time.perf_counter()
                subprocess.run([f"./{name}.{variant}"], cwd=work, capture_output=True)
                times[variant].append(time.perf_counter() - t0)
    speedup = 1.0 if same_binary else \
        statistics.median(times["plain"]) / statistics.median(times["tuned"])
    return {"same_output": outputs["plain"] == outputs["tuned"], "same_binary": same_binary,
            "times": times, "speedup": speedup}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tunes", type=int, default=3, help="tunes per kernel, each from scratch")
    parser.add_argument("--check", type=int, default=10, help="alternating runs per side")
    parser.add_argument("--cc", default="clang-14")
    parser.add_argument("--kernels", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--work", default=str(ROOT / ".work" / "tune-programs"))
    parser.add_argument("--out", default=None, help="also write the table here (markdown)")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    wanted = {k for k in args.kernels.split(",") if k}
    sources = sorted((s for d in KERNEL_DIRS for s in d.glob("*.c")
                      if not wanted or s.stem in wanted), key=lambda p: p.stem)
    rows = []
    for number, source in enumerate(sources, 1):
        name = source.stem
        shutil.copy(source, work / source.name)
        build = (f"{BIN / 'mirecc'} -O3 -c {name}.c -o {name}.o && "
                 f"{args.cc} {name}.o -o {name} -lm")
        for tune in range(1, args.tunes + 1):
            profile = work / f"{name}.{tune}.profile"
            started = time.perf_counter()
            proc = subprocess.run([str(BIN / "mire"), "tune", "--build", build, "--run",
                                   f"./{name}", "--artifact", name, "--budget", str(args.budget),
                                   "--repeats", str(args.repeats), "--work", f"w-{name}-{tune}",
                                   "--profile", str(profile)],
                                  cwd=work, capture_output=True, text=True)
            tune_s = time.perf_counter() - started
            if proc.returncode != 0:
                print(f"{name}: mire tune failed: {proc.stderr[-400:]}", file=sys.stderr)
                return 1
            kept = [ln.split("#")[0].split()[2:5:2] for ln in profile.read_text().splitlines()
                    if ln.strip() and not ln.startswith("#")]
            checked = check_apart(work, name, args.cc, profile, args.check)
            rows.append({"kernel": name, "tune": tune, "kept": kept, "tune_seconds": tune_s,
                         "log": proc.stderr.splitlines()[-3:], **checked})
            print(f"[{number}/{len(sources)}] {name} tune {tune}: {len(kept)} kept, "
                  f"{checked['speedup']:.3f}x re-measured", file=sys.stderr)
    lines = [f"# mire tune on {len(sources)} small kernels",
             "",
             f"Machine: {cpu_model()}, {platform.system()} ({os.cpu_count()} cores); "
             f"compiler {args.cc}. Command: `.venv/bin/python benchmarks/tune_programs.py "
             f"--budget {args.budget} --repeats {args.repeats} --tunes {args.tunes} "
             f"--check {args.check}`.",
             "",
             f"Each kernel tuned {args.tunes} times from scratch (budget {args.budget}, "
             f"{args.repeats} runs per candidate, alternating with the best build), then "
             f"rebuilt with the profile and re-measured apart: plain clang -O3 against the "
             f"tuned build, {args.check} alternating runs each, ratio of the medians "
             f"(identical binaries: 1.000x, not timed).",
             "",
             "| kernel | tune | kept (site value) | same output | clang -O3 median (min-max) "
             "| tuned median (min-max) | speedup |",
             "|---|---:|---|---|---:|---:|---:|"]
    for r in rows:
        cells = []
        for v in ("plain", "tuned"):
            t = r["times"][v]
            cells.append(f"{statistics.median(t):.4f} s ({min(t):.4f}-{max(t):.4f})" if t
                         else "same binary")
        kept = "; ".join(" ".join(k) for k in r["kept"]) or "-"
        lines.append(f"| {r['kernel']} | {r['tune']} | {kept} | "
                     f"{'yes' if r['same_output'] else 'NO'} | {cells[0]} | {cells[1]} | "
                     f"{r['speedup']:.3f}x |")
    speedups = [r["speedup"] for r in rows]
    lines += ["", f"Geometric mean {statistics.geometric_mean(speedups):.3f}x over "
                  f"{len(rows)} tunes; slowest {min(speedups):.3f}x; "
                  f"{sum(1 for r in rows if r['kept'])} tunes kept a decision."]
    text = "\n".join(lines) + "\n"
    print(text)
    (work / "tune_programs.json").write_text(json.dumps(rows, indent=1))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["same_output"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
