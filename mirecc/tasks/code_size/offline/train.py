"""``mire size-train``: the code-size ranker shipped in heads/code-size.

On the training packages only (the held-out ones stay unseen), every way
to order the library is judged by leave-packages-out cross-validation: the
mean ``.text`` reduction below -Oz when the first K pipelines are built.
The ways: the library's search order, two fixed orders learned from the
labels (the most frequent winners first; the best mean first) and a forest
per feature set the driver can compute (instruction counts, the encoder's
module embedding).  The best is shipped: a forest as ``ranker.onnx`` with
the spec's ``ranker`` section, a fixed order by rewriting the library in
that order (learned from every training module), and the command says
which.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.frontend.compiler import clang_major
from mirecc.learn.embeddings import default_cache_root
from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes
from mirecc.tasks.code_size.offline import cli as size_cli
from mirecc.tasks.code_size.offline.dataset import Labels, corpus_modules
from mirecc.tasks.code_size.offline.rank import (Table, forest_scores, judge,
                                                 module_features, orders_from_scores,
                                                 static_order)
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.modelfiles import load_model

DRIVER_FEATURES = ("counts", "encoder")
FOLDS = 5
TREES = 100


def package_folds(table: Table, folds: int) -> list[np.ndarray]:
    """Module rows per fold; a package (origin) is never split, and the
    folds get roughly equal numbers of modules (largest packages first)."""
    sizes: dict[str, int] = {}
    for m in table.modules:
        sizes[m.origin] = sizes.get(m.origin, 0) + 1
    fold_of, load = {}, [0] * folds
    for origin in sorted(sizes, key=lambda o: (-sizes[o], o)):
        f = load.index(min(load))
        fold_of[origin] = f
        load[f] += sizes[origin]
    return [np.array([i for i, m in enumerate(table.modules) if fold_of[m.origin] == f])
            for f in range(folds)]


def cross_validate(table: Table, X, k: int, folds: int) -> float:
    """Mean verified .text reduction at K over held-out folds; ``X``: the
    forest's features, or a fixed order: ``None`` (the library's),
    ``"winners"`` or ``"best"`` (:func:`static_order` of the fold's
    training modules)."""
    scores, weights = [], []
    for test_rows in package_folds(table, folds):
        if not len(test_rows):
            continue
        train_rows = np.setdiff1d(np.arange(len(table.modules)), test_rows)
        test = table.subset(test_rows)
        if X is None:
            orders = np.tile(np.arange(len(table.library)), (len(test_rows), 1))
        elif isinstance(X, str):
            orders = np.tile(static_order(table.subset(train_rows), X), (len(test_rows), 1))
        else:
            orders = orders_from_scores(forest_scores(X[train_rows], table.subset(train_rows),
                                                      X[test_rows], trees=TREES))
        scores.append(judge(test, orders, k)["verified"]["text_mean"])
        weights.append(len(test_rows))
    return float(np.average(scores, weights=weights))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    size_cli.add_arguments(parser)
    parser.add_argument("--k", type=int, default=5, help="the K the cross-validation "
                        "judges at (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    compiler = size_cli.compiler_of(args)
    major = clang_major(compiler)
    library = size_cli.library_passes(compiler)
    modules = [m for m in corpus_modules(Path(args.corpus)) if m.split == "train"]
    table = Table(Labels(Path(args.out)).table(), modules, library)
    if len(table.modules) < 2 * FOLDS:
        print(f"mire size-train: {len(table.modules)} training modules have every library "
              f"pipeline measured; run mire size-data first", file=sys.stderr)
        return 2
    cache = default_cache_root()
    features = {}
    for kind in DRIVER_FEATURES:
        vectors = module_features(table.modules, kind, cache, {"trained": SHIPPED_MODEL_DIR})
        keep = np.array([i for i, m in enumerate(table.modules) if m.sha256 in vectors])
        if len(keep) == len(table.modules):
            features[kind] = np.stack([vectors[m.sha256] for m in table.modules])
        else:
            print(f"mire size-train: {kind}: {len(table.modules) - len(keep)} modules without "
                  f"features; left out", file=sys.stderr)
    cv = {"library order": cross_validate(table, None, args.k, FOLDS),
          "most frequent winners": cross_validate(table, "winners", args.k, FOLDS),
          "best single pipeline": cross_validate(table, "best", args.k, FOLDS)}
    for kind, X in features.items():
        cv[f"forest: {kind}"] = cross_validate(table, X, args.k, FOLDS)
    for name, value in cv.items():
        print(f"  {name:<22} {100 * value:.2f}% smaller than -Oz at K={args.k} "
              f"(leave-packages-out, {FOLDS} folds)")
    # ties go to the simpler way: the fixed orders first
    winner = max(cv, key=lambda name: cv[name])
    out_dir = size_cli.SPEC.parent
    metrics = {"llvm": major, "k": args.k, "folds": FOLDS, "modules": len(table.modules),
               "cross_validation": cv, "shipped": winner}
    if not winner.startswith("forest: "):
        order = {"library order": np.arange(len(library)),
                 "most frequent winners": static_order(table, "winners"),
                 "best single pipeline": static_order(table, "best")}[winner]
        named = dict((passes, name) for name, passes in size_cli.named_library(compiler))
        size_cli.write_spec(major, [(named[library[i]], library[i]) for i in order],
                            drop_ranker=True)
        (out_dir / "ranker.onnx").unlink(missing_ok=True)
        atomic_write_bytes(out_dir / "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"mire size-train: no forest beats the fixed orders; the library is written "
              f"in the order of '{winner}', no ranker shipped")
        return 0
    best = winner.split(": ", 1)[1]
    X = features[best]
    model = fit_forest(X, np.where(np.isfinite(table.text), table.text, -1.0),
                       ForestConfig(trees=TREES, min_samples_leaf=2, max_features=0.5))
    atomic_write_bytes(out_dir / "ranker.onnx", onnx_bytes(model, X.shape[1]))
    ranker = {"llvm": major, "features": best, "head": "ranker.onnx"}
    if best == "encoder":
        ranker["encoder"] = load_model(str(SHIPPED_MODEL_DIR)).cache_version
    size_cli.write_spec(ranker=ranker)
    atomic_write_bytes(out_dir / "metrics.json", json.dumps(metrics, indent=2).encode())
    print(f"mire size-train: shipped the forest on {best} ({out_dir / 'ranker.onnx'})")
    return 0
