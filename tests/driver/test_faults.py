"""Fail-open: whatever goes wrong on the ML path, the build is clang's own.

Every test runs the real ``mirecc`` executable and the real clang-14 as
subprocesses, in a temporary working directory with a controlled
environment, and compares mirecc's result with plain clang's: identical
output bytes, identical exit code, and clang's stderr unchanged apart from
exactly one ``mirecc: warning:`` line (none when warnings are off).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
WARNING_PREFIX = "mirecc: warning:"

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# A TU with two functions, a nested loop and something clang warns about
# under -Wall, so that clang's own stderr is not empty.
SOURCE_A = """\
int sum2d(const int *a, int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            s += a[i * n + j];
    return s;
}
int twice(int x) { int unused; return 2 * x; }
"""
SOURCE_MAIN = """\
int sum2d(const int *a, int n);
int main(void) { static int a[16]; return sum2d(a, 4); }
"""
SOURCE_BROKEN = """\
int f(int x) { return x +; }
"""


def base_env(tmp_path: Path, **extra: str) -> dict:
    """A controlled environment with a private TMPDIR, so that leftovers of
    the ML path can be seen."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG, "TMPDIR": str(tmpdir), **extra})


def run(cmd: list[str], cwd: Path, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def warnings_in(stderr: bytes) -> list[str]:
    return [ln for ln in stderr.decode().splitlines() if ln.startswith("mirecc:")]


def without_mirecc_lines(stderr: bytes) -> str:
    return "".join(ln for ln in stderr.decode().splitlines(keepends=True)
                   if not ln.startswith("mirecc:"))


def compare_with_clang(tmp_path: Path, args: list[str], output: str, env: dict,
                       expect_warnings: int) -> str:
    """Run ``mirecc args -o output`` and ``clang args -o ref-output``; assert the
    fail-open promise; return the mirecc warning ('' if none expected)."""
    ref_out = "ref-" + output
    ref = run([CLANG, *args, "-o", ref_out], tmp_path, env)
    got = run([MIRECC, *args, "-o", output], tmp_path, env)
    assert got.returncode == ref.returncode, got.stderr.decode()
    if ref.returncode == 0:
        assert (tmp_path / output).read_bytes() == (tmp_path / ref_out).read_bytes()
    else:
        assert not (tmp_path / output).exists()
    assert got.stdout == ref.stdout
    found = warnings_in(got.stderr)
    assert len(found) == expect_warnings, got.stderr.decode()
    assert all(w.startswith(WARNING_PREFIX) for w in found), found
    # clang's own diagnostics are all there, unchanged and in order.
    assert without_mirecc_lines(got.stderr) == ref.stderr.decode()
    # The ML path cleaned up its private temporary directory.
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    return found[0] if found else ""


# --- fault set-ups --------------------------------------------------------------
# Each returns extra environment variables and the words the warning must contain.
# Unless a fault is itself about capture or heads, the ML path is switched on by
# capturing into a writable directory.


def _capture_on(tmp_path: Path) -> dict:
    return {"MIRECC_CAPTURE_DIR": str(tmp_path / "capture")}


def _regular_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file, so nothing can be created below it\n")
    return blocker


def _model_dir(tmp_path: Path, manifest: str | None) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00\x01weights\x02")
    if manifest is not None:
        (model / "manifest.json").write_text(manifest)
    return model


def fault_exception(tmp_path):
    return {**_capture_on(tmp_path), "MIRECC_DEBUG_FAULT": "exception"}, ["internal error"]


def fault_hang(tmp_path):
    return ({**_capture_on(tmp_path), "MIRECC_DEBUG_FAULT": "hang", "MIRECC_TIMEOUT": "1"},
            ["timed out after 1 s"])


def fault_tiny_timeout(tmp_path):
    return {**_capture_on(tmp_path), "MIRECC_TIMEOUT": "0.001"}, ["timed out"]


def fault_missing_model(tmp_path):
    return {**_capture_on(tmp_path), "MIRECC_MODEL": "/nonexistent"}, ["/nonexistent"]


def fault_model_sha_mismatch(tmp_path):
    manifest = json.dumps({"name": "tiny", "version": "1",
                           "files": {"weights.bin": hashlib.sha256(b"other").hexdigest()}})
    model = _model_dir(tmp_path, manifest)
    return {**_capture_on(tmp_path), "MIRECC_MODEL": str(model)}, ["weights.bin", "corrupt"]


def fault_model_file_missing(tmp_path):
    manifest = json.dumps({"name": "tiny", "version": "1",
                           "files": {"gone.onnx": hashlib.sha256(b"x").hexdigest()}})
    model = _model_dir(tmp_path, manifest)
    return {**_capture_on(tmp_path), "MIRECC_MODEL": str(model)}, ["gone.onnx", "missing"]


def fault_model_manifest_unparseable(tmp_path):
    model = _model_dir(tmp_path, '{"name": "tiny", "files": {')
    return {**_capture_on(tmp_path), "MIRECC_MODEL": str(model)}, ["manifest.json"]


def fault_model_manifest_missing(tmp_path):
    model = _model_dir(tmp_path, None)
    return {**_capture_on(tmp_path), "MIRECC_MODEL": str(model)}, ["manifest.json"]


def fault_missing_plugin(tmp_path):
    return ({**_capture_on(tmp_path), "MIRECC_PLUGIN": "/nonexistent.so"},
            ["/nonexistent.so"])


def fault_unwritable_cache(tmp_path):
    blocker = _regular_file(tmp_path)
    return ({**_capture_on(tmp_path), "MIRECC_CACHE_DIR": str(blocker / "cache")},
            [str(blocker), "cache"])


def fault_unwritable_capture(tmp_path):
    blocker = _regular_file(tmp_path)
    return {"MIRECC_CAPTURE_DIR": str(blocker / "capture")}, [str(blocker), "capture"]


def _heads(tmp_path: Path, spec: str) -> Path:
    heads = tmp_path / "heads"
    (heads / "myhead").mkdir(parents=True)
    (heads / "myhead" / "spec.yaml").write_text(spec)
    return heads


def fault_unknown_head_task(tmp_path):
    # Installed heads alone switch the ML path on: no capture here.
    heads = _heads(tmp_path, "task: no-such-task\n")
    return {"MIRECC_HEADS_DIR": str(heads)}, ["no-such-task", "spec.yaml"]


def fault_head_without_task(tmp_path):
    heads = _heads(tmp_path, "name: a head with no task\n")
    return {"MIRECC_HEADS_DIR": str(heads)}, ["spec.yaml", "task"]


def fault_head_spec_unparseable(tmp_path):
    heads = _heads(tmp_path, "task: [unclosed\n")
    return {"MIRECC_HEADS_DIR": str(heads)}, ["spec.yaml"]


FAULTS = {f.__name__[len("fault_"):]: f for f in (
    fault_exception, fault_hang, fault_tiny_timeout, fault_missing_model,
    fault_model_sha_mismatch, fault_model_file_missing, fault_model_manifest_unparseable,
    fault_model_manifest_missing, fault_missing_plugin, fault_unwritable_cache,
    fault_unwritable_capture, fault_unknown_head_task, fault_head_without_task,
    fault_head_spec_unparseable)}


# Known bug (mirecc/tu/pipeline.py load_head, driver.py _say): a YAML error in a
# head's spec.yaml is put into the warning verbatim, and PyYAML's messages span
# several lines, so the "one warning line" promise breaks.
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_compiles_exactly_like_clang_with_one_warning(tmp_path, fault):
    extra, words = FAULTS[fault](tmp_path)
    (tmp_path / "a.c").write_text(SOURCE_A)
    env = base_env(tmp_path, **extra)
    warning = compare_with_clang(tmp_path, ["-O2", "-Wall", "-c", "a.c"], "a.o", env,
                                 expect_warnings=1)
    for word in words:
        assert word in warning, warning
    assert warning.endswith("compiled without mirecc decisions") or fault == "unwritable_cache"


def test_without_fault_the_ml_path_is_silent(tmp_path):
    """The control: the same set-up with nothing broken prints no warning."""
    (tmp_path / "a.c").write_text(SOURCE_A)
    env = base_env(tmp_path, **_capture_on(tmp_path))
    compare_with_clang(tmp_path, ["-O2", "-Wall", "-c", "a.c"], "a.o", env, expect_warnings=0)
    assert (tmp_path / "capture" / "manifest.jsonl").is_file()


def test_a_valid_model_is_accepted(tmp_path):
    """A model directory whose manifest matches its files is no fault."""
    weights = b"\x00\x01weights\x02"
    manifest = json.dumps({"name": "tiny", "version": "1",
                           "files": {"weights.bin": hashlib.sha256(weights).hexdigest()}})
    model = _model_dir(tmp_path, manifest)
    (tmp_path / "a.c").write_text(SOURCE_A)
    env = base_env(tmp_path, **_capture_on(tmp_path), MIRECC_MODEL=str(model))
    compare_with_clang(tmp_path, ["-O2", "-Wall", "-c", "a.c"], "a.o", env, expect_warnings=0)


QUIET_FAULTS = ["exception", "hang", "model_sha_mismatch", "unwritable_cache",
                "unwritable_capture", "unknown_head_task"]


@pytest.mark.parametrize("how", ["MIRECC_QUIET", "warnings-false-in-file"])
@pytest.mark.parametrize("fault", QUIET_FAULTS)
def test_quiet_means_no_warning(tmp_path, fault, how):
    extra, _ = FAULTS[fault](tmp_path)
    if how == "MIRECC_QUIET":
        extra["MIRECC_QUIET"] = "1"
    else:
        (tmp_path / ".mirecc.yaml").write_text("warnings: false\n")
    (tmp_path / "a.c").write_text(SOURCE_A)
    env = base_env(tmp_path, **extra)
    compare_with_clang(tmp_path, ["-O2", "-Wall", "-c", "a.c"], "a.o", env, expect_warnings=0)


@pytest.mark.parametrize("fault", [None, "unwritable_capture", "unwritable_cache"])
def test_compile_error_gives_clangs_error_and_no_warning(tmp_path, fault):
    extra, _ = FAULTS[fault](tmp_path) if fault else (_capture_on(tmp_path), [])
    (tmp_path / "broken.c").write_text(SOURCE_BROKEN)
    env = base_env(tmp_path, **extra)
    compare_with_clang(tmp_path, ["-O2", "-c", "broken.c"], "broken.o", env,
                       expect_warnings=0)


def test_compile_error_in_second_of_two_sources(tmp_path):
    (tmp_path / "a.c").write_text(SOURCE_A)
    (tmp_path / "broken.c").write_text(SOURCE_BROKEN)
    env = base_env(tmp_path, **_capture_on(tmp_path))
    compare_with_clang(tmp_path, ["-O2", "a.c", "broken.c"], "prog", env, expect_warnings=0)


@pytest.mark.parametrize("fault", ["exception", "tiny_timeout", "missing_plugin",
                                   "unwritable_cache", "unwritable_capture",
                                   "unknown_head_task"])
def test_compile_and_link_two_sources_warns_once(tmp_path, fault):
    extra, _ = FAULTS[fault](tmp_path)
    (tmp_path / "a.c").write_text(SOURCE_A)
    (tmp_path / "main.c").write_text(SOURCE_MAIN)
    env = base_env(tmp_path, **extra)
    compare_with_clang(tmp_path, ["-O2", "-Wall", "main.c", "a.c"], "prog", env,
                       expect_warnings=1)
    assert subprocess.run([str(tmp_path / "prog")]).returncode == 0


def test_stdin_source_with_fault(tmp_path):
    """Source on standard input: mirecc reads it once and hands it to clang."""
    extra, _ = FAULTS["exception"](tmp_path)
    env = base_env(tmp_path, **extra)
    args = ["-O2", "-Wall", "-x", "c", "-c", "-"]
    ref = subprocess.run([CLANG, *args, "-o", "ref.o"], cwd=tmp_path, env=env,
                         input=SOURCE_A.encode(), capture_output=True, timeout=60)
    got = subprocess.run([MIRECC, *args, "-o", "a.o"], cwd=tmp_path, env=env,
                         input=SOURCE_A.encode(), capture_output=True, timeout=60)
    assert got.returncode == ref.returncode == 0
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "ref.o").read_bytes()
    assert len(warnings_in(got.stderr)) == 1
    assert without_mirecc_lines(got.stderr) == ref.stderr.decode()


def test_unwritable_output_keeps_clangs_exit_code(tmp_path):
    """A compile that fails for another reason than the source (here: clang
    cannot write its output) keeps clang's exit code and message."""
    (tmp_path / "a.c").write_text(SOURCE_A)
    blocker = _regular_file(tmp_path)
    env = base_env(tmp_path, **_capture_on(tmp_path))
    ref = run([CLANG, "-O2", "-c", "a.c", "-o", str(blocker / "a.o")], tmp_path, env)
    got = run([MIRECC, "-O2", "-c", "a.c", "-o", str(blocker / "a.o")], tmp_path, env)
    assert ref.returncode != 0
    assert got.returncode == ref.returncode
    assert without_mirecc_lines(got.stderr) == ref.stderr.decode()
    assert len(warnings_in(got.stderr)) == 0
