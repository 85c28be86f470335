"""How a representation is judged where decisions are verified: as trials
saved (``mire bench encoder``).

A task gives its cases (each with ``program``, ``speed``: candidate ->
speedup over the baseline, ``bad``: candidates that changed an output,
``oracle``) and, per representation, a leave-one-program-out ranking
(case index -> its candidates best first with a score), the same shape
:mod:`mirecc.learn.rankbench` judges.  Per representation:

- **guess**: the share of the oracle's log gain reached by applying the
  first candidate where its score exceeds the task's ``min_gain``, and the
  cases below 0.95x;
- **K90**: the candidates each case must measure (its first K, the fastest
  correct kept, as ``mire tune``, the code-size search and the adaptive
  runtime do) for the whole set to reach 90% of the oracle's log gain;
- intervals from resampling programs (every case of a drawn program comes
  along), and for each representation its difference from a reference
  (statistics alone) on the same draws, so a gain is claimed only where
  the interval of the difference excludes zero.
"""
from __future__ import annotations

import math
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

from mirecc.learn.adapter import embedding_block, fit_adapter, split_kind
from mirecc.learn.embeddings import embedding_of
from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions
from mirecc.learn.rankbench import judge as judge_ranking

#: the share of the oracle's log gain that K90 must reach
REACH = 0.9
#: resamples of programs, and the interval's coverage
RESAMPLES = 2000
COVERAGE = 0.9
#: below this a case counts as slowed down
SLOW = 0.95


@dataclass
class Judged:
    """What a task hands to the judge."""
    task: str
    cases: list
    rankings: dict                 # representation -> {case index: [(candidate, score), ...]}
    min_gain: float                # a guess applies only above this score
    candidates: int                # the most candidates any case has (K's ceiling)
    protocol: str = ""             # one sentence: labels, folds, baseline
    reference: str = "statistics"  # the representation the others are compared with
    notes: list = field(default_factory=list)
    #: ``refit(kinds, fraction, seed)``: the rankings again, each fold's
    #: heads trained on ``fraction`` of its training programs (label efficiency)
    refit: object = None


@dataclass
class Case:
    """A case as the judge reads it: its program (held out and resampled
    whole), ``speed`` (candidate -> speedup over the baseline, outputs
    unchanged) and ``bad`` (candidates that failed or changed an output)."""
    program: str
    speed: dict
    bad: set = field(default_factory=set)

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])


#: principal components of an embedding a judged forest reads
PCA = 6


def folds(cases, label: str, fraction: float = 1.0, draw: int = 0):
    """Leave one program out: per program of ``cases``, (its case indices,
    the training cases' indices: ``fraction`` of the other programs), with a
    progress line ``label`` on stderr."""
    programs = sorted({c.program for c in cases})
    for n, held in enumerate(programs):
        print(f"\r{label} {n + 1}/{len(programs)}", end="", file=sys.stderr, flush=True)
        keep = training_programs(programs, held, fraction, draw)
        yield ([i for i, c in enumerate(cases) if c.program == held],
               [i for i, c in enumerate(cases) if c.program in keep])
    print(file=sys.stderr)


def fold_vectors(stats: np.ndarray, emb: dict, kind: str, train, test,
                 pca_k: int = PCA) -> np.ndarray:
    """One fold's rows for representation ``kind``: the task's statistics,
    an embedding's first ``pca_k`` principal components fitted on the
    training rows (the whole standardised vector for ``adapter:`` kinds), or
    both for ``statistics+...``."""
    name = embedding_of(kind)
    if name is None:
        return stats
    adapter, base = split_kind(kind)
    block = embedding_block(emb[name], train, test, pca_k, adapter)
    return np.hstack([stats, block]) if base.startswith("statistics+") else block


def fold_ranking(kind: str, V: np.ndarray, Y: np.ndarray, train, test,
                 quantile: float | None = None, trees: int = 100) -> dict:
    """Test row -> its candidates (by column of ``Y``, the training rows'
    log gains) best first with a score: the forest's mean prediction, or its
    trees' ``quantile``; the adapter's members for ``adapter:`` kinds."""
    if split_kind(kind)[0]:
        members = fit_adapter(V[train], Y).predictions(V[test])
    else:
        model = fit_forest(V[train], Y, ForestConfig(trees=trees, min_samples_leaf=2,
                                                     max_features=0.5, seed=0))
        members = tree_predictions(model, V[test])
    scores = members.mean(axis=1) if quantile is None else np.quantile(members, quantile,
                                                                       axis=1)
    return {int(i): sorted(((j, float(q)) for j, q in enumerate(row)), key=lambda t: -t[1])
            for i, row in zip(test, scores)}


def mean_order(Y: np.ndarray) -> list[tuple[int, float]]:
    """The candidates (columns of ``Y``, the training rows' log gains) by
    their mean over the training rows, best first: the best single
    candidate's ranking, the same for every held-out case."""
    return sorted(((j, float(m)) for j, m in enumerate(Y.mean(axis=0))), key=lambda t: -t[1])


def rank_kinds(rankings: dict, kinds, stats: np.ndarray, emb: dict, Y: np.ndarray, train,
               test, quantile: float | None = None, trees: int = 100) -> None:
    """One fold's rankings of every representation of ``kinds`` into
    ``rankings`` (kind -> test row -> ranking); a kind whose embedding is
    not in ``emb`` is left out."""
    for kind in kinds:
        name = embedding_of(kind)
        if name is not None and name not in emb:
            continue
        V = fold_vectors(stats, emb, kind, train, test)
        rankings[kind].update(fold_ranking(kind, V, Y, train, test, quantile, trees))


def complete(rankings: dict, cases) -> dict:
    """The rankings that rank every case."""
    return {k: v for k, v in rankings.items() if len(v) == len(cases)}


@dataclass
class Logs:
    """Per case: log speedup of the guess, of the best of the first k
    candidates (k = 1..K), and of the oracle; the case's program index."""
    guess: np.ndarray      # (n,)
    best: np.ndarray       # (n, K)
    oracle: np.ndarray     # (n,)
    program: np.ndarray    # (n,) int


def case_logs(j: Judged, ranked: dict) -> Logs:
    programs = sorted({c.program for c in j.cases})
    index = {p: i for i, p in enumerate(programs)}
    guess = np.log(judge_ranking(j.cases, ranked, None, j.min_gain)["speeds"])
    best = np.stack([np.log(judge_ranking(j.cases, ranked, k, j.min_gain)["speeds"])
                     for k in range(1, j.candidates + 1)], axis=1)
    oracle = np.log([c.oracle for c in j.cases])
    return Logs(guess, best, oracle, np.asarray([index[c.program] for c in j.cases]))


def _measures(logs: Logs, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of ``weights`` (draws x cases): the guess's share of the
    oracle's log gain, K90 (``candidates + 1`` where even all of them do not
    reach it) and the mean over cases with a gain of the candidates each
    measures until it has 90% of its own oracle's log gain."""
    gain = weights @ logs.oracle
    gain = np.where(gain > 0, gain, np.nan)
    share = (weights @ logs.guess) / gain
    reached = (weights @ logs.best) / gain[:, None] >= REACH - 1e-12
    K = logs.best.shape[1]
    k90 = np.where(reached.any(1), reached.argmax(1) + 1, K + 1)
    own = logs.best >= REACH * logs.oracle[:, None] - 1e-12
    per_case = np.where(own.any(1), own.argmax(1) + 1, K + 1).astype(float)
    w = weights * (logs.oracle > 0)
    trials = (w @ per_case) / np.where(w.sum(1) > 0, w.sum(1), np.nan)
    return share, k90, trials


def program_weights(program: np.ndarray, draws: int, seed: int = 0) -> np.ndarray:
    """Draws x cases: how often each case's program (``program``: each
    case's program index, 0..n-1) was drawn when ``draws`` times the n
    programs are drawn with replacement (a drawn program brings all its
    cases); the first row is the data itself."""
    n = int(program.max()) + 1
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(draws, n))
    counts = np.stack([np.bincount(p, minlength=n) for p in picks])
    counts = np.vstack([np.ones(n, int), counts])
    return counts[:, program].astype(float)


def _weights(logs: Logs, draws: int, seed: int) -> np.ndarray:
    return program_weights(logs.program, draws, seed)


def interval(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if not x.size:
        return math.nan, math.nan
    lo, hi = np.quantile(x, [(1 - COVERAGE) / 2, (1 + COVERAGE) / 2])
    return float(lo), float(hi)


def judge(j: Judged, draws: int = RESAMPLES, seed: int = 0) -> dict:
    """Every representation of ``j``: its measures on the data, their
    intervals, and its differences from ``j.reference`` on the same draws."""
    logs = {name: case_logs(j, ranked) for name, ranked in j.rankings.items()}
    if not logs:
        return {}
    w = _weights(next(iter(logs.values())), draws, seed)
    measured = {name: _measures(l, w) for name, l in logs.items()}
    out = {}
    ref = measured.get(j.reference)
    for name, (share, k90, trials) in measured.items():
        l = logs[name]
        speeds = np.exp(l.guess)
        r = {"share": float(share[0]), "share_ci": interval(share[1:]),
             "k90": int(k90[0]), "k90_ci": interval(k90[1:].astype(float)),
             "trials": float(trials[0]), "trials_ci": interval(trials[1:]),
             "below": int((speeds < SLOW).sum()), "worst": float(speeds.min()),
             "geomean": float(np.exp(l.guess.mean())), "cases": len(l.guess)}
        if ref is not None and name != j.reference:
            ds, dt = share - ref[0], trials - ref[2]
            r["share_diff"], r["share_diff_ci"] = float(ds[0]), interval(ds[1:])
            r["trials_diff"], r["trials_diff_ci"] = float(dt[0]), interval(dt[1:])
        out[name] = r
    return out


def beats(r: dict, ref: dict, share_points: float = 0.10, fewer: float = 1 / 3) -> str | None:
    """How ``r`` beats the reference beyond the resampling interval (the
    guess's share up by ``share_points`` with the difference's interval above
    zero, or the candidates per case down by ``fewer`` of the reference's with
    the difference's interval below zero), or None."""
    if "share_diff" not in r:
        return None
    if r["share_diff"] >= share_points and r["share_diff_ci"][0] > 0:
        return f"guess +{r['share_diff'] * 100:.0f} points"
    if r["trials_diff"] <= -fewer * ref["trials"] and r["trials_diff_ci"][1] < 0:
        return f"{r['trials']:.2f} candidates per case against {ref['trials']:.2f}"
    return None


def training_programs(programs, held, fraction: float, seed: int) -> set:
    """The training programs of the fold that holds ``held`` out (a program
    or a set of them), ``fraction`` of them drawn with ``seed`` (at least 2)."""
    held = {held} if isinstance(held, str) else set(held)
    rest = sorted(p for p in set(programs) if p not in held)
    if fraction >= 1:
        return set(rest)
    k = min(len(rest), max(2, math.ceil(fraction * len(rest))))

    rng = np.random.default_rng([seed, zlib.crc32("\0".join(sorted(held)).encode())])
    return set(rng.choice(rest, size=k, replace=False).tolist())


def efficiency(j: Judged, kinds, fractions, seeds: int = 3) -> dict:
    """Representation -> fraction -> the guess's share and candidates per
    case (means over ``seeds`` draws of the training programs)."""
    out: dict = {}
    for fraction in fractions:
        runs = [j.refit(kinds, fraction, seed) for seed in range(seeds)]
        for kind in kinds:
            got = [_measures(case_logs(j, r[kind]), np.ones((1, len(j.cases))))
                   for r in runs if kind in r]
            if got:
                out.setdefault(kind, {})[fraction] = {
                    "share": float(np.mean([g[0][0] for g in got])),
                    "trials": float(np.mean([g[2][0] for g in got]))}
    return out


def efficiency_markdown(eff: dict, full: dict, reference: str = "statistics") -> str:
    fractions = sorted({f for per in eff.values() for f in per})
    lines = ["| representation | " + " | ".join(f"{f:.0%} of the programs" for f in fractions)
             + " | all (leave one out) |", "|---|" + "---|" * (len(fractions) + 1)]
    for kind, per in eff.items():
        cells = [f"{per[f]['share'] * 100:.0f}% / {per[f]['trials']:.2f}" if f in per else "-"
                 for f in fractions]
        r = full.get(kind)
        lines.append(f"| {kind} | " + " | ".join(cells) + " | "
                     + (f"{r['share'] * 100:.0f}% / {r['trials']:.2f}" if r else "-") + " |")
    return "\n".join(lines)


def _k(k: int, ceiling: int) -> str:
    return f">{ceiling}" if k > ceiling else str(k)


def markdown(j: Judged, results: dict) -> str:
    """One table: a row per representation."""
    ceiling = j.candidates
    ref = results.get(j.reference)
    lines = [f"| representation | guess: share of oracle ({COVERAGE:.0%} interval) | "
             f"vs {j.reference} | candidates per case (interval) | vs {j.reference} | K90 | "
             f"guess below {SLOW}x | worst | beats it |",
             "|---|---|---|---|---|---|---:|---:|---|"]
    for name, r in results.items():
        lo, hi = r["share_ci"]
        tlo, thi = r["trials_ci"]
        klo, khi = r["k90_ci"]
        if "share_diff" in r:
            dlo, dhi = r["share_diff_ci"]
            tdlo, tdhi = r["trials_diff_ci"]
            vs_share = f"{r['share_diff'] * 100:+.0f} ({dlo * 100:+.0f} to {dhi * 100:+.0f})"
            vs_t = f"{r['trials_diff']:+.2f} ({tdlo:+.2f} to {tdhi:+.2f})"
        else:
            vs_share = vs_t = "-"
        win = beats(r, ref) if ref is not None else None
        lines.append(f"| {name} | {r['share'] * 100:.0f}% ({lo * 100:.0f} to {hi * 100:.0f}) | "
                     f"{vs_share} | {r['trials']:.2f} ({tlo:.2f} to {thi:.2f}) | {vs_t} | "
                     f"{_k(r['k90'], ceiling)} ({_k(int(klo), ceiling)} to "
                     f"{_k(int(math.ceil(khi)), ceiling)}) | {r['below']} | "
                     f"{r['worst']:.2f} | {win or '-'} |")
    return "\n".join(lines)


def forest_rankings(cases, kinds, emb: dict, candidates_of, candidate_features,
                    folds: int | None = None, pca_k: int = 6, trees: int = 100,
                    leaf: int = 3, quantile: float = 0.5, seed: int = 0,
                    fraction: float = 1.0, draw: int = 0) -> dict:
    """Representation -> held-out rankings for tasks whose own benchmarks do
    not rank: per fold (each program alone, or ``folds`` groups of
    programs), ExtraTrees over rows [the case's vector, the case's ``task``
    numbers, ``candidate_features(candidate)``] -> log speedup, fitted on
    the other programs' timed candidates; a held-out case's candidates
    (``candidates_of``) ranked by the trees' ``quantile``.  A case's vector:
    ``stats`` (statistics), the embedding's first ``pca_k`` principal
    components fitted on the training cases, or both (``statistics+``).
    ``fraction`` < 1: each fold trains on that share of its training
    programs (:func:`training_programs`, drawn with ``draw``).
    ``adapter:<kind>``: the adapter (:mod:`mirecc.learn.adapter`) over the
    whole embedding instead of the trees over its components."""
    programs = sorted({c.program for c in cases})
    if folds:
        order = np.random.default_rng(seed).permutation(len(programs))
        fold_of = {programs[p]: n % folds for n, p in enumerate(order)}
    else:
        fold_of = {p: n for n, p in enumerate(programs)}
    stats = np.asarray([c.stats for c in cases], float)
    task = np.asarray([c.task for c in cases], float).reshape(len(cases), -1)
    out = {}
    for kind in kinds:
        name = embedding_of(kind)
        if name is not None and name not in emb:
            continue
        ranked: dict[int, list] = {}
        for f in sorted(set(fold_of.values())):
            test = [i for i, c in enumerate(cases) if fold_of[c.program] == f]
            keep = training_programs(programs, {cases[i].program for i in test}, fraction, draw)
            train = [i for i, c in enumerate(cases) if c.program in keep]
            adapter, base = split_kind(kind)
            parts = [task]
            if name is None or base.startswith("statistics+"):
                parts.append(stats)
            if name is not None:
                parts.append(embedding_block(emb[name], train, test, pca_k, adapter))
            V = np.hstack(parts)
            X, y = [], []
            for i in train:
                for cand, s in cases[i].speed.items():
                    X.append([*V[i], *candidate_features(cand)])
                    y.append(math.log(s))
            cands = {i: candidates_of(cases[i]) for i in test}
            Xc = np.asarray([[*V[i], *candidate_features(b)] for i in test for b in cands[i]])
            if adapter:
                members = fit_adapter(np.asarray(X), np.asarray(y), seed).predictions(Xc)
            else:
                members = tree_predictions(fit_forest(
                    np.asarray(X), np.asarray(y), ForestConfig(
                        trees=trees, min_samples_leaf=leaf, max_features=0.5, seed=seed)), Xc)
            q = np.quantile(members[:, :, 0], quantile, axis=1)
            start = 0
            for i in test:
                mine = q[start:start + len(cands[i])]
                start += len(cands[i])
                ranked[i] = [(cands[i][j], float(mine[j])) for j in np.argsort(-mine, kind="stable")]
        out[kind] = ranked
    return out
