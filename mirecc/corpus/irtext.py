"""Reading a module's text and counting what the report needs.

Statistics come from the textual IR (:mod:`mirecc.ir.text`), so
statements are printed the way clang 14 prints them.  Counts:

- functions: ``define`` bodies;
- statements: instruction lines inside bodies (labels, braces, comments out);
  unique statements by exact printed text, and after mirecc.ir's
  normalisation (``normalise_statement``) when that module is present;

Graph sizes are not counted here: the report builds each module's real
ProGraML-schema graph with mirecc.graph.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from mirecc.ir.text import functions

_COMMENT = re.compile(r'\s*;.*$')




def statement(line: str) -> str | None:
    """The statement on a body line, or None for labels, blanks, comments."""
    if not line or line[0] not in " \t":
        return None
    s = _COMMENT.sub("", line).strip()
    return s or None


@dataclass
class ModuleStats:
    functions: int = 0
    statements: int = 0
    statement_hashes: set[bytes] = field(default_factory=set)
    normalised_hashes: set[bytes] | None = None

    def as_dict(self) -> dict:
        return {"functions": self.functions, "statements": self.statements,
                "unique_statements": len(self.statement_hashes),
                "unique_normalised_statements": None if self.normalised_hashes is None
                else len(self.normalised_hashes)}


def stmt_hash(s: str) -> bytes:
    return hashlib.blake2b(s.encode(), digest_size=8).digest()


def _normaliser():
    """mirecc.ir's statement normaliser, when that package is there."""
    try:
        # lazy: optional by design (None without mirecc.ir's normaliser)
        from mirecc.ir.normalise import normalise_statement
        return normalise_statement
    except ImportError:
        return None


def normalised_hashes(text: str) -> set[bytes] | None:
    """Hashes of the module's statements after mirecc.ir normalisation."""
    norm = _normaliser()
    if norm is None:
        return None
    out = set()
    for _, _, body in functions(text):
        for line in body:
            s = statement(line)
            if s is not None:
                n = norm(s)
                if n:
                    out.add(stmt_hash(n))
    return out


def module_stats(text: str) -> ModuleStats:
    st = ModuleStats()
    st.normalised_hashes = normalised_hashes(text)
    for _, _, body in functions(text):
        st.functions += 1
        for line in body:
            s = statement(line)
            if s is None:
                continue
            st.statements += 1
            st.statement_hashes.add(stmt_hash(s))
    return st
