"""``mire run``: run a program under a package power cap (Linux RAPL powercap)
and with the NUMA, placement and prefetcher settings its binary records
(:mod:`.launch`; ``--dry-run`` prints the plan): the NUMA task's launcher.

The MIREncoder paper tunes a power limit with the OpenMP configuration. A
power cap belongs to the whole machine for the length of a run, not to a
binary, so it is applied by a launcher rather than compiled in::

    mire run --power-cap 65 -- ./prog args      # watts, each CPU package
    mire run --power-cap 80% -- ./prog          # of the zone's max power

Linux exposes RAPL under ``/sys/class/powercap/intel-rapl:<n>`` (AMD
packages too, through the same driver): ``name`` (``package-<n>``),
``enabled`` and per constraint ``constraint_<i>_name`` (``long_term``,
``short_term``), ``constraint_<i>_power_limit_uw`` and
``constraint_<i>_max_power_uw``. The launcher sets each package zone's
long-term limit, runs the program, and puts the old limits back when it
exits, also on SIGINT, SIGTERM and SIGHUP, which it passes on to the program.
Before it changes anything it writes the old values to a restore record in
the cache directory; a launcher killed outright (SIGKILL) leaves the record,
and the next ``mire run`` puts those values back first.

Where no zone is writable (no RAPL, a VM, not root) it says so in one line
and runs the program unchanged: the cap is an optimisation, never a
condition for running.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path("/sys/class/powercap")
#: a package zone: intel-rapl:0, intel-rapl-mmio:0 (not a sub-zone like intel-rapl:0:1)
_PACKAGE_ZONE = re.compile(r"intel-rapl[a-z-]*:\d+$")
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Interrupted(Exception):
    """A forwarded signal arrived before the program was started: the
    settings already changed are put back (``finally``) and the launcher
    exits as the signal would have ended it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class PowerCapError(Exception):
    """A cap that cannot be understood or applied."""


@dataclass
class Zone:
    """One package zone's long-term constraint."""
    path: Path
    constraint: int

    def _file(self, what: str) -> Path:
        return self.path / f"constraint_{self.constraint}_{what}"

    @property
    def limit_file(self) -> Path:
        return self._file("power_limit_uw")

    def read_limit(self) -> int:
        return int(self.limit_file.read_text().strip())

    def max_power(self) -> int | None:
        try:
            value = int(self._file("max_power_uw").read_text().strip())
        except (OSError, ValueError):
            return None
        return value or None            # some firmware reports 0: no bound known

    def read_enabled(self) -> str | None:
        try:
            return (self.path / "enabled").read_text().strip()
        except OSError:
            return None

    def writable(self) -> bool:
        return os.access(self.limit_file, os.W_OK)


def package_zones(root: Path = DEFAULT_ROOT) -> list[Zone]:
    """Every package zone under ``root`` with a long-term constraint
    (constraint 0 where none is named)."""
    zones = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    for path in entries:
        if not _PACKAGE_ZONE.match(path.name):
            continue
        try:
            if not (path / "name").read_text().strip().startswith("package"):
                continue
        except OSError:
            continue
        constraint = 0
        for name_file in sorted(path.glob("constraint_*_name")):
            if name_file.read_text().strip() == "long_term":
                constraint = int(name_file.name.split("_")[1])
                break
        if (path / f"constraint_{constraint}_power_limit_uw").exists():
            zones.append(Zone(path, constraint))
    return zones


def parse_cap(text: str, zone: Zone) -> int:
    """``"65"`` (watts) or ``"80%"`` (of the zone's max power) in microwatts,
    within (0, max power]."""
    text = text.strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100
            top = zone.max_power()
            if top is None:
                raise PowerCapError(f"{zone.path}: no max power known, give the cap in watts")
            micro = round(share * top)
        else:
            micro = round(float(text) * 1e6)
    except ValueError:
        raise PowerCapError(f"power cap {text!r}: expected watts (65) or a share of "
                            "the maximum (80%)") from None
    if micro <= 0:
        raise PowerCapError(f"power cap {text!r}: must be above 0")
    top = zone.max_power()
    if top is not None and micro > top:
        raise PowerCapError(f"power cap {text!r}: above {zone.path.name}'s maximum "
                            f"of {top / 1e6:g} W")
    return micro


def _record_path() -> Path:
    from mirecc.util.paths import default_cache_dir
    return Path(os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()) / "powercap-restore.json"


def _write_record(record: Path, saved: list[dict]) -> None:
    from mirecc.util.fsutil import atomic_write_bytes
    record.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(record, json.dumps(saved, indent=1).encode())


def _restore(saved: list[dict]) -> list[str]:
    """Write the saved limits (and enabled flags) back; the problems, if any."""
    problems = []
    for entry in saved:
        try:
            Path(entry["limit_file"]).write_text(str(entry["limit_uw"]))
            if entry.get("enabled") is not None:
                Path(entry["enabled_file"]).write_text(entry["enabled"])
        except OSError as exc:
            problems.append(f"{entry['limit_file']}: {exc}")
    return problems


def restore_leftover(record: Path, say=print) -> None:
    """Put back the limits of a launcher that was killed before it could."""
    if not record.exists():
        return
    try:
        saved = json.loads(record.read_text())
    except (OSError, ValueError) as exc:
        say(f"mire run: {record}: unreadable restore record ({exc}); left as it is")
        return
    problems = _restore(saved)
    if problems:
        say(f"mire run: could not restore the power caps of an earlier run: {'; '.join(problems)}")
        return
    record.unlink(missing_ok=True)
    say(f"mire run: restored the power caps an earlier run left set ({record})")


def run_capped(command: list[str], cap: str | None, root: Path = DEFAULT_ROOT,
               record: Path | None = None, say=None, env: dict | None = None) -> int:
    """Run ``command`` (in ``env``, default this process's) under ``cap`` on
    every package zone; its exit status (128 + n when signal n ended it)."""
    say = say or (lambda line: print(line, file=sys.stderr))
    record = record or _record_path()
    restore_leftover(record, say)
    saved: list[dict] = []
    if cap is not None:
        zones = package_zones(root)
        usable = [z for z in zones if z.writable()]
        if not usable:
            why = ("no RAPL package zone" if not zones
                   else "its power limit is not writable (root is needed)")
            say(f"mire run: no power cap applied ({root}: {why}); running the program unchanged")
        else:
            limits = [(z, parse_cap(cap, z)) for z in usable]     # all parsed before any write
            saved = [{"limit_file": str(z.limit_file), "limit_uw": z.read_limit(),
                      "enabled_file": str(z.path / "enabled"), "enabled": z.read_enabled()}
                     for z, _ in limits]
            _write_record(record, saved)
            try:
                for zone, micro in limits:
                    zone.limit_file.write_text(str(micro))
                    if zone.read_enabled() == "0":
                        (zone.path / "enabled").write_text("1")
            except OSError as exc:
                problems = _restore(saved)
                if not problems:
                    record.unlink(missing_ok=True)
                raise PowerCapError(f"{zone.limit_file}: cannot set the cap: {exc}") from None
            say(f"mire run: package power cap {limits[0][1] / 1e6:g} W on "
                f"{len(limits)} zone(s) for this run")
    # the cap in force, for the program: the adaptive OpenMP runtime keeps its
    # verdicts per machine descriptor, the cap included (runtime/adapt)
    env = dict(os.environ if env is None else env)
    env.pop("MIRECC_POWER_CAP", None)
    if saved:
        env["MIRECC_POWER_CAP"] = f"{limits[0][1] / 1e6:g}W"
    try:
        return _run_forwarding_signals(command, env)
    finally:
        if saved:
            problems = _restore(saved)
            if problems:
                say(f"mire run: could not restore the power caps: {'; '.join(problems)} "
                    f"(the old values are in {record})")
            else:
                record.unlink(missing_ok=True)


def _run_forwarding_signals(command: list[str], env: dict | None = None) -> int:
    started: list[subprocess.Popen] = []
    pending: list[int] = []

    def forward(signum, frame):
        if started:
            started[0].send_signal(signum)
        else:                   # between the handlers and the start: sent at the start
            pending.append(signum)
    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    try:
        try:
            started.append(subprocess.Popen(command, env=env))
        except OSError as exc:
            raise PowerCapError(f"{command[0]}: cannot run it: {exc.strerror}") from None
        for signum in pending:
            started[0].send_signal(signum)
        status = started[0].wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - status if status < 0 else status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--power-cap", default=os.environ.get("MIRECC_POWER_CAP"),
                        help="package power cap for the run: watts (65) or a share of the "
                             "zone's maximum (80%%) (default: $MIRECC_POWER_CAP, else none)")
    parser.add_argument("--input-size", choices=("small", "large"),
                        default=os.environ.get("MIRECC_NUMA_INPUT_SIZE", "large"),
                        help="which of the NUMA head's per-size decisions recorded in the "
                             "binary to apply (default: $MIRECC_NUMA_INPUT_SIZE, else large)")
    parser.add_argument("--allow-msr", action="store_true",
                        help="let the recorded prefetcher mask be written to MSR 0x1A4 "
                             "(Intel, root, msr module); the old values are restored after "
                             "the run")
    parser.add_argument("--no-numa", action="store_true",
                        help="ignore the NUMA decisions recorded in the binary")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be set and run, and run nothing")
    parser.add_argument("--powercap-root", default=str(DEFAULT_ROOT), help=argparse.SUPPRESS)
    # fake machine trees for tests
    parser.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)
    parser.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
    parser.add_argument("--dev-root", default="/dev", help=argparse.SUPPRESS)
    parser.add_argument("--numactl", default=None, help=argparse.SUPPRESS)
    for module in _run_modules():
        module.add_run_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the program and its arguments, after --")


def _run_modules() -> list:
    """The modules other tasks bring to ``mire run`` (``Task.run_modules``)."""
    import importlib

    from mirecc.taskapi.registry import tasks
    return [importlib.import_module(m) for t in tasks().values() for m in t.run_modules]


def _run_environment(args, say) -> dict:
    """The variables the other tasks' run modules set for the program."""
    env: dict = {}
    for module in _run_modules():
        extra, lines = module.run_environment(args)
        env.update(extra)
        for line in lines:
            say(f"mire run: {line}")
    return env


def run(args: argparse.Namespace) -> int:
    import shlex
    import shutil

    from mirecc.tasks.numa.launch import LaunchError, make_plan, probe, read_records

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("mire run: no program given (mire run [--power-cap W] [--dry-run] -- ./prog "
              "args)", file=sys.stderr)
        return 2
    say = (lambda line: print(line)) if args.dry_run else \
        (lambda line: print(line, file=sys.stderr))
    try:
        extra = _run_environment(args, say)
    except ValueError as exc:
        print(f"mire run: {exc}", file=sys.stderr)
        return 2
    plan = None
    if not args.no_numa:
        binary = shutil.which(command[0]) or command[0]
        try:
            records = read_records(binary) if os.path.isfile(binary) else []
        except LaunchError as exc:
            print(f"mire run: {exc}", file=sys.stderr)
            return 2
        if records or args.dry_run:
            machine = probe(Path(args.sys_root), Path(args.proc_root), Path(args.dev_root),
                            args.numactl)
            plan = make_plan(records, args.input_size, machine, args.allow_msr)
            for line in plan.lines:
                say(f"mire run: {line}")
    if args.dry_run:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                       sorted({**(plan.env if plan else {}), **extra}.items()))
        print("mire run: would run: " + " ".join(
            filter(None, [env, shlex.join([*(plan.prefix if plan else []), *command])])))
        if args.power_cap:
            print(f"mire run: with a package power cap of {args.power_cap}")
        return 0
    from mirecc.tasks.numa.launch import restore_leftover
    restore_leftover(_msr_record(), lambda line: print(line, file=sys.stderr))

    # until the program runs (and its own forwarding takes over), a signal
    # unwinds through the finally blocks that put caps and MSRs back
    def interrupt(signum, frame):
        raise _Interrupted(signum)
    previous = {signum: signal.signal(signum, interrupt) for signum in _FORWARDED}
    try:
        if plan is None or (not plan.env and not plan.prefix and plan.msr_mask is None):
            return run_capped(command, args.power_cap, Path(args.powercap_root),
                              env={**os.environ, **extra})
        return _run_planned(plan, machine, command, args, say, extra)
    except (PowerCapError, LaunchError) as exc:
        print(f"mire run: {exc}", file=sys.stderr)
        return 2
    except _Interrupted as exc:
        print(f"mire run: signal {exc.signum} before the program started; settings put "
              "back", file=sys.stderr)
        return 128 + exc.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _msr_record() -> Path:
    """Where the prefetcher MSRs' old values wait while a program runs."""
    from mirecc.util.paths import default_cache_dir
    return Path(os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()) / "msr-restore.json"


def _run_planned(plan, machine, command: list[str], args, say, extra: dict) -> int:
    """Run ``command`` with the plan's environment, numactl prefix and
    prefetcher MSRs (restored afterwards, also after signals)."""
    from mirecc.tasks.numa.launch import restore_msrs, set_prefetchers

    record = _msr_record()
    saved = set_prefetchers(machine, plan.msr_mask, record) if plan.msr_mask is not None \
        else {}
    try:
        return run_capped([*plan.prefix, *command], args.power_cap, Path(args.powercap_root),
                          env={**os.environ, **extra, **plan.env})
    finally:
        if saved:
            problems = restore_msrs(saved)
            if problems:
                say(f"mire run: could not restore the prefetcher MSRs: {'; '.join(problems)} "
                    f"(the old values are in {record})")
            else:
                record.unlink(missing_ok=True)
