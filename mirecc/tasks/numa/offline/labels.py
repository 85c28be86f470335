"""The published measurements of the NUMA/prefetcher dataset: per region
and input size, the median time of each of 768 configurations.

``labels/values/conf{1,2}_time_med.csv`` (``;``-separated, a row per region,
a column per configuration, a trailing empty field); conf1 is the small
input, conf2 the large.  A column is named after its configuration
(:mod:`mirecc.tasks.numa.configs`).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from mirecc.tasks.numa.configs import DEFAULT, FIELDS, parse_config
from mirecc.tasks.numa.offline.regions import RegionsError

SIZES = {"small": "conf1", "large": "conf2"}
# the decisions the issue judges alone: the fields each one may change (the
# others stay at the default's values)
DECISIONS = {
    "threads": ("threads",),
    "placement": ("sockets", "nodes", "placement", "smt"),
    "pages": ("pages",),
    "prefetcher": ("prefetch_mask",),
    "all": FIELDS,
}


def read_times(dataset: Path, size: str) -> tuple[list[str], dict[str, list[float]]]:
    """(configuration names, region -> median times in their order) of input
    ``size`` (``small``/``large``); a missing or unreadable time is NaN."""
    path = dataset / "labels" / "values" / f"{SIZES[size]}_time_med.csv"
    try:
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh, delimiter=";"))
    except OSError as exc:
        raise RegionsError(f"{path}: cannot read: {exc.strerror}") from None
    if not rows or not rows[0] or rows[0][0] != "regions":
        raise RegionsError(f"{path}: no 'regions;<configuration>...' header")
    configs = [c for c in rows[0][1:] if c]
    try:
        for c in configs:
            parse_config(c)
    except ValueError as exc:
        raise RegionsError(f"{path}: {exc}") from None
    if DEFAULT not in configs:
        raise RegionsError(f"{path}: no column of the default {DEFAULT}")
    times = {}
    for number, row in enumerate(rows[1:], 2):
        if not row:
            continue
        values = []
        for cell in row[1:len(configs) + 1]:
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            values.append(value if value > 0 else math.nan)
        if len(values) != len(configs):
            raise RegionsError(f"{path}:{number}: {len(values)} times for "
                               f"{len(configs)} configurations")
        times[row[0]] = values
    return configs, times


def decision_columns(configs: list[str], decision: str) -> list[int]:
    """The columns a decision may choose: those that differ from the
    default only in the decision's fields (the default included)."""
    default = parse_config(DEFAULT)
    free = DECISIONS[decision]
    keep = []
    for i, name in enumerate(configs):
        c = parse_config(name)
        if all(getattr(c, f) == getattr(default, f) for f in FIELDS if f not in free):
            keep.append(i)
    return keep
