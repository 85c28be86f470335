"""The inlining policy's measure (mire size-inline-judge): a site's choice
saves against LLVM's object, the oracle takes the smallest of the three; per
callee, a callee's inputs sum up its sites'."""
import math
import shutil
import subprocess

import numpy as np
import pytest

from mirecc.ir.text import disassemble
from mirecc.tasks.code_size.inline_features import ALL_NAMES
from mirecc.tasks.code_size.inline_features import statistics as site_statistics
from mirecc.tasks.code_size.offline.inline_callee import (CALLEE_NAMES, callee_row,
                                                          module_callees, read_callees)
from mirecc.tasks.code_size.offline.inline_train import choose, oracle, saved, targets

ROWS = [{"own": 100, "inline": 90, "noinline": 100},    # LLVM leaves it; inlining saves 10
        {"own": 80, "inline": 80, "noinline": 95},      # LLVM inlines it, rightly
        {"own": 50, "inline": 50, "noinline": 45}]      # LLVM inlines it; out of line saves 5


def test_choices_are_measured_against_llvms_object():
    # (sites, trees, 2): each forced choice's predicted saving (inline, out of line)
    G = np.asarray([[[0.1, 0.0]] * 3, [[0.0, 0.2]] * 3, [[0.005, -0.3]] * 3])
    choice = choose(G, margin=0.01)
    assert choice.tolist() == [1, -1, 0]
    assert saved(ROWS, choice).tolist() == [10, -15, 0]
    assert oracle(ROWS).tolist() == [10, 0, 5]


def test_the_targets_are_the_change_from_llvms_object():
    y = targets(ROWS)
    # forcing what LLVM already does saves nothing, either way
    assert y[0, 1] == 0 and y[1, 0] == 0 and y[2, 0] == 0
    assert y[0, 0] > 0 and y[1, 1] < 0 and y[2, 1] > 0


CALLS = """
static int sq(int x) { return x * x; }
static int twice(int x) { return sq(x) + sq(x + 1); }
int api(int a, int b) { return twice(a) + sq(b) + twice(b); }
"""


def test_a_callees_row_sums_up_its_sites(tmp_path):
    """Per callee: its sites found in the module's IR, its row their count
    (log) and the mean, largest and smallest of each site statistic."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    src = tmp_path / "k.c"
    src.write_text(CALLS)
    bc = tmp_path / "k.bc"
    subprocess.run(["clang-14", "-Oz", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    ir = disassemble(bc.read_bytes(), str(bc))
    features = site_statistics(ir, {})
    callees = module_callees(ir, features)
    assert {c: sorted(s) for c, s in callees.items()} == {
        "sq": ["api:call1", "twice:call0", "twice:call1"], "twice": ["api:call0", "api:call2"]}
    row = callee_row([features[s] for s in callees["sq"]])
    assert len(row) == len(CALLEE_NAMES) == 1 + 3 * len(ALL_NAMES)
    assert row[0] == math.log(3)
    n = len(ALL_NAMES)
    column = [features[s][0] for s in callees["sq"]]
    assert row[1] == np.mean(column) and row[1 + n] == max(column) and row[1 + 2 * n] == min(column)

    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "callees.jsonl").write_text(
        '{"module": "m", "origin": "p", "callee": "sq", "sites": ["twice:call0"], '
        '"own": 10, "inline": 9, "noinline": 11}\n'
        '{"module": "m", "origin": "p", "callee": "twice", "error": "clang failed"}\n'
        '{"module": "m", "origin": "p", "callee": "tw')     # a line cut short by a kill
    assert [r["callee"] for r in read_callees(labels)] == ["sq"]
