"""``mire bench tune --tune-task openmp``: how fast ``mire tune`` would reach
the oracle on OpenMP programs when it tries each parallel region's
configurations in a head's order, against random order, replayed on the
timed labels of ``mire omp-data`` (PolyBench-ACC's OpenMP programs and the
generated families, at ``STANDARD``).

Leave one application out, as ``mire omp-train`` judges the heads: for each
application, a forest per feature set (100 trees, seed 0) is fitted on the other applications'
regions and ranks the held-out application's configurations per region by
the ``quantile`` of its trees' predicted log speedups (best first; the
forest's order, without the head's gate, since the tune measures what it
tries).  A tune of a program visits its regions in module order (the labels
hold no per-region time shares) and tries each region's candidates in
order; K counts the candidates tried in the whole program (each one a
rebuild and its timed runs).  A candidate that failed or changed the output
costs its try and is never kept; the runtime's default configuration is
not a candidate (the tune starts from it).  After K tries each region keeps
its fastest tried configuration or the default, so a tune is never slower
than the default, and the program's speedup is the regions' combined as
:func:`mirecc.tasks.openmp.offline.dataset.combine` does.

Orders: a forest per feature set (``statistics``, the ``random-init``
encoder's and mirecc's ``encoder``'s, each as in ``mire omp-train``), ``random``
(mean of 50 orders, as for loops) and ``oracle`` (the best first).  Reported per
order and K (1, 2, 5, 10, 20): the geometric-mean speedup over the
applications, the share of the oracle's log gain and the applications
within 90% of their oracle's log gain.  The labels' small gains (1-3%) are
within their timing noise, which a real tune's threshold would not keep, so
the replay's figures at small gains are optimistic for every order alike.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions
from mirecc.learn.tune_replay import BUDGETS, SEEDS, summarize_runs, write_report
from mirecc.tasks.openmp.offline.dataset import geomean
from mirecc.tasks.openmp.offline.train import (Table, default_config_key, forest_order, read_labels,
                                               region_features)

SIZES = ("STANDARD",)
FEATURES = ("statistics", "random-init", "encoder")


def tune_unit(table, regions: list[int], orders: dict[int, list[int]], k: int) -> list:
    """The configuration each region keeps (None: the default) after ``k``
    tries: regions in order, each region's candidates in ``orders[region]``."""
    left, kept = k, []
    for i in regions:
        best, best_c = 0.0, None
        for c in orders[i]:
            if left == 0:
                break
            left -= 1
            if not table.unsafe[i, c] and table.Y[i, c] > best:
                best, best_c = table.Y[i, c], c
        kept.append(best_c)
    return kept


def replay(table, units: dict, orders: dict[int, list[int]], k: int) -> dict:
    """(program, size) -> the program's speedup after ``k`` tries."""
    out = {}
    for unit, regions in units.items():
        idx = np.asarray(regions)
        out[unit] = table.program_speedups(idx, tune_unit(table, regions, orders, k))[unit]
    return out


def run(args) -> int:
    labels = Path(args.omp_labels)
    rows = [r for r in read_labels(labels) if r.get("size") in SIZES]
    if not rows:
        print(f"mire bench tune: {labels}: no OpenMP labels at {', '.join(SIZES)} (run mire "
              "omp-data, or pass --omp-labels heads/openmp/labels)", file=sys.stderr)
        return 2
    table = Table(rows)
    default = default_config_key(labels)
    if default is None:
        print(f"mire bench tune: {labels}/meta.json does not give the machine's cores (the "
              "runtime's default team size)", file=sys.stderr)
        return 2
    candidates = [c for c, key in enumerate(table.classes) if key != default]
    units: dict[tuple, list[int]] = {}
    for i, (prog, size, _) in enumerate(table.keys):    # module order within a program
        units.setdefault((prog, size), []).append(i)
    app_of = {(p, s): table.apps[i] for i, (p, s, _) in enumerate(table.keys)}
    kinds = list(FEATURES)
    X = region_features(table, kinds, labels, "clang-14", Path(".work/omp-train"))

    orders: dict[str, dict[int, list[int]]] = {k: {} for k in kinds}
    orders["oracle"] = {i: sorted(candidates, key=lambda c: -table.Y[i, c])
                        for i in range(len(table.keys))}
    for app in sorted(set(table.apps.tolist())):
        test = np.flatnonzero(table.apps == app)
        train = np.flatnonzero(table.apps != app)
        for kind in kinds:
            ok = train[np.all(np.isfinite(X[kind][train]), axis=1)]
            model = fit_forest(X[kind][ok], table.Y[ok], ForestConfig(trees=100, seed=0))
            for i in test:
                if not np.all(np.isfinite(X[kind][i])):      # no features: random order
                    orders[kind][i] = list(np.random.default_rng(i).permutation(candidates))
                    continue
                orders[kind][i] = forest_order(tree_predictions(model, X[kind][i:i + 1])[0],
                                               0.3, candidates)
    rng = np.random.default_rng(0)
    randoms = [{i: list(rng.permutation(candidates)) for i in range(len(table.keys))}
               for _ in range(SEEDS)]

    def by_app(speedups: dict) -> dict:
        per: dict[str, list] = {}
        for unit, x in speedups.items():
            per.setdefault(app_of[unit], []).append(x)
        return {a: geomean(v) for a, v in per.items()}

    every = sum(len(regions) for regions in units.values()) * len(candidates)
    oracle = by_app(replay(table, units, orders["oracle"], every))
    apps = sorted(oracle)
    oracle_of = np.asarray([oracle[a] for a in apps])

    def measure(runs: list[dict]) -> dict:
        return summarize_runs([[r[a] for a in apps] for r in runs], oracle_of)

    table_out = {}
    for name in [*kinds, "random", "oracle"]:
        table_out[name] = {}
        for k in BUDGETS:
            if name == "random":
                runs = [by_app(replay(table, units, o, k)) for o in randoms]
            else:
                runs = [by_app(replay(table, units, orders[name], k))]
            table_out[name][k] = measure(runs)
    result = {"labels": str(labels), "sizes": list(SIZES), "applications": apps,
              "regions": len(table.keys), "candidates": [table.classes[c] for c in candidates],
              "default": default, "oracle": oracle,
              "oracle_geomean": float(np.exp(np.log(oracle_of).mean())), "table": table_out}
    header = [f"# mire bench tune --tune-task openmp: region configurations in a forest's "
              f"order vs random, replayed on {len(apps)} applications ({len(table.keys)} "
              f"regions, {', '.join(SIZES)}), leave one application out", "",
              f"Speedup over the OpenMP runtime's default ({default}) after K candidates "
              f"tried per program (each: a build and its timed runs; the best so far kept per "
              f"region); {len(candidates)} candidates per region; oracle geomean "
              f"{result['oracle_geomean']:.3f}x; random: mean of {SEEDS} orders; labels "
              f"{labels}."]
    named = {(f"forest: {name}" if name in kinds else name): per
             for name, per in table_out.items()}
    return write_report(args, header, named, len(apps), "tune-openmp", result)
