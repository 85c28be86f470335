"""Static statistics of one loop, read from the graph builder's statements.

The loop-vectorize head takes these next to the encoder's loop and
function embeddings: what the vectorizer's profitability turns on (element
widths, gathers, strides, arithmetic per access, trip-count bounds) is
spelled out in the loop's instructions, and a few hundred kernels are too
few for a head to learn all of it from embeddings alone.

The IR is the front end's, before any LLVM pass (``-disable-llvm-passes``,
as the encoder sees it): variables live in allocas, so an induction
variable is a ``load`` of an alloca and an array element is a ``load``
through a ``getelementptr``.  The parser accepts typed (clang <= 14) and
opaque (``ptr``, clang >= 15) pointers and GEP flags such as ``nuw``.

Only the standard library and numpy are imported (the driver runs this).
"""
from __future__ import annotations

import math
import re

#: opcodes counted, as a share of the loop's instructions
OPCODES = ("load", "store", "getelementptr", "fadd", "fsub", "fmul", "fdiv", "fneg",
           "add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr", "ashr",
           "and", "or", "xor", "icmp", "fcmp", "select", "br", "switch", "call", "phi",
           "sext", "zext", "trunc", "sitofp", "uitofp", "fptosi", "fptoui", "fpext",
           "fptrunc")
#: element types of loads and stores, counted
ELEMENT_TYPES = ("i8", "i16", "i32", "i64", "float", "double")
NAMES = ([f"share_{op}" for op in OPCODES] + [f"loads_{t}" for t in ELEMENT_TYPES]
         + [f"stores_{t}" for t in ELEMENT_TYPES]
         + ["blocks", "log_instructions", "depth", "indirect_accesses", "scaled_accesses",
            "constant_bound", "log_constant_bound"])

_OPCODE = re.compile(r"^(?:%\S+ = )?(?:tail |musttail |notail )?(\w+)")
_DEFINES = re.compile(r"^(%\S+) = (\w+)")
_LOAD_TYPE = re.compile(r"^%\S+ = load (?:volatile )?(\w+),")
_STORE_TYPE = re.compile(r"^store (?:volatile )?(\w+) ")
_INTEGER = re.compile(r"-?\d+")
# how far an index is followed back through casts and adds to find its origin
_INDEX_DEPTH = 4


def _gep_index(statement: str) -> str | None:
    """The last index operand of a ``getelementptr`` statement."""
    operands = statement.split(" = getelementptr ", 1)[1].split(",")
    last = operands[-1].split()
    return last[-1] if len(operands) > 2 and last else None


def _operands(statement: str) -> list[str]:
    """The ``%value`` operands after the opcode (types and constants dropped)."""
    rhs = statement.split(" = ", 1)[-1]
    return [tok.rstrip(",") for tok in rhs.split()[1:] if tok.startswith("%")]


def _index_origin(value: str, defs: dict[str, tuple[str, str]]) -> str:
    """'indirect' (the index is loaded from an array element), 'scaled' (it is
    a product or a shift: a stride) or '' (anything else, e.g. the induction
    variable), looking back through casts and additions."""
    for _ in range(_INDEX_DEPTH):
        op, statement = defs.get(value, ("", ""))
        if op == "load":
            address = _operands(statement)[-1:] or [""]
            return "indirect" if defs.get(address[0], ("",))[0] == "getelementptr" else ""
        if op in ("mul", "shl"):
            return "scaled"
        if op not in ("sext", "zext", "trunc", "add", "sub", "or"):
            return ""
        operands = _operands(statement)
        # an addition's scaled operand decides (a[2*i + 1] is strided)
        for operand in operands[1:]:
            if defs.get(operand, ("",))[0] in ("mul", "shl"):
                return "scaled"
        if not operands:
            return ""
        value = operands[0]
    return ""


def _loop_members(graph, loop_index: int):
    """The instruction nodes whose innermost loop is ``loop_index``."""
    import numpy as np  # lazy: numpy; the head imports this module for NAMES at every load

    arrays = graph.arrays
    return np.flatnonzero((arrays["node_loop"] == loop_index) & (arrays["node_type"] == 0))


def loop_statistics(graph, loop_index: int, texts: list[str] | None = None) -> list[float]:
    """The :data:`NAMES` statistics of loop ``loop_index`` of ``graph``
    (a :class:`mirecc.graph.Graph`), over the instructions whose innermost
    loop it is.  ``texts``: ``graph.full_texts()``, when the caller has it."""
    texts = graph.full_texts() if texts is None else texts
    arrays = graph.arrays
    members = _loop_members(graph, loop_index)
    statements = [texts[i].strip() for i in members]
    defs = {}
    for s in statements:
        if (m := _DEFINES.match(s)):
            defs[m.group(1)] = (m.group(2), s)
    opcodes = dict.fromkeys(OPCODES, 0)
    loads = dict.fromkeys(ELEMENT_TYPES, 0)
    stores = dict.fromkeys(ELEMENT_TYPES, 0)
    indirect = scaled = 0
    bound = None
    for s in statements:
        m = _OPCODE.match(s)
        if m and m.group(1) in opcodes:
            opcodes[m.group(1)] += 1
        if (m := _LOAD_TYPE.match(s)) and m.group(1) in loads:
            loads[m.group(1)] += 1
        elif (m := _STORE_TYPE.match(s)) and m.group(1) in stores:
            stores[m.group(1)] += 1
        elif " = getelementptr " in s and (index := _gep_index(s)):
            origin = _index_origin(index, defs)
            indirect += origin == "indirect"
            scaled += origin == "scaled"
        elif " = icmp " in s:
            last = s.split(",")[-1].split()
            if last and _INTEGER.fullmatch(last[-1]):
                bound = max(bound or 0, abs(int(last[-1])))
    n = len(statements)
    blocks = len(set(arrays["node_block"][members].tolist()))
    return ([opcodes[op] / max(n, 1) for op in OPCODES]
            + [float(loads[t]) for t in ELEMENT_TYPES] + [float(stores[t]) for t in ELEMENT_TYPES]
            + [float(blocks), math.log1p(n), float(arrays["loop_depth"][loop_index]),
               float(indirect), float(scaled), float(bound is not None),
               math.log1p(bound or 0)])


_CALLEE = re.compile(r"\bcall [^@]*@(\"[^\"]+\"|[\w.$-]+)\(")


def callees_by_loop(graph, loop_ids=None) -> dict[str, set[str]]:
    """loop id -> the functions called by the instructions whose innermost
    loop it is (``llvm.`` intrinsics included), for the loops of ``graph``
    named in ``loop_ids`` (default: every loop)."""
    texts = graph.full_texts()
    return {loop_id: {m.group(1).strip('"') for j in _loop_members(graph, i)
                      for m in _CALLEE.finditer(texts[j])}
            for i, loop_id in enumerate(graph.loop_ids)
            if loop_ids is None or loop_id in loop_ids}


def statistics_by_loop(graph, loop_ids=None) -> dict[str, list[float]]:
    """loop id -> :func:`loop_statistics`, for the loops of ``graph`` named
    in ``loop_ids`` (default: every loop)."""
    texts = graph.full_texts()
    return {loop_id: loop_statistics(graph, i, texts) for i, loop_id in enumerate(graph.loop_ids)
            if loop_ids is None or loop_id in loop_ids}
