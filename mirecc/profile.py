"""Decisions profiles: decisions measured on the user's own runs (``mire
tune``), applied by later builds, as ``-fprofile-use`` applies a profile.

A profile (``profile: FILE`` in ``.mirecc.yaml``, ``MIRECC_PROFILE``) is
text, one decision site per line, fields separated by whitespace::

    # mirecc decisions profile 1
    loop-vectorize  src/kernel.c  saxpy:1  7d0c2e91a4b3f605  vectorize.width=4,interleave.count=2  # 1.21x

* the task, the source (relative to the profile's folder, or absolute),
  the target (for loop-vectorize a loop id ``<function>:<header>``),
* the digest of the target's function in the IR as clang emits it
  (:func:`function_digests`: debug information, and metadata and
  string-constant numbers, which shift when code elsewhere changes, are
  left out), so that a decision
  stays with unchanged code after edits elsewhere and a changed function
  drops it (a *stale* entry: ignored, counted in ``--explain``),
* the value, ``key=value`` pairs (integers where they are digits);
* ``#`` starts a comment.

A matching entry replaces the head's decision for its target (or adds one
where no head decided), applied: the user's measurements beat the head's
guess.  Only tasks whose decision value is the whole of what reaches the
compile take profile entries: :data:`TASKS`.  Reading a profile is pure
Python over the IR the ML path already has; a build without a profile pays
nothing.
"""
from __future__ import annotations

import hashlib
import os
import re

FORMAT_LINE = "# mirecc decisions profile 1"
#: tasks whose decisions a profile may give (value: the loop's factors)
TASKS = ("loop-vectorize",)
_METADATA = re.compile(r"!\d+\b")
# debug locations and variable records: present or not with -g, -Rpass...
_DEBUG_LOCATION = re.compile(r", !dbg !\d+")
_ATTRIBUTES = re.compile(r"#\d+\b")
_NUMBERED_GLOBAL = re.compile(r"(@\.?[\w.$]*?)\.\d+\b")


class ProfileError(Exception):
    """A profile that cannot be read; ``str()`` names the file and line."""


class Entry:
    __slots__ = ("task", "source", "target", "digest", "value", "comment", "line")

    def __init__(self, task, source, target, digest, value, comment, line):
        self.task, self.source, self.target = task, source, target
        self.digest, self.value, self.comment, self.line = digest, value, comment, line

    @property
    def function(self) -> str:
        return self.target.rsplit(":", 1)[0]


def _parse_value(text: str, where: str) -> dict:
    value = {}
    for part in text.split(","):
        key, eq, raw = part.partition("=")
        if not eq or not key:
            raise ProfileError(f"{where}: value {text!r}: expected key=value[,key=value]")
        value[key] = int(raw) if raw.lstrip("-").isdigit() else raw
    return value


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
        text, _, comment = line.partition("#")
        fields = text.split()
        if not fields:
            continue
        where = f"{path}:{number}"
        if len(fields) != 5:
            raise ProfileError(f"{where}: expected 5 fields (task source target digest "
                               f"value), found {len(fields)}")
        task, source, target, digest, value = fields
        if task not in TASKS:
            raise ProfileError(f"{where}: task {task!r} cannot take profile entries "
                               f"(only {', '.join(TASKS)})")
        if ":" not in target or not re.fullmatch(r"[0-9a-f]{16}", digest):
            raise ProfileError(f"{where}: expected a target <function>:<id> and a "
                               f"16-hex-digit function digest")
        entries.append(Entry(task, os.path.normpath(os.path.join(base, source)), target,
                             digest, _parse_value(value, where), comment.strip(), number))
    return entries


def function_digests(ir_text: str) -> dict[str, str]:
    """Function name -> digest of its body, with debug information (which
    ``-g`` or ``-Rpass`` adds) and the numbers that shift when code
    elsewhere in the module changes (metadata, attribute groups, ``.str.N``
    constants) left out."""
    from mirecc.tasks.openmp.sites import function_bodies

    out = {}
    for name, body in function_bodies(ir_text).items():
        text = "\n".join(_DEBUG_LOCATION.sub("", line) for line in body
                         if "@llvm.dbg." not in line and not line.lstrip().startswith("#dbg_"))
        text = _NUMBERED_GLOBAL.sub(r"\1", _ATTRIBUTES.sub("#", _METADATA.sub("!", text)))
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def format_entry(task: str, source: str, target: str, digest: str, value: dict,
                 comment: str = "") -> str:
    """One profile line (what ``mire tune`` writes)."""
    pairs = ",".join(f"{k}={v}" for k, v in value.items())
    return f"{task}  {source}  {target}  {digest}  {pairs}" + (f"  # {comment}"
                                                               if comment else "")


def apply_profile(result, request, path: str):
    """``result`` (a TUResult) with the profile's entries for ``request``'s
    source applied: a matching entry replaces the head's decision for its
    target, or adds one; stale entries are counted in a reason."""
    from mirecc.corpus.irtext import disassemble
    from mirecc.pipeline import Decision, TUResult

    source = os.path.normpath(os.path.join(request.cwd or os.getcwd(), request.source))
    entries = [e for e in read_profile(path) if e.source == source]
    if not entries:
        return result
    with open(request.bitcode_path, "rb") as f:
        digests = function_digests(disassemble(f.read(), request.source))
    live = [e for e in entries if digests.get(e.function) == e.digest]
    stale = len(entries) - len(live)
    decisions = list(result.decisions)
    for e in live:
        why = f"from the decisions profile {path}:{e.line}" + (f" ({e.comment})"
                                                               if e.comment else "")
        at = next((i for i, d in enumerate(decisions)
                   if d.task == e.task and d.target == e.target), None)
        if at is None:
            decisions.append(Decision(task=e.task, target=e.target, value=e.value,
                                      default={}, confidence=1.0, reason=why, applied=True))
        else:
            decisions[at] = decisions[at].replace(value=e.value, applied=True,
                                                  advisory=False, confidence=1.0, reason=why)
    out = TUResult(result.summary, decisions, list(result.no_decision_reasons),
                   list(result.reason_codes))
    if stale:
        out.add_reason("profile-stale", f"decisions profile {path}: {stale} entr"
                       f"{'y' if stale == 1 else 'ies'} for this source ignored: the "
                       "function changed since it was measured")
    return out
