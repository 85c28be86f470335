"""``mire tune`` on a real project, then the profile applied by a rebuild and
checked apart from the tune.

    .venv/bin/python benchmarks/tune_project.py {covariance,gsl,zlib} [--budget 60]
                     [--repeats 3] [--check 10] [--save-profile examples/gsl/mirecc.profile]

Projects (gsl and zlib: Debian bookworm's sources, ``apt-get source``,
fetched once into ``.work/src``):

covariance
    PolyBench-ACC's OpenMP covariance (``../shared/datasets``, read in
    place and copied into the work folder with a two-line Makefile) at
    ``STANDARD_DATASET``, its arrays dumped (``POLYBENCH_DUMP_ARRAYS``, on
    stderr) and checksummed.  Its parallel region's loop is triangular, so
    the team size, schedule and chunk matter: the OpenMP head's sites.

gsl
    GSL's reference CBLAS, ``cblas/libgslcblas.la`` (``./configure
    --disable-shared``), linked into a user's own benchmark,
    ``benchmarks/tune_gsl/cblas_bench.c``: dgemm, sgemm, ssyrk, dgemv, sgemv
    and dger on 192x192 matrices.  Its output is an exact checksum of every
    result.  The CBLAS loops are unit-stride and vectorizable, so this is
    where the loop factors can matter.
zlib
    ``minigzip -6`` compressing 24 MiB made here (zlib's own sources
    repeated, interleaved with seeded pseudo-random words), output piped
    through ``cksum``.  Its hot loops (``longest_match``, ``deflate_slow``)
    do not vectorize: every candidate builds the baseline's binary.

Protocol
--------
* The project is configured with the real clang; every build of the tune
  goes through mirecc at ``-O3`` with the shipped heads.
* The tune: ``mire tune --build ... --run ... --clean ... --artifact ART
  --budget B --repeats R`` (perf picks the loops when it can sample the run;
  the best build and the candidate alternate; only changed TUs are rebuilt).
* Checked apart from the tune's own timings: the project rebuilt from clean
  by plain clang -O3 and by mirecc -O3 with the profile (``MIRECC_PROFILE``,
  ``--explain``, whose lines naming the profile are printed); outputs
  compared; ``--check`` runs of each, alternating; median (min-max) and the
  ratio of the medians.

Writes ``tune_<project>.json`` in the work folder; ``--save-profile`` copies
the profile (sources named relative to the project's tree) into the repo.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from real_projects import fetch_source   # noqa: E402

from mirecc.tasks.openmp.offline.programs import polybench_root  # noqa: E402

ZLIB_INPUT_MIB = 24


def sh(command: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)


def zlib_prepare(tree: Path, work: Path, cc: str) -> None:
    rng = random.Random(19)
    sources = b"".join(p.read_bytes() for p in sorted(tree.glob("*.c")))
    words = [bytes(rng.choice(b"etaoinshrdlucmfw") for _ in range(rng.randint(2, 9)))
             for _ in range(4000)]
    out = bytearray()
    while len(out) < ZLIB_INPUT_MIB * 2**20:
        out += sources[:rng.randint(1, len(sources))]
        out += b" ".join(rng.choice(words) for _ in range(rng.randint(500, 5000)))
    (work / "input.bin").write_bytes(bytes(out[:ZLIB_INPUT_MIB * 2**20]))
    sh("./configure --static", tree, CC=cc)


COVARIANCE_MAKEFILE = """\
CC = cc
CFLAGS = -O3
FLAGS = -fopenmp -DPOLYBENCH_DUMP_ARRAYS -DSTANDARD_DATASET -Iutilities
covariance: covariance.o polybench.o
\t$(CC) -fopenmp covariance.o polybench.o -o covariance -lm
covariance.o: covariance.c covariance.h
\t$(CC) $(CFLAGS) $(FLAGS) -c covariance.c
polybench.o: utilities/polybench.c utilities/polybench.h
\t$(CC) $(CFLAGS) $(FLAGS) -c utilities/polybench.c
clean:
\trm -f covariance covariance.o polybench.o
"""


def covariance_source(work: Path) -> Path:
    return polybench_root() / "datamining" / "covariance"


def covariance_prepare(tree: Path, work: Path, cc: str) -> None:
    util = polybench_root() / "utilities"
    (tree / "utilities").mkdir()
    for name in ("polybench.c", "polybench.h"):
        shutil.copy(util / name, tree / "utilities" / name)
    (tree / "Makefile").write_text(COVARIANCE_MAKEFILE)


def gsl_prepare(tree: Path, work: Path, cc: str) -> None:
    shutil.copy(ROOT / "benchmarks" / "tune_gsl" / "cblas_bench.c", work / "cblas_bench.c")
    sh(f"./configure --disable-shared CC={cc}", tree)
    sh("make -C gsl", tree)        # the gsl/ folder of header links the sources include


def debian_source(package: str) -> Callable[[Path], Path]:
    return lambda work: fetch_source(package, ROOT / ".work" / "src")


@dataclass(frozen=True)
class Project:
    source: Callable[[Path], Path]     # work folder -> the source tree to copy
    prepare: Callable[[Path, Path, str], None]
    build: str                         # {cc}: the compiler; run in the tree
    clean: str
    artifact: str
    run: str                           # run in the tree
    what: str


PROJECTS = {
    "covariance": Project(
        source=covariance_source, prepare=covariance_prepare,
        build="make CC='{cc}' covariance", clean="make clean", artifact="covariance",
        run="./covariance 2>&1 >/dev/null | cksum",
        what="PolyBench-ACC OpenMP covariance, STANDARD_DATASET"),
    "gsl": Project(
        source=debian_source("gsl"), prepare=gsl_prepare,
        build=("make -C cblas CC='{cc}' CFLAGS=-O3 libgslcblas.la && "
               "{cc} -O3 -I. ../cblas_bench.c cblas/.libs/libgslcblas.a -lm -o cblas_bench"),
        clean="make -C cblas clean", artifact="cblas_bench", run="./cblas_bench",
        what="GSL CBLAS, benchmarks/tune_gsl/cblas_bench.c"),
    "zlib": Project(
        source=debian_source("zlib"), prepare=zlib_prepare,
        build="make CC='{cc}' CFLAGS=-O3 minigzip", clean="make clean",
        artifact="minigzip", run="./minigzip -6 < ../input.bin | cksum",
        what=f"minigzip -6 on {ZLIB_INPUT_MIB} MiB"),
}


def time_apart(project: Project, tree: Path, work: Path, variants: tuple[str, ...],
               runs: int) -> tuple[dict, dict]:
    """Each variant's artifact (WORK/<artifact>.<variant>) copied into place
    and run, alternating; outputs and seconds per variant."""
    def place(variant: str) -> None:
        shutil.copy2(work / f"{project.artifact}.{variant}", tree / project.artifact)

    outputs, times = {}, {v: [] for v in variants}
    for v in variants:
        place(v)
        outputs[v] = sh(project.run, tree).stdout
    for i in range(runs):
        for v in (variants if i % 2 == 0 else variants[::-1]):
            place(v)
            t0 = time.perf_counter()
            sh(project.run, tree)
            times[v].append(time.perf_counter() - t0)
    return outputs, times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", choices=sorted(PROJECTS))
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", type=int, default=10)
    parser.add_argument("--cc", default="/usr/bin/clang-14")
    parser.add_argument("--work", default=None,
                        help="work folder (default: .work/tune-<project>; emptied first)")
    parser.add_argument("--save-profile", default="")
    args = parser.parse_args()
    project = PROJECTS[args.project]
    work = Path(args.work or ROOT / ".work" / f"tune-{args.project}").absolute()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = project.source(work)
    tree = work / args.project
    shutil.copytree(source, tree, symlinks=True)
    project.prepare(tree, work, args.cc)

    mirecc = BIN / "mirecc"
    started = time.perf_counter()
    tune = subprocess.run([str(BIN / "mire"), "tune", "--build", project.build.format(cc=mirecc),
                           "--clean", project.clean, "--run", project.run,
                           "--budget", str(args.budget), "--repeats", str(args.repeats),
                           "--artifact", project.artifact, "--work", "../tune-state",
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
    sh(f"{project.clean} && {project.build.format(cc=args.cc)} && "
       f"cp {project.artifact} ../{project.artifact}.plain", tree)
    rebuild = sh(f"{project.clean} && {project.build.format(cc=f'{mirecc} --explain')} && "
                 f"cp {project.artifact} ../{project.artifact}.tuned", tree,
                 MIRECC_PROFILE=str(profile))
    applied = [ln for ln in (rebuild.stderr + rebuild.stdout).splitlines() if "profile" in ln]
    variants = ("plain", "tuned")
    outputs, times = time_apart(project, tree, work, variants, args.check)
    med = {v: statistics.median(t) for v, t in times.items()}
    result = {"project": args.project, "source": source.name, "benchmark": project.what,
              "machine": f"{platform.processor() or platform.machine()}, "
                         f"{os.cpu_count()} cores",
              "compiler": args.cc, "budget": args.budget, "repeats": args.repeats,
              "kept": kept, "applied_lines": applied, "tune_seconds": tune_s,
              "same_output": outputs["plain"] == outputs["tuned"], "times": times,
              "speedup": med["plain"] / med["tuned"], "tune_log": tune.stderr.splitlines()}
    (work / f"tune_{args.project}.json").write_text(json.dumps(result, indent=1))
    print(f"{args.project} {source.name}: {project.what}; {len(kept)} decision(s) kept "
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
