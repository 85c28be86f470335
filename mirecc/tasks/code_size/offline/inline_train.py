"""``mire size-inline-judge``: the per-call-site inlining policy for size,
judged on the labels of ``mire size-inline-data`` leaving whole packages
out, with three representations of a site: statistics of the site, caller
and callee (:mod:`mirecc.tasks.code_size.inline_features`), the frozen
encoder's function embeddings of caller and callee, and both; each at 1%,
10% and 100% of the training labels.

    mire size-inline-judge [--labels .work/inline-labels] [--corpus .work/size-corpus]
        [--polybench DIR] [--out docs/results/inline-policy.md]

Model: a forest of regression trees (:mod:`mirecc.learn.forest`) from a
site's inputs to what each forced choice saves against LLVM's own object,
``log(bytes / bytes inlined)`` and ``log(bytes / bytes out of line)`` (LLVM
inlines a site or not; forcing what it already does saves nothing, so the
target is the change, not the better of the two).  Policy: a site is forced
to the choice whose predicted saving (the trees' median) is the larger, where
it exceeds a margin, else left to LLVM; the margin is chosen from
:data:`MARGINS` on the training packages' out-of-package predictions.

The statistics include LLVM's own cost of each site at -Oz
(:func:`mirecc.tasks.code_size.inline_features.llvm_costs`: one ``opt`` run
per module with the pass plugin).

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
import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.encoder.runtime import Encoder
from mirecc.frontend.compiler import clang_major, find_compiler
from mirecc.graph import build_graph
from mirecc.ir.text import call_sites, disassemble, function_digests
from mirecc.learn.forest import ForestConfig, fit_forest, tree_predictions
from mirecc.learn.judge import RESAMPLES, interval, program_weights
from mirecc.plugin.build import find_plugin, plugin_args
from mirecc.taskapi.config import load_config
from mirecc.tasks.code_size.build import CandidateError, tool_beside
from mirecc.tasks.code_size.inline_features import llvm_costs
from mirecc.tasks.code_size.inline_policy import choose
from mirecc.tasks.code_size.inline_features import statistics as inline_statistics
from mirecc.tasks.code_size.offline.dataset import HELD_OUT, Module, corpus_modules
from mirecc.tasks.code_size.offline.inline_labels import Compiler
from mirecc.tasks.code_size.offline.labels import codegen_flags
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
FRACTIONS = (0.01, 0.1, 1.0)
#: the margins (log bytes) a prediction must exceed to force a site, chosen from
MARGINS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
KINDS = ("statistics", "encoder", "both")
#: the shipped policy's file, beside the code-size spec
POLICY_FILE = "inline-policy.onnx"


def read_sites(labels: Path) -> list[dict]:
    """The labelled sites of ``labels`` (``sites.jsonl``, or the committed
    snapshot's ``sites.jsonl.gz``)."""
    path = labels / "sites.jsonl"
    text = path.read_text() if path.is_file() else \
        gzip.decompress((labels / "sites.jsonl.gz").read_bytes()).decode()
    rows = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" not in r and r.get("inline") and r.get("noinline"):
            rows.append(r)
    return rows


def targets(rows: list[dict]) -> np.ndarray:
    """(sites, 2): log bytes saved against LLVM's object by forcing each site
    inline, and out of line."""
    return np.asarray([[math.log(r["own"] / r["inline"]), math.log(r["own"] / r["noinline"])]
                       for r in rows])


def llvm_tools(cc: str | None) -> tuple[str, Path]:
    """(opt, pass plugin) of the clang ``cc`` (default: the one mirecc drives)."""
    cc = cc or find_compiler(load_config(os.getcwd()), cxx=False)
    plugin = find_plugin(clang_major(cc))
    if plugin is None:
        raise SystemExit("mire size-inline-judge: no pass plugin built for "
                         f"{cc} (scripts/setup.sh builds it)")
    return tool_beside(cc, "opt"), plugin


def statistics(path, ir: str, tools) -> dict[str, list[float]]:
    """Site id -> the statistics row of each site of the module at ``path``
    whose callee it defines (:func:`inline_features.statistics`), LLVM's
    costs read with ``tools`` (opt, plugin)."""
    try:
        costs = llvm_costs(path, *tools)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        # the site's LLVM rows unknown (llvm_known 0), said once per module
        print(f"mire size-inline-judge: warning: {path}: LLVM's costs not read "
              f"({type(exc).__name__}); its sites have unknown cost rows", file=sys.stderr)
        costs = {}
    return inline_statistics(ir, costs)


def site_inputs(rows: list[dict], corpus: Path, model_dir, kinds=KINDS, tools=None
                ) -> dict[str, np.ndarray]:
    """kind -> (sites, d): the statistics, the encoder's caller and callee
    vectors, both (the encoder run only where ``kinds`` needs it)."""
    paths = {m.sha256: m.path for m in corpus_modules(corpus)}
    encoder = Encoder(Path(model_dir or SHIPPED_MODEL_DIR)) if set(kinds) - {"statistics"} \
        else None
    by_module: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_module.setdefault(r["module"], []).append(i)
    stats = [None] * len(rows)
    emb = [None] * len(rows)
    for module, indices in tqdm(by_module.items(), desc="modules", unit="module",
                                file=sys.stderr, disable=None):
        path = paths[module]
        ir = disassemble(Path(path).read_bytes(), str(path))
        features = statistics(path, ir, tools)
        names = sorted({rows[i][k] for i in indices for k in ("caller", "callee")})
        vectors = encoder.embed_functions(build_graph(path), names, function_digests(ir)) \
            if encoder else None
        for i in indices:
            r = rows[i]
            stats[i] = features[r["site"]]
            if vectors is not None:
                emb[i] = np.concatenate([vectors[r["caller"]], vectors[r["callee"]]])
    S = np.asarray(stats, np.float32)
    if encoder is None:
        return {"statistics": S}
    E = np.asarray(emb, np.float32)
    return {"statistics": S, "encoder": E, "both": np.hstack([S, E])}


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
    """Leave one package out: each site's trees' predictions (n, trees, 2)
    from a forest fitted on ``fraction`` of the other packages' sites."""
    rng = np.random.default_rng(seed)
    G = np.zeros((len(X), config.trees, y.shape[1]), np.float32)
    for package in sorted(set(packages)):
        test = packages == package
        train = np.flatnonzero(~test)
        if fraction < 1:
            train = rng.choice(train, max(20, int(round(fraction * len(train)))), replace=False)
        G[test] = tree_predictions(fit_forest(X[train], y[train], config), X[test])
    return G


def module_inputs(path: Path, ir: str, features: dict, encoder, kind: str):
    """(site ids, inputs of ``kind``) of every site of the module at ``path``
    (IR text ``ir``, site statistics ``features``) whose callee it defines."""
    sites = sorted(features)
    if not sites:
        return [], None
    parts = {"statistics": np.asarray([features[s] for s in sites], np.float32)}
    if kind != "statistics":
        callees = call_sites(ir)
        pairs = [(s.rsplit(":", 1)[0], callees[s.rsplit(":", 1)[0]][int(s.rsplit(":call", 1)[1])])
                 for s in sites]
        vectors = encoder.embed_functions(build_graph(path), sorted({n for p in pairs for n in p}),
                                          function_digests(ir))
        parts["encoder"] = np.asarray([np.concatenate([vectors[a], vectors[b]])
                                       for a, b in pairs], np.float32)
    X = parts[kind] if kind != "both" else np.hstack([parts["statistics"], parts["encoder"]])
    return sites, X


def held_out_modules(args, tools, decide) -> list[dict]:
    """Each module of the held-out packages (and PolyBench/C's with
    ``args.polybench``) compiled at its level as LLVM leaves it and with the
    call-site decisions of ``decide(path, ir, site statistics) -> ({site:
    "inline"|"noinline"}, counts)``: both objects' .text bytes, the smaller
    (the one a build keeps), and ``counts`` (by default the sites forced,
    ``decided``, and forced inline, ``inlined``)."""
    cc = args.cc or find_compiler(load_config(os.getcwd()), cxx=False)
    major = clang_major(cc)
    plugin = find_plugin(major)
    compiler = Compiler(cc, lambda path: plugin_args(major, plugin, path))
    held = [m for m in corpus_modules(Path(args.corpus)) if m.origin in HELD_OUT]
    scratch = tempfile.TemporaryDirectory(prefix="mirecc-inline-pb-")
    if getattr(args, "polybench", None):
        held += polybench_modules(Path(args.polybench), cc, Path(scratch.name))
    out = []
    for m in tqdm(held, desc="held-out modules", unit="module", file=sys.stderr,
                  disable=None):
        flags = codegen_flags(m.flags)
        with tempfile.TemporaryDirectory(prefix="mirecc-inline-") as tmp:
            try:
                own = compiler.text(str(m.path), flags, tmp)
                ir = disassemble(Path(m.path).read_bytes(), str(m.path))
                features = statistics(m.path, ir, tools)
                calls, counts = decide(m.path, ir, features)
                policy = compiler.text(str(m.path), flags, tmp, calls) if calls else own
            except (CandidateError, OSError, ValueError,
                    subprocess.CalledProcessError) as exc:
                out.append({"module": m.sha256, "origin": m.origin, "error": str(exc)[:200]})
                continue
        out.append({"module": m.sha256, "origin": m.origin, "path": m.source, "own": own,
                    "policy": policy, "kept": min(own, policy), "sites": len(features),
                    **(counts or {"decided": len(calls),
                                  "inlined": sum(v == "inline" for v in calls.values())})})
    scratch.cleanup()
    return out


def whole_modules(rows, inputs, kind: str, args, config, margin: float, tools) -> list[dict]:
    """The policy fitted on the training packages' sites (``kind``'s
    inputs), applied to every site of each held-out package's module at
    once (:func:`held_out_modules`)."""
    train = np.asarray([r["origin"] not in HELD_OUT for r in rows])
    if train.sum() < 50:
        print(f"mire size-inline-judge: {int(train.sum())} labelled sites of the training "
              f"packages: too few to judge whole modules", file=sys.stderr)
        return []
    y = targets(rows)
    model = fit_forest(inputs[kind][train], y[train], config)
    encoder = Encoder(Path(args.model or SHIPPED_MODEL_DIR)) if kind != "statistics" else None

    def decide(path, ir, features):
        sites, X = module_inputs(path, ir, features, encoder, kind)
        choice = choose(tree_predictions(model, X), margin) if sites else []
        return {s: ("inline" if c > 0 else "noinline") for s, c in zip(sites, choice) if c}, None

    return held_out_modules(args, tools, decide)


def polybench_modules(tree: Path, cc: str, work: Path) -> list:
    """PolyBench/C 4.2.1's programs (a checkout), each with its harness
    (``utilities/polybench.c``) as a module of its own: front-end bitcode at
    -Oz, as the corpus holds its modules."""
    utilities = tree / "utilities"
    sources = sorted(p for p in tree.glob("*/**/*.c")
                     if p.parent.name != "utilities" and not p.name.endswith(".orig.c"))
    out = []
    for src in [*sources, utilities / "polybench.c"]:
        bc = work / f"{src.stem}.bc"
        subprocess.run([cc, "-Oz", "-w", f"-I{utilities}", f"-I{src.parent}", "-c", "-emit-llvm",
                        "-Xclang", "-disable-llvm-passes", str(src), "-o", str(bc)], check=True)
        digest = hashlib.sha256(bc.read_bytes()).hexdigest()
        out.append(Module(digest, bc, "polybench", src.name, ["-Oz"]))
    return out


def write_policy(rows: list[dict], X: np.ndarray, config: ForestConfig, cc: str | None) -> dict:
    """Ship the statistics' policy: a forest fitted on the training
    packages' sites (the held-out packages never), its margin chosen on
    their out-of-package predictions, written as
    ``heads/code-size/inline-policy.onnx`` and the spec's ``inline_policy``
    section (returned)."""
    # lazy: the spec writer (yaml) and the ONNX export, only to ship
    from mirecc.learn.forest import onnx_bytes
    from mirecc.tasks.code_size.offline.cli import SPEC, write_spec

    packages = np.asarray([r["origin"] for r in rows])
    train = np.flatnonzero([p not in HELD_OUT for p in packages])
    sub = [rows[i] for i in train]
    y = targets(sub)
    G = out_of_package(X[train], y, packages[train], config, 1.0)
    margin = max(MARGINS, key=lambda m: saved(sub, choose(G, m)).sum())
    model = fit_forest(X[train], y, config)
    atomic_write_bytes(SPEC.parent / POLICY_FILE, onnx_bytes(model, X.shape[1]))
    cc = cc or find_compiler(load_config(os.getcwd()), cxx=False)
    section = {"llvm": clang_major(cc), "head": POLICY_FILE, "inputs": "statistics",
               "features": int(X.shape[1]), "margin": float(margin),
               "trees": config.trees, "min_samples_leaf": config.min_samples_leaf,
               "sites": len(sub), "packages": sorted({str(p) for p in packages[train]})}
    write_spec(inline_policy=section)
    decided = choose(G, margin)
    print(f"mire size-inline-judge: wrote {SPEC.parent / POLICY_FILE} and the spec's "
          f"inline_policy: {len(sub)} sites of {len(section['packages'])} training packages, "
          f"margin {margin:g} (leave one package out there: {int((decided != 0).sum())} sites "
          f"forced, {saved(sub, decided).sum():.0f} bytes saved)", file=sys.stderr)
    return section


def representations(rows: list[dict], inputs: dict, kinds, config: ForestConfig,
                    fixed_margin: float | None) -> tuple[list[dict], dict, dict]:
    """The representation table of labelled units (sites, or callees: rows
    with ``module``, ``origin``, ``own``, ``inline``, ``noinline``): per
    input kind and share of the training labels (:data:`FRACTIONS`), leaving
    one package out, the bytes the policy's choices save over the oracle's,
    with 90% intervals from package resamples and the difference from the
    statistics; the margins chosen (``fixed_margin``, else per row on the
    training packages' predictions: the held-out packages never choose it);
    and the oracle's bytes and share of the labelled modules' .text."""
    packages = np.asarray([r["origin"] for r in rows])
    y = targets(rows)
    best = oracle(rows)
    names = sorted(set(packages))
    weights = program_weights(np.asarray([names.index(p) for p in packages]), RESAMPLES)
    total = weights @ best
    # each labelled module's .text, spread over its labelled units: a
    # package's units sum to its labelled modules' bytes
    per_module: dict[str, int] = {}
    for r in rows:
        per_module[r["module"]] = per_module.get(r["module"], 0) + 1
    text = weights @ np.asarray([r["own"] / per_module[r["module"]] for r in rows])
    training = np.asarray([p not in HELD_OUT for p in packages])
    table, shares, margins = [], {}, {}
    for kind in kinds:
        for fraction in FRACTIONS:
            G = out_of_package(inputs[kind], y, packages, config, fraction)
            margin = fixed_margin if fixed_margin is not None else max(
                MARGINS, key=lambda m: saved(rows, choose(G, m))[training].sum())
            margins[(kind, fraction)] = margin
            s = saved(rows, choose(G, margin))
            share = (weights @ s) / total
            of_text = (weights @ s) / text
            shares[(kind, fraction)] = share
            table.append({"inputs": kind, "fraction": fraction, "margin": margin,
                          "share": float(share[0]), "interval": interval(share[1:]),
                          "of_text": float(of_text[0]), "of_text_interval": interval(of_text[1:]),
                          "bytes_saved": float(s.sum()),
                          "held_out_saved": float(s[~training].sum()),
                          "held_out_oracle": float(best[~training].sum()),
                          "worse": int((s < 0).sum()), "decided": int((s != 0).sum())})
            print(f"{kind:10s} {fraction:5.0%}: {share[0]:.1%} of the oracle's bytes",
                  file=sys.stderr)
    for row in table:
        ref = shares.get(("statistics", row["fraction"]))
        row["minus_statistics"] = (interval((shares[(row["inputs"], row["fraction"])] - ref)[1:])
                                   if ref is not None else (math.nan, math.nan))
    summary = {"packages": names, "oracle_bytes": float(best.sum()),
               "oracle_of_text": float((total / text)[0])}
    return table, margins, summary


def table_lines(table: list[dict], unit: str) -> list[str]:
    """The representation table (:func:`representations`) as Markdown;
    ``unit``: what a row decides (sites, callees)."""
    lines = ["| inputs | labels | margin | share of the oracle's bytes | minus statistics | "
             "bytes saved, % of the modules' .text | held-out packages: saved / oracle bytes | "
             f"{unit} decided | of them worse |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lo, hi = r["interval"]
        dlo, dhi = r["minus_statistics"]
        diff = "" if r["inputs"] == "statistics" else f"[{100 * dlo:+.1f}, {100 * dhi:+.1f}]"
        tlo, thi = r["of_text_interval"]
        lines.append(f"| {r['inputs']} | {r['fraction']:.0%} | {r['margin']:g} | "
                     f"{100 * r['share']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] | {diff} | "
                     f"{100 * r['of_text']:.3f}% [{100 * tlo:.3f}, {100 * thi:.3f}] | "
                     f"{r['held_out_saved']:.0f} / {r['held_out_oracle']:.0f} | "
                     f"{r['decided']} | {r['worse']} |")
    return lines


def whole_lines(modules: list[dict], forced: str) -> list[str]:
    """Whole held-out modules (:func:`held_out_modules`) per package and in
    all, as Markdown; ``forced``: what ``decided`` counts."""
    mods = [m for m in modules if "error" not in m]
    lines = [f"| package | modules | {forced} forced (inline) | -Oz bytes | policy | kept | "
             "objects larger |", "|---|---|---|---|---|---|---|"]
    for origin in sorted({m["origin"] for m in mods}) + ["all"]:
        group = [m for m in mods if origin in ("all", m["origin"])]
        own = sum(m["own"] for m in group)
        pol = sum(m["policy"] for m in group)
        kept = sum(m["kept"] for m in group)
        lines.append(f"| {origin} | {len(group)} | {sum(m['decided'] for m in group)} "
                     f"({sum(m['inlined'] for m in group)}) | {own} | "
                     f"{100 * (pol / own - 1):+.2f}% | {100 * (kept / own - 1):+.2f}% | "
                     f"{sum(m['policy'] > m['own'] for m in group)} |")
    return lines


def write_page(out: Path, doc: dict, render) -> int:
    """``doc`` as JSON beside ``out`` and rendered into ``out`` (both
    atomically), the page printed."""
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(doc, indent=1) + "\n").encode())
    page = render(doc)
    atomic_write_bytes(out, page.encode())
    print(page)
    return 0


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    rows = read_sites(Path(args.labels))
    if len(rows) < 50:
        print(f"mire size-inline-judge: {args.labels}: {len(rows)} labelled sites, too few "
              f"(run mire size-inline-data)", file=sys.stderr)
        return 2
    kinds = args.kinds or list(KINDS)
    tools = llvm_tools(args.cc)
    if args.write_policy:
        inputs = site_inputs(rows, Path(args.corpus), args.model, ["statistics"], tools)
        write_policy(rows, inputs["statistics"],
                     ForestConfig(trees=args.trees, min_samples_leaf=args.leaf), args.cc)
        return 0
    inputs = site_inputs(rows, Path(args.corpus), args.model, kinds, tools)
    config = ForestConfig(trees=args.trees, min_samples_leaf=args.leaf)
    table, margins, summary = representations(rows, inputs, kinds, config, args.margin)
    if args.whole and args.whole not in kinds:
        print(f"mire size-inline-judge: --whole {args.whole} needs those inputs in --kinds",
              file=sys.stderr)
        return 2
    margin = margins[(args.whole, 1.0)] if args.whole else None
    modules = whole_modules(rows, inputs, args.whole, args, config, margin, tools) \
        if args.whole else []
    llvm_inlines = sum(r["own"] == r["inline"] != r["noinline"] for r in rows)
    doc = {"written_by": "mire size-inline-judge", "date": time.strftime("%Y-%m-%d"),
           "sites": len(rows), "modules": len({r["module"] for r in rows}), **summary,
           "llvm_inlines": int(llvm_inlines), "margin": margin, "trees": args.trees,
           "table": table, "whole": args.whole, "whole_modules": modules,
           "seconds": round(time.time() - t0, 1)}
    return write_page(Path(args.out), doc, render)


def render(doc: dict) -> str:
    lines = [
        "# The inlining policy for size: representations judged per call site", "",
        f"Written by `{doc['written_by']}` ({doc['date']}) from the labels of `mire "
        f"size-inline-data`: {doc['sites']} call sites of {doc['modules']} modules of "
        f"{len(doc['packages'])} Debian packages ({', '.join(doc['packages'])}), each compiled "
        "at -Oz (clang 14) with the site inlined and out of line, the other sites left to "
        f"LLVM (LLVM inlines {doc['llvm_inlines']} of them). Leave one package out; a forest "
        f"of {doc['trees']} trees from a site's inputs to what forcing it inline and out of "
        "line saves against LLVM's object; a site forced to the choice whose predicted saving "
        "(the trees' median, log bytes) is the larger, where it exceeds a margin chosen on "
        "the training packages' predictions. The statistics include LLVM's own -Oz inline "
        "cost, threshold and cost features of the site. Share: the bytes the choices save against "
        "LLVM's object over what the best choice per site saves "
        f"({doc['oracle_bytes']:.0f} bytes, {100 * doc.get('oracle_of_text', math.nan):.2f}% "
        "of the labelled modules' .text), one site at a time; in brackets the 90% interval "
        "over 2000 package resamples, and the difference from the statistics at the same "
        "share of labels.", "", *table_lines(doc["table"], "sites")]
    mods = [m for m in doc.get("whole_modules", []) if "error" not in m]
    if mods:
        lines += ["", f"Whole modules of the held-out packages, every site's choice at once "
                  f"({doc['whole']} inputs, the forest fitted on the other packages' sites): "
                  ".text bytes against LLVM's -Oz; `kept`: the smaller object, as a build keeps "
                  "it.", "", *whole_lines(mods, "sites")]
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", default=str(ROOT / ".work" / "inline-labels"))
    parser.add_argument("--corpus", default=str(ROOT / ".work" / "size-corpus"))
    parser.add_argument("--model", default=None, help="encoder model directory")
    parser.add_argument("--kinds", nargs="+", choices=KINDS,
                        help="the representations judged (default: all three)")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--leaf", type=int, default=ForestConfig.min_samples_leaf,
                        help="the trees' fewest sites per leaf (default: %(default)s)")
    parser.add_argument("--write-policy", action="store_true",
                        help="only ship the statistics' policy: a forest fitted on the "
                             "training packages' sites, its margin chosen there leaving one "
                             f"package out, into heads/code-size/{POLICY_FILE} and the spec")
    parser.add_argument("--margin", type=float, default=None,
                        help="log bytes a prediction must exceed to force a site (default: "
                             "chosen from MARGINS on the training packages' predictions)")
    parser.add_argument("--whole", choices=KINDS, default="statistics",
                        help="the inputs whose policy is also applied to whole modules of the "
                             "held-out packages (default: %(default)s)")
    parser.add_argument("--cc", help="the clang (default: the one mirecc drives)")
    parser.add_argument("--polybench", help="a PolyBench/C 4.2.1 checkout: its programs "
                        "judged as whole modules too, beside the held-out packages")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "inline-policy.md"))
