"""``mire run``'s NUMA side: read the per-region decisions a binary
carries and apply what this machine supports for the run.

mirecc's NUMA head records, per TU built with ``-fopenmp`` and
``record_numa``, one JSON line in the object's ``.mirecc.numa`` section
(:func:`mirecc.tasks.numa.head.numa_record`); the linker concatenates them,
so the binary holds every TU's regions and their configuration per input
size.  The settings belong to the whole process, so the run gets one
configuration: the most common among the binary's regions for the input
size asked (each region that keeps the default votes for it; a tie keeps
the default).  What it changes from the default the head was trained
against is mapped onto this machine (what it keeps stays this machine's
own behaviour):

* threads: the same share of the hardware threads as on the head's machine
  (``OMP_NUM_THREADS``);
* placement: ``OMP_PROC_BIND`` close (compact) or spread (scatter),
  ``OMP_PLACES`` threads (SMT used) or cores;
* sockets used: ``numactl --cpunodebind`` to the NUMA nodes of the first
  sockets;
* page placement: ``numactl --interleave=all`` (interleaved) or
  ``--localalloc`` (local); first touch needs nothing;
* prefetchers: Intel's MSR 0x1A4 (its low 4 bits turn the hardware
  prefetchers off) on every CPU, through ``/dev/cpu/<n>/msr``, only with
  ``--allow-msr``; the old values are written to a restore record first and
  put back when the program ends, also on signals, and by the next ``mire
  run`` after a launcher killed outright.

What the machine lacks (one socket, one NUMA node, no ``numactl``, no MSR
access, another vendor) is said in one line each and skipped; a variable
the user already set in the environment wins.  ``--dry-run`` prints the
plan.  The machine is read from ``/sys``, ``/proc/cpuinfo`` and ``/dev``
(roots that tests replace with fake trees).
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.launch import part as launch_part
from mirecc.launch.part import RunError
from mirecc.tasks.numa.configs import FIELDS, Config, parse_config

SECTION = ".mirecc.numa"
PREFETCH_MSR = 0x1A4
PREFETCH_BITS = 0xF


class LaunchError(RunError):
    """A binary's record or the machine cannot be read; names the file."""


# ------------------------------------------------------------------ the binary

def read_records(binary: str | os.PathLike) -> list[dict]:
    """The TU lines of ``binary``'s :data:`SECTION` ([] for a binary
    without one, or a file that is not ELF, such as a script)."""
    # lazy: pyelftools (~90 ms), mire run only; the head imports this module to probe
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    path = Path(binary)
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return []
            f.seek(0)
            section = ELFFile(f).get_section_by_name(SECTION)
            data = section.data() if section is not None else b""
    except OSError as exc:
        raise LaunchError(f"{path}: cannot read: {exc.strerror}") from None
    except ELFError as exc:
        raise LaunchError(f"{path}: not a readable ELF file: {exc}") from None
    records = []
    # the linker may pad between TUs' lines with NULs
    for number, line in enumerate(data.replace(b"\0", b"\n").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if record.get("version") != 1 or not isinstance(record.get("regions"), dict):
                raise ValueError("not a version 1 record with regions")
            parse_config(record["default"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LaunchError(f"{path}: section {SECTION}, line {number}: unreadable "
                              f"NUMA record ({exc})") from None
        records.append(record)
    return records


def program_config(records: list[dict], size: str) -> tuple[Config | None, Counter]:
    """The configuration of the run (None: no records) and the votes."""
    votes: Counter = Counter()
    default = None
    for record in records:
        default = record["default"]
        for value in record["regions"].values():
            votes[value.get(size) or record["default"]] += 1
    if not votes:
        return None, votes
    top = max(votes.values())
    winners = [c for c, n in votes.items() if n == top]
    return parse_config(default if default in winners or len(winners) > 1
                        else winners[0]), votes


# ------------------------------------------------------------------ the machine

@dataclass
class Machine:
    cpus: list[int]                          # online logical CPUs
    package: dict[int, int]                  # cpu -> socket
    core: dict[int, tuple[int, int]]         # cpu -> (socket, core id)
    nodes: dict[int, list[int]]              # NUMA node -> its cpus
    vendor: str                              # "intel", "amd", ... or "unknown"
    numactl: str | None                      # its path
    msr: dict[int, Path] = field(default_factory=dict)   # cpu -> its msr device

    @property
    def sockets(self) -> int:
        return len(set(self.package.values())) or 1

    @property
    def cores(self) -> int:
        return len(set(self.core.values())) or len(self.cpus)


def _cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    out = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def probe(sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc"),
          dev_root: Path = Path("/dev"), numactl: str | None = None) -> Machine:
    """This machine's CPUs, sockets, NUMA nodes, vendor, numactl and MSR
    devices (``numactl`` None: looked up on PATH)."""
    cpu_dir = sys_root / "devices" / "system" / "cpu"
    try:
        cpus = _cpulist((cpu_dir / "online").read_text())
    except (OSError, ValueError):
        cpus = list(range(os.cpu_count() or 1))
    package, core = {}, {}
    for cpu in cpus:
        topology = cpu_dir / f"cpu{cpu}" / "topology"
        try:
            p = int((topology / "physical_package_id").read_text())
            c = int((topology / "core_id").read_text())
        except (OSError, ValueError):
            continue
        package[cpu], core[cpu] = p, (p, c)
    nodes = {}
    for node in sorted((sys_root / "devices" / "system" / "node").glob("node[0-9]*")):
        try:
            nodes[int(node.name[4:])] = _cpulist((node / "cpulist").read_text())
        except (OSError, ValueError):
            continue
    vendor = "unknown"
    try:
        for line in (proc_root / "cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                v = line.split(":", 1)[1].strip()
                vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(v, v.lower())
                break
    except OSError:
        pass
    msr = {cpu: dev_root / "cpu" / str(cpu) / "msr" for cpu in cpus}
    msr = {cpu: path for cpu, path in msr.items() if path.exists()}
    return Machine(cpus, package, core, nodes or {0: cpus}, vendor,
                   numactl if numactl is not None else shutil.which("numactl"), msr)


# ------------------------------------------------------------------ the plan

@dataclass
class Plan:
    config: Config | None
    env: dict[str, str] = field(default_factory=dict)
    prefix: list[str] = field(default_factory=list)      # numactl ...
    msr_mask: int | None = None                          # prefetcher bits to set
    lines: list[str] = field(default_factory=list)       # what is done, what is skipped

    def say(self, line: str) -> None:
        self.lines.append(line)


def make_plan(records: list[dict], size: str, machine: Machine, allow_msr: bool,
              environ: dict | None = None) -> Plan:
    """What ``mire run`` does for a binary with ``records`` on ``machine``."""
    environ = os.environ if environ is None else environ
    config, votes = program_config(records, size)
    plan = Plan(config)
    if config is None:
        plan.say("no NUMA decisions recorded in the binary (build it with mirecc, -fopenmp "
                 "and MIRECC_RECORD_NUMA=1)")
        return plan
    regions = sum(votes.values())
    labelled = records[0].get("machine") or {}
    default = parse_config(records[0]["default"])
    plan.say(f"{size} input: {votes[config.name]} of {regions} region(s) chose "
             f"{config.name} ({config.describe()}), for "
             f"{labelled.get('description', 'the head’s machine')}")
    if config == default:
        plan.say("that is the default the head was trained against: nothing to change")
        return plan
    # only what differs from the default changes; the rest stays this
    # machine's own behaviour (the labels are gains over the default)
    changed = {f for f in FIELDS if getattr(config, f) != getattr(default, f)}

    def setenv(name: str, value: str, why: str) -> None:
        if name in environ:
            plan.say(f"{name}: kept the environment's {environ[name]!r} (wanted {value}: {why})")
        else:
            plan.env[name] = value
            plan.say(f"{name}={value}: {why}")

    if "threads" in changed:
        # the same share of the hardware threads
        theirs = int(labelled.get("hardware_threads") or 0)
        if theirs > 0:
            ours = len(machine.cpus)
            threads = max(1, min(ours, round(config.threads * ours / theirs)))
            setenv("OMP_NUM_THREADS", str(threads), f"{config.threads} of {theirs} hardware "
                   f"threads there, {threads} of {ours} here")
        else:
            plan.say("threads: the record does not say how many hardware threads its "
                     "machine had; left to the runtime")
    if changed & {"placement", "smt"}:
        setenv("OMP_PROC_BIND", "close" if config.placement == "compact" else "spread",
               f"{config.placement} placement")
        setenv("OMP_PLACES", "threads" if config.smt else "cores",
               "SMT threads used" if config.smt else "one thread per core")

    numactl = []
    their_sockets = int(labelled.get("sockets") or 0)
    if "sockets" in changed and their_sockets and config.sockets < their_sockets:
        if machine.sockets < 2:
            plan.say(f"sockets: {config.sockets} of {their_sockets} wanted; this machine has "
                     "one socket: nothing to restrict")
        elif len(machine.nodes) < 2 or not machine.numactl:
            why = "one NUMA node" if len(machine.nodes) < 2 else "no numactl"
            plan.say(f"sockets: {config.sockets} of {their_sockets} wanted; not restricted "
                     f"({why})")
        else:
            keep = sorted({machine.package[c] for c in machine.cpus
                           if c in machine.package})[:max(1, round(
                               config.sockets * machine.sockets / their_sockets))]
            nodes = sorted(n for n, cpus in machine.nodes.items()
                           if cpus and all(machine.package.get(c) in keep for c in cpus))
            if nodes:
                numactl.append(f"--cpunodebind={','.join(map(str, nodes))}")
                plan.say(f"sockets: {len(keep)} of {machine.sockets} (NUMA node(s) "
                         f"{','.join(map(str, nodes))})")
    if "pages" in changed and config.pages == "ori":
        plan.say("pages: first touch (the kernel's own policy): nothing to set")
    elif "pages" in changed:
        option = "--interleave=all" if config.pages == "bal" else "--localalloc"
        what = "interleaved" if config.pages == "bal" else "local"
        if len(machine.nodes) < 2:
            plan.say(f"pages: {what} wanted; this machine has one NUMA node: nothing to place")
        elif not machine.numactl:
            plan.say(f"pages: {what} wanted; numactl is not installed: first touch stays")
        else:
            numactl.append(option)
            plan.say(f"pages: {what} (numactl {option})")
    if numactl:
        plan.prefix = [machine.numactl, *numactl, "--"]

    mask = config.prefetch_mask
    if "prefetch_mask" not in changed:
        pass
    elif machine.vendor != "intel":
        plan.say(f"prefetchers: mask {mask} wanted; MSR 0x1A4 is Intel's, this CPU is "
                 f"{machine.vendor}: unsupported, left as they are")
    elif not allow_msr:
        plan.say(f"prefetchers: mask {mask} wanted; not touched without --allow-msr")
    elif len(machine.msr) < len(machine.cpus):
        plan.say(f"prefetchers: mask {mask} wanted; no MSR device for every CPU (modprobe "
                 "msr, root): left as they are")
    elif not all(os.access(p, os.R_OK | os.W_OK) for p in machine.msr.values()):
        plan.say(f"prefetchers: mask {mask} wanted; the MSR devices are not writable "
                 "(root is needed): left as they are")
    else:
        plan.msr_mask = mask
        plan.say(f"prefetchers: MSR 0x1A4 low bits = {mask:#x} on {len(machine.msr)} CPU(s), "
                 "restored after the run")
    return plan


# ------------------------------------------------------------------ MSRs

def read_msr(path: Path, register: int = PREFETCH_MSR) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, 8, register)
    finally:
        os.close(fd)
    if len(data) != 8:
        raise OSError(f"{path}: short read of MSR {register:#x}")
    return struct.unpack("<Q", data)[0]


def write_msr(path: Path, value: int, register: int = PREFETCH_MSR) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, struct.pack("<Q", value), register)
    finally:
        os.close(fd)


def restore_msrs(saved: dict[str, int]) -> list[str]:
    """Write the saved values back; the problems, if any."""
    problems = []
    for path, value in saved.items():
        try:
            write_msr(Path(path), value)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
    return problems


def restore_leftover(record: Path, say) -> None:
    """Put back the MSR values of a launcher that was killed before it could."""
    launch_part.restore_leftover(record, restore_msrs, "prefetcher MSRs", say,
                                 "MSR restore record")


def set_prefetchers(machine: Machine, mask: int, record: Path) -> dict[str, int]:
    """Set the low bits of MSR 0x1A4 to ``mask`` on every CPU; the old
    values (saved to ``record`` before any write)."""
    from mirecc.util.fsutil import atomic_write_bytes  # lazy: mire run only, as above

    saved = {str(p): read_msr(p) for p in machine.msr.values()}
    record.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(record, json.dumps(saved, indent=1).encode())
    try:
        for path, old in saved.items():
            write_msr(Path(path), (old & ~PREFETCH_BITS) | mask)
    except OSError as exc:
        if not restore_msrs(saved):
            record.unlink(missing_ok=True)
        raise LaunchError(f"cannot set the prefetcher MSRs: {exc.strerror or exc}") from None
    return saved
