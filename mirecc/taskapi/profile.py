"""Decisions profiles: decisions measured on the user's own runs (``mire
tune``), applied by later builds, as ``-fprofile-use`` applies a profile.

A profile (``profile: FILE`` in ``.mirecc.yaml``, ``MIRECC_PROFILE``) is
text, one decision site per line, fields separated by whitespace::

    # mirecc decisions profile 1
    loop-vectorize  src/kernel.c  saxpy:1  7d0c2e91a4b3f605  vectorize.width=4,interleave.count=2  # 1.21x
    openmp          src/cov.c     kernel_covariance:0  5e1f0c9a2b7d3e48  threads=2,schedule=static,chunk=8
    cuda-block      src/gemm.cu   gemm_kernel@LARGE_DATASET  0b1c2d3e4f5a6b7c  64x4  # 1.10x

* the task, the source (relative to the profile's folder, or absolute),
* the target (the task's kind says how it is written: a loop id
  ``<function>:<header>``, a parallel region's ``<function>:<n>``, a
  kernel's name with an optional input-size class ``@MACRO``),
* the digest of the target's function in the IR as clang emits it
  (:func:`function_digests`: debug information, and metadata and
  string-constant numbers, which shift when code elsewhere changes, are
  left out), so that a decision stays with unchanged code after edits
  elsewhere and a changed function drops it (a *stale* entry: ignored,
  counted in ``--explain``),
* the value (``key=value`` pairs, integers where they are digits, unless the
  task's kind writes it otherwise, e.g. a block shape ``XxY``);
* ``#`` starts a comment.

A matching entry replaces the head's decision for its target (or adds one
where no head decided), applied: the user's measurements beat the head's
guess.  Which tasks take entries, and how, the tasks declare
(``Task.profile_kind()``: a :class:`ProfileKind`); only tasks whose decision value
is the whole of what reaches the compile take them.  ``mirecc`` applies the
entries of kinds whose ``front_end`` is ``mirecc`` (:func:`apply_profile`),
``mirecc-nvcc`` its own.  Reading a profile is pure Python over the IR the
ML path already has; a build without a profile pays nothing.
"""
from __future__ import annotations

import os
import re

from mirecc.ir.text import disassemble, function_digests
from mirecc.taskapi.records import Decision, TUResult
from mirecc.taskapi.registry import tasks

FORMAT_LINE = "# mirecc decisions profile 1"


class ProfileError(Exception):
    """A profile that cannot be read; ``str()`` names the file and line."""


class ProfileKind:
    """How one task's decisions are written in a profile, applied, and found
    by ``mire tune``.  A task declares its kind (``Task.profile_kind()``); this
    base is an entry whose target is ``<function>:<id>`` and whose value is
    ``key=value`` pairs, applied by ``mirecc`` and carrying its function's
    digest."""

    #: the driver that applies the entries: ``mirecc`` (:func:`apply_profile`)
    #: or ``mirecc-nvcc``
    front_end = "mirecc"
    #: what a target is, in messages
    noun = "site"
    target_help = "a target <function>:<id>"
    #: ``mire tune``: at the same share of the run, lower goes first (a
    #: site whose value reaches the others' work before them)
    order = 1

    def check_target(self, target: str) -> bool:
        return ":" in target

    def function(self, target: str) -> str:
        """The function whose digest the entry carries."""
        return target.rsplit(":", 1)[0]

    def size_class(self, target: str) -> str | None:
        """The macro a compile must define for the entry to apply (None: any)."""
        return None

    def parse_value(self, text: str) -> dict:
        """The value as written -> a dict; ValueError saying what was expected."""
        return key_values(text)

    def format_value(self, value: dict) -> str:
        return ",".join(f"{k}={v}" for k, v in value.items())

    def resolve(self, entry, decision, digests: dict[str, str]):
        """(digest of the entry's code now, the value to apply) for ``entry``;
        ``decision``: the head's decision for the same target in this build,
        or None; None when the entry cannot be applied without one."""
        return digests.get(self.function(entry.target)), entry.value

    def site(self, decision: dict, source: str, digests: dict[str, str], depths):
        """The ``mire tune`` site of a recorded decision (a dict: task,
        source, target, function, digest, candidates, gains, score, depth,
        order; ``sampled``: False where the host's perf samples cannot weigh
        it, a CUDA kernel), or None.  ``gains``: the head's predicted log
        speedup of each candidate over the compiler's own, in the order of
        ``candidates`` (0 where it predicts none; a kind that gives none gets
        :meth:`gains`'s); ``score``: the best of the head's scores.
        ``digests``: function -> digest of the TU (from its IR, or for a
        front end that keeps none, the decisions' own ``digest``);
        ``depths()``: loop id -> nesting depth of the TU."""
        return None

    def gains(self, decision: dict, site: dict) -> list[float]:
        """The predicted log speedups of ``site``'s candidates where its kind
        gave none: the recorded decision's scores (the heads' log speedups
        over the compiler's own) of its candidates other than the compiler's
        own (``{}``), where they pair one for one with the site's (a kind
        that keeps the head's order and drops only the compiler's own), else
        none predicted (0)."""
        ranked = [float(s) for v, s in decision.get("candidates") or () if v]
        candidates = site.get("candidates") or []
        return ranked if len(ranked) == len(candidates) else [0.0] * len(candidates)

    #: whether the adaptive runtime (:mod:`mirecc.runtime`) decides these
    #: sites too, so that an entry can seed its store (:meth:`adapt_arm`)
    adapts = False

    def adapt_arm(self, value: dict, cores: int) -> str | None:
        """The adaptive runtime's name for the configuration ``value`` on a
        machine with ``cores`` (None: the runtime has no name for it)."""
        return None


def key_values(text: str) -> dict:
    """``key=value[,key=value]`` (integers where they are digits)."""
    value = {}
    for part in text.split(","):
        key, eq, raw = part.partition("=")
        if not eq or not key:
            raise ValueError("expected key=value[,key=value]")
        value[key] = int(raw) if raw.lstrip("-").isdigit() else raw
    return value


_KINDS: dict | None = None


def kinds() -> dict:
    """task name -> its :class:`ProfileKind`, for every task that takes
    entries (read from the registry once per process)."""
    global _KINDS
    if _KINDS is None:
        _KINDS = {name: t.profile_kind() for name, t in tasks().items()
                  if t.has("profile_kind")}
    return _KINDS


class Entry:
    __slots__ = ("task", "source", "target", "digest", "value", "comment", "line", "kind")

    def __init__(self, task, source, target, digest, value, comment, line, kind=None):
        self.task, self.source, self.target = task, source, target
        self.digest, self.value, self.comment, self.line = digest, value, comment, line
        self.kind = kind if kind is not None else kinds()[task]

    @property
    def function(self) -> str:
        """The function (or kernel) the entry is for."""
        return self.kind.function(self.target)

    @property
    def size_class(self) -> str | None:
        return self.kind.size_class(self.target)


def read_profile(path: str) -> list[Entry]:
    """The entries of the profile at ``path``; ProfileError naming the file
    and line for anything malformed."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the decisions profile: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    base = os.path.dirname(os.path.abspath(path))
    entries = []
    for number, line in enumerate(lines, 1):
        entry = parse_entry(line, base, f"{path}:{number}")
        if entry is not None:
            entry.line = number
            entries.append(entry)
    return entries


def parse_entry(line: str, base: str, where: str) -> Entry | None:
    """One profile line as an :class:`Entry` (its source joined to
    ``base``), None for a blank or comment line; ProfileError naming
    ``where`` for anything malformed."""
    known = kinds()
    text, _, comment = line.partition("#")
    fields = text.split()
    if not fields:
        return None
    if len(fields) != 5:
        raise ProfileError(f"{where}: expected 5 fields (task source target digest "
                           f"value), found {len(fields)}")
    task, source, target, digest, value = fields
    kind = known.get(task)
    if kind is None:
        raise ProfileError(f"{where}: task {task!r} cannot take profile entries "
                           f"(only {', '.join(known)})")
    if not kind.check_target(target):
        raise ProfileError(f"{where}: target {target!r}: expected {kind.target_help}")
    if not re.fullmatch(r"[0-9a-f]{16}", digest):
        raise ProfileError(f"{where}: expected a 16-hex-digit function digest, "
                           f"found {digest!r}")
    try:
        parsed = kind.parse_value(value)
    except ValueError as exc:
        raise ProfileError(f"{where}: value {value!r}: {exc}") from None
    return Entry(task, os.path.normpath(os.path.join(base, source)), target, digest, parsed,
                 comment.strip(), 0, kind)


def format_entry(task: str, source: str, target: str, digest: str, value: dict,
                 comment: str = "") -> str:
    """One profile line (what ``mire tune`` writes)."""
    pairs = kinds()[task].format_value(value)
    return f"{task}  {source}  {target}  {digest}  {pairs}" + (f"  # {comment}"
                                                               if comment else "")


def apply_profile(result, request, path: str):
    """``result`` (a TUResult) with the profile's entries for ``request``'s
    source applied: a matching entry replaces the head's decision for its
    target, or adds one; stale entries are counted in a reason."""
    source = os.path.normpath(os.path.join(request.cwd or os.getcwd(), request.source))
    # entries of other front ends (mirecc-nvcc's) never match a source here
    entries = [e for e in read_profile(path)
               if e.source == source and e.kind.front_end == "mirecc"]
    if not entries:
        return result
    with open(request.bitcode_path, "rb") as f:
        digests = function_digests(disassemble(f.read(), request.source))
    decisions = list(result.decisions)
    stale, unread = 0, {}
    for e in entries:
        at = next((i for i, d in enumerate(decisions)
                   if d.task == e.task and d.target == e.target), None)
        resolved = e.kind.resolve(e, decisions[at] if at is not None else None, digests)
        if resolved is None:
            unread[e.task] = unread.get(e.task, 0) + 1
            continue
        digest, value = resolved
        if digest != e.digest:
            stale += 1
            continue
        why = f"from the decisions profile {path}:{e.line}" + (f" ({e.comment})"
                                                               if e.comment else "")
        if at is None:
            decisions.append(Decision(task=e.task, target=e.target, value=value,
                                      default={}, confidence=None, reason=why, applied=True))
        else:
            decisions[at] = decisions[at].replace(value=value, applied=True,
                                                  advisory=False, confidence=None, reason=why)
    out = TUResult(result.summary, decisions, list(result.no_decision_reasons),
                   list(result.reason_codes))
    if stale:
        out.add_reason("profile-stale", f"decisions profile {path}: {stale} entr"
                       f"{'y' if stale == 1 else 'ies'} for this source ignored: the "
                       "function changed since it was measured")
    for task, n in sorted(unread.items()):
        noun = kinds()[task].noun
        out.add_reason("profile-unread", f"decisions profile {path}: {n} {task} entr"
                       f"{'y' if n == 1 else 'ies'} for this source ignored: its head read no "
                       f"such {noun} in this build (see its reason)")
    return out
