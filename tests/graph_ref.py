"""Test helpers: ProGraML's reference builder (llvm2graph-10 from the
``programl`` 0.3.2 wheel) and the IR rewriting its LLVM 10 parser needs.

Only the bundled binary is used (the ``programl`` Python package does not
import on Python 3.11); its JSON output (``--stdout_fmt=json``) is read with
``json``.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import subprocess
from typing import Dict, Optional, Tuple


def llvm2graph_path() -> Optional[str]:
    """The wheel's llvm2graph-10, or None when programl is not installed."""
    spec = importlib.util.find_spec("programl")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = os.path.join(loc, "bin", "llvm2graph-10")
        if os.access(path, os.X_OK):
            return path
    return None


def llvm2graph_problem() -> Optional[str]:
    """Why llvm2graph-10 cannot run here, or None."""
    path = llvm2graph_path()
    if path is None:
        return "programl 0.3.2 is not installed (pip install --no-deps programl==0.3.2)"
    proc = subprocess.run([path, "--help"], capture_output=True)
    if b"error while loading shared libraries" in proc.stderr:
        return ("llvm2graph-10 cannot load its shared libraries (apt-get install libtinfo5): "
                + proc.stderr.decode(errors="replace").strip())
    return None


# Attributes and syntax newer than LLVM 10, as clang-14 writes them.
_DROP_WORDS = re.compile(
    r"\b(?:noundef|mustprogress|nocallback|noprofile|hot|null_pointer_is_valid|"
    r"disable_sanitizer_instrumentation|inrange)\b ?")
_TYPED_ATTR = re.compile(r"\b(sret|byval|byref|preallocated|inalloca)\((?:[^()]|\([^()]*\))*\)")
_ELEMENTTYPE = re.compile(r"\belementtype\((?:[^()]|\([^()]*\))*\) ?")
_VSCALE = re.compile(r"\bvscale_range\([^)]*\) ?")
_POISON = re.compile(r"\bpoison\b")


def rewrite_for_llvm10(ir: str) -> str:
    """Make clang-14 textual IR acceptable to LLVM 10's parser.

    The rewrites drop attributes LLVM 10 does not know (``noundef``,
    ``mustprogress``, ``elementtype(..)``, ``inrange``, ...), untype
    ``sret(T)``/``byval(T)``, turn ``poison`` into ``undef`` and drop the
    module flags (clang-14 uses flag behaviours LLVM 10 rejects). None of
    them changes instructions, operands or control flow.
    """
    out = []
    for line in ir.splitlines():
        if line.startswith("!llvm.module.flags"):
            continue
        line = _DROP_WORDS.sub("", line)
        line = _ELEMENTTYPE.sub("", line)
        line = _VSCALE.sub("", line)
        line = _TYPED_ATTR.sub(lambda m: m.group(1), line)
        line = _POISON.sub("undef", line)
        out.append(line)
    return "\n".join(out) + "\n"


def llvm2graph(ir_text: str, timeout: float = 600) -> dict:
    """Run llvm2graph-10 on (already rewritten) IR text; its graph as a dict."""
    proc = subprocess.run([llvm2graph_path(), "--stdout_fmt=json"], input=ir_text.encode(),
                          capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError("llvm2graph-10 failed: " + proc.stderr.decode(errors="replace")[-2000:])
    return json.loads(proc.stdout)


_NODE_TYPES = {"INSTRUCTION": "instruction", "VARIABLE": "variable", "CONSTANT": "constant"}
_FLOWS = {"CONTROL": "control", "DATA": "data", "CALL": "call"}


def reference_counts(graph: dict) -> Tuple[Dict[str, int], Dict[str, int], Dict[Tuple[str, int], int]]:
    """Node counts by type, edge counts by flow and by (flow, position).

    Proto JSON leaves out fields at their default (type INSTRUCTION, flow
    CONTROL, position 0).
    """
    nodes = collections.Counter(_NODE_TYPES[n.get("type", "INSTRUCTION")] for n in graph["node"])
    edges = collections.Counter(_FLOWS[e.get("flow", "CONTROL")] for e in graph.get("edge", []))
    positions = collections.Counter((_FLOWS[e.get("flow", "CONTROL")], int(e.get("position", 0)))
                                    for e in graph.get("edge", []))
    return dict(nodes), dict(edges), dict(positions)


def native_counts(g) -> Tuple[Dict[str, int], Dict[str, int], Dict[Tuple[str, int], int]]:
    """The same counts for a :class:`mirecc.graph.ProgramGraph`."""
    from mirecc.graph import schema
    nodes = {k: v for k, v in g.node_counts().items() if v}
    edges = {k: v for k, v in g.edge_counts().items() if v}
    positions = collections.Counter(
        (schema.EDGE_FLOWS[f], p) for f, p in zip(g.edge_flow.tolist(), g.edge_position.tolist()))
    return nodes, edges, dict(positions)


def reference_node_texts(graph: dict) -> collections.Counter:
    """Multiset of (type, text) of the reference graph's nodes."""
    return collections.Counter((_NODE_TYPES[n.get("type", "INSTRUCTION")], n.get("text", ""))
                               for n in graph["node"])
