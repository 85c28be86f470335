"""What the code-size task does before a TU's IR is read: the object gate
(``CompileStep.gate``: is a search worth it on the user's own object?) and the
early step (``CompileStep.early``: the first candidate, built in a free job slot
while the user's own compile runs).

Both run on configure's probes: this module imports only the standard
library, :mod:`.build`'s ELF reader and, when the gate reads the installed
library, :mod:`.head`'s spec reader.
"""
from __future__ import annotations

from mirecc.frontend.compiler import clang_major
from mirecc.tasks.code_size.build import MIN_TEXT_BYTES, candidate_steps, gate_keeps
from mirecc.util.elf import object_sizes


def worth_searching(object_path: str, config=None, compiler: str = "") -> str | None:
    """The task's gate (``CompileStep.gate``): ``"too-small"`` when the user's own
    object has less than :data:`MIN_TEXT_BYTES` of ``.text``;
    ``"predicted-no-gain"`` when the installed object gate (:func:`gate_keeps`)
    keeps none of the candidates the budget would build (not with
    ``size_inline``: the policy's candidate is not the gate's to judge);
    else None.
    Here, not in :mod:`.verify`: what a probe compile imports is its cost
    (the too-small test reads the section table and nothing else)."""
    try:
        text = object_sizes(object_path)[1]
    except Exception:   # noqa: BLE001 - unreadable: let the ML path decide as before
        return None
    if text < MIN_TEXT_BYTES:
        return "too-small"
    if config is None or not compiler or not getattr(config, "size_gate", True):
        return None
    if getattr(config, "size_inline", False):
        # the gate predicts the library's candidates, not the inlining
        # policy's: with it on, the head reads the IR and the build step
        # gates the library's candidates alone
        return None
    try:
        spec, major, names = in_library_order(config, compiler)
        if not names:
            return None     # a ranker orders them after the IR is read: the build step gates
        with open(object_path, "rb") as fh:
            kept = gate_keeps(spec.get("gate", {}).get(major), fh.read(), names)
    except Exception:   # noqa: BLE001 - a gate never breaks the build: read the IR
        return None
    return None if kept is None or kept[0] else "predicted-no-gain"


def first_candidate(split, config, workdir: str):
    """The task's early step (``CompileStep.early``): the candidate the build step
    builds first at this budget, in the library's order (``(candidate,
    commands, object)``); None when a ranker orders them after the IR is
    read, or the budget builds none."""
    spec, major, names = in_library_order(config, split.compiler)
    if not names:
        return None
    candidate = spec["library"][major][names[0]]
    steps, obj = candidate_steps(split, candidate, [], workdir, "early")
    return candidate, steps, obj


def in_library_order(config, compiler: str) -> tuple[dict, str, list[str]]:
    """(the installed spec, ``compiler``'s LLVM major as text, the names the
    budget builds in the library's order), for the gate and the early step,
    which run before the IR is read; no names when a ranker orders them
    after it."""
    # lazy: the head's module, only when the early step or the gate runs
    from mirecc.tasks.code_size.head import budget_names, installed

    spec = installed(config)
    major = clang_major(compiler)
    if spec.get("ranker", {}).get(str(major)):
        return spec, str(major), []
    return spec, str(major), budget_names(spec, major, int(getattr(config, "size_search", 0) or 0),
                                          float(getattr(config, "size_budget", 1.0)))
