"""Which compiler mirecc runs: MIRECC_CC/MIRECC_CXX, else the newest clang on
PATH (never mirecc itself), behind an optional launcher prefix.

Most tests put small shell scripts named like compilers on a private PATH;
each prints its own path and arguments, so the output shows which one ran.
Without -O, mirecc execs the compiler straight away, so these are cheap.
"""

from __future__ import annotations

import os
import shutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
CLANGXX = "/usr/bin/clang++-14"
BIN = Path(sys.executable).parent
MIRECC = str(BIN / "mirecc")
MIRECCXX = str(BIN / "mirecc++")

needs_clang = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

SOURCE = "int f(int x) { for (int i = 0; i < x; i++) x ^= i; return x; }\n"


def base_env(tmp_path: Path, **extra: str) -> dict:
    # no site file: these tests are about the search of PATH
    return isolated_env(tmp_path, **{"MIRECC_SITE_FILE": str(tmp_path / "no-site-file"), **extra})


def run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def fake_compiler(path: Path) -> Path:
    """An executable that prints 'FAKE <its path> <args>' and succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "FAKE $0 $*"\n')
    path.chmod(0o755)
    return path


def link(path: Path, target: Path | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def ran(proc: subprocess.CompletedProcess) -> str:
    """The path of the fake compiler that ran."""
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("FAKE "), (proc.stdout, proc.stderr)
    return line.split()[1]


@pytest.fixture
def fake_path(tmp_path):
    """bin1: clang-13, clang -> llvm-15/bin/clang, clang-9; bin2: clang-17,
    clang++-17, clang-10, and compiler-like names that are not clang."""
    llvm15 = tmp_path / "usr" / "lib" / "llvm-15" / "bin"
    fake_compiler(llvm15 / "clang")
    fake_compiler(llvm15 / "clang++")
    bin1, bin2 = tmp_path / "bin1", tmp_path / "bin2"
    fake_compiler(bin1 / "clang-13")
    fake_compiler(bin1 / "clang-9")
    fake_compiler(bin1 / "clang++-13")
    link(bin1 / "clang", llvm15 / "clang")
    link(bin1 / "clang++", llvm15 / "clang++")
    fake_compiler(bin2 / "clang-17")
    fake_compiler(bin2 / "clang++-17")
    fake_compiler(bin2 / "clang-10")
    for other in ("clang-tidy-99", "clang-format-99", "clangd-99", "clang-cpp-99",
                  "clang-99-wrapper"):
        fake_compiler(bin2 / other)
    not_executable = bin2 / "clang-98"
    not_executable.write_text("#!/bin/sh\necho FAKE not executable\n")
    (bin2 / "clang-97").mkdir()          # a directory is not a compiler either
    return tmp_path, bin1, bin2


def test_newest_clang_on_path_is_chosen(fake_path):
    tmp_path, bin1, bin2 = fake_path
    env = base_env(tmp_path, PATH=f"{bin1}{os.pathsep}{bin2}")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin2 / "clang-17")
    # and with the directories the other way round
    env = base_env(tmp_path, PATH=f"{bin2}{os.pathsep}{bin1}")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin2 / "clang-17")


def test_clangxx_on_path_for_mireccxx(fake_path):
    tmp_path, bin1, bin2 = fake_path
    env = base_env(tmp_path, PATH=f"{bin1}{os.pathsep}{bin2}")
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin2 / "clang++-17")


def test_unversioned_link_version_read_from_its_target(fake_path):
    """clang -> .../llvm-15/bin/clang beats clang-13 and clang-9."""
    tmp_path, bin1, _ = fake_path
    env = base_env(tmp_path, PATH=str(bin1))
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang")
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin1 / "clang++")


def test_unversioned_link_to_versioned_file(tmp_path):
    """clang -> /opt/x/bin/clang-16 (no llvm-N directory) counts as 16."""
    opt = fake_compiler(tmp_path / "opt" / "bin" / "clang-16")
    bin1 = tmp_path / "bin1"
    link(bin1 / "clang", opt)
    fake_compiler(bin1 / "clang-15")
    env = base_env(tmp_path, PATH=str(bin1))
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang")


def test_versions_compare_as_numbers(tmp_path):
    bin1 = tmp_path / "bin1"
    fake_compiler(bin1 / "clang-9")
    fake_compiler(bin1 / "clang-10")
    fake_compiler(bin1 / "clang-10.0.1-rc")   # not a version: ignored
    env = base_env(tmp_path, PATH=str(bin1))
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-10")


def test_earlier_path_entry_wins_among_equal_versions(tmp_path):
    bin1, bin2 = tmp_path / "bin1", tmp_path / "bin2"
    fake_compiler(bin1 / "clang-17")
    fake_compiler(bin2 / "clang-17")
    env = base_env(tmp_path, PATH=f"{bin2}{os.pathsep}{bin1}")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin2 / "clang-17")


def test_cxx_sibling_of_the_configured_cc(fake_path):
    """MIRECC_CC=.../clang-13: mirecc++ takes clang++-13 next to it, not the
    newer clang++-17 elsewhere on PATH."""
    tmp_path, bin1, bin2 = fake_path
    env = base_env(tmp_path, PATH=f"{bin1}{os.pathsep}{bin2}",
                   MIRECC_CC=str(bin1 / "clang-13"))
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin1 / "clang++-13")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-13")


def test_cxx_sibling_by_name_on_path(fake_path):
    tmp_path, bin1, bin2 = fake_path
    env = base_env(tmp_path, PATH=f"{bin1}{os.pathsep}{bin2}", MIRECC_CC="clang-13")
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin1 / "clang++-13")


def test_mirecc_cxx_overrides_the_sibling(fake_path):
    tmp_path, bin1, bin2 = fake_path
    env = base_env(tmp_path, PATH=f"{bin1}{os.pathsep}{bin2}",
                   MIRECC_CC=str(bin1 / "clang-13"), MIRECC_CXX=str(bin2 / "clang++-17"))
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin2 / "clang++-17")


@needs_clang
def test_real_cxx_sibling_compiles_like_clangxx(tmp_path):
    (tmp_path / "x.cpp").write_text("template <class T> T sq(T x) { return x * x; }\n"
                                    "int g(int y) { return sq(y); }\n")
    env = base_env(tmp_path, MIRECC_CC=CLANG)
    proc = run([MIRECCXX, "--explain=json", "-O0", "-c", "x.cpp", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert '"compiler": "/usr/bin/clang++-14"' in proc.stdout
    proc = run([MIRECCXX, "-O2", "-c", "x.cpp", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    subprocess.run([CLANGXX, "-O2", "-c", "x.cpp", "-o", "ref.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "x.o").read_bytes() == (tmp_path / "ref.o").read_bytes()


# --- mirecc itself is never the compiler -----------------------------------------------


@pytest.fixture
def mirecc_first_on_path(tmp_path):
    """bin0 makes 'clang', 'clang++' and 'clang-99' mean mirecc (links and a copy);
    bin1 has the real (fake) clang-13."""
    bin0, bin1 = tmp_path / "bin0", tmp_path / "bin1"
    link(bin0 / "clang", MIRECC)
    link(bin0 / "clang++", MIRECCXX)
    link(bin0 / "clang-99", MIRECC)
    link(bin0 / "clang++-99", MIRECCXX)
    copy = bin0 / "clang-98"
    shutil.copy(MIRECC, copy)     # a copy, not a link: recognised by its content
    copy.chmod(0o755)
    fake_compiler(bin1 / "clang-13")
    fake_compiler(bin1 / "clang++-13")
    return tmp_path, bin0, bin1


def test_mirecc_on_path_is_never_chosen(mirecc_first_on_path):
    tmp_path, bin0, bin1 = mirecc_first_on_path
    env = base_env(tmp_path, PATH=f"{bin0}{os.pathsep}{bin1}")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-13")
    assert ran(run([MIRECCXX, "-c", "x.cpp"], tmp_path, env)) == str(bin1 / "clang++-13")


def test_mirecc_called_as_clang_does_not_recurse(mirecc_first_on_path):
    """The way ccache-style masquerading is set up: 'clang' on PATH is mirecc."""
    tmp_path, bin0, bin1 = mirecc_first_on_path
    env = base_env(tmp_path, PATH=f"{bin0}{os.pathsep}{bin1}")
    assert ran(run([str(bin0 / "clang"), "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-13")
    assert ran(run(["clang", "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-13")


def test_only_mirecc_on_path_is_a_clear_error(mirecc_first_on_path):
    tmp_path, bin0, _ = mirecc_first_on_path
    env = base_env(tmp_path, PATH=str(bin0))
    proc = run([MIRECC, "-c", "x.c"], tmp_path, env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mirecc: error: no clang found on PATH")
    assert "MIRECC_CC" in proc.stderr


def test_configured_compiler_that_is_mirecc_is_an_error(mirecc_first_on_path):
    tmp_path, bin0, bin1 = mirecc_first_on_path
    env = base_env(tmp_path, PATH=f"{bin0}{os.pathsep}{bin1}", MIRECC_CC=str(bin0 / "clang"))
    proc = run([MIRECC, "-c", "x.c"], tmp_path, env)
    assert proc.returncode == 2
    assert "is mirecc itself" in proc.stderr


def test_empty_path_entry_means_the_working_directory(mirecc_first_on_path, monkeypatch):
    """PATH=bin0::  -- the cwd's clang-99 must be run as ./clang-99, not looked
    up on PATH again (where clang-99 is mirecc)."""
    from mirecc.frontend.compiler import newest_clang_on_path

    tmp_path, bin0, _ = mirecc_first_on_path
    work = tmp_path / "work"
    fake_compiler(work / "clang-99")
    monkeypatch.chdir(work)
    chosen = newest_clang_on_path(cxx=False, path_env=f"{bin0}{os.pathsep}")
    assert chosen is not None and os.sep in chosen
    assert os.path.samefile(chosen, work / "clang-99")


# --- configured compiler missing ----------------------------------------------------------


@pytest.mark.parametrize("var,driver", [("MIRECC_CC", MIRECC), ("MIRECC_CXX", MIRECCXX)])
def test_configured_compiler_missing_is_a_clear_error(tmp_path, var, driver):
    (tmp_path / "x.c").write_text(SOURCE)
    env = base_env(tmp_path, **{var: "/nonexistent/clang-42"})
    proc = run([driver, "-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mirecc: error: "), proc.stderr
    assert "/nonexistent/clang-42" in proc.stderr and var in proc.stderr
    assert not (tmp_path / "x.o").exists()


def test_configured_compiler_name_not_on_path(tmp_path):
    env = base_env(tmp_path, MIRECC_CC="clang-does-not-exist", PATH=str(tmp_path))
    proc = run([MIRECC, "-c", "x.c"], tmp_path, env)
    assert proc.returncode == 2 and "clang-does-not-exist" in proc.stderr


def test_no_clang_at_all_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = run([MIRECC, "-c", "x.c"], tmp_path, base_env(tmp_path, PATH=str(empty)))
    assert proc.returncode == 2
    assert "no clang found on PATH" in proc.stderr


# --- launcher prefix --------------------------------------------------------------------


def launcher(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "launcher.log"
    script = tmp_path / "launch.sh"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n'
                      'if [ "$1" = --tag ]; then shift; fi\nexec "$@"\n')
    script.chmod(0o755)
    return script, log


@needs_clang
@pytest.mark.parametrize("ml_path", [False, True])
def test_prefix_runs_the_final_compile(tmp_path, ml_path):
    script, log = launcher(tmp_path)
    (tmp_path / "x.c").write_text(SOURCE)
    extra = {"MIRECC_CAPTURE_DIR": str(tmp_path / "capture")} if ml_path else {}
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PREFIX=f"{script} --tag", **extra)
    proc = run([MIRECC, "-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # Only the user's own compile goes through the launcher (the front end
    # that reads the IR does not); a split compile writes it under a hidden
    # name, moved over x.o
    (line,) = log.read_text().splitlines()
    assert re.fullmatch(rf"--tag {CLANG} -O2 -c x\.c -o (x\.o|\.x\.o\.mirecc-\d+-own\.tmp)",
                        line), line
    subprocess.run([CLANG, "-O2", "-c", "x.c", "-o", "ref.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "x.o").read_bytes() == (tmp_path / "ref.o").read_bytes()
    if ml_path:
        assert (tmp_path / "capture" / "manifest.jsonl").is_file()


@needs_clang
def test_prefix_with_a_fault_still_used(tmp_path):
    script, log = launcher(tmp_path)
    (tmp_path / "x.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PREFIX=str(script),
                   MIRECC_CAPTURE_DIR=str(tmp_path / "capture"),
                   MIRECC_DEBUG_FAULT="exception")
    proc = run([MIRECC, "-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
    assert proc.returncode == 0
    assert len(proc.stderr.splitlines()) == 1
    assert log.read_text().splitlines() == [f"{CLANG} -O2 -c x.c -o x.o"]


@needs_clang
def test_prefix_exit_code_passes_through(tmp_path):
    script, log = launcher(tmp_path)
    (tmp_path / "bad.c").write_text("int f( {\n")
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PREFIX=str(script))
    ref = run([CLANG, "-O2", "-c", "bad.c", "-o", "ref.o"], tmp_path, env)
    proc = run([MIRECC, "-O2", "-c", "bad.c", "-o", "bad.o"], tmp_path, env)
    assert proc.returncode == ref.returncode != 0
    assert proc.stderr == ref.stderr


def test_missing_prefix_is_a_clear_error(tmp_path):
    env = base_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PREFIX="/nonexistent/launcher")
    proc = run([MIRECC, "-c", "x.c"], tmp_path, env)
    assert proc.returncode == 127
    assert proc.stderr.startswith("mirecc: error: cannot run '/nonexistent/launcher'")


@needs_clang
@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_prefix_ccache(tmp_path):
    (tmp_path / "x.c").write_text(SOURCE)
    (tmp_path / ".mirecc.yaml").write_text("prefix: ccache\n")
    env = base_env(tmp_path, MIRECC_CC=CLANG, CCACHE_DIR=str(tmp_path / "ccache"),
                   MIRECC_CAPTURE_DIR=str(tmp_path / "capture"))
    subprocess.run([CLANG, "-O2", "-c", "x.c", "-o", "ref.o"], cwd=tmp_path, check=True)
    for _ in range(2):
        proc = run([MIRECC, "-O2", "-c", "x.c", "-o", "x.o"], tmp_path, env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert (tmp_path / "x.o").read_bytes() == (tmp_path / "ref.o").read_bytes()
        (tmp_path / "x.o").unlink()
    # ccache compiled the first and served the second from its cache
    stats = dict(line.split("\t", 1) for line in
                 run(["ccache", "--print-stats"], tmp_path, env).stdout.splitlines()
                 if "\t" in line)
    hits = int(stats.get("direct_cache_hit", 0)) + int(stats.get("preprocessed_cache_hit", 0))
    assert hits == 1 and int(stats.get("cache_miss", 0)) == 1, stats
    # and mirecc's ML path ran before ccache each time (capture mode)
    assert len(list((tmp_path / "capture").rglob("*.bc"))) >= 1


# --- the compiler setup chose, and OpenMP ----------------------------------------

OMP_SOURCE = """\
#include <omp.h>
#include <stdio.h>
int main(void) {
    long s = 0;
#pragma omp parallel for reduction(+:s) schedule(static)
    for (int i = 0; i < 1000; i++) s += i;
    printf("%ld %d\\n", s, omp_get_max_threads() > 0);
    return 0;
}
"""


def test_site_file_names_the_compiler(tmp_path):
    """The site file wins over PATH; MIRECC_CC wins over the site file."""
    bin1 = tmp_path / "bin1"
    fake_compiler(bin1 / "clang-17")
    old = fake_compiler(tmp_path / "opt" / "clang-13")
    site = tmp_path / "compilers"
    site.write_text(f"# a comment\ncc={old}\n")
    env = isolated_env(tmp_path, PATH=str(bin1), MIRECC_SITE_FILE=str(site))
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(old)
    env["MIRECC_CC"] = str(bin1 / "clang-17")
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(bin1 / "clang-17")


def test_newest_clang_with_its_openmp_runtime_wins(tmp_path):
    """Without a site file: clang-19 on PATH but only clang-14's omp.h installed
    (Debian's libomp-14-dev beside clang-19) -> clang-14."""
    for major, omp in ((14, True), (19, False)):
        prefix = tmp_path / "usr" / "lib" / f"llvm-{major}"
        fake_compiler(prefix / "bin" / "clang")
        include = prefix / "lib" / "clang" / f"{major}.0.0" / "include"
        include.mkdir(parents=True)
        if omp:
            (include / "omp.h").write_text("")
        link(tmp_path / "bin" / f"clang-{major}", prefix / "bin" / "clang")
    env = base_env(tmp_path, PATH=str(tmp_path / "bin"))
    assert ran(run([MIRECC, "-c", "x.c"], tmp_path, env)) == str(tmp_path / "bin" / "clang-14")


@pytest.mark.skipif(not Path(sys.prefix, "etc", "mirecc", "compilers").is_file(),
                    reason="needs the site file scripts/setup.sh writes")
def test_openmp_program_builds_with_the_compiler_setup_chose(tmp_path):
    """After scripts/setup.sh (--test adds clang-19, whose OpenMP runtime is
    not installed), mirecc -O3 -fopenmp builds and runs an OpenMP program with
    the clang setup configured, and --explain names it."""
    (tmp_path / "omp.c").write_text(OMP_SOURCE)
    env = isolated_env(tmp_path)       # no MIRECC_CC: the installation's choice
    proc = run([MIRECC, "-O3", "-fopenmp", "omp.c", "-o", "omp"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(tmp_path / "omp")], capture_output=True, text=True,
                         env={**env, "OMP_NUM_THREADS": "2"}, timeout=60)
    assert out.returncode == 0 and out.stdout == "499500 1\n"
    explain = run([MIRECC, "--explain", "-O3", "-fopenmp", "-c", "omp.c", "-o", "omp.o"],
                  tmp_path, env)
    assert explain.returncode == 0
    assert "compiler chosen: set up for this installation" in explain.stdout
