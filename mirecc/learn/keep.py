"""The rule a measured candidate is kept by (``mire tune``, and the
replays of tuning that the tasks' offline benches run)."""
from __future__ import annotations

import statistics

#: a candidate is kept only when faster than the best by more than this share
KEEP_THRESHOLD = 0.02


def beats(candidate: list[float], best: list[float], threshold: float) -> bool:
    """Faster beyond the noise the tune measured: the candidate's median and
    minimum beat the best's by more than the threshold and the best's own
    spread (max - min over median), and even the candidate's slowest run
    beats the best's median by more than the threshold."""
    noise = (max(best) - min(best)) / statistics.median(best)
    margin = 1 - max(threshold, noise)
    return (statistics.median(candidate) < statistics.median(best) * margin
            and min(candidate) < min(best) * margin
            and max(candidate) < statistics.median(best) * (1 - threshold))
