"""``mire tune`` on the bundled benchmark programs, then checked apart.

    .venv/bin/python benchmarks/tune_programs.py [--budget 40] [--repeats 5] [--check 10]

Protocol
--------
* Each program of ``benchmarks/programs`` is tuned alone in a work folder
  (``--work``, default ``.work/tune-programs``): ``mire tune --build
  "mirecc -O3 -c P.c && clang P.o -o P -lm" --run ./P --budget B --repeats R``
  with the shipped heads.
* Then, apart from the tune's own timings (which chose the winners), the
  program is built by plain clang -O3 and by mirecc -O3 with the profile,
  their outputs compared, and both run ``--check`` times, alternating;
  reported: median (min-max) of each and the ratio of the medians.

Prints a table; writes ``tune_programs.json`` in the work folder.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--check", type=int, default=10)
    parser.add_argument("--cc", default="clang-14")
    parser.add_argument("--work", default=str(ROOT / ".work" / "tune-programs"))
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows = []
    for source in sorted((ROOT / "benchmarks" / "programs").glob("*.c")):
        name = source.stem
        shutil.copy(source, work / source.name)
        build = (f"{BIN / 'mirecc'} -O3 -c {name}.c -o {name}.o && "
                 f"{args.cc} {name}.o -o {name} -lm")
        started = time.perf_counter()
        tune = subprocess.run([str(BIN / "mire"), "tune", "--build", build, "--run",
                               f"./{name}", "--budget", str(args.budget), "--repeats",
                               str(args.repeats), "--work", f"w-{name}", "--profile",
                               f"{name}.profile"], cwd=work, capture_output=True, text=True)
        tune_s = time.perf_counter() - started
        if tune.returncode != 0:
            print(f"{name}: mire tune failed: {tune.stderr[-300:]}", file=sys.stderr)
            return 1
        kept = [ln for ln in (work / f"{name}.profile").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
        subprocess.run([args.cc, "-O3", f"{name}.c", "-o", f"{name}.plain", "-lm"],
                       cwd=work, check=True)
        subprocess.run(f"MIRECC_PROFILE={name}.profile {BIN / 'mirecc'} -O3 -c {name}.c "
                       f"-o {name}.t.o && {args.cc} {name}.t.o -o {name}.tuned -lm",
                       shell=True, cwd=work, check=True)
        outputs = {v: subprocess.run([f"./{name}.{v}"], cwd=work, capture_output=True).stdout
                   for v in ("plain", "tuned")}
        times = {"plain": [], "tuned": []}
        for _ in range(args.check):
            for variant in times:
                t0 = time.perf_counter()
                subprocess.run([f"./{name}.{variant}"], cwd=work, capture_output=True)
                times[variant].append(time.perf_counter() - t0)
        med = {v: statistics.median(t) for v, t in times.items()}
        rows.append({"program": name, "kept": kept, "tune_seconds": tune_s,
                     "same_output": outputs["plain"] == outputs["tuned"],
                     "times": times, "speedup": med["plain"] / med["tuned"]})
        print(f"{name}: {len(kept)} kept, {rows[-1]['speedup']:.3f}x", file=sys.stderr)
    print(f"mire tune on {len(rows)} bundled programs ({platform.processor() or platform.machine()}, "
          f"{args.cc}; budget {args.budget}, {args.repeats} runs per candidate; checked "
          f"apart with {args.check} alternating runs each)")
    print("| program | decisions kept | same output | clang -O3 | mirecc -O3 + profile | "
          "speedup | tune time |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        cells = []
        for v in ("plain", "tuned"):
            t = r["times"][v]
            cells.append(f"{statistics.median(t):.4f} s ({min(t):.4f}-{max(t):.4f})")
        print(f"| {r['program']} | {len(r['kept'])} | {'yes' if r['same_output'] else 'NO'} | "
              f"{cells[0]} | {cells[1]} | {r['speedup']:.3f}x | {r['tune_seconds']:.0f} s |")
    geo = statistics.geometric_mean([r["speedup"] for r in rows])
    print(f"geometric mean {geo:.3f}x; slowest {min(r['speedup'] for r in rows):.3f}x")
    (work / "tune_programs.json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["same_output"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
