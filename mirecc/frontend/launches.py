"""Where a CUDA source's kernel launches are and what sets their block shape,
read from the source text (the front end's part of the CUDA launch
analysis; the knobs of ordinary code are :mod:`.knobs`'s):

* launches marked with mirecc/launch.h (``MIRECC_BLOCK_X/Y(kernel,
  default)``, the header in :data:`HEADER_DIR`);
* PolyBench-ACC's ``#define DIM_THREAD_BLOCK[_KERNEL_<n>]_X/Y <int>``, with
  where each is defined and whether under a condition;
* every ``<<<grid, block>>>`` launch of the source's folder, its block and
  grid as written (a ``dim3`` variable's ``.x``/``.y`` spelled out).

:func:`scan_source` reads a source and the files it includes; what a shape
may be set to, and the plans that set it, are the CUDA block-shape task's
(:mod:`mirecc.tasks.cuda_block.launches`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.frontend.nvcc import NvccCommand
from mirecc.frontend.source import blank, pieces

#: where mirecc/launch.h lives (MIRECC_BLOCK_X/Y), put on a compile's include path
HEADER_DIR = Path(__file__).resolve().parents[1] / "data" / "include"
LAUNCH_HEADER = "mirecc/launch.h"
#: PolyBench-ACC's block-shape macros: per source, or per launch (_KERNEL_<n>_)
BLOCK_MACRO = re.compile(r"\bDIM_THREAD_BLOCK(?:_KERNEL_\d+)?_[XY]\b")
AXES = ("x", "y")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w+)[ \t]*(.*)")
_HEADER_USE = re.compile(r"\bMIRECC_BLOCK_([XY])\s*\(")
_LAUNCH = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>;(){}]*>\s*)?<<<")


def _spaced_launches(code: str) -> str:
    """``k << < g, b >> > ()`` (as some formatters write a launch) as
    ``k<<<g, b>>>``, padded so that offsets hold."""
    def join(m):
        return ("<<<" + " " * (len(m[1]) - 3) + m[2] + ">>>" + " " * (len(m[3]) - 3))
    return re.sub(r"(<<\s+<)([^;<>]*?)(>>\s*>)", join, code)


def _arguments(text: str, start: int, close: str = ")") -> tuple[list[str], int]:
    """The comma-separated arguments from ``text[start]`` (just after an
    opening bracket) to the ``close`` at depth 0, and the index after it."""
    args, at = pieces(text, start, close)
    return [a.strip() for a, _ in args], min(at + len(close), len(text))


@dataclass
class Define:
    """One ``#define``/``#undef`` of a block-shape macro."""
    macro: str
    value: int | None       # None: not a plain positive integer (or an #undef)
    file: str
    line: int               # 0-based
    nested: bool            # inside an #if other than the include guard


@dataclass
class Launch:
    kernel: str             # the name before <<<, as written
    block: list[str]        # the block's x and y as written ("?" unknown)
    grid: list[str]         # the grid's x and y, the block variable's .x/.y spelled out


@dataclass
class Scan:
    """What the source and the files it includes say about launches."""
    source: str                                   # as given to nvcc
    folder: str                                   # its folder, absolute
    folder_files: dict[str, str] = field(default_factory=dict)  # path -> name as included
    included_from_outside: set[str] = field(default_factory=set)
    uses_header: bool = False
    header: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> axis -> default
    launches: list[Launch] = field(default_factory=list)
    defines: dict[str, list[Define]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)    # path -> code, comments blanked


def _include_dirs(cmd: NvccCommand) -> list[str]:
    pp = cmd.preprocessor
    return [pp[i + 1] for i in range(len(pp) - 1) if pp[i] == "-I"]


def scan_source(source: str, cmd: NvccCommand, limit: int = 400) -> Scan:
    """Read ``source`` and the files it includes that are found in its folder
    or the command's -I folders (system headers are not followed; #if is
    not evaluated, so every #include counts)."""
    root = os.path.normpath(os.path.abspath(source))
    scan = Scan(source, os.path.dirname(root))
    dirs = _include_dirs(cmd)
    names, texts, todo = {root: source}, {}, [root]
    while todo and len(texts) < limit:
        path = todo.pop()
        if path in texts:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                texts[path] = _spaced_launches(blank(fh.read(), literals=False))
        except OSError:       # nvcc says so, if it matters
            texts[path] = ""
        for quote, spelled in _INCLUDE.findall(texts[path]):
            scan.uses_header |= spelled.strip() == LAUNCH_HEADER
            here = [os.path.dirname(names[path])] if quote == '"' else []
            for d in here + dirs:    # the name the preprocessor gives it: dir/spelling
                found = os.path.normpath(os.path.abspath(os.path.join(d, spelled)))
                if os.path.isfile(found):
                    names.setdefault(found, os.path.join(d, spelled))
                    if (os.path.dirname(found) == scan.folder
                            and os.path.dirname(path) != scan.folder):
                        scan.included_from_outside.add(found)
                    todo.append(found)
                    break
    scan.texts = texts
    for path, code in texts.items():
        if path.endswith(os.sep + LAUNCH_HEADER.replace("/", os.sep)):
            continue          # the header's own definitions are no launch
        if os.path.dirname(path) == scan.folder:
            scan.folder_files[path] = names[path]
            scan.launches += _launches(code)
        _header_uses(code, scan.header)
        for d in _block_defines(path, code):
            scan.defines.setdefault(d.macro, []).append(d)
    return scan


def _header_uses(code: str, into: dict) -> None:
    for m in _HEADER_USE.finditer(code):
        args, _ = _arguments(code, m.end())
        if len(args) == 2 and re.fullmatch(r"[A-Za-z_]\w*", args[0]):
            into.setdefault(args[0], {})[m[1].lower()] = " ".join(args[1].split())


def _block_defines(path: str, code: str) -> list[Define]:
    lines = code.split("\n")
    directives = [(i, m[1], m[2].strip()) for i, ln in enumerate(lines)
                  if (m := _DIRECTIVE.match(ln))]
    # an include guard (#ifndef G / #define G first) is not a condition
    guard = (len(directives) > 1 and directives[0][1] == "ifndef"
             and directives[1][1] == "define" and directives[1][2] == directives[0][2])
    out, depth = [], 0
    for i, word, rest in directives:
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            depth -= 1
        elif word in ("define", "undef") and rest:
            name, value = (rest.split(None, 1) + [""])[:2]
            if BLOCK_MACRO.fullmatch(name):
                number = re.fullmatch(r"\(?\s*([1-9]\d*)\s*\)?", value.strip())
                out.append(Define(name, int(number[1]) if number and word == "define" else None,
                                  path, i, depth > (1 if guard else 0)))
    return out


def _launches(code: str) -> list[Launch]:
    # a string's text is no launch (printf("k<<<%d>>>")): blanked, offsets kept
    code = blank(code, comments=False)
    out = []
    for m in _LAUNCH.finditer(code):
        config, _ = _arguments(code, m.end(), ">>>")
        if len(config) < 2:
            continue
        grid, _ = _dim3(config[0], code)
        block, var = _dim3(config[1], code)
        for axis, written in zip(AXES, block) if var else ():
            # grid(n / block.x): the block's x as written
            grid = [re.sub(rf"\b{var}\s*\.\s*{axis}\b", f" {written} ", g) for g in grid]
        out.append(Launch(m[1], block, grid))
    return out


def _dim3(expr: str, code: str) -> tuple[list[str], str | None]:
    """The x and y of a launch's grid or block expression ("?" where it
    cannot be told), and the dim3 variable's name when it is one."""
    inline = re.fullmatch(r"dim3\s*[({](.*)[)}]", expr, re.S)
    if inline:
        return _pad(_arguments(inline[1] + ")", 0)[0]), None
    if not re.fullmatch(r"[A-Za-z_]\w*", expr):
        return [expr, "1"], None       # a plain number of threads
    found = set()
    for m in re.finditer(rf"\bdim3\s+{expr}\s*(?:=\s*dim3\s*)?([({{])", code):
        args, _ = _arguments(code, m.end(), ")" if m[1] == "(" else "}")
        found.add(tuple(_pad(args)))
    if not found:
        return [expr, "1"], None       # an integer variable or macro
    return (list(found.pop()) if len(found) == 1 else ["?", "?"]), expr


def _pad(args: list[str]) -> list[str]:
    args = [" ".join(a.split()) for a in args if a.strip()]
    return (args + ["1", "1"])[:2]
