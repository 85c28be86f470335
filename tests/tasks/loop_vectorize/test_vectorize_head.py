"""The loop-vectorize head in a real build: ``mirecc -O3`` with a head made
here (trained to always answer one class), the real shipped encoder, the
real pass plugin and LLVM's vectorizer, compared with plain clang-14."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from vectorize_heads import make_head

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void scale(double *a, const double *b, int n) {
  for (int i = 0; i < n; i++)
    a[i] = b[i] * 3.0 + 1.0;
}

__attribute__((noinline)) double total(const double *a, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1003;
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  for (int i = 0; i < n; i++) b[i] = (i % 17) * 0.1;
  scale(a, b, n);
  printf("%.17g\\n", total(a, n));
  return 0;
}
"""


@pytest.fixture(scope="module")
def heads_8x1(tmp_path_factory) -> Path:
    return make_head(tmp_path_factory.mktemp("heads"), "8x1")


@pytest.fixture(scope="module")
def heads_8x1_embeddings(tmp_path_factory) -> Path:
    """The same answer from a head that also takes the encoder's embeddings."""
    from mirecc.tasks.loop_vectorize.head import ALL_FEATURES
    return make_head(tmp_path_factory.mktemp("heads"), "8x1", features=tuple(ALL_FEATURES))


def env_for(tmp_path: Path, heads_dir: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
                                     "MIRECC_HEADS_DIR": str(heads_dir),
                                     "MIRECC_SERVER": "0",
                                     "MIRECC_APPLY_LOOPS": "1", **extra})


def run(cmd, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def vectorized(stderr: str) -> dict[int, tuple[int, int]]:
    """source line -> (width, interleave) from -Rpass=loop-vectorize remarks."""
    import re
    out = {}
    for m in re.finditer(r"p\.c:(\d+):\d+: remark: vectorized loop \(vectorization width: "
                         r"(\d+), interleaved count: (\d+)\)", stderr):
        out[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return out


@pytest.fixture
def program(tmp_path) -> Path:
    (tmp_path / "p.c").write_text(PROGRAM)
    return tmp_path


@pytest.mark.parametrize("heads", ["heads_8x1", "heads_8x1_embeddings"])
def test_head_factors_reach_the_vectorizer_and_outputs_stay(program, heads, request):
    env = env_for(program, request.getfixturevalue(heads))
    plain = run([CLANG, "-O3", "-Rpass=loop-vectorize", "p.c", "-o", "plain"], program, env)
    assert plain.returncode == 0, plain.stderr
    # LLVM's own choice for the double loop (line 5) is not 8x1 on x86-64
    assert vectorized(plain.stderr)[5] != (8, 1)
    ours = run([MIRECC, "-O3", "-Rpass=loop-vectorize", "p.c", "-o", "ours"], program, env)
    assert ours.returncode == 0 and "mirecc:" not in ours.stderr, ours.stderr
    got = vectorized(ours.stderr)
    assert got[5] == (8, 1)
    # the double sum (line 11) is a reduction: without -ffast-math it stays scalar
    assert 11 not in got and 11 not in vectorized(plain.stderr)
    outputs = [run([f"./{exe}"], program, env).stdout for exe in ("plain", "ours")]
    assert outputs[0] == outputs[1] and outputs[0].strip()


def test_fast_math_lets_the_head_force_the_reduction(program, heads_8x1):
    env = env_for(program, heads_8x1)
    ours = run([MIRECC, "-O3", "-ffast-math", "-Rpass=loop-vectorize", "p.c", "-c",
                "-o", "p.o"], program, env)
    assert ours.returncode == 0 and "mirecc:" not in ours.stderr, ours.stderr
    assert vectorized(ours.stderr)[11] == (8, 1)


def test_explain_lists_each_loop_with_line_default_and_confidence(program, heads_8x1):
    env = env_for(program, heads_8x1)
    proc = run([MIRECC, "--explain=json", "-O3", "-c", "p.c", "-o", "p.o"], program, env)
    assert proc.returncode == 0, proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    loops = {d["target"]: d for d in tu["decisions"] if d["task"] == "loop-vectorize"}
    assert set(loops) == {"scale:1", "total:1", "main:4"}, loops
    by_line = {int(d["reason"].split(":")[1]): d for d in loops.values()}
    assert set(by_line) == {5, 11, 19}
    for d in loops.values():
        assert d["value"] == {"vectorize.width": 8, "interleave.count": 1}
        # every tree agrees
        assert d["confidence"] == 1.0
    # applied means the build changed: the plugin leaves the strict double
    # sum (forcing a width would reorder it), so that one is not applied
    assert by_line[5]["applied"] and by_line[19]["applied"]
    assert not by_line[11]["applied"]
    assert "the plugin left it: floating-point recurrence" in by_line[11]["reason"]
    # what LLVM does on its own: the double loop vectorized, the strict sum not
    assert by_line[5]["default"]["vectorize.width"] > 1
    assert by_line[11]["default"] == {"vectorize.width": 1, "interleave.count": 1}
    text = run([MIRECC, "--explain", "-O3", "-c", "p.c", "-o", "p.o"], program, env).stdout
    assert "p.c:5:" in text and "p.c:11:" in text and "loop-vectorize" in text


def test_no_gain_or_too_small_a_gain_leaves_llvm_alone(program, tmp_path_factory):
    plain_obj = program / "plain.o"
    env = env_for(program, program / "none")
    subprocess.run([CLANG, "-O3", "-c", "p.c", "-o", str(plain_obj)], cwd=program, check=True)
    for heads in (make_head(tmp_path_factory.mktemp("heads"), "default"),
                  make_head(tmp_path_factory.mktemp("heads"), "8x1", min_gain=1.0)):
        env = env_for(program, heads)
        proc = run([MIRECC, "-O3", "-c", "p.c", "-o", "ours.o"], program, env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert (program / "ours.o").read_bytes() == plain_obj.read_bytes()


def test_no_decisions_without_optimisation_or_for_another_target(program, heads_8x1):
    env = env_for(program, heads_8x1)
    proc = run([MIRECC, "--explain=json", "-O3", "-march=x86-64-v3", "-c", "p.c",
                "-o", "p.o"], program, env)
    [tu] = json.loads(proc.stdout)["translation_units"]
    assert not tu["decisions"]
    assert any("trained for the default target" in r for r in tu["no_decision_reasons"])


def test_decisions_file_is_content_addressed_and_reused(program, heads_8x1):
    env = env_for(program, heads_8x1)
    for _ in range(2):
        proc = run([MIRECC, "-O3", "-c", "p.c", "-o", "p.o"], program, env)
        assert proc.returncode == 0, proc.stderr
    [path] = (program / "cache" / "loop-decisions").iterdir()
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    assert set(doc["modules"]["p.c"]["loops"]) == {"scale:1", "total:1", "main:4"}


def test_decisions_are_only_recorded_unless_applying_is_on(program, heads_8x1):
    env = env_for(program, heads_8x1, MIRECC_APPLY_LOOPS="0")
    subprocess.run([CLANG, "-O3", "-c", "p.c", "-o", "plain.o"], cwd=program, check=True)
    proc = run([MIRECC, "-O3", "-c", "p.c", "-o", "ours.o"], program, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (program / "ours.o").read_bytes() == (program / "plain.o").read_bytes()
    proc = run([MIRECC, "--explain=json", "-O3", "-c", "p.c", "-o", "p.o"], program, env)
    [tu] = json.loads(proc.stdout)["translation_units"]
    loops = [d for d in tu["decisions"] if d["task"] == "loop-vectorize"]
    assert loops and all(d["advisory"] and not d["applied"] for d in loops)
    assert all("MIRECC_APPLY_LOOPS=1" in d["reason"] for d in loops)


def test_recording_only_head_costs_a_plain_build_no_side_run(program, heads_8x1):
    """With applying off and no record file, nothing would read the head's
    decisions: the ML path does not run (an injected fault shows when it does)."""
    for apply, record, runs in (("0", None, False), ("1", None, True),
                                ("0", str(program / "r.jsonl"), True)):
        extra = {"MIRECC_APPLY_LOOPS": apply, "MIRECC_DEBUG_FAULT": "exception"}
        if record:
            extra["MIRECC_RECORD"] = record
        proc = run([MIRECC, "-O3", "-c", "p.c", "-o", "p.o"], program,
                   env_for(program, heads_8x1, **extra))
        assert proc.returncode == 0
        assert ("fault injected" in proc.stderr) is runs, (apply, record, proc.stderr)


@pytest.mark.parametrize("off", ["-fno-vectorize", "-fno-tree-vectorize"])
def test_a_vectorizer_the_user_turned_off_gets_no_decisions(program, heads_8x1, off):
    env = env_for(program, heads_8x1)
    proc = run([MIRECC, "--explain=json", "-O3", off, "-c", "p.c", "-o", "p.o"], program, env)
    [tu] = json.loads(proc.stdout)["translation_units"]
    assert not tu["decisions"]
    assert any("the loop vectorizer is off" in r for r in tu["no_decision_reasons"])
    # turned back on later on the command line: decided again
    proc = run([MIRECC, "--explain=json", "-O3", off, "-fvectorize", "-c", "p.c", "-o", "p.o"],
               program, env)
    [tu] = json.loads(proc.stdout)["translation_units"]
    assert tu["decisions"]


def test_loop_classes_are_judged_as_trials_saved():
    """mire bench encoder's vectorization cases: a class's speedup is LLVM's
    default time over the class's, a class whose output changed (or that
    reassociates a float reduction without -ffast-math) is never a
    candidate; held out by family, the statistics' forest learns which
    class suits which loop."""
    import numpy as np

    from mirecc.learn.judge import Judged, judge
    from mirecc.tasks.loop_vectorize.offline.judge import cases_of, evaluate
    from mirecc.tasks.loop_vectorize.offline.train import CLASSES

    def row(family, wide):
        fast, slow = (4.0, 16.0) if wide else (16.0, 4.0)
        return {"family": family, "default": {"min_ns": 10.0}, "needs_reassoc": True,
                "configs": [{"vf": 8, "if": 1, "ok": True, "min_ns": fast},
                            {"vf": 1, "if": 4, "ok": True, "min_ns": slow},
                            {"vf": 4, "if": 4, "ok": True, "min_ns": 1.0,
                             "output_changed": True},
                            {"vf": 2, "if": 1, "ok": True, "min_ns": 1.0, "remark_vf": 2}]}

    rng = np.random.default_rng(2)
    stats = rng.uniform(0, 10, size=(40, 2))
    rows = [row(f"fam{i % 8}", stats[i, 0] > 5) for i in range(40)]
    cases = cases_of(rows)
    a, b = CLASSES.index("8x1"), CLASSES.index("1x4")
    assert set(cases[0].speed) == {a, b}                    # the changed and reordering: out
    assert CLASSES.index("4x4") in cases[0].bad and CLASSES.index("2x1") in cases[0].bad
    assert cases[0].speed[a] == 10.0 / (4.0 if stats[0, 0] > 5 else 16.0)
    rankings = evaluate(cases, stats, {}, ["statistics"])
    results = judge(Judged("loop vectorization", cases, rankings, 0.05, len(CLASSES)), 200)
    assert results["statistics"]["share"] > 0.5
    assert results["statistics"]["share"] > results["best single class"]["share"] + 0.3
