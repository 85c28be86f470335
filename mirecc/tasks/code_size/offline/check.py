"""Correctness of the candidate library: every pipeline builds a set of
test programs whose output must equal the program's -O0 build.

Test programs: the bundled benchmark programs (``benchmarks/programs``, run
with a small repeat count) and csmith programs from seeds the corpus never
used (differential testing against -O0, as csmith is meant to be used).
A program whose -O0 build does not run to completion within the time limit
is left out (csmith can write endless loops).  A pipeline that changes any
output, or cannot build a program that -Oz builds, fails.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirecc.corpus.csmith import CSMITH_INCLUDE, csmith_program
from mirecc.tasks.code_size.build import CandidateError, opt_beside, parse_candidate, run_step
from mirecc.tasks.code_size.offline.dataset import progress_bar
from mirecc.tasks.code_size.offline.labels import OWN

PROGRAMS = Path(__file__).resolve().parents[4] / "benchmarks" / "programs"
# corpus csmith programs are seed * 1000003 + i for seed 1..; these are not
CHECK_SEED = 7_000_001
RUN_TIMEOUT_S = 10


class Program:
    def __init__(self, name: str, source: Path, cflags: list[str], argv: list[str]):
        self.name, self.source, self.cflags, self.argv = name, source, cflags, argv


def check_programs(work: Path, csmith_count: int) -> list[Program]:
    out = [Program(p.stem, p, [], ["2"]) for p in sorted(PROGRAMS.glob("*.c"))]
    for i in range(csmith_count):
        source = work / f"csmith-{CHECK_SEED + i}.c"
        if not source.is_file():
            source.write_text(csmith_program(CHECK_SEED + i))
        out.append(Program(source.stem, source, ["-w", f"-I{CSMITH_INCLUDE}"], []))
    return out


def _run(exe: str, argv: list[str]) -> tuple[int, bytes] | None:
    try:
        proc = subprocess.run([exe, *argv], capture_output=True, timeout=RUN_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
    return proc.returncode, proc.stdout


def _build(compiler: str, program: Program, pipeline: str | None, bitcode: str,
           work: str, name: str) -> str:
    """The executable of ``program``: at -O0 (``pipeline`` None), through
    clang's -Oz (OWN) or through the candidate ``pipeline`` (passes and
    back-end options) from its -Oz front-end ``bitcode``."""
    exe = os.path.join(work, name)
    if pipeline is None:
        run_step([compiler, "-O0", *program.cflags, str(program.source), "-o", exe, "-lm"],
                 "-O0")
        return exe
    obj = exe + ".o"
    try:
        passes, opt_flags, backend = parse_candidate(pipeline)
    except ValueError as exc:
        raise CandidateError(str(exc)) from None
    if passes == OWN:
        run_step([compiler, "-Oz", *backend, "-c", "-x", "ir", bitcode, "-o", obj], pipeline)
    else:
        optimised = exe + ".bc"
        run_step([opt_beside(compiler), f"-passes={passes}", *opt_flags, bitcode, "-o",
                  optimised], pipeline)
        run_step([compiler, "-Oz", *backend, "-c", "-x", "ir", optimised, "-Xclang",
                  "-disable-llvm-passes", "-o", obj], pipeline)
    run_step([compiler, obj, "-o", exe, "-lm"], "link")
    return exe


def check(compiler: str, pipelines: list[str], work: Path, *, csmith_count: int = 100,
          jobs: int = 2) -> dict:
    """pipeline -> {"passed": n, "failed": {program: why}}, and the programs
    used under ``"_programs"``."""
    work.mkdir(parents=True, exist_ok=True)
    programs = check_programs(work, csmith_count)
    results = {p: {"passed": 0, "failed": {}} for p in [OWN, *pipelines]}
    used: list[str] = []
    lock = threading.Lock()
    bar = progress_bar(len(programs), "size-check", unit="program")

    def one(program: Program) -> None:
        with tempfile.TemporaryDirectory(prefix="mirecc-check-") as tmp:
            try:
                reference = _run(_build(compiler, program, None, "", tmp, "ref"), program.argv)
                bitcode = os.path.join(tmp, "fe.bc")
                run_step([compiler, "-Oz", *program.cflags, "-c", "-emit-llvm", "-Xclang",
                          "-disable-llvm-passes", str(program.source), "-o", bitcode], "-Oz")
            except CandidateError:
                reference = None
            if reference is None or reference[0] != 0:
                return          # no trustworthy reference: left out
            with lock:
                used.append(program.name)
            for number, pipeline in enumerate(results):
                try:
                    got = _run(_build(compiler, program, pipeline, bitcode, tmp, f"c{number}"),
                               program.argv)
                    why = ("timed out" if got is None else
                           None if got == reference else
                           f"exit {got[0]} / output differs from -O0")
                except CandidateError as exc:
                    why = str(exc)[:200]
                with lock:
                    if why:
                        results[pipeline]["failed"][program.name] = why
                    else:
                        results[pipeline]["passed"] += 1
        if bar:
            bar.update(1)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, programs))
    if bar:
        bar.close()
    results["_programs"] = sorted(used)
    return results
