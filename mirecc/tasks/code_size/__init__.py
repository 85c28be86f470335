"""Code size: the smallest object among the user's own -Oz/-Os compile and
the top K pass pipelines of a candidate library, each compiled and measured.

A guess cannot make an object larger here: every candidate is built from the
TU's front-end bitcode (``opt -passes=<pipeline>``, then clang's back end on
the result), its ``.text`` bytes are counted, and the user's own object is
one of the candidates (it wins ties), so the result is never larger than
the user's level, and the same input always gives the same object.

Driver side: :mod:`.head` (ranks the library of ``heads/code-size/spec.yaml``:
in its own order, or by a forest on :mod:`.features` when the spec ships
one), :mod:`.build` (a candidate's object and its ``.text`` size),
:mod:`.verify` (the build step the driver calls after the user's own object
is made) and :mod:`.winners` (the winner cache, so a rebuild builds one).
Offline: :mod:`.offline` (``mire size-search``, ``size-check``,
``size-data``, ``size-train``, ``mire bench size``).

This module is the task's declaration: standard library only.
"""
from mirecc.tasks.api import Setting, Task


def _as_count(value):
    """K: a whole number >= 0 (0: off)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(f"expected a whole number >= 0, got {value!r}")


# the -O levels the task decides at (without "-O")
OPT_LEVELS = ("s", "z")
DEFAULT_K = 10

TASKS = (
    Task(
        "code-size",
        summary="with -Oz/-Os: the smallest object among the user's own and the top K "
                "pass pipelines, each compiled and measured",
        languages=("c", "c++"),
        head="mirecc.tasks.code_size.head:CodeSizeHead",
        applied_when="size_search",
        # the default, K = 10: on the held-out packages the first 10 of the
        # library reach 2.81% of the 2.89% smaller total .text that all 20
        # reach, the first 5 only 0.90% (`mire bench size`; docs/code-size.md)
        settings=(Setting("size_search", "MIRECC_SIZE_SEARCH", _as_count, DEFAULT_K,
                          "with -Oz or -Os, build the TU through this many candidate pass "
                          "pipelines besides the user's level and keep the smallest object "
                          "(0: off)"),),
        verify="mirecc.tasks.code_size.verify:smallest_object",
        measured="verified: every candidate is built, never more loadable bytes than your "
                 "level; Debian's zlib, bzip2, lua5.4 and sqlite3 3.9% less .text in total, "
                 "tests pass (docs/code-size.md)",
        opt_levels=OPT_LEVELS,
    ),
)
