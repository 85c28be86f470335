"""``mire tune`` on small programs, each tuned several times, then re-measured apart.

    .venv/bin/python benchmarks/tune_programs.py [--suite kernels|nests|openmp]
        [--budget 10 | --budgets 10,40] [--repeats 2] [--tunes 3] [--check 10]
        [--cc clang-14] [--kernels a,b] [--time-profile auto|perf|none]
        [--mire PATH] [--out docs/results/tune-kernels.md]

Protocol
--------
* The programs (``--suite``), none in the training data of the head that
  ranks them:

  - ``kernels``: the bundled programs (``benchmarks/programs``) without an
    OpenMP pragma and the two of ``benchmarks/tune_kernels``;
  - ``nests``: loop-nest programs in PolyBench's harness (PolyBench-ACC's
    OpenMP sources built without ``-fopenmp``, and mirecc's own families,
    :mod:`mirecc.tasks.loop_nests.offline.families`) at ``STANDARD_DATASET``
    with PolyBench's timer (its printed time thrown away), ranked by a
    loop-nests head trained on the labels of every other program
    (:func:`mirecc.tasks.loop_nests.offline.bench.write_held_out_head`; the
    other heads are the shipped ones); default :data:`NESTS`;
  - ``openmp``: the bundled programs with an OpenMP pragma (``tri_omp``),
    built with ``-fopenmp``; the OpenMP head's labels never saw them.

* Each program is tuned ``--tunes`` times at each budget (``--budgets``),
  each time from scratch in its own work folder: ``mire tune --build
  "mirecc -O3 [flags] -c K.c && clang K.o ... -o K" --run ./K --artifact K
  --budget B --repeats R`` (the tune keeps a candidate only when its
  slowest run beats the best's median, and re-checks what it kept against
  the baseline at the end).
* Each tune's profile is then applied by a rebuild (``MIRECC_PROFILE``),
  apart from the tune's own timings (which chose the winners): the plain
  clang -O3 build and the tuned build run ``--check`` times each,
  alternating; the outputs must be the same (for ``nests``: the arrays
  PolyBench dumps, from a build of each with ``-DPOLYBENCH_DUMP_ARRAYS``).
  Reported per tune: the candidates tried per task, the decisions kept and
  the ratio of the medians (min and max beside); identical binaries are
  reported as 1.000x without timing.
* With several budgets, the share of the largest budget's gain that each
  smaller one reaches: log(geomean at b) / log(geomean at the largest),
  over all tunes and per program.

Writes the table to ``--out`` (and stdout) and the raw times beside it as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.cli.bench import geomean, uses_openmp
from mirecc.util.machine import cpu_model

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KERNEL_DIRS = (ROOT / "benchmarks" / "programs", ROOT / "benchmarks" / "tune_kernels")
#: the loop-nest programs tuned by default (``--suite nests``): large gains
#: from a schedule in the labels (the oracle at STANDARD 2.3x-4.6x), runs of
#: 0.2-3 s here, PolyBench's and mirecc's own
NESTS = ("covariance", "doitgen", "mvt", "gemver", "colreduce-maxabs", "transprod-abt")


@dataclass
class Program:
    name: str
    source: Path
    #: compile flags beside -O3 (mirecc's and plain clang's alike)
    flags: list[str] = field(default_factory=list)
    #: link arguments after the object
    link: list[str] = field(default_factory=list)
    #: files copied beside the source (headers)
    extra: list[Path] = field(default_factory=list)
    #: the run throws its output away (it prints a time): the outputs are
    #: compared on a build with these flags instead, its stderr
    dump_flags: list[str] | None = None

    def build(self, compiler: str, obj: str, exe: str) -> str:
        q = lambda args: " ".join(shlex.quote(a) for a in args)   # noqa: E731
        return (f"{q([compiler, '-O3', *self.flags, '-c', f'{self.name}.c', '-o', obj])} && "
                f"{q([CC, obj, *self.link, '-o', exe, '-lm'])}")

    def run(self, exe: str) -> str:
        return f"./{exe}" + (" >/dev/null" if self.dump_flags is not None else "")


CC = "clang-14"


def programs(suite: str, wanted: set[str], work: Path) -> tuple[list[Program], dict]:
    """The suite's programs (those of ``wanted``, or the default set) and the
    environment their tunes and builds run in (variables to add)."""
    if suite in ("kernels", "openmp"):
        sources = sorted((s for d in KERNEL_DIRS for s in d.glob("*.c")
                          if (not wanted or s.stem in wanted)
                          and uses_openmp(s) == (suite == "openmp")), key=lambda p: p.stem)
        omp = ["-fopenmp"] if suite == "openmp" else []
        return [Program(s.stem, s, list(omp), list(omp)) for s in sources], {}
    from mirecc.tasks.loop_nests.offline import dataset
    from mirecc.tasks.loop_nests.offline.bench import write_held_out_head

    names = sorted(wanted or NESTS)
    found = {p.stem: p for _, p in dataset.programs(["polybench", "own"], work / "nest-src")}
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"tune_programs: no loop-nest program {', '.join(missing)}")
    util = dataset.polybench_root() / "utilities"
    defines = ["-w", "-DSTANDARD_DATASET", "-DPOLYBENCH_TIME", "-I", str(util), "-I", "."]
    subprocess.run([CC, "-O3", *defines, "-c", str(util / "polybench.c"), "-o",
                    str(work / "polybench.o")], check=True)
    # the shipped heads, but a loop-nests head that never saw these programs
    heads = work / "heads"
    heads.mkdir()
    for head in (ROOT / "heads").iterdir():
        if head.is_dir() and head.name != "loop-nests":
            (heads / head.name).symlink_to(head)
    write_held_out_head(heads / "loop-nests", names, work / "nest-ir", CC)
    out = [Program(n, found[n], list(defines), [str(work / "polybench.o")],
                   sorted(found[n].parent.glob("*.h")), ["-DPOLYBENCH_DUMP_ARRAYS"])
           for n in names]
    return out, {"MIRECC_HEADS_DIR": str(heads), "MIRECC_CACHE_DIR": str(work / "cache")}


def check_apart(work: Path, prog: Program, profile: Path, runs: int, env: dict) -> dict:
    """Plain clang -O3 against mirecc -O3 with ``profile``, alternating."""
    name = prog.name
    tuned_env = {**env, "MIRECC_PROFILE": str(profile)}
    for variant, compiler, e in (("plain", CC, env), ("tuned", str(BIN / "mirecc"), tuned_env)):
        subprocess.run(prog.build(compiler, f"{name}.{variant}.o", f"{name}.{variant}"),
                       shell=True, cwd=work, env=e, check=True)
    if prog.dump_flags is None:
        outputs = {v: subprocess.run([f"./{name}.{v}"], cwd=work, capture_output=True).stdout
                   for v in ("plain", "tuned")}
    else:
        dumping = Program(name, prog.source, prog.flags + prog.dump_flags, prog.link)
        outputs = {}
        for variant, compiler, e in (("plain", CC, env),
                                     ("tuned", str(BIN / "mirecc"), tuned_env)):
            exe = f"{name}.{variant}-dump"
            subprocess.run(dumping.build(compiler, f"{exe}.o", exe), shell=True, cwd=work,
                           env=e, check=True)
            outputs[variant] = subprocess.run([f"./{exe}"], cwd=work,
                                              capture_output=True).stderr
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


def share(small: float, large: float) -> str:
    """The share of the larger budget's log gain the smaller reaches."""
    return f"{math.log(small) / math.log(large):.0%}" if large > 1.0 else "n/a (no gain)"


def main() -> int:
    global CC
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("kernels", "nests", "openmp"), default="kernels")
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--budgets", default="",
                        help="comma-separated budgets, each tuned from scratch (instead of "
                             "--budget)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tunes", type=int, default=3, help="tunes per kernel, each from scratch")
    parser.add_argument("--check", type=int, default=10, help="alternating runs per side")
    parser.add_argument("--cc", default="clang-14")
    parser.add_argument("--kernels", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--time-profile", choices=("auto", "perf", "none"), default="auto",
                        help="mire tune's --time-profile (default: %(default)s)")
    parser.add_argument("--mire", default=str(BIN / "mire"),
                        help="the mire that tunes (another version's, to compare its order; "
                             "default: this one's)")
    parser.add_argument("--work", default=str(ROOT / ".work" / "tune-programs"))
    parser.add_argument("--out", default=None, help="also write the table here (markdown)")
    args = parser.parse_args()
    CC = args.cc
    budgets = [int(b) for b in args.budgets.split(",") if b] or [args.budget]
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    wanted = {k for k in args.kernels.split(",") if k}
    progs, extra_env = programs(args.suite, wanted, work)
    env = {**os.environ, **extra_env}
    rows = []
    for number, prog in enumerate(progs, 1):
        name = prog.name
        for f in [prog.source, *prog.extra]:
            shutil.copy(f, work / f.name)
        build = prog.build(str(BIN / "mirecc"), f"{name}.o", name)
        for budget in budgets:
            for tune in range(1, args.tunes + 1):
                profile = work / f"{name}.{budget}.{tune}.profile"
                tune_work = work / f"w-{name}-{budget}-{tune}"
                started = time.perf_counter()
                proc = subprocess.run([args.mire, "tune", "--build", build, "--run",
                                       prog.run(name), "--artifact", name,
                                       "--budget", str(budget), "--repeats", str(args.repeats),
                                       "--time-profile", args.time_profile,
                                       "--work", str(tune_work), "--profile", str(profile)],
                                      cwd=work, env=env, capture_output=True, text=True)
                tune_s = time.perf_counter() - started
                if proc.returncode != 0:
                    print(f"{name}: mire tune failed: {proc.stderr[-400:]}", file=sys.stderr)
                    return 1
                kept = [ln.split("#")[0].split()[2:5:2]
                        for ln in profile.read_text().splitlines()
                        if ln.strip() and not ln.startswith("#")]
                tried: dict[str, int] = {}
                for task, *_ in json.loads((tune_work / "state.json").read_text())["tried"]:
                    tried[task] = tried.get(task, 0) + 1
                checked = check_apart(work, prog, profile, args.check, env)
                rows.append({"kernel": name, "budget": budget, "tune": tune, "kept": kept,
                             "tried": tried, "tune_seconds": tune_s,
                             "log": [ln.removeprefix("mire tune: ").replace(str(work), "<work>")
                                     for ln in proc.stderr.splitlines()], **checked})
                print(f"[{number}/{len(progs)}] {name} budget {budget} tune {tune}: "
                      f"{len(kept)} kept, {checked['speedup']:.3f}x re-measured",
                      file=sys.stderr)
    text = page(args, budgets, progs, rows)
    print(text)
    (work / "tune_programs.json").write_text(json.dumps(rows, indent=1))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["same_output"] for r in rows) else 1


def page(args, budgets: list[int], progs: list[Program], rows: list[dict]) -> str:
    what = {"kernels": "small kernels", "nests": "held-out loop-nest programs",
            "openmp": "OpenMP programs"}[args.suite]
    command = (".venv/bin/python benchmarks/tune_programs.py"
               + (f" --suite {args.suite}" if args.suite != "kernels" else "")
               + (f" --budgets {','.join(map(str, budgets))}" if len(budgets) > 1
                  else f" --budget {budgets[0]}")
               + f" --repeats {args.repeats} --tunes {args.tunes} --check {args.check}"
               + (f" --time-profile {args.time_profile}" if args.time_profile != "auto" else "")
               + (f" --kernels {args.kernels}" if args.kernels else "")
               + (f" --mire {args.mire}" if args.mire != str(BIN / "mire") else "")
               + (f" --out {args.out}" if args.out else ""))
    budget_words = " and ".join(map(str, budgets))
    lines = [f"# mire tune on {len(progs)} {what}",
             "",
             f"Machine: {cpu_model()}, {platform.system()} ({os.cpu_count()} cores); "
             f"compiler {args.cc}. Command: `{command}`.",
             "",
             f"Each program tuned {args.tunes} times from scratch at budget {budget_words} "
             f"({args.repeats} runs per candidate, alternating with the best build; "
             f"--time-profile {args.time_profile}), then rebuilt with the profile and "
             f"re-measured apart: plain clang -O3 against the tuned build, {args.check} "
             f"alternating runs each, ratio of the medians (identical binaries: 1.000x, "
             f"not timed). Tried: the candidates built per task."]
    if args.suite == "nests":
        lines += ["",
                  f"The loop-nests head was trained on the labels of every program but these "
                  f"{len(progs)} (`write_held_out_head`); the other heads are the shipped "
                  f"ones. Built at STANDARD_DATASET with PolyBench's timer (its printed time "
                  f"thrown away); outputs compared on builds with -DPOLYBENCH_DUMP_ARRAYS."]
    lines += ["",
              "| program | budget | tune | tried | kept (site value) | same output "
              "| clang -O3 median (min-max) | tuned median (min-max) | speedup |",
              "|---|---:|---:|---|---|---|---:|---:|---:|"]
    for r in rows:
        cells = []
        for v in ("plain", "tuned"):
            t = r["times"][v]
            cells.append(f"{statistics.median(t):.4f} s ({min(t):.4f}-{max(t):.4f})" if t
                         else "same binary")
        kept = "; ".join(" ".join(k) for k in r["kept"]) or "-"
        tried = ", ".join(f"{task} {n}" for task, n in sorted(r["tried"].items())) or "-"
        lines.append(f"| {r['kernel']} | {r['budget']} | {r['tune']} | {tried} | {kept} | "
                     f"{'yes' if r['same_output'] else 'NO'} | {cells[0]} | {cells[1]} | "
                     f"{r['speedup']:.3f}x |")
    lines.append("")
    by_budget = {b: [r for r in rows if r["budget"] == b] for b in budgets}
    for b, rs in by_budget.items():
        speedups = [r["speedup"] for r in rs]
        lines.append(f"Budget {b}: geometric mean {geomean(speedups):.3f}x over {len(rs)} "
                     f"tunes; slowest {min(speedups):.3f}x; "
                     f"{sum(1 for r in rs if r['kept'])} tunes kept a decision.")
    if len(budgets) > 1:
        large = max(budgets)
        lines += ["", f"Share of budget {large}'s gain reached by the smaller budgets "
                      f"(log of the geometric mean over the tunes at b, over the log of "
                      f"that at {large}):", "",
                  "| program | " + " | ".join(f"budget {b}" for b in budgets) + " | "
                  + " | ".join(f"share at {b}" for b in budgets if b != large) + " |",
                  "|---|" + "---:|" * (2 * len(budgets) - 1)]
        for prog in progs:
            g = {b: geomean([r["speedup"] for r in by_budget[b] if r["kernel"] == prog.name])
                 for b in budgets}
            lines.append(f"| {prog.name} | " + " | ".join(f"{g[b]:.3f}x" for b in budgets)
                         + " | " + " | ".join(share(g[b], g[large]) for b in budgets
                                              if b != large) + " |")
        g = {b: geomean([r["speedup"] for r in by_budget[b]]) for b in budgets}
        lines.append("| **all** | " + " | ".join(f"**{g[b]:.3f}x**" for b in budgets) + " | "
                     + " | ".join(f"**{share(g[b], g[large])}**" for b in budgets
                                  if b != large) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
