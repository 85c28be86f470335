"""What mirecc-nvcc costs, and whether its objects are nvcc's, on the 21
PolyBench-ACC CUDA programs (``../shared/datasets/polybench-acc/CUDA``).

    .venv/bin/python benchmarks/nvcc_overhead.py [--repeats N] [--out DIR]

Protocol
--------
* Each program is compiled to an object (``-O3 -c``, the utilities folder
  and the program's own on the include path, and
  ``-DcudaThreadSynchronize=cudaDeviceSynchronize``: CUDA 12 removed that
  call, which the 2012 sources use) three ways, in rotating order per
  round: ``nvcc`` (the one mirecc-nvcc finds), ``mirecc-nvcc`` (the
  default: nvcc's build, no decision), ``mirecc-nvcc --explain`` (also
  clang's device IR, its graph and the encoder's embedding of each kernel).
* ``--repeats`` rounds (default 3) after one untimed warm-up round; wall
  time with ``time.perf_counter``; per variant: median, min and max over
  programs of the per-program median, and the median ratio to nvcc.
* Objects: mirecc-nvcc's against nvcc's, byte for byte after blanking
  nvcc's temporary-file stem (``tmpxft_<pid>_<n>``), which differs between
  two runs of nvcc itself.

Prints a table; writes ``DIR/nvcc_overhead.json`` (default
``.work/nvcc-overhead``).  Exit status 1 when a compile fails or an object
differs.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.frontend.nvcc import find_nvcc  # noqa: E402
from mirecc.frontend.nvcc import normalised_object as normalised  # noqa: E402

COMPAT = "-DcudaThreadSynchronize=cudaDeviceSynchronize"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--out", default=str(ROOT / ".work" / "nvcc-overhead"))
    args = parser.parse_args()
    nvcc = find_nvcc()
    if nvcc is None:
        print("nvcc_overhead: no nvcc (pip install '.[cuda]')", file=sys.stderr)
        return 1
    suite = Path(args.datasets) / "polybench-acc" / "CUDA"
    programs = sorted(suite.rglob("*.cu"))
    mirecc_nvcc = str(Path(sys.executable).with_name("mirecc-nvcc"))
    variants = {"nvcc": [nvcc], "mirecc-nvcc": [mirecc_nvcc],
                "mirecc-nvcc --explain": [mirecc_nvcc, "--explain"]}
    times = {v: {p.name: [] for p in programs} for v in variants}
    failures, differing = [], []
    with tempfile.TemporaryDirectory(prefix="nvcc-overhead-") as tmp:
        for round_ in range(args.repeats + 1):
            order = list(variants)[round_ % 3:] + list(variants)[:round_ % 3]
            for n, program in enumerate(programs):
                print(f"\rround {round_}/{args.repeats} {n + 1}/{len(programs)} "
                      f"{program.name:24s}", end="", file=sys.stderr, flush=True)
                for variant in order:
                    out = Path(tmp) / f"{program.stem}-{variant.split()[0]}.o"
                    cmd = [*variants[variant], "-O3", COMPAT, f"-I{suite / 'utilities'}",
                           f"-I{program.parent}", "-c", str(program), "-o", str(out)]
                    start = time.perf_counter()
                    proc = subprocess.run(cmd, capture_output=True, text=True)
                    elapsed = time.perf_counter() - start
                    if proc.returncode != 0:
                        failures.append(f"{variant} {program.name}: {proc.stderr[-300:]}")
                    elif round_ > 0:
                        times[variant][program.name].append(elapsed)
                if round_ == 0:
                    ref = normalised(Path(tmp) / f"{program.stem}-nvcc.o")
                    if normalised(Path(tmp) / f"{program.stem}-mirecc-nvcc.o") != ref:
                        differing.append(program.name)
    print(file=sys.stderr)
    medians = {v: {p: statistics.median(t) for p, t in per.items() if t}
               for v, per in times.items()}
    rows = []
    for variant, per in medians.items():
        values = list(per.values())
        ratios = [per[p] / medians["nvcc"][p] for p in per if p in medians["nvcc"]]
        rows.append({"variant": variant, "median_s": statistics.median(values),
                     "min_s": min(values), "max_s": max(values),
                     "median_ratio": statistics.median(ratios)})
    result = {"machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
                         f"Python {platform.python_version()}",
              "nvcc": nvcc, "programs": len(programs), "repeats": args.repeats,
              "identical_objects": len(programs) - len(differing),
              "differing": differing, "failures": failures, "rows": rows,
              "per_program": medians}
    print(f"{len(programs)} PolyBench-ACC CUDA programs, -O3 -c, {args.repeats} rounds "
          f"(median per program, then median/min/max over programs); nvcc: {nvcc}")
    print("| variant | median | min | max | median ratio to nvcc |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['median_s']:.2f} s | {r['min_s']:.2f} s | "
              f"{r['max_s']:.2f} s | {r['median_ratio']:.3f} |")
    print(f"objects identical to nvcc's (tmpxft stem blanked): "
          f"{result['identical_objects']}/{len(programs)}"
          + (f"; differing: {', '.join(differing)}" if differing else ""))
    for f in failures:
        print(f"FAILED {f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "nvcc_overhead.json").write_text(json.dumps(result, indent=1))
    return 1 if failures or differing else 0


if __name__ == "__main__":
    sys.exit(main())
