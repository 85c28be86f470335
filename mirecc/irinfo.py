"""What a translation unit contains: functions, loops, instruction counts.

Read from the TU's bitcode with llvmlite.  Loops are the natural loops of
each function's control-flow graph (back edges to a dominating header, the
same definition LLVM's LoopInfo uses), found here because llvmlite exposes no
loop analysis.  This is what ``--explain`` reports as "seen".
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass


class IRReadError(Exception):
    """The bitcode could not be parsed (the message names the file)."""


@dataclass(frozen=True)
class LoopInfo:
    id: str            # "<function>:bb<header index>", stable for a given IR
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


def summarize_bitcode(data: bytes, name: str = "<bitcode>") -> ModuleInfo:
    """Parse bitcode and list its defined functions and their loops."""
    import llvmlite.binding as llvm  # lazy: the pass-through path never loads LLVM

    try:
        module = llvm.parse_bitcode(data)
    except Exception as exc:  # llvmlite raises RuntimeError with LLVM's message
        raise IRReadError(f"{name}: not valid LLVM bitcode: {exc}") from None

    block_kind = llvm.ValueKind.basic_block
    module_text: str | None = None
    block_lines: dict[str, list[int | None]] = {}
    functions = []
    declarations = 0
    for fn in module.functions:
        if fn.is_declaration:
            declarations += 1
            continue
        blocks = list(fn.blocks)
        index = {b: i for i, b in enumerate(blocks)}
        succ: list[list[int]] = []
        count = 0
        for block in blocks:
            instructions = list(block.instructions)
            count += len(instructions)
            targets = []
            if instructions:
                for op in instructions[-1].operands:
                    if op.value_kind == block_kind and op in index:
                        targets.append(index[op])
            succ.append(targets)
        loops = []
        for header, body, depth in natural_loops(succ):
            line = None
            if module_text is None:  # printed once, and only for modules with loops
                module_text = str(module)
                block_lines = _block_lines(module_text)
            fn_lines = block_lines.get(fn.name)
            if fn_lines and header < len(fn_lines):
                line = fn_lines[header]
            loops.append(LoopInfo(f"{fn.name}:bb{header}", header, depth, len(body), line))
        functions.append(FunctionInfo(fn.name, len(blocks), count, tuple(loops)))

    return ModuleInfo(source_filename=module.source_file or "",
                      triple=module.triple or "",
                      functions=tuple(functions), declarations=declarations)
