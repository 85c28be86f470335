"""Coarsening applied at run time: the planner (mirecc.tasks.opencl.coarsen)
with the real clang and the plugin's pass, and ``mire run --opencl`` with the
real interposer (runtime/opencl) on this machine's OpenCL platform (pocl,
installed by set-up): outputs equal to the plain run at every factor, the
record, the verdict store, and failing open."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirecc.tasks.opencl import coarsen

REPO = Path(__file__).resolve().parents[3]
DRIVER = REPO / "benchmarks" / "opencl" / "cl_driver.c"

SOURCE = r"""
// a comment naming kernel void fake(int x) { }
#define SCALE 2.0f
__kernel void saxpy(__global float *y, __global const float *x, float a, int n) {
  int i = get_global_id(0);   /* a brace in a comment: } */
  if (i >= n) return;
  y[i] = a * x[i] * SCALE + y[i] + (float)(get_local_id(0) % 3);
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void fixed(__global int *a) {
  a[get_global_id(0)] = 1;
}
kernel void reduce(global float *x, local float *tmp) {
  tmp[get_local_id(0)] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  x[get_global_id(0)] = tmp[0];
}
"""


def test_source_kernels_are_found_past_comments_and_attributes():
    kernels = {k.name: k for k in coarsen.source_kernels(SOURCE)}
    assert list(kernels) == ["saxpy", "fixed", "reduce"]
    assert kernels["saxpy"].param_names() == ["y", "x", "a", "n"]
    assert kernels["saxpy"].body.startswith("{") and kernels["saxpy"].body.endswith("}")
    assert "SCALE + y[i]" in kernels["saxpy"].body
    assert kernels["fixed"].attributes and not kernels["saxpy"].attributes


def test_the_planner_tries_the_shipped_order_for_the_device_type(monkeypatch):
    monkeypatch.delenv("MIRECC_OPENCL_FACTORS", raising=False)
    learned = coarsen.learned_order("cpu")
    factors, how = coarsen.ranked_factors("pthread", "cpu")
    if learned is None:
        assert factors == list(coarsen.DEFAULT_FACTORS) and "fixed order" in how
    else:
        assert factors == learned["order"][:coarsen.TRIES] and "learned" in how
    assert coarsen.ranked_factors("gpu0", "no-such-type")[0] == list(coarsen.DEFAULT_FACTORS)
    monkeypatch.setenv("MIRECC_OPENCL_FACTORS", "4,2")
    assert coarsen.ranked_factors("pthread", "cpu")[0] == [4, 2]


def test_plan_accepts_what_the_pass_accepts_and_the_form_compiles(llvm_plugin, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("MIRECC_OPENCL_FACTORS", "2,4,8")
    clang, major, plugin = llvm_plugin(14)
    plan, coarse = coarsen.make_plan(SOURCE, "-DUNUSED=1", "cpu", "cpu", major, plugin)
    lines = [ln.split("\t") for ln in plan.splitlines()[1:]]
    assert plan.startswith(coarsen.PLAN_HEADER)
    assert ["kernel", "saxpy", "0", "2,4,8", "local"] == lines[0][:5]
    assert lines[1][:2] == ["refused", "fixed"] and "attributes" in lines[1][2]
    assert lines[2][:2] == ["refused", "reduce"]
    assert "local memory" in lines[2][2] or "barrier" in lines[2][2]
    for k in (2, 4, 8):
        assert f"__kernel void saxpy__mirecc_f{k}(" in coarse
    assert "fixed__mirecc" not in coarse and "reduce__mirecc" not in coarse
    cl = tmp_path / "coarse.cl"
    cl.write_text(coarse)
    subprocess.run([clang, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                    "-c", str(cl), "-o", str(tmp_path / "coarse.o")], check=True)


def _opencl_or_skip():
    from mirecc.tasks.opencl.run import opencl_devices

    if not opencl_devices():
        pytest.skip("no OpenCL device (pocl-opencl-icd is installed by scripts/setup.sh)")
    if not Path("/usr/include/CL/cl.h").is_file():
        pytest.skip("no OpenCL headers (opencl-headers)")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    _opencl_or_skip()
    work = tmp_path_factory.mktemp("cl")
    exe = work / "cl_driver"
    cc = shutil.which("clang-14") or "cc"
    subprocess.run([cc, "-O1", str(DRIVER), "-o", str(exe), "-lOpenCL"], check=True)
    cl = work / "k.cl"
    cl.write_text(SOURCE.replace(
        "kernel void reduce(global float *x, local float *tmp)",
        "kernel void reduce(global float *x, global float *tmp)"))
    return exe, cl


def _run(args, env_extra, tmp_path, opencl=("--opencl",)):
    env = {**os.environ, "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
           "MIRECC_OPENCL_FACTORS": "2,4,8", **env_extra}
    mire = [sys.executable, "-m", "mirecc.cli.mire", "run", "--no-numa", *opencl, "--"] \
        if opencl is not None else []
    proc = subprocess.run([*mire, *map(str, args)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    digest = re.search(r"^digest (\w+)$", proc.stdout, re.M).group(1)
    return digest, proc.stderr


def _record(path: Path) -> dict:
    lines = [ln.split("\t") for ln in path.read_text().splitlines() if not ln.startswith("#")]
    return {row[0]: dict(zip(lines[0], row)) for row in lines[1:]}


@pytest.mark.parametrize("factor,local", [(2, "64"), (8, "256")])
def test_a_forced_factor_writes_the_plain_runs_bytes(driver, tmp_path, factor, local):
    exe, cl = driver
    args = [exe, cl, "saxpy", 65536, local, 3, "f:65536", "f:65536", "F:0.5", "I:60000"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    record = tmp_path / "rec.tsv"
    got, err = _run(args, {}, tmp_path, ("--opencl", "--opencl-factor", str(factor),
                                         "--opencl-record", str(record)))
    assert got == plain, err
    row = _record(record)["saxpy"]
    assert row["phase"] == "forced" and row["kept"] == f"f{factor}"
    arms = dict(a.split(":")[:2] for a in row["arms"].split(";"))
    assert int(arms[f"f{factor}"]) >= 2      # launches timed at the factor
    assert int(arms["f1"]) == 0               # and none at factor 1


def test_every_factor_in_turn_times_each_within_one_run(driver, tmp_path):
    exe, cl = driver
    args = [exe, cl, "saxpy", 65536, "64", 12, "f:65536", "f:65536", "F:0.5", "I:60000"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    record = tmp_path / "rec.tsv"
    got, err = _run(args, {}, tmp_path, ("--opencl", "--opencl-factor", "all",
                                         "--opencl-record", str(record)))
    assert got == plain, err
    assert record.read_text().startswith("# mirecc-opencl record 1 forced=all")
    arms = dict(a.split(":")[:2] for a in _record(record)["saxpy"]["arms"].split(";"))
    assert set(arms) == {"f1", "f2", "f4", "f8"}
    assert all(int(n) >= 2 for n in arms.values()), arms   # 12 launches, 4 arms, 1 warm-up


def test_a_kernel_reading_its_work_group_keeps_factor_one_without_a_local_size(driver,
                                                                              tmp_path):
    """The platform's own work-group for the coarsened launch need not match
    the original's, and this saxpy writes its local id into the output."""
    exe, cl = driver
    args = [exe, cl, "saxpy", 65536, "0", 3, "f:65536", "f:65536", "F:0.5", "I:60000"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    record = tmp_path / "rec.tsv"
    got, _ = _run(args, {}, tmp_path, ("--opencl", "--opencl-factor", "8",
                                       "--opencl-record", str(record)))
    assert got == plain
    arms = dict(a.split(":")[:2] for a in _record(record)["saxpy"]["arms"].split(";"))
    assert arms["f8"] == "0"


def test_a_launch_the_factor_does_not_divide_runs_factor_one(driver, tmp_path):
    exe, cl = driver
    args = [exe, cl, "saxpy", 1001, "7", 3, "f:1001", "f:1001", "F:0.5", "I:1001"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    record = tmp_path / "rec.tsv"
    got, _ = _run(args, {}, tmp_path, ("--opencl", "--opencl-factor", "2",
                                       "--opencl-record", str(record)))
    assert got == plain
    arms = dict(a.split(":")[:2] for a in _record(record)["saxpy"]["arms"].split(";"))
    assert arms["f2"] == "0"


def test_adaptive_runs_explore_store_and_resume(driver, tmp_path):
    exe, cl = driver
    args = [exe, cl, "saxpy", 262144, "64", 40, "f:262144", "f:262144", "F:0.5", "I:262144"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    store, record = tmp_path / "store.txt", tmp_path / "rec.tsv"
    env = {"MIRECC_ADAPT_STORE": str(store), "MIRECC_ADAPT_MIN_US": "0"}
    for run in (1, 2):
        got, err = _run(args, env, tmp_path, ("--opencl", "--opencl-record", str(record)))
        assert got == plain, err
        row = _record(record)["saxpy"]
        assert row["phase"] in ("exploring", "decided"), row
        lines = [ln.split("\t") for ln in store.read_text().splitlines()[1:]]
        assert store.read_text().startswith("# mirecc-adapt 1")
        (line,) = [ln for ln in lines if ln[0].startswith("cl-") and ln[0].endswith("-saxpy")]
        assert int(line[7]) == run                       # runs: the second resumed the first
        assert line[14].startswith("default:")           # factor 1 is the reference arm
    # mire adapt reads the same store
    from mirecc.runtime.store import read_store
    cells = read_store(store)
    assert any(c.key == line[0] for c in cells)


def test_launches_queued_before_any_wait_still_alternate_in_the_first_run(driver, tmp_path):
    """cl_driver queues all its launches and waits once, as OpenCL programs
    do: no launch has been timed when the next is queued.  The first run
    still tries the first factor, alternating with factor 1 in the queue,
    with no more of its launches than its verdict needs."""
    exe, cl = driver
    args = [exe, cl, "saxpy", 262144, "64", 30, "f:262144", "f:262144", "F:0.5", "I:262144"]
    store, record = tmp_path / "store.txt", tmp_path / "rec.tsv"
    env = {"MIRECC_ADAPT_STORE": str(store), "MIRECC_ADAPT_MIN_US": "0",
           "MIRECC_ADAPT_BUDGET": "1"}
    _run(args, env, tmp_path, ("--opencl", "--opencl-record", str(record)))
    arms = dict(a.split(":")[:2] for a in _record(record)["saxpy"]["arms"].split(";"))
    # 4 samples (MIRECC_ADAPT_PAIRS) after its warm-up launch (a later factor
    # starts only where a verdict came while launches were still queued)
    n = {f: int(arms[f]) for f in ("f1", "f2", "f4", "f8")}
    assert n["f2"] == 4 and n["f4"] <= 4 and n["f8"] <= 4, arms
    assert n["f1"] >= 30 - n["f2"] - n["f4"] - n["f8"] - 4, arms   # the rest, less warm-ups


def test_fails_open_when_the_planner_fails_or_the_form_does_not_build(driver, tmp_path):
    exe, cl = driver
    args = [exe, cl, "saxpy", 4096, "64", 2, "f:4096", "f:4096", "F:0.5", "I:4096"]
    plain, _ = _run(args, {}, tmp_path, opencl=None)
    # a planner that fails: the program's own kernels, one warning
    env = {**os.environ, "MIRECC_CACHE_DIR": str(tmp_path / "c1"),
           "MIRECC_OPENCL_FACTORS": "2,4,8"}
    lib = _interposer()
    proc = subprocess.run(list(map(str, args)), capture_output=True, text=True,
                          env={**env, "LD_PRELOAD": str(lib), "MIRECC_OPENCL_PLANNER": "false"})
    assert proc.returncode == 0
    assert f"digest {plain}" in proc.stdout
    assert proc.stderr.count("mirecc-opencl: warning:") == 1, proc.stderr
    # a coarsened form that does not build: the same
    planner = tmp_path / "bad-planner.sh"
    planner.write_text("#!/bin/sh\nprintf '# mirecc-opencl-plan 1\\nkernel\\tsaxpy\\t0\\t2\\t-\\tx\\n'"
                       " > \"$5.plan\"\necho 'this is not OpenCL C' > \"$5.cl\"\n")
    planner.chmod(0o755)
    proc = subprocess.run(list(map(str, args)), capture_output=True, text=True,
                          env={**env, "MIRECC_CACHE_DIR": str(tmp_path / "c2"),
                               "LD_PRELOAD": str(lib), "MIRECC_OPENCL_PLANNER": str(planner),
                               "MIRECC_OPENCL_FACTOR": "2"})
    assert proc.returncode == 0 and f"digest {plain}" in proc.stdout
    assert "did not build" in proc.stderr and proc.stderr.count("warning:") == 1


def _interposer():
    from mirecc.runtime.build import ensure_interposer
    return ensure_interposer(shutil.which("clang-14") or "cc")


def test_mire_run_opencl_options(tmp_path):
    env = {**os.environ, "MIRECC_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", "--opencl-record",
                           str(tmp_path / "r.tsv"), "--", "true"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "go with --opencl" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", "--dry-run",
                           "--no-numa", "--opencl", "--opencl-device=auto", "--", "true"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "LD_PRELOAD=" in proc.stdout and "libmirecc-opencl.so" in proc.stdout
    from mirecc.tasks.opencl.run import opencl_devices
    if len(opencl_devices()) <= 1:
        assert "offers one OpenCL device" in proc.stdout


def test_confirm_alternates_devices_run_by_run_and_a_stored_verdict_holds(driver, tmp_path):
    """pocl offers two real devices when asked (POCL_DEVICES): 'basic' (one
    thread) and 'pthread'.  With --opencl-device=confirm the program's own
    device (the first listed) and the other alternate run by run, each
    device's first run a warm-up; outputs stay the plain run's; a decided
    verdict in the store gives the program the kept device."""
    exe, cl = driver
    env = {"POCL_DEVICES": "basic pthread", "MIRECC_ADAPT_STORE": str(tmp_path / "store.txt")}
    probe = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", "--dry-run",
                            "--no-numa", "--opencl", "--opencl-device=confirm", "--", "true"],
                           capture_output=True, text=True, env={**os.environ, **env})
    assert probe.returncode == 0, probe.stderr
    if "2 devices" not in probe.stdout:
        pytest.skip("this OpenCL platform does not offer two devices through POCL_DEVICES")
    args = [exe, cl, "saxpy", 4096, "64", 2, "f:4096", "f:4096", "F:0.5", "I:4096"]
    plain, _ = _run(args, {"POCL_DEVICES": "basic pthread"}, tmp_path, opencl=None)
    record, store = tmp_path / "rec.tsv", tmp_path / "store.txt"
    used = []
    for _ in range(4):
        got, err = _run(args, env, tmp_path, ("--opencl", "--opencl-device=confirm",
                                              "--opencl-record", str(record)))
        assert got == plain, err
        used.append(_record(record)["(device)"]["device"])
    assert used[0] == used[2] != used[1] == used[3], used
    (line,) = [ln.split("\t") for ln in store.read_text().splitlines()
               if ln.startswith("cldev-")]
    arms = [a.split(":") for a in line[14].split(";")]
    assert [a[0] for a in arms][0] == "default" and arms[1][0].startswith("dev-")
    # warm-ups not counted, then one sample each; the other device undecided
    # (at -1) unless its one sample was clearly slower (dropped at once: pocl's
    # pthread device on a program this small can take more than 1.5x basic's)
    assert [a[1] for a in arms] == ["1", "1"] and arms[0][4] == "-1", arms
    assert arms[1][4] == "-1" or (arms[1][2], arms[1][3]) == ("1", "0"), arms
    # a decided verdict for the other device: every run gets it
    line[3], line[4] = "1", arms[1][0]
    text = "".join(("\t".join(line) if ln.startswith("cldev-") else ln) + "\n"
                   for ln in store.read_text().splitlines())
    store.write_text(text)
    got, err = _run(args, env, tmp_path, ("--opencl", "--opencl-device=confirm",
                                          "--opencl-record", str(record)))
    assert got == plain, err
    row = _record(record)["(device)"]
    assert row["device"] == used[1] and row["phase"] == "decided" and row["kept"] == used[1]
    # without the setting the program's own device, nothing stored for it
    store.unlink()
    _run(args, env, tmp_path, ("--opencl", "--opencl-record", str(record)))
    assert "(device)" not in _record(record)
    assert "cldev-" not in (store.read_text() if store.exists() else "")
