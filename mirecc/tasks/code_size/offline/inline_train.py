"""``mire size-inline-judge``: the per-call-site inlining policy for size,
judged on the labels of ``mire size-inline-data`` leaving whole packages
out, with three representations of a site: statistics of the site, caller
and callee (:mod:`mirecc.tasks.code_size.inline_features`), the frozen
encoder's function embeddings of caller and callee, and both; each at 1%,
10% and 100% of the training labels.

    mire size-inline-judge [--labels .work/inline-labels] [--corpus .work/size-corpus]
        [--out docs/results/inline-policy.md]

Model: a forest of regression trees (:mod:`mirecc.learn.forest`) from a
site's inputs to ``log(bytes out of line / bytes inlined)`` (above 0:
inlining the site saves bytes).  Policy: the site is forced inline where
the trees' median predicts a saving above ``--margin``, out of line where
it predicts a cost above it, else left to LLVM.

Measure (per site, one at a time, as labelled): the bytes the policy's
choice saves against the module's own object (LLVM's choice), over the
bytes the best choice per site would save (the oracle: inline, out of line
or LLVM's, whichever is smallest), summed over the held-out package's
sites; a choice that makes the object larger counts against it.  Intervals:
90%, from 2000 resamples of the packages (a drawn package brings all its
sites).  What a whole set of decisions does together is measured by
compiling whole modules with them (not here).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions
from mirecc.learn.judge import RESAMPLES, interval, program_weights
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
FRACTIONS = (0.01, 0.1, 1.0)
KINDS = ("statistics", "encoder", "both")


def read_sites(labels: Path) -> list[dict]:
    rows = []
    for line in (labels / "sites.jsonl").read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" not in r and r.get("inline") and r.get("noinline"):
            rows.append(r)
    return rows


def site_inputs(rows: list[dict], corpus: Path, model_dir) -> dict[str, np.ndarray]:
    """kind -> (sites, d): the statistics, the encoder's caller and callee
    vectors, both."""
    from tqdm import tqdm  # lazy: the offline extras

    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.encoder.runtime import Encoder
    from mirecc.graph import build_graph
    from mirecc.ir.text import disassemble, function_digests
    from mirecc.tasks.code_size.inline_features import site_features
    from mirecc.tasks.code_size.offline.dataset import corpus_modules

    paths = {m.sha256: m.path for m in corpus_modules(corpus)}
    encoder = Encoder(Path(model_dir or SHIPPED_MODEL_DIR))
    by_module: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_module.setdefault(r["module"], []).append(i)
    stats = [None] * len(rows)
    emb = [None] * len(rows)
    for module, indices in tqdm(by_module.items(), desc="modules", unit="module",
                                file=sys.stderr, disable=None):
        path = paths[module]
        ir = disassemble(Path(path).read_bytes(), str(path))
        features = site_features(ir)
        names = sorted({rows[i][k] for i in indices for k in ("caller", "callee")})
        vectors = encoder.embed_functions(build_graph(path), names, function_digests(ir))
        for i in indices:
            r = rows[i]
            stats[i] = features[r["site"]]
            emb[i] = np.concatenate([vectors[r["caller"]], vectors[r["callee"]]])
    S, E = np.asarray(stats, np.float32), np.asarray(emb, np.float32)
    return {"statistics": S, "encoder": E, "both": np.hstack([S, E])}


def choose(G: np.ndarray, margin: float) -> np.ndarray:
    """Per site: 1 inline, -1 out of line, 0 LLVM's, from the trees' median."""
    m = np.median(G[:, :, 0], axis=1)
    return np.where(m > margin, 1, np.where(m < -margin, -1, 0))


def saved(rows: list[dict], choice: np.ndarray) -> np.ndarray:
    """Bytes each site's choice saves against LLVM's object (negative: costs)."""
    out = np.zeros(len(rows))
    for i, (r, c) in enumerate(zip(rows, choice)):
        if c:
            out[i] = r["own"] - r["inline" if c > 0 else "noinline"]
    return out


def oracle(rows: list[dict]) -> np.ndarray:
    return np.asarray([r["own"] - min(r["own"], r["inline"], r["noinline"]) for r in rows],
                      float)


def out_of_package(X, y, packages, config, fraction: float, seed: int = 0) -> np.ndarray:
    """Leave one package out: each site's trees' predictions (n, trees, 1)
    from a forest fitted on ``fraction`` of the other packages' sites."""
    rng = np.random.default_rng(seed)
    G = np.zeros((len(X), config.trees, 1), np.float32)
    for package in sorted(set(packages)):
        test = packages == package
        train = np.flatnonzero(~test)
        if fraction < 1:
            train = rng.choice(train, max(20, int(round(fraction * len(train)))), replace=False)
        G[test] = tree_predictions(fit_forest(X[train], y[train, None], config), X[test])
    return G


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    rows = read_sites(Path(args.labels))
    if len(rows) < 50:
        print(f"mire size-inline-judge: {args.labels}: {len(rows)} labelled sites, too few "
              f"(run mire size-inline-data)", file=sys.stderr)
        return 2
    packages = np.asarray([r["origin"] for r in rows])
    y = np.asarray([math.log(r["noinline"] / r["inline"]) for r in rows])
    inputs = site_inputs(rows, Path(args.corpus), args.model)
    best = oracle(rows)
    names = sorted(set(packages))
    weights = program_weights(np.asarray([names.index(p) for p in packages]), RESAMPLES)
    total = weights @ best
    config = ForestConfig(trees=args.trees)
    table, shares = [], {}
    for kind in KINDS:
        for fraction in FRACTIONS:
            G = out_of_package(inputs[kind], y, packages, config, fraction)
            s = saved(rows, choose(G, args.margin))
            share = (weights @ s) / total
            shares[(kind, fraction)] = share
            table.append({"inputs": kind, "fraction": fraction, "share": float(share[0]),
                          "interval": interval(share[1:]),
                          "bytes_saved": float(s.sum()),
                          "sites_worse": int((s < 0).sum()),
                          "sites_decided": int((s != 0).sum())})
            print(f"{kind:10s} {fraction:5.0%}: {share[0]:.1%} of the oracle's bytes",
                  file=sys.stderr)
    for row in table:
        ref = shares[("statistics", row["fraction"])]
        row["minus_statistics"] = interval((shares[(row["inputs"], row["fraction"])] - ref)[1:])
    llvm_inlines = sum(r["own"] == r["inline"] != r["noinline"] for r in rows)
    doc = {"written_by": "mire size-inline-judge", "date": time.strftime("%Y-%m-%d"),
           "sites": len(rows), "packages": names, "modules": len({r["module"] for r in rows}),
           "oracle_bytes": float(best.sum()),
           "llvm_inlines": int(llvm_inlines), "margin": args.margin, "trees": args.trees,
           "table": table, "seconds": round(time.time() - t0, 1)}
    out = Path(args.out)
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(doc, indent=1) + "\n").encode())
    atomic_write_bytes(out, render(doc).encode())
    print(render(doc))
    return 0


def render(doc: dict) -> str:
    lines = [
        "# The inlining policy for size: representations judged per call site", "",
        f"Written by `{doc['written_by']}` ({doc['date']}) from the labels of `mire "
        f"size-inline-data`: {doc['sites']} call sites of {doc['modules']} modules of "
        f"{len(doc['packages'])} Debian packages ({', '.join(doc['packages'])}), each compiled "
        "at -Oz (clang 14) with the site inlined and out of line, the other sites left to "
        f"LLVM (LLVM inlines {doc['llvm_inlines']} of them). Leave one package out; a forest "
        f"of {doc['trees']} trees; a site forced where the trees' median predicts more than "
        f"{doc['margin']:g} (log bytes) either way. Share: the bytes the choices save against "
        "LLVM's object over what the best choice per site saves "
        f"({doc['oracle_bytes']:.0f} bytes), one site at a time; in brackets the 90% interval "
        "over 2000 package resamples, and the difference from the statistics at the same "
        "share of labels.", "",
        "| inputs | labels | share of the oracle's bytes | minus statistics | sites decided | "
        "of them worse |", "|---|---|---|---|---|---|"]
    for r in doc["table"]:
        lo, hi = r["interval"]
        dlo, dhi = r["minus_statistics"]
        diff = "" if r["inputs"] == "statistics" else f"[{100 * dlo:+.1f}, {100 * dhi:+.1f}]"
        lines.append(f"| {r['inputs']} | {r['fraction']:.0%} | {100 * r['share']:.1f}% "
                     f"[{100 * lo:.1f}, {100 * hi:.1f}] | {diff} | {r['sites_decided']} | "
                     f"{r['sites_worse']} |")
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", default=str(ROOT / ".work" / "inline-labels"))
    parser.add_argument("--corpus", default=str(ROOT / ".work" / "size-corpus"))
    parser.add_argument("--model", default=None, help="encoder model directory")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--margin", type=float, default=0.002,
                        help="log bytes a prediction must exceed to force a site")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "inline-policy.md"))
