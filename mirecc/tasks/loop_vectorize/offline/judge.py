"""The loop (VF, IF) choice judged as trials saved (``mire bench encoder``).

A case is one kernel of the dataset ``mire vectorize-data`` times
(``.work/vectorize/default``); its candidates are the forced
``<VF>x<IF>`` classes, each one's speedup the kernel's over LLVM's own
choice (a class whose output changed, or that reassociates a float
reduction without ``-ffast-math``, is never a candidate).  The program a
case belongs to is its kernel family, held out whole.  Rankings: the best
single class of the training families, and per representation a forest
over the loop's statistics and the reassociation flag (what the shipped
head's statistics are), the target loop's own vector (``@loop``) or its
function's (``@function``), each embedding through its principal
components; the score is the trees' quantile, as the head reads it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from mirecc.learn.embeddings import encoder_model_dirs
from mirecc.learn.judge import PCA, Case, Judged, complete, folds, mean_order, rank_kinds
from mirecc.tasks.loop_vectorize.offline.dataset import COMMITTED as DATA
from mirecc.tasks.loop_vectorize.offline.train import (CLASSES, class_times, kernel_features,
                                                       read_labels)



def shipped() -> tuple[float, float, int]:
    """The shipped head's quantile, apply gate and trees (its spec.yaml and
    metrics.json, beside the labels it was trained on)."""
    spec = yaml.safe_load((DATA.parent / "spec.yaml").read_text())
    trees = json.loads((DATA.parent / "metrics.json").read_text())["forest"]["trees"]
    return float(spec["quantile"]), float(spec["min_gain"]), int(trees)
FORMS = {"@loop": "loop_embedding", "@function": "function_embedding"}


def cases_of(rows: list[dict]) -> list:
    out = []
    for r in rows:
        times = class_times(r)
        speed = {j: times["default"] / times[c] for j, c in enumerate(CLASSES) if c in times}
        out.append(Case(r["family"], speed, set(range(len(CLASSES))) - set(speed)))
    return out


def _targets(cases, rows) -> np.ndarray:
    return np.asarray([[np.log(cases[i].speed.get(j, 1.0)) for j in range(len(CLASSES))]
                       for i in rows])


def evaluate(cases, stats: np.ndarray, emb: dict, kinds, fraction: float = 1.0,
             draw: int = 0) -> dict:
    quantile, _, trees = shipped()
    rankings = {"best single class": {}, **{k: {} for k in kinds}}
    label = "mire bench encoder: loop vectorization, leave one family out"
    for test, train in folds(cases, label, fraction, draw):
        Y = _targets(cases, train)
        single = mean_order(Y)
        rankings["best single class"].update({i: single for i in test})
        rank_kinds(rankings, kinds, stats, emb, Y, train, test, quantile, trees)
    return complete(rankings, cases)


def judged(kinds, out: Path, models: dict):
    base_of = {k: k.removeprefix("adapter:").removeprefix("statistics+") for k in kinds}
    # the decision is a loop's: its own vector and its function's (no module vector)
    kinds = [k for k, b in base_of.items() if b == "statistics"
             or (b.split("@")[0] in ("encoder", "random-init", *models)
                 and any(b.endswith(f) for f in FORMS))]
    rows = read_labels(DATA)
    wanted = {base_of[k].split("@")[0] for k in kinds if base_of[k] != "statistics"}
    dirs = {**encoder_model_dirs(wanted, out / "models"),
            **{n: Path(p) for n, p in models.items() if n in wanted}}
    parts = kernel_features(rows, DATA, dirs.get("encoder"))
    stats = np.hstack([parts["loop_statistics"], parts["reassociation"]]).astype(np.float64)
    emb = {}
    for name, model in dirs.items():
        p = parts if name == "encoder" else kernel_features(rows, DATA, model)
        for form, key in FORMS.items():
            emb[name + form] = np.asarray(p[key], np.float64)
    cases = cases_of(rows)
    rankings = evaluate(cases, stats, emb, kinds)
    families = sorted({c.program for c in cases})
    quantile, min_gain, _ = shipped()

    def refit(kinds_, fraction, draw):
        return evaluate(cases, stats, emb, kinds_, fraction, draw)

    return Judged("loop vectorization", cases,
                  {k: rankings[k] for k in ["best single class", *kinds] if k in rankings},
                  min_gain, len(CLASSES),
                  f"{len(cases)} generated loop kernels of {len(families)} families timed by "
                  f"`mire vectorize-data` (the committed `{DATA.relative_to(DATA.parents[2])}`); "
                  f"speedup over LLVM's own VF and IF at "
                  f"-O3; {len(CLASSES)} forced VF x IF classes; each family held out whole; "
                  f"ExtraTrees (their {quantile} quantile) on the loop statistics with the "
                  f"reassociation flag and {PCA} principal components of an embedding: the "
                  f"target loop's own (`@loop`) or its function's (`@function`)", refit=refit)
