"""The code-size ranking judged as trials saved (``mire bench encoder``).

A case is one corpus module with every library pipeline measured in the
committed labels (``heads/code-size/labels``); its candidates are the
library's pipelines, each one's "speedup" the module's ``.text`` bytes at
clang -Oz over its bytes through the pipeline (above 1: smaller; a failed
build counts as changed output, never kept).  The program a case belongs to
is its package: every module of a package is held out together.  Rankings:
the library's own order and the most frequent winners of the training
packages (no IR read; their first candidate is always the guess), and per
representation a forest that predicts each pipeline's reduction from the
module's statistics (instruction and graph counts,
:mod:`mirecc.tasks.code_size.features`), an embedding's
principal components, or both.  The decision is the module's, so there is
no ``@function`` form here.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from mirecc.learn.embeddings import representation_vectors
from mirecc.learn.judge import PCA, Case, Judged, complete, folds, rank_kinds
from mirecc.tasks.code_size.offline import cli as size_cli
from mirecc.tasks.code_size.offline.dataset import Labels, corpus_modules
from mirecc.tasks.code_size.offline.rank import Table, _ir_text, module_features

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "code-size" / "labels"
CORPUS = ROOT / ".work" / "size-corpus"
#: a guess applies where the predicted log reduction exceeds this
MIN_GAIN = 0.0


def cases_of(table: Table) -> list:
    """The cases of a label table (its library's pipelines by position):
    ``speed`` pipeline -> -Oz bytes over its bytes; ``bad``: those that failed."""
    out = []
    for i, m in enumerate(table.modules):
        speed, bad = {}, set()
        for j in range(len(table.library)):
            r = table.text[i, j]
            if np.isfinite(r) and r < 1:
                speed[j] = 1.0 / (1.0 - r)
            else:
                bad.add(j)
        out.append(Case(m.origin, speed, bad))
    return out


def _targets(table: Table, rows) -> np.ndarray:
    """Per pipeline the log reduction (-Oz bytes over the pipeline's), a failed
    build trained as twice the bytes."""
    r = np.where(np.isfinite(table.text[rows]), table.text[rows], -1.0)
    return -np.log(np.clip(1.0 - r, 1e-6, None))


def evaluate(table: Table, cases: list, stats: np.ndarray, emb: dict, kinds,
             fraction: float = 1.0, draw: int = 0) -> dict:
    """Every ranking, leave one package out; ``fraction`` < 1: each fold's
    heads trained on that share of its training packages."""
    library = {i: [(j, math.inf) for j in range(len(table.library))] for i in range(len(cases))}
    rankings = {"library order": library, "most frequent winners": {}, **{k: {} for k in kinds}}
    stats = np.sign(stats) * np.log1p(np.abs(stats))   # counts span orders of magnitude
    label = "mire bench encoder: code size, leave one package out"
    for test, train in folds(cases, label, fraction, draw):
        Y = _targets(table, train)
        wins = np.bincount(Y.argmax(axis=1)[Y.max(axis=1) > 0], minlength=Y.shape[1])
        order = np.argsort(-(wins + 1e-6 * Y.mean(axis=0)), kind="stable")  # ties: better mean
        rankings["most frequent winners"].update(
            {i: [(int(j), math.inf) for j in order] for i in test})
        rank_kinds(rankings, kinds, stats, emb, Y, train, test)
    return complete(rankings, cases)


def judged(kinds, out: Path, models: dict):
    """The rankings of every representation of ``kinds`` on the committed
    labels and the corpus modules they were measured on."""
    kinds = [k for k in kinds if "@function" not in k]
    try:
        # a case is a package's module: csmith's generated programs (in the
        # corpus for the search and its checks) are no package to hold out
        modules = [m for m in corpus_modules(CORPUS) if m.origin != "csmith"]
    except ValueError as e:
        raise SystemExit(f"mire bench encoder: code size: {e}") from None
    table = Table(Labels(LABELS).table(), modules,
                  size_cli.library_passes(size_cli.compiler_of(argparse.Namespace(cc=None))),
                  "text")
    if not table.modules:
        raise SystemExit(f"mire bench encoder: code size: no module of {CORPUS} has every "
                         f"library pipeline in {LABELS} (build the corpus: mire corpus build "
                         f"--sources debian --opt-level=-Oz --out {CORPUS})")
    out.mkdir(parents=True, exist_ok=True)
    counts = module_features(table.modules, "counts", out, {})
    keep = [i for i, m in enumerate(table.modules) if m.sha256 in counts]
    table = table.subset(np.asarray(keep))
    cases = cases_of(table)
    stats = np.stack([counts[m.sha256] for m in table.modules]).astype(np.float64)
    texts = [_ir_text(m.path) for m in table.modules]
    emb = representation_vectors(kinds, texts, [""] * len(texts), out / "embeddings", models)
    rankings = evaluate(table, cases, stats, emb, kinds)
    packages = sorted({c.program for c in cases})

    def refit(kinds_, fraction, draw):
        return evaluate(table, cases, stats, emb, kinds_, fraction, draw)

    return Judged("code-size ranking", cases, {k: rankings[k] for k in
                                               ["library order", "most frequent winners",
                                                *kinds] if k in rankings},
                  MIN_GAIN, len(table.library),
                  f"{len(cases)} modules of {len(packages)} Debian packages "
                  f"({', '.join(packages)}), each pipeline of the shipped library "
                  f"({len(table.library)}) built from the module's front-end bitcode (the "
                  f"committed labels, clang 14); \"speedup\": .text bytes at clang -Oz over "
                  f"the pipeline's; each package held out whole; ExtraTrees on the statistics "
                  f"(log instruction and graph counts) and {PCA} principal components of an "
                  f"embedding", refit=refit)

