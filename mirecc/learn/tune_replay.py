"""Replaying mire tune's candidate orders on labelled units (loops, OpenMP
regions): the speedup after K tries, against each unit's oracle, and the
report ``mire bench tune`` writes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


BUDGETS = (1, 2, 5, 10, 20)


SEEDS = 50


def summarize_runs(speedups, oracle: np.ndarray) -> dict:
    """Replayed speedups (orders, units) against each unit's oracle: the
    geometric mean, the share of the oracle's log gain and the units within
    90% of their oracle's log gain, each the mean over the orders."""
    logs, log_oracle = np.log(np.asarray(speedups, dtype=np.float64)), np.log(oracle)
    share = logs.sum(axis=1) / log_oracle.sum()
    near = (logs >= 0.9 * log_oracle[None, :] - 1e-12).sum(axis=1)
    return {"geomean": float(np.exp(logs.mean())), "oracle_share": float(share.mean()),
            "within_90": float(near.mean())}


def write_report(args, header: list[str], table: dict, units: int, stem: str,
                 result: dict) -> int:
    """The table (order -> K -> :func:`summarize_runs`) under ``header``,
    printed and written to ``<out>/<stem>.md`` and ``.json``."""
    lines = [*header, "", "| order | " + " | ".join(f"K={k}" for k in BUDGETS) + " |",
             "|---|" + "---:|" * len(BUDGETS)]
    for name, per in table.items():
        lines.append(f"| {name} | " + " | ".join(
            f"{m['geomean']:.3f}x, {100 * m['oracle_share']:.0f}% of oracle, "
            f"{m['within_90']:.1f}/{units} within 90%" for m in per.values()) + " |")
    text = "\n".join(lines) + "\n"
    out = Path(args.out if args.out != "mirecc-bench" else ".work/bench-tune")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    (out / f"{stem}.md").write_text(text)
    print(text)
    print(f"mire bench tune: {out / stem}.md, .json", file=sys.stderr)
    return 0
