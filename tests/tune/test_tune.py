"""mire tune on a real two-file project built through mirecc with the
shipped heads and the real plugin.  Only the benchmark's timing is staged:
the run script sleeps less when the objects differ from the baseline's,
least for the first such objects, so the outcome is deterministic; the
builds, the head's candidates, the profile and its application are the
real ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.taskapi.profile import read_profile

CLANG = "/usr/bin/clang-14"
MIRE = str(Path(sys.executable).with_name("mire"))
MIRECC = str(Path(sys.executable).with_name("mirecc"))
ROOT = Path(__file__).resolve().parents[2]
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
# the staged timing: the first objects other than the baseline's run fastest,
# any later ones in between, so that the order of the candidates, not the
# machine's load, decides which one is kept
RUN = """#!/bin/sh
[ -f baseline.o ] || cat k.o main.o > baseline.o
./prog
cat k.o main.o > now.o
if cmp -s now.o baseline.o; then sleep 0.6; exit 0; fi
[ -f first.o ] || cp now.o first.o
if cmp -s now.o first.o; then sleep 0.1; else sleep 0.3; fi
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


def tune(cwd: Path, env: dict, budget: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([MIRE, "tune", "--build", BUILD, "--run", "./run.sh",
                           "--budget", str(budget), "--repeats", "2", "--time-profile", "none",
                           *extra],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_tune_keeps_the_first_faster_candidate_and_a_rebuild_applies_it(project):
    cwd, env = project
    proc = tune(cwd, env, budget=9)       # baseline (3) and two candidates (3 each)
    assert proc.returncode == 0, proc.stderr
    assert "1 decision(s) kept" in proc.stdout and "9 of the budget of 9" in proc.stdout
    [entry] = read_profile(str(cwd / "mirecc.profile"))
    state = json.loads((cwd / ".mirecc-tune" / "state.json").read_text())
    # the first candidate tried: the most promising of all sites' candidates
    [i, j], *_ = state["queue"]
    first = state["sites"][i]
    assert entry.task == "loop-vectorize" and entry.target == first["target"]
    assert entry.source == first["source"] and entry.value == first["candidates"][j]
    # kept; the second candidate tried was no faster than it
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
    assert first.returncode == 0 and "stopping: the next candidate needs more than the 0 " \
        "of the budget left" in first.stderr
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


# the staged timing by the binary itself: any binary but the baseline's is faster
RUN_BY_BINARY = """#!/bin/sh
[ -f baseline.bin ] || cp prog baseline.bin
./prog
if cmp -s prog baseline.bin; then sleep 0.4; else sleep 0.1; fi
"""


def test_alternated_runs_keep_the_faster_build_in_place(project):
    cwd, env = project
    (cwd / "run.sh").write_text(RUN_BY_BINARY)
    # baseline (1 build + 2 runs), one candidate (1 build + 2 x 2 alternated runs)
    proc = tune(cwd, env, 8, "--artifact", "prog", "--pin", "0")
    assert proc.returncode == 0, proc.stderr
    assert "1 decision(s) kept" in proc.stdout and "8 of the budget of 8" in proc.stdout
    state = json.loads((cwd / ".mirecc-tune" / "state.json").read_text())
    assert len(state["tried"]) == 1 and len(state["best"]) == 2
    # the kept candidate's binary is the one left in place, not the baseline's
    assert (cwd / "prog").read_bytes() != (cwd / "baseline.bin").read_bytes()
    assert (cwd / "prog").read_bytes() == \
        next((cwd / ".mirecc-tune" / "best").iterdir()).read_bytes()


def test_a_missing_artifact_is_a_clear_error(project):
    cwd, env = project
    proc = tune(cwd, env, 8, "--artifact", "no-such-binary")
    assert proc.returncode == 2 and "--artifact" in proc.stderr and "did not make it" in proc.stderr


def test_perf_report_parsing_and_site_order():
    from mirecc.cli.tune import order_sites, parse_perf_report

    report = """# Samples: 1K of event 'cpu-clock'
#
    61.50%  [.] hot
    30.00%  [.] warm
     0.50%  [.] cold
     8.00%  [k] clear_page_erms
"""
    shares = parse_perf_report(report)
    assert shares == pytest.approx({"hot": 0.615, "warm": 0.30, "cold": 0.005,
                                    "clear_page_erms": 0.08})
    sites = [{"function": f, "depth": d, "score": 0.0, "target": f"{f}:1"}
             for f, d in (("cold", 3), ("warm", 1), ("hot", 1), ("unseen", 2))]
    ordered, dropped = order_sites([dict(s) for s in sites], shares, 0.01)
    assert [s["function"] for s in ordered] == ["hot", "warm"] and dropped == 2
    assert [s["share"] for s in ordered] == pytest.approx([0.615, 0.30])
    # perf saw none of the sites' functions: depth stands for the function's
    # share (ten times per level of its deepest site), nothing dropped
    ordered, dropped = order_sites([dict(s) for s in sites], {"main": 1.0}, 0.01)
    assert [s["function"] for s in ordered] == ["cold", "unseen", "hot", "warm"] and dropped == 0
    assert [s["share"] for s in ordered] == pytest.approx([1 / 1.12, 0.1 / 1.12, 0.01 / 1.12,
                                                           0.01 / 1.12])
    assert {s["weighed"] for s in ordered} == {"depth"}
    # at the same share a parallel region goes before the loops in its
    # outlined function, and a function's schedule before its loops' factors
    # (their tasks' profile kinds give their sites order 0, 1, 2)
    from mirecc.taskapi.profile import kinds
    assert kinds()["openmp"].order < kinds()["loop-nests"].order \
        < kinds()["loop-vectorize"].order
    region = {"task": "openmp", "function": "warm", "depth": 1, "score": 0.0,
              "target": "main:0", "order": kinds()["openmp"].order}
    ordered, _ = order_sites([dict(s) for s in sites] + [dict(region)], shares, 0.01)
    assert [s["target"] for s in ordered] == ["hot:1", "main:0", "warm:1"]
    ordered, _ = order_sites([dict(s) for s in sites] + [dict(region)], None, 0.01)
    assert ordered[0]["target"] == "cold:1"
    assert [s["target"] for s in ordered[2:]] == ["main:0", "hot:1", "warm:1"]
    # by depth too every site of a function has the function's share: the
    # region before the deeper loops in it
    inner = [{"task": task, "function": "warm", "depth": 3, "score": 0.1, "target": target,
              "order": kinds()[task].order}
             for task, target in (("loop-vectorize", "warm:5"), ("loop-nests", "warm"))]
    ordered, _ = order_sites([dict(region)] + [dict(s) for s in inner], None, 0.01)
    assert [s["target"] for s in ordered] == ["main:0", "warm", "warm:5"]
    assert [s["share"] for s in ordered] == [1.0, 1.0, 1.0]


def _site(task, function, share, gains, depth=2, order=1):
    return {"task": task, "function": function, "target": f"{function}:1", "source": "/p/a.c",
            "depth": depth, "order": order, "score": max(gains), "share": share,
            "candidates": [{"n": n} for n in range(len(gains))], "gains": list(gains)}


def test_a_promising_candidate_at_a_cooler_site_goes_first():
    """The candidates of all sites in one order: those with a gain predicted
    by the share of the run each is predicted to save, then the others site
    by site, hottest first, in the head's order."""
    from mirecc.cli.tune import order_candidates, saving

    # the head predicts nothing at the hottest site: 1.002x is no gain a
    # tune could keep (the 2% threshold), 1.0x none, then a loss
    hot = _site("loop-vectorize", "hot", 0.9, [0.002, 0.0, -0.1])
    cool = _site("loop-nests", "cool", 0.1, [0.4, 0.0, -0.5])
    assert order_candidates([hot, cool]) == [[1, 0], [0, 0], [0, 1], [0, 2], [1, 1], [1, 2]]
    # with no threshold, any predicted gain counts
    assert order_candidates([hot, cool], 0.0)[:2] == [[1, 0], [0, 0]]
    hot["gains"] = [0.0, -0.1]
    hot["candidates"] = hot["candidates"][:2]
    # between two with a gain: the share times the predicted gain decides,
    # not the heat alone nor the gain alone
    warm = _site("loop-vectorize", "warm", 0.6, [0.1, 0.05])     # 5.7% and 2.9% of the run
    assert saving(0.6, 0.1) == pytest.approx(0.6 * (1 - 1 / 1.1051709), rel=1e-6)
    assert saving(0.6, 0.05) < saving(0.1, 0.4) < saving(0.6, 0.1)     # cool's first: 3.3%
    assert order_candidates([warm, cool]) == [[0, 0], [1, 0], [0, 1], [1, 1], [1, 2]]
    cool["gains"][0] = 1.0                                       # saves 0.1 x 63%: 6.3%
    assert order_candidates([warm, cool]) == [[1, 0], [0, 0], [0, 1], [1, 1], [1, 2]]
    # a parallel region before the loops that share its time only at the
    # same predicted saving
    region = _site("openmp", "warm", 0.6, [0.1, 0.2], depth=1, order=0)
    assert order_candidates([warm, region]) == [[1, 1], [1, 0], [0, 0], [0, 1]]
    # a site with no gains (a kind that gives none) predicts none
    plain = _site("loop-vectorize", "plain", 0.9, [0.0])
    del plain["gains"]
    assert order_candidates([plain, cool]) == [[1, 0], [0, 0], [1, 1], [1, 2]]


def test_a_kind_without_gains_gets_the_heads_scores_of_its_candidates():
    """A kind whose sites carry no ``gains`` (the OpenMP regions') gets the
    recorded decision's scores of its candidates, the compiler's own left out."""
    from mirecc.taskapi.profile import kinds

    kind = kinds()["openmp"]
    loops = ["kernel.omp_outlined:4"]
    decision = {"task": "openmp", "target": "kernel:0", "candidates": [
        [{"threads": 2, "schedule": "guided", "loops": loops}, 0.3],
        [{}, 0.0],
        [{"threads": 2, "schedule": "static", "chunk": 8, "loops": loops}, -0.2]]}
    site = kind.site(decision, "/p/a.c", {"kernel": "0" * 16, "kernel.omp_outlined": "1" * 16},
                     dict)
    assert [c["schedule"] for c in site["candidates"]] == ["guided", "static"]
    assert kind.gains(decision, site) == [0.3, -0.2]
    # candidates that do not pair with the decision's: none predicted
    assert kind.gains(decision, {**site, "candidates": site["candidates"][:1]}) == [0.0]


HOT_COLD = """\
#include <stdio.h>
#define N 4096
float a[N], b[N];
__attribute__((noinline)) void hot(int reps) {
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < N; i++)
      a[i] = a[i] * 0.5f + b[i];
}
__attribute__((noinline)) void cold(void) {
  for (int i = 0; i < N; i++)
    b[i] = (float)(i % 7);
}
int main(void) {
  cold();
  hot(20000);
  printf("%f\\n", (double)a[7]);
  return 0;
}
"""


def test_perf_samples_put_the_hot_loop_first_and_leave_the_cold_one_out(tmp_path, llvm_plugin):
    from mirecc.cli.tune import perf_works
    if not perf_works():
        pytest.skip("perf cannot sample here")
    _, _, plugin = llvm_plugin(14)
    (tmp_path / "hc.c").write_text(HOT_COLD)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PLUGIN=str(plugin),
                       MIRECC_HEADS_DIR=str(ROOT / "heads"),
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    build = f"{MIRECC} -O2 hc.c -o hc"
    # the budget covers the baseline (build, 2 runs, the perf run) and nothing else
    proc = subprocess.run([MIRE, "tune", "--build", build, "--run", "./hc", "--budget", "4",
                           "--repeats", "2", "--time-profile", "perf"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "shares by perf samples" in proc.stderr
    state = json.loads((tmp_path / ".mirecc-tune" / "state.json").read_text())
    functions = [s["function"] for s in state["sites"]]
    assert functions and set(functions) == {"hot"} and state["sites"][0]["share"] > 0.5
    assert "left out" in proc.stderr and state["spent"] == 4


def test_a_candidate_that_leaves_the_binary_unchanged_is_not_timed(project):
    cwd, env = project
    (cwd / "run.sh").write_text(RUN_BY_BINARY)
    # mirecc compiles (so the heads record their sites) but the binary is
    # plain clang's, so no decision can change it
    build = BUILD.replace("k.o main.o -o prog", "-O2 k.c main.c -o prog")
    proc = subprocess.run([MIRE, "tune", "--build", build, "--run", "./run.sh", "--budget", "9",
                           "--repeats", "2", "--time-profile", "none", "--artifact", "prog"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    # baseline (1 build + 2 runs), then two candidates that cost a build each
    # (a candidate starts only when its build and runs would fit: 5 + 1 + 4 > 9)
    assert proc.stderr.count("the build is byte for byte the best's; not kept") == 2
    assert "0 decision(s) kept" in proc.stdout and "5 of the budget of 9" in proc.stdout


MAKEFILE = """\
prog: k.o main.o
\t$(LINK) k.o main.o -o prog
%.o: %.c
\t$(CC) -O2 -c $< -o $@
clean:
\trm -f *.o prog
"""


def test_a_plain_make_rebuilds_only_the_tu_whose_decision_changed(project):
    cwd, env = project
    (cwd / "Makefile").write_text(MAKEFILE)
    (cwd / "run.sh").write_text(RUN_BY_BINARY)
    build = f"make CC={MIRECC} LINK={CLANG} >> build.log 2>&1"
    proc = subprocess.run([MIRE, "tune", "--build", build, "--clean", "make clean",
                           "--run", "./run.sh", "--budget", "8", "--repeats", "2",
                           "--time-profile", "none", "--artifact", "prog"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "1 decision(s) kept" in proc.stdout
    state = json.loads((cwd / ".mirecc-tune" / "state.json").read_text())
    assert {Path(s["source"]).name for s in state["sites"]} <= {"k.c", "main.c"}
    [kept] = state["kept"]
    changed = Path(kept["source"]).name
    other = ({"k.c", "main.c"} - {changed}).pop()
    # the TU of the decision was compiled again for the candidate, the other
    # one only by the baseline build
    log = (cwd / "build.log").read_text()
    assert log.count(f"-c {changed} ") == 2 and log.count(f"-c {other} ") == 1


def _omp_row(program, region, config, default_s, seconds, *, ok=True, changed=False):
    return {"program": program, "suite": "polybench", "group": None, "size": "STANDARD",
            "region": region, "region_parent": None, "config_key": config,
            "default": {"ok": True, "median_s": default_s, "stable_output": True,
                        "matches_sequential": True},
            "ok": ok, "output_changed": changed, "median_s": seconds}


def test_openmp_replay_spends_one_budget_over_the_regions_and_never_keeps_a_bad_output():
    import numpy as np

    from mirecc.tasks.openmp.offline.train import Table
    from mirecc.tasks.openmp.offline.tune_bench import replay, tune_unit

    configs = ["t1-static-default", "t2-dynamic-1", "t2-static-8"]
    rows = [_omp_row("p", "r:0", "t1-static-default", 1.0, 2.0),
            _omp_row("p", "r:0", "t2-dynamic-1", 1.0, 0.25, changed=True),   # 4x, wrong output
            _omp_row("p", "r:0", "t2-static-8", 1.0, 0.5),                   # 2x
            _omp_row("p", "r:1", "t1-static-default", 1.0, 0.8),             # 1.25x
            _omp_row("p", "r:1", "t2-dynamic-1", 1.0, 2.0),
            _omp_row("p", "r:1", "t2-static-8", 1.0, 1.0)]
    table = Table(rows)
    assert table.classes == configs
    wrong, fast, slow = 1, 2, 0
    orders = {0: [wrong, fast, slow], 1: [slow, 1, 2]}
    assert tune_unit(table, [0, 1], orders, 0) == [None, None]
    assert tune_unit(table, [0, 1], orders, 1) == [None, None]      # the wrong output: not kept
    assert tune_unit(table, [0, 1], orders, 2) == [fast, None]
    # the first region's last candidate takes the third try; the fourth reaches region 2
    assert tune_unit(table, [0, 1], orders, 4) == [fast, slow]
    full = replay(table, {("p", "STANDARD"): [0, 1]}, orders, 6)[("p", "STANDARD")]
    none = replay(table, {("p", "STANDARD"): [0, 1]}, orders, 1)[("p", "STANDARD")]
    assert none == 1.0 and full > 2.0 and np.isfinite(full)


# a candidate fast only in its first two runs: lucky during the tune, slower
# than the baseline after (not merely as fast, which the load could tip)
RUN_LUCKY = """#!/bin/sh
[ -f baseline.bin ] || cp prog baseline.bin
./prog
if cmp -s prog baseline.bin; then sleep 0.3; else
  n=$(cat lucky 2>/dev/null || echo 0); echo $((n + 1)) > lucky
  if [ "$n" -lt 2 ]; then sleep 0.1; else sleep 0.45; fi
fi
"""


def test_the_kept_decisions_are_rechecked_against_the_baseline(project):
    """The candidate won its two alternating runs, but the fresh re-check
    against the baseline finds it no faster: nothing is kept."""
    cwd, env = project
    (cwd / "run.sh").write_text(RUN_LUCKY)
    proc = tune(cwd, env, 8, "--artifact", "prog")
    assert proc.returncode == 0, proc.stderr
    assert "kept (" in proc.stderr and "re-check: median" in proc.stderr
    assert "0 decision(s) kept" in proc.stdout
    assert read_profile(str(cwd / "mirecc.profile")) == []


def test_the_keep_rule_needs_the_slowest_run_to_beat_the_median():
    from mirecc.learn.keep import beats

    best = [1.00, 1.01, 1.02]
    assert beats([0.80, 0.81, 0.82], best, 0.02)
    # median and minimum faster, but one run as slow as the best's median
    assert not beats([0.80, 0.81, 1.00], best, 0.02)
    # within the best's own spread
    assert not beats([0.99, 0.99, 0.99], [0.9, 1.0, 1.1], 0.02)
