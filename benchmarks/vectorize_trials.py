"""Trials to the best version, by the order the candidates are tried in: the
loop-vectorize head's order with statistics, with the encoder and with both
as inputs, against LLVM's neighbourhood, a fixed order and random orders,
replayed on the measured labels (``adapt_loops``' versions are tried in an
order; the sooner the best is tried, the fewer invocations lose to worse
ones, and the fewer versions need to be compiled).

    .venv/bin/python benchmarks/vectorize_trials.py [--data DIR] [--trees 100]
        [--out docs/results/vectorize-trials.md]

Data: every kernel of the committed loop-vectorize labels (``mire
vectorize-data``: 24 families, each (VF, IF) class forced and timed on this
kind of machine, outputs checked).  Each head's order comes from a forest
that never saw the kernel's family (leave one family out over all of them),
the classes sorted by the shipped head's quantile of the trees' predicted
gains, as ``adapt_loops`` orders its versions.  Orders:

* ``statistics``, ``encoder``, ``both``: the head with those inputs
  (``mirecc.tasks.loop_vectorize.offline.train.FEATURE_SETS``);
* ``LLVM's neighbourhood``: the classes nearest LLVM's own choice (the
  factors its remark reports) first, by steps of 2 in VF plus in IF, ties
  to the wider VF, then the larger IF;
* ``fixed``: by name (``MIRECC_ADAPT_ORDER=fixed``);
* ``random``: 200 shuffles per kernel, their measures averaged (the
  median: the shuffles' medians averaged);
* ``measured``: the best measured first (the oracle, for scale).

Per order and number of candidates tried ``k``: the share of the oracle's
log gain that the best of the first ``k`` captures (a candidate never beats
LLVM's own version, which the runtime always has), and, on the kernels
whose best class beats LLVM's by more than the runtime's 2% threshold, the
trials until one within 2% of the best is tried.  Intervals: 90%, from 2000
resamples of the families (a drawn family brings all its kernels), for the
difference of each order from the statistics head's on the same draws.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.learn.forest import ForestConfig  # noqa: E402
from mirecc.learn.judge import COVERAGE, RESAMPLES, interval, program_weights  # noqa: E402
from mirecc.tasks.loop_vectorize.offline.dataset import COMMITTED  # noqa: E402
from mirecc.tasks.loop_vectorize.offline.train import (CLASSES, FEATURE_SETS,  # noqa: E402
                                                       achieved, feature_rows, gains,
                                                       kernel_features, out_of_family_gains,
                                                       read_labels)
from mirecc.util.fsutil import atomic_write_bytes  # noqa: E402
from mirecc.util.machine import cpu_model  # noqa: E402

HEAD_SPEC = ROOT / "heads" / "loop-vectorize" / "spec.yaml"
THRESHOLD = 0.02        # the runtime's (mirecc.learn.keep.KEEP_THRESHOLD)
BUDGETS = (1, 2, 3, 7)  # candidates tried: adapt_versions 2..8
SHUFFLES = 200
INPUTS = {"statistics": FEATURE_SETS[0], "encoder": FEATURE_SETS[1], "both": FEATURE_SETS[2]}


def llvm_order(row: dict) -> list[int]:
    """The classes nearest LLVM's own factors first (steps of 2)."""
    vf, ic = row["default"].get("remark_vf") or 1, row["default"].get("remark_if") or 1

    def key(i):
        cvf, cic = (int(x) for x in CLASSES[i].split("x"))
        steps = abs(math.log2(cvf) - math.log2(vf)) + abs(math.log2(cic) - math.log2(ic))
        return steps, -cvf, -cic
    return sorted(range(len(CLASSES)), key=key)


def captured(S: np.ndarray, order: list[int], k: int) -> float:
    """log of the best speedup among the first ``k`` of ``order`` (>= 0:
    LLVM's own version is always there)."""
    return max(0.0, float(np.log(S[order[:k]]).max()))


def trials_to_best(S: np.ndarray, order: list[int]) -> int | None:
    """Candidates tried until one within THRESHOLD of the best (None: the
    best is LLVM's own, within THRESHOLD)."""
    best = S.max()
    if best <= 1 + THRESHOLD:
        return None
    for j, i in enumerate(order):
        if S[i] >= best * (1 - THRESHOLD):
            return j + 1
    return len(order)


def measures(S: np.ndarray, orders: list[list[int]]) -> dict:
    """Per kernel: captured log gain at each budget, and the trials."""
    return {"captured": np.asarray([[captured(s, o, k) for k in BUDGETS]
                                    for s, o in zip(S, orders)]),
            "trials": [trials_to_best(s, o) for s, o in zip(S, orders)]}


def found(trials: list) -> dict:
    """The trials' mean and median, and the share found within each budget,
    over the kernels with a gain to find."""
    t = [x for x in trials if x is not None]
    return {"trials_mean": float(np.mean(t)), "trials_median": float(np.median(t)),
            "found_within": {str(k): float(np.mean([x <= k for x in t])) for k in BUDGETS}}


def _mean_found(each: list[dict]) -> dict:
    """:func:`found` averaged over shuffles."""
    return {"trials_mean": float(np.mean([e["trials_mean"] for e in each])),
            "trials_median": float(np.mean([e["trials_median"] for e in each])),
            "found_within": {k: float(np.mean([e["found_within"][k] for e in each]))
                             for k in each[0]["found_within"]}}


def run(args) -> int:
    import yaml

    t0 = time.time()
    spec = yaml.safe_load(HEAD_SPEC.read_text())
    quantile = float(spec["quantile"])
    rows = read_labels(args.data)
    families = [r["family"] for r in rows]
    parts = kernel_features(rows, args.data, args.model)
    Y = gains(rows)
    S = np.exp(Y)                     # (kernels, classes) measured speedups over LLVM's
    oracle = np.maximum(0.0, np.log(S).max(axis=1))
    config = ForestConfig(trees=args.trees)

    orders: dict[str, list] = {}
    for label, features in INPUTS.items():
        print(f"{label}: leave one family out over {len(set(families))} families",
              file=sys.stderr)
        G = out_of_family_gains(feature_rows(parts, features), Y, families, config)
        Q = np.quantile(G, quantile, axis=1)
        orders[label] = [list(np.argsort(-q, kind="stable")) for q in Q]
    orders["LLVM's neighbourhood"] = [llvm_order(r) for r in rows]
    by_name = sorted(range(len(CLASSES)), key=lambda i: CLASSES[i])
    orders["fixed"] = [by_name] * len(rows)
    orders["measured"] = [list(np.argsort(-s, kind="stable")) for s in S]

    results = {name: measures(S, o) for name, o in orders.items()}
    rng = np.random.default_rng(0)
    shuffled = [measures(S, [list(rng.permutation(len(CLASSES))) for _ in rows])
                for _ in range(SHUFFLES)]
    results["random"] = {"captured": np.mean([m["captured"] for m in shuffled], axis=0),
                         "found": _mean_found([found(m["trials"]) for m in shuffled])}

    names = sorted(set(families))
    weights = program_weights(np.asarray([names.index(f) for f in families]), RESAMPLES)
    total = weights @ oracle                       # (draws,)
    reference = (weights @ results["statistics"]["captured"]) / total[:, None]
    table = []
    for name, m in results.items():
        share = (weights @ m["captured"]) / total[:, None]     # (draws, budgets)
        table.append({"order": name,
                      "share": [float(x) for x in share[0]],
                      "share_interval": [interval(share[1:, j]) for j in range(len(BUDGETS))],
                      "minus_statistics": [interval(share[1:, j] - reference[1:, j])
                                           for j in range(len(BUDGETS))],
                      **(m["found"] if "found" in m else found(m["trials"]))})
    worth = sum(t is not None for t in results["measured"]["trials"])
    doc = {"written_by": "benchmarks/vectorize_trials.py", "date": time.strftime("%Y-%m-%d"),
           "machine": {"cpu": cpu_model(), "platform": platform.platform()},
           "labels": str(args.data), "kernels": len(rows), "families": len(names),
           "kernels_with_gain": worth, "classes": len(CLASSES), "quantile": quantile,
           "trees": args.trees, "budgets": list(BUDGETS), "threshold": THRESHOLD,
           "oracle_geomean": float(np.exp(oracle.mean())), "orders": table,
           "seconds": time.time() - t0}
    atomic_write_bytes(args.out.with_suffix(".json"), (json.dumps(doc, indent=1) + "\n").encode())
    atomic_write_bytes(args.out, render(doc).encode())
    plot(doc, args.out.with_suffix(".png"))
    print(render(doc))
    return 0


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def render(doc: dict) -> str:
    ks = doc["budgets"]
    lines = [
        "# Trials to the best version, by order (loop-vectorize)", "",
        f"Written by `{doc['written_by']}` ({doc['date']}) from the committed loop-vectorize "
        f"labels: {doc['kernels']} kernels of {doc['families']} families, each of "
        f"{doc['classes']} (VF, IF) classes forced and timed (clang-14 -O3, "
        f"{doc['machine']['cpu']}); no new timing. Each head's order comes from a forest "
        f"({doc['trees']} trees) that never saw the kernel's family, its classes sorted by "
        f"the shipped quantile ({doc['quantile']}) of the trees' predicted gains, as "
        "`adapt_loops` orders a function's versions. LLVM's neighbourhood: the classes "
        "nearest LLVM's own factors first. Random: the mean over 200 shuffles. Measured: "
        "the best first (for scale).", "",
        f"Share of the oracle's log gain (geomean {doc['oracle_geomean']:.3f}x over LLVM's "
        "choice, the best measured class per kernel, noise included) that the best of the "
        "first k candidates captures; `adapt_versions` N tries N-1. In brackets: 90% "
        "interval of the difference from the statistics head's share, 2000 resamples of "
        "the families.", "",
        "| order | " + " | ".join(f"k = {k}" for k in ks) + " |",
        "|---|" + "---|" * len(ks)]
    for r in doc["orders"]:
        cells = []
        for j, _k in enumerate(ks):
            lo, hi = r["minus_statistics"][j]
            diff = "" if r["order"] == "statistics" else \
                f" [{100 * lo:+.0f}, {100 * hi:+.0f}]"
            cells.append(f"{_pct(r['share'][j])}{diff}")
        lines.append(f"| {r['order']} | " + " | ".join(cells) + " |")
    lines += ["", f"Trials until a class within {100 * doc['threshold']:.0f}% of the best is "
              f"tried, on the {doc['kernels_with_gain']} kernels whose best class beats "
              f"LLVM's by more than {100 * doc['threshold']:.0f}% (each trial: about 8 "
              "invocations alternating with the reference, fewer where the candidate is "
              "clearly slower):", "",
              "| order | mean | median | " + " | ".join(f"found within {k}" for k in ks) + " |",
              "|---|---|---|" + "---|" * len(ks)]
    for r in doc["orders"]:
        lines.append(f"| {r['order']} | {r['trials_mean']:.1f} | {r['trials_median']:.1f} | "
                     + " | ".join(_pct(r["found_within"][str(k)]) for k in ks) + " |")
    return "\n".join(lines) + "\n"


def plot(doc: dict, out: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in doc["orders"]:
        ax.plot(doc["budgets"], [100 * s for s in r["share"]], marker="o", label=r["order"])
    ax.set_xlabel("candidates tried (adapt_versions - 1)")
    ax.set_ylabel("share of the oracle's log gain (%)")
    ax.set_title(f"loop-vectorize, {doc['kernels']} kernels, families held out")
    ax.set_xticks(doc["budgets"])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = out.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=COMMITTED)
    p.add_argument("--model", type=Path, default=None)
    p.add_argument("--trees", type=int, default=ForestConfig.trees)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "vectorize-trials.md")
    p.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = p.parse_args(argv)
    if args.render:
        doc = json.loads(args.out.with_suffix(".json").read_text())
        atomic_write_bytes(args.out, render(doc).encode())
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
