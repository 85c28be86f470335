"""``mire bench size``: rankings of the code-size library judged on the
held-out packages (never seen by the library search or the forests), from
the labels of ``mire size-data``.

For each ranking and K: the mean and geometric-mean reduction below clang
-Oz in ``.text`` bytes and in IR instructions when the smallest of -Oz and
the first K pipelines is kept (and at K = 1 the first pipeline alone,
unverified), the share of modules made smaller (and larger: only ever
unverified), and the compile time of those builds over -Oz's.  Then the
same for the learned rankings trained on 5% to 100% of the training
labels, a table per held-out package, and a plot of reduction against K.

``--size-objective ir`` judges another question, the published anchors'
(IR instruction count, no object built): rankings learn IR reductions and
"verified" keeps the fewest instructions; with ``--size-library`` naming
the library ``mire size-search --objective ir`` found for that objective.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.learn.embeddings import default_cache_root
from mirecc.tasks.code_size.offline import cli as size_cli
from mirecc.tasks.code_size.offline.dataset import Labels, corpus_modules
from mirecc.tasks.code_size.offline.rank import (Table, standardise, contrastive_embedding,
                                                 forest_scores, judge, module_features,
                                                 neighbour_scores, orders_from_scores,
                                                 static_order)
from mirecc.tasks.code_size.verify import MIN_TEXT_BYTES
from mirecc.util.plots import pyplot, save

KS = (1, 2, 5, 10, 30)     # and the whole library when smaller than 30
FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
# the arguments: mirecc.tasks.code_size.offline.cli.add_bench_arguments


def rankings(train: Table, test: Table, X: dict, seed: int) -> dict[str, np.ndarray]:
    """name -> (test modules, library) order."""
    n, p = len(test.modules), len(test.library)
    rng = np.random.default_rng(seed)
    out = {
        "library order (spec)": np.tile(np.arange(p), (n, 1)),
        "best single pipeline": np.tile(static_order(train, "best"), (n, 1)),
        "most frequent winners": np.tile(static_order(train, "winners"), (n, 1)),
        "random pipelines": np.stack([rng.permutation(p) for _ in range(n)]),
    }
    for kind, (X_train, X_test) in X.items():
        out[f"forest: {kind}"] = orders_from_scores(
            forest_scores(X_train, train, X_test, seed=seed))
    if {"counts", "ir2vec"} <= X.keys():
        both_train = np.hstack([X["counts"][0], X["ir2vec"][0]])
        both_test = np.hstack([X["counts"][1], X["ir2vec"][1]])
        plain = standardise(both_train, both_test)
        out["nearest modules: counts + IR2Vec"] = orders_from_scores(
            neighbour_scores(*plain[:1], train, plain[1]))
        learned = contrastive_embedding(both_train, train, both_test, seed=seed)
        out["nearest modules: contrastive (GRACE-style)"] = orders_from_scores(
            neighbour_scores(learned[0], train, learned[1]))
    if "counts" in X:
        # the features the driver computes itself (IR2Vec is not in the driver)
        learned = contrastive_embedding(X["counts"][0], train, X["counts"][1], seed=seed)
        out["nearest modules: contrastive on counts"] = orders_from_scores(
            neighbour_scores(learned[0], train, learned[1]))
    out["oracle"] = orders_from_scores(np.where(np.isfinite(test.score), test.score, -1.0))
    return out


def evaluate(train: Table, test: Table, X: dict, repeats: int, ks) -> dict:
    """name -> K -> judged, averaged over ``repeats`` seeds."""
    runs = [{name: {k: judge(test, order, k) for k in ks}
             for name, order in rankings(train, test, X, seed).items()}
            for seed in range(repeats)]
    return {name: {k: _mean([r[name][k] for r in runs]) for k in ks} for name in runs[0]}


BUDGETS = (0.5, 1, 1.5, 2, 3, 5, 10, 20)


def pipeline_costs(train: Table) -> np.ndarray:
    """Each pipeline's cost: median build seconds over -Oz's on the
    training modules (what ``mire size-order`` writes into the spec)."""
    ok = train.own_seconds > 0
    return np.round(np.median(train.seconds[ok] / train.own_seconds[ok][:, None], axis=0), 2)


def budget_curve(test: Table, order: np.ndarray, cost: np.ndarray, budget: float,
                 min_text: int, reference: float) -> dict:
    """What the driver builds at ``size_budget`` = ``budget``: per module the
    first candidates of its order whose costs fit (none under ``min_text``
    bytes of .text at -Oz), the smallest kept.  Bytes saved in total .text as a
    share of ``reference`` (the first 10 in library order, every module), the
    mean number built, and the compile time over -Oz's (opt and back end)."""
    saved = np.where(np.isfinite(test.text), test.text, 0.0) * test.own_text[:, None]
    total, built, seconds = 0.0, [], 0.0
    for i in range(len(test.modules)):
        chosen, spent = [], 0.0
        if test.own_text[i] >= min_text:
            for j in order[i]:
                spent += cost[j]
                if spent > budget + 1e-9:
                    break
                chosen.append(j)
        built.append(len(chosen))
        total += max([0.0, *saved[i, chosen]])
        seconds += test.seconds[i, chosen].sum()
    return {"share": total / reference if reference else 0.0, "mean_k": float(np.mean(built)),
            "bytes": total, "compile_time_ratio": float(
                (test.own_seconds.sum() + seconds) / max(test.own_seconds.sum(), 1e-9))}


def evaluate_budgets(train: Table, test: Table, X: dict, repeats: int) -> dict:
    """ranking -> budget -> :func:`budget_curve`, averaged over seeds."""
    cost = pipeline_costs(train)
    saved = np.where(np.isfinite(test.text), test.text, 0.0) * test.own_text[:, None]
    reference = float(np.maximum(saved[:, :10].max(axis=1), 0).sum())
    runs = [{name: {str(b): budget_curve(test, order, cost, b, MIN_TEXT_BYTES, reference)
                    for b in BUDGETS}
             for name, order in rankings(train, test, X, seed).items()}
            for seed in range(repeats)]
    return {"costs": cost.tolist(), "reference_bytes": reference, "min_text": MIN_TEXT_BYTES,
            "rankings": {name: {b: _mean([r[name][b] for r in runs]) for b in runs[0][name]}
                         for name in runs[0]}}


def _mean(items: list[dict]):
    first = items[0]
    if isinstance(first, dict):
        return {key: _mean([i[key] for i in items]) for key in first}
    return float(np.mean(items))


def _features(table: Table, kinds, cache: Path, model_dirs: dict) -> dict[str, np.ndarray]:
    out = {}
    for kind in kinds:
        vectors = module_features(table.modules, kind, cache, model_dirs)
        dim = len(next(iter(vectors.values())))
        out[kind] = np.stack([vectors.get(m.sha256, np.zeros(dim, np.float32))
                              for m in table.modules])
    return out


def run(args: argparse.Namespace) -> int:
    # lazy: encoder.export imports torch (~2 s); only run() needs it
    from mirecc.encoder.export import random_init_model_dir

    compiler = size_cli.compiler_of(args)
    labels = Labels(Path(args.labels))
    try:
        library = (size_cli.read_pipelines(Path(args.size_library)) if args.size_library
                   else size_cli.library_passes(compiler))
        modules = corpus_modules(Path(args.size_corpus))
    except ValueError as exc:
        print(f"mire bench size: {exc}", file=sys.stderr)
        return 2
    objective = args.size_objective
    table = Table(labels.table(), modules, library, objective)
    train_rows = np.array([i for i, m in enumerate(table.modules) if m.split == "train"])
    test_rows = np.array([i for i, m in enumerate(table.modules) if m.split == "test"])
    if not len(train_rows) or not len(test_rows):
        print(f"mire bench size: {len(train_rows)} training and {len(test_rows)} held-out "
              f"modules have every library pipeline measured in {args.labels}; run mire "
              f"size-data first", file=sys.stderr)
        return 2
    kinds = [k.strip() for k in args.size_features.split(",") if k.strip()]
    cache = default_cache_root()
    # --model: another encoder in the "encoder" rows (and its shape's random init)
    trained = Path(args.model) if getattr(args, "model", None) else SHIPPED_MODEL_DIR
    model_dirs = {"trained": trained}
    if "random-init" in kinds:
        model_dirs["random"] = random_init_model_dir(trained, cache / "models", seed=0)
    feats = _features(table, kinds, cache, model_dirs)
    train, test = table.subset(train_rows), table.subset(test_rows)
    ks = sorted({k for k in KS if k < len(library)} | {min(len(library), KS[-1])})
    X = {kind: (f[train_rows], f[test_rows]) for kind, f in feats.items()}
    results = {"main": evaluate(train, test, X, args.size_repeats, ks)}
    if objective == "text":
        results["budgets"] = evaluate_budgets(train, test, X, args.size_repeats)
    # label efficiency: the learned rankings on a share of the training modules
    results["label_efficiency"] = {}
    rng = np.random.default_rng(0)
    for fraction in FRACTIONS:
        take = np.sort(rng.permutation(len(train_rows))[:max(2, int(fraction * len(train_rows)))])
        sub = train.subset(take)
        Xs = {kind: (xt[take], xs) for kind, (xt, xs) in X.items()}
        results["label_efficiency"][str(fraction)] = {
            "train_modules": len(take),
            "results": evaluate(sub, test, Xs, args.size_repeats, [k for k in (1, 5) if k in ks])}
    # per held-out package
    results["packages"] = {}
    for package in sorted({m.origin for m in test.modules}):
        rows = np.array([i for i, m in enumerate(test.modules) if m.origin == package])
        Xp = {kind: (xt, xs[rows]) for kind, (xt, xs) in X.items()}
        results["packages"][package] = {"modules": len(rows), "results": evaluate(
            train, test.subset(rows), Xp, args.size_repeats, ks)}
    meta = json.loads((Path(args.labels) / "meta.json").read_text())
    report = {"machine": meta["machine"], "compiler": meta["compiler_version"],
              "objective": objective, "library_file": args.size_library or "the shipped spec",
              "library": len(library), "train_modules": len(train_rows),
              "test_modules": len(test_rows), "held_out": sorted({m.origin for m in test.modules}),
              "ks": ks, "repeats": args.size_repeats, **results}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "size" if objective == "text" else f"size-{objective}"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2))
    md = markdown(report)
    (out / f"{stem}.md").write_text(md)
    plot(report, out / f"{stem}.png")
    print(md)
    print(f"mire bench size: {out / stem}.md, .json, .png")
    return 0


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def markdown(r: dict) -> str:
    ir = r.get("objective") == "ir"
    what = "IR instructions" if ir else ".text bytes"
    lines = [f"# Code size ({what}): the library's rankings on held-out packages",
             "",
             f"{r['compiler']}; {r['machine']['processor']}; library of {r['library']} "
             f"candidates ({r.get('library_file', 'the shipped spec')}); "
             f"{r['train_modules']} training modules, {r['test_modules']} held-out "
             f"modules ({', '.join(r['held_out'])}); random and learned rankings averaged "
             f"over {r['repeats']} seeds.  Objective: {what} (what the rankings learn and "
             f"verification minimises).  Reductions are below clang -Oz; 'verified': the "
             f"smallest of -Oz and the first K candidates (never larger than -Oz in the "
             f"objective); improved/larger: share of modules, in the objective; compile "
             f"time: opt and back end of -Oz plus the K candidates, over -Oz's.", ""]
    lines += ["| ranking | K | .text mean | .text geomean | IR instr. mean | IR geomean "
              "| improved | larger | compile time |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, by_k in r["main"].items():
        for k, res in by_k.items():
            rows = [("verified", res["verified"])]
            if "alone" in res:
                rows.insert(0, ("alone", res["alone"]))
            for how, s in rows:
                label = f"{k} ({how})" if k in (1, "1") else str(k)
                improved, larger = ((s["ir_improved"], s["ir_larger"]) if ir
                                    else (s["improved"], s["larger"]))
                lines.append(f"| {name} | {label} | {_pct(s['text_mean'])} | "
                             f"{_pct(s['text_geomean'])} | {_pct(s['ir_mean'])} | "
                             f"{_pct(s['ir_geomean'])} | {_pct(improved)} | "
                             f"{_pct(larger)} | {res['compile_time_ratio']:.2f}x |")
    if "budgets" in r:
        b = r["budgets"]
        budgets = list(next(iter(b["rankings"].values())))
        lines += ["", "## Within a budget (the driver's size_budget)", "",
                  f"Per held-out module, the first candidates of each ranking whose costs "
                  f"(build time over -Oz's, median on the training modules) fit in the "
                  f"budget, none under {b['min_text']} bytes of .text; the smallest kept. "
                  f"Cells: share of the .text bytes that the first 10 in library order save "
                  f"({b['reference_bytes']:,.0f} bytes) / mean candidates built / compile "
                  f"time over -Oz's (opt and back end).", "",
                  "| ranking | " + " | ".join(f"budget {x}" for x in budgets) + " |",
                  "|---|" + "---:|" * len(budgets)]
        for name, by_b in b["rankings"].items():
            lines.append(f"| {name} | " + " | ".join(
                f"{100 * c['share']:.0f}% / {c['mean_k']:.2f} / {c['compile_time_ratio']:.1f}x"
                for c in by_b.values()) + " |")
    lines += ["", "## Label efficiency (learned rankings, .text mean / IR mean, verified)", "",
              "| training share | modules | " + " | ".join(
                  f"{n} K={k}" for n in _learned(r) for k in (1, 5)) + " |",
              "|---|---:|" + "---:|" * (2 * len(_learned(r)))]
    for fraction, le in r["label_efficiency"].items():
        cells = []
        for name in _learned(r):
            for k in (1, 5):
                s = le["results"][name].get(k) or le["results"][name].get(str(k))
                cells.append(f"{_pct(s['verified']['text_mean'])} / "
                             f"{_pct(s['verified']['ir_mean'])}" if s else "-")
        lines.append(f"| {float(fraction):.0%} | {le['train_modules']} | "
                     + " | ".join(cells) + " |")
    metric = "ir_mean" if ir else "text_mean"
    lines += ["", f"## Per held-out package ({'IR' if ir else '.text'} mean, verified)", "",
              "| package | modules | ranking | " + " | ".join(f"K={k}" for k in r["ks"]) + " |",
              "|---|---:|---|" + "---:|" * len(r["ks"])]
    for package, pr in r["packages"].items():
        for name in ("library order (spec)", *[n for n in _learned(r) if "encoder" in n],
                     "oracle"):
            if name not in pr["results"]:
                continue
            cells = [_pct(pr["results"][name][k]["verified"][metric]) for k in
                     pr["results"][name]]
            lines.append(f"| {package} | {pr['modules']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _learned(r: dict) -> list[str]:
    return [n for n in r["main"] if n.startswith("forest:")] + ["best single pipeline",
                                                               "most frequent winners"]


def plot(r: dict, path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    ir = r.get("objective") == "ir"
    metric = "ir_mean" if ir else "text_mean"
    budgets = r.get("budgets")
    if budgets:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8))
    else:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    # more rankings than tab10 has colours: the same colour per ranking on both panels
    for axis in (ax, bx) if budgets else (ax,):
        axis.set_prop_cycle(color=plt.cm.tab20.colors[::2] + plt.cm.tab20.colors[1::2])
    for name, by_k in r["main"].items():
        ks = [int(k) for k in by_k]
        ax.plot(ks, [100 * by_k[k]["verified"][metric] for k in by_k], marker="o",
                label=name, linestyle="--" if name == "oracle" else "-")
    ax.set_xscale("log")
    ax.set_xticks(r["ks"], [str(k) for k in r["ks"]])
    ax.set_xlabel("K (candidate pipelines built per TU)")
    ax.set_ylabel(f"{'IR instruction' if ir else '.text'} reduction below -Oz, mean (%)")
    ax.set_title(f"held-out packages ({r['test_modules']} modules)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if budgets:
        for name, by_b in budgets["rankings"].items():
            cells = list(by_b.values())
            bx.plot([c["mean_k"] for c in cells], [100 * c["share"] for c in cells],
                    marker="o", label=name, linestyle="--" if name == "oracle" else "-")
        bx.axhline(90, color="grey", linewidth=0.8)
        bx.axvline(2.5, color="grey", linewidth=0.8)
        bx.set_xlabel("mean candidates built per module (budgets "
                      + ", ".join(str(b) for b in by_b) + ")")
        bx.set_ylabel("share of the first 10's .text bytes saved (%)")
        bx.set_title("within a budget (size_budget)")
        bx.grid(alpha=0.3)
    save(fig, path, dpi=120)
