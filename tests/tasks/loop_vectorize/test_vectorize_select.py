"""mire vectorize-train's choice of inputs: the encoder only where it pays
beyond the families' resampling interval."""
from __future__ import annotations

import math

from mirecc.tasks.loop_vectorize.offline import train as T

STATS = ["loop_statistics", "reassociation"]
BOTH = ["loop_embedding", "function_embedding", "loop_statistics", "reassociation"]


def point(features, logs, quantile=0.1, min_gain=0.02):
    g = math.exp(sum(logs) / len(logs))
    return {"features": features, "quantile": quantile, "min_gain": min_gain,
            "geomean": g, "worst": math.exp(min(logs)), "_logs": logs}


def cv_of(stats_logs, both_logs, families):
    return {"grid": [point(STATS, stats_logs), point(BOTH, both_logs, 0.3, 0.05)],
            "_families": families}


def test_an_encoder_gain_inside_the_noise_ships_the_statistics():
    families = [f"f{i // 3}" for i in range(30)]
    stats = [0.0] * 30
    # one family gains, another loses nearly as much: a higher geomean, not a clear one
    both = [0.05] * 3 + [-0.04] * 3 + [0.0] * 24
    cv = cv_of(stats, both, families)
    assert T._best(cv["grid"])["features"] == BOTH
    low, high = T.encoder_gain_interval(cv["grid"][1], cv["grid"][0], families)
    assert low < 0 < high
    assert T.select(cv)["features"] == STATS


def test_an_encoder_gain_in_every_family_ships_the_encoder():
    families = [f"f{i // 3}" for i in range(30)]
    cv = cv_of([0.0] * 30, [0.03] * 30, families)
    low, _ = T.encoder_gain_interval(cv["grid"][1], cv["grid"][0], families)
    assert low > 0
    assert T.select(cv)["features"] == BOTH


def test_the_kernel_level_entries_stay_out_of_metrics():
    cv = cv_of([0.0] * 6, [0.01] * 6, ["a"] * 3 + ["b"] * 3)
    out = T.public({"family_cv": cv, "chosen": T.select(cv)})
    assert "_families" not in out["family_cv"]
    assert all("_logs" not in p for p in out["family_cv"]["grid"]) and "_logs" not in out["chosen"]
    assert out["chosen"]["geomean"] == T.select(cv)["geomean"]
