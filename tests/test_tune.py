"""mire tune on a real two-file project built through mirecc with the
shipped heads and the real plugin.  Only the benchmark's timing is staged:
the run script sleeps less when the kernel's object differs from the
baseline's, so the outcome is deterministic; the builds, the head's
candidates, the profile and its application are the real ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.profile import read_profile

CLANG = "/usr/bin/clang-14"
MIRE = str(Path(sys.executable).with_name("mire"))
MIRECC = str(Path(sys.executable).with_name("mirecc"))
ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

KERNEL = """\
void scale(int *restrict y, const int *restrict x, int n) {
  for (int i = 0; i < n; i++)
    y[i] = 3 * x[i] + y[i];
}
"""
MAIN = """\
#include <stdio.h>
void scale(int *restrict y, const int *restrict x, int n);
int main(void) {
  static int x[1000], y[1000];
  for (int i = 0; i < 1000; i++) { x[i] = i; y[i] = 1000 - i; }
  scale(y, x, 1000);
  long s = 0;
  for (int i = 0; i < 1000; i++) s += y[i];
  printf("%ld\\n", s);
  return 0;
}
"""
BUILD = (f"{MIRECC} -O2 -c k.c -o k.o && {MIRECC} -O2 -c main.c -o main.o && "
         f"{CLANG} k.o main.o -o prog")
# the staged timing: objects other than the baseline's run faster
RUN = """#!/bin/sh
[ -f baseline.o ] || cat k.o main.o > baseline.o
./prog
if cat k.o main.o | cmp -s - baseline.o; then sleep 0.4; else sleep 0.1; fi
"""


@pytest.fixture
def project(tmp_path, llvm_plugin):
    _, _, plugin = llvm_plugin(14)
    (tmp_path / "k.c").write_text(KERNEL)
    (tmp_path / "main.c").write_text(MAIN)
    (tmp_path / "run.sh").write_text(RUN)
    (tmp_path / "run.sh").chmod(0o755)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PLUGIN=str(plugin),
                       MIRECC_HEADS_DIR=str(ROOT / "heads"),
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    return tmp_path, env


def tune(cwd: Path, env: dict, budget: int) -> subprocess.CompletedProcess:
    return subprocess.run([MIRE, "tune", "--build", BUILD, "--run", "./run.sh",
                           "--budget", str(budget), "--repeats", "2"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_tune_keeps_the_first_faster_candidate_and_a_rebuild_applies_it(project):
    cwd, env = project
    proc = tune(cwd, env, budget=9)       # baseline (3) and two candidates (3 each)
    assert proc.returncode == 0, proc.stderr
    assert "1 decision(s) kept" in proc.stdout and "9 of the budget of 9" in proc.stdout
    [entry] = read_profile(str(cwd / "mirecc.profile"))
    state = json.loads((cwd / ".mirecc-tune" / "state.json").read_text())
    first = state["sites"][0]          # the most promising site, its best-ranked candidate
    assert entry.task == "loop-vectorize" and entry.target == first["target"]
    assert entry.source == first["source"] and entry.value == first["candidates"][0]
    # kept; the site's second candidate was no faster than it
    assert "kept (" in proc.stderr and "not faster beyond the noise" in proc.stderr
    assert "x the baseline's median" in entry.comment
    # a build with the profile applies it
    build_env = {**env, "MIRECC_PROFILE": str(cwd / "mirecc.profile")}
    out = subprocess.run([MIRECC, "-O2", "-c", Path(first["source"]).name, "-o", "x.o",
                          "-Rpass=mirecc-loophints"], cwd=cwd, env=build_env,
                         capture_output=True, text=True, timeout=300)
    width, count = entry.value["vectorize.width"], entry.value["interleave.count"]
    assert f"loop {entry.target}: vectorize.width={width} interleave.count={count}" \
        in out.stderr


def test_an_interrupted_tune_resumes_and_respects_the_budget(project):
    cwd, env = project
    first = tune(cwd, env, budget=6)
    assert first.returncode == 0 and "budget of 6 spent" in first.stderr
    second = tune(cwd, env, budget=12)
    assert second.returncode == 0, second.stderr
    assert "resuming: 1 candidate(s) tried, 6 of the budget spent" in second.stderr
    assert "12 of the budget of 12" in second.stdout
    assert len(read_profile(str(cwd / "mirecc.profile"))) == 1


def test_a_build_outside_mirecc_is_a_clear_error(project):
    cwd, env = project
    proc = subprocess.run([MIRE, "tune", "--build", f"{CLANG} -O2 k.c main.c -o prog",
                           "--run", "./prog", "--work", "w2"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no TU was recorded" in proc.stderr


def test_bench_replay_keeps_the_best_of_the_first_k_and_never_loses():
    import numpy as np

    from mirecc.tasks.loop_vectorize.offline.tune_bench import _replay

    speedups = np.array([0.5, 1.3, 0.9, 2.0])
    assert _replay(speedups, [0, 2, 1, 3], 1) == 1.0      # a loss is not kept
    assert _replay(speedups, [0, 2, 1, 3], 3) == 1.3
    assert _replay(speedups, [3, 0, 1, 2], 1) == 2.0
    assert _replay(speedups, [0, 1, 2, 3], 0) == 1.0
