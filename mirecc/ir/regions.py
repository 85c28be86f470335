"""The OpenMP call sites of a module: parallel regions and worksharing loops.

:func:`find_sites` reads textual LLVM IR as clang emits it before any
optimisation (``clang -fopenmp <flags> -S -emit-llvm -Xclang
-disable-llvm-passes``) and lists

* every parallel region: a ``__kmpc_fork_call`` call (kind ``parallel``);
* every worksharing loop with a static init: a
  ``__kmpc_for_static_init_{4,4u,8,8u}`` call (kind ``loop``; loops written
  with ``schedule(dynamic|guided|runtime|auto)`` or ``ordered`` are dispatch
  loops already and are not counted, as the plugin does not count them),

each with the id mirecc's pass plugin gives it
(``passes/plugin/FORMAT.md``, "OpenMP decisions"): ``<function>:<index>``,
the function's name as in the IR (unquoted) and the index of the call among
that function's calls of the same kind, in instruction order.

For a loop it also tells the schedule argument (34, ``kmp_sch_static``, is
the default static schedule and the only one the plugin rewrites; anything
else comes from a schedule clause), and the region it runs in: the parallel
site whose outlined function reaches the loop's function through direct
calls (``None`` for an orphaned loop, or one reached from several regions).
For a region: the outlined function, the enclosing region (nested
parallelism), and whether the source fixes its team size: a
``__kmpc_push_num_threads`` call before the fork (a ``num_threads`` clause),
or a call of ``omp_set_num_threads`` anywhere in the module (the plugin then
leaves every region's team size alone).

Source locations come from the ``ident_t`` of each call, whose psource
string ``;file;function;line;column;;`` is real only with debug line
information; :func:`site_locations` gets them from a second front-end
compile with ``-gline-tables-only``, and :func:`program_sites` puts it all
together and reads the source line at each location for an explicit
``schedule(`` (loops) or ``num_threads(`` (regions) clause, so that a loop
written ``schedule(static)``, which compiles exactly as no clause, is still
marked explicit and never decided.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from mirecc.ir.text import NAME, function_bodies
from mirecc.ir.text import decode as _decode
from mirecc.ir.text import unquote as _unquote

#: libomp's ``kmp_sch_static``: no schedule clause or ``schedule(static)``
SCHED_STATIC_DEFAULT = 34

FORK = "__kmpc_fork_call"
STATIC_INIT = "__kmpc_for_static_init_"
PUSH_THREADS = "__kmpc_push_num_threads"
SET_THREADS = "omp_set_num_threads"

_NAME = NAME
_DEFINE = re.compile(r"^define [^@]*@(" + _NAME + r")\(")
# the callee of a call: the first "@name(" after "call"/"invoke"
_CALLEE = re.compile(r"(?:^|[\s=])(?:call|invoke)\s.*?@(" + _NAME + r")\((.*)$")
_GLOBAL_REF = re.compile(r"@(" + _NAME + ")")
_CSTRING = re.compile(r"^@(" + _NAME + r") = [^\n]*?constant \[\d+ x i8\] "
                      r"c\"((?:[^\"\\]|\\[0-9A-Fa-f]{2})*)\"")
_IDENT = re.compile(r"^@(" + _NAME + r") = [^\n]*?constant %struct\.ident_t \{(.*)\}")
_INIT_KIND = re.compile(r"^__kmpc_for_static_init_(4u|4|8u|8)$")


@dataclass
class Site:
    """One OpenMP runtime call that a decision can change."""
    id: str                      # "<function>:<index>", the plugin's call id
    kind: str                    # "parallel" | "loop"
    function: str                # the function the call is in
    index: int
    location: str | None = None  # "file:line" (only from IR with debug line info)
    # loop: the parallel region (site id) it runs in; parallel: the
    # enclosing region (nested parallelism); None: none, or not one alone
    region: str | None = None
    outlined: str | None = None  # parallel: the outlined function it forks
    schedule: int | None = None  # loop: the schedule argument (34: default static)
    init: str | None = None      # loop: 4, 4u, 8 or 8u
    explicit: bool = False       # the source chose (clause, omp_set_num_threads)
    why: str | None = None       # what the source chose, when explicit

    @property
    def decidable(self) -> bool:
        """May a decision change this site (the plugin may still refuse a
        loop for reasons the IR text does not show, e.g. lastprivate)?"""
        return not self.explicit

    def to_dict(self) -> dict:
        return asdict(self)





def _locations(ir_text: str) -> dict[str, str]:
    """ident_t global name -> "file:line" where its psource string is real."""
    strings, idents = {}, {}
    for line in ir_text.splitlines():
        if not line.startswith("@"):
            continue
        m = _CSTRING.match(line)
        if m:
            strings[_unquote(m.group(1))] = _decode(m.group(2))
            continue
        m = _IDENT.match(line)
        if m:
            refs = _GLOBAL_REF.findall(m.group(2))
            if refs:
                idents[_unquote(m.group(1))] = _unquote(refs[-1])
    out = {}
    for ident, sref in idents.items():
        loc = parse_psource(strings.get(sref, ""))
        if loc:
            out[ident] = loc
    return out


def parse_psource(psource: str) -> str | None:
    """``;file;function;line;column;;`` -> ``file:line``, or None when it
    says nothing (``;unknown;unknown;0;0;;``, clang without debug info)."""
    parts = psource.rstrip("\x00").split(";")
    if len(parts) < 5 or not parts[1] or parts[1] == "unknown":
        return None
    try:
        line = int(parts[3])
    except ValueError:
        return None
    return f"{parts[1]}:{line}" if line > 0 else None


def split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call (``text`` starts after
    the opening parenthesis)."""
    args, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if cur:
        args.append("".join(cur).strip())
    return args


def _ref(arg: str) -> str | None:
    m = _GLOBAL_REF.search(arg)
    return _unquote(m.group(1)) if m else None


def find_sites(ir_text: str) -> list[Site]:
    """Every parallel region and static worksharing loop of a module's IR
    (as clang emits it, ``-disable-llvm-passes``), in module order, with the
    plugin's ids; locations only where the IR's ``ident_t`` strings have
    them (compiled with debug line information)."""
    bodies = function_bodies(ir_text)
    locs = _locations(ir_text)
    sites: list[Site] = []
    calls: dict[str, set[str]] = {}
    sets_threads = False
    for fn, lines in bodies.items():
        calls[fn] = set()
        n_fork = n_init = 0
        pushed = False     # a push_num_threads since the previous fork
        for line in lines:
            m = _CALLEE.search(line)
            if not m:
                continue
            callee, rest = _unquote(m.group(1)), m.group(2)
            if callee in bodies:
                calls[fn].add(callee)
            if callee == FORK:
                args = split_args(rest)
                ident = _ref(args[0]) if args else None
                outlined = _ref(args[2]) if len(args) > 2 else None
                sites.append(Site(f"{fn}:{n_fork}", "parallel", fn, n_fork,
                                  location=locs.get(ident or ""), outlined=outlined,
                                  explicit=pushed,
                                  why="num_threads clause" if pushed else None))
                n_fork += 1
                pushed = False
            elif callee == PUSH_THREADS:
                pushed = True
            elif callee == SET_THREADS:
                sets_threads = True
            elif (k := _INIT_KIND.match(callee)):
                args = split_args(rest)
                ident = _ref(args[0]) if args else None
                try:
                    sched = int(args[2].split()[-1])
                except (IndexError, ValueError):
                    sched = None
                explicit = sched != SCHED_STATIC_DEFAULT
                sites.append(Site(f"{fn}:{n_init}", "loop", fn, n_init,
                                  location=locs.get(ident or ""), schedule=sched,
                                  init=k.group(1), explicit=explicit,
                                  why=f"schedule clause (schedule type {sched})"
                                  if explicit else None))
                n_init += 1
    # which region runs each function: the outlined function of a fork and
    # what it calls directly (a nested region's outlined function is an
    # argument of its fork call, not a callee, so it is its own region)
    reach: dict[str, set[str]] = {}
    for s in sites:
        if s.kind != "parallel" or not s.outlined:
            continue
        seen, todo = set(), [s.outlined]
        while todo:
            f = todo.pop()
            if f in seen or f not in bodies:
                continue
            seen.add(f)
            todo.extend(calls.get(f, ()))
        reach[s.id] = seen
    for s in sites:
        owners = [rid for rid, fns in reach.items() if s.function in fns and rid != s.id]
        s.region = owners[0] if len(owners) == 1 else None
        if s.kind == "parallel" and sets_threads and not s.explicit:
            s.explicit, s.why = True, "the module calls omp_set_num_threads"
    return sites


# ---------------------------------------------------------------------------
# compiling, locations, clauses


def emit_ir(source: str | os.PathLike, cc: str, flags: list[str], extra: list[str] = (),
            cwd: str | os.PathLike | None = None, timeout: float = 300) -> str:
    """The module's IR as clang emits it (``-disable-llvm-passes``); raises
    RuntimeError when clang fails."""
    cmd = [cc, *flags, *extra, "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
           "-o", "-", os.fspath(source)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"{cc}: {exc}") from None
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr[-2000:]}")
    return p.stdout


def _shape(sites: list[Site]) -> list[tuple]:
    return [(s.id, s.kind, s.outlined, s.schedule, s.init) for s in sites]


def site_locations(source: str | os.PathLike, cc: str, flags: list[str],
                   sites: list[Site] | None = None,
                   cwd: str | os.PathLike | None = None) -> dict[tuple[str, str], str]:
    """(kind, site id) -> ``file:line`` of the pragma (a loop and a region
    may have the same id: the plugin counts each kind on its own), from a
    second front-end
    compile with ``-gline-tables-only``. ``sites``: those of the plain
    compile (compiled here when not given). When the sites of the two
    compiles do not match one for one (ids, kinds, schedules), no locations
    at all rather than wrong ones."""
    if sites is None:
        sites = find_sites(emit_ir(source, cc, flags, cwd=cwd))
    if sites and all(s.location for s in sites):      # flags with -g: there already
        return {(s.kind, s.id): s.location for s in sites}
    try:
        dbg = find_sites(emit_ir(source, cc, flags, ["-gline-tables-only"], cwd=cwd))
    except RuntimeError:
        return {}
    if _shape(dbg) != _shape(sites):
        return {}
    return {(s.kind, s.id): s.location for s in dbg if s.location}


def pragma_text(path: str | os.PathLike, line: int) -> str | None:
    """The ``#pragma omp`` directive at ``line`` (1-based) of ``path``,
    joined over backslash-newlines; when ``line`` is not a pragma (a loop
    statement), the directive that ends just above it (blank and comment
    lines skipped). None if there is none or the file cannot be read."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return None
    if not 1 <= line <= len(lines):
        return None
    i = line - 1
    if not _is_pragma(lines[i]):
        # the directive ends above: skip blank lines and comments
        j = i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].strip().startswith(("//", "/*", "*"))):
            j -= 1
        if j < 0:
            return None
        # back to the first physical line of that logical line
        while j > 0 and lines[j - 1].rstrip().endswith("\\"):
            j -= 1
        if not _is_pragma(lines[j]):
            return None
        i = j
    text = [lines[i]]
    while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
        i += 1
        text.append(lines[i])
    return " ".join(t.rstrip().rstrip("\\") for t in text)


def _is_pragma(line: str) -> bool:
    return re.match(r"\s*#\s*pragma\s+omp\b", line) is not None


def has_clause(pragma: str | None, clause: str) -> bool:
    """Does the directive text name ``clause`` (``schedule``, ``num_threads``)?"""
    return bool(pragma) and re.search(r"\b" + re.escape(clause) + r"\s*\(", pragma) is not None


def mark_source_clauses(sites: list[Site], cwd: str | os.PathLike | None = None) -> list[Site]:
    """Mark explicit the loops whose pragma has ``schedule(`` and the regions
    whose pragma has ``num_threads(`` (read at each site's location)."""
    for s in sites:
        if s.explicit or not s.location:
            continue
        file, _, line = s.location.rpartition(":")
        path = Path(file)
        if cwd is not None and not path.is_absolute():
            path = Path(cwd) / path
        clause = "schedule" if s.kind == "loop" else "num_threads"
        if has_clause(pragma_text(path, int(line)), clause):
            s.explicit, s.why = True, f"{clause} clause in the source"
    return sites


def program_sites(source: str | os.PathLike, cc: str, flags: list[str],
                  cwd: str | os.PathLike | None = None) -> list[Site]:
    """The sites of one source file compiled with ``flags`` (which include
    ``-fopenmp``): ids from the plain compile, locations from a debug-line
    compile when its ids match, explicit source clauses marked."""
    sites = find_sites(emit_ir(source, cc, flags, cwd=cwd))
    locs = site_locations(source, cc, flags, sites, cwd=cwd)
    for s in sites:
        s.location = locs.get((s.kind, s.id))
    return mark_source_clauses(sites, cwd=cwd)


def openmp_enabled(flags) -> bool:
    """Is the TU built with OpenMP (the last of -fopenmp / -fno-openmp wins)?"""
    on = False
    for flag in flags:
        if flag == "-fopenmp" or flag.startswith("-fopenmp="):
            on = True
        elif flag == "-fno-openmp":
            on = False
    return on
