"""The OpenMP configurations judged as trials saved (``mire bench encoder``).

A case is one parallel region of a race-free program at one size in the
committed labels (``heads/openmp/labels``, the STANDARD size the shipped
head is trained on); its candidates are the labelled configurations
(threads, schedule, chunk), each one's speedup the region's over the
runtime's default in the same rounds (a configuration that failed or
changed the output is never kept).  The program a case belongs to is its
application (a PolyBench program, or a generated family), held out whole.
Rankings: the best single configuration of the training applications, and
per representation a forest over the region's statistics
(:mod:`mirecc.ir.region_stats`), IR2Vec's module vector, or the vector of
the region's outlined function (``@function``: what the head reads), each
embedding through its principal components; the score is the trees'
quantile, as the head's gate reads it.  A region whose vector could not be
made keeps the default in the guess and is verified in the best single
configuration's order.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mirecc.ir.region_stats import NAMES
from mirecc.learn.embeddings import embedding_of
from mirecc.learn.judge import (PCA, Case, Judged, complete, fold_ranking, fold_vectors, folds,
                                mean_order)
from mirecc.tasks.openmp.offline.train import Table, load_labels, region_features

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "openmp" / "labels"
SIZES = {"STANDARD"}
#: the head's defaults (mire omp-train): the trees' quantile read, the log gain it must promise
QUANTILE, MIN_GAIN, TREES = 0.3, 0.05, 100


def cases_of(table) -> list:
    return [Case(str(app), {j: float(np.exp(table.Y[i, j])) for j in range(len(table.classes))
                            if not table.unsafe[i, j]},
                 {j for j in range(len(table.classes)) if table.unsafe[i, j]})
            for i, app in enumerate(table.apps)]


def _feature_kind(kind: str) -> str | None:
    """The region_features set an embedding name comes from."""
    base = kind.removesuffix("@function")
    if kind == "ir2vec":
        return "ir2vec"
    if kind.endswith("@function") and base in ("encoder", "random-init"):
        return base
    return None


def evaluate(table, cases, stats: np.ndarray, emb: dict, kinds, fraction: float = 1.0,
             draw: int = 0) -> dict:
    rankings = {"best single configuration": {}, **{k: {} for k in kinds}}
    finite = {name: np.nan_to_num(e) for name, e in emb.items()}   # unusable rows left out
    label = "mire bench encoder: OpenMP, leave one application out"
    for test, train_all in folds(cases, label, fraction, draw):
        single = mean_order(table.Y[train_all])
        rankings["best single configuration"].update({i: single for i in test})
        fallback = [(j, -np.inf) for j, _ in single]
        for kind in kinds:
            name = embedding_of(kind)
            if name is not None and name not in emb:
                continue
            usable = np.isfinite(stats).all(1) & (np.isfinite(emb[name]).all(1)
                                                  if name is not None else True)
            tr = [i for i in train_all if usable[i]]
            te = [i for i in test if usable[i]]
            rankings[kind].update({i: fallback for i in test if not usable[i]})
            if te:
                V = fold_vectors(stats, finite, kind, tr, te)
                rankings[kind].update(fold_ranking(kind, V, table.Y[tr], tr, te, QUANTILE,
                                                   TREES))
    return complete(rankings, cases)


def judged(kinds, out: Path, models: dict):
    kinds = [k for k in kinds if k.removeprefix("adapter:").removeprefix("statistics+") in
             ("statistics", "ir2vec", "encoder@function", "random-init@function")]
    table = Table(load_labels(LABELS, sizes=SIZES))
    wanted = sorted({f for k in kinds if (f := _feature_kind(
        k.removeprefix("adapter:").removeprefix("statistics+")))})
    out.mkdir(parents=True, exist_ok=True)
    X = region_features(table, wanted, LABELS, "clang-14", out)
    nstat = len(NAMES)
    stats = X["statistics"]
    emb = {}
    for k in kinds:
        name = k.removeprefix("adapter:").removeprefix("statistics+")
        f = _feature_kind(name)
        if f and f in X:
            emb[name] = X[f][:, nstat:]
    cases = cases_of(table)
    rankings = evaluate(table, cases, stats, emb, kinds)
    apps = sorted({c.program for c in cases})
    meta = LABELS / "meta.json"
    m = json.loads(meta.read_text()) if meta.is_file() else {}

    def refit(kinds_, fraction, draw):
        return evaluate(table, cases, stats, emb, kinds_, fraction, draw)

    return Judged("OpenMP configurations", cases,
                  {k: rankings[k] for k in ["best single configuration", *kinds]
                   if k in rankings},
                  MIN_GAIN, len(table.classes),
                  f"{len(cases)} parallel regions of {len(apps)} applications (PolyBench-ACC "
                  f"OpenMP and generated families, size STANDARD) timed on "
                  f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores "
                  f"({m.get('cc_version', '?')}); speedup over the runtime's default; "
                  f"{len(table.classes)} configurations; each application held out whole; "
                  f"ExtraTrees (their {QUANTILE} quantile) on the region statistics and "
                  f"{PCA} principal components of an embedding; module vectors are not "
                  f"judged (the decision is the region's: its outlined function's vector, "
                  f"`@function`)", refit=refit)
