"""Functions compiled in versions and chosen at run time (``adapt_loops``):
what the tasks that offer versions share.

A head that offers versions (loop-vectorize: each loop's best factors;
loop-nests: its schedule, Polly on a clone of its own) decides, per
function, a ``versions`` entry of the plugin's decisions file (FORMAT.md,
"Function versions"); the plugin layer merges two tasks' entries for one
function (:func:`mirecc.plugin.decisions.merge_versions`), the pass plugin
compiles them with a dispatch, and the adaptive runtime linked into the
program (:data:`RUNTIME`) tries them in its runs.  The settings are
declared here, once, and listed by each task that reads them.

Standard library and :mod:`mirecc.taskapi` only: the tasks' declarations
import it, and they are read on every compile.
"""
from __future__ import annotations

from mirecc.runtime.link import AdaptiveRuntime
from mirecc.taskapi.settings import Setting, as_bool, as_positive_int


def _versions(text: str) -> int:
    n = as_positive_int(text)
    if not 2 <= n <= 8:
        raise ValueError("must be 2..8 (LLVM's own version among them)")
    return n


ADAPT_LOOPS = Setting(
    "adapt_loops", "MIRECC_ADAPT_LOOPS", as_bool, False,
    "compile each function whose loops a head expects to gain in a few versions (LLVM's, "
    "the loop-vectorize head's best factors, the loop-nests head's schedule); the runtime "
    "linked into the program tries them in its runs and keeps what measures faster (wins "
    "over apply_loop_decisions and apply_loop_nests)")
ADAPT_VERSIONS = Setting(
    "adapt_versions", "MIRECC_ADAPT_VERSIONS", _versions, 3,
    "versions per function with adapt_loops from the loop-vectorize head, LLVM's own among "
    "them (each one a copy of the function's code); a function with a loop nest gets one "
    "more, the loop-nests head's schedule")


def _unroll(text: str) -> int:
    n = int(str(text).strip())
    if n != 0 and (not 1 <= n <= 16 or n & (n - 1)):
        raise ValueError("must be 0 (none) or a power of two in 1..16")
    return n


ADAPT_UNROLL = Setting(
    "adapt_unroll", "MIRECC_ADAPT_UNROLL", _unroll, 0,
    "with adapt_loops, one more version per function the loop-vectorize head versions: "
    "LLVM's vector factors and each of its innermost loops unrolled this many times after "
    "the vectorizer (1: not unrolled; 0, the default: no such version), tried after the "
    "head's factors")
#: the versions a function may have, LLVM's own among them (the runtime's arms)
ARMS = 8
#: with adapt_loops, a call that links carries the adaptive runtime
RUNTIME = AdaptiveRuntime("adapt_loops")
#: a clone's tag for a version that Polly schedules: its clone is
#: ``<fn>.mirecc.v<i>.polly``, kept out of line so that ``-polly-only-func``
#: reaches it by name
POLLY_TAG = "polly"
#: functions clang outlines from OpenMP regions: not versioned (adapt_openmp
#: decides their regions)
OPENMP_OUTLINED = (".omp_outlined", "__omp_offloading")


def versionable(function: str) -> bool:
    """May a head offer ``function`` versions?  Not ``main``: its time is the
    whole program's, so a version of it would be judged on everything the
    program does, one version per run (on the held-out kernels it was still
    exploring after eight runs); the functions it calls are versioned
    instead.  Not a function clang outlined from an OpenMP region
    (:data:`OPENMP_OUTLINED`)."""
    return function != "main" and not function.startswith(OPENMP_OUTLINED)


def adapting(config) -> bool:
    return bool(getattr(config, ADAPT_LOOPS.key, False))


def versions_of(config) -> int:
    """``adapt_versions`` under ``config`` (its default where unset)."""
    return getattr(config, ADAPT_VERSIONS.key, ADAPT_VERSIONS.default)


def unroll_of(config) -> int:
    """``adapt_unroll`` under ``config`` (its default where unset)."""
    return getattr(config, ADAPT_UNROLL.key, ADAPT_UNROLL.default)


def is_versions(decision) -> bool:
    """A function's versions (a ``versions`` entry), not a decision applied
    to the function itself (one loop's factors, a schedule)."""
    return isinstance(decision.value, dict) and "versions" in decision.value


def entry(source: str, function: str, digest: str, versions: list[dict]) -> dict:
    """A function's ``versions`` entry: its key in the runtime's store is a
    digest of its code and its versions (new versions, new verdicts)."""
    import hashlib  # lazy: adapt_loops only
    import json

    key = hashlib.sha256(json.dumps([digest, versions], sort_keys=True)
                         .encode()).hexdigest()[:16]
    return {"key": key, "name": f"{source} {function}", "versions": versions}


def tagged_clones(function: str, tag: str) -> str:
    """An anchored regex for ``function``'s clones tagged ``tag``, whatever
    their place among the versions (``-polly-only-func``)."""
    import re  # lazy: adapt_loops only

    return f"^{re.escape(function)}\\.mirecc\\.v[0-9]+\\.{tag}$"
