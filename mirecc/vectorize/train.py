"""``mire vectorize-train``: the per-loop (VF, IF) head, from the measured
loop-kernel dataset (``mire vectorize-data``).

Inputs per labelled kernel: the frozen encoder's embedding of its target
loop and of its function (the IR clang-14 emits for it, as the driver
embeds a TU), and whether floating-point reassociation is allowed.
Classes: ``default`` (LLVM's own choice) and every forced ``<VF>x<IF>``.

Targets are soft: a kernel's weight on each class is
``softmax(log(speedup over LLVM's default) / TAU)`` over the configurations
whose output matched the scalar reference, so near-ties share the weight
instead of one noisy winner taking it.  (Soft cross-entropy, expressed as
weighted rows for :func:`mirecc.tasks.heads.train_head`.)

Evaluation is by kernel family: the families in ``held_out_families`` never
reach the shipped head (``mire bench vectorize`` times them through the
driver), and a leave-one-family-out cross-validation over the training
families gives the head's expected speedup, its fraction of the oracle and
its worst case, from the measured timings.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from mirecc.vectorize.head import FEATURES, TASK

VFS = (1, 2, 4, 8, 16, 32, 64)
IFS = (1, 2, 4, 8, 16)
CLASSES = ["default"] + [f"{vf}x{ic}" for vf in VFS for ic in IFS]
#: softness of the targets: a 5% slower configuration gets e^-1 of the weight
TAU = 0.05
MIN_CONFIDENCE_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def held_out_families(families) -> list[str]:
    """Every fourth family in name order: fixed before any result was seen."""
    return [f for i, f in enumerate(sorted(set(families))) if i % 4 == 3]


# ------------------------------------------------------------------- data

def read_labels(data_dir: Path) -> list[dict]:
    from mirecc.vectorize.dataset import read_rows

    rows = [r for r in read_rows(data_dir / "labels.jsonl")
            if "configs" in r and (r.get("default") or {}).get("min_ns")]
    if not rows:
        raise SystemExit(f"{data_dir / 'labels.jsonl'}: no measured kernels "
                         f"(run mire vectorize-data first)")
    return rows


def class_times(row: dict) -> dict[str, float]:
    """class -> best time (ns) of the configurations whose output matched."""
    from mirecc.vectorize.dataset import row_candidates

    times = {"default": row["default"]["min_ns"]}
    for c in row_candidates(row):
        times[f"{c['vf']}x{c['if']}"] = c["min_ns"]
    return times


def soft_targets(row: dict) -> np.ndarray:
    times = class_times(row)
    score = np.full(len(CLASSES), -np.inf)
    for i, name in enumerate(CLASSES):
        if name in times:
            score[i] = math.log(times["default"] / times[name]) / TAU
    w = np.exp(score - score.max())
    return w / w.sum()


def embed_rows(rows: list[dict], data_dir: Path, model_dir: Path | None) -> np.ndarray:
    """(n, d) features: target-loop and function embeddings, reassociation.
    Cached per encoder in ``<data_dir>/embeddings-<digest>.npz``."""
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.encoder.runtime import Encoder, compile_to_ir, default_clang
    from mirecc.fsutil import atomic_write_bytes
    from mirecc.model import manifest_digest
    from mirecc.vectorize.loops import emit_ir_text, loop_lines, module_loops
    import io
    import tempfile
    from tqdm import tqdm

    model_dir = Path(model_dir or SHIPPED_MODEL_DIR)
    cache = data_dir / f"embeddings-{manifest_digest(model_dir)}.npz"
    have = dict(np.load(cache)) if cache.is_file() else {}
    clang, encoder = default_clang(), None
    out = []
    for row in tqdm(rows, desc="embed kernels", unit="kernel", file=sys.stderr, disable=None):
        key = f"{row['name']}|{' '.join(row['flags'])}"
        if key not in have:
            encoder = encoder or Encoder(model_dir)
            source = data_dir / "kernels" / f"{row['name']}.c"
            flags = ["-O3", *row["flags"]]
            with tempfile.TemporaryDirectory(prefix="mirecc-vt-") as tmp:
                bc = Path(tmp) / "k.bc"
                compile_to_ir(source, bc, clang, flags)
                loops = [lp for lp in module_loops(str(bc))
                         if lp.function == "kernel" and lp.innermost]
                lines = loop_lines(emit_ir_text(clang, flags, str(source)), loops)
                target = min(loops, key=lambda lp: abs(lines.get(lp.id, 10**6)
                                                       - row["target_line"]))
                emb = encoder.embed_file(str(bc))
            have[key] = np.concatenate([emb.loops[target.id], emb.functions["kernel"]])
        out.append(np.concatenate([have[key], [float(bool(row.get("fast_math")))]]))
    buf = io.BytesIO()
    np.savez(buf, **have)
    atomic_write_bytes(cache, buf.getvalue())
    return np.asarray(out, dtype=np.float32)


# ------------------------------------------------------------ train, eval

def fit(X: np.ndarray, rows: list[dict], config):
    """A head on soft targets: each kernel is a row per class it weighs on."""
    from mirecc.tasks.heads import train_head

    Xs, ys, ws = [], [], []
    for x, row in zip(X, rows):
        for k, w in enumerate(soft_targets(row)):
            if w > 1e-3:
                Xs.append(x), ys.append(CLASSES[k]), ws.append(w)
    return train_head(np.asarray(Xs), np.asarray(ys), config, CLASSES, np.asarray(ws))


def achieved(row: dict, name: str) -> float:
    """Measured speedup over LLVM's default of class ``name`` on ``row``
    (a class never measured, or whose output changed, counts as the default:
    the driver's plugin leaves such loops to LLVM)."""
    times = class_times(row)
    return times["default"] / times.get(name, times["default"])


def oracle_speedup(row: dict) -> float:
    """The best candidate's speedup over LLVM's default (>= 1: the default is one)."""
    return max(achieved(row, c) for c in class_times(row))


def choose(P: np.ndarray, min_confidence: float) -> list[str]:
    return [CLASSES[int(p.argmax())] if p.max() >= min_confidence else "default" for p in P]


def summary(speedups: list[float], oracle: list[float]) -> dict:
    g = float(np.exp(np.mean(np.log(speedups))))
    o = float(np.exp(np.mean(np.log(oracle))))
    return {"kernels": len(speedups), "geomean": g, "oracle_geomean": o,
            "fraction_of_oracle": g / o,
            "fraction_of_oracle_gain": (math.log(g) / math.log(o)) if o > 1 else None,
            "worst": float(min(speedups)), "best": float(max(speedups)),
            "slower_than_0.95": int(sum(s < 0.95 for s in speedups))}


def family_cv(X: np.ndarray, rows: list[dict], config) -> dict:
    """Leave-one-family-out: out-of-fold probabilities, then the measured
    speedup of each min_confidence on the grid."""
    families = [r["family"] for r in rows]
    P = np.zeros((len(rows), len(CLASSES)), dtype=np.float32)
    for fam in sorted(set(families)):
        test = np.asarray([f == fam for f in families])
        head = fit(X[~test], [r for r, t in zip(rows, test) if not t], config)
        P[test] = head.predict_proba(X[test])
    oracle = [oracle_speedup(r) for r in rows]
    out = {"protocol": "leave-one-family-out over the training families", "by_min_confidence": {}}
    for t in MIN_CONFIDENCE_GRID:
        picks = choose(P, t)
        out["by_min_confidence"][str(t)] = summary([achieved(r, c) for r, c in zip(rows, picks)],
                                                   oracle)
    return out, P


def pick_min_confidence(cv: dict) -> float:
    """The smallest threshold with the best geomean whose worst case is
    >= 0.95, else the best geomean (chosen on the training families' CV)."""
    grid = cv["by_min_confidence"]
    safe = [t for t in MIN_CONFIDENCE_GRID if grid[str(t)]["worst"] >= 0.95] or \
        list(MIN_CONFIDENCE_GRID)
    return max(safe, key=lambda t: (round(grid[str(t)]["geomean"], 4), -t))


# ------------------------------------------------------------------- ship

def write_head(out: Path, head, encoder_version: str, min_confidence: float,
               metrics: dict) -> None:
    """spec.yaml, head.onnx, metrics.json into ``out``, replaced atomically."""
    import yaml
    from mirecc.fsutil import replace_dir
    from mirecc.tasks.heads import onnx_bytes

    spec = {"task": TASK, "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": encoder_version, "features": FEATURES, "classes": CLASSES,
            "min_confidence": min_confidence, "target": "default",
            "trained_on": metrics["trained_on"], "metrics": "metrics.json"}
    spec_text = ("# Written by `mire vectorize-train`; do not edit (head.onnx is trained "
                 "for exactly these inputs).\n" + yaml.safe_dump(spec, sort_keys=False))
    replace_dir(out, {"spec.yaml": spec_text.encode(), "head.onnx": onnx_bytes(head),
                      "metrics.json": (json.dumps(metrics, indent=1) + "\n").encode()})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path(".work/vectorize/default"),
                   help="the dataset directory of mire vectorize-data (default: %(default)s)")
    p.add_argument("--model", type=Path, default=None, help="encoder model directory "
                   "(default: the shipped one)")
    p.add_argument("--out", type=Path, default=Path("heads/loop-vectorize"),
                   help="head directory to write (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=300)


def run(args: argparse.Namespace) -> int:
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.model import load_model
    from mirecc.tasks.heads import HeadConfig

    rows = read_labels(args.data)
    model_dir = Path(args.model or SHIPPED_MODEL_DIR)
    X = embed_rows(rows, args.data, model_dir)
    held = held_out_families(r["family"] for r in rows)
    train = np.asarray([r["family"] not in held for r in rows])
    train_rows = [r for r, t in zip(rows, train) if t]
    config = HeadConfig(epochs=args.epochs)
    cv, _ = family_cv(X[train], train_rows, config)
    min_conf = pick_min_confidence(cv)
    head = fit(X[train], train_rows, config)
    test_rows = [r for r, t in zip(rows, train) if not t]
    picks = choose(head.predict_proba(X[~train]), min_conf)
    oracle = [oracle_speedup(r) for r in test_rows]
    held_out = summary([achieved(r, c) for r, c in zip(test_rows, picks)], oracle)
    held_out["per_kernel"] = {r["row"]: {"chosen": c, "speedup": achieved(r, c),
                                         "oracle": o}
                              for r, c, o in zip(test_rows, picks, oracle)}
    metrics = {
        "trained_on": {"kernels": len(train_rows),
                       "families": sorted({r["family"] for r in train_rows}),
                       "held_out_families": held, "cc": rows[0].get("cc"),
                       "dataset": str(args.data)},
        "head": config.to_dict(), "tau": TAU, "min_confidence": min_conf,
        "family_cv": cv, "held_out_from_labels": held_out,
    }
    info = load_model(model_dir)
    write_head(args.out, head, info.cache_version, min_conf, metrics)
    cvb = cv["by_min_confidence"][str(min_conf)]
    print(f"family CV ({len(train_rows)} kernels): geomean {cvb['geomean']:.3f}x over "
          f"LLVM's default (oracle {cvb['oracle_geomean']:.3f}x), worst {cvb['worst']:.3f}; "
          f"min_confidence {min_conf}")
    print(f"held-out families {', '.join(held)} ({len(test_rows)} kernels, from the labels): "
          f"geomean {held_out['geomean']:.3f}x (oracle {held_out['oracle_geomean']:.3f}x), "
          f"worst {held_out['worst']:.3f}")
    print(f"wrote {args.out}")
    return 0
