"""Configuration: ``.mirecc.yaml`` (found upward or named by MIRECC_CONFIG) and
the environment, checked through the real ``mirecc`` executable.

Which compiler mirecc chose is read from ``--explain=json``; with ``-O0`` the
explanation costs no ML work, so these calls are cheap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
CLANG_IN_LLVM_DIR = "/usr/lib/llvm-14/bin/clang"   # same compiler, another path
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(
    not (os.access(CLANG, os.X_OK) and os.access(CLANG_IN_LLVM_DIR, os.X_OK)),
    reason="needs clang-14 as /usr/bin/clang-14 and /usr/lib/llvm-14/bin/clang")

SOURCE = "int f(int x) { return x + 1; }\n"


def base_env(tmp_path: Path, **extra: str) -> dict:
    """No MIRECC_* from the caller; no MIRECC_CC unless a test sets it."""
    return isolated_env(tmp_path, **extra)


def mirecc(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([MIRECC, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def chosen_compiler(cwd: Path, env: dict) -> str:
    (cwd / "x.c").write_text(SOURCE)
    proc = mirecc(["--explain=json", "-O0", "-c", "x.c", "-o", "x.o"], cwd, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["compiler"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- finding the file -------------------------------------------------------------


def test_file_in_cwd_is_used(tmp_path):
    write(tmp_path / ".mirecc.yaml", f"cc: {CLANG_IN_LLVM_DIR}\n")
    assert chosen_compiler(tmp_path, base_env(tmp_path)) == CLANG_IN_LLVM_DIR


def test_file_found_upward_from_cwd(tmp_path):
    write(tmp_path / "proj" / ".mirecc.yaml", f"cc: {CLANG_IN_LLVM_DIR}\n")
    deep = tmp_path / "proj" / "src" / "lib" / "deep"
    deep.mkdir(parents=True)
    assert chosen_compiler(deep, base_env(tmp_path)) == CLANG_IN_LLVM_DIR


def test_nearest_file_wins(tmp_path):
    write(tmp_path / "proj" / ".mirecc.yaml", f"cc: {CLANG_IN_LLVM_DIR}\n")
    write(tmp_path / "proj" / "sub" / ".mirecc.yaml", f"cc: {CLANG}\n")
    assert chosen_compiler(tmp_path / "proj" / "sub", base_env(tmp_path)) == CLANG


def test_mirecc_config_names_the_file(tmp_path):
    named = write(tmp_path / "elsewhere" / "my-config.yaml", f"cc: {CLANG_IN_LLVM_DIR}\n")
    # A file in the cwd that would otherwise be found is ignored.
    write(tmp_path / "work" / ".mirecc.yaml", "cc: /nonexistent/clang\n")
    env = base_env(tmp_path, MIRECC_CONFIG=str(named))
    assert chosen_compiler(tmp_path / "work", env) == CLANG_IN_LLVM_DIR


def test_mirecc_config_naming_a_missing_file_is_an_error(tmp_path):
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CONFIG=str(tmp_path / "nope.yaml"))
    (tmp_path / "x.c").write_text(SOURCE)
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr and "MIRECC_CONFIG" in proc.stderr
    assert not (tmp_path / "x.o").exists()


def test_no_file_anywhere_uses_defaults(tmp_path):
    env = base_env(tmp_path, MIRECC_CC=CLANG)
    assert chosen_compiler(tmp_path, env) == CLANG


# --- bad files: an error naming the file and the key, nothing compiled ----------------


def assert_config_error(tmp_path: Path, cwd: Path, *needles: str) -> str:
    (cwd / "x.c").write_text(SOURCE)
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], cwd, base_env(tmp_path, MIRECC_CC=CLANG))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mirecc: error: "), proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    assert not (cwd / "x.o").exists()
    return proc.stderr


def test_unknown_key_is_an_error(tmp_path):
    config = write(tmp_path / ".mirecc.yaml", "cc: clang-14\ntimout: 5\n")
    message = assert_config_error(tmp_path, tmp_path, str(config), "'timout'")
    assert "timeout" in message  # the known keys are listed


def test_unknown_key_in_a_parent_directory_file(tmp_path):
    config = write(tmp_path / ".mirecc.yaml", "capture: yes\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert_config_error(tmp_path, sub, str(config), "'capture'")


@pytest.mark.parametrize("text,key", [
    ("timeout: -1\n", "timeout"),
    ("timeout: 0\n", "timeout"),
    ("timeout: soon\n", "timeout"),
    ("timeout: true\n", "timeout"),
    ("timeout: .inf\n", "timeout"),
    ("timeout: .nan\n", "timeout"),
    ("cache: maybe\n", "cache"),
    ("cache: 2\n", "cache"),
    ("prefix: 3\n", "prefix"),
    ("prefix: [ccache, 3]\n", "prefix"),
    ("cc: ''\n", "cc"),
    ("cc: [clang]\n", "cc"),
    ("warnings: sometimes\n", "warnings"),
    ("disable: {}\n", "disable"),
    ("capture_dir: 7\n", "capture_dir"),
])
def test_bad_value_is_an_error(tmp_path, text, key):
    config = write(tmp_path / ".mirecc.yaml", text)
    assert_config_error(tmp_path, tmp_path, str(config), f"'{key}'")


def test_empty_file_is_fine(tmp_path):
    write(tmp_path / ".mirecc.yaml", "")
    assert chosen_compiler(tmp_path, base_env(tmp_path, MIRECC_CC=CLANG)) == CLANG
    write(tmp_path / ".mirecc.yaml", "# only a comment\n")
    assert chosen_compiler(tmp_path, base_env(tmp_path, MIRECC_CC=CLANG)) == CLANG


@pytest.mark.parametrize("text", ["- cc\n- clang\n", "just a string\n", "42\n"])
def test_non_mapping_yaml_is_rejected(tmp_path, text):
    config = write(tmp_path / ".mirecc.yaml", text)
    assert_config_error(tmp_path, tmp_path, str(config), "mapping")


@pytest.mark.parametrize("text", ["cc: [unclosed\n", "cc: a\n  b: c\n", "\tcc: x\n"])
def test_invalid_yaml_is_rejected_with_the_file_name(tmp_path, text):
    config = write(tmp_path / ".mirecc.yaml", text)
    assert_config_error(tmp_path, tmp_path, str(config), "YAML")


def test_undecodable_file_is_rejected(tmp_path):
    config = tmp_path / ".mirecc.yaml"
    config.write_bytes(b"cc: \xff\xfe\n")
    assert_config_error(tmp_path, tmp_path, str(config))


# --- environment --------------------------------------------------------------------


def test_environment_beats_the_file(tmp_path):
    write(tmp_path / ".mirecc.yaml", f"cc: {CLANG_IN_LLVM_DIR}\n")
    assert chosen_compiler(tmp_path, base_env(tmp_path, MIRECC_CC=CLANG)) == CLANG


def test_environment_beats_the_file_for_capture_and_quiet(tmp_path):
    write(tmp_path / ".mirecc.yaml",
          "capture_dir: from-file\nwarnings: true\nplugin: /nonexistent.so\n")
    (tmp_path / "x.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CAPTURE_DIR=str(tmp_path / "from-env"),
                   MIRECC_QUIET="1")
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 0
    assert proc.stderr == ""    # the plugin is missing, but MIRECC_QUIET wins
    assert not (tmp_path / "from-file").exists()


def test_bad_environment_value_is_an_error_naming_the_variable(tmp_path):
    (tmp_path / "x.c").write_text(SOURCE)
    for var, value in [("MIRECC_TIMEOUT", "abc"), ("MIRECC_CACHE", "maybe"),
                       ("MIRECC_QUIET", "loud"), ("MIRECC_TIMEOUT", "inf")]:
        proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], tmp_path,
                      base_env(tmp_path, MIRECC_CC=CLANG, **{var: value}))
        assert proc.returncode == 2, (var, value, proc.stderr)
        assert var in proc.stderr
        assert not (tmp_path / "x.o").exists()


def test_disable_from_file_is_pure_pass_through(tmp_path):
    write(tmp_path / ".mirecc.yaml", "disable: true\ncapture_dir: cap\n")
    (tmp_path / "x.c").write_text(SOURCE)
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], tmp_path,
                  base_env(tmp_path, MIRECC_CC=CLANG))
    assert proc.returncode == 0 and (tmp_path / "x.o").is_file()
    assert not (tmp_path / "cap").exists()


# --- relative paths -----------------------------------------------------------------


def test_relative_paths_resolve_relative_to_the_file(tmp_path):
    proj = tmp_path / "proj"
    write(proj / ".mirecc.yaml", "capture_dir: corpus\ncache_dir: .cache/mirecc\n")
    build = proj / "build" / "sub"
    build.mkdir(parents=True)
    (build / "x.c").write_text(SOURCE)
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], build, base_env(tmp_path, MIRECC_CC=CLANG))
    assert proc.returncode == 0, proc.stderr
    assert (proj / "corpus" / "manifest.jsonl").is_file()
    assert list((proj / ".cache" / "mirecc" / "results").rglob("*.json"))
    assert not (build / "corpus").exists()
    assert not (tmp_path / "xdg-cache" / "mirecc").exists()


def test_relative_path_from_mirecc_config_is_relative_to_that_file(tmp_path):
    named = write(tmp_path / "conf" / "mirecc.yaml", "capture_dir: ../corpus\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "x.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CONFIG=str(named))
    proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], work, env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "corpus" / "manifest.jsonl").is_file()


def test_prefix_as_string_and_list(tmp_path):
    """prefix: a shell-like string or a list; both run the launcher."""
    log = tmp_path / "log"
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec "$@"\n')
    launcher.chmod(0o755)
    (tmp_path / "x.c").write_text(SOURCE)
    for text in (f"prefix: {launcher}\n", f"prefix: [{launcher}]\n"):
        write(tmp_path / ".mirecc.yaml", text)
        proc = mirecc(["-O2", "-c", "x.c", "-o", "x.o"], tmp_path,
                      base_env(tmp_path, MIRECC_CC=CLANG))
        assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == [f"{CLANG} -O2 -c x.c -o x.o"] * 2


# --- the loader in-process (fast checks of the same rules) -----------------------------


def test_load_config_precedence_in_process(tmp_path, monkeypatch):
    from mirecc.taskapi.config import Config, load_config

    monkeypatch.delenv("MIRECC_CONFIG", raising=False)
    write(tmp_path / ".mirecc.yaml", "timeout: 5\ncache: off\nheads_dir: heads\n")
    config = load_config(start=tmp_path, environ={"MIRECC_TIMEOUT": "7"})
    assert config.timeout == 7.0
    assert config.cache is False
    assert config.heads_dir == str(tmp_path / "heads")
    assert str(tmp_path / ".mirecc.yaml") in config.source and "MIRECC_TIMEOUT" in config.source
    assert load_config(start=tmp_path / "nowhere-below", environ={}).timeout == 5.0
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("MIRECC_CONFIG", str(tmp_path / ".mirecc.yaml"))
    assert load_config(start=empty, environ={}).cache is False
    assert Config().timeout > 0


def test_print_toolchain_file_with_a_bad_config_is_a_clean_error(tmp_path):
    config = write(tmp_path / ".mirecc.yaml", "bogus: 1\n")
    proc = mirecc(["--print-toolchain-file"], tmp_path, base_env(tmp_path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mirecc: error: "), proc.stderr
    assert str(config) in proc.stderr and "'bogus'" in proc.stderr


def test_print_toolchain_file_goes_to_the_configured_cache_dir(tmp_path):
    write(tmp_path / ".mirecc.yaml", "cache_dir: my-cache\n")
    proc = mirecc(["--print-toolchain-file"], tmp_path, base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    assert path.is_relative_to(tmp_path / "my-cache") and path.is_file()
    assert path.stat().st_mode & 0o044 == 0o044   # readable by the build's other users
