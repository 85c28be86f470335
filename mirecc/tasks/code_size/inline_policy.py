"""The inlining policy for size, on a compile: which call sites of a TU to
force inline or out of line, from the statistics of each site
(:mod:`.inline_features`: the IR's own and LLVM's -Oz costs, read once by
the per-TU context) through the shipped forest (``heads/code-size/
inline-policy.onnx``, ``mire size-inline-judge --write-policy``).

The forest predicts, per site, what forcing it inline and forcing it out
of line each save against LLVM's own object (log bytes; its trees' rows).
A site is forced to the choice whose median prediction is the larger,
where that prediction exceeds the spec's margin; every other site is left
to LLVM (:func:`choose`).  The decisions are built as one candidate of the
size search (:data:`.build.POLICY`) and kept only where its object is the
smallest.

numpy and ONNX Runtime, imported when a head calls :func:`policy_calls`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def choose(G: np.ndarray, margin: float) -> np.ndarray:
    """Per site: 1 inline, -1 out of line, 0 LLVM's, from the trees'
    predictions ``G`` (sites, trees, 2) of what each forced choice saves."""
    m = np.median(G, axis=1)
    best = np.where(m[:, 0] >= m[:, 1], 1, -1)
    return np.where(m.max(axis=1) > margin, best, 0)


def policy_calls(ctx, policy: dict, head: Path, opt: str, plugin) -> dict[str, str]:
    """Site id -> ``"inline"`` or ``"noinline"`` for the sites of ``ctx``'s
    TU the policy forces (``policy``: the spec's ``inline_policy``; ``head``:
    its forest's file; ``opt`` and ``plugin`` read LLVM's costs).
    HeadError when its inputs cannot be read or the forest not run."""
    # lazy: ONNX Runtime's session, only where a policy is applied
    from mirecc.taskapi.api import HeadError
    from mirecc.taskapi.onnxhead import run_onnx
    from mirecc.tasks.code_size.inline_features import cost_rows, statistics

    rows = statistics(ctx.ir_text, cost_rows(ctx.call_costs(opt, plugin)))
    if not rows:
        return {}
    sites = sorted(rows)
    X = np.asarray([rows[s] for s in sites], np.float32)
    if X.shape[1] != policy["features"]:
        raise HeadError(f"{head}: the policy reads {policy['features']} statistics of a site, "
                        f"this mirecc computes {X.shape[1]} (ship it again: mire "
                        f"size-inline-judge --write-policy)")
    try:
        G = np.asarray(run_onnx(head, X))
    except Exception as exc:  # onnxruntime raises its own types
        raise HeadError(f"{head}: cannot run the inlining policy: {exc}") from None
    if G.ndim != 3 or G.shape[0] != len(sites) or G.shape[2] != 2:
        raise HeadError(f"{head}: the inlining policy gives {G.shape}, not (sites, trees, 2)")
    return {site: "inline" if c > 0 else "noinline"
            for site, c in zip(sites, choose(G, policy["margin"])) if c}
