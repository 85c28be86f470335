"""The one reader of a module's text: the disassembler and the function bodies.

Everything in mirecc that reads IR as text reads it here: the per-TU
context (:class:`mirecc.taskapi.context.TUContext`, once per TU), the decisions
profile, ``mire tune``, the corpus statistics.  ``llvm-dis-14`` first (clang
14's printing), then newer ones for newer bitcode, then llvmlite.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess

#: an IR global's name: quoted (with ``\\XX`` escapes) or plain
NAME = r'(?:"(?:[^"\\]|\\[0-9A-Fa-f]{2})*"|[-\w.$]+)'
_DEFINE = re.compile(r"^define [^@]*@(" + NAME + r")\(")


class IRTextError(Exception):
    """Bitcode that no disassembler can read; ``str()`` names it."""


def disassemble(bitcode: bytes, name: str = "<module>") -> str:
    """Text of a bitcode module."""
    err = ""
    for dis in _disassemblers():
        proc = subprocess.run([dis, "-o", "-", "-"], input=bitcode, capture_output=True,
                              timeout=120)
        if proc.returncode == 0:
            return proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace").strip()[:300]
    try:
        import llvmlite.binding as llvm  # lazy: llvmlite (~100 ms), only where no llvm-dis runs
        return str(llvm.parse_bitcode(bitcode))
    except Exception as exc:  # llvmlite raises RuntimeError on bad input
        raise IRTextError(f"{name}: cannot read bitcode: {err or exc}") from None


def _disassemblers() -> list[str]:
    names = ["llvm-dis-14"] + [f"llvm-dis-{v}" for v in range(15, 23)] + ["llvm-dis"]
    return [p for p in dict.fromkeys(shutil.which(n) for n in names) if p]


def unquote(name: str) -> str:
    """A global's name as written in the source (quotes and escapes undone)."""
    if name.startswith('"') and name.endswith('"'):
        return decode(name[1:-1])
    return name


def decode(text: str) -> str:
    """An IR string literal's bytes (``\\XX`` escapes) as text."""
    raw = re.sub(rb"\\([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                 text.encode("utf-8"))
    return raw.decode("utf-8", "replace")


def functions(ir_text: str):
    """Yield (name, define line, body lines) for each defined function, in
    module order (name unquoted)."""
    header, name, body = None, None, []
    for line in ir_text.splitlines():
        if header is None:
            if line.startswith("define "):
                m = _DEFINE.match(line)
                header, name, body = line, unquote(m.group(1)) if m else "", []
        elif line.startswith("}"):
            yield name, header, body
            header = None
        else:
            body.append(line)


def function_bodies(ir_text: str) -> dict[str, list[str]]:
    """Function name (unquoted) -> its body lines, in module order."""
    return {name: body for name, _, body in functions(ir_text)}


# the digests of function bodies that decisions profiles carry
_METADATA = re.compile(r"!\d+\b")
# debug locations and variable records: present or not with -g, -Rpass...
_DEBUG_LOCATION = re.compile(r", !dbg !\d+")
_ATTRIBUTES = re.compile(r"#\d+\b")
_NUMBERED_GLOBAL = re.compile(r"(@\.?[\w.$]*?)\.\d+\b")


def function_digests(ir_text: str) -> dict[str, str]:
    """Function name -> digest of its body, with debug information (which
    ``-g`` or ``-Rpass`` adds) and the numbers that shift when code
    elsewhere in the module changes (metadata, attribute groups, ``.str.N``
    constants) left out."""
    out = {}
    for name, body in function_bodies(ir_text).items():
        text = "\n".join(_DEBUG_LOCATION.sub("", line) for line in body
                         if "@llvm.dbg." not in line and not line.lstrip().startswith("#dbg_"))
        text = _NUMBERED_GLOBAL.sub(r"\1", _ATTRIBUTES.sub("#", _METADATA.sub("!", text)))
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


# a call: the first value right before "(" after the opcode (its sigil,
# its name, then the rest of the line from its arguments; a type never
# touches its parenthesis, a cast's callee is followed by " to")
_CALL = re.compile(r"(?:^|\s)(?:call|invoke|callbr)\s.*?([@%])(" + NAME + r")\((.*)$")


def direct_call(line: str) -> tuple[str, str] | None:
    """(callee, the line from its arguments on) when ``line`` is a call site
    with an id: a call, invoke or callbr of a function named directly (not
    an intrinsic, not a cast or a pointer); else None.  The one rule the
    pass plugin numbers by (passes/plugin/FORMAT.md, "Call sites")."""
    m = _CALL.search(line)
    if not m or m.group(1) != "@":
        return None
    callee = unquote(m.group(2))
    return None if callee.startswith("llvm.") else (callee, m.group(3))


def call_sites(ir_text: str) -> dict[str, list[str]]:
    """Caller -> its call sites' callees, in layout order (:func:`direct_call`).
    Site ``k`` of ``f`` has the id ``f:call<k>``, as the pass plugin numbers
    them, in the IR as clang emits it before any optimisation."""
    out = {}
    for name, _header, body in functions(ir_text):
        out[name] = [call[0] for call in map(direct_call, body) if call]
    return out
