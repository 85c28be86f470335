"""ProGraML-schema program graphs of LLVM modules.

    from mirecc.graph import build_graph
    g = build_graph("foo.ll")          # or foo.bc
    g.node_counts(), g.edge_counts(), g.edge_index, g.statements(), g.loop_ids

``build_graph`` runs the native builder (``passes/graph``, built by the
top-level CMakeLists.txt) and, where none is built, the pure-Python builder
on llvmlite (:mod:`mirecc.graph.fallback`, same graph; its known
differences on typed-pointer IR are in its docstring).  See
:mod:`mirecc.graph.native` for where the native tool is looked for and
:mod:`mirecc.graph.format` for the file format.

Layer 5 of the house (``docs/layout.md``): may import ``mirecc.util``, ``ir`` and
``frontend``.
"""

from __future__ import annotations

import os
from typing import Optional

from . import schema
from .format import GraphFormatError, ProgramGraph, dump, dumps, load, loads
from .native import BuilderNotFound, GraphBuildError, build_graph_native, find_builder

__all__ = [
    "BuilderNotFound", "GraphBuildError", "GraphFormatError", "ProgramGraph", "build_graph",
    "build_graph_any",
    "dump", "dumps", "find_builder", "load", "loads", "schema",
]


def build_graph(path: str | os.PathLike, timeout: Optional[float] = None,
                builder: str = "auto", in_process: bool = False) -> ProgramGraph:
    """The program graph of the LLVM module at ``path`` (``.ll`` or ``.bc``).

    ``builder``: "native" (only mirecc-graph), "llvmlite" (only the fallback)
    or "auto" (native, else llvmlite when no native tool is built; a
    ``MIRECC_GRAPH_BUILDER`` that names no executable is an error, not a
    reason to fall back).  ``in_process``: the native builder's library in
    this process where it is built (:mod:`mirecc.graph.native`; for a
    long-lived process: LLVM failing kills it).

    Raises :class:`GraphBuildError` (message names the file and the problem)
    for a missing file, malformed IR, an empty module or non-UTF-8 text, and
    :class:`BuilderNotFound` when the requested builder is not available.
    """
    if builder not in ("auto", "native", "llvmlite"):
        raise ValueError(f"builder must be 'auto', 'native' or 'llvmlite', not {builder!r}")
    if builder == "llvmlite":
        from .fallback import build_graph_llvmlite  # lazy: llvmlite (~100 ms), fallback only
        return build_graph_llvmlite(path)
    if builder == "auto" and not os.environ.get("MIRECC_GRAPH_BUILDER"):
        try:
            find_builder()
        except BuilderNotFound:
            from .fallback import build_graph_llvmlite  # lazy: as above
            return build_graph_llvmlite(path)
    return build_graph_native(path, timeout=timeout, in_process=in_process)


def build_graph_any(path: str | os.PathLike, in_process: bool = False) -> ProgramGraph:
    """:func:`build_graph`, and where no native builder's LLVM can parse the
    IR (a newer clang's, e.g. clang-22), the llvmlite builder (LLVM 22)."""
    try:
        return build_graph(path, in_process=in_process)
    except GraphBuildError as exc:
        if "invalid LLVM IR" not in str(exc):
            raise
        return build_graph(path, builder="llvmlite")
