"""What the loop-nest head reads of a function: loop-nest statistics from the
TU's IR text as the front end writes it (``-Xclang -disable-llvm-passes``:
every variable in a stack slot, loops in clang's shape), clang 14's typed
pointers or clang 15+'s ``ptr``.

Per function, one pass:

* the control-flow graph and its natural loops (:func:`mirecc.graph.irinfo.natural_loops`),
  each loop's **induction slot** (the stack slot its latch increments);
* the stack slots every value derives from (through loads of slots and
  arithmetic), so each array access of an innermost loop is classed by its
  last (fastest-varying) index: **unit** stride (the innermost loop's
  variable indexes the last dimension), **strided** (it indexes an outer
  dimension only: a column walk, what loop interchange or Polly fixes) or
  **invariant** (not indexed by it: a reduction into one element, as in a
  matrix product's ``C[i][j] +=``);
* loops whose bound depends on an enclosing loop's variable (triangular),
  outer loops whose variable indexes no array (time loops of stencils),
  perfect nests (no array access outside the innermost loops),
  floating-point work, divisions and square roots, calls Polly cannot model,
  the longest array row (PolyBench's sizes are in the array types).

:func:`function_features` gives the numbers of :data:`FEATURES` for each
function with a nest of depth 2 or more; :func:`dominant` picks the
function whose nest does the most work; :func:`apply_set` names the
functions Polly must run on for a function's nest to be transformed (a
static function is inlined into its callers before Polly runs).
Standard library only: the driver computes them per compile.
"""
from __future__ import annotations

import math
import re

from mirecc.graph.irinfo import natural_loops

#: the statistics of one function, in the order the head's rows hold them
FEATURES = (
    "loops", "max_depth", "nests", "inner_loops", "inner_depth_mean",
    "acc_per_inner", "unit_share", "strided_share", "invariant_share",
    "strided_store_share", "reduction_share", "flops_per_inner", "divs", "calls_in_loops",
    "triangular_share", "time_loop", "perfect_share", "log2_row",
)

_DEFINE = re.compile(r'^define ([^@]*)@("(?:[^"\\]|\\.)*"|[-\w$.]+)\(')
_LABEL = re.compile(r'^([-\w$.]+|"[^"]*"):')
_ASSIGN = re.compile(r"^(%[-\w$.]+) = (.*)$")
_NAME = re.compile(r"%[-\w$.]+")
_SUCC = re.compile(r"label (%[-\w$.]+)")
_STORE = re.compile(r"^store (?:volatile )?\S+ (%[-\w$.]+|[^,]+), (?:ptr|[^,]*\*) (%[-\w$.]+)")
_LOAD = re.compile(r"^load (?:volatile )?[^,]+, (?:ptr|[^,]*\*) (%[-\w$.]+)")
_GEP = re.compile(r"^getelementptr (?:inbounds )?(.+?), (?:ptr|[^,]*\*) (%[-\w$.]+)(.*)$")
_INDEX = re.compile(r"i\d+ (%[-\w$.]+|-?\d+)")
_ROW = re.compile(r"\[(\d+) x (?:double|float|half|i\d+)\]")
_CALL = re.compile(r"call [^@]*@([-\w$.]+)\(")
_FLOP = re.compile(r"^(fadd|fsub|fmul|fdiv|frem|fneg) ")
_DIV_CALLS = ("sqrt", "llvm.sqrt", "pow", "llvm.pow", "exp", "llvm.exp", "log", "llvm.log")


class Function:
    """One defined function of the IR text: blocks, successors, definitions."""

    def __init__(self, name: str, internal: bool):
        self.name = name
        self.internal = internal
        self.blocks: list[str] = []
        self.lines: list[list[str]] = []
        self.defs: dict[str, str] = {}
        self.calls: set[str] = set()

    def succ(self) -> list[list[int]]:
        index = {"%" + b: i for i, b in enumerate(self.blocks)}
        out = []
        for lines in self.lines:
            targets = []
            for line in lines:
                targets += [index[t] for t in _SUCC.findall(line) if t in index]
            out.append(targets)
        return out


def parse_functions(text: str) -> dict[str, Function]:
    """Every defined function of an IR text, by name."""
    funcs: dict[str, Function] = {}
    fn = None
    for raw in text.splitlines():
        if fn is None:
            m = _DEFINE.match(raw)
            if m:
                fn = Function(m[2].strip('"'), "internal" in m[1] or "private" in m[1])
                fn.blocks.append("entry")
                fn.lines.append([])
            continue
        if raw.startswith("}"):
            funcs[fn.name] = fn
            fn = None
            continue
        m = _LABEL.match(raw)
        if m:
            if fn.lines[-1] or len(fn.blocks) > 1:
                fn.blocks.append(m[1].strip('"'))
                fn.lines.append([])
            else:   # the entry block named by a label
                fn.blocks[0] = m[1].strip('"')
            continue
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        fn.lines[-1].append(line)
        a = _ASSIGN.match(line)
        if a:
            fn.defs[a[1]] = a[2]
        for callee in _CALL.findall(line):
            fn.calls.add(callee)
    return funcs


class _Slots:
    """The stack slots each value of a function derives from."""

    def __init__(self, fn: Function):
        self.defs = fn.defs
        self.allocas = {v for v, d in fn.defs.items() if d.startswith("alloca ")}
        self.memo: dict[str, frozenset] = {}

    def of(self, value: str) -> frozenset:
        if not value.startswith("%"):
            return frozenset()
        if value in self.memo:
            return self.memo[value]
        self.memo[value] = frozenset()      # cycles (phis) end here
        d = self.defs.get(value)
        out: set = set()
        if d is not None:
            m = _LOAD.match(d)
            if m and m[1] in self.allocas:
                out.add(m[1])
            elif not d.startswith("alloca "):
                for name in _NAME.findall(d.split(", !", 1)[0]):
                    if name != value:
                        out |= self.of(name)
        self.memo[value] = frozenset(out)
        return self.memo[value]


def _access(fn: Function, slots: _Slots, pointer: str):
    """(last index's slots, other indices' slots, row length) of an array
    access, or None for a scalar's stack slot or no array at all."""
    if pointer in slots.allocas:
        return None
    last, other, row, seen = None, set(), 0, 0
    p = pointer
    while p in fn.defs and seen < 16:
        seen += 1
        d = fn.defs[p]
        m = _GEP.match(d)
        if m:
            indices = _INDEX.findall(m[3].split(", !", 1)[0])
            for n, idx in enumerate(reversed(indices)):
                s = slots.of(idx)
                if last is None and n == 0:
                    last = s
                else:
                    other |= s
            rows = _ROW.findall(m[1])
            if rows:
                row = max(row, int(rows[-1]))
            p = m[2]
            continue
        if d.startswith(("bitcast ", "addrspacecast ")):
            names = _NAME.findall(d)
            if not names:
                break
            p = names[0]
            continue
        break
    if last is None:
        return None
    return last, frozenset(other), row


def _op(line: str) -> str:
    """An instruction line without its ``%x = ``."""
    return line.split(" = ", 1)[1] if line.startswith("%") and " = " in line else line


def _line_access(fn: Function, slots: _Slots, line: str):
    """(access as :func:`_access` gives it or None, is a store) of one line."""
    d = _op(line)
    m = _LOAD.match(d)
    if m:
        return _access(fn, slots, m[1]), False
    m = _STORE.match(d)
    if m:
        return _access(fn, slots, m[2]), True
    return None, False


def _induction_slot(fn: Function, slots: _Slots, header: int, body, succ) -> str | None:
    for b in body:
        if header not in succ[b]:
            continue
        for line in fn.lines[b]:
            m = _STORE.match(line)
            if not m or m[2] not in slots.allocas:
                continue
            d = fn.defs.get(m[1], "")
            if d.startswith(("add ", "sub ")) and m[2] in slots.of(m[1]):
                return m[2]
    return None


def function_features(text: str, funcs: dict[str, Function] | None = None) -> dict[str, dict]:
    """Function name -> :data:`FEATURES` (and ``_work``, the dominance key),
    for each function with a loop nest of depth 2 or more."""
    funcs = parse_functions(text) if funcs is None else funcs
    out = {}
    for fn in funcs.values():
        succ = fn.succ()
        loops = natural_loops(succ)
        if not loops or max(d for _, _, d in loops) < 2:
            continue
        out[fn.name] = _features(fn, succ, loops)
    return out


def _features(fn: Function, succ, loops) -> dict:
    slots = _Slots(fn)
    ind = {h: _induction_slot(fn, slots, h, body, succ) for h, body, _ in loops}
    innermost = [(h, body, d) for h, body, d in loops
                 if not any(h2 != h and h2 in body for h2, _, _ in loops)]
    inner = [t for t in innermost if t[2] >= 2]
    in_loop = set().union(*(body for _, body, _ in loops))
    # each loop block's array accesses, read once: (access, is a store)
    accesses_of = {b: [a for a in (_line_access(fn, slots, x) for x in fn.lines[b])
                       if a[0] is not None] for b in in_loop}
    counts = {"unit": 0, "strided": 0, "invariant": 0}
    strided_stores = stores = reductions = flops = 0
    row = 0
    inner_blocks = set()
    for h, body, _ in inner:
        inner_blocks |= body
        s = ind[h]
        has_reduction = False
        for b in body:
            for line in fn.lines[b]:
                d = _op(line)
                if _FLOP.match(d) or "@llvm.fmuladd" in d or "@llvm.fma." in d:
                    flops += 1
            for (last, other, r), is_store in accesses_of[b]:
                row = max(row, r)
                kind = ("unit" if s in last else "strided" if s in other else "invariant") \
                    if s else "invariant"
                counts[kind] += 1
                if is_store:
                    stores += 1
                    strided_stores += kind == "strided"
                    has_reduction |= kind == "invariant"
        reductions += has_reduction
    accesses = sum(counts.values())
    # loops whose exit compare reads an enclosing loop's variable
    triangular = 0
    for h, body, _ in loops:
        enclosing = {ind[h2] for h2, body2, _ in loops if h2 != h and h in body2} - {None}
        cmp = [line for line in fn.lines[h] if " = icmp " in line]
        if cmp and enclosing and any(slots.of(v) & enclosing
                                     for v in _NAME.findall(cmp[-1].split(" = ", 1)[1])):
            triangular += 1
    # outer loops around a nest whose variable indexes no array in them
    time_loop = 0
    for h, body, d in loops:
        if d != 1 or not any(h2 != h and h2 in body for h2, _, _ in loops) or ind[h] is None:
            continue
        used = any(ind[h] in (acc[0] | acc[1]) for b in body for acc, _ in accesses_of[b])
        time_loop |= not used
    # nests with no array access outside their innermost loops
    tops = [(h, body) for h, body, d in loops if d == 1
            and any(h2 != h and h2 in body for h2, _, _ in loops)]
    perfect = 0
    for h, body in tops:
        outside = [b for b in body if b not in inner_blocks]
        perfect += not any(accesses_of[b] for b in outside)
    divs = calls = 0
    for b in in_loop:
        for line in fn.lines[b]:
            if _op(line).startswith("fdiv "):
                divs += 1
            for callee in _CALL.findall(line):
                if callee.startswith(_DIV_CALLS):
                    divs += 1
                elif not callee.startswith("llvm."):
                    calls += 1
    n_inner = max(len(inner), 1)
    feats = {
        "loops": len(loops),
        "max_depth": max(d for _, _, d in loops),
        "nests": len(tops),
        "inner_loops": len(inner),
        "inner_depth_mean": sum(d for _, _, d in inner) / n_inner,
        "acc_per_inner": accesses / n_inner,
        "unit_share": counts["unit"] / max(accesses, 1),
        "strided_share": counts["strided"] / max(accesses, 1),
        "invariant_share": counts["invariant"] / max(accesses, 1),
        "strided_store_share": strided_stores / max(stores, 1),
        "reduction_share": reductions / n_inner,
        "flops_per_inner": flops / n_inner,
        "divs": divs,
        "calls_in_loops": calls,
        "triangular_share": triangular / len(loops),
        "time_loop": float(time_loop),
        "perfect_share": perfect / max(len(tops), 1),
        "log2_row": math.log2(row) if row else 0.0,
    }
    feats["_work"] = (feats["max_depth"], accesses, flops)
    return feats


def dominant(feats: dict[str, dict]) -> str | None:
    """The function whose nests do the most: deepest, then the most array
    accesses and floating-point operations in its innermost loops."""
    return max(feats, key=lambda f: (feats[f]["_work"], f)) if feats else None


def apply_set(funcs: dict[str, Function], name: str) -> list[str]:
    """``name`` and, while a function is internal (it may be inlined), the
    functions that call it: Polly runs after the inliner, so a static
    kernel's nest is transformed only where it ends up."""
    callers: dict[str, set] = {}
    for fn in funcs.values():
        for callee in fn.calls:
            callers.setdefault(callee, set()).add(fn.name)
    out, todo = [], [name]
    while todo:
        f = todo.pop()
        if f in out:
            continue
        out.append(f)
        if f in funcs and funcs[f].internal:
            todo += sorted(callers.get(f, ()))
    return out


_LOOP_MD = re.compile(r"!llvm\.loop (!\d+)")
_MD = re.compile(r"^(!\d+) = (?:distinct )?!\{(.*)\}\s*$", re.MULTILINE)
_MD_REF = re.compile(r"!\d+")
_MD_STRING = re.compile(r'!"(llvm\.loop\.[\w.]+)"')


def pragma_functions(text: str, funcs: dict[str, Function]) -> set[str]:
    """Functions with a loop the source gave hints (``#pragma clang loop``,
    ``#pragma unroll``: ``llvm.loop`` metadata beyond ``mustprogress``):
    the user's schedule, left alone."""
    nodes = {m[1]: m[2] for m in _MD.finditer(text)}
    out = set()
    for fn in funcs.values():
        for lines in fn.lines:
            for line in lines:
                m = _LOOP_MD.search(line)
                if not m:
                    continue
                body = nodes.get(m[1], "")
                hints = _MD_STRING.findall(body) + [
                    s for ref in _MD_REF.findall(body) if ref != m[1]
                    for s in _MD_STRING.findall(nodes.get(ref, ""))]
                if any(h != "llvm.loop.mustprogress" for h in hints):
                    out.add(fn.name)
    return out


def row(feats: dict) -> list[float]:
    """The head's numbers of one function, in :data:`FEATURES` order."""
    return [float(feats[f]) for f in FEATURES]
