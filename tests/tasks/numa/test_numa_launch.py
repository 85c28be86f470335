"""mire run's NUMA side: records read back from a linked binary, the plan on
fake /sys, /proc, /dev and numactl trees, and the prefetcher MSRs set for
the run and restored (fake MSR files: nothing here writes a real MSR)."""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirecc.tasks.numa import launch

CLANG = shutil.which("clang-14") or shutil.which("clang")
DEFAULT = "-O3_32_2_2_compact_0_0_loc"
MACHINE = {"description": "test machine", "vendor": "intel", "sockets": 2, "numa_nodes": 2,
           "hardware_threads": 64}
WANTED = "-O3_16_2_2_scatter_1_5_bal"


def record(source: str, regions: dict) -> str:
    return json.dumps({"version": 1, "source": source, "default": DEFAULT,
                       "machine": MACHINE, "regions": regions})


def c_string(text: str) -> str:
    return json.dumps(text + "\n")        # a JSON string is a valid C string literal here


# a TU whose object carries a record line, as the plugin writes it
def tu(path: Path, line: str, main: bool = False) -> Path:
    body = f"""
__attribute__((section(".mirecc.numa"), used, aligned(1)))
static const char record_{path.stem}[] = {c_string(line)};
"""
    if main:
        body += r"""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    const char *names[] = {"OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES"};
    for (int i = 0; i < 3; i++) printf("%s=%s\n", names[i], getenv(names[i]) ? getenv(names[i]) : "");
    return 0;
}
"""
    path.write_text(body)
    return path


@pytest.fixture
def binary(tmp_path):
    if not CLANG:
        pytest.skip("needs clang")
    a = tu(tmp_path / "a.c", record("a.c", {"main:0": {"large": WANTED, "outlined": "f"},
                                            "main:1": {"small": WANTED, "outlined": "g"}}),
           main=True)
    b = tu(tmp_path / "b.c", record("b.c", {"work:0": {"large": WANTED, "outlined": "h"}}))
    exe = tmp_path / "prog"
    subprocess.run([CLANG, "-O2", str(a), str(b), "-o", str(exe)], check=True)
    return exe


def fake_machine(root: Path, sockets=2, cores=2, smt=2, vendor="GenuineIntel",
                 msr_value=0x0, numactl=True) -> dict:
    """A /sys, /proc and /dev tree (one NUMA node per socket) and a numactl
    that logs its arguments and runs the rest; the roots as mire run takes them."""
    cpus = sockets * cores * smt
    sys_root, proc, dev = root / "sys", root / "proc", root / "dev"
    cpu_dir = sys_root / "devices" / "system" / "cpu"
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text(f"0-{cpus - 1}\n")
    for cpu in range(cpus):
        socket, core = cpu // (cores * smt), cpu % cores
        topology = cpu_dir / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{socket}\n")
        (topology / "core_id").write_text(f"{core}\n")
        msr = dev / "cpu" / str(cpu) / "msr"
        msr.parent.mkdir(parents=True)
        with open(msr, "wb") as f:
            f.write(b"\0" * launch.PREFETCH_MSR + struct.pack("<Q", msr_value))
    for socket in range(sockets):
        node = sys_root / "devices" / "system" / "node" / f"node{socket}"
        node.mkdir(parents=True)
        per = cores * smt
        (node / "cpulist").write_text(f"{socket * per}-{socket * per + per - 1}\n")
    proc.mkdir()
    (proc / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: {vendor}\n")
    args = ["--sys-root", str(sys_root), "--proc-root", str(proc), "--dev-root", str(dev)]
    if numactl:
        tool = root / "numactl"
        log = root / "numactl.log"
        # logs its options and the MSR value of CPU 0 while the program runs
        tool.write_text(f"""#!/bin/sh
echo "$@" >> {log}
od -A n -t x8 -j {launch.PREFETCH_MSR} -N 8 {dev}/cpu/0/msr | tr -d ' ' >> {log}
while [ "$1" != "--" ]; do shift; done; shift
exec "$@"
""")
        tool.chmod(0o755)
        args += ["--numactl", str(tool)]
    else:
        args += ["--numactl", ""]
    return {"args": args, "sys": sys_root, "proc": proc, "dev": dev, "cpus": cpus,
            "log": root / "numactl.log"}


def mire_run(args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_records_read_back_from_the_linked_binary(binary, tmp_path):
    records = launch.read_records(binary)
    assert sorted(r["source"] for r in records) == ["a.c", "b.c"]
    config, votes = launch.program_config(records, "large")
    assert config.name == WANTED and votes[WANTED] == 2 and votes[DEFAULT] == 1
    config, votes = launch.program_config(records, "small")
    assert config.name == DEFAULT           # 1 region of 3 asked for it
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    assert launch.read_records(script) == []


def test_a_broken_record_names_the_binary(tmp_path):
    if not CLANG:
        pytest.skip("needs clang")
    src = tu(tmp_path / "bad.c", "{not json", main=True)
    exe = tmp_path / "bad"
    subprocess.run([CLANG, str(src), "-o", str(exe)], check=True)
    with pytest.raises(launch.LaunchError, match="bad.*line 1"):
        launch.read_records(exe)
    run = mire_run(["--dry-run", "--", str(exe)])
    assert run.returncode == 2 and str(exe) in run.stderr


def test_plan_on_a_two_socket_intel_machine(tmp_path):
    m = fake_machine(tmp_path)
    machine = launch.probe(m["sys"], m["proc"], m["dev"], numactl=str(tmp_path / "numactl"))
    assert (machine.sockets, machine.cores, len(machine.nodes), machine.vendor) == \
        (2, 4, 2, "intel")
    records = [json.loads(record("a.c", {"r:0": {"large": "-O3_32_1_1_compact_0_9_loc"}}))]
    plan = launch.make_plan(records, "large", machine, allow_msr=False, environ={})
    # one socket instead of two, prefetchers 0 and 3 off; threads, placement
    # and pages are the default's: this machine's own behaviour stays
    assert plan.env == {}
    assert plan.prefix == [str(tmp_path / "numactl"), "--cpunodebind=0", "--"]
    assert plan.msr_mask is None
    assert any("not touched without --allow-msr" in line for line in plan.lines)
    plan = launch.make_plan(records, "large", machine, allow_msr=True, environ={})
    assert plan.msr_mask == 9
    records = [json.loads(record("a.c", {"r:0": {"large": "-O3_16_2_2_compact_1_0_loc"}}))]
    plan = launch.make_plan(records, "large", machine, allow_msr=True,
                            environ={"OMP_NUM_THREADS": "3"})
    # 16 of 64 hardware threads there -> 2 of 8 here, but the user's 3 wins
    assert plan.env == {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads"}
    assert any("kept the environment's '3' (wanted 2" in line for line in plan.lines)
    assert plan.prefix == [] and plan.msr_mask is None


def test_what_the_machine_lacks_is_said_and_skipped(tmp_path):
    m = fake_machine(tmp_path, sockets=1, vendor="AuthenticAMD", numactl=False)
    machine = launch.probe(m["sys"], m["proc"], m["dev"], numactl="")
    records = [json.loads(record("a.c", {"r:0": {"large": "-O3_16_1_1_compact_1_3_bal"}}))]
    plan = launch.make_plan(records, "large", machine, allow_msr=True, environ={})
    assert plan.prefix == [] and plan.msr_mask is None
    text = "\n".join(plan.lines)
    assert "one socket" in text and "one NUMA node" in text and "authenticamd" not in text
    assert "Intel's, this CPU is amd: unsupported" in text
    assert plan.env["OMP_NUM_THREADS"] == "1" and plan.env["OMP_PLACES"] == "threads"


def test_the_default_changes_nothing(tmp_path):
    m = fake_machine(tmp_path)
    machine = launch.probe(m["sys"], m["proc"], m["dev"], numactl=str(tmp_path / "numactl"))
    records = [json.loads(record("a.c", {"r:0": {"small": WANTED}, "r:1": {}, "r:2": {}}))]
    plan = launch.make_plan(records, "small", machine, allow_msr=True, environ={})
    assert plan.config.name == DEFAULT and not plan.env and not plan.prefix
    assert plan.msr_mask is None and "nothing to change" in plan.lines[-1]


def test_no_records_no_plan(tmp_path):
    m = fake_machine(tmp_path)
    machine = launch.probe(m["sys"], m["proc"], m["dev"], numactl="")
    plan = launch.make_plan([], "large", machine, allow_msr=True, environ={})
    assert plan.config is None and not plan.env and not plan.prefix
    assert "no NUMA decisions recorded" in plan.lines[0]


def test_dry_run_prints_the_plan_and_runs_nothing(binary, tmp_path):
    m = fake_machine(tmp_path)
    run = mire_run([*m["args"], "--dry-run", "--", str(binary)])
    assert run.returncode == 0, run.stderr
    assert "2 of 3 region(s) chose " + WANTED in run.stdout
    assert "would run: OMP_NUM_THREADS=2 OMP_PLACES=threads OMP_PROC_BIND=spread " + \
        str(tmp_path / "numactl") + " --interleave=all -- " + str(binary) in run.stdout
    assert not m["log"].exists()             # nothing ran
    ignored = mire_run([*m["args"], "--dry-run", "--no-numa", "--", str(binary)])
    assert ignored.returncode == 0 and ignored.stdout == f"mire run: would run: {binary}\n"


def test_run_applies_the_plan_and_restores_the_msrs(binary, tmp_path, monkeypatch):
    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path / "cache"))
    m = fake_machine(tmp_path, msr_value=0x30)
    run = mire_run([*m["args"], "--allow-msr", "--", str(binary)])
    assert run.returncode == 0, run.stderr
    assert "OMP_NUM_THREADS=2\nOMP_PROC_BIND=spread\nOMP_PLACES=threads" in run.stdout
    log = m["log"].read_text().split()
    assert log[:2] == ["--interleave=all", "--"]
    assert int(log[-1], 16) == 0x35          # high bits kept, the mask set, during the run
    for cpu in range(m["cpus"]):             # and restored after it
        assert launch.read_msr(m["dev"] / "cpu" / str(cpu) / "msr") == 0x30
    assert not (tmp_path / "cache" / "msr-restore.json").exists()


def test_msrs_restored_after_a_signal_and_after_a_killed_launcher(binary, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path / "cache"))
    m = fake_machine(tmp_path, msr_value=0x12)
    # the fake numactl sleeps instead of running the program: the launcher waits
    tool = tmp_path / "numactl"
    tool.write_text(tool.read_text().replace('exec "$@"', 'sleep 30'))
    launcher = subprocess.Popen([sys.executable, "-m", "mirecc.cli.mire", "run", *m["args"],
                                 "--allow-msr", "--", str(binary)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ})
    msr0 = m["dev"] / "cpu" / "0" / "msr"
    deadline = time.time() + 30
    while launch.read_msr(msr0) != 0x15 and time.time() < deadline:
        time.sleep(0.1)
    assert launch.read_msr(msr0) == 0x15       # bits 4+ kept, the low 4 = mask 5
    launcher.send_signal(signal.SIGTERM)
    launcher.wait(timeout=30)
    assert launch.read_msr(msr0) == 0x12
    # a launcher killed outright leaves its record; the next mire run restores it
    saved = launch.set_prefetchers(launch.probe(m["sys"], m["proc"], m["dev"], ""), 0xF,
                                   tmp_path / "cache" / "msr-restore.json")
    assert saved[str(msr0)] == 0x12 and launch.read_msr(msr0) == 0x1F
    run = mire_run([*m["args"], "--no-numa", "--", "true"])
    assert run.returncode == 0
    assert "restored the prefetcher MSRs an earlier run left set" in run.stderr
    assert launch.read_msr(msr0) == 0x12
