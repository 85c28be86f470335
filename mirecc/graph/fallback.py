"""Pure-Python graph builder on llvmlite, for when ``mirecc-graph`` is not built.

    from mirecc.graph.fallback import build_graph_llvmlite
    g = build_graph_llvmlite("foo.ll")

It walks the module exactly as the native builder does (passes/graph/
mirecc_graph.cpp, schema and order in passes/graph/FORMAT.md) and gives a
:class:`~mirecc.graph.format.ProgramGraph` with the same arrays: nodes in the
same order with the same type, text, function, block and loop; edges in the
same order with the same flow and position; the same function and loop
tables. Loops are natural loops (one per header, as LLVM's LoopInfo)
computed here from dominators over the CFG.

llvmlite's LLVM is 22; the native builder's is 14 or 19. What the
fallback does so that the graphs agree anyway:

* The module is printed once and split into statements (printing value by
  value re-numbers the module each time). For text IR written by an LLVM
  printer (``; ModuleID`` first: clang -S), statements, global definition
  lines and the function order are taken from the file itself -- they are
  what the native builder's LLVM prints back; LLVM 22 prints some things
  differently (metadata and attribute-group numbers, upgraded intrinsics).
* Switch case values are not operands in LLVM 22: they are read back from
  the statement, as constants at operand positions 2, 4, ...
* ``llvm.lifetime.start/end`` lose their size operand in LLVM 22 (and are
  re-declared at the module's end, the old declarations left behind
  renamed ``.i64``): the size is put back as an ``i64`` constant at
  position 0 (from the statement, or for bitcode from the alloca's
  allocation size), the leftovers dropped, the declarations put back where
  clang declared them (source order; for bitcode: after the definition
  that first uses them).
* Intrinsics LLVM 22 renames (``llvm.memcpy.p0i8.p0i8.i64`` ->
  ``llvm.memcpy.p0.p0.i64``, ``llvm.va_start`` -> ``llvm.va_start.p0``)
  keep the source's name and place (text IR only).
* ``getCalledFunction`` (call edges) is LLVM's: the callee must have the
  call's function type (checked on parameter types; on the printed type for
  varargs callees).
* Typed-pointer IR (clang-14): a callee written ``bitcast (... @f ...)`` is
  a constant operand without a call edge, as in LLVM 14; LLVM <= 18's
  ``inrange i32 0`` GEP syntax (C++ vtables), which LLVM 22 rejects, is
  dropped before parsing; a function cast as an operand (``i8* bitcast
  (@dtor ...)`` for ``__cxa_throw``), folded to the function by LLVM 22,
  is the constant again (text IR).

What still differs (tests/ir/test_graph_fallback.py checks the rest exactly):

* clang-14 IR (typed pointers, read as opaque ``ptr`` by LLVM 22): type
  texts of pointer values are ``ptr`` (native: ``i32*``, ``struct*``);
  constants that only typed pointers tell apart merge (``double* null``
  and ``%struct.P* null`` are one ``ptr null``), zero-index constant GEPs
  fold to their global: fewer constant nodes. For clang-14 *bitcode*,
  also: a function cast as an operand is the function (no data edge),
  intrinsic names are LLVM 22's manglings, and the places of re-declared
  intrinsics are a heuristic (right for lifetime markers on zlib and
  sqlite3; memset/memcpy/va_* can land elsewhere than clang put them).
* bitcode: statements of lifetime calls are LLVM 22's (``(ptr %3)``).
* clang-14 IR with debug intrinsics (``-g``): LLVM 22 holds them as debug
  records, not instructions: fewer instruction nodes (and call edges) than
  LLVM 14's graph. (LLVM 19 holds them as records too: clang-19 ``-g`` IR
  gives the same graph.)
* other LLVM 22 auto-upgrades not listed here.

For clang-19 IR (text) and the LLVM 19 builder, every array is the same.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Dict, List, Optional, Tuple

import llvmlite
import llvmlite.binding as llvm
import numpy as np
from llvmlite.binding import ffi
from llvmlite.binding.value import ValueRef

from . import schema
from .format import ProgramGraph
from .irinfo import loop_bodies
from .native import GraphBuildError

_lib = None
_VP = ctypes.c_void_p


def _ffi():
    """Our own ctypes view of llvmlite's library: raw pointers as ints."""
    global _lib
    if _lib is not None:
        return _lib
    handle = ffi.lib._lib_handle
    if handle is None:
        llvm.llvm_version_info  # loads the library
        handle = ffi.lib._lib_handle
    lib = ctypes.CDLL(handle._name)
    sig = {
        "LLVMPY_ModuleFunctionsIter": (_VP, [_VP]),
        "LLVMPY_FunctionsIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeFunctionsIter": (None, [_VP]),
        "LLVMPY_ModuleGlobalsIter": (_VP, [_VP]),
        "LLVMPY_GlobalsIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeGlobalsIter": (None, [_VP]),
        "LLVMPY_FunctionBlocksIter": (_VP, [_VP]),
        "LLVMPY_BlocksIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeBlocksIter": (None, [_VP]),
        "LLVMPY_BlockInstructionsIter": (_VP, [_VP]),
        "LLVMPY_InstructionsIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeInstructionsIter": (None, [_VP]),
        "LLVMPY_InstructionOperandsIter": (_VP, [_VP]),
        "LLVMPY_OperandsIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeOperandsIter": (None, [_VP]),
        "LLVMPY_FunctionArgumentsIter": (_VP, [_VP]),
        "LLVMPY_ArgumentsIterNext": (_VP, [_VP]),
        "LLVMPY_DisposeArgumentsIter": (None, [_VP]),
        "LLVMPY_GetOpcodeName": (_VP, [_VP]),
        "LLVMPY_GetValueKind": (ctypes.c_int, [_VP]),
        "LLVMPY_GetValueName": (ctypes.c_char_p, [_VP]),
        "LLVMPY_TypeOf": (_VP, [_VP]),
        "LLVMPY_PrintType": (_VP, [_VP]),
        "LLVMPY_TypeIsStruct": (ctypes.c_bool, [_VP]),
        "LLVMPY_IsDeclaration": (ctypes.c_int, [_VP]),
        "LLVMPY_IsConstant": (ctypes.c_bool, [_VP]),
        "LLVMPY_DisposeString": (None, [_VP]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _take_string(lib, ptr: Optional[int]) -> str:
    if not ptr:
        return ""
    s = ctypes.string_at(ptr).decode("utf-8", "replace")
    lib.LLVMPY_DisposeString(ptr)
    return s


def _iterate(lib, make, nxt, dispose, obj: int) -> List[int]:
    it = make(obj)
    out = []
    try:
        while True:
            v = nxt(it)
            if not v:
                return out
            out.append(v)
    finally:
        dispose(it)


# ValueKind values (llvmlite.binding.value.ValueKind).
_ARGUMENT, _BASIC_BLOCK, _FUNCTION, _INSTRUCTION = 0, 1, 5, 24
_GLOBALS = {6, 7, 8}  # alias, ifunc, variable: full text = definition line
_CONSTANTS = set(range(6, 22)) | {25}
_NOT_DATA = {_BASIC_BLOCK, 2, 3, 4, 22, 23}  # blocks, memory SSA, metadata, inline asm

_CONSTANT_INT = 18
_CASE = -1  # a switch case value rebuilt from the statement text
_CASE_LINE = re.compile(r"\n\s+(\S+) (-?\d+|true|false), label ")

_LIFETIME_SIZE = re.compile(
    r"@llvm\.lifetime\.(?:start|end)[.\w]*\(i64 (-?\d+), (?:[^,()%]*(%[-\w$.]+)\))?")
_RESULT_NAME = re.compile(r"(%[-\w$.]+) = ")


def _result_names(stmts: List[str], insts: List[int]) -> Dict[str, int]:
    """Instruction by result name ("%6"), from the statements."""
    out = {}
    for stmt, inst in zip(stmts, insts):
        m = _RESULT_NAME.match(stmt)
        if m:
            out[m.group(1)] = inst
    return out
_FUNCTION_NAME = re.compile(r'^(?:define|declare) [^@\n]*@("(?:[^"\\\n]|\\.)*"|[-\w$.]+)\(',
                            re.MULTILINE)

_STALE_INTRINSIC = re.compile(rb"llvm\.lifetime\.(?:start|end)\.i64(?:\.\d+)?\Z")

def _intrinsic_norm(name: str) -> str:
    """An intrinsic's name without pointer-type manglings (p0i8 -> p0) and
    trailing pointer overloads, to match names across LLVM versions."""
    name = re.sub(r"\.p(\d+)(?:i\d+|f\d+|s_[\w]+|v\d+\w+)?(?=\.|$)", r".p\1", name)
    return re.sub(r"(?:\.p\d+)+$", "", name)


_OLD_INRANGE = re.compile(r"\binrange (i\d+ -?\d+)")

def _cast_callee(stmt: str):
    """(type, "bitcast (...)") when a call's callee is a bitcast constant
    expression (typed-pointer IR), else None."""
    i = stmt.find(" bitcast (")
    if i < 0 or stmt.startswith("store "):
        return None
    depth, j = 0, i + len(" bitcast ")
    while j < len(stmt):
        c = stmt[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
        j += 1
    if depth or stmt[j + 1:j + 2] != "(":
        return None
    expr = stmt[i + 1:j + 1]
    k = expr.rfind(" to ")
    if k < 0:
        return None
    return (expr[k + 4:-1], expr)


_ALLOCA = re.compile(r"%\S+ = alloca (.+?)(?:, i\d+ (\d+))?(?:, align \d+)?(?:, addrspace\(\d+\))?(?:, !.*)?$")
_ARRAY = re.compile(r"([\[<])(\d+) x (.+)[\]>]$")
_FP_SIZES = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "x86_fp80": 16, "fp128": 16,
             "ppc_fp128": 16}

def _function_cast(stmt: str, name: str):
    """(type, "bitcast (<type> @f to <type>)") for function ``name`` cast in
    ``stmt``, else None."""
    start = 0
    while True:
        i = stmt.find(" bitcast (", start)
        if i < 0:
            return None
        depth, j = 0, i + len(" bitcast ")
        while j < len(stmt):
            if stmt[j] == "(":
                depth += 1
            elif stmt[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        expr = stmt[i + 1:j + 1]
        if (name + " to ") in expr:
            k = expr.rfind(" to ")
            return (expr[k + 4:-1], expr)
        start = i + 1


_PLAIN_NAME = re.compile(rb"[-a-zA-Z$._][-a-zA-Z$._0-9]*\Z")


def _llvm_name(prefix: str, raw: bytes) -> str:
    """A value name as LLVM prints it (quoted and escaped where needed)."""
    if _PLAIN_NAME.match(raw):
        return prefix + raw.decode("ascii")
    out = []
    for b in raw:
        c = chr(b)
        if b == 0x5C or b == 0x22 or not (0x20 <= b < 0x7F):
            out.append("\\%02X" % b)
        else:
            out.append(c)
    return prefix + '"' + "".join(out) + '"'


def _read_module(path: str):
    """Parse ``path`` with llvmlite; GraphBuildError naming the file otherwise."""
    if not os.path.exists(path):
        raise GraphBuildError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise GraphBuildError(f"{path}: cannot read file: {exc.strerror or exc}") from None
    bitcode = data[:4] in (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
    if bitcode:
        try:
            # A fresh context each time: in llvmlite's global one, struct
            # names of earlier modules stay taken (%struct.S -> %struct.S.41).
            ctx = llvm.create_context()
            return llvm.parse_bitcode(data, context=ctx), None, ctx
        except RuntimeError as exc:
            msg = str(exc).split("\n", 1)[-1].strip()
            raise GraphBuildError(f"{path}: invalid LLVM IR: {msg}") from None
    if not data.strip(b" \t\r\n"):
        raise GraphBuildError(f"{path}: empty module (the file holds no IR)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
        line = 1 + data[:bad].count(b"\n")
        raise GraphBuildError(
            f"{path}: not valid UTF-8 text (byte offset {bad}, line {line}); "
            "expected LLVM IR text or bitcode") from None
    try:
        ctx = llvm.create_context()
        return llvm.parse_assembly(text, context=ctx), text, ctx
    except RuntimeError as exc:
        # LLVM <= 18's "inrange" on one GEP index (C++ vtables from clang-14)
        # is a syntax error since LLVM 19: read the module without it (only
        # that constant's text loses the word; statements keep the source's).
        if _OLD_INRANGE.search(text):
            try:
                ctx = llvm.create_context()
                return (llvm.parse_assembly(_OLD_INRANGE.sub(r"\1", text), context=ctx),
                        text, ctx)
            except RuntimeError:
                pass
        msg = str(exc).split("\n", 1)[-1].strip()
        m = re.match(r"[^:\n]*:(\d+):(\d+): error: (.*)", msg, re.S)
        if m:
            msg = f"line {m.group(1)}:{m.group(2)}: invalid LLVM IR: {m.group(3).splitlines()[0]}"
        else:
            msg = f"invalid LLVM IR: {msg.splitlines()[0] if msg else 'parse error'}"
        raise GraphBuildError(f"{path}: {msg}") from None


def _split_module(text: str) -> Tuple[List[List[str]], List[str]]:
    """Statements of each defined function (module order) and the top-level
    lines that define globals (``@...``), from the printed module."""
    bodies: List[List[str]] = []
    globals_: List[str] = []
    cur: Optional[List[str]] = None
    for line in text.split("\n"):
        if cur is None:
            if line.startswith("define "):
                cur = []
                bodies.append(cur)
            elif line.startswith("@"):
                globals_.append(line)
            continue
        if line == "}":
            cur = None
            continue
        if line.startswith("  "):
            if line[2] != " ":
                if line.startswith("  ]") and cur:  # a switch's case list ends
                    cur[-1] += "\n" + line
                elif not line.startswith("  #dbg_"):
                    cur.append(line[2:].rstrip(" "))
            else:
                s = line.lstrip(" ")
                if not s.startswith("#dbg_") and cur:
                    cur[-1] += "\n" + line.rstrip(" ")
    return bodies, globals_


class _Builder:
    def __init__(self, module, source: Optional[str] = None):
        self.lib = _ffi()
        self.source = source
        self.renamed: Dict[int, bytes] = {}
        self.scanned: Dict[int, tuple] = {}
        self.sizes: Dict[str, Optional[int]] = {}
        self.td = None
        self.module = module
        self.mod = ctypes.cast(module._ptr, _VP).value
        # Graph arrays (Python lists, converted at the end).
        self.ntype: List[int] = []
        self.ntext: List[int] = []
        self.nfn: List[int] = []
        self.nblock: List[int] = []
        self.nloop: List[int] = []
        self.nfull: List[str] = []
        self.eflow: List[int] = []
        self.esrc: List[int] = []
        self.edst: List[int] = []
        self.epos: List[int] = []
        self.strings: Dict[str, int] = {}
        self.string_list: List[str] = []
        self.fn_types: Dict[int, tuple] = {}
        self.int_keys: Dict[int, tuple] = {}
        self.key_value: Dict[tuple, int] = {}
        self.fn_names: List[bytes] = []
        self.fn_decl: List[int] = []
        self.fn_entry: List[int] = []
        self.loop_fn: List[int] = []
        self.loop_header: List[int] = []
        self.loop_depth: List[int] = []
        self.loop_parent: List[int] = []
        self.block_count = 0
        self.type_text: Dict[int, str] = {}   # ProGraML text
        self.llvm_type: Dict[int, str] = {}   # as LLVM prints it
        self.opcodes: Dict[str, int] = {}
        self.call_sites: List[Tuple[int, int]] = []
        self.const_order: List[int] = []
        self.const_uses: Dict[int, List[Tuple[int, int]]] = {}
        self.const_kind: Dict[int, int] = {}

    # -- helpers
    def intern(self, s: str) -> int:
        i = self.strings.get(s)
        if i is None:
            i = self.strings[s] = len(self.strings)
            self.string_list.append(s)
        return i

    def llvm_type_text(self, t: int) -> str:
        s = self.llvm_type.get(t)
        if s is None:
            s = self.llvm_type[t] = _take_string(self.lib, self.lib.LLVMPY_PrintType(t))
        return s

    def programl_type(self, t: int) -> int:
        """String id of ProGraML's type text ("struct" for struct types)."""
        i = self.type_text.get(t)
        if i is None:
            s = "struct" if self.lib.LLVMPY_TypeIsStruct(t) else self.llvm_type_text(t)
            i = self.type_text[t] = self.intern(s)
        return i

    def add_node(self, ntype, text, full, fn, block, loop) -> int:
        self.ntype.append(ntype)
        self.ntext.append(text)
        self.nfull.append(full)
        self.nfn.append(fn)
        self.nblock.append(block)
        self.nloop.append(loop)
        return len(self.ntype) - 1

    def add_edge(self, flow, src, dst, pos) -> None:
        self.eflow.append(flow)
        self.esrc.append(src)
        self.edst.append(dst)
        self.epos.append(pos)

    def add_call_site(self, site, ends) -> None:
        entry, exits = ends
        self.add_edge(schema.CALL, site, entry, 0)
        for e in exits:
            self.add_edge(schema.CALL, e, site, 0)

    # -- the walk
    def build(self) -> ProgramGraph:
        lib = self.lib
        text = str(self.module)
        bodies, global_lines = _split_module(text)
        functions = _iterate(lib, lib.LLVMPY_ModuleFunctionsIter, lib.LLVMPY_FunctionsIterNext,
                             lib.LLVMPY_DisposeFunctionsIter, self.mod)
        globals_ = _iterate(lib, lib.LLVMPY_ModuleGlobalsIter, lib.LLVMPY_GlobalsIterNext,
                            lib.LLVMPY_DisposeGlobalsIter, self.mod)
        # The upgrade of llvm.lifetime.* (size operand dropped) leaves the old
        # declarations behind, renamed, unused: not in the native graph.
        stale = [f for f in functions if _STALE_INTRINSIC.match(lib.LLVMPY_GetValueName(f) or b"")]
        functions = [f for f in functions if f not in stale]
        if self.source is None:
            # Intrinsics LLVM 22 upgraded (llvm.lifetime.*, typed-pointer
            # manglings) are re-declared after the last definition.
            last = max((i for i, f in enumerate(functions) if not lib.LLVMPY_IsDeclaration(f)),
                       default=-1)
            moved = [f for f in functions[last + 1:]
                     if (lib.LLVMPY_GetValueName(f) or b"").startswith(b"llvm.")]
            if moved:
                functions = self.place_redeclared(functions, moved)
        definitions = [f for f in functions if not lib.LLVMPY_IsDeclaration(f)]
        if len(bodies) != len(definitions):
            raise GraphBuildError(f"printed module has {len(bodies)} function bodies for "
                                  f"{len(definitions)} definitions")
        self.body = dict(zip(definitions, bodies))
        self.source_body: Dict[int, List[str]] = {}
        if self.source is not None:
            # Text IR as an LLVM printer wrote it (clang -S): its statements
            # are what the native builder's LLVM prints back; LLVM 22 may
            # print some differently. Function order is the source's too
            # (LLVM 22 re-declares upgraded intrinsics at the module's end).
            src_bodies, src_globals = _split_module(self.source)
            if len(src_bodies) == len(definitions):
                self.source_body = dict(zip(definitions, src_bodies))
            if len(src_globals) == len(global_lines):
                global_lines = src_globals
            src_names = _FUNCTION_NAME.findall(self.source)
            order = {name: i for i, name in enumerate(src_names)}
            names = {f: _llvm_name("", lib.LLVMPY_GetValueName(f) or b"") for f in functions}
            # Intrinsics LLVM 22 renamed on upgrade (typed-pointer manglings,
            # llvm.va_start -> llvm.va_start.p0): the source's name and place.
            missing = {}
            for name in src_names:
                if name.startswith("llvm.") and name not in names.values():
                    missing.setdefault(_intrinsic_norm(name), name)
            for f, name in names.items():
                if name not in order and name.startswith("llvm."):
                    old = missing.pop(_intrinsic_norm(name), None)
                    if old is not None:
                        self.renamed[f] = old.encode()
                        names[f] = old
            big = len(order)
            keyed = [(order.get(names[f], big + i), i, f) for i, f in enumerate(functions)]
            functions = [f for _, _, f in sorted(keyed)]
        self.global_line = dict(zip(globals_, global_lines))
        self.fn_index = {f: i for i, f in enumerate(functions)}
        self.lifetime = {f for f in functions
                         if (lib.LLVMPY_GetValueName(f) or b"").startswith(b"llvm.lifetime.")}

        self.add_node(schema.INSTRUCTION, self.intern(schema.EXTERNAL_TEXT), "", -1, 0, -1)
        ends = []
        for i, f in enumerate(functions):
            self.fn_names.append(self.renamed.get(f) or lib.LLVMPY_GetValueName(f) or b"")
            decl = bool(lib.LLVMPY_IsDeclaration(f))
            self.fn_decl.append(1 if decl else 0)
            if decl:
                node = self.add_node(schema.INSTRUCTION,
                                     self.intern(schema.UNDEFINED_FUNCTION_TEXT), "", i, 0, -1)
                ends.append((node, [node]))
            else:
                ends.append(self.visit_function(f, i, self.body[f]))
            self.fn_entry.append(ends[-1][0])
        for e in ends:
            self.add_call_site(0, e)
        for site, callee in self.call_sites:
            self.add_call_site(site, ends[self.fn_index[callee]])
        printed = {}
        for c in self.const_order:
            kind = self.const_kind[c]
            if type(c) is tuple:
                tt, value = c
                full = f"{tt} {value}"
                node = self.add_node(schema.CONSTANT, self.intern(tt), full, -1,
                                     self.block_count, -1)
                for consumer, pos in self.const_uses[c]:
                    self.add_edge(schema.DATA, node, consumer, pos)
                continue
            if kind in _GLOBALS and c in self.global_line:
                full = self.global_line[c]
            else:
                full = printed.get(c)
                if full is None:
                    full = printed[c] = self.print_value(c)
            node = self.add_node(schema.CONSTANT, self.programl_type(lib.LLVMPY_TypeOf(c)),
                                 full, -1, self.block_count, -1)
            for consumer, pos in self.const_uses[c]:
                self.add_edge(schema.DATA, node, consumer, pos)
        return self.finish()

    def print_value(self, v: int) -> str:
        with ffi.OutputString() as out:
            ffi.lib.LLVMPY_PrintValueToString(ctypes.cast(v, ffi.LLVMValueRef), out)
            return str(out).lstrip(" \t\n")

    def callee_matches(self, callee: int, inst: int, args: List[int], stmt: str) -> bool:
        """Whether ``call``'s function type is the callee's (getCalledFunction)."""
        info = self.fn_types.get(callee)
        if info is None:
            ref = ValueRef(ctypes.cast(callee, ffi.LLVMValueRef), "function", {})
            fty = ref.global_value_type
            params = [ctypes.cast(p._ptr, _VP).value for p in fty.get_function_parameters()]
            ret = ctypes.cast(fty.get_function_return()._ptr, _VP).value
            vararg = fty.is_function_vararg
            info = (params, ret, vararg, str(fty))
            self.fn_types[callee] = info
        params, ret, vararg, fty_text = info
        lib = self.lib
        if lib.LLVMPY_TypeOf(inst) != ret:
            return False
        if vararg:
            return (fty_text + " @") in stmt
        if len(args) != len(params):
            return False
        return all(lib.LLVMPY_TypeOf(a) == p for a, p in zip(args, params))

    def int_key(self, v: int):
        """Integer constants by (type, value text): switch case values, which
        are not operands in LLVM 22, must meet the same constant's other uses."""
        key = self.int_keys.get(v)
        if key is None:
            text = self.print_value(v)
            t, _, value = text.partition(" ")
            key = self.int_keys[v] = (t, value)
            self.key_value[key] = text
        return key

    def switch_operands(self, ops: List[int], stmt: str) -> list:
        """LLVM 14/19 operand order of a switch: condition, default, then
        (case value, destination) pairs; LLVM 22 keeps case values apart."""
        if not ops:
            return ops
        cases = _CASE_LINE.findall(stmt)
        dests = ops[2:]
        if len(cases) != len(dests):
            return ops
        t = self.llvm_type_text(self.lib.LLVMPY_TypeOf(ops[0]))
        out = list(ops[:2])
        for (_, value), dest in zip(cases, dests):
            out.append((t, value))
            out.append(dest)
        return out

    def scan(self, f: int):
        """Blocks, instructions, operands, opcodes and successors of ``f``."""
        lib = self.lib
        blocks = _iterate(lib, lib.LLVMPY_FunctionBlocksIter, lib.LLVMPY_BlocksIterNext,
                          lib.LLVMPY_DisposeBlocksIter, f)
        block_index = {b: i for i, b in enumerate(blocks)}
        insts = [_iterate(lib, lib.LLVMPY_BlockInstructionsIter, lib.LLVMPY_InstructionsIterNext,
                          lib.LLVMPY_DisposeInstructionsIter, b) for b in blocks]
        opnd = lib.LLVMPY_InstructionOperandsIter
        onext = lib.LLVMPY_OperandsIterNext
        odisp = lib.LLVMPY_DisposeOperandsIter
        opcode_of = lib.LLVMPY_GetOpcodeName
        ops_of: List[List[int]] = []
        opcodes: List[str] = []
        succ: List[List[int]] = []
        for bl in insts:
            for inst in bl:
                it = opnd(inst)
                ops = []
                while True:
                    v = onext(it)
                    if not v:
                        break
                    ops.append(v)
                odisp(it)
                ops_of.append(ops)
                opcodes.append(_take_string(lib, opcode_of(inst)))
            # successors of the block's terminator, in successor order
            ops = ops_of[-1] if bl else []
            targets = [block_index[v] for v in ops if v in block_index]
            if bl and opcodes[-1] == "br" and len(targets) == 2:
                targets.reverse()
            succ.append(targets)
        return blocks, block_index, insts, ops_of, opcodes, succ

    def alloc_size(self, alloca: str) -> Optional[int]:
        """Allocation size in bytes of "%x = alloca T, align N" (None if not
        worked out: dynamic count, literal structs, unknown types)."""
        m = _ALLOCA.match(alloca)
        if not m:
            return None
        size = self.type_size(m.group(1).strip())
        if size is None:
            return None
        count = m.group(2)
        return size * (int(count) if count else 1)

    def type_size(self, t: str) -> Optional[int]:
        if t in self.sizes:
            return self.sizes[t]
        size = None
        m = _ARRAY.match(t)
        if t == "ptr" or t.startswith("ptr addrspace("):
            size = self.pointer_size(t)
        elif re.fullmatch(r"i\d+", t):
            bits = int(t[1:])
            size = 1
            while size * 8 < bits:
                size *= 2
        elif t in _FP_SIZES:
            size = _FP_SIZES[t]
        elif m:
            elem = self.type_size(m.group(3))
            if elem is not None:
                n = int(m.group(2))
                size = n * elem
                if m.group(1) == "<":  # vectors: alloc size rounds to a power of two
                    p = 1
                    while p < size:
                        p *= 2
                    size = p
        elif t.startswith("%"):
            name = t[1:]
            if name.startswith('"') and name.endswith('"'):
                name = name[1:-1]
            try:
                ty = self.module.get_struct_type(name)
                size = self.target_data().get_abi_size(ty)
            except (NameError, ValueError, RuntimeError):
                size = None
        self.sizes[t] = size
        return size

    def pointer_size(self, t: str) -> int:
        m = re.search(r"addrspace\((\d+)\)", t)
        space = m.group(1) if m else "0"
        for spec in self.module.data_layout.split("-"):
            pm = re.match(r"p(\d*):(\d+)", spec)
            if pm and (pm.group(1) or "0") == space:
                return int(pm.group(2)) // 8
        return 8

    def target_data(self):
        if self.td is None:
            self.td = llvm.create_target_data(self.module.data_layout)
        return self.td

    def place_redeclared(self, functions: List[int], moved: List[int]) -> List[int]:
        """Bitcode has no source order to go by: put intrinsics LLVM 22
        re-declared at the module's end back where clang declared them,
        right after the definition that first uses them (clang declares a
        function when it first emits a use), behind the functions that
        definition used earlier."""
        lib = self.lib
        first: Dict[int, Tuple[int, int]] = {}
        fnset = set(functions)
        for pos, f in enumerate(functions):
            if lib.LLVMPY_IsDeclaration(f):
                continue
            scanned = self.scanned[f] = self.scan(f)
            for k, ops in enumerate(scanned[3]):
                for v in ops:
                    if v in fnset and v not in first:
                        first[v] = (pos, k)
        out = [f for f in functions if f not in moved]
        for m in sorted((m for m in moved if m in first), key=first.get):
            pos, k = first[m]
            at = out.index(functions[pos]) + 1
            while (at < len(out) and first.get(out[at], (-1, 0))[0] == pos
                   and first[out[at]][1] < k):
                at += 1
            out.insert(at, m)
        return out + [m for m in moved if m not in first]

    def visit_function(self, f: int, fn: int, stmts: List[str]):
        lib = self.lib
        blocks, block_index, insts, ops_of, opcodes, succ = self.scanned.pop(f, None) or self.scan(f)
        total = len(ops_of)
        printed = stmts
        src = self.source_body.get(f)
        if src is not None and len(src) == total:
            stmts = src
        if total != len(stmts):
            name = (lib.LLVMPY_GetValueName(f) or b"").decode("utf-8", "replace")
            raise GraphBuildError(
                f"function {name}: {total} instructions but {len(stmts)} printed statements")
        kind_of = lib.LLVMPY_GetValueKind

        # Loops, numbered in header order.
        bodies = loop_bodies(succ) if blocks else {}
        headers = sorted(bodies)
        loop_id = {}
        for h in headers:
            loop_id[h] = len(self.loop_fn)
            self.loop_fn.append(fn)
            self.loop_header.append(h)
            containing = [h2 for h2 in headers if h in bodies[h2]]
            self.loop_depth.append(len(containing))
            outer = [h2 for h2 in containing if h2 != h]
            self.loop_parent.append(
                loop_id[min(outer, key=lambda x: len(bodies[x]))] if outer else -1)
        innermost = [-1] * len(blocks)
        for h in sorted(headers, key=lambda x: -len(bodies[x])):
            for b in bodies[h]:
                innermost[b] = loop_id[h]

        inst_node: Dict[int, int] = {}
        inst_ord: Dict[int, int] = {}
        producers: List[Tuple[int, int]] = []
        results: List[Tuple[int, int]] = []  # (variable node, producer instruction)
        arg_order: List[int] = []
        arg_uses: Dict[int, List[Tuple[int, int]]] = {}
        block_ends: List[Tuple[int, int]] = []
        const_uses = self.const_uses
        const_order = self.const_order
        const_kind = self.const_kind
        kinds: Dict[int, int] = {}
        ordinal = 0
        named = None
        INSTR, VAR, DATA, CONTROL = schema.INSTRUCTION, schema.VARIABLE, schema.DATA, schema.CONTROL
        for bi, bl in enumerate(insts):
            loop = innermost[bi]
            first = last = -1
            block = self.block_count
            for ii, inst in enumerate(bl):
                op = opcodes[ordinal]
                t = self.opcodes.get(op)
                if t is None:
                    t = self.opcodes[op] = self.intern(op)
                stmt = stmts[ordinal]
                node = self.add_node(INSTR, t, stmt, fn, block, loop)
                ops = ops_of[ordinal]
                if op == "switch":
                    ops = self.switch_operands(ops, stmt)
                inst_node[inst] = node
                inst_ord[inst] = ordinal
                ordinal += 1
                if last >= 0:
                    self.add_edge(CONTROL, last, node, 0)
                cast_callee = None
                if (op == "call" or op == "invoke") and ops and stmts is not printed:
                    cast_callee = _cast_callee(stmt)
                    if cast_callee is not None:
                        # Typed-pointer IR called through "bitcast (@f ...)":
                        # a constant operand there, no call edge. LLVM 22 calls
                        # @f itself.
                        ops = ops[:-1] + [cast_callee]
                if op == "call" and ops and cast_callee is None:
                    callee = ops[-1]
                    if callee in self.fn_index and self.callee_matches(callee, inst, ops[:-1],
                                                                  printed[ordinal - 1]):
                        self.call_sites.append((node, callee))
                    if len(ops) == 2 and callee in self.lifetime:
                        # LLVM 22 drops llvm.lifetime.*'s size operand: put it
                        # back where the statement still has it.
                        m = _LIFETIME_SIZE.search(stmt)
                        if m is None and ops[0] in inst_ord:
                            # No source to read the size from (bitcode): the
                            # alloca's allocation size, as clang wrote it.
                            size = self.alloc_size(printed[inst_ord[ops[0]]])
                            if size is not None:
                                ptr = ops[0]
                                # Typed-pointer IR called it on "bitcast %a to
                                # i8*" just before; LLVM 22 looks through it.
                                for jj in range(ii - 1, max(ii - 4, -1), -1):
                                    prev = bl[jj]
                                    if (opcodes[inst_ord[prev]] == "bitcast"
                                            and ops_of[inst_ord[prev]][:1] == [ptr]):
                                        ptr = prev
                                        break
                                ops = [("i64", str(size)), ptr, ops[1]]
                        if m:
                            ptr = ops[0]
                            if m.group(2) and stmts is not printed:
                                # LLVM 22 also looks through the pointer's
                                # bitcast (typed-pointer IR): the source's value.
                                if named is None:
                                    named = _result_names(stmts, [i for bl in insts for i in bl])
                                ptr = named.get(m.group(2), ptr)
                            ops = [("i64", m.group(1)), ptr, ops[1]]
                for pos, v in enumerate(ops):
                    if type(v) is tuple:  # a switch case value (see switch_operands)
                        uses = const_uses.get(v)
                        if uses is None:
                            uses = const_uses[v] = []
                            const_order.append(v)
                            const_kind[v] = _CASE
                        uses.append((node, pos))
                        continue
                    k = kinds.get(v)
                    if k is None:
                        k = kinds[v] = kind_of(v)
                    if k == _INSTRUCTION:
                        var = self.add_node(VAR, self.programl_type(lib.LLVMPY_TypeOf(v)), None,
                                            fn, block, -1)
                        self.add_edge(DATA, var, node, pos)
                        producers.append((v, var))
                        results.append((var, v))
                    elif k == _FUNCTION:
                        # Typed-pointer IR: "i8* bitcast (... @f to i8*)" as an
                        # operand is a constant there; LLVM 22 folds it to @f.
                        if stmts is not printed and " bitcast (" in stmt and not (
                                pos == len(ops) - 1 and op in ("call", "invoke")):
                            c = _function_cast(stmt, _llvm_name(
                                "@", lib.LLVMPY_GetValueName(v) or b""))
                            if c is not None:
                                uses = const_uses.get(c)
                                if uses is None:
                                    uses = const_uses[c] = []
                                    const_order.append(c)
                                    const_kind[c] = _CASE
                                uses.append((node, pos))
                    elif k in _NOT_DATA:
                        pass
                    elif k == _ARGUMENT:
                        uses = arg_uses.get(v)
                        if uses is None:
                            uses = arg_uses[v] = []
                            arg_order.append(v)
                        uses.append((node, pos))
                    elif k in _CONSTANTS or lib.LLVMPY_IsConstant(v):
                        if k == _CONSTANT_INT:
                            v = self.int_key(v)
                        uses = const_uses.get(v)
                        if uses is None:
                            uses = const_uses[v] = []
                            const_order.append(v)
                            const_kind[v] = k
                        uses.append((node, pos))
                if first < 0:
                    first = node
                last = node
            block_ends.append((first, last))
            self.block_count += 1

        # Full text of variables: "<ProGraML type> <name>".
        strings = self.string_list
        for var, producer in results:
            stmt = stmts[inst_ord[producer]] if producer in inst_ord else ""
            eq = stmt.find(" = ")
            self.nfull[var] = strings[self.ntext[var]] + " " + (stmt if eq < 0 else stmt[:eq])

        if arg_order:
            unnamed = {}
            n = 0
            for a in _iterate(lib, lib.LLVMPY_FunctionArgumentsIter, lib.LLVMPY_ArgumentsIterNext,
                              lib.LLVMPY_DisposeArgumentsIter, f):
                if not lib.LLVMPY_GetValueName(a):
                    unnamed[a] = n
                    n += 1
            for a in arg_order:
                raw = lib.LLVMPY_GetValueName(a)
                name = _llvm_name("%", raw) if raw else f"%{unnamed.get(a, 0)}"
                ty = lib.LLVMPY_TypeOf(a)
                full = self.llvm_type_text(ty) + " " + name
                var = self.add_node(VAR, self.programl_type(ty), full, fn, self.block_count, -1)
                for consumer, pos in arg_uses[a]:
                    self.add_edge(DATA, var, consumer, pos)
        for producer, var in producers:
            node = inst_node.get(producer)
            if node is not None:
                self.add_edge(DATA, node, var, 0)

        # Control flow between blocks, breadth-first from the entry.
        exits = []
        entry = block_ends[0][0] if blocks else -1
        if blocks:
            seen = [False] * len(blocks)
            seen[0] = True
            queue = [0]
            qi = 0
            while qi < len(queue):
                b = queue[qi]
                qi += 1
                exit_node = block_ends[b][1]
                for pos, s in enumerate(succ[b]):
                    self.add_edge(CONTROL, exit_node, block_ends[s][0], pos)
                    if not seen[s]:
                        seen[s] = True
                        queue.append(s)
                if not succ[b]:
                    exits.append(exit_node)
        return entry, exits

    def finish(self) -> ProgramGraph:
        def offsets_and_bytes(items: List[bytes]):
            offs = np.zeros(len(items) + 1, dtype="<i8")
            if items:
                np.cumsum([len(x) for x in items], out=offs[1:])
            return offs, np.frombuffer(b"".join(items), dtype="|u1").copy()

        full_off, full_bytes = offsets_and_bytes([s.encode("utf-8") for s in self.nfull])
        table = self.string_list
        str_off, str_bytes = offsets_and_bytes([s.encode("utf-8") for s in table])
        fn_off, fn_bytes = offsets_and_bytes(self.fn_names)
        i4 = lambda x: np.asarray(x, dtype="<i4")  # noqa: E731
        u1 = lambda x: np.asarray(x, dtype="|u1")  # noqa: E731
        arrays = {
            "node_type": u1(self.ntype),
            "node_text": i4(self.ntext),
            "node_function": i4(self.nfn),
            "node_block": i4(self.nblock),
            "node_loop": i4(self.nloop),
            "node_full_text_offsets": full_off,
            "node_full_text_bytes": full_bytes,
            "edge_flow": u1(self.eflow),
            "edge_source": i4(self.esrc),
            "edge_target": i4(self.edst),
            "edge_position": i4(self.epos),
            "string_offsets": str_off,
            "string_bytes": str_bytes,
            "function_name_offsets": fn_off,
            "function_name_bytes": fn_bytes,
            "function_is_declaration": u1(self.fn_decl),
            "function_entry": i4(self.fn_entry),
            "loop_function": i4(self.loop_fn),
            "loop_header": i4(self.loop_header),
            "loop_depth": i4(self.loop_depth),
            "loop_parent": i4(self.loop_parent),
        }
        return ProgramGraph(arrays=arrays)


def build_graph_llvmlite(path: str | os.PathLike) -> ProgramGraph:
    """Build the graph of an LLVM module (``.ll`` or ``.bc``) with llvmlite."""
    path = os.fspath(path)
    module, text, ctx = _read_module(path)
    try:
        return _build(path, module, text)
    finally:
        # The module before its context (the garbage collector may not).
        module.close()
        ctx.close()


def _build(path: str, module, text: Optional[str]) -> ProgramGraph:
    lib = _ffi()
    mod = ctypes.cast(module._ptr, _VP).value
    functions = _iterate(lib, lib.LLVMPY_ModuleFunctionsIter, lib.LLVMPY_FunctionsIterNext,
                         lib.LLVMPY_DisposeFunctionsIter, mod)
    if not any(not lib.LLVMPY_IsDeclaration(f) for f in functions):
        raise GraphBuildError(f"{path}: empty module (no function definitions)")
    try:
        source = text if text is not None and text.startswith("; ModuleID = ") else None
        graph = _Builder(module, source).build()
    except GraphBuildError as exc:
        raise GraphBuildError(f"{path}: {exc}") from None
    major, minor = llvm.llvm_version_info[:2]
    graph.meta = {
        "format": "mirecc-graph", "version": 1,
        "producer": f"mirecc.graph.fallback (llvmlite {llvmlite.__version__}, LLVM {major}.{minor})",
        "llvm_major": major, "input": path,
        "source_filename": module.source_file, "target_triple": module.triple,
        "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
    }
    return graph
