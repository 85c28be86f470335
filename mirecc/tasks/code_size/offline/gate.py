"""``mire size-gate``: the object gate, fitted on the training packages and
judged on the held-out ones.

The gate decides, from the user's own object alone (no IR read, no second
front end), whether a candidate is worth building: per library pipeline a
logistic regression over statistics of the object
(:data:`~mirecc.tasks.code_size.build.GATE_FEATURES`: section sizes,
functions, relocations, how well the code compresses) predicts the chance
that the pipeline's object is smaller than ``-Oz``'s.  A candidate under the
threshold is not built; a TU none of whose budgeted candidates passes is
not searched at all.

The threshold is chosen before the held-out packages are looked at: by
leave-one-package-out cross-validation on the training modules, the
largest threshold that keeps at least :data:`KEEP` of the bytes that the
default budget's candidates save there.  The held-out packages are read
only for the page's table.

The objects are the corpus's bitcode through ``clang -Oz`` (what the
user's compile gives), built once into ``--objects``.

    mire size-gate [--labels heads/code-size/labels] [--corpus .work/size-corpus]
                   [--write-spec] [--md docs/results/code-size-gate.md]
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

from mirecc.frontend.compiler import clang_major
from mirecc.tasks.code_size.build import MIN_TEXT_BYTES, gate_chances, object_features, object_sizes
from mirecc.tasks.code_size.head import library_costs, within_budget
from mirecc.tasks.code_size.offline import cli as size_cli
from mirecc.tasks.code_size.offline.cli import ROOT
from mirecc.tasks.code_size.offline.dataset import HELD_OUT, corpus_modules
from mirecc.tasks.code_size.offline.labels import OWN, codegen_flags
from mirecc.tasks.code_size.offline.order import read_labels
from mirecc.util.fsutil import atomic_write_bytes

KEEP = 0.99         # of the default budget's bytes, in cross-validation
THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)
MIN_BYTES = (10, 20, 50, 100, 150, 200, 300, 500)
BUDGETS = (1, 2, 3, 5, 10)
K = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", default=str(ROOT / "heads" / "code-size" / "labels"),
                        help="labels of mire size-data (default: %(default)s)")
    parser.add_argument("--corpus", default=str(ROOT / ".work" / "size-corpus"),
                        help="the corpus the labels were measured on (default: %(default)s)")
    parser.add_argument("--objects", default=str(ROOT / ".work" / "size-gate"),
                        help="where the modules' -Oz objects are kept (default: %(default)s)")
    parser.add_argument("--cc", help="the clang whose library is gated (default: the one "
                        "mirecc drives)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="objects built at once (default: %(default)s)")
    parser.add_argument("--write-spec", action="store_true",
                        help="write the gate into heads/code-size/spec.yaml")
    parser.add_argument("--md", help="write the results page here")


def _objects(modules, compiler: str, directory: Path, jobs: int) -> dict[str, Path]:
    """sha -> the -Oz object of each module (built once, kept)."""
    directory.mkdir(parents=True, exist_ok=True)

    def build(module):
        path = directory / f"{module.sha256}.o"
        if not path.is_file():
            temp = directory / f".{module.sha256}.{os.getpid()}.o"
            proc = subprocess.run([compiler, *codegen_flags(module.flags), "-w", "-c", "-x",
                                   "ir", str(module.path), "-o", str(temp)],
                                  stdin=subprocess.DEVNULL, capture_output=True)
            if proc.returncode != 0:
                temp.unlink(missing_ok=True)
                return module.sha256, None
            atomic_write_bytes(path, temp.read_bytes())
            temp.unlink()
        return module.sha256, path

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        return {sha: data for sha, data in pool.map(build, modules) if data is not None}


def _rows(splits, table, modules, objects, library, everything=()) -> list[dict]:
    """Per module with code enough to search: its split, origin, features,
    per candidate the bytes saved below -Oz (0 when not smaller) and the
    seconds of its build, and the most that any of ``everything`` (the whole
    library) saves where each of it is labelled (else None)."""
    origin = {m.sha256: m.origin for m in modules}
    out = []
    for sha, labels in table.items():
        own = labels.get(OWN)
        if sha not in objects or not own or not own.get("text_bytes") \
                or not all(labels.get(p, {}).get("text_bytes") is not None for p in library):
            continue
        features = object_features(objects[sha].read_bytes())
        if features is None or object_sizes(str(objects[sha]))[1] < MIN_TEXT_BYTES:
            continue
        out.append({"split": splits.get(sha), "origin": origin.get(sha, "?"), "x": features,
                    "gain": [max(0, own["text_bytes"] - labels[p]["text_bytes"])
                             for p in library],
                    "seconds": [labels[p].get("seconds", 0.0) for p in library],
                    "oracle": max(own["text_bytes"] - labels[p]["text_bytes"]
                                  for p in [*library, *everything])
                    if all(labels.get(p, {}).get("text_bytes") is not None
                           for p in everything) else None})
    return out


def _fit(rows, n: int):
    """(mean, scale, [per candidate: [intercept, *coefficients] or None])."""
    # lazy: scikit-learn costs ~1.5 s to import; only _fit() needs it
    from sklearn.linear_model import LogisticRegression

    x = np.array([r["x"] for r in rows])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    models = []
    for j in range(n):
        y = np.array([r["gain"][j] > 0 for r in rows])
        if y.all() or not y.any():
            models.append(None)     # no model: always built
            continue
        fitted = LogisticRegression(C=1.0, max_iter=5000).fit(z, y)
        models.append([float(fitted.intercept_[0]), *map(float, fitted.coef_[0])])
    return mean.tolist(), scale.tolist(), models


def _chances(model, rows) -> list[list[float]]:
    mean, scale, coefficients = model
    named = {str(j): c for j, c in enumerate(coefficients) if c is not None}
    out = []
    for r in rows:
        got = gate_chances({"mean": mean, "scale": scale, "pipelines": named}, r["x"])
        out.append([got.get(str(j), 1.0) for j in range(len(coefficients))])
    return out


def _counted(rows, built_per_row) -> dict:
    """What building each row's candidates (``built_per_row``: their
    indices) gives: bytes saved (the best of them), candidates built,
    their seconds, TUs searched."""
    saved = built = searched = 0
    seconds = 0.0
    for r, chosen in zip(rows, built_per_row):
        saved += max([0] + [r["gain"][j] for j in chosen])
        built += len(chosen)
        searched += bool(chosen)
        seconds += sum(r["seconds"][j] for j in chosen)
    return {"saved": saved, "built": built, "searched": searched, "seconds": seconds}


def _policy(rows, chances, costs, budget: float, threshold: float) -> dict:
    """The budget's candidates in library order, those under ``threshold``
    not built (:func:`_counted`)."""
    names = within_budget([str(j) for j in range(K)], {str(j): c for j, c in enumerate(costs)},
                          K, budget)
    return _counted(rows, ([int(j) for j in names if p[int(j)] >= threshold] for p in chances))


def _win_gains(rows, n: int) -> list[float]:
    """Per candidate, its mean share of ``.text`` saved where it wins (the
    gain the chooser weighs a chance with)."""
    out = []
    for j in range(n):
        won = [r["gain"][j] / math.exp(r["x"][0]) for r in rows if r["gain"][j] > 0]
        out.append(sum(won) / len(won) if won else 0.0)
    return out


def _expected(rows, chances, win_gains) -> list[list[float]]:
    """Per TU and candidate, the ``.text`` bytes it is expected to save: the
    gate's chance times the candidate's mean share where it wins times the
    TU's ``.text``."""
    return [[c * g * math.exp(r["x"][0]) for c, g in zip(p, win_gains)]
            for r, p in zip(rows, chances)]


def _chosen(rows, expected, costs, budget: float, min_bytes: float) -> dict:
    """Candidates ordered per TU by their expected saving, as many as fit in
    the budget, those expected to save under ``min_bytes`` not built
    (:func:`_counted`)."""
    def built(e):
        chosen, spent = [], 0.0
        for j in sorted(range(K), key=lambda j: -e[j]):
            if e[j] >= min_bytes and spent + costs[j] <= budget + 1e-9:
                chosen.append(j)
                spent += costs[j]
        return chosen
    return _counted(rows, map(built, expected))


def _cross_validated(rows) -> tuple[list[list[float]], list[list[float]]]:
    """Each training row's chances and expected savings from a gate fitted
    without its package."""
    out, expected = [None] * len(rows), [None] * len(rows)
    for origin in sorted({r["origin"] for r in rows}):
        inside = [i for i, r in enumerate(rows) if r["origin"] == origin]
        others = [r for r in rows if r["origin"] != origin]
        model = _fit(others, K)
        chances = _chances(model, [rows[i] for i in inside])
        for i, p, e in zip(inside, chances, _expected([rows[i] for i in inside], chances,
                                                      _win_gains(others, K))):
            out[i], expected[i] = p, e
    return out, expected


def run(args: argparse.Namespace) -> int:
    compiler = size_cli.compiler_of(args)
    major = clang_major(compiler)
    whole_library = size_cli.named_library(compiler)
    named = whole_library[:K]
    library = [passes for _, passes in named]
    costs_by_name = library_costs(yaml.safe_load(size_cli.SPEC.read_text())).get(major, {})
    costs = [costs_by_name.get(name, 1.0) for name, _ in named]
    try:
        splits, table = read_labels(Path(args.labels))
        modules = corpus_modules(Path(args.corpus))
    except (ValueError, OSError) as exc:
        print(f"mire size-gate: {exc}", file=sys.stderr)
        return 2
    wanted = [m for m in modules if m.sha256 in table]
    print(f"mire size-gate: LLVM {major}, {len(wanted)} labelled modules in {args.corpus}; "
          f"building their -Oz objects into {args.objects}", flush=True)
    objects = _objects(wanted, compiler, Path(args.objects), args.jobs)
    rows = _rows(splits, table, wanted, objects, library,
                 [passes for _, passes in whole_library])
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    if not train or not test:
        print(f"mire size-gate: {len(train)} training and {len(test)} held-out modules with "
              f"every library pipeline labelled: both are needed", file=sys.stderr)
        return 2
    cv, cv_expected = _cross_validated(train)
    ungated = _policy(train, cv, costs, 1, 0.0)
    # the chooser's own bar, fitted the same way: the largest expected saving
    # that keeps KEEP of the bytes its one candidate per TU saves
    chooser = _chosen(train, cv_expected, costs, 1, 0.0)["saved"]
    min_bytes = max([0] + [b for b in MIN_BYTES
                           if _chosen(train, cv_expected, costs, 1, b)["saved"]
                           >= KEEP * chooser])
    threshold = 0.0
    lines_cv = []
    for t in THRESHOLDS:
        got = _policy(train, cv, costs, 1, t)
        share = got["saved"] / max(ungated["saved"], 1)
        lines_cv.append(f"| {t:g} | {share:.1%} | {got['seconds'] / max(ungated['seconds'], 1e-9):.0%} "
                        f"| {got['searched']} of {len(train)} |")
        if share >= KEEP:
            threshold = t
    model = _fit(train, K)
    chances = _chances(model, test)
    reference = _policy(test, chances, costs, K, 0.0)["saved"]
    expected = _expected(test, chances, _win_gains(train, K))
    whole = [r for r in test if r["oracle"] is not None]
    oracle_share = (sum(max(r["gain"]) for r in whole) / max(1, sum(max(0, r["oracle"])
                                                                     for r in whole)))
    best_one = sum(max(r["gain"][j] for j in range(K) if costs[j] <= 1 + 1e-9) for r in test)

    def cell(got):
        return (f"{got['saved'] / reference:.0%} / {got['built'] / len(test):.2f} / "
                f"{got['seconds']:.0f} s / {got['searched']}")
    table_rows = []
    for budget in BUDGETS:
        table_rows.append(
            f"| {budget:g} | {cell(_policy(test, chances, costs, budget, 0.0))} | "
            f"{cell(_policy(test, chances, costs, budget, threshold))} | "
            f"{cell(_chosen(test, expected, costs, budget, 0.0))} | "
            f"{cell(_chosen(test, expected, costs, budget, min_bytes))} |")
    per_package = []
    for origin in HELD_OUT:
        part = [(r, p) for r, p in zip(test, chances) if r["origin"] == origin]
        if not part:
            continue
        rs, ps = [r for r, _ in part], [p for _, p in part]
        plain, gated = _policy(rs, ps, costs, 1, 0.0), _policy(rs, ps, costs, 1, threshold)
        per_package.append(f"| {origin} | {len(rs)} | {plain['saved']:,} | {gated['saved']:,} | "
                           f"{plain['searched']} | {gated['searched']} |")
    page = "\n".join([
        "# Code size: the object gate",
        "",
        f"Written by `mire size-gate` (LLVM {major}, `{compiler}`). The gate reads only the "
        "user's own `-Oz` object: per library pipeline, a logistic regression over "
        f"{len(model[0])} statistics of the object gives the chance that the pipeline's object "
        "is smaller; a candidate under the threshold is not built, and a TU with none left "
        "runs no second front end. Objects with under 1024 bytes of `.text` are left out "
        "(they are never searched). Labels: the committed `.text` bytes of `mire size-data`; "
        "objects: the corpus's bitcode through `clang -Oz`.",
        "",
        f"Threshold chosen on the {len(train)} training modules (leave one package out, the "
        f"default budget): the largest that keeps {KEEP:.0%} of the bytes: **{threshold:g}**.",
        "",
        "| threshold | bytes kept | candidate seconds | TUs searched |",
        "|---:|---:|---:|---:|",
        *lines_cv,
        "",
        f"Held out ({', '.join(HELD_OUT)}: {len(test)} modules with code, never fitted on). "
        f"Cells: share of the bytes that the library's first {K} save ({reference:,} bytes) / "
        "mean candidates built per TU / their build seconds (opt and back end) / TUs searched:",
        "",
        "| budget | library order | library order, object gate | chosen per TU | chosen per "
        "TU, expected bytes gated |",
        "|---:|---:|---:|---:|---:|",
        *table_rows,
        "",
        "*Chosen per TU*: the same models order each TU's candidates by the bytes each is "
        "expected to save (its chance, times its mean share of `.text` saved where it won on "
        "the training modules, times the TU's `.text`) and build as many as fit in the "
        "budget (at budget 1, the one candidate the TU's own object points to); *gated*: "
        f"none expected to save under {min_bytes:g} bytes, the largest bar that keeps "
        f"{KEEP:.0%} of the chooser's bytes on the training modules (leave one package out). "
        f"The best single candidate that fits in budget 1, known per TU in hindsight, saves "
        f"{best_one / reference:.0%}; the first {K} save {oracle_share:.0%} of what the whole "
        f"library's best saves (its oracle) on the {len(whole)} modules where every "
        f"pipeline is labelled.",
        "",
        "Per held-out package at the default budget (1): `.text` bytes saved and TUs searched.",
        "",
        "| package | modules | bytes, ungated | bytes, gated | searched, ungated | searched, gated |",
        "|---|---:|---:|---:|---:|---:|",
        *per_package,
        "",
    ])
    print(page)
    if args.md:
        atomic_write_bytes(Path(args.md), page.encode())
        print(f"mire size-gate: wrote {args.md}")
    if args.write_spec:
        mean, scale, coefficients = model
        gate = {"threshold": threshold, "mean": [round(x, 6) for x in mean],
                "scale": [round(x, 6) for x in scale],
                "pipelines": {name: [round(x, 6) for x in c]
                              for (name, _), c in zip(named, coefficients) if c is not None}}
        size_cli.write_spec(major, gate=gate)
        print(f"mire size-gate: wrote the gate for LLVM {major} into {size_cli.SPEC}")
    return 0
