"""The rule from DESIGN.md: no evaluation kernel in the pretraining corpus.

Each defined function is reduced to a normalised text -- names of values,
globals and labels replaced by placeholders, metadata, attribute groups,
comments and version-dependent keywords removed -- and hashed.  A corpus
module that contains a function whose normalised hash equals one of an
evaluation kernel's functions is dropped.  The evaluation IR is LLVM 9, so
exact matches with clang-14 IR are rare; the check is there for copies.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from mirecc.ir.text import functions
from mirecc.learn.datasets import default_root

def default_eval_dirs() -> tuple[Path, Path]:
    """The evaluation kernels' IR, under :func:`mirecc.tasks.opencl.offline.datasets.default_root`."""
    root = default_root()
    return root / "devmap" / "kernels_ir", root / "thread_coarsening" / "kernels_ir"

_META = re.compile(r',?\s*!(?:[\w.]+\s+)?!\d+|,?\s*!\w[\w.]*\s*!\{[^}]*\}|![\w.]+')
_ATTRREF = re.compile(r'\s#\d+')
_LOCAL = re.compile(r'%(?:"[^"]*"|[-\w.$]+)')
_GLOBAL = re.compile(r'@(?:"[^"]*"|[-\w.$]+)')
_LABEL = re.compile(r'^([-\w.$]+|"[^"]*"):.*$')
_DROP_WORDS = re.compile(
    r'\b(?:dso_local|local_unnamed_addr|unnamed_addr|noundef|nonnull|nocapture|readonly|'
    r'writeonly|readnone|noalias|signext|zeroext|immarg|returned|nofree|'
    r'dereferenceable(?:_or_null)?\(\d+\)|align \d+)\s*')
_COMMENT = re.compile(r';.*$')
_WS = re.compile(r'\s+')
_SPACE_BEFORE = re.compile(r'\s+([,)\]])')
_EMPTY_COMMA = re.compile(r',\s*(?=,|$|\))')


def normalise_line(line: str) -> str:
    s = _COMMENT.sub("", line)
    if _LABEL.match(s.strip()):
        return "L:"
    s = _META.sub("", s)
    s = _ATTRREF.sub("", s)
    s = _DROP_WORDS.sub("", s)
    s = _LOCAL.sub("%v", s)
    s = _GLOBAL.sub("@g", s)
    s = _WS.sub(" ", s).strip()
    s = _SPACE_BEFORE.sub(r"\1", s)
    return _EMPTY_COMMA.sub("", s).strip()


def normalise_header(line: str) -> str:
    s = normalise_line(line.rstrip("{ "))
    s = s.replace(" %v", "")          # LLVM 9 prints unnamed parameters without names
    return _SPACE_BEFORE.sub(r"\1", _WS.sub(" ", s)).strip()


def function_hashes(text: str) -> set[str]:
    out = set()
    for _, header, body in functions(text):
        lines = [normalise_header(header)]
        lines += [n for n in (normalise_line(b) for b in body) if n]
        out.add(hashlib.sha256("\n".join(lines).encode()).hexdigest())
    return out


class EvalFilter:
    def __init__(self, dirs=None):
        dirs = default_eval_dirs() if dirs is None else dirs
        self.hashes: set[str] = set()
        self.files = 0
        for d in dirs:
            d = Path(d)
            if not d.is_dir():
                continue
            for f in sorted(d.glob("*.ll")):
                self.hashes |= function_hashes(f.read_text(errors="replace"))
                self.files += 1

    def matches(self, text: str) -> bool:
        return bool(self.hashes) and not self.hashes.isdisjoint(function_hashes(text))
