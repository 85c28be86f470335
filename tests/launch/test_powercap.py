"""mire run (the launcher, mirecc.launch): package power caps through a fake
RAPL powercap tree, the program's exit status and signals, a usage error."""
import json
import signal
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirecc.launch import powercap as power

# the program under the launcher prints the limit it sees while it runs
SHOW_LIMIT = "import sys; print(open(sys.argv[1]).read().strip())"


def make_zone(root: Path, name: str, zone_name: str, limit_uw: int, max_uw: int,
              long_term_index: int = 0, enabled: str = "1") -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(zone_name + "\n")
    (zone / "enabled").write_text(enabled + "\n")
    for i, cname in enumerate(("short_term", "long_term") if long_term_index == 1
                              else ("long_term", "short_term")):
        (zone / f"constraint_{i}_name").write_text(cname + "\n")
        (zone / f"constraint_{i}_power_limit_uw").write_text(f"{limit_uw + i}\n")
        (zone / f"constraint_{i}_max_power_uw").write_text(f"{max_uw}\n")
    return zone


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "powercap"
    make_zone(root, "intel-rapl:0", "package-0", 95_000_000, 120_000_000)
    make_zone(root, "intel-rapl:1", "package-1", 95_000_000, 120_000_000, long_term_index=1)
    make_zone(root, "intel-rapl:0:0", "core", 50_000_000, 60_000_000)   # sub-zone: left alone
    make_zone(root, "intel-rapl:2", "psys", 200_000_000, 300_000_000)   # not a package
    return root


def limit(root: Path, zone: str, constraint: int = 0) -> int:
    return int((root / zone / f"constraint_{constraint}_power_limit_uw").read_text())


def mire_run(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", *args],
                          capture_output=True, text=True, **kwargs)


def test_package_zones_take_the_long_term_constraint_of_packages_only(sysfs):
    zones = power.package_zones(sysfs)
    assert [(z.path.name, z.constraint) for z in zones] == [("intel-rapl:0", 0),
                                                             ("intel-rapl:1", 1)]
    assert power.package_zones(sysfs / "missing") == []


def test_the_cap_holds_during_the_run_and_the_old_limits_come_back(sysfs, tmp_path):
    res = mire_run("--powercap-root", str(sysfs), "--power-cap", "65", "--",
                   sys.executable, "-c", SHOW_LIMIT,
                   str(sysfs / "intel-rapl:1" / "constraint_1_power_limit_uw"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "65000000"               # what the program saw
    assert "package power cap 65 W on 2 zone(s)" in res.stderr
    assert limit(sysfs, "intel-rapl:0") == 95_000_000      # restored, long-term of zone 0
    assert limit(sysfs, "intel-rapl:1", 1) == 95_000_001   # and of zone 1 (its index 1)
    assert limit(sysfs, "intel-rapl:1", 0) == 95_000_000   # short-term never touched
    assert limit(sysfs, "intel-rapl:0:0") == 50_000_000    # nor the sub-zone
    assert limit(sysfs, "intel-rapl:2") == 200_000_000     # nor a non-package zone
    assert not (tmp_path / "cache" / "powercap-restore.json").exists()


def test_the_program_sees_the_cap_in_force_for_the_adaptive_runtime(sysfs, tmp_path):
    """MIRECC_POWER_CAP in the program's environment names the cap in force
    (the adaptive OpenMP runtime keys its verdicts by it), and is absent
    when no cap could be applied."""
    show = "import os; print(os.environ.get('MIRECC_POWER_CAP', '-'))"
    res = mire_run("--powercap-root", str(sysfs), "--power-cap", "65", "--",
                   sys.executable, "-c", show)
    assert res.returncode == 0 and res.stdout.strip() == "65W", res.stderr
    res = mire_run("--powercap-root", str(tmp_path / "none"), "--power-cap", "65", "--",
                   sys.executable, "-c", show, env={**os.environ, "MIRECC_POWER_CAP": "65"})
    assert res.returncode == 0 and res.stdout.strip() == "-", res.stderr


def test_a_share_of_the_maximum_and_a_disabled_constraint(sysfs):
    (sysfs / "intel-rapl:0" / "enabled").write_text("0\n")
    res = mire_run("--powercap-root", str(sysfs), "--power-cap", "50%", "--",
                   sys.executable, "-c",
                   "import sys; print(open(sys.argv[1]).read().strip(), open(sys.argv[2]).read().strip())",
                   str(sysfs / "intel-rapl:0" / "constraint_0_power_limit_uw"),
                   str(sysfs / "intel-rapl:0" / "enabled"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["60000000", "1"]          # half of 120 W, enabled for the run
    assert (sysfs / "intel-rapl:0" / "enabled").read_text().strip() == "0"


def test_the_exit_status_of_the_program_is_the_launchers(sysfs):
    res = mire_run("--powercap-root", str(sysfs), "--power-cap", "65", "--",
                   sys.executable, "-c", "import sys; sys.exit(7)")
    assert res.returncode == 7
    assert limit(sysfs, "intel-rapl:0") == 95_000_000


@pytest.mark.parametrize("cap, message", [("abc", "expected watts"), ("0", "must be above 0"),
                                          ("500", "above intel-rapl:0's maximum of 120 W")])
def test_a_bad_cap_is_refused_before_anything_changes(sysfs, cap, message):
    res = mire_run("--powercap-root", str(sysfs), "--power-cap", cap, "--",
                   sys.executable, "-c", "print('ran')")
    assert res.returncode == 2 and message in res.stderr
    assert res.stdout == ""                                 # the program did not run
    assert limit(sysfs, "intel-rapl:0") == 95_000_000


def test_without_rapl_the_program_runs_unchanged_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path / "cache"))
    res = mire_run("--powercap-root", str(tmp_path / "none"), "--power-cap", "65", "--",
                   sys.executable, "-c", "print('ran')")
    assert res.returncode == 0 and res.stdout == "ran\n"
    assert res.stderr.count("\n") == 1 and "no power cap applied" in res.stderr
    assert "no RAPL package zone" in res.stderr


def test_an_unwritable_limit_runs_the_program_unchanged(sysfs, monkeypatch, capsys):
    # tests run as root, for whom every file is writable: the permission is the edge mocked
    monkeypatch.setattr(power.Zone, "writable", lambda self: False)
    lines = []
    status = power.run_capped([sys.executable, "-c", "pass"], "65", sysfs, say=lines.append)
    assert status == 0
    assert lines == [f"mire run: no power cap applied ({sysfs}: its power limit is not "
                     "writable (root is needed)); running the program unchanged"]
    assert limit(sysfs, "intel-rapl:0") == 95_000_000


def test_sigterm_reaches_the_program_and_the_limits_come_back(sysfs, tmp_path):
    started = tmp_path / "started"
    program = ("import pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text('x'); "
               "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-m", "mirecc.cli.mire", "run", "--powercap-root",
                             str(sysfs), "--power-cap", "65", "--", sys.executable, "-c",
                             program, str(started)], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not started.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert started.exists()
    assert limit(sysfs, "intel-rapl:0") == 65_000_000
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM   # the program ended by the signal
    assert limit(sysfs, "intel-rapl:0") == 95_000_000
    assert limit(sysfs, "intel-rapl:1", 1) == 95_000_001


def test_a_killed_launchers_limits_are_restored_by_the_next_run(sysfs, tmp_path):
    record = tmp_path / "cache" / "powercap-restore.json"
    record.parent.mkdir()
    limit_file = sysfs / "intel-rapl:0" / "constraint_0_power_limit_uw"
    record.write_text(json.dumps([{"limit_file": str(limit_file), "limit_uw": 95_000_000,
                                   "enabled_file": str(sysfs / "intel-rapl:0" / "enabled"),
                                   "enabled": "1"}]))
    limit_file.write_text("40000000")                       # left by a SIGKILLed launcher
    res = mire_run("--powercap-root", str(sysfs), "--", sys.executable, "-c", "pass")
    assert res.returncode == 0
    assert "restored the power caps an earlier run left set" in res.stderr
    assert limit(sysfs, "intel-rapl:0") == 95_000_000 and not record.exists()


def test_no_program_is_a_usage_error():
    res = mire_run("--power-cap", "65")
    assert res.returncode == 2 and "no program given" in res.stderr
