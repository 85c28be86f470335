"""``mire vectorize-train``: the per-loop (VF, IF) head, from the measured
loop-kernel dataset (``mire vectorize-data``).

Inputs per labelled kernel (from the IR clang-14 emits for it, as the
driver embeds a TU): the frozen encoder's embedding of its target loop and
of its function, static statistics of the loop
(:mod:`mirecc.tasks.loop_vectorize.features`) and whether floating-point reassociation
is allowed.  Targets: the measured log speedup over LLVM's default of
forcing each ``<VF>x<IF>`` (0 where the output changed: the plugin leaves
such loops to LLVM).  Model: a forest of regression trees
(:mod:`mirecc.learn.forest`); the driver applies the class whose
``quantile`` of the trees' predictions is highest when it exceeds
``min_gain`` (:func:`mirecc.tasks.loop_vectorize.head.choose`).

Evaluation is by kernel family: :data:`HELD_OUT_FAMILIES` never reach the
shipped head (``mire bench vectorize`` times them through the driver).  A
leave-one-family-out cross-validation over the training families chooses
the inputs, ``quantile`` and ``min_gain`` (the best geomean speedup whose
worst kernel is >= 0.95x), from the measured timings.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.encoder.runtime import Encoder, compile_to_ir, default_clang
from mirecc.graph import build_graph_any
from mirecc.graph.irinfo import graph_loops
from mirecc.learn.forest import ForestConfig, choose, fit_forest, onnx_bytes, tree_predictions
from mirecc.learn.gates import GateRow, gate_document, refusal_reason
from mirecc.learn.judge import RESAMPLES, interval, program_weights
from mirecc.learn.labels import read_rows
from mirecc.tasks.loop_vectorize.features import NAMES, statistics_by_loop
from mirecc.tasks.loop_vectorize.head import ALL_FEATURES, TASK
from mirecc.tasks.loop_vectorize.loops import emit_ir_text, loop_lines
from mirecc.tasks.loop_vectorize.offline.dataset import (COMMITTED, kernel_source, kernels_dir,
                                                         row_candidates)
from mirecc.util.fsutil import atomic_write_bytes, replace_dir
from mirecc.util.modelfiles import load_model, manifest_digest

VFS = (1, 2, 4, 8, 16, 32, 64)
IFS = (1, 2, 4, 8, 16)
CLASSES = [f"{vf}x{ic}" for vf in VFS for ic in IFS]
#: chosen in the first session as every fourth of the 16 families then in name
#: order, before any result was seen; kept fixed as families are added, so that
#: the held-out figures stay comparable
HELD_OUT_FAMILIES = ("divmod", "nested", "short_trip", "triad")
#: the inputs the cross-validation chooses between
FEATURE_SETS = (["loop_statistics", "reassociation"],
                ["loop_embedding", "function_embedding", "reassociation"],
                ALL_FEATURES)
QUANTILES = (0.1, 0.2, 0.3, 0.5)
MIN_GAINS = (0.0, 0.02, 0.05)


# ------------------------------------------------------------------- data

def read_labels(data_dir: Path) -> list[dict]:
    rows = [r for r in read_rows(data_dir / "labels.jsonl")
            if "configs" in r and (r.get("default") or {}).get("min_ns")]
    if not rows:
        raise SystemExit(f"{data_dir / 'labels.jsonl'}: no measured kernels "
                         f"(run mire vectorize-data first)")
    return rows


def class_times(row: dict) -> dict[str, float]:
    """class -> best time (ns) of the configurations whose output matched."""
    times = {"default": row["default"]["min_ns"]}
    for c in row_candidates(row):
        times[f"{c['vf']}x{c['if']}"] = c["min_ns"]
    return times


def gains(rows: list[dict]) -> np.ndarray:
    """(n, classes): each kernel's measured log speedup over LLVM's default
    per forced class (0 where the class was not a candidate)."""
    return np.asarray([[math.log(achieved(r, c)) for c in CLASSES] for r in rows])


def kernel_features(rows: list[dict], data_dir: Path, model_dir: Path | None
                    ) -> dict[str, np.ndarray]:
    """input name -> (n, k) rows, for every name in ALL_FEATURES: the
    target loop's and its function's embeddings, the loop's statistics and
    the reassociation flag.  Embeddings are cached per encoder in
    ``embeddings-<digest>.npz`` beside the kernels; statistics are recomputed."""
    model_dir = Path(model_dir or SHIPPED_MODEL_DIR)
    # beside the kernels: the dataset's own folder, or the user cache for an exported one
    cache = kernels_dir(data_dir).parent / f"embeddings-{manifest_digest(model_dir)}.npz"
    have = dict(np.load(cache)) if cache.is_file() else {}
    clang, encoder = default_clang(), None
    embeddings, statistics = [], []
    for row in tqdm(rows, desc="kernel features", unit="kernel", file=sys.stderr,
                    disable=None):
        key = f"{row['name']}|{' '.join(row['flags'])}"
        source = kernel_source(data_dir, row)
        flags = ["-O3", *row["flags"]]
        with tempfile.TemporaryDirectory(prefix="mirecc-vt-") as tmp:
            bc = Path(tmp) / "k.bc"
            compile_to_ir(source, bc, clang, flags)
            graph = build_graph_any(str(bc))
            loops = [lp for lp in graph_loops(graph) if lp.function == "kernel" and lp.innermost]
            lines = loop_lines(emit_ir_text(clang, flags, str(source)), loops)
            target = min(loops, key=lambda lp: abs(lines.get(lp.id, 10**6)
                                                   - row["target_line"]))
            statistics.append(statistics_by_loop(graph)[target.id])
            if key not in have:
                encoder = encoder or Encoder(model_dir)
                emb = encoder.embed_file(str(bc))
                have[key] = np.concatenate([emb.loops[target.id], emb.functions["kernel"]])
        embeddings.append(have[key])
    buf = io.BytesIO()
    np.savez(buf, **have)
    atomic_write_bytes(cache, buf.getvalue())
    E = np.asarray(embeddings, dtype=np.float32)
    half = E.shape[1] // 2
    return {"loop_embedding": E[:, :half], "function_embedding": E[:, half:],
            "loop_statistics": np.asarray(statistics, dtype=np.float32),
            "reassociation": np.asarray([[float(bool(r.get("fast_math")))] for r in rows],
                                        dtype=np.float32)}


def feature_rows(parts: dict[str, np.ndarray], features: list[str]) -> np.ndarray:
    return np.hstack([parts[f] for f in features])


# ------------------------------------------------------------ train, eval

def achieved(row: dict, name: str) -> float:
    """Measured speedup over LLVM's default of class ``name`` on ``row``
    (a class never measured, or whose output changed, counts as the default:
    the driver's plugin leaves such loops to LLVM)."""
    times = class_times(row)
    return times["default"] / times.get(name, times["default"])


def oracle_speedup(row: dict) -> float:
    """The best candidate's speedup over LLVM's default (>= 1: the default is one)."""
    return max(achieved(row, c) for c in class_times(row))


def picks(tree_gains: np.ndarray, quantile: float, min_gain: float) -> list[str]:
    """The class name chosen per row ('default': LLVM's choice)."""
    return [CLASSES[best] if best is not None else "default"
            for best, _, _ in choose(tree_gains, quantile, min_gain)]


def summary(speedups: list[float], oracle: list[float]) -> dict:
    g = float(np.exp(np.mean(np.log(speedups))))
    o = float(np.exp(np.mean(np.log(oracle))))
    return {"kernels": len(speedups), "geomean": g, "oracle_geomean": o,
            "fraction_of_oracle": g / o,
            "fraction_of_oracle_gain": (math.log(g) / math.log(o)) if o > 1 else None,
            "worst": float(min(speedups)), "best": float(max(speedups)),
            "slower_than_0.95": int(sum(s < 0.95 for s in speedups))}


def evaluate(rows: list[dict], chosen: list[str]) -> dict:
    return {**summary([achieved(r, c) for r, c in zip(rows, chosen)],
                      [oracle_speedup(r) for r in rows]),
            "applied": sum(1 for c in chosen if c != "default")}


def gate(cv: dict, chosen: dict) -> dict:
    """The ``"gate"`` entry of metrics.json (:mod:`mirecc.learn.gates`): the
    family cross-validation at the chosen inputs and quantile, one row per
    min_gain; an application is a kernel, held out with its family."""
    rows = [GateRow(threshold=p["min_gain"], applications=p["kernels"],
                    applied=p.get("applied"), geomean=p["geomean"], slowest=p["worst"],
                    below=p["slower_than_0.95"])
            for p in cv["grid"]
            if p["features"] == chosen["features"] and p["quantile"] == chosen["quantile"]]
    pick = next(r for r in rows if r.threshold == chosen["min_gain"])
    # select() falls back to the best geomean when no grid point is safe:
    # then the head ships, but refuses to force
    safe = pick.below == 0
    return gate_document(f"leave one family out over {pick.applications} training kernels "
                         f"(quantile {chosen['quantile']})", "kernel", chosen["min_gain"],
                         rows, pick if safe else None,
                         None if safe else refusal_reason(rows, "kernel"))


def out_of_family_gains(X: np.ndarray, Y: np.ndarray, families: list[str],
                        config: ForestConfig) -> np.ndarray:
    """Leave-one-family-out: each row's tree predictions (n, trees, classes)
    from a forest that never saw its family."""
    families = np.asarray(families)
    G = np.zeros((len(X), config.trees, len(CLASSES)), dtype=np.float32)
    for fam in sorted(set(families)):
        test = families == fam
        G[test] = tree_predictions(fit_forest(X[~test], Y[~test], config), X[test])
    return G


def family_cv(parts: dict[str, np.ndarray], rows: list[dict], config: ForestConfig) -> dict:
    """Leave-one-family-out over ``rows`` for every input set, quantile and
    min_gain on the grid: the measured speedups of each (and, for
    :func:`select` only, each kernel's log speedup and family)."""
    Y = gains(rows)
    families = [r["family"] for r in rows]
    grid = []
    for features in FEATURE_SETS:
        G = out_of_family_gains(feature_rows(parts, features), Y, families, config)
        for q in QUANTILES:
            for g in MIN_GAINS:
                chosen = picks(G, q, g)
                grid.append({"features": features, "quantile": q, "min_gain": g,
                             **evaluate(rows, chosen),
                             "_logs": [math.log(achieved(r, c)) for r, c in zip(rows, chosen)]})
    return {"protocol": "leave-one-family-out over the training families", "grid": grid,
            "_families": families}


def reads_encoder(features) -> bool:
    return any(f.endswith("_embedding") for f in features)


def _best(grid: list[dict]) -> dict:
    safe = [p for p in grid if p["worst"] >= 0.95] or grid
    return max(safe, key=lambda p: (round(p["geomean"], 4), p["min_gain"], -p["quantile"]))


def encoder_gain_interval(point: dict, reference: dict, families: list[str]) -> tuple:
    """The family-resampled interval (:data:`mirecc.learn.judge.COVERAGE`,
    :data:`~mirecc.learn.judge.RESAMPLES` draws: a drawn family brings all
    its kernels) of ``point``'s geomean log speedup minus ``reference``'s."""
    names = sorted(set(families))
    weights = program_weights(np.asarray([names.index(f) for f in families]), RESAMPLES)[1:]
    diff = np.asarray(point["_logs"]) - np.asarray(reference["_logs"])
    return interval((weights @ diff) / weights.sum(1))


def encoder_against_statistics(cv: dict) -> dict | None:
    """Where the best grid point reads the encoder: it against the
    statistics' best (:func:`encoder_gain_interval`), and whether it is
    chosen (the interval clear of zero); None where it does not."""
    best = _best(cv["grid"])
    plain = [p for p in cv["grid"] if not reads_encoder(p["features"])]
    if not reads_encoder(best["features"]) or not plain or "_families" not in cv:
        return None
    reference = _best(plain)
    low, high = encoder_gain_interval(best, reference, cv["_families"])
    return {"features": best["features"], "geomean": best["geomean"],
            "log_gain_interval": [low, high], "chosen": low > 0,
            "_point": best, "_reference": reference}


def select(cv: dict) -> dict:
    """The grid point with the best geomean whose worst kernel is >= 0.95
    (else the best geomean); ties go to the larger min_gain, then the lower
    quantile (the more cautious).  Inputs that read the encoder cost every
    compile the encoder's run, so they are chosen only where their best
    point beats the statistics' best beyond the families' resampling
    interval (:func:`encoder_against_statistics`)."""
    against = encoder_against_statistics(cv)
    if against is None:
        return _best(cv["grid"])
    return against["_point"] if against["chosen"] else against["_reference"]


def best_by_features(cv: dict) -> list[dict]:
    """The ablation: each input set at its own best grid point."""
    return [_best([p for p in cv["grid"] if p["features"] == features])
            for features in FEATURE_SETS]


def public(value):
    """``value`` without the kernel-level entries :func:`family_cv` keeps
    for :func:`select` (derivable, and long)."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [public(v) for v in value]
    return value


# ------------------------------------------------------------------- ship

def write_head(out: Path, forest, n_inputs: int, chosen: dict, encoder_version: str,
               metrics: dict) -> None:
    """spec.yaml, head.onnx, metrics.json into ``out``, replaced atomically."""
    spec = {"task": TASK, "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": encoder_version, "features": chosen["features"]}
    if "loop_statistics" in chosen["features"]:
        spec["loop_statistics"] = NAMES
    spec.update({"classes": CLASSES, "quantile": chosen["quantile"],
                 "min_gain": chosen["min_gain"], "target": "default",
                 **({"refuse_forcing": refusal} if (refusal := metrics["gate"]
                                                    ["refuse_forcing"]) else {}),
                 "trained_on": metrics["trained_on"], "metrics": "metrics.json"})
    spec_text = ("# Written by `mire vectorize-train`; do not edit (head.onnx is trained "
                 "for exactly these inputs).\n" + yaml.safe_dump(spec, sort_keys=False))
    # the committed labels the head is trained on live in its folder: kept
    kept = {f"labels/{p.name}": p.read_bytes()
            for p in sorted((out / "labels").glob("*")) if p.is_file()}
    replace_dir(out, {**kept, "spec.yaml": spec_text.encode(),
                      "head.onnx": onnx_bytes(forest, n_inputs),
                      "metrics.json": (json.dumps(metrics, indent=1) + "\n").encode()})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=COMMITTED,
                   help="the dataset directory of mire vectorize-data (default: %(default)s)")
    p.add_argument("--model", type=Path, default=None, help="encoder model directory "
                   "(default: the shipped one)")
    p.add_argument("--out", type=Path, default=Path("heads/loop-vectorize"),
                   help="head directory to write (default: %(default)s)")
    p.add_argument("--trees", type=int, default=ForestConfig.trees,
                   help="trees in the forest (default: %(default)s)")


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(COMMITTED.parents[2]))
    except ValueError:
        return str(path)


def _line(p: dict) -> str:
    return (f"{p['geomean']:.3f}x (oracle {p['oracle_geomean']:.3f}x), worst {p['worst']:.3f}, "
            f"{p['slower_than_0.95']} below 0.95")


def run(args: argparse.Namespace) -> int:
    rows = read_labels(args.data)
    model_dir = Path(args.model or SHIPPED_MODEL_DIR)
    parts = kernel_features(rows, args.data, model_dir)
    train = np.asarray([r["family"] not in HELD_OUT_FAMILIES for r in rows])
    train_rows = [r for r, t in zip(rows, train) if t]
    test_rows = [r for r, t in zip(rows, train) if not t]
    config = ForestConfig(trees=args.trees)
    print(f"cross-validating {len(FEATURE_SETS)} input sets x {len(QUANTILES)} quantiles x "
          f"{len(MIN_GAINS)} min_gains over {len(train_rows)} training kernels", file=sys.stderr)
    cv = family_cv({k: v[train] for k, v in parts.items()}, train_rows, config)
    chosen = select(cv)
    X = feature_rows(parts, chosen["features"])
    forest = fit_forest(X[train], gains(train_rows), config)
    chosen_test = picks(tree_predictions(forest, X[~train]), chosen["quantile"],
                        chosen["min_gain"])
    held_out = evaluate(test_rows, chosen_test)
    held_out["per_kernel"] = {r["row"]: {"chosen": c, "speedup": achieved(r, c),
                                         "oracle": oracle_speedup(r)}
                              for r, c in zip(test_rows, chosen_test)}
    metrics = {
        "trained_on": {"kernels": len(train_rows),
                       "families": sorted({r["family"] for r in train_rows}),
                       "held_out_families": list(HELD_OUT_FAMILIES), "cc": rows[0].get("cc"),
                       "dataset": _shown(args.data)},
        "forest": config.to_dict(), "chosen": chosen,
        "ablation": best_by_features(cv), "family_cv": cv, "held_out_from_labels": held_out,
        "gate": gate(cv, chosen), "encoder_against_statistics": encoder_against_statistics(cv),
    }
    metrics = public(metrics)
    chosen = metrics["chosen"]
    info = load_model(model_dir)
    write_head(args.out, forest, X.shape[1], chosen, info.cache_version, metrics)
    for p in metrics["ablation"]:
        print(f"family CV, {' + '.join(p['features'])} (quantile {p['quantile']}, min_gain "
              f"{p['min_gain']}): {_line(p)}")
    print(f"chosen: {' + '.join(chosen['features'])}, quantile {chosen['quantile']}, "
          f"min_gain {chosen['min_gain']}")
    print(f"held-out families {', '.join(HELD_OUT_FAMILIES)} ({len(test_rows)} kernels, from "
          f"the labels): {_line(held_out)}")
    print(f"wrote {args.out}")
    return 0
