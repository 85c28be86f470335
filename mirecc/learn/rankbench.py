"""What the tasks' ranking benchmarks share (``mire bench cuda``, ``mire bench
nests``): leave-one-program-out rankings of candidates judged on timed
labels, the table and the plot.

A case has ``speed`` (candidate -> speedup over the baseline: the source's
block shape, LLVM's schedule; outputs unchanged), ``bad`` (candidates that
changed an output or failed) and ``oracle`` (the best speedup, at least
1.0).  A ranking gives each case its candidates best first with a score (a
predicted log gain).  A ranking **guesses** its first candidate where the
score exceeds ``min_gain`` (else the baseline stays) and is **verified**
with K candidates: the first K measured beside the baseline, the fastest
correct one kept (a changed output is seen by the check, so never kept).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from mirecc.learn.gates import FLOOR, calibrate, gate_row, refusal_reason
from mirecc.util.plots import pyplot


def pca(train: np.ndarray, test: np.ndarray, k: int):
    """``train`` and ``test`` rows on the first ``k`` principal components of
    the standardised ``train`` rows."""
    mu, sd = train.mean(0), train.std(0) + 1e-9
    a, b = (train - mu) / sd, (test - mu) / sd
    _, _, vt = np.linalg.svd(a, full_matrices=False)
    return a @ vt[:k].T, b @ vt[:k].T


def judge(cases, ranked: dict[int, list], k: int | None, min_gain: float) -> dict:
    """``k`` None: the guess; else the best correct of the first ``k`` and the
    baseline.  A candidate not timed for the case counts as the baseline
    (the verified build keeps it; a guess is counted 1.0 and flagged
    untimed).  Metrics: error (1 - chosen / oracle speed, mean), geomean
    speedup over the baseline, share of the oracle's log gain, cases below
    0.95x, the worst, wrong outputs guessed, untimed candidates."""
    speeds, errors, wrong, untimed = [], [], 0, 0
    for i, c in enumerate(cases):
        order = ranked[i]
        if k is None:
            b, score = order[0]
            chosen = [b] if score > min_gain else []
        else:
            chosen = [b for b, _ in order[:k]]
        best = 1.0
        for b in chosen:
            if b in c.bad:
                wrong += k is None
                continue
            if b not in c.speed:
                untimed += 1
                continue
            best = c.speed[b] if k is None else max(best, c.speed[b])
        speeds.append(best)
        errors.append(1.0 - best / c.oracle)
    logs = np.log(speeds)
    gain = sum(math.log(c.oracle) for c in cases)
    return {"geomean": float(np.exp(logs.mean())), "share": float(logs.sum() / gain),
            "error": float(np.mean(errors)), "below": int(sum(s < 0.95 for s in speeds)),
            "worst": float(min(speeds)), "wrong": wrong, "untimed": untimed,
            "speeds": speeds}


def baseline_and_oracle(cases, baseline_name: str, min_gain: float) -> dict:
    """The results of keeping the baseline and of the oracle (the fastest
    correct candidate of each case)."""
    keep = judge(cases, {i: [(None, 0.0)] for i in range(len(cases))}, None, min_gain)
    oracle = judge(cases, {i: [(max(c.speed, key=c.speed.get), math.inf) if c.oracle > 1
                               else (None, 0.0)] for i, c in enumerate(cases)}, None, min_gain)
    return {baseline_name: {"guess": keep}, "oracle": {"guess": oracle}}


def table(cases, rankings: dict, ks, baseline_name: str, min_gain: float,
          extra: dict | None = None, more: dict | None = None) -> tuple[str, dict]:
    """The markdown table of every ranking, guessing and verified with each
    of ``ks``, and the results behind it; ``extra``: more rows (name ->
    {how: judged}) after the baseline and the oracle; ``more``: more rows of
    a ranking (name -> {how: judged}) after its own."""
    results = {**baseline_and_oracle(cases, baseline_name, min_gain), **(extra or {})}
    for name, ranked in rankings.items():
        results[name] = {"guess": judge(cases, ranked, None, min_gain),
                         **{f"K={k}": judge(cases, ranked, k, min_gain) for k in ks},
                         **(more or {}).get(name, {})}
    lines = ["| ranking | how | error | geomean | share of oracle | below 0.95x | worst | "
             "wrong outputs |", "|---|---|---|---|---|---|---|---|"]
    for name, modes in results.items():
        for how, r in modes.items():
            lines.append(f"| {name} | {how} | {r['error']:.3f} | {r['geomean']:.3f} | "
                         f"{r['share']:.0%} | {r['below']} | {r['worst']:.3f} | {r['wrong']} |")
    return "\n".join(lines), results


def plot(results: dict, path: Path, ks, title: str, skip=(), lines=(85, 95)) -> None:
    """Bars: each ranking's share of the oracle's log gain, guessing and
    verified with each of ``ks``."""
    plt = pyplot()
    names = [n for n in results if n not in skip and "K=%d" % ks[0] in results[n]]
    hows = ("guess", *(f"K={k}" for k in ks))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(hows)
    for j, how in enumerate(hows):
        ax.bar([i + j * width for i in range(len(names))],
               [results[n][how]["share"] * 100 for n in names], width, label=how)
    for y, style in zip(lines, ("--", ":")):
        ax.axhline(y, color="grey", ls=style, lw=0.8)
    ax.set_xticks([i + (len(hows) - 1) / 2 * width for i in range(len(names))])
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("share of the oracle's log gain (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def gate_sweep(cases, ranked: dict, thresholds, wrong: float) -> tuple[list, object, str | None]:
    """The apply gate (:mod:`mirecc.learn.gates`) of a leave-one-program-out
    ranking (``ranked``: case index -> its candidates best first with the
    trees' quantile, from a forest trained without the case's program): for
    each threshold, each held-out program's speedup with the guesses it
    lets through (the slowest of its sizes let through; a candidate in the
    case's ``bad`` counts ``wrong``, one not timed 1.0; None where none is
    let through).  Returns the rows, the admissible threshold with the best
    geomean (None if none is) and, with none, why."""
    programs = sorted({c.program for c in cases})
    rows = []
    for t in thresholds:
        per: dict = {}
        for i, c in enumerate(cases):
            candidate, score = ranked[i][0]
            if score <= t:
                continue
            x = wrong if candidate in c.bad else c.speed.get(candidate, 1.0)
            per[c.program] = min(per.get(c.program, x), x)
        rows.append(gate_row(t, {p: per.get(p) for p in programs}))
    chosen = calibrate(rows)
    return rows, chosen, None if chosen else refusal_reason(rows, "program")


def gate_markdown(rows, chosen, noun: str, before: float | None = None) -> str:
    """The gate sweep as a markdown table (``noun``: what is applied, e.g.
    "a shape"; ``before``: the threshold shipped before, marked)."""
    lines = [f"| threshold | programs with {noun} applied | geomean | slowest | "
             f"below {FLOOR}x |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = " (chosen)" if chosen is not None and r.threshold == chosen.threshold else ""
        mark += " (before)" if before is not None and r.threshold == before else ""
        lines.append(f"| {r.threshold:g}{mark} | {r.applied} of {r.applications} | "
                     f"{r.geomean:.3f} | {r.slowest:.3f} | {r.below} |")
    return "\n".join(lines)
