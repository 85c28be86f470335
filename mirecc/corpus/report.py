"""Counts over a corpus directory: per source kind and per origin (package,
csmith, OpenCL source package, kernel family), written as report.json and
printed as a table."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from mirecc.corpus.irtext import normalised_hashes
from mirecc.graph import GraphBuildError, build_graph
from mirecc.ir.text import IRTextError, disassemble
from mirecc.corpus.store import atomic_write_json
from mirecc.util.fsutil import atomic_write_bytes

COUNT_KEYS = ("functions", "statements", "graph_nodes", "graph_edges")


def _graph_size(root: Path, sha: str, rec: dict) -> dict:
    """A module's ProGraML graph size, built by mirecc.graph (the native
    builder, else the llvmlite fallback) once and kept in graphs/aa/sha.json."""
    path = root / "graphs" / sha[:2] / f"{sha}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    try:
        graph = build_graph(root / rec["ir"])
        size = {"graph_nodes": graph.num_nodes, "graph_edges": graph.num_edges,
                "builder": graph.meta.get("producer", "")}
    except (GraphBuildError, KeyError, OSError) as exc:
        size = {"graph_nodes": 0, "graph_edges": 0, "error": str(exc)[:300]}
    atomic_write_json(path, size)
    return size


def graph_sizes(root: Path, records: dict[str, dict]) -> dict[str, dict]:
    """Graph sizes of all modules, building the missing ones in parallel
    (the native builder is a subprocess per module)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {sha: pool.submit(_graph_size, root, sha, rec) for sha, rec in records.items()}
        sizes = {}
        for sha, fut in tqdm(futures.items(), desc="graph sizes", unit="module",
                             disable=None, leave=False):
            sizes[sha] = fut.result()
    return sizes


def _read_hashes(path: Path) -> set[bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return set()
    return {data[i:i + 8] for i in range(0, len(data), 8)}


def _normalised(root: Path, sha: str, rec: dict) -> set[bytes]:
    """A module's normalised statement hashes: from its .norm.bin, else
    computed now (modules stored before mirecc.ir existed) and saved."""
    path = root / "stmts" / sha[:2] / f"{sha}.norm.bin"
    if path.is_file():
        return _read_hashes(path)
    try:
        text = disassemble((root / rec["ir"]).read_bytes(), rec["ir"])
    except (IRTextError, OSError, KeyError):
        return set()
    hashes = normalised_hashes(text)
    if hashes is None:
        return set()
    atomic_write_bytes(path, b"".join(sorted(hashes)))
    return hashes


_ITEM_KEYS = ("status", "version", "seconds", "failed_stage", "exit_status", "error",
              "merge", "files", "added", "duplicate", "compile_failed",
              "with_inferred_defines", "log")


def _summarise_state(state: dict) -> dict:
    """Per package (debian, opencl): its outcome; per generated program
    (kernels, csmith): counts only."""
    done = state.get("done", {})
    out: dict = {"done": len(done),
                 "fetch_failed": {k: v.get("error", "")[:300]
                                  for k, v in state.get("fetch_failed", {}).items()}}
    if done and all("ok" in v and "status" not in v for v in done.values()):
        out["compile_failed"] = sum(1 for v in done.values() if not v.get("ok"))
    else:
        out["items"] = {k: {f: v[f] for f in _ITEM_KEYS if f in v} for k, v in done.items()}
    return out


def build_report(root: Path, extra: dict | None = None) -> dict:
    root = Path(root)
    seen: dict[str, dict] = {}
    try:
        with open(root / "manifest.jsonl") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                sha = rec.get("sha256")
                if sha and sha not in seen and (root / rec.get("ir", "")).is_file():
                    seen[sha] = rec
    except OSError:
        pass
    sizes = graph_sizes(root, seen)
    no_functions = sum(1 for v in sizes.values()
                       if "no function definitions" in v.get("error", ""))
    graph_errors = sum(1 for v in sizes.values() if "error" in v) - no_functions
    groups: dict[tuple, dict] = defaultdict(lambda: {"modules": 0, **{k: 0 for k in COUNT_KEYS}})
    uniq: dict[tuple, set] = defaultdict(set)
    norm_uniq: dict[tuple, set] = defaultdict(set)
    for sha, rec in seen.items():
        hashes = _read_hashes(root / "stmts" / sha[:2] / f"{sha}.bin")
        norm = _normalised(root, sha, rec)
        kind, origin = rec.get("kind") or "?", rec.get("origin") or "?"
        for key in (("total",), (kind,), (kind, origin)):
            g = groups[key]
            g["modules"] += 1
            for k in ("functions", "statements"):
                g[k] += rec.get(k) or 0
            for k in ("graph_nodes", "graph_edges"):
                g[k] += sizes[sha][k]
            uniq[key] |= hashes
            norm_uniq[key] |= norm
    for key, g in groups.items():
        g["unique_statements"] = len(uniq[key])
        g["unique_normalised_statements"] = len(norm_uniq[key])
    dropped = 0
    try:
        dropped = sum(1 for _ in open(root / "dropped.jsonl"))
    except OSError:
        pass
    states = {}
    for f in sorted((root / "state").glob("*.json")):
        try:
            states[f.stem] = _summarise_state(json.loads(f.read_text()))
        except ValueError:
            pass
    report = {
        "corpus": str(root),
        "total": groups.get(("total",), {"modules": 0}),
        "by_kind": {k[0]: v for k, v in sorted(groups.items()) if len(k) == 1 and k[0] != "total"},
        "by_origin": {f"{k[0]}/{k[1]}": v for k, v in sorted(groups.items()) if len(k) == 2},
        "eval_duplicates_dropped": dropped,
        "graph_build_errors": graph_errors,
        "modules_without_functions": no_functions,
        "sources": states,
        **(extra or {}),
    }
    atomic_write_json(root / "report.json", report)
    return report


def format_table(report: dict) -> str:
    cols = ("modules", "functions", "statements", "unique_statements",
            "unique_normalised_statements", "graph_nodes", "graph_edges")
    rows = [("TOTAL", report["total"])]
    rows += [(k, v) for k, v in report["by_kind"].items()]
    rows += [("  " + k, v) for k, v in report["by_origin"].items()]
    width = max([len(r[0]) for r in rows] + [10])
    out = [f"{'source':<{width}} " + " ".join(f"{c:>12}" for c in
                                                 ("modules", "functions", "stmts", "uniq stmts",
                                                  "uniq norm", "graph nodes", "graph edges"))]
    for name, g in rows:
        out.append(f"{name:<{width}} " + " ".join(f"{g.get(c, 0):>12}" for c in cols))
    out.append(f"evaluation-kernel duplicates dropped: {report['eval_duplicates_dropped']}; "
               f"modules with no function definitions (no graph): "
               f"{report.get('modules_without_functions', 0)}; "
               f"graph build errors: {report.get('graph_build_errors', 0)}")
    out.append("uniq stmts: distinct printed statements; uniq norm: distinct after "
               "mirecc.ir normalisation; graph nodes/edges: ProGraML-schema graphs "
               "built by mirecc.graph")
    return "\n".join(out)
