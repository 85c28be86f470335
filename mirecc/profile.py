"""Decisions profiles: decisions measured on the user's own runs (``mire
tune``), applied by later builds, as ``-fprofile-use`` applies a profile.

A profile (``profile: FILE`` in ``.mirecc.yaml``, ``MIRECC_PROFILE``) is
text, one decision site per line, fields separated by whitespace::

    # mirecc decisions profile 1
    loop-vectorize  src/kernel.c  saxpy:1  7d0c2e91a4b3f605  vectorize.width=4,interleave.count=2  # 1.21x
    openmp          src/cov.c     kernel_covariance:0  5e1f0c9a2b7d3e48  threads=2,schedule=static,chunk=8
    cuda-block      src/gemm.cu   gemm_kernel@LARGE_DATASET  0b1c2d3e4f5a6b7c  64x4  # 1.10x

* the task, the source (relative to the profile's folder, or absolute),
* the target: for loop-vectorize a loop id ``<function>:<header>``; for
  openmp a parallel region's id ``<function>:<n>`` (the plugin's); for
  cuda-block a kernel's name as written in the source, optionally with an
  input-size class ``@MACRO``: the entry then applies only to compiles that
  define MACRO (``-DLARGE_DATASET``), and wins over a classless one,
* the digest of the target's function in the IR as clang emits it
  (:func:`function_digests`: debug information, and metadata and
  string-constant numbers, which shift when code elsewhere changes, are
  left out; for a kernel, its function in the device IR), so that a decision
  stays with unchanged code after edits elsewhere and a changed function
  drops it (a *stale* entry: ignored, counted in ``--explain``); for a
  region, the digest covers its outlined function too (:func:`region_digest`),
* the value: ``key=value`` pairs (integers where they are digits) for
  loop-vectorize and openmp (``threads``, ``schedule``, optional ``chunk``),
  the thread-block shape ``XxY`` for cuda-block;
* ``#`` starts a comment.

A matching entry replaces the head's decision for its target (or adds one
where no head decided), applied: the user's measurements beat the head's
guess.  Only tasks whose decision value is the whole of what reaches the
compile take profile entries: :data:`TASKS` (an openmp entry's worksharing
loops and fixed team size come from the build's own reading of the source,
so a clause the user wrote still wins).  loop-vectorize and openmp entries
are applied by ``mirecc`` (:func:`apply_profile`), cuda-block ones by
``mirecc-nvcc`` (:mod:`mirecc.nvcc`).  Reading a profile is pure Python over
the IR the ML path already has; a build without a profile pays nothing.
"""
from __future__ import annotations

import hashlib
import os
import re

FORMAT_LINE = "# mirecc decisions profile 1"
#: tasks whose decisions a profile may give (values: a loop's factors, a
#: region's team size, schedule and chunk, a kernel's thread-block shape)
TASKS = ("loop-vectorize", "openmp", "cuda-block")
#: the tasks whose entries ``mirecc`` applies (cuda-block: ``mirecc-nvcc``)
DRIVER_TASKS = ("loop-vectorize", "openmp")
OPENMP_SCHEDULES = ("static", "dynamic", "guided")
#: threads per block every CUDA GPU since compute capability 2.0 allows
MAX_BLOCK_THREADS = 1024
_KERNEL_TARGET = re.compile(r"[A-Za-z_]\w*(@[A-Za-z_]\w*)?")
_BLOCK_SHAPE = re.compile(r"([1-9]\d{0,4})x([1-9]\d{0,4})")
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
        """The function (loop-vectorize) or kernel (cuda-block) the entry is for."""
        if self.task == "cuda-block":
            return self.target.partition("@")[0]
        return self.target.rsplit(":", 1)[0]

    @property
    def size_class(self) -> str | None:
        """cuda-block: the macro a compile must define for the entry to apply."""
        if self.task != "cuda-block":
            return None
        return self.target.partition("@")[2] or None


def _parse_value(task: str, text: str, where: str) -> dict:
    if task == "cuda-block":
        shape = _BLOCK_SHAPE.fullmatch(text)
        if not shape:
            raise ProfileError(f"{where}: value {text!r}: expected a thread-block shape "
                               f"XxY of positive integers (e.g. 32x8)")
        x, y = int(shape[1]), int(shape[2])
        if x * y > MAX_BLOCK_THREADS:   # the launch would fail: the output would change
            raise ProfileError(f"{where}: value {text!r}: {x * y} threads per block, "
                               f"more than CUDA's {MAX_BLOCK_THREADS}")
        return {"x": x, "y": y}
    value = {}
    for part in text.split(","):
        key, eq, raw = part.partition("=")
        if not eq or not key:
            raise ProfileError(f"{where}: value {text!r}: expected key=value[,key=value]")
        value[key] = int(raw) if raw.lstrip("-").isdigit() else raw
    if task == "openmp":
        threads, chunk = value.get("threads"), value.get("chunk", 1)
        if (set(value) - {"threads", "schedule", "chunk"} or not isinstance(threads, int)
                or threads < 1 or value.get("schedule") not in OPENMP_SCHEDULES
                or not isinstance(chunk, int) or chunk < 1):
            raise ProfileError(f"{where}: value {text!r}: expected threads=N,schedule="
                               f"{'|'.join(OPENMP_SCHEDULES)}[,chunk=N] with N >= 1")
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
        hex_digest = re.fullmatch(r"[0-9a-f]{16}", digest)
        if task in DRIVER_TASKS and (":" not in target or not hex_digest):
            raise ProfileError(f"{where}: expected a target <function>:<id> and a "
                               f"16-hex-digit function digest")
        if task == "cuda-block" and not _KERNEL_TARGET.fullmatch(target):
            raise ProfileError(f"{where}: target {target!r}: expected a kernel name, "
                               f"optionally with an input-size class <kernel>@<MACRO>")
        if not hex_digest:
            raise ProfileError(f"{where}: expected a 16-hex-digit function digest, "
                               f"found {digest!r}")
        entries.append(Entry(task, os.path.normpath(os.path.join(base, source)), target,
                             digest, _parse_value(task, value, where), comment.strip(),
                             number))
    return entries


def function_digests(ir_text: str) -> dict[str, str]:
    """Function name -> digest of its body, with debug information (which
    ``-g`` or ``-Rpass`` adds) and the numbers that shift when code
    elsewhere in the module changes (metadata, attribute groups, ``.str.N``
    constants) left out."""
    from mirecc.ir.regions import function_bodies

    out = {}
    for name, body in function_bodies(ir_text).items():
        text = "\n".join(_DEBUG_LOCATION.sub("", line) for line in body
                         if "@llvm.dbg." not in line and not line.lstrip().startswith("#dbg_"))
        text = _NUMBERED_GLOBAL.sub(r"\1", _ATTRIBUTES.sub("#", _METADATA.sub("!", text)))
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def region_outlined(candidates) -> tuple[str | None, dict]:
    """From an openmp decision's ranked candidates ((value, score) pairs):
    the region's outlined function (the function of its worksharing loops;
    None when it has none to decide) and the part of a configuration the
    build reads from the source (``loops``, ``threads_fixed``)."""
    for value, _ in candidates or ():
        if value:
            loops = list(value.get("loops", ()))
            outlined = loops[0].rsplit(":", 1)[0] if loops else None
            return outlined, {"loops": loops, "threads_fixed": bool(value.get("threads_fixed"))}
    return None, {"loops": [], "threads_fixed": False}


def region_digest(digests: dict[str, str], function: str, outlined: str | None) -> str | None:
    """A parallel region's digest: its function's and its outlined
    function's (where the region's body is), so an edit of either drops the
    entry; None when a function is missing."""
    if function not in digests or (outlined is not None and outlined not in digests):
        return None
    if outlined is None:
        return digests[function]
    return hashlib.sha256(f"{digests[function]}|{digests[outlined]}".encode()).hexdigest()[:16]


def openmp_value(value: dict) -> dict:
    """The part of an openmp configuration a profile keeps."""
    return {"threads": value["threads"], "schedule": value["schedule"],
            **({"chunk": value["chunk"]} if value.get("chunk") else {})}


def format_entry(task: str, source: str, target: str, digest: str, value: dict,
                 comment: str = "") -> str:
    """One profile line (what ``mire tune`` writes)."""
    if task == "cuda-block":
        pairs = f"{value['x']}x{value['y']}"
    else:
        pairs = ",".join(f"{k}={v}" for k, v in value.items())
    return f"{task}  {source}  {target}  {digest}  {pairs}" + (f"  # {comment}"
                                                               if comment else "")


def apply_profile(result, request, path: str):
    """``result`` (a TUResult) with the profile's entries for ``request``'s
    source applied: a matching entry replaces the head's decision for its
    target, or adds one; stale entries are counted in a reason."""
    from mirecc.ir.text import disassemble
    from mirecc.pipeline import Decision, TUResult

    source = os.path.normpath(os.path.join(request.cwd or os.getcwd(), request.source))
    # cuda-block entries are mirecc-nvcc's (a .cu never comes this way)
    entries = [e for e in read_profile(path)
               if e.source == source and e.task in DRIVER_TASKS]
    if not entries:
        return result
    with open(request.bitcode_path, "rb") as f:
        digests = function_digests(disassemble(f.read(), request.source))
    decisions = list(result.decisions)
    stale = unread = 0
    for e in entries:
        at = next((i for i, d in enumerate(decisions)
                   if d.task == e.task and d.target == e.target), None)
        value = e.value
        if e.task == "openmp":
            # a region the OpenMP head did not read (no such region now, or
            # another machine) cannot be applied: its loops are not known
            if at is None:
                unread += 1
                continue
            outlined, from_source = region_outlined(decisions[at].candidates)
            digest = region_digest(digests, e.function, outlined)
            value = {**e.value, "chunk": e.value.get("chunk"), **from_source}
        else:
            digest = digests.get(e.function)
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
    if unread:
        out.add_reason("profile-unread", f"decisions profile {path}: {unread} openmp entr"
                       f"{'y' if unread == 1 else 'ies'} for this source ignored: the OpenMP "
                       "head read no such region in this build (see its reason)")
    return out
