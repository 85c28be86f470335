"""The loop-vectorize head's model and inputs: the loop statistics read from
real clang IR, the forest's ONNX export against scikit-learn, and the
quantile rule that keeps LLVM's choice where the trees disagree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mirecc.tasks.loop_vectorize.features import NAMES, statistics_by_loop
from mirecc.learn.forest import choose

SOURCE = """\
void gather(float *restrict out, const float *a, const long *idx, int n) {
  for (int i = 0; i < n; i++) out[i] = a[idx[i]];
}
void strided(short *restrict out, const short *a, int n) {
  for (int i = 0; i < n; i++) out[i] = a[3 * i] + a[3 * i + 1];
}
double fixed(const double *a) {
  double s = 0;
  for (int i = 0; i < 24; i++) s += a[i] * a[i];
  return s;
}
"""


def statistics(clang: str, tmp_path: Path) -> dict[str, dict[str, float]]:
    from mirecc.graph import build_graph_any

    (tmp_path / "k.c").write_text(SOURCE)
    bc = tmp_path / f"{Path(clang).name}.bc"
    subprocess.run([clang, "-O2", "-Xclang", "-disable-llvm-passes", "-c", "-emit-llvm",
                    "-o", str(bc), str(tmp_path / "k.c")], check=True)
    return {loop: dict(zip(NAMES, v)) for loop, v in
            statistics_by_loop(build_graph_any(str(bc))).items()}


@pytest.mark.parametrize("clang", ["/usr/bin/clang-14", "/usr/bin/clang-19"])
def test_loop_statistics_read_the_access_patterns(clang, tmp_path):
    if not os.access(clang, os.X_OK):
        pytest.skip(f"needs {clang}")
    s = statistics(clang, tmp_path)
    assert set(s) == {"gather:1", "strided:1", "fixed:1"}
    gather, strided, fixed = s["gather:1"], s["strided:1"], s["fixed:1"]
    assert gather["indirect_accesses"] == 1 and gather["scaled_accesses"] == 0
    assert gather["loads_float"] == 1 and gather["stores_float"] == 1
    assert strided["scaled_accesses"] == 2 and strided["indirect_accesses"] == 0
    assert strided["loads_i16"] == 2 and strided["stores_i16"] == 1
    assert fixed["constant_bound"] == 1 and fixed["log_constant_bound"] == pytest.approx(np.log(25))
    # two elements and the accumulator (front-end IR: locals live in memory);
    # a*a + s is contracted to a call of llvm.fmuladd
    assert fixed["loads_double"] == 3 and fixed["share_call"] > 0
    assert gather["constant_bound"] == 0 and gather["depth"] == 1


def test_loop_statistics_do_not_depend_on_the_clang_version(tmp_path):
    clangs = ["/usr/bin/clang-14", "/usr/bin/clang-19"]
    if not all(os.access(c, os.X_OK) for c in clangs):
        pytest.skip("needs clang-14 and clang-19 (typed and opaque pointers)")
    old, new = (statistics(c, tmp_path) for c in clangs)
    assert old == new


def test_forest_onnx_matches_scikit_learn_tree_by_tree():
    pytest.importorskip("sklearn")
    pytest.importorskip("onnx")
    from mirecc.taskapi.onnxhead import run_onnx
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes, tree_predictions

    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 7)).astype(np.float32)
    Y = np.stack([X[:, 0] > 0, X[:, 1] * X[:, 2], np.sin(X[:, 3])], axis=1)
    forest = fit_forest(X, Y, ForestConfig(trees=20))
    data = onnx_bytes(forest, 7)
    probe = rng.normal(size=(40, 7)).astype(np.float32)
    got = run_onnx(data, probe)
    assert got.shape == (40, 20, 3)
    np.testing.assert_allclose(got, tree_predictions(forest, probe), atol=1e-5)
    # the trees differ (extra trees), so the quantile rule has a spread to read
    assert np.ptp(got, axis=1).max() > 0.1


def test_choose_takes_the_best_quantile_and_keeps_llvm_where_trees_disagree():
    # 10 trees, 3 classes
    agree = np.tile([0.01, 0.20, 0.10], (10, 1))
    split = np.tile([0.0, 0.0, 0.0], (10, 1))
    split[:5, 1], split[5:, 1] = 0.8, -0.8          # half the trees expect a big loss
    small = np.tile([0.0, 0.015, 0.0], (10, 1))
    (a, ga, sa), (b, _, _), (c, gc, _) = choose(np.stack([agree, split, small]), 0.3, 0.02)
    assert (a, sa) == (1, 1.0) and ga == pytest.approx(0.20)
    assert b is None                        # 0.7 would take it (below); 0.3 does not
    assert c is None and gc == pytest.approx(0.015)
    assert choose(np.stack([split]), 0.5, 0.02)[0][0] is None
    assert choose(np.stack([split]), 0.7, 0.02)[0][0] == 1


@pytest.mark.parametrize("clang", ["/usr/bin/clang-14", "/usr/bin/clang-19"])
def test_the_functions_each_loop_calls(clang, tmp_path):
    """What adapt_loops reads to leave out a loop no factor can vectorize: a
    loop calling printf (a function defined elsewhere) names it; fmuladd is
    an intrinsic; a loop calling nothing names nothing."""
    if not os.access(clang, os.X_OK):
        pytest.skip(f"needs {clang}")
    from mirecc.graph import build_graph_any
    from mirecc.tasks.loop_vectorize.features import callees_by_loop

    (tmp_path / "k.c").write_text(SOURCE + """\
int printf(const char *, ...);
void dump(const float *a, int n) {
  for (int i = 0; i < n; i++) printf("%f\\n", a[i]);
}
""")
    bc = tmp_path / "k.bc"
    subprocess.run([clang, "-O2", "-Xclang", "-disable-llvm-passes", "-c", "-emit-llvm",
                    "-o", str(bc), str(tmp_path / "k.c")], check=True)
    calls = callees_by_loop(build_graph_any(str(bc)))
    assert calls["dump:1"] == {"printf"}
    assert calls["fixed:1"] == {"llvm.fmuladd.f64"}
    assert calls["gather:1"] == set() and calls["strided:1"] == set()
