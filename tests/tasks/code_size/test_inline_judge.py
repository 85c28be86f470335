"""The inlining policy's measure (mire size-inline-judge): a site's choice
saves against LLVM's object, the oracle takes the smallest of the three."""
import numpy as np

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
