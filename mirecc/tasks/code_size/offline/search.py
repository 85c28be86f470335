"""The candidate library search: measure many pipelines on a sample of
training modules, then pick, greedily, the pipelines that together shrink
the most modules below clang's -Oz (``.text`` bytes: what the driver keeps).

The greedy order is the library's order: its first K pipelines are the
best K found for the training sample as a set (each one adds the most
given those before it), which is what ``size_search: K`` builds when no
learned ranking reorders them.
"""
from __future__ import annotations

from mirecc.tasks.code_size.offline.labels import OWN


def reductions(table: dict[str, dict[str, dict]], metric: str = "text_bytes"
               ) -> dict[str, dict[str, float]]:
    """module -> pipeline -> fraction below clang's -Oz in ``metric``
    (negative: larger; failed builds left out), for modules whose -Oz was
    measured and is not empty."""
    out: dict[str, dict[str, float]] = {}
    for module, rows in table.items():
        own = rows.get(OWN, {}).get(metric)
        if not own:
            continue
        out[module] = {p: (own - row[metric]) / own for p, row in rows.items()
                       if p != OWN and metric in row}
    return out


def greedy_library(red: dict[str, dict[str, float]], pipelines: list[str], size: int
                   ) -> list[dict]:
    """Up to ``size`` pipelines, each the one that adds most to the summed
    best-of-library reduction (a module keeps -Oz when none is smaller);
    stops when nothing adds.  Each entry: pipeline, gain (mean over the
    modules), covered (mean best-of-library reduction so far)."""
    best = {m: 0.0 for m in red}
    chosen: list[dict] = []
    left = list(pipelines)
    n = max(1, len(red))
    while left and len(chosen) < size:
        def gain(p: str) -> float:
            return sum(max(0.0, r.get(p, 0.0) - best[m]) for m, r in red.items())
        top = max(left, key=lambda p: (gain(p), -left.index(p)))
        added = gain(top)
        if added <= 0:
            break
        for m, r in red.items():
            best[m] = max(best[m], r.get(top, 0.0))
        left.remove(top)
        chosen.append({"pipeline": top, "gain": added / n, "covered": sum(best.values()) / n})
    return chosen


def pad_library(red: dict[str, dict[str, float]], library: list[dict],
                pipelines: list[str], size: int) -> list[dict]:
    """``library`` filled up to ``size`` with the pipelines of the best mean
    reduction alone: once the greedy gains on the training sample reach
    zero, the held-out modules (and the ranker) may still use them."""
    taken = {e["pipeline"] for e in library}
    covered = library[-1]["covered"] if library else 0.0
    rest = sorted((p for p in pipelines if p not in taken),
                  key=lambda p: -pipeline_summary(red, p).get("mean", -1.0))
    return library + [{"pipeline": p, "gain": 0.0, "covered": covered}
                      for p in rest[:max(0, size - len(library))]]


def pipeline_summary(red: dict[str, dict[str, float]], pipeline: str) -> dict:
    """One pipeline alone over the modules: mean reduction, share smaller,
    share larger than -Oz."""
    values = [r[pipeline] for r in red.values() if pipeline in r]
    if not values:
        return {"modules": 0}
    return {"modules": len(values), "mean": sum(values) / len(values),
            "smaller": sum(v > 0 for v in values) / len(values),
            "larger": sum(v < 0 for v in values) / len(values)}
