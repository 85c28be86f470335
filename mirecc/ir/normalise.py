"""Normalised LLVM IR statements: the text the tokenizer and the encoder read.

One statement is one instruction as LLVM prints it (clang 14 through 22).
``normalise_statement`` applies a few rules, in this order, so that the same C
code compiled by clang 14 and by clang 19 gives mostly the same statements and
so that nothing specific to one module (its numbering, its names) reaches the
vocabulary.  ``docs/normalisation.md`` lists the rules with one example each;
``RULES`` below is the single source of those examples and a test checks both.

1. Debug info is dropped: ``call void @llvm.dbg.*(...)`` intrinsics and
   ``#dbg_*`` records (LLVM 19+) normalise to ``None``.
2. Metadata attachments (``, !dbg !12``, ``, !tbaa !5``, ``, !llvm.loop !7``,
   ``, !range``, ``, !noundef``...) are removed; any other ``!N`` metadata
   reference becomes ``!id``.
3. Attribute group references (``#3``) are removed.
4. Typed pointers (clang 14: ``i32*``, ``%struct.s**``, ``void (i8*)*``)
   become ``ptr`` (``ptr addrspace(N)`` keeps its address space), as clang 15+
   prints them; intrinsic names lose the pointee part of their type suffix
   (``@llvm.memcpy.p0i8.p0i8.i64`` -> ``@llvm.memcpy.p0.p0.i64``), and
   ``@llvm.va_start/va_end/va_copy`` lose the ``.p0`` that LLVM 19 added.
5. Constant expressions that only re-type a pointer collapse to the pointer,
   as clang 15+ prints them: ``getelementptr inbounds ([4 x i8], ptr @s,
   i64 0, i64 0)`` and ``bitcast (ptr @g to ptr)`` -> ``@g``.
6. Struct, union and class type names keep their kind only:
   ``%struct.node`` -> ``%struct``.
7. Global names become ``@id``, except LLVM intrinsics (``@llvm.*``), the C
   library / libm / POSIX threads / OpenMP runtime functions in
   ``KNOWN_GLOBALS`` and names starting with ``__kmpc_``/``omp_``: what they
   do is part of the program's meaning, a user function's name is not.
8. Local value and label names (``%5``, ``%call.i``, ``%for.body``) become
   ``%id``.
9. Parameter and return attributes (``noundef``, ``nonnull``, ``noalias``,
   ``nocapture``, ``signext``, ``dereferenceable(8)``, ``range(i32 0, 5)``...)
   are removed: clang versions differ most here and they describe the
   interface, not the computation. ``align N`` is kept.
10. Flags that only newer LLVM can print are removed: ``disjoint`` (or),
    ``nneg`` (zext, uitofp), ``samesign`` (icmp), ``nuw``/``nusw`` on
    ``getelementptr``, ``nuw``/``nsw`` on ``trunc``; likewise the size
    argument of ``llvm.lifetime.start/end``, which LLVM 22 removed.  ``nsw``/``nuw`` on
    arithmetic, ``exact``, ``inbounds`` and fast-math flags are kept: every
    version prints them and they change what the code may do.
11. Spaces are collapsed and the statement is lowercased (the tokenizer is
    lowercased too, so a normalised statement round-trips through it exactly).
12. A pointer-to-pointer ``bitcast`` (a no-op once pointers are opaque; clang
    15+ does not emit it) normalises to ``None``.

``None`` means "this statement carries nothing; leave it out".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "IRError", "KNOWN_GLOBALS", "RULES", "normalise_statement", "split_statements",
    "module_text", "module_statements",
]


class IRError(Exception):
    """An IR file could not be read (the message names the file and the problem)."""


# C library, libm, POSIX threads and OpenMP runtime names that keep their name
# (rule 7).  Kept short: the functions whose meaning a model can use.
KNOWN_GLOBALS = frozenset("""
malloc calloc realloc free aligned_alloc posix_memalign memcpy memmove memset
memcmp strlen strcmp strncmp strcpy strncpy strcat strchr strrchr strstr strdup
printf fprintf sprintf snprintf puts putchar fputs fputc fwrite fread fopen
fclose fflush scanf sscanf fgets getc getchar atoi atol atof strtol strtoul
strtod abort exit qsort bsearch rand srand time clock clock_gettime
sqrt sqrtf exp expf exp2 log logf log2 log10 pow powf sin sinf cos cosf tan
tanf atan atan2 fabs fabsf floor floorf ceil ceilf fmod fmin fmax fma round
lround tanh erf
pthread_create pthread_join pthread_mutex_lock pthread_mutex_unlock
__errno_location __assert_fail __stack_chk_fail __cxa_throw
__cxa_allocate_exception __cxa_begin_catch __cxa_end_catch __gxx_personality_v0
_znwm _znam _zdlpv _zdapv
""".split())
_KNOWN_PREFIXES = ("llvm.", "__kmpc_", "omp_")

_STR = re.compile(r'"[^"]*"')
_DEBUG = re.compile(r"^(#dbg_|(tail |notail |musttail )?call void @llvm\.dbg\.)")
_MD_ATTACH = re.compile(r',\s*![A-Za-z_][\w.]*\s+(?:!\d+|!\{[^}]*\}|!"[^"]*")')
_MD_REF = re.compile(r"!\d+")
_ATTR_GROUP = re.compile(r"\s*#\d+\b")
_TYPE_NAME = re.compile(r'%"?(struct|union|class)\.(?:[-\w.$:<>, ]*?"|[-\w.$]+)')
_GLOBAL = re.compile(r'@(?:"([^"]*)"|([-\w.$]+))')
# %struct/%union/%class without a name are already normal (rule 6): C has no
# variable of those names, so they are never locals.
_LOCAL = re.compile(r'%(?:"[^"]*"|(?!(?:struct|union|class)(?![-\w.$]))[-\w.$]+)')
_INTRINSIC_PTR = re.compile(r"\.p(\d+)[^.()\s]*")
_CONST_GEP0 = re.compile(
    r"getelementptr (?:inbounds )?\((?:[^(),]|\[[^\]]*\])+, (ptr(?: addrspace\(\d+\))?) "
    r"(@[\w.$]+)(?:, i(?:32|64) 0)+\)")
_CONST_BITCAST = re.compile(r"(?:bitcast|addrspacecast) \((ptr(?: addrspace\(\d+\))?) (@[\w.$]+) to ptr(?: addrspace\(\d+\))?\)")
_PARAM_ATTRS = re.compile(
    r"(?<![\w.%@])(?:noundef|nonnull|noalias|nocapture|readonly|readnone|writeonly|"
    r"signext|zeroext|inreg|returned|nofree|noext|immarg|"
    r"(?:dereferenceable|dereferenceable_or_null|range|captures|initializes|nofpclass)"
    r"\((?:[^()]|\([^()]*\))*\))(?![\w.])\s?")
_NEW_FLAGS = [   # (cheap substring guard, pattern, replacement)
    (" disjoint", re.compile(r"\b(or) disjoint\b"), r"\1"),
    (" nneg", re.compile(r"\b(zext|uitofp) nneg\b"), r"\1"),
    (" samesign", re.compile(r"\b(icmp) samesign\b"), r"\1"),
    ("getelementptr", re.compile(r"\b(getelementptr(?: inbounds)?)(?: nusw| nuw| inrange\(-?\d+, ?-?\d+\))+"), r"\1"),
    ("trunc n", re.compile(r"\b(trunc)(?: nuw| nsw)+"), r"\1"),
    ("@llvm.lifetime", re.compile(r"(@llvm\.lifetime\.(?:start|end)\.p\d+)\(i64 -?\d+, "), r"\1("),
]
_NOOP_CAST = re.compile(r"^(?:%id = )?bitcast (ptr(?: addrspace\(\d+\))?) \S+ to \1$")
_SPACES = re.compile(r"\s+")


# ---------------------------------------------------------------- pointers

_CLOSE = {")": "(", "]": "[", "}": "{", ">": "<"}


def _type_start(s: str, j: int) -> int:
    """Start index of the type that ends at s[j] (inclusive), scanning back."""
    while j >= 0 and s[j] == " ":
        j -= 1
    if j < 0:
        return 0
    if s[j] in _CLOSE:
        depth, k = 0, j
        while k >= 0:
            if s[k] in _CLOSE:
                depth += 1
            elif s[k] in "([{<":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        k = max(k, 0)
        if s[j] == ")":          # function type: the return type comes first
            return _type_start(s, k - 1)
        if s[j] == ">" and k + 1 < len(s) and s[k + 1] == "{":
            return k             # packed struct <{ ... }>
        if s[j] == "}" and k > 0 and s[k - 1] == "<":
            return k - 1
        return k
    k = j
    while k >= 0 and (s[k].isalnum() or s[k] in "_.$%-\x00\x01\x02"):
        k -= 1
    return k + 1


_ADDRSPACE_TAIL = re.compile(r"\s*addrspace\((\d+)\)\s*$")


def _opaque_pointers(s: str) -> str:
    """Rewrite every typed pointer type in s (strings masked) to ``ptr``."""
    while True:
        p = s.find("*")
        if p < 0:
            return re.sub(r"\x02(\d+)\x02", r" addrspace(\1)", s)
        head = s[:p]
        space = ""
        m = _ADDRSPACE_TAIL.search(head)
        if m:
            if m.group(1) != "0":
                space = f"\x02{m.group(1)}\x02"   # restored at the end, not re-read
            head = head[:m.start()]
        start = _type_start(head, len(head) - 1)
        s = head[:start] + "ptr" + space + s[p + 1:]


# ---------------------------------------------------------------- statements

def _global(m: re.Match) -> str:
    name = m.group(1) if m.group(1) is not None else m.group(2)
    if name.startswith("llvm."):
        if name.startswith(("llvm.va_start", "llvm.va_end", "llvm.va_copy")):
            return "@" + name.split(".p")[0]       # overloaded (.p0) only since LLVM 19
        return "@" + _INTRINSIC_PTR.sub(r".p\1", name)
    if name in KNOWN_GLOBALS or name.lower() in KNOWN_GLOBALS or name.startswith(_KNOWN_PREFIXES):
        return "@" + name
    return "@id"


def normalise_statement(text: str) -> str | None:
    """Normalise one LLVM IR instruction; ``None`` when it carries nothing.

    >>> normalise_statement("%7 = load i32, i32* %4, align 4, !dbg !64, !tbaa !53")
    '%id = load i32, ptr %id, align 4'
    """
    s = text.strip()
    if not s or _DEBUG.match(s):                                   # rule 1
        return None
    if "struct." in s or "union." in s or "class." in s:
        s = _TYPE_NAME.sub(lambda m: "%\x01" + m.group(1), s)      # rule 6
    if "@" in s:
        s = _GLOBAL.sub(_global, s)                                # rule 7
    strings: list[str] = []

    def _mask(m: re.Match) -> str:
        strings.append(m.group(0))
        return f"\x00{len(strings) - 1}\x00"

    if '"' in s:
        s = _STR.sub(_mask, s)
    if "!" in s:
        s = _MD_ATTACH.sub("", s)                                  # rule 2
        s = _MD_REF.sub("!id", s)
    if "#" in s:
        s = _ATTR_GROUP.sub("", s)                                 # rule 3
    if "*" in s:
        s = _opaque_pointers(s)                                    # rule 4
    s = _LOCAL.sub("%id", s)                                       # rule 8
    s = s.replace("%\x01", "%")
    if "(" in s:
        if "getelementptr" in s:
            s = _CONST_GEP0.sub(r"\2", s)                         # rule 5
        if "cast (" in s:
            s = _CONST_BITCAST.sub(r"\2", s)
        s = _PARAM_ATTRS.sub("", s)                                # rule 9
    for guard, pattern, repl in _NEW_FLAGS:                        # rule 10
        if guard in s:
            s = pattern.sub(repl, s)
    if strings:
        s = re.sub(r"\x00(\d+)\x00", lambda m: strings[int(m.group(1))], s)
    s = _SPACES.sub(" ", s).strip().lower()                        # rule 11
    s = s.replace("( ", "(").replace(" )", ")").replace(" ,", ",")
    if _NOOP_CAST.match(s):                                        # rule 12
        return None
    return s


# One example per rule, (input, output): docs/normalisation.md shows exactly
# these and tests/ir/test_normalise.py checks both the code and the document.
RULES: list[tuple[str, str, str, str | None]] = [
    ("1", "debug info is dropped",
     "call void @llvm.dbg.declare(metadata i32* %4, metadata !26, metadata !DIExpression()), !dbg !57",
     None),
    ("2", "metadata attachments are removed, other metadata refs become !id",
     "%19 = load i32, ptr %4, align 4, !dbg !64, !tbaa !53",
     "%id = load i32, ptr %id, align 4"),
    ("3", "attribute group references are removed",
     "%25 = call i32 @atoi(ptr %24) #8",
     "%id = call i32 @atoi(ptr %id)"),
    ("4", "typed pointers become ptr; intrinsic suffixes lose the pointee",
     "call void @llvm.memset.p0i8.i64(i8* align 16 %5, i8 0, i64 40, i1 false)",
     "call void @llvm.memset.p0.i64(ptr align 16 %id, i8 0, i64 40, i1 false)"),
    ("5", "pointer-only constant expressions collapse to the pointer",
     "%8 = call i32 (i8*, ...) @printf(i8* getelementptr inbounds ([4 x i8], [4 x i8]* @.str, i64 0, i64 0), i32 %7)",
     "%id = call i32 (ptr, ...) @printf(ptr @id, i32 %id)"),
    ("6", "struct/union/class names keep their kind only",
     "%12 = getelementptr inbounds %struct.body, ptr %11, i32 0, i32 2",
     "%id = getelementptr inbounds %struct, ptr %id, i32 0, i32 2"),
    ("7", "global names become @id except intrinsics and known library functions",
     "%3 = call double @compute(double %2, ptr @table)",
     "%id = call double @id(double %id, ptr @id)"),
    ("8", "local value and label names become %id",
     "br i1 %cmp.i, label %for.body, label %21",
     "br i1 %id, label %id, label %id"),
    ("9", "parameter and return attributes are removed (align N stays)",
     "%32 = call noalias noundef ptr @malloc(i64 noundef %31)",
     "%id = call ptr @malloc(i64 %id)"),
    ("10", "flags only newer LLVM prints are removed",
     "%5 = zext nneg i32 %4 to i64",
     "%id = zext i32 %id to i64"),
    ("11", "spaces collapsed, lowercased",
     "%6 = fadd  double %5, 0x3FF0000000000000",
     "%id = fadd double %id, 0x3ff0000000000000"),
    ("12", "pointer-to-pointer bitcasts are dropped",
     "%17 = bitcast i32* %6 to i8*",
     None),
]


# ---------------------------------------------------------------- modules

_CONTINUATION = ("catch ", "filter ", "cleanup")


def split_statements(text: str) -> Iterator[str]:
    """The raw instruction lines of a module's text, one statement each.

    Only lines inside ``define ... {`` / ``}`` bodies; labels and comments are
    skipped; a ``switch``'s ``[ ... ]`` case list and a ``landingpad``'s
    clauses are joined onto their instruction.
    """
    in_body = False
    pending: list[str] = []
    open_bracket = False
    for line in text.splitlines():
        if not in_body:
            if line.startswith("define ") and line.rstrip().endswith("{"):
                in_body = True
            continue
        if line.startswith("}"):
            if pending:
                yield " ".join(pending)
                pending = []
            in_body = open_bracket = False
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(";") or not line[:1].isspace():
            continue                                   # blank, comment, label
        if open_bracket:
            pending.append(stripped)
            if stripped.startswith("]"):
                open_bracket = False
            continue
        if pending and stripped.startswith(_CONTINUATION):
            pending.append(stripped)
            continue
        if pending:
            yield " ".join(pending)
        pending = [stripped]
        open_bracket = stripped.endswith("[")
    if pending:
        yield " ".join(pending)


def module_text(path: str | Path) -> str:
    """The text of an IR module (``.ll`` or bitcode), parsed by llvmlite.

    Bitcode is printed once with llvmlite (printing functions one by one
    renumbers the module and is ~100x slower).  Raises ``IRError`` naming the
    file for a missing file, non-UTF-8 text or anything LLVM cannot parse.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IRError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise IRError(f"{path}: is a directory, not an IR file") from None
    except OSError as exc:
        raise IRError(f"{path}: cannot read: {exc.strerror or exc}") from None
    # lazy: llvmlite (~100 ms); the encoder's statement normaliser above needs none
    import llvmlite.binding as llvm
    if data[:4] == b"BC\xc0\xde" or data[:4] == b"\xde\xc0\x17\x0b":
        try:
            return str(llvm.parse_bitcode(data))
        except Exception as exc:
            raise IRError(f"{path}: not valid LLVM bitcode: {_first_line(exc)}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IRError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                      f"{exc.start}); expected LLVM IR (.ll) or bitcode (.bc)") from None
    try:
        llvm.parse_assembly(text).verify()
    except Exception as exc:
        raise IRError(f"{path}: not valid LLVM IR: {_first_line(exc)}") from None
    return text


def _first_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return " ".join(lines[:2])[:300] or type(exc).__name__


def module_statements(path: str | Path, normalise: bool = True) -> list[str]:
    """All statements of an IR file in order, normalised (dropping ``None``s)."""
    raw = split_statements(module_text(path))
    if not normalise:
        return list(raw)
    return [n for n in map(normalise_statement, raw) if n is not None]


def normalise_all(statements: Iterable[str]) -> list[str]:
    """Normalise many statements, dropping those that carry nothing."""
    return [n for n in map(normalise_statement, statements) if n is not None]
