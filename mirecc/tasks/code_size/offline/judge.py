"""The code-size ranking judged as trials saved (``mire bench encoder``).

A case is one corpus module with every library pipeline measured in the
committed labels (``heads/code-size/labels``); its candidates are the
library's pipelines, each one's "speedup" the module's ``.text`` bytes at
clang -Oz over its bytes through the pipeline (above 1: smaller; a failed
build counts as changed output, never kept).  The program a case belongs to
is its package: every module of a package is held out together.  Rankings:
the library's own order and the most frequent winners of the training
packages (no IR read; their first candidate is always the guess), and per representation a forest that predicts each
pipeline's reduction from the module's statistics (instruction and
graph counts, :mod:`mirecc.tasks.code_size.features`), an embedding's
principal components, or both.  The decision is the module's, so there is
no ``@function`` form here.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from mirecc.tasks.code_size.offline.rank import Table

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "code-size" / "labels"
CORPUS = ROOT / ".work" / "size-corpus"
#: principal components of an embedding a forest reads (as the other judged tasks)
PCA = 6
#: a guess applies where the predicted log reduction exceeds this
MIN_GAIN = 0.0


class Case:
    """One module: ``speed`` pipeline -> -Oz bytes over its bytes; ``bad``:
    pipelines that failed."""
    __slots__ = ("program", "speed", "bad", "module")

    def __init__(self, program: str, speed: dict, bad: set, module: str):
        self.program, self.speed, self.bad, self.module = program, speed, bad, module

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])


def cases_of(table: Table) -> list[Case]:
    """The cases of a label table (its library's pipelines by position)."""
    out = []
    for i, m in enumerate(table.modules):
        speed, bad = {}, set()
        for j in range(len(table.library)):
            r = table.text[i, j]
            if np.isfinite(r) and r < 1:
                speed[j] = 1.0 / (1.0 - r)
            else:
                bad.add(j)
        out.append(Case(m.origin, speed, bad, m.sha256))
    return out


def _targets(table: Table, rows) -> np.ndarray:
    """Per pipeline the log reduction (-Oz bytes over the pipeline's), a failed
    build trained as twice the bytes."""
    r = np.where(np.isfinite(table.text[rows]), table.text[rows], -1.0)
    return -np.log(np.clip(1.0 - r, 1e-6, None))


def _vectors(stats: np.ndarray, emb: dict, kind: str, train, test) -> np.ndarray:
    from mirecc.learn.adapter import embedding_block, split_kind
    from mirecc.learn.embeddings import embedding_of

    name = embedding_of(kind)
    if name is None:
        return stats
    adapter, base = split_kind(kind)
    block = embedding_block(emb[name], train, test, PCA, adapter)
    return np.hstack([stats, block]) if base.startswith("statistics+") else block


def _rank(scores: np.ndarray, rows) -> dict:
    return {int(i): sorted(((j, float(s)) for j, s in enumerate(row)), key=lambda t: -t[1])
            for i, row in zip(rows, scores)}


def evaluate(table: Table, cases: list[Case], stats: np.ndarray, emb: dict, kinds,
             fraction: float = 1.0, draw: int = 0) -> dict:
    """Every ranking, leave one package out; ``fraction`` < 1: each fold's
    heads trained on that share of its training packages."""
    from mirecc.learn.adapter import fit_adapter, split_kind
    from mirecc.learn.embeddings import embedding_of
    from mirecc.learn.forest import ForestConfig, fit_forest
    from mirecc.learn.judge import training_programs

    programs = sorted({c.program for c in cases})
    library = {i: [(j, math.inf) for j in range(len(table.library))] for i in range(len(cases))}
    rankings = {"library order": library, "most frequent winners": {}, **{k: {} for k in kinds}}
    stats = np.sign(stats) * np.log1p(np.abs(stats))   # counts span orders of magnitude
    for n, held in enumerate(programs):
        print(f"\rmire bench encoder: code size, leave one package out {n + 1}/{len(programs)}",
              end="", file=sys.stderr, flush=True)
        keep = training_programs(programs, held, fraction, draw)
        train = [i for i, c in enumerate(cases) if c.program in keep]
        test = [i for i, c in enumerate(cases) if c.program == held]
        Y = _targets(table, train)
        wins = np.bincount(Y.argmax(axis=1)[Y.max(axis=1) > 0], minlength=Y.shape[1])
        order = np.argsort(-(wins + 1e-6 * Y.mean(axis=0)), kind="stable")  # ties: better mean
        rankings["most frequent winners"].update(
            {i: [(int(j), math.inf) for j in order] for i in test})
        for kind in kinds:
            name = embedding_of(kind)
            if name is not None and name not in emb:
                continue
            V = _vectors(stats, emb, kind, train, test)
            if split_kind(kind)[0]:
                pred = fit_adapter(V[train], Y).predictions(V[test]).mean(axis=1)
            else:
                model = fit_forest(V[train], Y, ForestConfig(trees=100, min_samples_leaf=2,
                                                             max_features=0.5, seed=0))
                pred = model.predict(np.asarray(V[test], np.float32)).reshape(len(test), -1)
            rankings[kind].update(_rank(pred, test))
    print(file=sys.stderr)
    return {k: v for k, v in rankings.items() if len(v) == len(cases)}


def judged(kinds, out: Path, models: dict):
    """The rankings of every representation of ``kinds`` on the committed
    labels and the corpus modules they were measured on."""
    from mirecc.learn.embeddings import representation_vectors
    from mirecc.learn.judge import Judged
    from mirecc.tasks.code_size.offline import cli as size_cli
    from mirecc.tasks.code_size.offline.dataset import Labels, corpus_modules
    from mirecc.tasks.code_size.offline.rank import _ir_text, module_features

    kinds = [k for k in kinds if "@function" not in k]
    table = Table(Labels(LABELS).table(), corpus_modules(CORPUS),
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

