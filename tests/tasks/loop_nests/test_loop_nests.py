"""The loop-nests task: statistics of real clang IR, the functions Polly must
run on, the user's own choices winning, and the decision reaching the object
(the same bytes as clang with the schedule's flags) only with the setting."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from envs import isolated_env
from mirecc.tasks.loop_nests import features as F
from mirecc.tasks.loop_nests import schedules as S
from mirecc.tasks.loop_nests.head import inject

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
needs_clang = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

PROGRAM = r"""
#include <stdio.h>
#define N 96
static double A[N][N], B[N][N], C[N][N];

static void kernel_ijk(int n, double a[N][N], double b[N][N], double c[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        c[i][j] += a[i][k] * b[k][j];
}

void stencil(int steps, int n, double a[N][N], double b[N][N]) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        b[i][j] = 0.25 * (a[i-1][j] + a[i+1][j] + a[i][j-1] + a[i][j+1]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        a[i][j] = b[i][j];
  }
}

void lower(int n, double a[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++)
      a[i][j] *= 2.0;
}

int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) { A[i][j] = (i * j % 7) / 7.0; B[i][j] = (i + j) % 5; }
  kernel_ijk(N, A, B, C);
  stencil(3, N, A, B);
  lower(N, C);
  double s = 0;
  for (int i = 0; i < N; i++) s += C[i][i] + A[i][N - 1 - i];
  printf("%.6f\n", s);
  return 0;
}
"""


def _ir(tmp_path: Path, source: str, clang: str = CLANG) -> str:
    c = tmp_path / "p.c"
    c.write_text(source)
    out = tmp_path / "p.ll"
    subprocess.run([clang, "-O3", "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(c), "-o", str(out)], check=True)
    return out.read_text()


@needs_clang
@pytest.mark.parametrize("clang", [CLANG, "/usr/bin/clang-19"])
def test_statistics_of_a_known_program(tmp_path, clang):
    if not os.access(clang, os.X_OK):
        pytest.skip(f"needs {clang}")
    text = _ir(tmp_path, PROGRAM, clang)
    funcs = F.parse_functions(text)
    feats = F.function_features(text, funcs)
    assert set(feats) == {"kernel_ijk", "stencil", "lower", "main"}
    mm = feats["kernel_ijk"]
    # a[i][k] unit, b[k][j] a column walk, c[i][j] loaded and stored in place
    assert (mm["max_depth"], mm["unit_share"], mm["strided_share"], mm["invariant_share"]) \
        == (3, 0.25, 0.25, 0.5)
    assert mm["reduction_share"] == 1.0 and mm["perfect_share"] == 1.0
    assert mm["log2_row"] == pytest.approx(np.log2(96))
    st = feats["stencil"]
    assert st["time_loop"] == 1.0 and st["nests"] == 1 and st["inner_loops"] == 2
    assert st["strided_share"] == 0.0 and st["triangular_share"] == 0.0
    assert feats["lower"]["triangular_share"] == 0.5 and feats["lower"]["time_loop"] == 0.0
    assert F.dominant(feats) == "stencil"     # depth 3 too, more accesses
    # static: inlined into main before Polly runs, so main is named too
    assert F.apply_set(funcs, "kernel_ijk") == ["kernel_ijk", "main"]
    assert F.apply_set(funcs, "stencil") == ["stencil"]
    assert len(F.row(mm)) == len(F.FEATURES)


@needs_clang
def test_loop_pragmas_mark_the_users_schedule(tmp_path):
    text = _ir(tmp_path, PROGRAM.replace(
        "  for (int i = 0; i < n; i++)\n    for (int j = 0; j <= i; j++)",
        "  for (int i = 0; i < n; i++)\n#pragma clang loop unroll_count(2)\n"
        "    for (int j = 0; j <= i; j++)"))
    assert F.pragma_functions(text, F.parse_functions(text)) == {"lower"}


def test_schedule_flags_and_the_users_own_options():
    assert S.flags("polly-tile64", ["kernel_a", "main"]) == [
        "-mllvm", "-polly", "-mllvm", "-polly-default-tile-size=64",
        "-mllvm", "-polly-only-func=^kernel_a$,^main$"]
    with pytest.raises(ValueError, match="unknown loop-nest schedule"):
        S.flags("llvm", ["f"])
    assert S.user_schedule(["-O3", "-mllvm", "-polly"]) == "-polly"
    assert S.user_schedule(["-mllvm=-enable-unroll-and-jam"]) == "-enable-unroll-and-jam"
    assert S.user_schedule(["-O3", "-mllvm", "-inline-threshold=100"]) is None


class _D:
    def __init__(self, schedule, functions, applied=True):
        self.applied, self.value = applied, {"schedule": schedule, "functions": functions}


def test_one_command_gets_one_schedule():
    assert inject({"a.c": [_D("polly", ["f"])], "b.c": [_D("polly", ["g"])]}, CLANG, None) \
        == S.flags("polly", ["f", "g"])
    assert inject({"a.c": [_D("polly", ["f"], applied=False)]}, CLANG, None) == []
    with pytest.raises(ValueError, match="different loop-nest schedules"):
        inject({"a.c": [_D("polly", ["f"])], "b.c": [_D("polly-tile64", ["g"])]}, CLANG, None)


def _head(root: Path, schedule: str, gain: float) -> Path:
    """A loop-nests head whose trees predict ``gain`` for ``schedule`` and a
    loss for the others, whatever the statistics."""
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes

    d = root / "loop-nests"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, len(F.FEATURES)))
    Y = np.full((40, len(S.SPACE)), -0.5)
    Y[:, S.SPACE.index(schedule)] = gain
    (d / "head.onnx").write_bytes(onnx_bytes(fit_forest(X, Y, ForestConfig(trees=5)),
                                             len(F.FEATURES)))
    (d / "spec.yaml").write_text(yaml.safe_dump({
        "task": "loop-nests", "languages": ["c", "c++"], "head": "head.onnx",
        "encoder": "none", "features": ["loop_nest_statistics"],
        "loop_nest_statistics": list(F.FEATURES), "classes": list(S.SPACE),
        "quantile": 0.3, "min_gain": 0.1}))
    return root


def _env(tmp_path: Path, heads: Path, **extra) -> dict:
    return isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CACHE_DIR=str(tmp_path / "cache"),
                        MIRECC_HEADS_DIR=str(heads), MIRECC_SERVER="0", **extra)


def _cc(cmd, cwd, env):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc


@needs_clang
def test_the_schedule_reaches_the_object_only_with_the_setting(tmp_path):
    (tmp_path / "p.c").write_text(PROGRAM)
    heads = _head(tmp_path / "heads", "polly-no-matmul", 0.5)
    plain = _cc([CLANG, "-O3", "-c", "p.c", "-o", "clang.o"], tmp_path, os.environ)
    polly = _cc([CLANG, "-O3", *S.flags("polly-no-matmul", ["kernel_ijk", "lower", "main",
                                                            "stencil"]),
                 "-c", "p.c", "-o", "polly.o"], tmp_path, os.environ)
    assert plain.returncode == polly.returncode == 0
    assert (tmp_path / "clang.o").read_bytes() != (tmp_path / "polly.o").read_bytes()

    # recorded only: the object is clang's, byte for byte
    env = _env(tmp_path, heads)
    proc = _cc([MIRECC, "--explain=json", "-O3", "-c", "p.c", "-o", "rec.o"], tmp_path, env)
    tu = json.loads(proc.stdout)["translation_units"][0]
    ours = [d for d in tu["decisions"] if d["task"] == "loop-nests"]
    assert {d["target"] for d in ours} == {"kernel_ijk", "stencil", "lower", "main"}
    assert all(d["advisory"] and not d["applied"] for d in ours)
    assert "MIRECC_APPLY_LOOP_NESTS=1" in ours[0]["reason"]
    _cc([MIRECC, "-O3", "-c", "p.c", "-o", "rec.o"], tmp_path, env)
    assert (tmp_path / "rec.o").read_bytes() == (tmp_path / "clang.o").read_bytes()

    # applied: clang's object with the schedule's flags, and the same output
    env = _env(tmp_path, heads, MIRECC_APPLY_LOOP_NESTS="1")
    _cc([MIRECC, "-O3", "-c", "p.c", "-o", "ours.o"], tmp_path, env)
    assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "polly.o").read_bytes()
    outs = []
    for obj in ("clang.o", "ours.o"):
        _cc([CLANG, obj, "-o", obj + ".exe"], tmp_path, os.environ)
        outs.append(_cc([str(tmp_path / (obj + ".exe"))], tmp_path, os.environ).stdout)
    assert outs[0] == outs[1]

    # the user's own -mllvm -polly wins: nothing decided, clang's object with it
    _cc([CLANG, "-O3", "-mllvm", "-polly", "-c", "p.c", "-o", "user.o"], tmp_path, os.environ)
    proc = _cc([MIRECC, "--explain=json", "-O3", "-mllvm", "-polly", "-c", "p.c", "-o",
                "mine.o"], tmp_path, env)
    tu = json.loads(proc.stdout)["translation_units"][0]
    assert not [d for d in tu["decisions"] if d["task"] == "loop-nests"]
    assert "the user chose the loop-nest schedule" in json.dumps(tu)
    _cc([MIRECC, "-O3", "-mllvm", "-polly", "-c", "p.c", "-o", "mine.o"], tmp_path, env)
    assert (tmp_path / "mine.o").read_bytes() == (tmp_path / "user.o").read_bytes()


@needs_clang
def test_no_gain_keeps_llvms_schedule(tmp_path):
    (tmp_path / "p.c").write_text(PROGRAM)
    heads = _head(tmp_path / "heads", "polly", 0.05)     # below min_gain 0.1
    env = _env(tmp_path, heads, MIRECC_APPLY_LOOP_NESTS="1")
    proc = _cc([MIRECC, "--explain=json", "-O3", "-c", "p.c", "-o", "p.o"], tmp_path, env)
    ours = [d for d in json.loads(proc.stdout)["translation_units"][0]["decisions"]
            if d["task"] == "loop-nests"]
    assert ours and all(d["value"] == {} and not d["applied"] for d in ours)
    assert "LLVM's schedule stays" in ours[0]["reason"]
    _cc([CLANG, "-O3", "-c", "p.c", "-o", "clang.o"], tmp_path, os.environ)
    _cc([MIRECC, "-O3", "-c", "p.c", "-o", "p.o"], tmp_path, env)
    assert (tmp_path / "p.o").read_bytes() == (tmp_path / "clang.o").read_bytes()


# the staged timing of the tune: an object other than the baseline's runs faster
TUNE_RUN = """#!/bin/sh
[ -f baseline.o ] || cp p.o baseline.o
./prog > /dev/null
if cmp -s p.o baseline.o; then sleep 0.4; else sleep 0.1; fi
"""


@needs_clang
def test_mire_tune_keeps_a_schedule_and_the_profile_applies_it(tmp_path):
    """mire tune tries the head's schedules per function (the head's
    decisions recorded only; the run's timing staged); the profile it writes
    makes a later build apply the kept schedules without the setting."""
    from mirecc.taskapi.profile import read_profile

    (tmp_path / "p.c").write_text(PROGRAM)
    (tmp_path / "run.sh").write_text(TUNE_RUN)
    (tmp_path / "run.sh").chmod(0o755)
    heads = _head(tmp_path / "heads", "polly-tile64", 0.5)
    env = _env(tmp_path, heads)
    mire = str(Path(MIRECC).with_name("mire"))
    build = f"{MIRECC} -O3 -c p.c -o p.o && {CLANG} p.o -o prog"
    proc = subprocess.run([mire, "tune", "--build", build, "--run", "./run.sh", "--budget", "8",
                           "--repeats", "2", "--time-profile", "none"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "4 loop-nests site(s) to try" in proc.stderr, proc.stderr
    entries = read_profile(str(tmp_path / "mirecc.profile"))
    assert entries and all(e.task == "loop-nests" and e.value == {"schedule": "polly-tile64"}
                           for e in entries)
    (tmp_path / "ir").mkdir()
    funcs = F.parse_functions(_ir(tmp_path / "ir", PROGRAM))
    only = sorted({f for e in entries for f in F.apply_set(funcs, e.target)})
    _cc([CLANG, "-O3", *S.flags("polly-tile64", only), "-c", "p.c", "-o", "want.o"], tmp_path,
        os.environ)
    with_profile = {**env, "MIRECC_PROFILE": str(tmp_path / "mirecc.profile")}
    _cc([MIRECC, "-O3", "-c", "p.c", "-o", "got.o"], tmp_path, with_profile)
    assert (tmp_path / "got.o").read_bytes() == (tmp_path / "want.o").read_bytes()
