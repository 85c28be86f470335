"""``mire size-inline-judge``: the command (per call site,
:mod:`.inline_train`; ``--per callee``, here).

``--per callee``: an inlining policy for size that
decides a callee's call sites together (all inline, all out of line, or
LLVM's), judged on the per-callee labels of ``mire size-inline-data --per
callee`` leaving whole packages out.

Why per callee: the bytes below -Oz are mostly in whole-callee choices
(``benchmarks/inline_callee_oracle.py``: forcing every site of a callee out
of line saves what no single site's flip does, as the callee's body then
stays once in the object).

A callee's inputs:

* statistics: its number of labelled sites and, over those sites, the
  mean, largest and smallest of each per-site statistic
  (:func:`mirecc.tasks.code_size.inline_features.statistics`, LLVM's own
  -Oz costs among them): what the per-site policy reads, summed up per callee;
* encoder: the frozen encoder's embedding of the callee;
* both.

Model, policy and margin as the per-site judge's (a forest to what each
forced choice saves, the larger predicted saving forced past a margin
chosen on the training packages).  Measure: the bytes the choices save
against LLVM's object, one callee at a time as labelled, over the best
choice per callee (90% intervals over package resamples), at 1%, 10% and
100% of the training labels; then whole modules of the held-out packages
(and PolyBench/C with ``--polybench``), every chosen callee forced at once
by a forest fitted on the training packages' callees.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.encoder.runtime import Encoder
from mirecc.graph import build_graph
from mirecc.ir.text import disassemble, function_digests
from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions
from mirecc.tasks.code_size.inline_features import ALL_NAMES
from mirecc.tasks.code_size.inline_policy import choose
from mirecc.tasks.code_size.offline.dataset import HELD_OUT, corpus_modules
from mirecc.tasks.code_size.offline.inline_labels import labelled_sites, sites_by_callee
from mirecc.tasks.code_size.offline import inline_train
from mirecc.tasks.code_size.offline.inline_train import (KINDS, held_out_modules, llvm_tools,
                                                         representations, statistics,
                                                         table_lines, targets, whole_lines,
                                                         write_page)

#: a callee's statistics: its sites (log), then the mean, largest and
#: smallest of each per-site statistic over them
CALLEE_NAMES = (("log_sites",) + tuple(f"mean_{n}" for n in ALL_NAMES)
                + tuple(f"max_{n}" for n in ALL_NAMES) + tuple(f"min_{n}" for n in ALL_NAMES))


def read_callees(labels: Path) -> list[dict]:
    """The labelled callees of ``labels`` (``callees.jsonl``, or the
    committed snapshot's ``callees.jsonl.gz``)."""
    path = labels / "callees.jsonl"
    text = path.read_text() if path.is_file() else \
        gzip.decompress((labels / "callees.jsonl.gz").read_bytes()).decode()
    rows = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" not in r and r.get("inline") and r.get("noinline") and r.get("sites"):
            rows.append(r)
    return rows


def callee_row(site_rows: list[list[float]]) -> list[float]:
    """A callee's statistics (:data:`CALLEE_NAMES`) from its sites' rows."""
    S = np.asarray(site_rows, np.float64)
    return [math.log(len(S))] + S.mean(axis=0).tolist() + S.max(axis=0).tolist() \
        + S.min(axis=0).tolist()


def module_callees(ir: str, features: dict[str, list[float]]) -> dict[str, list[str]]:
    """Callee -> its site ids, for every site with a statistics row."""
    return {callee: kept for callee, ids in sites_by_callee(labelled_sites(ir)).items()
            if (kept := [s for s in ids if s in features])}


def callee_inputs(rows: list[dict], corpus: Path, model_dir, kinds, tools
                  ) -> dict[str, np.ndarray]:
    """kind -> (callees, d): statistics, the encoder's callee vector, both."""
    paths = {m.sha256: m.path for m in corpus_modules(corpus)}
    encoder = Encoder(Path(model_dir or SHIPPED_MODEL_DIR)) if set(kinds) - {"statistics"} \
        else None
    by_module: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_module.setdefault(r["module"], []).append(i)
    stats: list = [None] * len(rows)
    emb: list = [None] * len(rows)
    for module, indices in tqdm(by_module.items(), desc="modules", unit="module",
                                file=sys.stderr, disable=None):
        path = paths[module]
        ir = disassemble(Path(path).read_bytes(), str(path))
        features = statistics(path, ir, tools)
        vectors = encoder.embed_functions(build_graph(path),
                                          sorted({rows[i]["callee"] for i in indices}),
                                          function_digests(ir)) if encoder else None
        for i in indices:
            stats[i] = callee_row([features[s] for s in rows[i]["sites"]])
            if vectors is not None:
                emb[i] = vectors[rows[i]["callee"]]
    S = np.asarray(stats, np.float32)
    if encoder is None:
        return {"statistics": S}
    E = np.asarray(emb, np.float32)
    return {"statistics": S, "encoder": E, "both": np.hstack([S, E])}


def whole_modules(rows, X, args, config, margin: float, tools) -> list[dict]:
    """The statistics' policy fitted on the training packages' callees,
    applied to every callee of each held-out module at once
    (:func:`inline_train.held_out_modules`; ``decided``: callees forced)."""
    train = np.asarray([r["origin"] not in HELD_OUT for r in rows])
    model = fit_forest(X[train], targets([r for r, t in zip(rows, train) if t]), config)

    def decide(path, ir, features):
        callees = module_callees(ir, features)
        names = sorted(callees)
        calls, counts = {}, {"callees": len(names), "decided": 0, "inlined": 0}
        if names:
            Xm = np.asarray([callee_row([features[s] for s in callees[c]]) for c in names],
                            np.float32)
            for c, k in zip(names, choose(tree_predictions(model, Xm), margin)):
                if k:
                    calls.update({s: ("inline" if k > 0 else "noinline") for s in callees[c]})
                    counts["decided"] += 1
                    counts["inlined"] += int(k > 0)
        return calls, counts

    return held_out_modules(args, tools, decide)


def judge_callees(args: argparse.Namespace, tools) -> int:
    t0 = time.time()
    rows = read_callees(Path(args.labels))
    if len(rows) < 50:
        print(f"mire size-inline-judge: {args.labels}: {len(rows)} labelled callees, too "
              f"few (run mire size-inline-data --per callee)", file=sys.stderr)
        return 2
    kinds = args.kinds or list(KINDS)
    inputs = callee_inputs(rows, Path(args.corpus), args.model, kinds, tools)
    config = ForestConfig(trees=args.trees, min_samples_leaf=args.leaf)
    table, margins, summary = representations(rows, inputs, kinds, config, args.margin)
    modules = []
    if args.whole == "statistics" and "statistics" in kinds:
        modules = whole_modules(rows, inputs["statistics"], args, config,
                                margins[("statistics", 1.0)], tools)
    own = {r["module"]: (r["origin"], r["own"]) for r in rows}
    held_text = sum(b for origin, b in own.values() if origin in HELD_OUT)
    doc = {"written_by": "mire size-inline-judge --per callee", "date": time.strftime("%Y-%m-%d"),
           "callees": len(rows), "sites": int(sum(len(r["sites"]) for r in rows)),
           "modules": len(own), "held_out": sorted(HELD_OUT), **summary,
           "held_out_text": int(held_text), "trees": args.trees, "table": table,
           "margin": margins.get(("statistics", 1.0)), "whole_modules": modules,
           "seconds": round(time.time() - t0, 1)}
    return write_page(Path(args.out), doc, render)


def render(doc: dict) -> str:
    lines = [
        "# The inlining policy for size: per callee", "",
        f"Written by `{doc['written_by']}` ({doc['date']}, {doc['seconds'] / 60:.0f} min) from "
        f"the labels of `mire size-inline-data --per callee`: {doc['callees']} callees "
        f"({doc['sites']} call sites) of {doc['modules']} modules of {len(doc['packages'])} "
        f"Debian packages ({', '.join(doc['packages'])}), each module compiled at -Oz (clang "
        "14) with every site of one callee inlined, and with every one out of line. Leave one "
        f"package out; a forest of {doc['trees']} trees from a callee's inputs to what each "
        "forced choice saves against LLVM's object; a callee forced to the choice whose "
        "predicted saving (the trees' median, log bytes) is the larger, where it exceeds a "
        "margin chosen on the training packages. Statistics: the callee's sites (log) and "
        "the mean, largest and smallest of the per-site policy's statistics over them; "
        "encoder: the frozen encoder's embedding of the callee. Share: bytes saved over what "
        f"the best choice per callee saves ({doc['oracle_bytes']:.0f} bytes, "
        f"{100 * doc['oracle_of_text']:.2f}% of the labelled modules' .text), one callee at a "
        "time; in brackets the 90% interval over 2000 package resamples, and the difference "
        "from the statistics at the same share of labels.", "",
        *table_lines(doc["table"], "callees")]
    if doc.get("whole_modules"):
        mods = [m for m in doc["whole_modules"] if "error" not in m]
        errors = len(doc["whole_modules"]) - len(mods)
        lines += ["", "Whole modules of the held-out packages (and PolyBench/C where given), "
                  "every chosen callee's sites forced at once (statistics, the forest fitted "
                  "on the training packages' callees, margin "
                  f"{doc['margin']:g}): .text bytes against LLVM's -Oz; `kept`: the smaller "
                  "object, as a build keeps it"
                  + (f"; {errors} modules failed to build and are left out" if errors else "")
                  + ".", "", *whole_lines(mods, "callees")]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.per == "site":
        return inline_train.run(args)
    if args.write_policy:
        print("mire size-inline-judge: --write-policy ships the per-site policy (without "
              "--per callee)", file=sys.stderr)
        return 2
    results = inline_train.ROOT / "docs" / "results"
    if Path(args.out) == results / "inline-policy.md":     # the per-site page's default
        args.out = str(results / "inline-callee-policy.md")
    return judge_callees(args, llvm_tools(args.cc))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inline_train.add_arguments(parser)
    parser.add_argument("--per", choices=("site", "callee"), default="site",
                        help="judge a policy per call site (sites.jsonl) or per callee, all "
                             "its sites at once (callees.jsonl; --out default "
                             "docs/results/inline-callee-policy.md); default: %(default)s")
