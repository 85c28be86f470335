"""``mire bench devmap`` and ``mire bench coarsening``: the representation
comparison of the MIREncoder paper's Tables 1 and 2, measured in one run.

Every representation goes through the same folds and the same heads:

- representations: the shipped encoder (statement + graph halves, each half
  alone as the modality ablations), the same architecture randomly
  initialised (what pretraining adds), IR2Vec 2.1.1 flow-aware vectors, and
  no IR at all (the task features alone);
- heads: mirecc's MLP head (:mod:`mirecc.tasks.opencl.offline.mlp`) and IR2Vec's own
  XGBoost settings (max_depth 10, learning rate 0.5, 70 trees);
- IR: the dataset's LLVM 9 IR, and the OpenCL source compiled by clang as
  the driver sees it (only the kernels that compile; compared with the
  dataset IR on the same rows);
- protocols: device mapping with IR2Vec's split (``StratifiedKFold(10,
  shuffle, 104)`` over ``all.txt`` order), the same over other fold seeds
  (mean and spread) and leave-kernel-out (10 folds grouped by benchmark);
  thread coarsening leave-one-row-out (IR2Vec) and leave-one-kernel-out;
- label efficiency: the head trained on 5-100 % of each training fold.

Prior art is read from the dataset's ``prior_art/`` per-point results (their
own folds) and the published figures are quoted beside ours.
"""
from __future__ import annotations

import csv
import os
import platform as host_platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.learn import embeddings as F
from mirecc.tasks.opencl.offline import datasets as D
from mirecc.tasks.opencl.offline import protocol as P
from mirecc.tasks.opencl.offline.mlp import HeadConfig, train_head
from mirecc.util.machine import cpu_model

#: published accuracies (%), MIREncoder paper Table 1 and the datasets README
DEVMAP_PUBLISHED = {
    "MIREncoder (paper)": {"amd": 93.6, "nvidia": 93.7},
    "IR2Vec (paper)": {"amd": 92.82, "nvidia": 89.68},
    "Perfograph (paper)": {"amd": 94.0, "nvidia": 90.0},
    "PROGRAML (paper)": {"amd": 86.6, "nvidia": 80.0},
}
#: published mean speedups (MIREncoder paper Table 2), with the paper's own
#: "Average" row (not the mean of the rounded per-GPU figures)
COARSENING_PUBLISHED = {
    "MIREncoder (paper)": {"Cypress": 1.29, "Tahiti": 1.30, "Fermi": 1.26, "Kepler": 1.16,
                           "average": 1.24},
    "IR2Vec (paper)": {"Cypress": 1.24, "Tahiti": 1.30, "Fermi": 1.25, "Kepler": 1.16,
                       "average": 1.23},
    "Perfograph (paper)": {"Cypress": 1.19, "Tahiti": 1.14, "Fermi": 1.03, "Kepler": 1.01,
                           "average": 1.09},
}
DEVMAP_TARGET = 0.94
COARSENING_TARGET = 1.26
XGB_SETTINGS = {"max_depth": 10, "learning_rate": 0.5, "n_estimators": 70}
PRIOR_ART_PLATFORM = {"amd": "AMD Tahiti 7970", "nvidia": "NVIDIA GTX 970"}
PRIOR_ART_GPU = {"AMD Radeon HD 5900": "Cypress", "AMD Tahiti 7970": "Tahiti",
                 "NVIDIA GTX 480": "Fermi", "NVIDIA Tesla K20c": "Kepler"}


# ------------------------------------------------------------------ heads

def fit_predict_mlp(config: HeadConfig, classes=None):
    def fit_predict(Xtr, ytr, Xte):
        return train_head(Xtr, ytr, config, classes).predict(Xte)
    return fit_predict


def fit_predict_xgb(Xtr, ytr, Xte):
    """IR2Vec's device-mapping classifier settings."""
    # lazy: xgboost is optional (the bench extra); only fit_predict_xgb() needs it
    import xgboost as xgb
    labels = sorted(set(ytr.tolist()))
    index = {v: i for i, v in enumerate(labels)}
    if len(labels) == 1:
        return np.full(len(Xte), labels[0], dtype=ytr.dtype)
    clf = xgb.XGBClassifier(**XGB_SETTINGS, n_jobs=1, random_state=0)
    clf.fit(Xtr, np.asarray([index[v] for v in ytr.tolist()]))
    return np.asarray(labels, dtype=ytr.dtype)[clf.predict(Xte).astype(int)]


# ------------------------------------------------------- jobs (parallel)

@dataclass(frozen=True)
class Job:
    """One cross-validation: a feature matrix, a head and a fold assignment."""
    features: str        # key into the shared feature table
    head: str            # "mlp" or "xgb"
    folds: str           # key into the shared fold table
    fraction: float = 1.0
    seed: int = 0


_SHARED: dict = {}       # the current task's features, folds and head settings


def _init_worker(shared: dict) -> None:
    _SHARED.update(shared)


def _run_job(job: Job) -> np.ndarray:
    X, y, rows_idx = _SHARED["features"][job.features]
    folds = _SHARED["folds"][job.folds][rows_idx]
    fit = (fit_predict_xgb if job.head == "xgb"
           else fit_predict_mlp(_SHARED["config"], _SHARED.get("classes")))
    return P.cross_validate(X, y, folds, fit, job.fraction, job.seed)


def run_jobs(jobs: list[Job], jobs_n: int, desc: str) -> dict[Job, np.ndarray]:
    """Run the cross-validations, in ``jobs_n`` worker processes.  Workers
    are spawned, not forked: a fork after torch or onnxruntime have started
    their thread pools can deadlock the child."""
    unique = list(dict.fromkeys(jobs))
    bar = tqdm(total=len(unique), desc=desc, unit="cv", file=sys.stderr, disable=None,
               mininterval=2)
    out = {}
    if jobs_n <= 1:
        for job in unique:
            out[job] = _run_job(job)
            bar.update()
    else:
        with ProcessPoolExecutor(jobs_n, mp_context=get_context("spawn"),
                                 initializer=_init_worker, initargs=(dict(_SHARED),)) as pool:
            for job, pred in zip(unique, pool.map(_run_job, unique)):
                out[job] = pred
                bar.update()
    bar.close()
    return out


# ------------------------------------------------------------- embeddings

def embed_rows(rows: list[dict], model_dirs: dict[str, Path], cache_root: Path | None,
               kinds=("ir", "src")) -> tuple[dict[tuple[str, str], list], dict]:
    """(representation, IR kind) -> per-row vector or None, and failures."""
    out, failed = {}, {}
    for kind in kinds:
        texts = F.kernel_texts(rows, kind)
        for name, model_dir in model_dirs.items():
            vec, fail = F.embed_kernels(texts, model_dir, cache_root,
                                        progress=f"embed {kind} ({name})")
            out[(name, kind)] = [vec.get(r[f"{kind}_key"]) for r in rows]
            failed[(name, kind)] = fail
        if kind == "ir":
            vec, fail = F.embed_ir2vec(texts, cache_root)
            out[("ir2vec", kind)] = [vec.get(r[f"{kind}_key"]) for r in rows]
            failed[("ir2vec", kind)] = fail
    return out, failed


def feature_matrix(vectors: list, extra: np.ndarray, rows_idx: np.ndarray,
                   part: slice = slice(None)) -> np.ndarray:
    if vectors is None:
        return extra[rows_idx]
    return np.hstack([np.stack([vectors[i][part] for i in rows_idx]), extra[rows_idx]])


def task_features(table_rows: list, emb: dict, extra: np.ndarray, y: np.ndarray):
    """label -> (X, y, row indices) for every table row on the dataset IR,
    plus the two ``src:`` rows on the kernels whose source compiles (their
    clang IR, and the dataset IR of the same rows); and those row indices."""
    every = np.arange(len(y))
    features = {}
    for label, rep, part, _ in table_rows:
        vecs = None if rep == "none" else emb[(rep, "ir")]
        features[label] = (feature_matrix(vecs, extra, every, PARTS[part]), y, every)
    src_rows = np.asarray([i for i in every if emb[("trained", "src")][i] is not None])
    if len(src_rows):
        for label, kind in (("src: OpenCL source via clang", "src"),
                            ("src: dataset IR, same rows", "ir")):
            features[label] = (feature_matrix(emb[("trained", kind)], extra, src_rows),
                               y[src_rows], src_rows)
    return features, src_rows


def machine() -> dict:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": sys.version.split()[0],
            "os": host_platform.platform()}


def read_prior_art(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------- device mapping

# (label, representation, part of the vector, head); part: both / text / graph
DEVMAP_ROWS = [
    ("mirecc", "trained", "both", "mlp"),
    ("mirecc, text half only", "trained", "text", "mlp"),
    ("mirecc, graph half only", "trained", "graph", "mlp"),
    ("random-init encoder", "random", "both", "mlp"),
    ("mirecc + XGBoost", "trained", "both", "xgb"),
    ("IR2Vec + MLP head", "ir2vec", "both", "mlp"),
    ("IR2Vec + XGBoost (its protocol)", "ir2vec", "both", "xgb"),
    ("no IR (transfer, wgsize) + MLP", "none", "both", "mlp"),
    ("no IR (transfer, wgsize) + XGBoost", "none", "both", "xgb"),
]
#: rows also run over other fold seeds and leave-kernel-out
DEVMAP_ROBUST = ("mirecc", "IR2Vec + XGBoost (its protocol)", "IR2Vec + MLP head",
                 "no IR (transfer, wgsize) + XGBoost")
#: rows with label-efficiency curves
DEVMAP_LABEL_EFFICIENCY = ("mirecc", "IR2Vec + MLP head", "IR2Vec + XGBoost (its protocol)")
PARTS = {"both": slice(None), "text": slice(0, 128), "graph": slice(128, None)}


def run_devmap(root: Path, model_dirs: dict[str, Path], config: HeadConfig,
               fold_seeds: int, jobs_n: int, cache_root: Path | None) -> dict:
    results = {"task": "devmap", "machine": machine(), "head": config.to_dict(),
               "xgboost": XGB_SETTINGS, "fold_seeds": fold_seeds, "platforms": {}}
    t0 = time.time()
    for plat in D.PLATFORMS:
        rows = D.load_devmap(root, plat)
        emb, failed = embed_rows(rows, model_dirs, cache_root)
        y = np.asarray([r["oracle"] for r in rows])
        extra = P.devmap_extra_features(rows)
        features, src_rows = task_features(DEVMAP_ROWS, emb, extra, y)
        folds = {"ir2vec": np.asarray(D.devmap_folds(rows)),
                 "kernel": P.group_kfold([r["benchmark"] for r in rows], 10)}
        for s in range(fold_seeds):
            folds[f"seed{s}"] = np.asarray(D.devmap_folds(rows, seed=s))
        _SHARED.update(features=features, folds=folds, config=config, classes=["CPU", "GPU"])

        jobs = [Job(label, head, "ir2vec") for label, _, _, head in DEVMAP_ROWS]
        jobs += [Job(k, "mlp", "ir2vec") for k in features if k.startswith("src:")]
        head_of = {label: head for label, _, _, head in DEVMAP_ROWS}
        for label in DEVMAP_ROBUST:
            jobs.append(Job(label, head_of[label], "kernel"))
            jobs += [Job(label, head_of[label], f"seed{s}") for s in range(fold_seeds)]
        for label in DEVMAP_LABEL_EFFICIENCY:
            jobs += [Job(label, head_of[label], "ir2vec", f) for f in P.FRACTIONS if f < 1]
        preds = run_jobs(jobs, jobs_n, f"devmap {plat}")

        def metrics(job: Job) -> dict:
            _, _, idx = features[job.features]
            return P.devmap_metrics([rows[i] for i in idx], preds[job],
                                    folds[job.folds][idx], plat)

        table = {}
        for label in [j.features for j in jobs if j.folds == "ir2vec" and j.fraction == 1]:
            head = head_of.get(label, "mlp")
            entry = {"head": head, "ir2vec_folds": metrics(Job(label, head, "ir2vec"))}
            if label in DEVMAP_ROBUST:
                entry["leave_kernel_out"] = metrics(Job(label, head, "kernel"))
                accs = [metrics(Job(label, head, f"seed{s}"))["accuracy"] for s in range(fold_seeds)]
                entry["other_seeds"] = {"accuracy_mean": float(np.mean(accs)),
                                        "accuracy_sd": float(np.std(accs)),
                                        "accuracy_min": min(accs), "accuracy_max": max(accs),
                                        "seeds": list(range(fold_seeds))}
            if label in DEVMAP_LABEL_EFFICIENCY:
                entry["label_efficiency"] = {
                    str(f): metrics(Job(label, head, "ir2vec", f) if f < 1
                                    else Job(label, head, "ir2vec"))["accuracy"]
                    for f in P.FRACTIONS}
            table[label] = entry
        prior = {}
        for csv_path in sorted((Path(root) / "devmap" / "prior_art").glob("*.csv")):
            pts = [p for p in read_prior_art(csv_path)
                   if p["Platform"] == PRIOR_ART_PLATFORM[plat]]
            if pts:
                sp = [float(p["Speedup"]) for p in pts]
                prior[pts[0]["Model"]] = {
                    "accuracy": float(np.mean([p["Correct?"] == "True" for p in pts])),
                    "speedup_geomean": P.geomean(sp), "speedup_mean": float(np.mean(sp)),
                    "rows": len(pts), "file": csv_path.name}
        results["platforms"][plat] = {
            "rows": len(rows), "distinct_ir": len({r["ir_sha256"] for r in rows}),
            "src_rows": int(len(src_rows)),
            "src_failed_kernels": len(failed[("trained", "src")]),
            "src_kernels": len({r["src_key"] for r in rows}),
            "embed_failures": {f"{k[0]}/{k[1]}": len(v) for k, v in failed.items()},
            "oracle": P.devmap_oracle(rows, plat), "results": table, "prior_art": prior,
            "published": {k: v[plat] for k, v in DEVMAP_PUBLISHED.items()}}
    results["seconds"] = round(time.time() - t0, 1)
    return results


# ------------------------------------------------------- thread coarsening

COARSENING_ROWS = DEVMAP_ROWS[:7] + [("no IR (GPU only) + MLP", "none", "both", "mlp"),
                                     ("no IR (GPU only) + XGBoost", "none", "both", "xgb")]


def run_coarsening(root: Path, model_dirs: dict[str, Path], config: HeadConfig,
                   jobs_n: int, cache_root: Path | None) -> dict:
    t0 = time.time()
    rows = D.load_coarsening(root)
    emb, failed = embed_rows(rows, model_dirs, cache_root)
    y = np.asarray([r["oracle_cf"] for r in rows])
    extra = P.coarsening_gpu_onehot(rows)
    features, src_rows = task_features(COARSENING_ROWS, emb, extra, y)
    folds = {p: P.coarsening_folds(rows, p) for p in ("row", "kernel")}
    _SHARED.update(features=features, folds=folds, config=config, classes=list(P.FACTORS))
    head_of = {label: head for label, _, _, head in COARSENING_ROWS}
    jobs = [Job(label, head_of.get(label, "mlp"), p) for label in features for p in folds]
    preds = run_jobs(jobs, jobs_n, "coarsening")
    table = {}
    for label in features:
        _, _, idx = features[label]
        head = head_of.get(label, "mlp")
        table[label] = {"head": head, **{
            f"leave_one_{p}_out": P.coarsening_metrics([rows[i] for i in idx],
                                                       preds[Job(label, head, p)])
            for p in folds}}
    prior = {}
    for csv_path in sorted((Path(root) / "thread_coarsening" / "prior_art").glob("*.csv")):
        pts = read_prior_art(csv_path)
        per = {}
        for p in pts:
            per.setdefault(PRIOR_ART_GPU.get(p["Platform"], p["Platform"]), []).append(
                float(p["Speedup"]))
        speed = {g: float(np.mean(v)) for g, v in per.items()}
        prior[pts[0]["Model"]] = {"speedup": speed,
                                  "speedup_average": float(np.mean(list(speed.values()))),
                                  "file": csv_path.name}
    return {"task": "coarsening", "machine": machine(), "head": config.to_dict(),
            "xgboost": XGB_SETTINGS, "rows": len(rows), "kernels": len({r["kernel"] for r in rows}),
            "src_kernels_failed": len(failed[("trained", "src")]),
            "src_rows": int(len(src_rows)),
            "oracle": P.coarsening_oracle(rows), "results": table, "prior_art": prior,
            "published": COARSENING_PUBLISHED, "seconds": round(time.time() - t0, 1)}
