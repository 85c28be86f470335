"""``mirecc --explain`` and ``--explain=json`` with the real clang-14."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# Two functions; `walk` has a loop nest two deep (lines 3 and 4).
SOURCE = """\
int walk(const int *a, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            s += a[i * n + j];
        }
    }
    return s;
}
int twice(int x) { return 2 * x; }
"""


def base_env(tmp_path: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"), **extra})


def mirecc(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([MIRECC, *args], cwd=tmp_path, env=env or base_env(tmp_path),
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def src(tmp_path):
    (tmp_path / "walk.c").write_text(SOURCE)
    return tmp_path


def test_json_explain_of_two_functions_and_a_loop_nest(src):
    proc = mirecc(src, "--explain=json", "-O2", "-c", "walk.c", "-o", "walk.o")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    data = json.loads(proc.stdout)
    assert data["compiler"] == CLANG
    assert data["invocation"] == "compile"
    assert data["fallback"] is None and data["skipped"] == []
    [tu] = data["translation_units"]
    assert (tu["source"], tu["language"], tu["opt_level"]) == ("walk.c", "c", "2")
    assert tu["ir"]["bytes"] > 0 and len(tu["ir"]["sha256"]) == 64
    assert tu["cache"] == "miss" and tu["captured"] is None
    seen = tu["seen"]
    assert [f["name"] for f in seen["functions"]] == ["walk", "twice"]
    walk, twice = seen["functions"]
    assert seen["loops"] == 2
    assert sorted(loop["depth"] for loop in walk["loops"]) == [1, 2]
    assert twice["loops"] == []
    assert walk["instructions"] > 0 and twice["instructions"] > 0
    assert seen["instructions"] == walk["instructions"] + twice["instructions"]
    outer, inner = sorted(walk["loops"], key=lambda lp: lp["depth"])
    assert outer["blocks"] > inner["blocks"] >= 1
    assert tu["decisions"] == []
    [why] = tu["no_decision_reasons"]
    assert why.startswith("no task heads are installed")
    # The object is clang's own.
    subprocess.run([CLANG, "-O2", "-c", "walk.c", "-o", "ref.o"], cwd=src, check=True)
    assert (src / "walk.o").read_bytes() == (src / "ref.o").read_bytes()


def test_text_explain_of_two_functions_and_a_loop_nest(src):
    proc = mirecc(src, "--explain=verbose", "-O2", "-c", "walk.c", "-o", "walk.o")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    text = proc.stdout
    assert text.startswith("mirecc ") and f"(compiler: {CLANG})" in text.splitlines()[0]
    assert "seen: 2 functions, 2 loops, " in text
    assert "    walk: " in text and "2 loops" in text
    assert "    twice: " in text and "0 loops" in text
    assert "(depth 1, " in text and "(depth 2, " in text
    assert "walk.c (c, -O2): 0 decisions, 0 applied" in text
    assert "why: [no-heads] no task heads are installed" in text
    again = mirecc(src, "--explain=verbose", "-O2", "-c", "walk.c", "-o", "walk.o").stdout
    assert "cache hit" in again
    assert again.replace("cache hit", "cache miss") == text


def test_text_and_json_agree(src):
    text = mirecc(src, "--explain=verbose", "-O3", "-c", "walk.c", "-o", "walk.o").stdout
    data = json.loads(mirecc(src, "--explain=json", "-O3", "-c", "walk.c",
                             "-o", "walk.o").stdout)
    seen = data["translation_units"][0]["seen"]
    assert f"{seen['instructions']} instructions" in text
    for fn in seen["functions"]:
        assert f"{fn['name']}: {fn['instructions']} instructions" in text
        for loop in fn["loops"]:
            assert f"loop {loop['id']} (depth {loop['depth']}" in text


def test_loop_lines_with_debug_info(src):
    data = json.loads(mirecc(src, "--explain=json", "-O2", "-g", "-c", "walk.c",
                             "-o", "walk.o").stdout)
    walk = data["translation_units"][0]["seen"]["functions"][0]
    lines = {loop["depth"]: loop["line"] for loop in walk["loops"]}
    assert lines == {1: 3, 2: 4}
    text = mirecc(src, "--explain=verbose", "-O2", "-g", "-c", "walk.c", "-o", "walk.o").stdout
    assert "line 3)" in text and "line 4)" in text


@pytest.mark.parametrize("opt", ["-O0", None])
def test_unoptimised_says_nothing_to_decide_and_why(src, opt):
    flags = [opt] if opt else []
    proc = mirecc(src, "--explain", *flags, "-c", "walk.c", "-o", "walk.o")
    assert proc.returncode == 0
    assert "nothing to decide: compiled without optimisation" in proc.stdout
    assert (src / "walk.o").is_file()
    data = json.loads(mirecc(src, "--explain=json", *flags, "-c", "walk.c",
                             "-o", "walk.o").stdout)
    assert data["translation_units"] == []
    assert "without optimisation" in data["reason"]
    assert not (src / "cache" / "results").exists()


def test_link_only_says_why(src):
    subprocess.run([CLANG, "-O2", "-c", "walk.c", "-o", "walk.o"], cwd=src, check=True)
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    subprocess.run([CLANG, "-c", "main.c", "-o", "main.o"], cwd=src, check=True)
    proc = mirecc(src, "--explain", "-O2", "main.o", "walk.o", "-o", "prog")
    assert proc.returncode == 0, proc.stderr
    assert "nothing to decide: link-only call: no source to compile" in proc.stdout
    assert (src / "prog").is_file()
    data = json.loads(mirecc(src, "--explain=json", "main.o", "walk.o", "-o", "prog").stdout)
    assert data["invocation"] == "link" and data["translation_units"] == []


def test_non_c_inputs_are_listed_as_skipped(src):
    (src / "helper.s").write_text(".text\n.globl helper\nhelper:\n  ret\n")
    proc = mirecc(src, "--explain=json", "-O2", "-c", "walk.c", "helper.s")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["skipped"] == ["helper.s: assembler is not C, C++ or OpenCL"]
    assert [tu["source"] for tu in data["translation_units"]] == ["walk.c"]
    assert (src / "walk.o").is_file() and (src / "helper.o").is_file()


def test_explain_with_a_failing_ml_path_shows_the_fallback(src):
    env = base_env(src, MIRECC_DEBUG_FAULT="exception")
    proc = mirecc(src, "--explain", "-O2", "-c", "walk.c", "-o", "walk.o", env=env)
    assert proc.returncode == 0
    assert "ML path failed: internal error RuntimeError" in proc.stdout
    assert "compiled exactly as asked" in proc.stdout
    assert len(proc.stderr.splitlines()) == 1
    data = json.loads(mirecc(src, "--explain=json", "-O2", "-c", "walk.c", "-o", "walk.o",
                             env=env).stdout)
    assert data["fallback"].startswith("internal error RuntimeError")


def test_explain_goes_to_stderr_when_the_output_is_stdout(src):
    ref = subprocess.run([CLANG, "-O2", "-S", "walk.c", "-o", "-"], cwd=src,
                         capture_output=True, text=True, check=True)
    proc = mirecc(src, "--explain", "-O2", "-S", "walk.c", "-o", "-")
    assert proc.returncode == 0
    assert proc.stdout == ref.stdout
    assert "seen: 2 functions, 2 loops" in proc.stderr


def test_explain_does_not_mix_into_preprocessor_output(src):
    ref = subprocess.run([CLANG, "-O2", "-E", "walk.c"], cwd=src, capture_output=True,
                         text=True, check=True)
    proc = mirecc(src, "--explain", "-O2", "-E", "walk.c")
    assert proc.returncode == 0
    assert proc.stdout == ref.stdout
    assert "nothing to decide" in proc.stderr


def test_bogus_explain_format_is_an_error(src):
    proc = mirecc(src, "--explain=bogus", "-O2", "-c", "walk.c", "-o", "walk.o")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("mirecc: error: unknown --explain format 'bogus'")
    assert not (src / "walk.o").exists()


def test_explain_render_in_process():
    """The renderer on its own: pluralisation and the empty case."""
    from mirecc.tu.explain import explanation, render

    data = explanation(compiler="cc", invocation_kind="empty", reason="no input files",
                       reports=[], fallback=None, skipped=[])
    assert json.loads(render(data, "json")) == data
    assert render(data, "text").splitlines()[1] == "  nothing to decide: no input files"
