"""``mire numa-train``: the NUMA/prefetcher head shipped in ``heads/numa``.

    mire numa-train --write-head

The head is the policy ``mire bench numa`` judges as ``gated forest:
statistics`` (the one that made no region slower there, leave one program
out), fitted on every mapped region: per input size, a forest over the
region's static statistics predicting each candidate configuration's log
speedup over the authors' default, the candidates being the default and
every region's best (:func:`bench.candidate_columns`).  Both sizes' forests
go into one ONNX file, their classes side by side (``small:<config>``,
``large:<config>``).  The spec names the machine the labels describe; ``mire
run`` maps the decisions onto the machine it runs on.

The gate's threshold (``min_gain``) is calibrated leave one program out
(:mod:`mirecc.learn.gates`): for each of :data:`THRESHOLDS`, every program is
held out in turn per input size and runs with the decisions the gate lets
through (:func:`bench.gate_sweep`); the shipped threshold is the admissible
one (no held-out program of either size below ``gates.FLOOR``) with the
best geomean, and where none is, the spec says ``refuse_forcing`` and why.
The sweep is ``"gate"`` in metrics.json.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import yaml

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.ir.region_stats import NAMES
from mirecc.learn.datasets import default_root
from mirecc.learn.forest import onnx_bytes
from mirecc.learn.gates import FLOOR, calibrate, gate_document, gate_row, refusal_reason
from mirecc.tasks.numa.offline.bench import (GATE_GAIN, GATE_QUANTILE, candidate_columns, fit_model,
                                             gate_sweep, judge, load_regions, region_rows)
from mirecc.tasks.numa.offline.labels import DEFAULT, SIZES, read_times
from mirecc.tasks.numa.offline.regions import RegionsError
from mirecc.util.fsutil import replace_dir
from mirecc.util.modelfiles import load_model

ROOT = Path(__file__).resolve().parents[4]
HEAD_DIR = ROOT / "heads" / "numa"
#: the machine the published labels were measured on, as far as the
#: configurations show it: 64 threads at most over 2 sockets and 2 NUMA
#: nodes, 32 of them on one socket (so 2-way SMT), Intel's prefetcher MSR
MACHINE = {"description": "2-socket Intel Xeon (Scravaglieri et al., JPDC 2023)",
           "vendor": "intel", "sockets": 2, "numa_nodes": 2, "hardware_threads": 64}
TREES_SEED = 0
#: the gate thresholds swept leave one program out; BEFORE: the one shipped
#: before the calibration (log 1.05, as the spec rounds it)
BEFORE = round(GATE_GAIN, 6)
THRESHOLDS = (0.0, 0.02, BEFORE, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5)
REPEATS = 2
PROTOCOL = ("leave one program out, per input size (an application is a program at one "
            "input size; one threshold for both sizes), gated forest over region statistics, "
            "a program's speedup the geomean of its regions', the slower of the forests' "
            "seeds 0 and 1")


def calibrate_gate(per_size: dict, thresholds=THRESHOLDS, before: float | None = BEFORE):
    """``per_size``: size -> :func:`bench.gate_sweep`'s result.  The GateRows
    (applications ``<size>:<program>``), the chosen row (None: refused), the
    refusal reason (None: not refused) and metrics.json's ``"gate"``."""
    rows = [gate_row(t, {f"{size}:{program}": s for size, sweep in per_size.items()
                         for program, s in sweep[float(t)].items()})
            for t in thresholds]
    chosen = calibrate(rows)
    refusal = None if chosen is not None else refusal_reason(rows, "program")
    return rows, chosen, refusal, gate_document(PROTOCOL, "program", before, rows, chosen,
                                                refusal)


def add_arguments(p) -> None:
    p.add_argument("--dataset", default=None,
                   help="the numa-prefetch folder (default: numa-prefetch of "
                        "$MIRECC_DATASETS, else of ../shared/datasets)")
    p.add_argument("--work", default=".work/numa",
                   help="the region map and IR of mire numa-regions (made when missing) "
                        "(default: %(default)s)")
    p.add_argument("--cc", default="clang-14", help="C compiler (default: %(default)s)")
    p.add_argument("--cxx", default="clang++-14", help="C++ compiler (default: %(default)s)")
    p.add_argument("--write-head", action="store_true",
                   help="write the head into heads/numa (else only report)")
    p.add_argument("--head-dir", default=str(HEAD_DIR), help="where --write-head writes "
                   "(default: heads/numa)")


def run(args) -> int:
    dataset = Path(args.dataset) if args.dataset else default_root() / "numa-prefetch"
    work = Path(args.work).resolve()
    try:
        mapped = [r for r in load_regions(dataset, work, args.cc, args.cxx) if r.mapped]
        sizes = {size: read_times(dataset, size) for size in SIZES}
    except RegionsError as exc:
        print(f"mire numa-train: {exc}", file=sys.stderr)
        return 2
    S = region_rows(mapped, work, [], args.cc, args.cxx, (dataset / "sources").resolve())
    S = S["statistics"]
    forests, classes, metrics = [], [], {"policy": "gated forest: statistics",
                                          "quantile": GATE_QUANTILE, "min_gain": None,
                                          "sizes": {}}
    data = {}
    for size, (configs, times) in sizes.items():
        rows = [i for i, r in enumerate(mapped)
                if r.name in times and np.all(np.isfinite(S[i]))]
        programs = [str(Path(mapped[i].source).parent) for i in rows]
        order = [configs.index(DEFAULT)] + [i for i, c in enumerate(configs) if c != DEFAULT]
        T = np.asarray([times[mapped[i].name] for i in rows])[:, order]
        G = np.log(T[:, :1] / T)
        X = S[rows]
        columns = candidate_columns(G)
        forests.append(fit_model("forest", X, np.nan_to_num(G, nan=-10.0)[:, columns],
                                 TREES_SEED))
        classes += [f"{size}:{configs[order[c]]}" for c in columns]
        data[size] = (G, T, {"statistics": X}, programs)
        metrics["sizes"][size] = {"regions": len(rows), "programs": len(set(programs)),
                                  "candidates": len(columns)}
    gate_rows, chosen, refusal, gate = calibrate_gate(
        {size: gate_sweep(G, X, programs, list(THRESHOLDS), REPEATS, seeds="worst")
         for size, (G, T, X, programs) in data.items()})
    min_gain = BEFORE if chosen is None else chosen.threshold
    metrics["min_gain"], metrics["gate"] = min_gain, gate
    print(f"mire numa-train: gate, {PROTOCOL}:")
    for r in gate_rows:
        mark = " (before)" if r.threshold == BEFORE else ""
        mark += " (chosen)" if chosen is not None and r.threshold == chosen.threshold else ""
        print(f"  min_gain {r.threshold:g}{mark}: {r.applied} of {r.applications} applied, "
              f"geomean {r.geomean:.3f}x, slowest {r.slowest:.3f}x, {r.below} below "
              f"{FLOOR:.2f}x")
    print(f"mire numa-train: min_gain {min_gain:g}" if refusal is None else
          f"mire numa-train: forcing refused: {refusal}")
    for size, (G, T, X, programs) in data.items():
        held_out = judge(G, T, X, programs, ["default", "gated forest: statistics", "oracle"],
                         "program", REPEATS, gain=min_gain)
        metrics["sizes"][size]["leave_one_program_out"] = held_out
        m, o = held_out["gated forest: statistics"], held_out["oracle"]
        per = metrics["sizes"][size]
        print(f"mire numa-train: {size} input: {per['regions']} regions of {per['programs']} "
              f"programs, {per['candidates']} candidate configurations; leave one program out: "
              f"{m['speedup']:.3f}x over the default ({100 * m['oracle_share']:.0f}% of the "
              f"oracle's {o['speedup']:.3f}x), error {100 * m['error']:.1f}%, "
              f"{m['slower_0_95']:g} regions slower (mean over seeds; min_gain {min_gain:g})")
    if not args.write_head:
        return 0
    spec = {"task": "numa", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version,
            "features": ["region_statistics"], "region_statistics": NAMES,
            "classes": classes, "default": DEFAULT, "machine": MACHINE,
            "quantile": GATE_QUANTILE, "min_gain": min_gain,
            **({"refuse_forcing": refusal} if refusal else {}),
            "metrics": "metrics.json"}
    header = ("# The NUMA/prefetcher head: per input size, a forest over region statistics "
              "predicting each\n# configuration's log speedup over the default on the "
              "machine below. Written by\n# mire numa-train --write-head; see "
              "mirecc/tasks/numa/head.py.\n")
    directory = Path(args.head_dir)
    replace_dir(directory, {
        "spec.yaml": (header + yaml.safe_dump(spec, sort_keys=False)).encode(),
        "head.onnx": onnx_bytes(forests, S.shape[1]),
        "metrics.json": (json.dumps(metrics, indent=1) + "\n").encode()})
    print(f"mire numa-train: wrote {directory} ({len(classes)} classes)")
    return 0
