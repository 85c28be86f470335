"""The adaptive runtime's verdict store, read for ``mire adapt``.

The runtimes (``runtime/adapt``, ``runtime/opencl``: the engine in
``runtime/common/mirecc_engine.h``) keep one text file per user
and machine, ``<cache>/adapt/<machine>.txt`` (``MIRECC_ADAPT_STORE`` names
another), where ``<machine>`` is ``c<cores>-<CPU model digest>-p<power
cap>``.  After a header line ``# mirecc-adapt 1 machine=<machine>``, one
tab-separated line per (site, trip-count bucket)::

    key bucket name phase best invocations decided_at runs decided_runs
    total lost across current next_default arms worst batch

``key``: the region's code digest (its function's and outlined function's,
as decisions profiles key regions), or for an OpenCL kernel
``cl-<digest of its program's source, build options and device>-<kernel>``
(arms ``default``, the program's own kernel, and ``f<k>``, factor k; bucket:
the launch's work-items in powers of 4); ``phase``: 0 exploring, 1 decided
(``best`` is the verdict), 2 too short to matter; ``arms``: ``;``-separated
``name:samples:dropped:kept:at:t,t,...`` (``at``: the site's invocation
at which the candidate was kept or dropped; the last samples, seconds),
the program's own configuration first as ``default``; ``worst``: the
largest share of one run's time at the site that exploring lost; ``batch``:
the invocations one sample of a region too short to time alone sums (1:
timed alone).  Lines of earlier runtimes lack the last two.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import hashlib

from mirecc.store.kinds import TEAM_VERDICTS, VERDICTS
from mirecc.util.fsutil import FileLock, atomic_write_bytes
from mirecc.util.paths import default_cache_dir

HEADER = "# mirecc-adapt 1"
#: invocations per run below which a site is explored across runs (the
#: engine's FEW_PER_RUN)
FEW_PER_RUN = 16


class StoreError(ValueError):
    """A store file that is not the runtime's (the message names it)."""

@dataclass
class Arm:
    name: str
    samples: int
    dropped: bool
    kept: bool
    at: int
    times: list[float]

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


@dataclass
class Cell:
    machine: str
    key: str
    bucket: int
    name: str
    phase: int
    best: str
    invocations: int
    decided_at: int
    runs: int
    decided_runs: int
    total: float
    lost: float
    across: bool
    arms: list[Arm] = field(default_factory=list)
    worst: float = 0.0
    batch: int = 1

    @property
    def state(self) -> str:
        """What the site is doing, in words: deciding within a run, waiting
        for the next run (explored across runs, a candidate per run),
        decided, or skipped and why."""
        if self.phase == 1:
            return "decided"
        if self.phase == 2:
            return "skipped: too short to time"
        if self.across:
            return "waiting for the next run"
        if self.runs > 1 and self.invocations / (self.runs - 1) < FEW_PER_RUN:
            return "skipped: too few invocations per run (across runs off)"
        return "deciding within a run"

    @property
    def tried(self) -> int:
        return sum(1 for a in self.arms[1:] if a.samples)

    @property
    def speedup(self) -> float | None:
        """The default's median time over the verdict's (1.0: the default kept)."""
        default = self.arms[0].median if self.arms else None
        best = next((a.median for a in self.arms if a.name == self.best), None)
        if self.phase != 1 or not default or not best:
            return None
        return default / best


def store_dir(cache: str | os.PathLike | None = None) -> Path:
    """This user's store files' folder (:data:`mirecc.store.kinds.VERDICTS`)."""
    return Path(VERDICTS.directory(cache or os.environ.get("MIRECC_CACHE_DIR")
                                   or default_cache_dir()))


def _fnv(text: str) -> int:
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def allowed_cores() -> int:
    """The cores this process may run on (what a team of ``all`` has)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_descriptor(threads: int | None = None) -> str:
    """This machine as the runtime names it in its store:
    ``c<threads>-<FNV-1a of the CPU model>-p<power cap>`` (the runtime's
    ``initialise``: the threads a team may have, the first ``model name``
    of /proc/cpuinfo, ``MIRECC_POWER_CAP``)."""
    if threads is None:
        threads = allowed_cores()
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "Processor")) and ":" in line:
                    model = line.split(":", 1)[1].lstrip(" \t").rstrip("\n")
                    break
    except OSError:
        pass
    cap = os.environ.get("MIRECC_POWER_CAP") or "none"
    text = f"c{threads}-{_fnv(model):08x}-p{cap}"
    return "".join("_" if c in "/ %\t" else c for c in text)


def share_of(threads: int, cores: int) -> str:
    """A team size as a share of ``cores``: ``one``, ``quarter``, ``half`` or
    ``all`` (the nearest; what carries across machines)."""
    if threads == 1:
        return "one"
    if threads >= cores:
        return "all"
    return "quarter" if threads * 4 <= cores else "half"


def share_name(threads: int, cores: int, schedule: str, chunk: int | None) -> str:
    """A configuration with an absolute team size as the runtime's arm name
    on a machine with ``cores``, e.g. ``half-dynamic-8``.  One thread runs
    every iteration whatever the schedule: its schedules are one arm."""
    share = share_of(threads, cores)
    if share == "one":
        return "one-static-default"
    return f"{share}-{schedule}-{chunk if chunk else 'default'}"


def decided_line(key: str, name: str, best: str, arms: list[str], *, bucket: int = -1,
                 invocations: int = 0, decided_at: int = 0, runs: int = 0,
                 kept: str | None = None) -> str:
    """One store line of a decided site (phase 1, verdict ``best``) with no
    samples: each of ``arms`` (names, ``default`` first) unsampled, ``kept``
    (default: none) marked kept.  ``invocations`` sets when the default is
    re-checked next (the runtime re-checks at 64, 128, ...)."""
    arm_text = ";".join(f"{a}:0:0:{int(a == kept)}:0:" for a in dict.fromkeys(arms))
    return "\t".join([key, str(bucket), name.replace("\t", " "), "1", best, str(invocations),
                      str(decided_at), str(runs), str(runs), "0", "0", "0", "-", "0", arm_text])


def seed(path: str | os.PathLike, key: str, name: str, best: str) -> None:
    """Write a decided verdict ``best`` (an arm name) for the site ``key``
    into the store at ``path``, as the runtime would (lock, merge, atomic
    rename): its first invocation adopts it for its input size, and the
    default is re-checked at invocations 64, 128, ... as for any verdict."""
    line = decided_line(key, name, best, ["default", best], kept=best)
    _merge(Path(path), Path(path).stem,
           lambda lines: [*(ln for ln in lines if not ln.startswith(key + "\t")), line])


def _merge(path: Path, machine: str, change) -> None:
    """Rewrite the store file at ``path`` as the runtime does (lock, merge,
    atomic rename): its lines after the header become ``change(lines)``;
    nothing is written when they stay the same."""
    with FileLock(f"{path}.lock"):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            lines = []
        if not lines or not lines[0].startswith(HEADER):
            lines = [f"{HEADER} machine={machine}"]
        after = change(lines[1:])
        if after != lines[1:]:
            atomic_write_bytes(path, ("\n".join([lines[0], *after]) + "\n").encode())


def seed_profile(profile, store=None, say=print) -> int:
    """Write each entry of the decisions profile at ``profile`` whose kind
    the runtime decides (``ProfileKind.adapts``: OpenMP regions) as a
    decided verdict into this machine's store (``store``: a file; default
    MIRECC_ADAPT_STORE or ``<cache>/adapt/<machine>.txt``), named for this
    machine's cores (an entry the runtime has no name for is skipped with a
    line).  Returns how many were written; ProfileError for a malformed
    profile."""
    from mirecc.taskapi.profile import read_profile  # lazy: re; a decisions profile only

    entries = [e for e in read_profile(str(profile)) if e.kind.adapts]
    if store is None:
        store = os.environ.get("MIRECC_ADAPT_STORE") or (
            store_dir() / f"{machine_descriptor()}.txt")
    cores = allowed_cores()
    written = 0
    for e in entries:
        best = e.kind.adapt_arm(e.value, cores)
        where = f"{os.path.basename(e.source)} {e.target}"
        if best is None:
            say(f"{where}: {e.kind.format_value(e.value)} has no name in the adaptive "
                f"runtime on this machine's {cores} cores; not seeded")
            continue
        seed(store, e.digest, where, best)
        written += 1
    say(f"seeded {written} adaptive verdict{'s' if written != 1 else ''} from {profile} "
        f"into {store}")
    return written


def _arm(text: str) -> Arm:
    name, samples, dropped, kept, at, times = text.split(":", 5)
    return Arm(name, int(samples), dropped == "1", kept == "1", int(at),
               [float(t) for t in times.split(",") if t])


def read_store(path: str | os.PathLike) -> list[Cell]:
    """Every (site, bucket) line of one store file."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines:
        return []
    if not lines[0].startswith(HEADER):
        raise StoreError(f"{path}: not a mirecc-adapt store (first line {lines[0][:40]!r})")
    machine = lines[0].partition("machine=")[2].strip() or path.stem
    cells = []
    for number, line in enumerate(lines[1:], 2):
        try:
            cells.append(parse_line(machine, line))
        except ValueError as exc:
            raise StoreError(f"{path}:{number}: {exc}") from None
    return cells


def parse_line(machine: str, line: str) -> Cell:
    """One store line as a :class:`Cell`; ValueError saying what is wrong."""
    f = line.split("\t")
    if len(f) not in (15, 17):
        raise ValueError(f"{len(f)} fields, expected 17")
    return Cell(machine, f[0], int(f[1]), f[2], int(f[3]), f[4], int(f[5]), int(f[6]),
                int(f[7]), int(f[8]), float(f[9]), float(f[10]), f[11] == "1",
                [_arm(a) for a in f[14].split(";") if a],
                *((float(f[15]), int(f[16])) if len(f) == 17 else ()))


def store_files(directory: str | os.PathLike | None = None) -> list[Path]:
    """The store files a listing reads: those of ``directory`` (or that one
    file), else the one MIRECC_ADAPT_STORE names (where it exists), else
    those of ``<cache>/adapt``."""
    if directory is None and os.environ.get("MIRECC_ADAPT_STORE"):
        named = Path(os.environ["MIRECC_ADAPT_STORE"])
        return [named] if named.is_file() else []
    if directory and Path(directory).is_file():
        return [Path(directory)]
    directory = Path(directory) if directory else store_dir()
    return sorted(directory.glob("*.txt")) if directory.is_dir() else []


def is_store(path: Path) -> bool:
    """Whether the file begins as the runtime's stores do."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(HEADER)
    except OSError:
        return False


def read_all(paths: list[Path]) -> tuple[list[Cell], list[str]]:
    """(cells of every store file of ``paths``, problems: one line each)."""
    cells, problems = [], []
    for path in paths:
        try:
            cells.extend(read_store(path))
        except (OSError, StoreError) as exc:
            problems.append(str(exc))
    return cells, problems


def table(cells: list[Cell]) -> str:
    """A plain-text listing: per site and bucket, what was tried and kept."""
    head = ("site", "machine", "trip", "state", "kept", "tried", "speedup", "to verdict",
            "worst run lost")
    rows = []
    for c in sorted(cells, key=lambda c: (c.name, c.machine, c.bucket)):
        speed = c.speedup
        trip = "-" if c.bucket < 0 else f"~4^{c.bucket}"
        verdict = (f"{c.decided_at} inv., {c.decided_runs} run{'s' if c.decided_runs != 1 else ''}"
                   if c.phase == 1 else "-")
        rows.append((c.name, c.machine, trip, c.state + (f" (x{c.batch})" if c.batch > 1 else ""),
                     c.best if c.phase == 1 else "-", f"{c.tried}/{max(len(c.arms) - 1, 0)}",
                     "-" if speed is None else f"{speed:.2f}x", verdict, f"{c.worst:.0%}"))
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()
                     for r in [head, *rows]) + "\n"


# --------------------------------------------------------------- team store

def _verdict_key(machine: str, key: str, bucket: str) -> str:

    return hashlib.sha256(f"{machine}\0{key}\0{bucket}".encode()).hexdigest()


def push_verdicts(team, files: list[Path]) -> int:
    """Write every decided (site, bucket) line of the store ``files`` into
    the team store (``team``: :class:`mirecc.store.team.TeamStore`), each
    named for its machine (cores, CPU model, power cap): a verdict is only
    read back on the same kind of machine.  Returns how many were written."""
    written = 0
    for path in files:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if not lines or not lines[0].startswith(HEADER):
            continue
        machine = lines[0].partition("machine=")[2].strip() or path.stem
        for cell, line in zip(read_store(path), lines[1:]):
            if cell.phase == 1:
                written += team.put_line(TEAM_VERDICTS.name, _verdict_key(
                    machine, cell.key, str(cell.bucket)), machine, line)
    return written


def pull_verdicts(team, machine: str, path: Path) -> tuple[int, int]:
    """Merge the team store's decided verdicts for ``machine`` into the
    store file at ``path`` (lock, merge, atomic rename, as the runtime):
    only for (site, bucket) pairs the file does not hold yet (its own
    verdicts and explorations win).  Returns (added, rejected)."""
    def why_not(key: str, line: str) -> str | None:
        try:
            cell = parse_line(machine, line)
        except ValueError as exc:
            return str(exc)
        if cell.phase != 1 or _verdict_key(machine, cell.key, str(cell.bucket)) != key:
            return "not a decided verdict of its key"
        return None

    lines_in, rejected = team.machine_lines(TEAM_VERDICTS.name, machine, why_not,
                                            "a run-time verdict")
    new: list[str] = []

    def add(lines: list[str]) -> list[str]:
        have = {tuple(ln.split("\t", 2)[:2]) for ln in lines}
        new.extend(ln for ln in lines_in if tuple(ln.split("\t", 2)[:2]) not in have)
        return [*lines, *new]
    _merge(path, machine, add)
    return len(new), rejected
