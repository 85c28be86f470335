"""Ranking the candidate library for a module, and judging rankings.

A ranking orders the library's pipelines for one module; the driver builds
the first K and keeps the smallest object, the user's -Oz included.  The
rankings compared (``mire bench size``): the library's own (greedy) order,
the best single pipeline, the most frequent winners, K random pipelines,
a forest per feature set (instruction counts, IR2Vec, a random-init
encoder, mirecc's encoder) that predicts each pipeline's reduction, and
the nearest training modules' results in two embeddings of instruction
counts and IR2Vec together: the standardised features themselves, and an
embedding trained contrastively on the labels (GRACE-style); the oracle
(the true order) bounds them all.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.graph import GraphBuildError, build_graph
from mirecc.ir.text import disassemble
from mirecc.learn.embeddings import EmbeddingTable, embed_ir2vec, embed_kernels
from mirecc.learn.forest import ForestConfig, fit_forest
from mirecc.tasks.code_size.features import NAMES, graph_counts
from mirecc.tasks.code_size.offline.labels import OWN

FEATURE_SETS = ("counts", "ir2vec", "random-init", "encoder")


OBJECTIVES = ("text", "ir")


class Table:
    """Labels as arrays over (modules, library pipelines): ``text`` and
    ``ir`` reductions below -Oz (fractions; a failed build: -inf, never
    chosen), ``seconds`` of each build and of -Oz's.  ``objective``: what
    rankings learn and verification keeps the smallest of: ``text`` bytes
    (the driver's) or ``ir`` instructions (the published anchors')."""

    def __init__(self, labels: dict[str, dict[str, dict]], modules: list, library: list[str],
                 objective: str = "text"):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
        keep = [m for m in modules if _complete(labels.get(m.sha256, {}), library)]
        self.modules = keep
        self.library = library
        self.objective = objective
        n, p = len(keep), len(library)
        self.text = np.full((n, p), -np.inf)
        self.ir = np.full((n, p), -np.inf)
        self.seconds = np.zeros((n, p))
        self.own_seconds = np.zeros(n)
        self.own_text = np.zeros(n)
        self.own_ir = np.zeros(n)
        for i, m in enumerate(keep):
            rows = labels[m.sha256]
            own = rows[OWN]
            self.own_text[i], self.own_ir[i] = own["text_bytes"], own["ir_instructions"]
            self.own_seconds[i] = own.get("seconds", 0.0)
            for j, p_ in enumerate(library):
                row = rows[p_]
                self.seconds[i, j] = row.get("seconds", 0.0)
                if "error" in row:
                    continue
                self.text[i, j] = (own["text_bytes"] - row["text_bytes"]) / own["text_bytes"]
                self.ir[i, j] = ((own["ir_instructions"] - row["ir_instructions"])
                                 / max(1, own["ir_instructions"]))

    def subset(self, rows: np.ndarray) -> "Table":
        sub = Table.__new__(Table)
        sub.modules = [self.modules[i] for i in rows]
        sub.library, sub.objective = self.library, self.objective
        for name in ("text", "ir", "seconds", "own_seconds", "own_text", "own_ir"):
            setattr(sub, name, getattr(self, name)[rows])
        return sub

    @property
    def score(self) -> np.ndarray:
        """The objective's reductions (``text`` or ``ir``)."""
        return self.text if self.objective == "text" else self.ir


def _complete(rows: dict, library: list[str]) -> bool:
    own = rows.get(OWN)
    return bool(own and "error" not in own and own.get("text_bytes")
                and all(p in rows for p in library))


# ------------------------------------------------------------------ rankings

def static_order(train: Table, how: str) -> np.ndarray:
    """One order for every module, from the training labels: ``best`` (mean
    reduction in the objective), ``winners`` (how often each is the smallest)."""
    text = np.where(np.isfinite(train.score), train.score, -1.0)
    if how == "best":
        score = text.mean(axis=0)
    elif how == "winners":
        wins = np.zeros(len(train.library))
        best = text.argmax(axis=1)
        for i, j in enumerate(best):
            if text[i, j] > 0:
                wins[j] += 1
        score = wins + 1e-6 * text.mean(axis=0)      # ties: the better mean first
    else:
        raise ValueError(how)
    return np.argsort(-score, kind="stable")


def forest_scores(X_train: np.ndarray, train: Table, X_test: np.ndarray, seed: int = 0,
                  trees: int = 100) -> np.ndarray:
    """Predicted reduction (the objective's) of each pipeline for the test
    modules: an extra-trees forest (the loop head's, exported the same way)."""
    Y = np.where(np.isfinite(train.score), train.score, -1.0)
    model = fit_forest(X_train, Y, ForestConfig(trees=trees, min_samples_leaf=2,
                                                max_features=0.5, seed=seed))
    return model.predict(np.asarray(X_test, np.float32)).reshape(len(X_test), -1)


def standardise(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X_train, X_test = np.asarray(X_train, np.float64), np.asarray(X_test, np.float64)
    # counts span orders of magnitude: log first (a no-op in effect on small values)
    X_train, X_test = (np.sign(x) * np.log1p(np.abs(x)) for x in (X_train, X_test))
    mean, std = X_train.mean(axis=0), X_train.std(axis=0) + 1e-6
    return (X_train - mean) / std, (X_test - mean) / std


def neighbour_scores(E_train: np.ndarray, train: Table, E_test: np.ndarray,
                     k: int = 10) -> np.ndarray:
    """Each test module's predicted reduction per pipeline: the mean of its
    ``k`` nearest training modules' (cosine in ``E``), weighted by similarity."""
    gains = np.clip(np.where(np.isfinite(train.score), train.score, -1.0), -1.0, None)
    a = E_train / (np.linalg.norm(E_train, axis=1, keepdims=True) + 1e-9)
    b = E_test / (np.linalg.norm(E_test, axis=1, keepdims=True) + 1e-9)
    sim = b @ a.T
    near = np.argsort(-sim, axis=1)[:, :k]
    w = np.clip(np.take_along_axis(sim, near, axis=1), 1e-3, None)
    return np.einsum("nk,nkp->np", w, gains[near]) / w.sum(axis=1, keepdims=True)


def contrastive_embedding(X_train: np.ndarray, train: Table, X_test: np.ndarray,
                          seed: int = 0, dim: int = 32, steps: int = 400,
                          positives: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A program embedding trained the GRACE way: contrastively, on the
    corpus's own pass-sequence results.  Two training modules are a positive
    pair when their results over the library (reduction per pipeline) are
    alike: each module's ``positives`` nearest by the cosine of those
    results; the rest of the batch are negatives (InfoNCE, temperature 0.1).
    The network (features -> 128 -> ``dim``, normalised) sees only the
    module's features, so a new module is embedded without any build.
    Returns the training and test embeddings."""
    # lazy: torch costs ~2 s to import; only contrastive_embedding() needs it
    import torch

    Xs_train, Xs_test = standardise(X_train, X_test)
    gains = np.clip(np.where(np.isfinite(train.score), train.score, 0.0), 0.0, None)
    profile = gains / (np.linalg.norm(gains, axis=1, keepdims=True) + 1e-9)
    alike = profile @ profile.T
    np.fill_diagonal(alike, -np.inf)
    partners = np.argsort(-alike, axis=1)[:, :positives]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = torch.nn.Sequential(torch.nn.Linear(Xs_train.shape[1], 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, dim))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)
    X = torch.tensor(Xs_train, dtype=torch.float32)
    n, batch = len(Xs_train), min(128, len(Xs_train))
    for _ in range(steps):
        anchors = rng.choice(n, size=batch, replace=False)
        pos = partners[anchors, rng.integers(0, positives, size=batch)]
        za = torch.nn.functional.normalize(net(X[anchors]), dim=1)
        zp = torch.nn.functional.normalize(net(X[pos]), dim=1)
        logits = za @ zp.T / 0.1
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(batch))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (net(X).numpy(),
                net(torch.tensor(Xs_test, dtype=torch.float32)).numpy())


def orders_from_scores(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, axis=1, kind="stable")


# ------------------------------------------------------------------ judging

def judge(test: Table, orders: np.ndarray, k: int) -> dict:
    """What building the first ``k`` of each module's order gives.
    ``verified``: the smallest of -Oz and those k (in the objective); at
    k = 1 also ``alone``: the first pipeline's result, kept unverified."""
    n = len(test.modules)
    rows = np.arange(n)[:, None]
    top = orders[:, :k]
    text = test.score[rows, top]
    best = np.argmax(text, axis=1)
    chosen = top[np.arange(n), best]
    gain = text[np.arange(n), best]
    keep = gain > 0
    out = {"k": k, "modules": n}
    out["verified"] = _summary(test, np.where(keep, chosen, -1))
    out["compile_time_ratio"] = float(np.mean(
        (test.own_seconds + test.seconds[rows, top].sum(axis=1)) / np.maximum(
            test.own_seconds, 1e-3)))
    if k == 1:
        alone = np.where(np.isfinite(test.score[np.arange(n), orders[:, 0]]), orders[:, 0], -1)
        out["alone"] = _summary(test, alone)
    return out


def _summary(test: Table, chosen: np.ndarray) -> dict:
    """Reductions when module i keeps pipeline chosen[i] (-1: -Oz)."""
    n = len(chosen)
    idx = np.arange(n)
    text = np.where(chosen >= 0, test.text[idx, np.maximum(chosen, 0)], 0.0)
    ir = np.where(chosen >= 0, test.ir[idx, np.maximum(chosen, 0)], 0.0)
    return {"text_mean": float(text.mean()), "ir_mean": float(ir.mean()),
            "text_geomean": _geomean_reduction(text), "ir_geomean": _geomean_reduction(ir),
            "improved": float((text > 0).mean()), "larger": float((text < 0).mean()),
            "ir_improved": float((ir > 0).mean()), "ir_larger": float((ir < 0).mean()),
            "total_text": float(1 - ((1 - text) * test.own_text).sum() / test.own_text.sum())}


def _geomean_reduction(red: np.ndarray) -> float:
    """1 - the geometric mean of new/old sizes."""
    ratios = np.clip(1 - red, 1e-9, None)
    return float(1 - math.exp(np.log(ratios).mean()))


# ------------------------------------------------------------------ features

def module_features(modules: list, kind: str, cache_dir: Path, model_dirs: dict) -> dict:
    """sha256 -> feature vector of ``kind`` (FEATURE_SETS) for ``modules``;
    cached per kind and model under ``cache_dir``."""
    if kind == "counts":
        return _counts(modules, cache_dir)
    texts = {m.sha256: ("ir", _ir_text(m.path)) for m in modules}
    if kind == "ir2vec":
        vectors, _ = embed_ir2vec(texts, cache_root=cache_dir)
    else:
        model = model_dirs["trained" if kind == "encoder" else "random"]
        vectors, _ = embed_kernels(texts, model, cache_root=cache_dir,
                                   progress=f"embedding ({kind})")
    return vectors


def _ir_text(bitcode: Path) -> str:
    # llvm-dis-14 first, newer ones for newer bitcode (clang 19's corpus)
    return disassemble(bitcode.read_bytes(), str(bitcode))


def _counts(modules: list, cache_dir: Path) -> dict:
    table = EmbeddingTable(cache_dir / f"code-size-counts-{len(NAMES)}.npz")
    for m in tqdm([m for m in modules if m.sha256 not in table.vectors
                   and m.sha256 not in table.failures], desc="features (counts)",
                  unit="module", disable=None, mininterval=2):
        try:
            table.vectors[m.sha256] = graph_counts(build_graph(m.path))
        except GraphBuildError as exc:
            table.failures[m.sha256] = str(exc)[:200]
    table.save()
    return {m.sha256: table.vectors[m.sha256] for m in modules if m.sha256 in table.vectors}

