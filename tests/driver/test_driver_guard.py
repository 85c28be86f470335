"""The whole-driver guard: an internal error anywhere in mirecc (not only in
the ML path) runs the user's command with clang, with exactly one warning.

Faults are injected with ``MIRECC_DEBUG_FAULT=driver-<step>`` at each step
of the driver: reading the configuration, classifying the command line,
listing the installed heads, printing the explanation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
WARNING = "mirecc: warning: internal error RuntimeError: fault injected by MIRECC_DEBUG_FAULT="

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

SOURCE = """\
int f(int x) { int unused; return 2 * x; }
int g(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
"""


def run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("step", ["driver-config", "driver-classify", "driver-heads",
                                  "driver-explain"])
@pytest.mark.parametrize("explain", [False, True])
def test_a_fault_anywhere_compiles_like_clang_with_one_warning(tmp_path, step, explain):
    (tmp_path / "a.c").write_text(SOURCE)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_DEBUG_FAULT=step,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    own = ["--explain"] if explain else []
    args = ["-O2", "-Wall", "-c", "a.c", "-o", "a.o"]
    ours = run([MIRECC, *own, *args], tmp_path, env)
    (tmp_path / "a.o").rename(tmp_path / "ours.o")
    theirs = run([CLANG, *args], tmp_path, env)
    assert ours.returncode == theirs.returncode == 0
    lines = ours.stderr.decode().splitlines()
    warnings = [ln for ln in lines if ln.startswith("mirecc: warning:")]
    reached = step != "driver-explain" or explain     # the explanation only with --explain
    if not reached:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith(WARNING + step), warnings
    # clang's own diagnostics, unchanged
    assert [ln for ln in lines if not ln.startswith("mirecc:")] == \
        theirs.stderr.decode().splitlines()
    assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "a.o").read_bytes()


def test_a_fault_keeps_clangs_exit_code_for_a_broken_source(tmp_path):
    (tmp_path / "bad.c").write_text("int f(int x) { return x +; }\n")
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_DEBUG_FAULT="driver-classify")
    ours = run([MIRECC, "-O2", "-c", "bad.c", "-o", "bad.o"], tmp_path, env)
    theirs = run([CLANG, "-O2", "-c", "bad.c", "-o", "bad.o"], tmp_path, env)
    assert ours.returncode == theirs.returncode == 1
    assert b"error: expected expression" in ours.stderr


def test_a_fault_before_the_compiler_is_known_uses_a_clang_on_path(tmp_path):
    """The configuration step itself fails: mirecc still finds a clang."""
    (tmp_path / "a.c").write_text(SOURCE)
    env = isolated_env(tmp_path, MIRECC_DEBUG_FAULT="driver-config")
    proc = run([MIRECC, "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
    assert proc.returncode == 0
    assert (tmp_path / "a.o").is_file()
    [warning] = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("mirecc:")]
    assert warning.startswith(WARNING + "driver-config")


def test_quiet_guard(tmp_path):
    (tmp_path / "a.c").write_text(SOURCE)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_DEBUG_FAULT="driver-classify",
                       MIRECC_QUIET="1")
    proc = run([MIRECC, "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
    assert proc.returncode == 0 and b"mirecc:" not in proc.stderr
