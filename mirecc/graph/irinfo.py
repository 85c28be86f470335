"""What a translation unit contains: functions, loops, instruction counts.

Read from the TU's program graph (:mod:`mirecc.graph`, built once per TU by
:class:`mirecc.taskapi.context.TUContext`): this is what ``--explain`` reports as
"seen", and the loop table the heads share.  Loop ids are the graph
builder's ``<function>:<header block index>`` everywhere.

Also here: natural loops of a control-flow graph (back edges to a dominating
header, the same definition LLVM's LoopInfo uses), for the llvmlite graph
builder, which has no loop analysis to ask.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from mirecc.graph import schema


@dataclass(frozen=True)
class Loop:
    """A loop of the loop table the heads share."""

    id: str            # "<function>:<header block index>"
    function: str
    header: int
    depth: int
    innermost: bool


@dataclass(frozen=True)
class LoopInfo:
    id: str            # "<function>:<header block index>", stable for a given IR
    header_block: int  # index of the header in the function's block list
    depth: int         # 1 = outermost
    blocks: int        # blocks in the loop body, nested loops included
    line: int | None   # source line of the header, when the IR has debug info


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    blocks: int
    instructions: int
    loops: tuple[LoopInfo, ...]


@dataclass(frozen=True)
class ModuleInfo:
    source_filename: str
    triple: str
    functions: tuple[FunctionInfo, ...]   # defined functions only
    declarations: int

    @property
    def instructions(self) -> int:
        return sum(f.instructions for f in self.functions)

    @property
    def loops(self) -> int:
        return sum(len(f.loops) for f in self.functions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["instructions"] = self.instructions
        d["loops"] = self.loops
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ModuleInfo":
        functions = tuple(
            FunctionInfo(f["name"], f["blocks"], f["instructions"],
                         tuple(LoopInfo(**lp) for lp in f["loops"]))
            for f in d["functions"])
        return cls(d["source_filename"], d["triple"], functions, d["declarations"])


def immediate_dominators(succ: list[list[int]]) -> list[int]:
    """Immediate dominators (Cooper, Harvey & Kennedy 2001); -1 if unreachable."""
    n = len(succ)
    order: list[int] = []  # post-order from the entry block
    seen = [False] * n
    stack = [(0, iter(succ[0]))] if n else []
    seen[0:1] = [True] if n else []
    while stack:
        node, it = stack[-1]
        for nxt in it:
            if not seen[nxt]:
                seen[nxt] = True
                stack.append((nxt, iter(succ[nxt])))
                break
        else:
            order.append(node)
            stack.pop()
    po_number = {b: i for i, b in enumerate(order)}
    preds: list[list[int]] = [[] for _ in range(n)]
    for b, targets in enumerate(succ):
        if seen[b]:
            for t in targets:
                preds[t].append(b)
    idom = [-1] * n
    if n:
        idom[0] = 0
    changed = True
    while changed:
        changed = False
        for b in reversed(order):
            if b == 0:
                continue
            new = -1
            for p in preds[b]:
                if idom[p] == -1:
                    continue
                if new == -1:
                    new = p
                    continue
                a, c = p, new  # intersect
                while a != c:
                    while po_number[a] < po_number[c]:
                        a = idom[a]
                    while po_number[c] < po_number[a]:
                        c = idom[c]
                new = a
            if new != -1 and idom[b] != new:
                idom[b] = new
                changed = True
    return idom


def _dominates(idom: list[int], a: int, b: int) -> bool:
    while True:
        if a == b:
            return True
        if b == 0 or idom[b] == -1:
            return False
        b = idom[b]


def loop_bodies(succ: list[list[int]]) -> dict[int, set[int]]:
    """Natural loops as LLVM's LoopInfo finds them: header -> body, back edges
    to one header merged, only blocks reachable from the entry."""
    idom = immediate_dominators(succ)
    preds: list[list[int]] = [[] for _ in succ]
    for b, targets in enumerate(succ):
        if idom[b] != -1:  # an unreachable block is in no loop
            for t in targets:
                preds[t].append(b)
    bodies: dict[int, set[int]] = {}
    for tail, targets in enumerate(succ):
        if idom[tail] == -1:
            continue
        for header in targets:
            if _dominates(idom, header, tail):
                body = bodies.setdefault(header, {header})
                work = [tail]
                while work:
                    b = work.pop()
                    if b not in body:
                        body.add(b)
                        work.extend(preds[b])
    return bodies


def natural_loops(succ: list[list[int]]) -> list[tuple[int, frozenset[int], int]]:
    """(header, body, depth) for each natural loop, by header."""
    loops = [(h, frozenset(body)) for h, body in sorted(loop_bodies(succ).items())]
    result = []
    for h, body in loops:
        depth = 1 + sum(1 for h2, body2 in loops if h2 != h and h in body2)
        result.append((h, body, depth))
    return result


_DBG_REF = re.compile(r"!dbg !(\d+)")
_DILOCATION = re.compile(r"^!(\d+) = !DILocation\(line: (\d+)", re.MULTILINE)


_DEFINE = re.compile(r'^define [^@]*@("(?:[^"\\]|\\.)*"|[-\w$.]+)\(', re.MULTILINE)
_LABEL = re.compile(r"^([-\w$.]+|\"[^\"]*\"):")


def _block_lines(text: str) -> dict[str, list[int | None]]:
    """Per defined function, the source line of each block's first located
    instruction (None where a block has none), read from the printed module.
    Metadata numbers are only consistent within one print of the module."""
    locations = {m.group(1): int(m.group(2)) for m in _DILOCATION.finditer(text)}
    if not locations:
        return {}
    result: dict[str, list[int | None]] = {}
    for match in _DEFINE.finditer(text):
        name = match.group(1).strip('"')
        body_end = text.find("\n}\n", match.end())
        body = text[match.end():body_end if body_end != -1 else len(text)]
        lines: list[int | None] = [None]
        for raw in body.split("\n")[1:]:
            if _LABEL.match(raw):
                lines.append(None)
                continue
            if lines[-1] is None:
                ref = _DBG_REF.search(raw)
                if ref:
                    lines[-1] = locations.get(ref.group(1))
        result[name] = lines
    return result


def graph_loops(g) -> list[Loop]:
    """The loops of program graph ``g``, in graph-builder order."""
    names = g.function_names
    parent = g.arrays["loop_parent"].tolist()
    has_child = set(p for p in parent if p >= 0)
    out = []
    for i, (f, h, d) in enumerate(zip(g.arrays["loop_function"].tolist(),
                                      g.arrays["loop_header"].tolist(),
                                      g.arrays["loop_depth"].tolist())):
        out.append(Loop(f"{names[f]}:{h}", names[f], h, d, i not in has_child))
    return out


def has_debug_info(flags) -> bool:
    """Do the flags ask for debug info (line tables in the IR)?  The last -g
    flag wins, as in clang."""
    on = False
    for flag in flags:
        if flag in ("-g0", "-ggdb0"):
            on = False
        elif flag in ("-g", "-g1", "-g2", "-g3", "-gline-tables-only", "-gfull", "-gused") \
                or flag.startswith(("-ggdb", "-gdwarf", "-glldb", "-gsce")):
            on = True
    return on


def summary_from_graph(g, request=None) -> ModuleInfo:
    """The functions (defined ones, in module order) and loops of graph ``g``.
    With debug info in the IR (``-g``), each loop's source line is read from
    the bitcode's text (one more read, for ``--explain`` only)."""
    arrays = g.arrays
    is_inst = np.asarray(g.node_type) == schema.INSTRUCTION
    func = np.asarray(g.node_function)
    block = np.asarray(g.node_block)
    node_loop = np.asarray(g.node_loop)
    declared = arrays["function_is_declaration"].astype(bool)
    F = len(g.function_names)
    counts = np.bincount(func[is_inst & (func >= 0)], minlength=F)
    # blocks of a function / of a loop: distinct block counters of their instructions
    fn_blocks = [set() for _ in range(F)]
    for f, b in zip(func[is_inst].tolist(), block[is_inst].tolist()):
        if f >= 0:
            fn_blocks[f].add(b)
    L = g.num_loops
    loop_blocks = [set() for _ in range(L)]
    for lp, b in zip(node_loop[is_inst].tolist(), block[is_inst].tolist()):
        if lp >= 0:
            loop_blocks[lp].add(b)
    parent = arrays["loop_parent"].tolist()
    for j in sorted(range(L), key=lambda j: -int(arrays["loop_depth"][j])):
        if parent[j] >= 0:
            loop_blocks[parent[j]] |= loop_blocks[j]
    lines = {}
    if request is not None and has_debug_info(request.flags):
        lines = _lines_from_bitcode(request.bitcode_path)
    loops_of: dict[int, list[LoopInfo]] = {}
    for j, lp in enumerate(graph_loops(g)):
        f = int(arrays["loop_function"][j])
        fn_lines = lines.get(lp.function)
        line = fn_lines[lp.header] if fn_lines and lp.header < len(fn_lines) else None
        loops_of.setdefault(f, []).append(
            LoopInfo(lp.id, lp.header, lp.depth, len(loop_blocks[j]), line))
    functions = tuple(
        FunctionInfo(name, len(fn_blocks[f]), int(counts[f]), tuple(loops_of.get(f, ())))
        for f, name in enumerate(g.function_names) if not declared[f])
    return ModuleInfo(source_filename=getattr(request, "source", "") or "", triple="",
                      functions=functions, declarations=int(declared.sum()))


def _lines_from_bitcode(path: str) -> dict[str, list[int | None]]:
    """Per function, the source line of each block (see :func:`_block_lines`)."""
    try:
        import llvmlite.binding as llvm  # lazy: llvmlite (~100 ms), --explain with -g only

        with open(path, "rb") as fh:
            return _block_lines(str(llvm.parse_bitcode(fh.read())))
    except Exception:  # noqa: BLE001 - lines are a nicety of --explain
        return {}
