"""What sets a launch's block shape in ordinary CUDA code, and whether changing it is safe.

Neither mirecc/launch.h nor PolyBench-ACC's ``DIM_THREAD_BLOCK`` defines: the
block's x and y of each ``k<<<grid, block>>>`` are traced back (through
``dim3 b(..)`` / ``dim3 b = ..`` / ``b.x = ..`` and integer variables
assigned once) to what writes them:

* a macro: ``-D``-settable (kind ``macro-D``) when it is defined under
  ``#ifndef NAME`` or chosen by an ``#ifdef SEL / #elif defined(SEL2) /
  #else`` chain whose first selector a ``-D`` can set (Rodinia's
  ``RD_WG_SIZE_0_0``), else rewritten in a copy (``macro-rewrite``), as
  PolyBench-ACC's defines are;
* a ``const`` / ``constexpr`` / once-assigned integer (``const``) or a
  literal in a ``dim3`` or the launch itself (``dim3``): rewritten in a copy;
* anything else (a parameter, ``argv``, a device query): not tunable.

A knob is offered only where every use moves with it (:func:`analyse`):
each grid that launches it follows it on its own axis (with a ceiling
division, or a plain one whose dividend the shape must divide or that the
program checks with ``%``); no other literal or macro of the same value
sizes the kernel's ``__shared__`` arrays, its thread-index arithmetic or
the grid; no warp-synchronous code (``__shfl*``, ``__syncwarp``,
``warpSize``, ``volatile`` shared reductions), no ``__launch_bounds__``
that does not name the knob, no ``#if`` / ``static_assert`` on it.  Each
candidate shape must then fit the device (:meth:`KnobBlock.refuses`:
1024 threads, 48 KiB of static ``__shared__`` memory with the extents
recomputed, the divisions).

Standard library only: the driver runs it per compile.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from mirecc.frontend.source import blank, matching, pieces

#: knob kinds -> how the report names them
KINDS = {"macro-D": "-D macro", "macro-rewrite": "rewritten macro", "const": "const",
         "dim3": "dim3 literal"}
MAX_THREADS = 1024
#: static __shared__ memory a block may declare without opting in (every GPU since sm_20)
MAX_SHARED = 48 * 1024
#: a knob takes powers of two only: ordinary CUDA code halves its block in
#: tree reductions (``for (s = BLOCK_SIZE / 2; s > 0; s >>= 1)``) and tiles
#: by it, which other sizes break silently (the head's 24x24 or 192x1,
#: measured on PolyBench-ACC's shapes, are left out for this reason).  A
#: 1-D knob takes the natural 1-D set 32..1024 (under a warp a block wastes
#: lanes); a knob that sets both axes (``dim3 b(BLOCK, BLOCK)``) keeps them
#: equal, 8, 16 or 32 per side (tiles under 8 leave little of a halo-based
#: tile, e.g. a stencil's, and 64x64 is over 1024 threads); two knobs take
#: any powers of two whose product is 32..1024.
SIDES_1D = (32, 64, 128, 256, 512, 1024)
SIDES_SQUARE = (8, 16, 32)
SIDES_2D = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
AXES = ("x", "y")

_WARP_SYNC = re.compile(r"\b(__shfl\w*|__syncwarp|warpSize|__ballot\w*|__any_sync|__all_sync|"
                        r"__activemask|__match_\w+_sync|__reduce_\w+_sync|tiled_partition|"
                        r"coalesced_threads)\b")
_VOLATILE_SHARED = re.compile(r"\bvolatile\b[^;]*\b__shared__\b|\b__shared__\b[^;]*\bvolatile\b")
_TYPE_BYTES = {"char": 1, "bool": 1, "short": 2, "half": 2, "__half": 2, "int": 4,
               "unsigned": 4, "float": 4, "long": 8, "double": 8, "size_t": 8,
               "int2": 8, "float2": 8, "uint2": 8, "int3": 12, "float3": 12,
               "int4": 16, "float4": 16, "uint4": 16, "double2": 16, "double4": 32,
               "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
               "uint32_t": 4, "int64_t": 8, "uint64_t": 8, "uchar": 1, "uint": 4}
_INT_TYPE = (r"(?:(?:static|const|constexpr|unsigned|signed|volatile)\s+)*"
             r"(?:int|long|short|size_t|unsigned|uint32_t|int32_t|uint64_t|int64_t|uint)")
_NUMBER = re.compile(r"\(?\s*(\d+)[uUlL]*\s*\)?")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_KERNEL = re.compile(r"\b__global__\b([^;{]*?)\b([A-Za-z_]\w*)\s*\(")
#: a definition with external linkage and an initialiser (``extern "C" const
#: uint MAX = 4 * B;``): name, initialiser
_EXPORTED = re.compile(r'\bextern\b(?:\s*"[^"\n]*")?[^;{}()=]*?\b([A-Za-z_]\w*)\s*'
                       r'(?:\[[^\]]*\]\s*)*=\s*([^;]*);')
_DEVICE_FN = re.compile(r"\b__device__\b[^;{=]*?\b([A-Za-z_]\w*)\s*\(")


class Refused(Exception):
    """Not tunable: ``code`` (a counter's name), ``str()`` the reason."""

    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code = code
        self.keys: list[str] = []    # the knobs found before the refusal


@dataclass
class Knob:
    """What writes one axis of a block."""
    key: str                # the macro or variable, or "<dim3>.x" / "<kernel> launch.x"
    kind: str               # one of KINDS
    value: int              # the source's value
    file: str               # where the value is written (absolute)
    line: int               # 0-based
    span: tuple[int, int]   # its columns in that line (what a rewrite replaces)
    written: str            # the text at span
    selector: str | None = None   # macro-D: the macro a -D sets

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line + 1}"

    def how(self) -> str:
        if self.kind == "macro-D":
            return f"-D{self.selector}=<n> sets {self.key} ({self.where})"
        what = {"macro-rewrite": "#define", "const": "its initialiser",
                "dim3": "the literal"}[self.kind]
        return f"{self.key} rewritten in a copy ({what} at {self.where})"


@dataclass
class SharedArray:
    function: str
    name: str
    size: int | None        # bytes per element (None: unknown type)
    extents: list[str]      # as written, with macros spelled out


@dataclass
class KnobBlock:
    """One kernel's knobs and what a candidate must satisfy."""
    knobs: list[Knob | None]                        # per axis (x, y); None: fixed
    env: dict[str, int] = field(default_factory=dict)   # other macros' and consts' values
    shared: list[SharedArray] = field(default_factory=list)
    divides: list[tuple[str, int]] = field(default_factory=list)  # (knob key, dividend)
    z: int = 1

    @property
    def kind(self) -> str:
        kinds = [k.kind for k in self.knobs if k]
        order = list(KINDS)
        return max(kinds, key=order.index)   # the strongest means of all axes

    def values(self, shape) -> dict[str, int]:
        return {k.key: int(v) for k, v in zip(self.knobs, shape) if k}

    def refuses(self, shape) -> str | None:
        """Why block ``shape`` (x, y) cannot be given, or None."""
        x, y = int(shape[0]), int(shape[1])
        keys = [k.key if k else None for k in self.knobs]
        if keys[0] and keys[0] == keys[1] and x != y:
            return f"{keys[0]} sets both the block's x and y: the shape must be square"
        sides = (SIDES_SQUARE if keys[0] == keys[1] else SIDES_2D if all(keys) else SIDES_1D)
        for axis, knob, v in zip(AXES, self.knobs, (x, y)):
            if knob and v not in sides:
                return f"{knob.key} takes {', '.join(map(str, sides))} (its {axis}: {v})"
        if x * y * self.z > MAX_THREADS:
            return f"{x * y * self.z} threads per block, over {MAX_THREADS}"
        if all(keys) and keys[0] != keys[1] and x * y * self.z < 32:
            return f"{x * y * self.z} threads per block, under a warp"
        values = self.values((x, y))
        for key, dividend in self.divides:
            if key in values and dividend % values[key]:
                return (f"the grid rounds down: {key} must divide {dividend} "
                        f"({values[key]} does not)")
        env = {**self.env, **values}
        per: dict[str, int] = {}
        for a in self.shared:
            n = a.size or 0
            for e in a.extents:
                v = evaluate(e, env)
                n = n * v if v is not None else 0
            per[a.function] = per.get(a.function, 0) + n
        for function, n in per.items():
            if n > MAX_SHARED:
                return (f"{function} would declare {n} bytes of __shared__ memory, over "
                        f"{MAX_SHARED}")
        return None

    def shapes(self) -> list[tuple[int, int]]:
        """Every shape :meth:`refuses` accepts, smallest first."""
        xs = [k for k in SIDES_2D] if self.knobs[0] else [None]
        ys = [k for k in SIDES_2D] if self.knobs[1] else [None]
        default = [k.value if k else None for k in self.knobs]
        out = []
        for x in xs:
            for y in ys:
                shape = (x or default[0] or 1, y or default[1] or 1)
                if self.knobs[0] is None and self.knobs[1] is None:
                    continue
                if not self.refuses(shape):
                    out.append(shape)
        return out


# ------------------------------------------------------------------ evaluation

def evaluate(expr: str, env: dict[str, int]) -> int | None:
    """The value of a C integer expression of literals and names in ``env``
    (their values), or None."""
    text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr)
    text = re.sub(r"\((?:unsigned\s+)?(?:int|long|size_t|unsigned)\)", "", text)
    for _ in range(4):
        changed = False
        for name in set(_IDENT.findall(text)):
            if name in env:
                text = re.sub(rf"\b{name}\b", f"({env[name]})", text)
                changed = True
        if not changed:
            break
    if _IDENT.search(text) or not text.strip():
        return None
    try:
        tree = ast.parse(text.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: int(a / b), ast.Mod: lambda: a % b,
                   ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b}
            if type(node.op) in ops and not (type(node.op) in (ast.FloorDiv, ast.Mod) and b == 0):
                return ops[type(node.op)]()
        raise ValueError("not an integer expression")
    try:
        return ev(tree)
    except (ValueError, RecursionError, OverflowError):
        return None


# ------------------------------------------------------------------ the source's text

@dataclass
class _Define:
    name: str
    value: str
    file: str
    line: int
    span: tuple[int, int]
    conditions: list[tuple[str, str, int]]   # enclosing (directive, argument, branch)


def _defines(path: str, code: str) -> tuple[list[_Define], list[tuple[str, str, int]]]:
    """Every ``#define NAME value`` with its enclosing conditions (the
    include guard left out), and every #if/#elif condition (file, text, line)."""
    lines = code.split("\n")
    directive = re.compile(r"[ \t]*#[ \t]*(\w+)[ \t]*(.*)")
    found = [(i, m[1], m[2].strip()) for i, ln in enumerate(lines) if (m := directive.match(ln))]
    guard = found[0][2] if (len(found) > 1 and found[0][1] == "ifndef" and found[1][1] == "define"
                            and found[1][2] == found[0][2]) else None
    out, conditions, stack = [], [], []
    for n, (i, word, rest) in enumerate(found):
        if word in ("if", "ifdef", "ifndef"):
            stack.append([word, rest, 0, n == 0 and guard is not None])
            if word == "if":
                conditions.append((path, rest, i))
        elif word in ("elif", "else") and stack:
            stack[-1][2] += 1
            stack[-1][0] = word
            if word == "elif":
                stack[-1][1] = rest
                conditions.append((path, rest, i))
        elif word == "endif" and stack:
            stack.pop()
        elif word == "define":
            dm = re.match(r"([A-Za-z_]\w*)(?!\()[ \t]*(.*)", rest)
            if dm and dm[1] != guard:
                value = dm[2].strip()
                ln = lines[i]
                col = ln.rfind(value) if value else len(ln)
                conds = [(f[0], f[1], f[2]) for f in stack if not f[3]]
                out.append(_Define(dm[1], value, path, i, (col, col + len(value)), conds))
    return out, conditions


def _split(text: str, start: int, close: str) -> list[tuple[str, int]]:
    """Comma-separated arguments from ``start`` to ``close`` at depth 0, each
    with its offset (leading blanks skipped)."""
    args, _ = pieces(text, start, close)
    out = []
    for a, off in args:
        stripped = a.lstrip()
        out.append((a.strip(), off + len(a) - len(stripped)))
    return [a for a in out if a[0]]


@dataclass
class _Expr:
    text: str
    file: str
    offset: int


class Source:
    """The code of a source's files (comments blanked), searched as one."""

    def __init__(self, texts: dict[str, str], folder: str, cmd_defines: dict[str, str]):
        # literals: no launch, definition or use is in one
        texts = {p: blank(t, comments=False) for p, t in texts.items()}
        self.texts = texts
        self.folder = folder
        self.cmd = cmd_defines
        self.defs: dict[str, list[_Define]] = {}
        self.conditions = []
        for path, code in texts.items():
            ds, cs = _defines(path, code)
            self.conditions += cs
            for d in ds:
                self.defs.setdefault(d.name, []).append(d)
        self.all = "\n".join(texts.values())
        self.functions = self._functions()
        self._assigned: dict[str, list] = {}

    def where(self, file: str, offset: int) -> tuple[int, int]:
        text = self.texts[file]
        line = text.count("\n", 0, offset)
        return line, offset - (text.rfind("\n", 0, offset) + 1)

    def _functions(self) -> dict[str, tuple[str, str, str]]:
        """Function name -> (qualifiers before it, its body, file) for
        __global__ and __device__ functions."""
        out = {}
        for path, code in self.texts.items():
            bare = re.sub(r"__launch_bounds__\s*\([^)]*\)", lambda m: " " * len(m[0]), code)
            for rx in (_KERNEL, _DEVICE_FN):
                for m in rx.finditer(bare):
                    name = m.group(m.lastindex)
                    close = matching(code, m.end() - 1, "(", ")")
                    if close < 0:
                        continue
                    rest = code[close:close + 400]
                    brace = re.match(r"\s*(?:const\s*)?\{", rest)
                    if not brace:
                        continue
                    start = close + brace.end() - 1
                    end = matching(code, start)
                    body = code[start:end if end > 0 else len(code)]
                    out.setdefault(name, (code[m.start():m.end()], body, path))
        return out

    # -- macros and variables
    def macro_value(self, name: str, seen=()) -> int | None:
        d = self.active_define(name)
        if d is None or name in seen:
            return None
        return evaluate(d.value, {}) if _NUMBER.fullmatch(d.value) else \
            self._expr_value(d.value, (*seen, name))

    def _expr_value(self, expr: str, seen) -> int | None:
        env = {}
        for n in set(_IDENT.findall(expr)):
            v = self.macro_value(n, seen) if n in self.defs else self.const_value(n)
            if v is not None:
                env[n] = v
        return evaluate(expr, env)

    def active_define(self, name: str) -> _Define | None:
        """The definition of ``name`` this compile sees (conditions of
        ``defined``-only tests evaluated with the command's -D), or None."""
        if name in self.cmd:
            return None
        for d in self.defs.get(name, []):
            if all(self._holds(c) for c in d.conditions):
                return d
        return None

    def _holds(self, cond: tuple[str, str, int]) -> bool:
        word, arg, branch = cond
        if word == "ifdef":
            return self.active_define_name(arg)
        if word == "ifndef":
            return not (arg in self.cmd or self.active_define_name(arg))
        if word == "else":
            return True       # reached only when the earlier branches' defines lost
        m = re.fullmatch(r"(!)?\s*defined\s*\(?\s*(\w+)\s*\)?", arg)
        if m:
            there = m[2] in self.cmd or self.active_define_name(m[2])
            return not there if m[1] else there
        return False

    def active_define_name(self, name: str) -> bool:
        return name in self.cmd or any(not d.conditions for d in self.defs.get(name, []))

    def assignments(self, name: str) -> list[tuple[str, str, int, bool]]:
        """(initialiser or assigned text, file, offset of the text, declared
        const) for each place ``name`` is set; ``++``/``+=`` count as set at
        run time ("?")."""
        if name not in self._assigned:
            self._assigned[name] = self._assignments(name)
        return self._assigned[name]

    def _assignments(self, name: str) -> list[tuple[str, str, int, bool]]:
        out = []
        decl = re.compile(rf"\b({_INT_TYPE})\s+(?:[\w\s,*=()+\-/]*?,\s*)?{name}\s*(=|\(|\{{)"
                          rf"(?!=)")
        for path, code in self.texts.items():
            for m in decl.finditer(code):
                close = {"=": ";", "(": ")", "{": "}"}[m[2]]
                if m[2] == "=":
                    end = code.find(";", m.end())
                    comma = _split(code, m.end(), ";")
                    text, off = comma[0] if comma else ("", m.end())
                else:
                    [(text, off), *_] = _split(code, m.end(), close) or [("", m.end())]
                    end = off
                if end < 0:
                    continue
                out.append((text, path, off, bool(re.search(r"\bconst(expr)?\b", m[1]))))
            for m in re.finditer(rf"(?<![\w.>]){name}\s*(=(?!=)|[-+*/%&|^]=|\+\+|--)|"
                                 rf"(\+\+|--)\s*{name}\b", code):
                before = code[max(0, m.start() - 60):m.start()]
                if re.search(rf"\b{_INT_TYPE}\s*$", before) or re.search(
                        rf"\b{_INT_TYPE}\s+[^;]*,\s*$", before):
                    continue      # the declaration itself
                if m[1] == "=":
                    [(text, off), *_] = _split(code, m.end(), ";") or [("", m.end())]
                    out.append((text, path, off, False))
                else:
                    out.append(("?", path, m.start(), False))
        return out

    def is_parameter(self, name: str) -> bool:
        return bool(re.search(rf"\(\s*[^();]*\b(?:int|long|unsigned|size_t|dim3)\b[\s&*]*"
                              rf"{name}\s*[,)]", self.all))

    def const_value(self, name: str) -> int | None:
        sets = self.assignments(name)
        if len(sets) == 1 and _NUMBER.fullmatch(sets[0][0]):
            return int(_NUMBER.fullmatch(sets[0][0])[1])
        return None


# ------------------------------------------------------------------ tracing a launch

@dataclass
class LaunchSite:
    kernel: str
    file: str
    grid: list[_Expr]
    block: list[_Expr]        # x, y, z ("1" where absent)
    block_var: str | None
    grid_text: str            # the grid as written
    block_text: str
    shared_bytes: str | None  # the third argument


def launch_sites(src: Source) -> list[LaunchSite]:
    out = []
    launch = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>;(){}]*>\s*)?<<<")
    for path, code in src.texts.items():
        if os.path.dirname(path) != src.folder:
            continue
        for m in launch.finditer(code):
            config = _split(code, m.end(), ">>>")
            if len(config) < 2:
                continue
            grid, _ = _axes(src, path, config[0])
            block, var = _axes(src, path, config[1])
            out.append(LaunchSite(m[1], path, grid, block, var, config[0][0], config[1][0],
                                  config[2][0] if len(config) > 2 else None))
    return out


def _dim3_decls(code: str) -> list[tuple[str, int, int, list[tuple[str, int]] | None]]:
    """Each ``dim3`` declarator of ``code``: (name, its offset, the offset
    after its statement, its arguments with offsets, or None when it has
    none); ``dim3 a(1), b(2);`` is two."""
    out = []
    for m in re.finditer(r"\bdim3\s+(?=[A-Za-z_])", code):
        parts = _split(code, m.end(), ";")
        end = code.find(";", m.end())
        for text, off in parts:
            d = re.match(r"([A-Za-z_]\w*)\s*(?:=\s*dim3\s*)?([({])?", text)
            if not d or (not d[2] and text != d[1]):
                continue
            if d[2]:
                args = _split(code, off + d.end(), ")" if d[2] == "(" else "}")
                out.append((d[1], off, end, args))
            else:
                out.append((d[1], off, end, None))
    return out


def _axes(src: Source, path: str, arg: tuple[str, int]) -> tuple[list[_Expr], str | None]:
    """A launch argument's x, y and z as written ("?" where set more than
    once), and the dim3 variable's name when it is one: its declaration
    last before the launch in the same file, else the only one elsewhere."""
    text, off = arg
    code = src.texts[path]
    inline = re.match(r"dim3\s*([({])", text)
    if inline:
        args = _split(code, off + inline.end(), ")" if inline[1] == "(" else "}")
        return _pad([_Expr(a, path, o) for a, o in args], path), None
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        return _pad([_Expr(text, path, off)], path), None
    here = [(path, d) for d in _dim3_decls(code) if d[0] == text and d[1] < off]
    there = [(p, d) for p, c in src.texts.items() if p != path
             for d in _dim3_decls(c) if d[0] == text]
    if not here and not there:
        return _pad([_Expr(text, path, off)], path), None      # an integer
    if not here and len(there) > 1:
        return [_Expr("?", path, off)] * 3, text
    p, (name, start, stop, args) = here[-1] if here else there[0]
    c = src.texts[p]
    until = off if p == path else len(c)
    fields = []
    for axis in ("x", "y", "z"):
        sets = [(mm[1].strip(), mm.start(1)) for mm in re.finditer(
            rf"(?<![\w.]){text}\s*\.\s*{axis}\s*(?:[-+*/]?=(?!=)|\+\+|--)\s*([^;]*);",
            c[:until]) if mm.start() > stop]
        if args is not None:
            given = ([_Expr(a, p, o) for a, o in args] + [None] * 3)[:3]["xyz".index(axis)]
            fields.append(_Expr("?", p, start) if sets else given or _Expr("1", p, start))
        elif len(sets) > 1 or (sets and not re.search(
                rf"\b{text}\s*\.\s*{axis}\s*=(?!=)", c[sets[0][1] - 40:sets[0][1]])):
            fields.append(_Expr("?", p, start))
        elif sets:
            fields.append(_Expr(sets[0][0], p, sets[0][1]))
        else:
            fields.append(_Expr("1", p, start))
    return fields, text


def _pad(exprs: list[_Expr], path: str) -> list[_Expr]:
    return (exprs + [_Expr("1", path, 0)] * 3)[:3]


def _strip(text: str) -> str:
    text = " ".join(text.split())
    while re.fullmatch(r"\((.*)\)", text) and matching(text, 0, "(", ")") == len(text):
        text = text[1:-1].strip()
    return re.sub(r"^\((?:unsigned\s+)?(?:int|unsigned|size_t|long)\)\s*", "", text)


def resolve(src: Source, e: _Expr, axis: str, owner: str, depth: int = 0) -> Knob | None:
    """The knob writing one block axis, None for a fixed 1; Refused else."""
    text = _strip(e.text)
    if text == "?":
        raise Refused("runtime", f"the block's {axis} is set more than once or after its "
                                 "declaration")
    number = _NUMBER.fullmatch(text)
    if number:
        if int(number[1]) == 1:
            return None
        line, col = src.where(e.file, e.offset)
        start = src.texts[e.file].split("\n")[line].find(number[1], col)
        return Knob(owner, "dim3", int(number[1]), e.file, line,
                    (start, start + len(number[1])), number[1])
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        names = [n for n in _IDENT.findall(text) if n in src.defs or src.const_value(n)]
        if names:
            raise Refused("expression", f"the block's {axis} is {text}, an expression of "
                                        f"{', '.join(dict.fromkeys(names))}")
        raise Refused("runtime", f"the block's {axis} is {text}, computed at run time")
    if depth > 4:
        raise Refused("runtime", f"the block's {axis} ({text}) cannot be traced")
    if text in src.cmd:
        raise Refused("command-line", f"the block's {axis} is {text}, which the command "
                                      f"line sets (-D{text}={src.cmd[text]}): kept")
    if text in src.defs:
        return _macro_knob(src, text, axis, depth)
    sets = src.assignments(text)
    if src.is_parameter(text):      # its value is the caller's, whatever the name says
        raise Refused("runtime", f"the block's {axis} is {text}, a function's parameter")
    if len(sets) == 1 and sets[0][0] != "?":
        value, path, off, const = sets[0]
        try:
            inner = resolve(src, _Expr(value, path, off), axis, text, depth + 1)
        except Refused as exc:
            if exc.code != "runtime" or depth:
                raise
            raise Refused("runtime", f"the block's {axis} is {text}, set at run time "
                                     f"({text} = {' '.join(value.split())})") from None
        if inner is not None and inner.kind == "dim3":
            inner.key, inner.kind = text, "const"
        return inner
    if sets:
        shown = [" ".join(a.split()) for a, *_ in sets if a != "?"]
        raise Refused("runtime", f"the block's {axis} is {text}, set {len(sets)} times"
                      + (f" ({'; '.join(f'{text} = {a}' for a in shown[:3])})" if shown else ""))
    raise Refused("runtime", f"the block's {axis} is {text}, whose value is not in the "
                             "source's folder")


def _macro_knob(src: Source, name: str, axis: str, depth: int) -> Knob | None:
    defs = src.defs[name]
    active = src.active_define(name)
    if active is None:
        raise Refused("conditional", f"{name} is defined under conditions mirecc cannot "
                                     "evaluate")
    value = _strip(active.value)
    if not _NUMBER.fullmatch(value):
        if re.fullmatch(r"[A-Za-z_]\w*", value) and value in src.cmd:
            raise Refused("command-line", f"{name} is {value}, which the command line sets "
                                          f"(-D{value}={src.cmd[value]}): kept")
        if re.fullmatch(r"[A-Za-z_]\w*", value) and value in src.defs:
            return _macro_knob(src, value, axis, depth + 1)
        raise Refused("expression", f"{name} is {value}, not a number")
    n = int(_NUMBER.fullmatch(value)[1])
    line = src.texts[active.file].split("\n")[active.line]
    start = line.find(_NUMBER.fullmatch(value)[1], active.span[0])
    knob = Knob(name, "macro-rewrite", n, active.file, active.line,
                (start, start + len(str(n))), str(n))
    conds = active.conditions
    if conds and conds[-1][0] == "ifndef" and conds[-1][1] == name:
        knob.kind, knob.selector = "macro-D", name
    elif conds and conds[-1][0] == "else":
        # an #ifdef SEL / #elif defined(SEL2) / #else chain: the first selector wins
        first = [d for d in defs if d.conditions and d.line < active.line
                 and d.file == active.file and len(d.conditions) == len(conds)]
        if first:
            chain = first[0]
            sel = chain.value.strip()
            head = re.search(rf"#\s*(?:ifdef\s+{re.escape(sel)}\b|if\s+defined\s*\(?\s*"
                             rf"{re.escape(sel)}\b)", src.texts[chain.file])
            if re.fullmatch(r"[A-Za-z_]\w*", sel) and head:
                knob.kind, knob.selector = "macro-D", sel
    if len(defs) > 1 and knob.kind == "macro-rewrite" and conds:
        raise Refused("conditional", f"{name} is defined under #if conditions, with no "
                                     "selector a -D can set")
    if knob.kind == "macro-rewrite" and len([d for d in defs if not d.conditions]) > 1:
        raise Refused("conditional", f"{name} is defined more than once")
    return knob


# ------------------------------------------------------------------ the checks

def _substitute(src: Source, expr: str, block_var: str | None, block: list[str],
                keys=(), depth: int = 0) -> str:
    """``expr`` with the block variable's fields and once-assigned local
    integers spelled out (the grid's arithmetic, as far as it is static);
    the knobs ``keys`` (a dim3's ``b.x`` included) are kept as named."""
    if block_var:
        for axis, b in zip("xyz", block):
            if f"{block_var}.{axis}" not in keys:
                expr = re.sub(rf"\b{block_var}\s*\.\s*{axis}\b", f"({b})", expr)
            else:
                expr = re.sub(rf"\b{block_var}\s*\.\s*{axis}\b", f"{block_var}.{axis}", expr)
    if depth > 3:
        return expr
    for name in set(_IDENT.findall(expr)):
        if name in src.defs or name in keys or name in (
                "ceil", "floor", "int", "unsigned", "float", "double", "min", "max", "MIN",
                "MAX"):
            continue
        sets = src.assignments(name)
        if sets and all(a != "?" for a, *_ in sets):
            # several: a fix-up such as ``if (n % b) g = g + 1``; what the grid
            # depends on is all of them
            inner = _substitute(src, " , ".join(a for a, *_ in sets), block_var, block, keys,
                                depth + 1)
            if len(expr) + len(inner) > 2000:      # enough to see what it follows
                continue
            expr = re.sub(rf"(?<![\w.]){name}\b", lambda _: f"({inner})", expr)
    return expr


def _ceiling(expr: str, key: str) -> bool:
    """Whether ``expr`` divides by ``key`` rounding up: ``(n + B - 1) / B``,
    ``(n - 1) / B + 1``, ``n / B + (n % B ? 1 : 0)`` or ``ceil(..)``."""
    k = re.escape(key)
    return bool(re.search(r"\bceil", expr) or
                re.search(rf"-\s*1\s*\)*\s*/\s*\(*\s*{k}\b", expr) or
                re.search(rf"%\s*\(*\s*{k}\b", expr))


def analyse_kernel(src: Source, kernel: str, sites: list[LaunchSite],
                   all_sites: list[LaunchSite]) -> KnobBlock:
    """The knobs of ``kernel``'s launches (``sites``), checked; Refused where
    a change would not move every use with it."""
    resolved = []
    for s in sites:
        owner = s.block_var or f"{kernel}<<<>>>"
        knobs = [resolve(src, e, axis, f"{owner}.{axis}") for e, axis in
                 zip(s.block[:2], AXES)]
        z = _NUMBER.fullmatch(_strip(s.block[2].text))
        if not z:
            raise Refused("expression", f"the block's z is {s.block[2].text}")
        resolved.append((knobs, int(z[1])))
    keys = {tuple((k.key, k.value) if k else None for k in ks) for ks, _ in resolved}
    if len(keys) > 1:
        raise Refused("different-shapes", f"{kernel} is launched with different block shapes")
    knobs, z = resolved[0]
    if not any(knobs):
        raise Refused("fixed", "the block is 1 thread on x and y")
    block = KnobBlock(knobs, z=z)
    try:
        _check(src, kernel, sites, all_sites, block)
    except Refused as exc:
        exc.keys = [k.key for k in knobs if k]
        raise
    return block


def _check(src: Source, kernel: str, sites: list[LaunchSite], all_sites: list[LaunchSite],
           block: KnobBlock) -> None:
    knobs = block.knobs
    for k in knobs:
        if k and k.kind != "macro-D" and os.path.dirname(k.file) != src.folder:
            raise Refused("outside-folder", f"{k.key} is written outside the source's folder "
                                            f"({k.where})")
    for name in list(src.defs):
        v = src.macro_value(name)
        if v is not None:
            block.env[name] = v
    keys = [k.key for k in knobs if k]
    values = {k.key: k.value for k in knobs if k}
    # the grids: each launch that uses a knob must follow it on its axis
    for s in all_sites:
        written = [_strip(e.text) for e in s.block]
        for axis, g in zip("xyz", s.grid):
            grid = _substitute(src, _strip(g.text), s.block_var, written, keys)
            for key in keys:
                uses_block = s in sites
                mine = uses_block and axis in "xy" and knobs["xy".index(axis)] and \
                    knobs["xy".index(axis)].key == key
                if re.search(rf"\b{re.escape(key)}\b", grid) and not mine and uses_block:
                    raise Refused("grid-axis", f"the grid of the {s.kernel} launch uses {key} "
                                               f"for its {axis}")
                if re.search(rf"\b{re.escape(key)}\b", grid) and not uses_block:
                    if key in [_strip(e.text) for e in s.block]:
                        continue
                    raise Refused("shared-knob", f"{key} also sizes the grid of the "
                                                 f"{s.kernel} launch, whose block it does not set")
            if s not in sites or axis == "z":
                continue
            knob = knobs["xy".index(axis)]
            if knob is None:
                continue
            # a literal in the launch itself has no name a grid could follow
            follows = not (knob.kind == "dim3" and not s.block_var) and bool(
                re.search(rf"\b{re.escape(knob.key)}\b", grid))
            literal = [n for n in re.findall(r"(?<![\w.])(\d+)(?![\w.])", grid)
                       if int(n) in (knob.value, knob.value - 1) and knob.value > 2]
            if literal:
                raise Refused("grid-literal", f"the grid of the {s.kernel} launch is computed "
                                              f"with the literal {literal[0]} "
                                              f"({' '.join(s.grid_text.split())})")
            if not follows:
                raise Refused("grid-fixed", f"the grid of the {s.kernel} launch "
                                            f"({' '.join(s.grid_text.split())}) does not follow "
                                            f"the block's {axis} ("
                                            f"{knob.written if knob.kind == 'dim3' else knob.key})")
            key = knob.key
            if re.search(rf"/\s*\(?\s*{re.escape(key)}\b", grid) and not _ceiling(grid, key):
                dividend = grid[:re.search(rf"/\s*\(?\s*{re.escape(key)}\b", grid).start()]
                n = src._expr_value(dividend, ()) if dividend.strip() else None
                if n is not None:
                    block.divides.append((key, n))
                elif not re.search(rf"%\s*\(?\s*(?:{re.escape(key)}\b|{s.block_var or key}\s*\.\s*"
                                   rf"{axis}\b)", src.all):
                    raise Refused("rounds-down", f"the grid of the {s.kernel} launch "
                                                 f"({' '.join(s.grid_text.split())}) divides by "
                                                 f"{key} rounding down, and nothing checks "
                                                 f"that {key} divides the problem size")
    # the kernels and the device functions they call
    launched = {s.kernel for s in sites}
    bodies, todo = {}, list(launched)
    while todo:
        name = todo.pop()
        if name in bodies or name not in src.functions:
            continue
        bodies[name] = src.functions[name]
        for callee in set(_IDENT.findall(bodies[name][1])):
            if callee in src.functions and callee not in bodies and \
                    src.functions[callee][0].lstrip().startswith("__device__"):
                todo.append(callee)
    for name, (head, body, path) in bodies.items():
        m = _WARP_SYNC.search(body) or _VOLATILE_SHARED.search(body)
        if m:
            raise Refused("warp-sync", f"{name} is warp-synchronous ({' '.join(m[0].split()[:3])}"
                                       f"): it assumes the block's shape")
        bounds = re.search(r"__launch_bounds__\s*\(([^)]*)\)", head + body[:0]) or \
            re.search(r"__launch_bounds__\s*\(([^)]*)\)",
                      src.texts[path][max(0, src.texts[path].find(head) - 200):
                                      src.texts[path].find(head) + len(head)])
        if bounds and not any(re.search(rf"\b{re.escape(k)}\b", bounds[1]) for k in keys):
            raise Refused("launch-bounds", f"{name} has __launch_bounds__({bounds[1].strip()}), "
                                           "which assumes the source's shape")
        for stmt in re.split(r"[;{}]", body):
            if not re.search(r"\b(threadIdx|blockIdx|blockDim)\b", stmt):
                continue
            for key, v in values.items():
                if v <= 2:
                    continue
                for n in re.findall(r"(?<![\w.])(\d+)(?![\w.])", stmt):
                    if int(n) == v or (int(n) == v - 1 and v > 8):
                        raise Refused("thread-literal", f"{name} computes with the literal "
                                                        f"{n} next to its thread index "
                                                        f"({' '.join(stmt.split())[:60]})")
    # __shared__ arrays: those of every function, sized with the knobs
    for name, (head, body, path) in src.functions.items():
        for m in re.finditer(r"\b__shared__\s+((?:(?:volatile|const|unsigned|signed|struct)\s+)*"
                             r"[A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)+)", body):
            extents = re.findall(r"\[([^\]]*)\]", m[3])
            words = m[1].split()     # a type of unknown size counts as none
            size = 4 if words[-1] in ("unsigned", "signed") else _TYPE_BYTES.get(words[-1])
            uses = any(re.search(rf"\b{re.escape(k)}\b", e) for k in keys for e in extents)
            if name in launched and not uses:
                for e in extents:
                    v = src._expr_value(e, ())
                    for key, kv in values.items():
                        if v is not None and kv > 2 and v in (kv, kv + 1) and \
                                not re.search(rf"\b{re.escape(key)}\b", e):
                            raise Refused("shared-literal", f"{name}'s __shared__ {m[2]}"
                                                            f"{m[3].strip()} has the block's "
                                                            f"size {kv} without {key}")
            if name in launched or uses:
                block.shared.append(SharedArray(name, m[2], size, extents))
    for path, cond, line in src.conditions:
        for key in keys:
            if re.search(rf"\b{re.escape(key)}\b", cond):
                raise Refused("preprocessor", f"#if {cond} ({os.path.basename(path)}:"
                                              f"{line + 1}) chooses code by {key}")
    # an object other translation units see, set from the knob: their work
    # (a problem size, a buffer's length) would change with the shape
    for path, code in src.texts.items():
        for m in _EXPORTED.finditer(code):
            for key in keys:
                if re.search(rf"\b{re.escape(key)}\b", m[2]):
                    line = code.count("\n", 0, m.start()) + 1
                    raise Refused("exported", f"{m[1]} ({os.path.basename(path)}:{line}), "
                                              f"which other translation units can read, is set "
                                              f"from {key}: their work would change with it")
    for m in re.finditer(r"\bstatic_assert\s*\(([^;]*)\)", src.all):
        for key in keys:
            if re.search(rf"\b{re.escape(key)}\b", m[1]):
                raise Refused("preprocessor", f"a static_assert on {key}")
    own = tuple(k.value if k else 1 for k in knobs)
    why = block.refuses(own) if all(v in SIDES_2D for v in own if v > 1) else None
    if why and "takes" not in why:
        raise Refused("limit", f"the source's own shape does not pass: {why}")


def command_defines(preprocessor: list[str]) -> dict[str, str]:
    out = {}
    for flag in preprocessor:
        if flag.startswith("-D"):
            name, _, value = flag[2:].partition("=")
            out[name] = value or "1"
        elif flag.startswith("-U"):
            out.pop(flag[2:], None)
    return out


def analyse(texts: dict[str, str], folder: str, preprocessor: list[str],
            kernels: list[str]) -> dict[str, KnobBlock | Refused]:
    """Each of ``kernels`` (launched in the folder's files of ``texts``) ->
    its checked knobs, or why it has none."""
    src = Source(texts, folder, command_defines(preprocessor))
    sites = launch_sites(src)
    out = {}
    for kernel in kernels:
        mine = [s for s in sites if s.kernel == kernel]
        if not mine:
            out[kernel] = Refused("no-launch", "no launch in this source")
            continue
        try:
            out[kernel] = analyse_kernel(src, kernel, mine, sites)
        except Refused as exc:
            if not exc.keys:      # refused before its knobs were known: the names it uses
                exc.keys = [n for s in mine for e in s.block
                            for n in _IDENT.findall(e.text) if n in src.defs]
            out[kernel] = exc
    # a knob shared with a kernel that may not change is no knob
    for kernel, result in out.items():
        if isinstance(result, KnobBlock):
            for other, why in out.items():
                shared = [k.key for k in result.knobs if k and k.key in getattr(why, "keys", ())]
                if isinstance(why, Refused) and shared:
                    out[kernel] = Refused("shared-knob", f"{shared[0]} also sets the block of "
                                                         f"{other}, which is not tunable ({why})")
                    break
    return out
