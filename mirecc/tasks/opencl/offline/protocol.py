"""Evaluation protocols and metrics for device mapping and thread coarsening.

Pure numpy (plus scikit-learn for the stratified split in ``datasets``): the
model is a ``fit_predict(X_train, y_train, X_test) -> predictions`` callable,
so every representation and head goes through the same folds and metrics.

Device mapping: each row's test fold is given (IR2Vec's split, or a
leave-kernel-out split by benchmark); every fold's head is trained on the
other folds only.  Thread coarsening: leave-one-out over rows (IR2Vec's
protocol) or over kernels (all four GPUs of a kernel held out together).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mirecc.tasks.opencl.offline.datasets import GPUS, coarsening_speedup, devmap_speedup

FitPredict = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: coarsening factors a head may predict (the measured ones: 1..32, powers of 2)
FACTORS = (1, 2, 4, 8, 16, 32)
#: share of each training fold kept for the label-efficiency curves
FRACTIONS = (0.05, 0.10, 0.25, 0.50, 1.0)


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def subsample(train: np.ndarray, y: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A stratified ``fraction`` of the row indices ``train`` (every class
    keeps at least one row), drawn with ``seed``."""
    if fraction >= 1.0:
        return train
    rng = np.random.default_rng(seed)
    keep = []
    for label in np.unique(y[train]):
        rows = train[y[train] == label]
        n = max(1, int(round(fraction * len(rows))))
        keep.append(rng.choice(rows, size=n, replace=False))
    return np.sort(np.concatenate(keep))


def cross_validate(X: np.ndarray, y: np.ndarray, folds: np.ndarray, fit_predict: FitPredict,
                   fraction: float = 1.0, seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions: rows with ``folds == k`` are predicted by a
    model trained on (a ``fraction`` of) the rows of the other folds."""
    pred = np.empty(len(y), dtype=y.dtype)
    for k in np.unique(folds):
        test = np.flatnonzero(folds == k)
        train = subsample(np.flatnonzero(folds != k), y, fraction, seed * 1000 + int(k))
        pred[test] = fit_predict(X[train], y[train], X[test])
    return pred


def group_folds(groups: list) -> np.ndarray:
    """One fold per distinct group (leave-one-group-out), numbered in order
    of first appearance."""
    index: dict = {}
    return np.asarray([index.setdefault(g, len(index)) for g in groups])


def group_kfold(groups: list, n_splits: int) -> np.ndarray:
    """``n_splits`` folds with every group wholly inside one fold
    (scikit-learn's GroupKFold: balanced by rows, deterministic)."""
    # lazy: scikit-learn costs ~1.5 s to import; only group_kfold() needs it
    from sklearn.model_selection import GroupKFold
    fold = np.zeros(len(groups), dtype=int)
    for k, (_, test) in enumerate(GroupKFold(n_splits=n_splits).split(groups, groups=groups)):
        fold[test] = k
    return fold


# ---------------------------------------------------------- device mapping

def devmap_extra_features(rows: list[dict]) -> np.ndarray:
    """The task's own features: log1p(bytes transferred), log1p(work-group size)."""
    return np.asarray([[math.log1p(r["transfer"]), math.log1p(r["wgsize"])] for r in rows],
                      dtype=np.float32)


def f1_macro(y: np.ndarray, pred: np.ndarray) -> float:
    """Unweighted mean of the per-class F1 scores."""
    scores = []
    for label in np.unique(y):
        tp = np.sum((pred == label) & (y == label))
        fp = np.sum((pred == label) & (y != label))
        fn = np.sum((pred != label) & (y == label))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(scores))


def devmap_metrics(rows: list[dict], pred, folds: np.ndarray, platform: str) -> dict:
    """Accuracy (pooled, and mean/min/max over folds), macro F1, and speedup
    over the platform's static mapping (geometric and arithmetic mean)."""
    y = np.asarray([r["oracle"] for r in rows])
    pred = np.asarray(pred)
    per_fold = [float(np.mean(pred[folds == k] == y[folds == k])) for k in np.unique(folds)]
    speedups = [devmap_speedup(r, p, platform) for r, p in zip(rows, pred)]
    return {"accuracy": float(np.mean(pred == y)), "fold_accuracy_mean": float(np.mean(per_fold)),
            "fold_accuracy_sd": float(np.std(per_fold)), "fold_accuracy_min": min(per_fold),
            "fold_accuracy_max": max(per_fold), "f1_macro": f1_macro(y, pred),
            "speedup_geomean": geomean(speedups), "speedup_mean": float(np.mean(speedups)),
            "rows": len(rows)}


def devmap_oracle(rows: list[dict], platform: str) -> dict:
    speedups = [devmap_speedup(r, r["oracle"], platform) for r in rows]
    return {"accuracy": 1.0, "speedup_geomean": geomean(speedups),
            "speedup_mean": float(np.mean(speedups))}


# ------------------------------------------------------- thread coarsening

def coarsening_gpu_onehot(rows: list[dict]) -> np.ndarray:
    return np.asarray([[float(r["gpu"] == g) for g in GPUS] for r in rows], dtype=np.float32)


def coarsening_folds(rows: list[dict], protocol: str) -> np.ndarray:
    """``row``: leave-one-row-out (IR2Vec); ``kernel``: leave-one-kernel-out."""
    if protocol == "row":
        return np.arange(len(rows))
    if protocol == "kernel":
        return group_folds([r["kernel"] for r in rows])
    raise ValueError(f"protocol must be 'row' or 'kernel', not {protocol!r}")


def coarsening_metrics(rows: list[dict], pred) -> dict:
    """Mean speedup over factor 1 per GPU (arithmetic, as published) and
    their average; how often the predicted factor is the fastest."""
    per_gpu, spread = {}, {}
    for gpu in GPUS:
        sp = [coarsening_speedup(r, int(p)) for r, p in zip(rows, pred) if r["gpu"] == gpu]
        if sp:
            per_gpu[gpu] = float(np.mean(sp))
            spread[gpu] = {"sd": float(np.std(sp)), "min": min(sp), "max": max(sp),
                           "geomean": geomean(sp)}
    hits = [coarsening_speedup(r, int(p)) == coarsening_speedup(r, r["oracle_cf"])
            for r, p in zip(rows, pred)]
    return {"speedup": per_gpu, "speedup_average": float(np.mean(list(per_gpu.values()))),
            "speedup_spread": spread, "best_factor_rate": float(np.mean(hits)),
            "rows": len(rows)}


def coarsening_oracle(rows: list[dict]) -> dict:
    return coarsening_metrics(rows, [r["oracle_cf"] for r in rows])
