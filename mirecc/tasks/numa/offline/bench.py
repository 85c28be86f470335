"""``mire bench numa``: per-region NUMA, placement and prefetcher decisions
judged on the published measurements, for the regions mapped to their IR.

For each input size and each decision (threads, placement, page policy,
prefetcher alone, and all together: :data:`labels.DECISIONS`), the policies
side by side, on regions they never saw:

* ``default``: the authors' baseline;
* ``best single``: the configuration with the best mean log speedup over
  the training regions, everywhere;
* ``decision tree: statistics``: a regression tree over static region
  statistics (:mod:`mirecc.ir.region_stats`), as the dataset's authors
  used a decision tree on static features;
* forests over the statistics, IR2Vec (the module's vector) with them, and a
  random-init encoder's and mirecc's encoder's embedding of the region's
  outlined function with them;
* ``gated forest``: the same forests, but a region keeps the default
  unless the :data:`GATE_QUANTILE` quantile of the trees' predictions for
  the chosen configuration promises :data:`GATE_GAIN` (the OpenMP head's
  rule: act only where the trees agree);
* ``oracle``: the best measured configuration.

A model predicts, for every configuration the decision may choose, the log
speedup over the default, and the region gets the configuration it
predicts best.  Splits: leave one program out (all regions of a program
held out together) and 10 folds of regions.  Metrics per policy: error
rate (mean of 1 - best time / chosen time, the MIREncoder paper's), the
geometric-mean speedup over the default, and the share of the oracle's log
gain (summed over regions).  Label efficiency: the same, leave one program
out, with 5% to 100% of the training regions.
"""
from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from mirecc.encoder.runtime import compile_to_ir
from mirecc.frontend.compiler import _cxx_sibling
from mirecc.graph import build_graph_any
from mirecc.ir.region_stats import NAMES, region_statistics
from mirecc.ir.regions import find_sites
from mirecc.learn.datasets import default_root
from mirecc.learn.embeddings import embed_graph_sets, embed_ir2vec, encoder_model_dirs
from mirecc.tasks.numa.offline.labels import DECISIONS, DEFAULT, SIZES, decision_columns, \
    read_times
from mirecc.tasks.numa.offline.regions import Region, RegionsError, compile_flags, map_regions
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.plots import pyplot, save

FEATURE_SETS = ("statistics", "ir2vec", "random-init", "encoder")
SHARES = (0.05, 0.10, 0.25, 0.50, 1.0)
GATE_QUANTILE, GATE_GAIN = 0.3, math.log(1.05)
FOLDS = 10


def add_arguments(p) -> None:
    """``mire bench numa``'s own arguments (``mire bench`` holds the rest)."""
    p.add_argument("--numa-dataset", default=None,
                   help="numa: the numa-prefetch folder (default: numa-prefetch of "
                        "$MIRECC_DATASETS, else of ../shared/datasets)")
    p.add_argument("--numa-work", default=".work/numa",
                   help="numa: the programs' IR and the region map of mire numa-regions "
                        "(made when missing) (default: %(default)s)")
    p.add_argument("--numa-features", default=",".join(FEATURE_SETS),
                   help="numa: feature sets of the learned policies (default: %(default)s)")
    p.add_argument("--numa-repeats", type=int, default=2,
                   help="numa: seeds of the forests and of the label-efficiency samples")


# ------------------------------------------------------------------ features

def region_rows(regions: list, work: Path, kinds: list[str], cc: str, cxx: str,
                sources: Path) -> dict[str, np.ndarray]:
    """kind -> (regions, d) features of the mapped ``regions``, in order."""
    texts, stats = {}, {}
    for r in regions:
        if r.ir not in texts:
            texts[r.ir] = (work / r.ir).read_text()
            stats[r.ir] = region_statistics(texts[r.ir], find_sites(texts[r.ir]))
    S = np.asarray([stats[r.ir].get(r.site, [np.nan] * len(NAMES)) for r in regions])
    out = {"statistics": S}
    cache = work / "features"
    if "ir2vec" in kinds:
        vecs, _ = embed_ir2vec({ir: ("ir", text) for ir, text in texts.items()},
                               cache_root=cache)
        dim = len(next(iter(vecs.values()))) if vecs else 0
        out["ir2vec"] = np.hstack([S, np.asarray([vecs.get(r.ir, [np.nan] * dim)
                                                  for r in regions])])

    models = encoder_model_dirs(kinds, cache)
    if models:
        graphs = {}
        with tempfile.TemporaryDirectory(prefix="mire-numa-") as tmp:
            for n, source in enumerate(sorted({r.source for r in regions})):
                path = sources / source
                bc = Path(tmp) / f"{n}.bc"
                compiler = cxx if path.suffix == ".cpp" else cc
                compile_to_ir(path, bc, compiler,
                              compile_flags(path, sources, cc, work / "work"),
                              cwd=str(path.parent))
                graphs[source] = build_graph_any(bc)
        for kind, embedded in embed_graph_sets(graphs, models).items():
            dim = len(next(iter(embedded.values())).module)
            rows = [embedded[r.source].functions.get(r.outlined) for r in regions]
            out[kind] = np.hstack([S, np.asarray([x if x is not None else [np.nan] * dim
                                                  for x in rows], dtype=np.float64)])
    return out


# ------------------------------------------------------------------ judging

def fit_model(kind: str, X: np.ndarray, Y: np.ndarray, seed: int):
    """A regression tree (``kind`` "tree") or forest of X -> Y (log speedups)."""
    # lazy: scikit-learn costs ~1.5 s to import; only fit_model() needs it
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor

    if kind == "tree":
        model = DecisionTreeRegressor(min_samples_leaf=2, random_state=seed)
    else:
        # sqrt of the features per split: an embedding has hundreds
        model = RandomForestRegressor(n_estimators=50, max_features="sqrt",
                                      min_samples_leaf=2, random_state=seed, n_jobs=1)
    return model.fit(X, Y)


def candidate_columns(G: np.ndarray) -> np.ndarray:
    """The columns a learned policy chooses among: the default (column 0)
    and each training region's best: a configuration that won nowhere is
    not worth predicting (and keeps the shipped head small)."""
    best = np.nanargmax(np.nan_to_num(G, nan=-10.0), axis=1)
    return np.unique(np.concatenate([[0], best]))


def _fit_predict(kind: str, X: np.ndarray, Y: np.ndarray, Xt: np.ndarray,
                 seed: int) -> np.ndarray:
    """Predictions for ``Xt`` per tree: (trees, len(Xt), outputs)."""
    model = fit_model(kind, X, Y, seed)
    trees = getattr(model, "estimators_", [model])
    return np.stack([t.predict(Xt).reshape(len(Xt), -1) for t in trees])


def gated_candidates(G: np.ndarray, feats: np.ndarray, train: np.ndarray, test: np.ndarray,
                     seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The gated forest before its gate: per ``test`` region, the column
    with the best mean predicted log speedup and the :data:`GATE_QUANTILE`
    quantile of the trees' predictions for it (what the gate compares)."""
    columns = candidate_columns(G[train])
    per_tree = _fit_predict("forest", feats[train],
                            np.nan_to_num(G[train], nan=-10.0)[:, columns], feats[test], seed)
    best = np.argmax(per_tree.mean(axis=0), axis=1)
    promised = np.quantile(per_tree[:, np.arange(len(test)), best], GATE_QUANTILE, axis=0)
    return columns[best], promised


def choose(policy: str, G: np.ndarray, X: dict, train: np.ndarray, test: np.ndarray,
           seed: int, gain: float = GATE_GAIN) -> np.ndarray:
    """The column each ``test`` region gets from ``policy`` trained on
    ``train``; ``G``: log speedups over the default (NaN: not measured);
    ``gain``: the gated forest's threshold on the promised log speedup."""
    default = 0       # callers put the default first
    if policy == "default":
        return np.full(len(test), default)
    if policy == "oracle":
        return np.nanargmax(G[test], axis=1)
    Gt = np.nan_to_num(G[train], nan=-10.0)
    if policy == "best single":
        return np.full(len(test), int(np.argmax(Gt.mean(axis=0))))
    kind, features = policy.split(": ", 1)
    feats = X[features]
    if kind == "gated forest":
        chosen, promised = gated_candidates(G, feats, train, test, seed)
        return np.where(promised > gain, chosen, default)
    columns = candidate_columns(G[train])
    per_tree = _fit_predict("tree" if kind == "decision tree" else "forest",
                            feats[train], Gt[:, columns], feats[test], seed)
    return columns[np.argmax(per_tree.mean(axis=0), axis=1)]


def _metrics(G: np.ndarray, T: np.ndarray, rows: np.ndarray, chosen: np.ndarray) -> dict:
    gain = G[rows, chosen]
    best = np.nanmax(G[rows], axis=1)
    chosen_t, best_t = T[rows, chosen], np.nanmin(T[rows], axis=1)
    gain = np.where(np.isnan(gain), -10.0, gain)
    error = np.where(np.isnan(chosen_t), 1.0, 1.0 - best_t / chosen_t)
    oracle_gain = float(best.sum())
    return {"error": float(error.mean()), "speedup": float(math.exp(gain.mean())),
            "oracle_share": float(gain.sum() / oracle_gain) if oracle_gain > 0 else 1.0,
            "slower_0_95": int((gain < math.log(0.95)).sum())}


def splits(programs: list[str], how: str, seed: int = 0) -> list[np.ndarray]:
    """Test-row index sets: one per program, or :data:`FOLDS` folds of regions."""
    n = len(programs)
    if how == "program":
        return [np.array([i for i in range(n) if programs[i] == p])
                for p in sorted(set(programs))]
    order = np.random.default_rng(seed).permutation(n)
    return [order[k::FOLDS] for k in range(min(FOLDS, n))]


def judge(G: np.ndarray, T: np.ndarray, X: dict, programs: list[str], policies: list[str],
          how: str, repeats: int, share: float = 1.0, gain: float = GATE_GAIN) -> dict:
    """policy -> metrics over every region, each predicted while held out
    (``gain``: the gated forests' threshold)."""
    out = {}
    n = len(programs)
    for policy in policies:
        runs = []
        for seed in range(repeats if policy.startswith(("forest", "decision", "gated"))
                          or share < 1 else 1):
            chosen = np.zeros(n, dtype=int)
            rng = np.random.default_rng(seed)
            for test in splits(programs, how, seed):
                train = np.setdiff1d(np.arange(n), test)
                if share < 1:
                    train = np.sort(rng.choice(train, max(2, round(share * len(train))),
                                               replace=False))
                chosen[test] = choose(policy, G, X, train, test, seed, gain)
            runs.append(_metrics(G, T, np.arange(n), chosen))
        out[policy] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    return out


def gate_sweep(G: np.ndarray, X: dict, programs: list[str], thresholds: list[float],
               repeats: int = 2, features: str = "statistics",
               seeds: str = "worst") -> dict:
    """Leave one program out, the gated forest over ``features`` at each
    threshold of ``thresholds``: threshold -> program -> the held-out
    program's speedup over the default with the decisions the gate lets
    through, None where it let none through (for :func:`mirecc.learn.gates.gate_row`).

    Per forest seed ``0 .. repeats-1`` (the seeds :func:`judge` averages
    over), a program's speedup is the geometric mean of its regions' (the
    mean log gain, as :func:`_metrics` takes it; a region given a
    configuration not measured counts as a log gain of -10, one left at the
    default as 0).  ``seeds``: "worst" takes the slowest seed's (a trap one
    seed's forest falls into counts: the shipped head's forest has one seed
    too), "mean" the mean log over the seeds.  A program counts as applied
    when any seed let a configuration other than the default through for
    any of its regions.  The forests do not depend on the threshold: one fit
    per program and seed serves every threshold."""
    if seeds not in ("worst", "mean"):
        raise ValueError(f"seeds must be 'worst' or 'mean', not {seeds!r}")
    combine = min if seeds == "worst" else (lambda logs: float(np.mean(logs)))
    feats, n = X[features], len(programs)
    out: dict = {float(t): {} for t in thresholds}
    for test in splits(programs, "program"):
        train = np.setdiff1d(np.arange(n), test)
        runs = [gated_candidates(G, feats, train, test, seed) for seed in range(repeats)]
        for t in out:
            logs, applied = [], False
            for chosen, promised in runs:
                take = (promised > t) & (chosen != 0)
                gain = np.where(take, G[test, chosen], 0.0)
                logs.append(float(np.where(np.isnan(gain), -10.0, gain).mean()))
                applied |= bool(take.any())
            out[t][programs[test[0]]] = math.exp(combine(logs)) if applied else None
    return out


# ------------------------------------------------------------------ the run

def cxx_of(cc: str) -> str:
    """The C++ driver beside the C compiler ``cc`` (clang-14 -> clang++-14)."""
    return _cxx_sibling(cc) or cc.replace("clang", "clang++")


def load_regions(dataset: Path, work: Path, cc: str, cxx: str) -> list:
    """The region map of ``mire numa-regions`` in ``work``, made when missing."""
    regions_file = work / "regions.json"
    if regions_file.is_file():
        return [Region(**r) for r in json.loads(regions_file.read_text())["regions"]]
    return map_regions(dataset, work, cc, cxx)


def run(args) -> int:
    dataset = Path(args.numa_dataset) if args.numa_dataset else default_root() / "numa-prefetch"
    work = Path(args.numa_work).resolve()
    # the programs' IR is read, never run: any clang with OpenMP headers does
    cc = args.cc or "clang-14"
    cxx = cxx_of(cc)
    kinds = [k for k in args.numa_features.split(",") if k]
    unknown = [k for k in kinds if k not in FEATURE_SETS]
    if unknown:
        print(f"mire bench numa: unknown feature set(s) {', '.join(unknown)} "
              f"(known: {', '.join(FEATURE_SETS)})", file=sys.stderr)
        return 2
    try:
        regions = load_regions(dataset, work, cc, cxx)
        mapped = [r for r in regions if r.mapped]
        sizes = {size: read_times(dataset, size) for size in SIZES}
    except RegionsError as exc:
        print(f"mire bench numa: {exc}", file=sys.stderr)
        return 2
    X_all = region_rows(mapped, work, kinds, cc, cxx, (dataset / "sources").resolve())
    policies = ["default", "best single", "decision tree: statistics",
                *(f"forest: {k}" for k in kinds), *(f"gated forest: {k}" for k in kinds),
                "oracle"]
    result = {"dataset": str(dataset), "regions": len(regions), "mapped": len(mapped),
              "machine": "published: 2-socket Intel Xeon (Scravaglieri et al., JPDC 2023)",
              "repeats": args.numa_repeats, "sizes": {}}
    for size, (configs, times) in sizes.items():
        rows = [i for i, r in enumerate(mapped) if r.name in times]
        names = [mapped[i].name for i in rows]
        programs = [str(Path(mapped[i].source).parent) for i in rows]
        X = {k: v[rows] for k, v in X_all.items()}
        usable = np.all([~np.isnan(v).any(axis=1) for v in X.values()], axis=0)
        names = [n for n, u in zip(names, usable) if u]
        programs = [p for p, u in zip(programs, usable) if u]
        X = {k: v[usable] for k, v in X.items()}
        full = np.asarray([times[n] for n in names])
        per = {"regions": len(names), "programs": len(set(programs)), "decisions": {}}
        for decision in DECISIONS:
            cols = decision_columns(configs, decision)
            di = configs.index(DEFAULT)
            cols = [di] + [c for c in cols if c != di]           # the default first
            T = full[:, cols]
            G = np.log(T[:, :1] / T)
            per["decisions"][decision] = {
                "configurations": len(cols),
                **{how: judge(G, T, X, programs, policies, how, args.numa_repeats)
                   for how in ("program", "10-fold")}}
        cols = [configs.index(DEFAULT)] + [i for i in range(len(configs))
                                            if configs[i] != DEFAULT]
        T = full[:, cols]
        G = np.log(T[:, :1] / T)
        learned = [p for p in policies if p.startswith(("forest", "decision"))] + \
            ["best single"]
        per["label_efficiency"] = {
            str(share): judge(G, T, X, programs, learned, "program", args.numa_repeats, share)
            for share in SHARES}
        result["sizes"][size] = per
    out = Path(args.out if args.out != "mirecc-bench" else ".work/bench-numa")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "numa.json", json.dumps(result, indent=2).encode())
    text = markdown(result, policies)
    atomic_write_bytes(out / "numa.md", text.encode())
    plot(result, policies, out / "numa.png")
    print(text)
    print(f"mire bench numa: {out / 'numa.md'}, .json, .png")
    return 0


def markdown(r: dict, policies: list[str]) -> str:
    lines = ["# NUMA, placement and prefetcher decisions per region (published labels)", "",
             f"{r['mapped']} of {r['regions']} published regions mapped to their IR "
             f"(mire numa-regions); labels: {r['machine']}; learned policies averaged over "
             f"{r['repeats']} seeds. Error: mean of 1 - best time / chosen time; speedup: "
             f"geomean over the default ({DEFAULT}); oracle share: the share of the "
             f"oracle's summed log gain; slower: regions below 0.95x the default.", ""]
    for size, per in r["sizes"].items():
        lines += [f"## {size} input ({per['regions']} regions, {per['programs']} programs)",
                  ""]
        for how, title in (("program", "leave one program out"), ("10-fold", "10 folds")):
            lines += [f"### {title}", "",
                      "| policy | " + " | ".join(f"{d} ({per['decisions'][d]['configurations']})"
                                                for d in DECISIONS) + " |",
                      "|---|" + "---:|" * len(DECISIONS)]
            for p in policies:
                cells = []
                for d in DECISIONS:
                    m = per["decisions"][d][how][p]
                    cells.append(f"err {100 * m['error']:.1f}%, {m['speedup']:.3f}x, "
                                 f"{100 * m['oracle_share']:.0f}% of oracle, "
                                 f"{m['slower_0_95']:.1f} slower")
                lines.append(f"| {p} | " + " | ".join(cells) + " |")
            lines.append("")
        lines += ["### label efficiency (leave one program out, all decisions)", "",
                  "| training share | " + " | ".join(
                      p for p in next(iter(per["label_efficiency"].values()))) + " |",
                  "|---|" + "---:|" * len(next(iter(per["label_efficiency"].values())))]
        for share, res in per["label_efficiency"].items():
            lines.append(f"| {100 * float(share):.0f}% | " + " | ".join(
                f"{100 * m['oracle_share']:.0f}% / {100 * m['error']:.1f}%"
                for m in res.values()) + " |")
        lines += ["", "(oracle share / error rate)", ""]
    return "\n".join(lines) + "\n"


def plot(r: dict, policies: list[str], path: Path) -> None:
    """Share of the oracle's log gain per policy and decision, leave one
    program out, one panel per input size."""
    plt = pyplot()
    if plt is None:
        return
    sizes = list(r["sizes"])
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4), sharey=True)
    for ax, size in zip(np.atleast_1d(axes), sizes):
        per = r["sizes"][size]["decisions"]
        width = 0.8 / len(policies)
        colours = plt.cm.tab20(np.linspace(0, 1, len(policies)))    # one per policy
        for k, p in enumerate(policies):
            ax.bar(np.arange(len(DECISIONS)) + k * width,
                   [100 * per[d]["program"][p]["oracle_share"] for d in DECISIONS],
                   width, label=p, color=colours[k])
        ax.set_xticks(np.arange(len(DECISIONS)) + 0.4 - width / 2, list(DECISIONS))
        ax.set_title(f"{size} input, leave one program out")
        ax.axhline(80, color="grey", linestyle=":", linewidth=1)
    np.atleast_1d(axes)[0].set_ylabel("share of the oracle's log gain (%)")
    np.atleast_1d(axes)[-1].legend(fontsize=7)
    save(fig, path)
