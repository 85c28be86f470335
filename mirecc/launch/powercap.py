"""Package power caps for one run (Linux RAPL powercap), and the program run
with its signals forwarded: the launcher's own part of ``mire run``.

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
condition for running.  The program sees the cap in force as
``MIRECC_POWER_CAP`` (the adaptive OpenMP runtime keeps its verdicts per
machine descriptor, the cap included).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mirecc.launch import part
from mirecc.launch.part import RunError
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.paths import default_cache_dir

DEFAULT_ROOT = Path("/sys/class/powercap")
#: a package zone: intel-rapl:0, intel-rapl-mmio:0 (not a sub-zone like intel-rapl:0:1)
_PACKAGE_ZONE = re.compile(r"intel-rapl[a-z-]*:\d+$")
#: the signals the launcher passes on to the program
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class PowerCapError(RunError):
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
    cache = os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()
    return Path(cache) / "powercap-restore.json"


def _write_record(record: Path, saved: list[dict]) -> None:
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
    part.restore_leftover(record, _restore, "power caps", say)


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
        return run_forwarding_signals(command, env)
    finally:
        if saved:
            part.put_back(saved, record, _restore, "power caps", say)


def run_forwarding_signals(command: list[str], env: dict | None = None) -> int:
    """Run ``command`` (in ``env``), passing :data:`FORWARDED` signals on to
    it; its exit status (128 + n when signal n ended it)."""
    started: list[subprocess.Popen] = []
    pending: list[int] = []

    def forward(signum, frame):
        if started:
            started[0].send_signal(signum)
        else:                   # between the handlers and the start: sent at the start
            pending.append(signum)
    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        try:
            started.append(subprocess.Popen(command, env=env))
        except OSError as exc:
            raise RunError(f"{command[0]}: cannot run it: {exc.strerror}") from None
        for signum in pending:
            started[0].send_signal(signum)
        status = started[0].wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - status if status < 0 else status
