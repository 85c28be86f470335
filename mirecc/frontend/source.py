"""C-family source text as the tasks that read sources scan it (OpenCL C
kernels, CUDA launches and their block-shape knobs): comments and literals
blanked with every offset and line kept, the bracket that closes another,
and the comma-separated pieces of an argument or parameter list.

Text-level only: no preprocessing, no parsing beyond brackets.
"""
from __future__ import annotations

import re

_COMMENT_OR_LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/',
                                 re.S)
_LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')


def _spaces(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def blank(text: str, comments: bool = True, literals: bool = True) -> str:
    """``text`` with its comments (``comments``) and the insides of its
    string and character literals (``literals``; the quotes stay) turned
    into spaces: the same length, newlines kept, so offsets and line numbers
    hold.  One scan: a ``//`` inside a string is no comment, a quote inside
    a comment no string."""
    def one(m):
        if m[0][0] in "\"'":
            return m[0][0] + _spaces(m[0][1:-1]) + m[0][-1] if literals else m[0]
        return _spaces(m[0]) if comments else m[0]
    return (_COMMENT_OR_LITERAL if comments else _LITERAL).sub(one, text)


def matching(text: str, start: int, open_: str = "{", close: str = "}") -> int:
    """The index just past the bracket that closes the one at
    ``text[start]``; -1 where none does."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def pieces(text: str, start: int, close: str) -> tuple[list[tuple[str, int]], int]:
    """The comma-separated pieces at bracket depth 0 from ``start`` to
    ``close``, as written, each with its offset, and the index of ``close``
    (the text's end where there is none)."""
    args, depth, begin = [], 0, start
    i = start
    while i < len(text):
        if depth == 0 and text.startswith(close, i):
            break
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append((text[begin:i], begin))
            begin = i + 1
        i += 1
    args.append((text[begin:i], begin))
    return args, i
