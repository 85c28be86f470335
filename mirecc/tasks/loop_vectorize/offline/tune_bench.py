"""``mire bench tune``: how fast ``mire tune`` reaches the oracle on held-out
loop kernels when it tries candidates in the head's order, against random
order, replayed on timed labels.

    mire vectorize-data --families divmod,nested,short_trip,triad --out .work/vectorize/held-out
    mire bench tune [--tune-data .work/vectorize/held-out]

For each kernel of the dataset (by default the four families the shipped
loop-vectorize head never saw in training), every forced (VF, IF) was
timed against LLVM's default (``mire vectorize-data``: outputs checked,
pinned, repeats).  A tune that has tried the first K candidates of an order
keeps the fastest of them or LLVM's default (never slower, as ``mire tune``
keeps a change only when it is faster); its speedup over clang -O3 after K
tries is replayed from those times.  Orders:

* ``head``: the shipped head's ranking for the kernel (the ``quantile`` of
  its trees' predicted gains, best first: the order ``mire tune`` uses);
* ``random``: uniformly random orders, averaged over :data:`SEEDS` seeds;
* ``oracle``: the best candidate first (K = 1 reaches it).

Reported per order and K in :data:`BUDGETS`: geometric-mean speedup, the
share of the oracle's log gain, kernels within 90% of their oracle's log
gain.  Not here: LLVM's cost-model order (Debian's LLVM has no
``-debug-only`` to read it) and a random-init encoder's head (it needs the
training families' labels).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from mirecc.learn.tune_replay import BUDGETS, SEEDS, summarize_runs, write_report
from mirecc.taskapi.onnxhead import run_onnx
from mirecc.tasks.loop_vectorize.offline.train import (HELD_OUT_FAMILIES, achieved, feature_rows,
                                                       kernel_features, read_labels)


def add_arguments(p) -> None:
    g = p.add_argument_group("tune")
    g.add_argument("--tune-task", choices=("loops", "openmp"), default="loops",
                   help="tune: replay loop kernels' factors (--tune-data) or OpenMP regions' "
                        "configurations (--omp-labels) (default: %(default)s)")
    g.add_argument("--tune-data", type=Path, default=Path(".work/vectorize/held-out"),
                   help="tune: labels of mire vectorize-data to replay (default: %(default)s)")
    g.add_argument("--tune-head", type=Path, default=None,
                   help="tune: loop-vectorize head directory (default: the shipped one)")
    g.add_argument("--tune-model", type=Path, default=None,
                   help="tune: the encoder that head was trained on (default: the shipped "
                        "one; a random-init encoder's head needs its own)")


def _replay(speedups: np.ndarray, order: list[int], k: int) -> float:
    """Speedup after trying the first ``k`` of ``order`` (never below 1)."""
    return max(1.0, float(speedups[order[:k]].max())) if k else 1.0


def run(args) -> int:
    head_dir = args.tune_head or Path(__file__).resolve().parents[4] / "heads" / "loop-vectorize"
    spec = yaml.safe_load((head_dir / "spec.yaml").read_text())
    # the families every head is trained without
    rows = [r for r in read_labels(args.tune_data) if r["family"] in HELD_OUT_FAMILIES]
    parts = kernel_features(rows, args.tune_data, args.tune_model)
    G = np.asarray(run_onnx(head_dir / spec["head"], feature_rows(parts, spec["features"])))
    scores = np.quantile(G, spec["quantile"], axis=1)            # (kernels, classes)
    classes = spec["classes"]
    S = np.asarray([[achieved(r, c) for c in classes] for r in rows])
    oracle = np.maximum(1.0, S.max(axis=1))
    rng = np.random.default_rng(0)
    orders = {"head": [list(np.argsort(-scores[i], kind="stable")) for i in range(len(rows))],
              "oracle": [list(np.argsort(-S[i], kind="stable")) for i in range(len(rows))]}
    randoms = [[list(rng.permutation(len(classes))) for _ in rows] for _ in range(SEEDS)]
    table = {}
    for name in ("head", "random", "oracle"):
        table[name] = {}
        for k in BUDGETS:
            if name == "random":
                runs = [[_replay(S[i], seed[i], k) for i in range(len(rows))] for seed in randoms]
            else:
                runs = [[_replay(S[i], orders[name][i], k) for i in range(len(rows))]]
            table[name][k] = summarize_runs(runs, oracle)
    first_pick = [classes[o[0]] for o in orders["head"]]
    result = {"data": str(args.tune_data), "kernels": len(rows),
              "families": sorted({r["family"] for r in rows}), "head": str(head_dir),
              "oracle_geomean": float(np.exp(np.log(oracle).mean())), "table": table,
              "head_first": dict(zip([r["row"] for r in rows], first_pick))}
    header = [f"# mire bench tune: candidates in the head's order vs random, replayed on "
              f"{len(rows)} held-out kernels ({', '.join(result['families'])})", "",
              f"Speedup over clang -O3 after K candidates tried (each: a build and its timed "
              f"runs; the best so far kept, never slower than LLVM's default); oracle geomean "
              f"{result['oracle_geomean']:.3f}x; random: mean of {SEEDS} orders; head: "
              f"{head_dir} (encoder {spec.get('encoder')})."]
    return write_report(args, header, table, len(rows), "tune", result)
