"""What trying one coarsening factor costs on this machine's OpenCL platform.

`mire run --opencl` confirms a factor by running the program's kernels at
it.  The platform compiles a kernel for its work-group size at its first
launch (pocl here: into its kernel cache, kept on disk), so the first run
that tries a factor pays that compile once per machine.  This measures it
per program of `mire bench opencl` and per factor, against the program's
own kernel time per run:

- ``plain``: the program's own kernel time per run, warm cache;
- for each factor k: the program at k (``--opencl-factor k``) with a kernel
  cache that holds the program's own kernels but not the coarsened ones
  (a copy of a warm cache), then again (warm): the first run's extra kernel
  time is the trial's one-time compile; ``runs``: that compile in runs of the
  program's own kernel time; ``even``: the runs at k it takes to win it
  back (compile / (plain - warm at k)), where k is faster.

    .venv/bin/python benchmarks/opencl_trial_cost.py [--md docs/results/opencl-trial-cost.md]
        [--only saxpy,mriQ] [--repeats 2]

Kernel times are the program's own report (the driver's launches' wall time
after clFinish), median over the repeats; the compile is large beside the
run-to-run noise (a cold/warm pair differs by 0.1 s and more, runs by a few
milliseconds).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.tasks.opencl.offline import run_bench  # noqa: E402
from mirecc.tasks.opencl.run import opencl_devices  # noqa: E402

FACTORS = (2, 8, 32)


def measure(command: list[str], work: Path, repeats: int) -> dict:
    def run(side: str, cache: Path, walls: list | None = None) -> float:
        got = run_bench.run_side(command, side, work, work, work / "store.txt",
                                 env={"POCL_CACHE_DIR": str(cache)})
        if walls is not None:
            walls.append(got["wall"])
        return got["seconds"]

    out = {"plain": [], "cold": {k: [] for k in FACTORS}, "warm": {k: [] for k in FACTORS},
           "cold_wall": {k: [] for k in FACTORS}, "warm_wall": {k: [] for k in FACTORS}}
    for _ in range(repeats):
        base = work / "cache-plain"
        shutil.rmtree(base, ignore_errors=True)
        run("plain", base)                       # the program's own kernels compiled
        out["plain"].append(run("plain", base))
        for k in FACTORS:
            # the plan (per user, not per platform cache) made before timing
            run(f"f{k}", work / "cache-scratch")
            cache = work / f"cache-f{k}"
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(base, cache)
            out["cold"][k].append(run(f"f{k}", cache, out["cold_wall"][k]))
            out["warm"][k].append(run(f"f{k}", cache, out["warm_wall"][k]))
        shutil.rmtree(work / "cache-scratch", ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated programs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--md", help="write the page here")
    args = parser.parse_args()
    devices = opencl_devices()
    if not devices:
        print("no OpenCL device (install pocl-opencl-icd)", file=sys.stderr)
        return 2
    only = set(args.only.split(",")) if args.only else None
    jobs = [(n, run_bench.kernel_source(n), n, *spec) for n, spec in run_bench.PROGRAMS.items()]
    dataset = run_bench._default_dataset()
    if dataset:
        for n, (src, kernel, glob, loc, launches, argv) in \
                run_bench.dataset_programs(Path(dataset)).items():
            jobs.append((f"{n} (published)", src, kernel, glob, loc, launches, argv))
    rows = []
    with tempfile.TemporaryDirectory(prefix="mirecc-trial-cost-") as tmp:
        work = Path(tmp)
        driver = run_bench.build_driver(work)
        for name, src, kernel, glob, loc, launches, argv in jobs:
            if only and name.split()[0] not in only:
                continue
            cl = work / f"{name.split()[0]}.cl"
            cl.write_text(src)
            cmd = [str(driver), str(cl), kernel, glob, loc, str(launches), *argv]
            try:
                m = measure(cmd, work, args.repeats)
            except (RuntimeError, OSError) as exc:
                print(f"  {name}: {str(exc).splitlines()[0][:160]}", file=sys.stderr)
                continue
            rows.append((name, m))
            print(f"  {name}: done", file=sys.stderr)
    page = report(rows, f"{devices[0][1]} ({devices[0][0]})", args.repeats)
    print(page)
    if args.md:
        Path(args.md).write_text(page)
    return 0


def report(rows, device: str, repeats: int) -> str:
    med = statistics.median
    lines = ["# What trying a coarsening factor costs", "",
             f"Written by `benchmarks/opencl_trial_cost.py --repeats {repeats}`. Machine: "
             f"{run_bench._machine()}; OpenCL device: {device}. Per program, seconds of its "
             f"own kernel time per run (median of {repeats}); for each factor: the first run "
             "at it with the platform's kernel cache holding only the program's own kernels "
             "(`compile`: its extra kernel time over the warm run at that factor; `wall`: the "
             "extra wall time of the whole run, the coarsened program's build included), "
             "`runs`: the compile in runs of the program's own kernel time, `even`: runs at "
             "the factor that win it back (- where the factor is not faster).", "",
             "| program | plain | " + " | ".join(f"f{k} warm | compile | wall | runs | even"
                                                  for k in FACTORS) + " |",
             "|---|---:|" + "---:|---:|---:|---:|---:|" * len(FACTORS)]
    over = {k: 0 for k in FACTORS}
    for name, m in rows:
        plain = med(m["plain"])
        cells = [name, f"{plain:.4f}"]
        for k in FACTORS:
            warm, cold = med(m["warm"][k]), med(m["cold"][k])
            compile_ = max(cold - warm, 0.0)
            gain = plain - warm
            runs = compile_ / plain if plain else float("inf")
            over[k] += runs > 15
            wall = max(med(m["cold_wall"][k]) - med(m["warm_wall"][k]), 0.0)
            cells += [f"{warm:.4f}", f"{compile_:.3f}", f"{wall:.2f}", f"{runs:.0f}",
                      f"{compile_ / gain:.0f}" if gain > 0 else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Programs whose trial of one factor costs more than 15 runs of their own "
              "kernel time (the adaptive runs of `mire bench opencl`): " +
              ", ".join(f"f{k} {over[k]} of {len(rows)}" for k in FACTORS) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
