"""mire size-gate's per-TU chooser: each TU's candidates in the order of the
bytes its own object says they save, within the budget and the bar."""
from __future__ import annotations

import math

from mirecc.tasks.code_size.offline import gate as G


def row(text: int, gains: list[int], seconds: float = 1.0) -> dict:
    gains = gains + [0] * (G.K - len(gains))
    return {"x": [math.log(text)], "gain": gains, "seconds": [seconds] * G.K}


def test_expected_bytes_weigh_chance_share_and_size():
    rows = [row(1000, [10, 0, 50]), row(4000, [0, 0, 0])]
    # candidate 2 wins rarely but saves 5% where it wins; 0 wins often, 1%
    wins = G._win_gains(rows, G.K)
    assert math.isclose(wins[0], 0.01) and wins[1] == 0.0 and math.isclose(wins[2], 0.05)
    chances = [[0.9, 0.5, 0.3] + [0.0] * (G.K - 3)] * 2
    e = G._expected(rows, chances, wins)
    assert math.isclose(e[0][0], 0.9 * 0.01 * 1000) and math.isclose(e[0][2], 0.3 * 0.05 * 1000)
    assert math.isclose(e[1][2], 4 * e[0][2])


def test_the_chooser_builds_the_best_expected_within_budget_and_bar():
    costs = [1.0] * G.K
    rows = [row(1000, [5, 0, 40]), row(1000, [30, 0, 0])]
    expected = [[10, 0, 20] + [0] * (G.K - 3), [25, 1, 0] + [0] * (G.K - 3)]
    one = G._chosen(rows, expected, costs, 1, 0)
    assert one == {"saved": 40 + 30, "built": 2, "searched": 2, "seconds": 2.0}
    two = G._chosen(rows, expected, costs, 2, 0)
    assert two["built"] == 4 and two["saved"] == 70
    # a bar above the first TU's best expectation leaves it unsearched
    barred = G._chosen(rows, expected, costs, 1, 21)
    assert barred == {"saved": 30, "built": 1, "searched": 1, "seconds": 1.0}
    # a candidate that costs more than the budget is skipped, not a stop
    costly = [1.5] + [1.0] * (G.K - 1)
    assert G._chosen(rows[1:], expected[1:], costly, 1, 0)["saved"] == 0
    assert G._chosen(rows[1:], expected[1:], costly, 1, 0)["built"] == 1
