"""Do MIREncoder's module embeddings carry information?  A probe on held-out modules.

    .venv/bin/python benchmarks/probe.py [--model DIR] [--corpus DIR] [--limit N]
                     [--max-nodes N] [--json PATH] [--threads N]

A sanity check, not a test: it prints a markdown table and writes every
figure to a JSON file (default ``.work/probe/probe.json``).

Protocol
--------
* Modules: the held-out split of the corpus (``CorpusIndex(corpus).heldout``,
  never trained on), in sha256 order.  Modules with more than ``--max-nodes``
  graph nodes (manifest ``graph_nodes``, default 20000) are skipped (slow to
  embed; the count is reported); ``--limit N`` keeps the first N of the rest.
* Features, one vector per module:
  (a) the trained encoder's module embedding (``Encoder.embed_file(bc).module``:
      mean statement embedding ++ mean GCN node embedding), ``--model``
      (default: the shipped model, mirecc/data/encoder);
  (b) the same for a randomly initialised encoder of the same architecture
      (config from the trained model's manifest, ``torch.manual_seed(--seed)``,
      exported like the trained one; cached under ``.work/probe/``);
  (c) log(number of graph nodes) alone, a size-only baseline.
  A module that either encoder fails to embed (e.g. "empty module (no
  function definitions)") is dropped from every feature
  set (reported), so all rows see the same modules.  Embeddings are cached
  per model (keyed by a hash of its manifest's file sha256s) under
  ``.work/probe/``; if the two encoders' files are identical (a --model that
  is itself the seed's random init) a warning says so.
* Tasks: label = manifest ``origin`` (source package or program family) and,
  as a second, easier task, ``kind`` (debian/kernels/csmith/opencl).  For
  each task, classes with fewer than ``--min-class`` (5) modules are dropped
  (reported).
* Probes (numpy only), features standardised with mean/std fitted on the
  training part only:
  (1) k-nearest-neighbour, k=1 and k=5, cosine similarity, leave-one-out
      (standardisation refitted without the left-out module).  k=5 is a
      majority vote, ties going to the tied class with the nearest member.
      On the 1-d size feature cosine is degenerate (always +-1), so there
      the distance is |difference|.
  (2) multinomial logistic regression, full-batch gradient descent
      (``--steps`` 300, learning rate ``--lr`` 0.5, L2 ``--l2`` 1e-3 on the
      weights, no tuning), stratified ``--folds`` (5)-fold cross-validation
      repeated over ``--repeats`` (5) seeds; mean and min/max of the
      per-repeat accuracy (pooled over the folds).
* Chance: majority class (the share of the most frequent class) and uniform
  (1 / number of classes); the same for every probe column.
* Output: a table (rows: trained / random-init / log-size only / majority /
  uniform; columns: task x probe), and JSON with every figure, the module
  and class counts and the machine (``mirecc.util.machine.cpu_model()``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from mirecc.util.machine import cpu_model  # noqa: E402
from mirecc.util.fsutil import atomic_write_bytes  # noqa: E402
from mirecc.util.modelfiles import manifest_digest  # noqa: E402

PROTOCOL = __doc__.split("Protocol\n--------\n", 1)[1].strip()
PROBES = ("1-NN", "5-NN", "logreg")
TASKS = ("origin", "kind")


# ----------------------------------------------------------------- models

def embed_all(model_dir: Path, paths: dict[str, Path], cache_file: Path,
              threads: int, label: str) -> tuple[dict[str, np.ndarray], dict[str, str], float]:
    """sha -> module embedding (cached in an .npz), sha -> error, seconds spent."""
    from mirecc.encoder.runtime import Encoder
    cached: dict[str, np.ndarray] = {}
    if cache_file.is_file():
        with np.load(cache_file) as z:
            cached = {k: z[k] for k in z.files}
    todo = [s for s in paths if s not in cached]
    errors: dict[str, str] = {}
    t0 = time.perf_counter()
    if todo:
        enc = Encoder(model_dir, cache=False, threads=threads)
        for i, sha in enumerate(todo, 1):
            try:
                cached[sha] = enc.embed_file(paths[sha]).module.astype(np.float32)
            except Exception as exc:  # EmbedError, graph build errors, ORT failures
                errors[sha] = f"{type(exc).__name__}: {exc}"[:300]
            if i % 25 == 0 or i == len(todo):
                print(f"probe: {label}: embedded {i}/{len(todo)} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
                buf = io.BytesIO()
                np.savez(buf, **cached)
                atomic_write_bytes(cache_file, buf.getvalue())
    return ({s: cached[s] for s in paths if s in cached}, errors,
            time.perf_counter() - t0)


# ----------------------------------------------------------------- probes

def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    mu = train.mean(0)
    sd = train.std(0)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return [(a - mu) / sd for a in (train, *others)]


def knn_vote(order: np.ndarray, y_other: np.ndarray, k: int) -> int:
    """Majority label of the k nearest (``order``: indices, nearest first);
    ties go to the tied label with the nearest member."""
    near = y_other[order[:k]]
    counts = Counter(near.tolist())
    best = max(counts.values())
    for lab in near:               # nearest first
        if counts[lab] == best:
            return int(lab)
    raise AssertionError


def knn_loo(X: np.ndarray, y: np.ndarray, ks=(1, 5), cosine: bool = True) -> dict[int, float]:
    """Leave-one-out k-NN accuracy; standardisation refitted without the
    left-out module each time."""
    n = len(y)
    correct = {k: 0 for k in ks}
    idx = np.arange(n)
    for i in range(n):
        rest = idx != i
        Xr, xi = standardise(X[rest], X[i:i + 1])
        if cosine:
            Xr = Xr / np.maximum(np.linalg.norm(Xr, axis=1, keepdims=True), 1e-12)
            xi = xi / max(float(np.linalg.norm(xi)), 1e-12)
            score = -(Xr @ xi[0])                  # smaller = nearer
        else:
            score = np.abs(Xr - xi).sum(1)
        order = np.argsort(score, kind="stable")
        for k in ks:
            correct[k] += knn_vote(order, y[rest], k) == y[i]
    return {k: correct[k] / n for k in ks}


def logreg_fit(X: np.ndarray, y: np.ndarray, n_classes: int, steps: int, lr: float,
               l2: float) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression by full-batch gradient descent."""
    n, d = X.shape
    W = np.zeros((d, n_classes))
    b = np.zeros(n_classes)
    Y = np.eye(n_classes)[y]
    for _ in range(steps):
        logits = X @ W + b
        logits -= logits.max(1, keepdims=True)
        P = np.exp(logits)
        P /= P.sum(1, keepdims=True)
        G = (P - Y) / n
        W -= lr * (X.T @ G + l2 * W)
        b -= lr * G.sum(0)
    return W, b


def stratified_folds(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Fold number per sample: each class shuffled and dealt round-robin,
    starting at a random fold so that the small folds are not always the last."""
    fold = np.empty(len(y), dtype=np.int64)
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        fold[members] = (np.arange(len(members)) + rng.integers(k)) % k
    return fold


def logreg_cv(X: np.ndarray, y: np.ndarray, n_classes: int, folds: int, repeats: int,
              steps: int, lr: float, l2: float, seed: int) -> list[float]:
    """Per-repeat accuracy (predictions pooled over the folds)."""
    accs = []
    for r in range(repeats):
        fold = stratified_folds(y, folds, np.random.default_rng(seed + r))
        correct = 0
        for f in range(folds):
            tr, te = fold != f, fold == f
            Xtr, Xte = standardise(X[tr], X[te])
            W, b = logreg_fit(Xtr, y[tr], n_classes, steps, lr, l2)
            correct += int(((Xte @ W + b).argmax(1) == y[te]).sum())
        accs.append(correct / len(y))
    return accs


# ------------------------------------------------------------------ main

def label_task(labels: list[str], min_class: int) -> tuple[np.ndarray, np.ndarray, list[str], dict]:
    """Keep mask, integer labels of kept modules, class names, dropped classes."""
    counts = Counter(labels)
    classes = sorted(c for c, n in counts.items() if n >= min_class)
    dropped = {c: n for c, n in sorted(counts.items()) if n < min_class}
    keep = np.array([lab in classes for lab in labels], dtype=bool)
    pos = {c: i for i, c in enumerate(classes)}
    y = np.array([pos[lab] for lab in labels if lab in pos], dtype=np.int64)
    return keep, y, classes, dropped


def fmt(cell: dict) -> str:
    if "min" in cell:
        return f"{cell['mean']:.3f} ({cell['min']:.3f}-{cell['max']:.3f})"
    return f"{cell['mean']:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--model", type=Path, default=REPO / "mirecc" / "data" / "encoder",
                   help="trained model directory (default: the shipped model)")
    p.add_argument("--random-model", type=Path, default=None,
                   help="random-init model directory (default: made and cached under --work)")
    p.add_argument("--corpus", type=Path, default=REPO / ".work" / "corpus")
    p.add_argument("--work", type=Path, default=REPO / ".work" / "probe")
    p.add_argument("--json", type=Path, default=None, help="default: WORK/probe.json")
    p.add_argument("--limit", type=int, default=0, help="keep the first N held-out modules")
    p.add_argument("--max-nodes", type=int, default=20000)
    p.add_argument("--min-class", type=int, default=5)
    p.add_argument("--seed", type=int, default=0, help="random-init and CV seed")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--l2", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    args = p.parse_args(argv)

    from mirecc.encoder.data import CorpusIndex
    t_start = time.perf_counter()
    if not (args.model / "manifest.json").is_file():
        print(f"probe: {args.model}: no manifest.json (no trained model there)", file=sys.stderr)
        return 2
    idx = CorpusIndex(args.corpus)
    heldout = list(idx.heldout)
    big = [s for s in heldout if int(idx.records[s].get("graph_nodes") or 0) > args.max_nodes]
    shas = [s for s in heldout if s not in set(big)]
    if args.limit:
        shas = shas[:args.limit]
    paths = {s: idx.ir_path(s) for s in shas}

    print(f"probe: {len(heldout)} held-out modules, {len(big)} skipped (> {args.max_nodes} "
          f"graph nodes), {len(shas)} to embed", file=sys.stderr)
    from mirecc.encoder.export import random_init_model_dir  # torch: only here
    rand_dir = args.random_model or random_init_model_dir(args.model, args.work, args.seed)
    encoders = {"trained": args.model, "random-init": rand_dir}
    same_weights = manifest_digest(args.model) == manifest_digest(rand_dir)
    if same_weights:
        print(f"probe: warning: {args.model} has the same weights as the random-init "
              f"encoder (seed {args.seed}): the two rows will be identical", file=sys.stderr)
    embeddings, errors, seconds = {}, {}, {}
    for name, mdir in encoders.items():
        cache = args.work / "embeddings" / f"{manifest_digest(mdir)}.npz"
        embeddings[name], errors[name], seconds[name] = embed_all(
            mdir, paths, cache, args.threads, name)
    ok = [s for s in shas if all(s in embeddings[n] for n in encoders)]
    failed = sorted(set(shas) - set(ok))

    features = {n: np.stack([embeddings[n][s] for s in ok]).astype(np.float64) for n in encoders}
    nodes = np.array([float(idx.records[s].get("graph_nodes") or 0) for s in ok])
    features["log-size only"] = np.log(np.maximum(nodes, 1.0))[:, None]

    results: dict = {}
    task_info: dict = {}
    for task in TASKS:
        labels = [str(idx.records[s].get(task)) for s in ok]
        keep, y, classes, dropped = label_task(labels, args.min_class)
        counts = np.bincount(y, minlength=len(classes)) if len(y) else np.zeros(0, int)
        task_info[task] = {"modules": int(keep.sum()), "classes": len(classes),
                           "class_counts": dict(zip(classes, counts.tolist())),
                           "dropped_classes": dropped,
                           "dropped_modules": int((~keep).sum())}
        print(f"probe: task {task}: {int(keep.sum())} modules in {len(classes)} classes; "
              f"dropped {len(dropped)} classes (<{args.min_class} modules, "
              f"{int((~keep).sum())} modules)", file=sys.stderr)
        if len(classes) < 2:
            print(f"probe: task {task}: fewer than 2 classes left, skipped", file=sys.stderr)
            continue
        for name, X in features.items():
            Xk = X[keep]
            knn = knn_loo(Xk, y, cosine=Xk.shape[1] > 1)
            accs = logreg_cv(Xk, y, len(classes), args.folds, args.repeats, args.steps,
                             args.lr, args.l2, args.seed)
            results.setdefault(name, {})[task] = {
                "1-NN": {"mean": knn[1]}, "5-NN": {"mean": knn[5]},
                "logreg": {"mean": float(np.mean(accs)), "min": min(accs), "max": max(accs),
                           "per_repeat": accs}}
        majority = float(counts.max() / counts.sum())
        results.setdefault("majority class", {})[task] = {pr: {"mean": majority} for pr in PROBES}
        results.setdefault("uniform", {})[task] = {pr: {"mean": 1.0 / len(classes)}
                                                   for pr in PROBES}

    done_tasks = [t for t in TASKS if any(t in r for r in results.values())]
    cols = [(t, pr) for t in done_tasks for pr in PROBES]
    head = "| features | " + " | ".join(
        f"{t} ({task_info[t]['classes']} cl.) {pr}" for t, pr in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    for name in ("trained", "random-init", "log-size only", "majority class", "uniform"):
        if name in results:
            lines.append(f"| {name} | " + " | ".join(fmt(results[name][t][pr]) for t, pr in cols)
                         + " |")
    table = "\n".join(lines)

    out = args.json or args.work / "probe.json"
    report = {
        "protocol": PROTOCOL,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
        "models": {n: {"dir": str(d), "manifest_sha256_16": manifest_digest(d),
                       "name": json.loads((d / "manifest.json").read_text()).get("name")}
                   for n, d in encoders.items()},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "heldout_modules": len(heldout),
        "skipped_large": len(big),
        "limited_to": len(shas),
        "same_weights": same_weights,
        "embed_failures": {n: errors[n] for n in encoders},
        "dropped_embed_failures": len(failed),
        "modules": len(ok),
        "tasks": task_info,
        "results": results,
        "embed_seconds": seconds,
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "table": table,
    }
    atomic_write_bytes(out, (json.dumps(report, indent=1) + "\n").encode())

    print("## Probe: do module embeddings carry information?\n")
    print(PROTOCOL + "\n")
    print(f"Machine: {cpu_model()}. Held-out modules: {len(heldout)}; skipped (> "
          f"{args.max_nodes} nodes): {len(big)}; limit: {args.limit or 'none'}; embedded by "
          f"both encoders: {len(ok)} ({len(failed)} failed and dropped).")
    if same_weights:
        print("WARNING: the trained and random-init encoders have identical weights.")
    for t in TASKS:
        ti = task_info[t]
        print(f"Task {t}: {ti['modules']} modules, {ti['classes']} classes "
              f"{ti['class_counts']}; dropped classes (<{args.min_class}): {ti['dropped_classes']}")
    print("\nAccuracy (logreg: mean over repeats, min-max in brackets):\n")
    print(table)
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
