"""The loop-nest schedules mirecc chooses between, and how one reaches clang.

A schedule is LLVM's own (``llvm``: nothing added) or Polly, LLVM's
polyhedral loop-nest optimiser (``-mllvm -polly``, in Debian's clang 14 and
19), with one of a few settings that moved run time on this machine
(``docs/loop-nests.md``): its defaults (tiles of 32, the
matrix-multiplication pattern), without that pattern, tiles of 64, tiles of
128 with second-level tiling, the strip-mine vectoriser.  Two more LLVM
knobs, unroll-and-jam and loop distribution, are timed in the dataset
(:data:`TIMED`) but are not candidates: 1.02x and 1.00x geomean, and they
are per-TU switches, not per function.

Polly runs on the functions :func:`flags` names (``-polly-only-func``,
anchored regexes): a function's nest and, where it is static, the callers
it is inlined into (Polly runs after the inliner).  Polly's settings are
per compile, so a TU gets at most one Polly schedule.

Standard library only.
"""
from __future__ import annotations

import re

_POLLY = ["-mllvm", "-polly"]

#: every timed configuration: name -> clang flags beside the user's -O
TIMED = {
    "llvm": [],
    "polly": _POLLY,
    "polly-no-matmul": [*_POLLY, "-mllvm", "-polly-pattern-matching-based-opts=false"],
    "polly-tile64": [*_POLLY, "-mllvm", "-polly-default-tile-size=64"],
    "polly-tile128-2nd": [*_POLLY, "-mllvm", "-polly-default-tile-size=128",
                          "-mllvm", "-polly-2nd-level-tiling"],
    "polly-stripmine": [*_POLLY, "-mllvm", "-polly-vectorizer=stripmine"],
    "unroll-and-jam": ["-mllvm", "-enable-unroll-and-jam"],
    "loop-distribute": ["-mllvm", "-enable-loop-distribute"],
}
#: the schedules a head ranks (``llvm`` is the compiler's own)
SPACE = ("polly", "polly-no-matmul", "polly-tile64", "polly-tile128-2nd", "polly-stripmine")

# -mllvm options by which a user already chose the loop-nest schedule
_USER_OPTIONS = re.compile(r"^-(polly|enable-unroll-and-jam|enable-loop-distribute)")


def flags(schedule: str, functions, patterns=()) -> list[str]:
    """The clang flags that give ``functions`` (and the functions the
    anchored regexes ``patterns`` match) the ``schedule``."""
    if schedule not in SPACE:
        raise ValueError(f"unknown loop-nest schedule {schedule!r} (known: {', '.join(SPACE)})")
    only = ",".join([f"^{re.escape(f)}$" for f in functions] + list(patterns))
    return [*TIMED[schedule], "-mllvm", f"-polly-only-func={only}"]


def user_schedule(args) -> str | None:
    """The user's own loop-nest option in a command (``-mllvm -polly...``,
    ``-mllvm -enable-unroll-and-jam``, ``-mllvm=...``), or None."""
    args = list(args)
    for i, a in enumerate(args):
        value = args[i + 1] if a == "-mllvm" and i + 1 < len(args) else \
            a[len("-mllvm="):] if a.startswith("-mllvm=") else None
        if value and _USER_OPTIONS.match(value):
            return value
    return None
