"""A split compile (:mod:`mirecc.frontend.clang`): the front end once, the object
from its bitcode.  Whatever the flags, the result must be clang's own:
object bytes, dependency file, diagnostics and exit code; and it must really
be split (two compiler calls, not three)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
CLANGXX = "/usr/bin/clang++-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
MIRECCXX = str(Path(sys.executable).with_name("mirecc++"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

SOURCE = """\
#include "kern.h"
int walk(const int *a, int n) {
    int s = 0, unused;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            s += a[i * n + j];
    return s;
}
void scale(float *a, int n) { for (int i = 0; i < n; i++) a[i] *= KERN_FACTOR; }
"""
HEADER = "#define KERN_FACTOR 2.0f\n"
CXX_SOURCE = """\
#include <vector>
#include <stdexcept>
int total(const std::vector<int> &v) {
    int s = 0;
    for (int x : v) { if (x < 0) throw std::runtime_error("negative"); s += x; }
    return s;
}
"""
# a loop whose forced vectorization fails: a back-end warning (-Wpass-failed)
PRAGMA_SOURCE = """\
void chase(int *a, int n) {
#pragma clang loop vectorize(enable)
    for (int i = 1; i < n; i++) a[i] = a[a[i - 1] & 7] + 1;
}
"""


def env_for(tmp_path: Path, **extra: str) -> dict:
    # --explain makes the ML path run (with no heads installed), so the call is split
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG, "MIRECC_CXX": CLANGXX,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"), **extra})


def both(tmp_path: Path, args: list[str], cxx: bool = False, env: dict | None = None):
    """(clang's, mirecc's) (exit code, stderr, files) for ``args``, each in a
    fresh copy of the sources in the same directory."""
    results = []
    for driver in ((CLANGXX, MIRECCXX) if cxx else (CLANG, MIRECC)):
        work = tmp_path / "w"
        work.mkdir()
        (work / "kern.c").write_text(SOURCE)
        (work / "kern.h").write_text(HEADER)
        (work / "t.cc").write_text(CXX_SOURCE)
        (work / "p.c").write_text(PRAGMA_SOURCE)
        (work / "sub").mkdir()
        own = ["--explain=json"] if driver in (MIRECC, MIRECCXX) else []
        proc = subprocess.run([driver, *own, *args], cwd=work, capture_output=True,
                              env=env or env_for(tmp_path), timeout=120)
        files = {p.relative_to(work).as_posix(): p.read_bytes()
                 for p in work.rglob("*") if p.is_file()}
        results.append((proc.returncode, proc.stderr.decode(), files))
        work.rename(tmp_path / ("clang" if driver in (CLANG, CLANGXX) else "mirecc"))
    return results


FLAG_SETS = [
    ["-O2", "-c", "kern.c", "-o", "kern.o"],
    ["-O2", "-g", "-fPIC", "-c", "kern.c", "-o", "kern.o"],
    ["-O3", "-march=native", "-ffast-math", "-c", "kern.c", "-o", "kern.o"],
    ["-Os", "-g", "-c", "kern.c"],
    ["-O2", "-fopenmp", "-c", "kern.c", "-o", "sub/kern.o"],
    ["-O2", "-Wall", "-MD", "-c", "kern.c", "-o", "sub/kern.o"],
    ["-O2", "-Wall", "-MMD", "-MP", "-c", "kern.c"],
    ["-O2", "-MD", "-MF", "sub/deps.d", "-MT", "custom-target", "-c", "kern.c", "-o", "k.o"],
    ["-O2", "-MD", "-c", "kern.c", "-o", "sub/we$ird.o"],
    ["-O2", "-x", "c", "-c", "kern.c", "-o", "kern.o"],
]


@pytest.mark.parametrize("args", FLAG_SETS, ids=[" ".join(a) for a in FLAG_SETS])
def test_split_compile_is_clangs_compile(tmp_path, args):
    (clang_rc, clang_err, clang_files), (rc, err, files) = both(tmp_path, args)
    assert rc == clang_rc == 0
    assert err == clang_err          # the user's compile's warnings, replayed
    assert files == clang_files      # objects and dependency files, byte for byte
    assert _stats(tmp_path).get("tus.split") == 1     # the front end really ran beside it


def _stats(tmp_path: Path) -> dict:
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config
    return stats.read(Config(cache_dir=str(tmp_path / "cache")))


def test_cxx_with_exceptions_is_clangs_compile(tmp_path):
    args = ["-O2", "-g", "-fexceptions", "-c", "t.cc", "-o", "t.o"]
    (clang_rc, clang_err, clang_files), (rc, err, files) = both(tmp_path, args, cxx=True)
    assert rc == clang_rc == 0 and err == clang_err and files == clang_files


def test_werror_fails_like_clang(tmp_path):
    args = ["-O2", "-Wall", "-Werror", "-c", "kern.c", "-o", "kern.o"]
    (clang_rc, clang_err, clang_files), (rc, err, files) = both(tmp_path, args)
    assert rc == clang_rc == 1
    assert err == clang_err and "error: unused variable" in err
    assert files == clang_files and "kern.o" not in files


def test_back_end_warning_is_clangs_own(tmp_path):
    """A back-end diagnostic (a forced vectorization that fails) is printed
    by clang in its own format: the split back end's output is dropped and
    the user's command runs."""
    args = ["-O2", "-c", "p.c", "-o", "p.o"]
    (clang_rc, clang_err, clang_files), (rc, err, files) = both(tmp_path, args)
    assert "loop not vectorized" in clang_err
    assert rc == clang_rc == 0 and err == clang_err and files == clang_files


def test_the_call_runs_the_front_end_beside_the_users_compile(tmp_path):
    """Two compiler calls: the front end (bitcode, no warnings) and the
    user's own command into a hidden file; the result is clang's object."""
    log = tmp_path / "calls.log"
    cc = tmp_path / "logging-clang"
    cc.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {CLANG} "$@"\n')
    cc.chmod(0o755)
    (tmp_path / "kern.c").write_text(SOURCE)
    (tmp_path / "kern.h").write_text(HEADER)
    env = env_for(tmp_path, MIRECC_CC=str(cc))
    proc = subprocess.run([MIRECC, "--explain", "-O2", "-c", "kern.c", "-o", "kern.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 2, calls
    front = next(c for c in calls if "-emit-llvm" in c)
    own = next(c for c in calls if c is not front)
    assert "-disable-llvm-passes" in front and " -w " in front
    assert own.startswith("-O2 -c kern.c -o .kern.o.mirecc-") and own.endswith(".tmp")
    subprocess.run([CLANG, "-O2", "-c", "kern.c", "-o", "ref.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "kern.o").read_bytes() == (tmp_path / "ref.o").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("args, why", [
    (["-O2", "-S", "kern.c"], "not -c"),
    (["-O2", "-c", "kern.c", "-save-temps"], "-save-temps"),
    (["-O2", "-c", "kern.c", "-flto"], "-flto"),
    (["-O2", "-c", "kern.c", "-Rpass=loop-vectorize"], "-Rpass"),
    (["-O2", "-c", "kern.c", "-Xclang", "-fno-lax-vector-conversions"], "-Xclang"),
    (["-O2", "-c", "kern.c", "kern2.c"], "one source"),
    (["-O2", "kern.c", "-o", "prog"], "not -c"),
])
def test_calls_that_are_not_split(args, why):
    from mirecc.frontend import clang as frontend
    from mirecc.frontend.cmdline import classify
    from mirecc.taskapi.config import Config

    reason = frontend.why_not(classify(args), args, Config())
    assert reason is not None and why in reason


def test_a_launcher_runs_the_own_compile_of_a_split_one():
    """With a launcher (ccache, distcc) a compile is still split: the user's
    own compile goes through it, the front end (and a task's candidates)
    run here."""
    from mirecc.frontend import clang as frontend
    from mirecc.frontend.cmdline import classify
    from mirecc.taskapi.config import Config

    args = ["-O2", "-c", "kern.c"]
    assert frontend.why_not(classify(args), args, Config()) is None
    assert frontend.why_not(classify(args), args, Config(prefix=("ccache",))) is None
    split = frontend.Split("/usr/bin/clang-14", args, classify(args), "kern.bc",
                           launcher=("ccache",))
    assert split.own_command("out.o", None)[:2] == ["ccache", "/usr/bin/clang-14"]
    assert split.frontend_command()[0] == "/usr/bin/clang-14"
    assert split.backend_command([])[0] == "/usr/bin/clang-14"


def test_an_output_that_is_not_a_file_is_written_in_place(tmp_path):
    """-o /dev/null (a device) or a pipe: clang writes into it; mirecc must
    never replace it by a file (the user's compile is not run aside)."""
    import stat

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    (tmp_path / "kern.c").write_text(SOURCE)
    (tmp_path / "kern.h").write_text(HEADER)
    for output in ("/dev/null", str(fifo)):
        reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL) \
            if output == str(fifo) else None
        proc = subprocess.run([MIRECC, "--explain", "-O2", "-c", "kern.c", "-o", output],
                              cwd=tmp_path, env=env_for(tmp_path), capture_output=True,
                              text=True, timeout=120)
        if reader:
            reader.wait(timeout=60)
        assert proc.returncode == 0, proc.stderr
        mode = os.stat(output).st_mode
        assert (stat.S_ISCHR(mode) if output == "/dev/null" else stat.S_ISFIFO(mode)), output


def test_a_spawned_child_reports_its_output_and_how_it_ended(tmp_path):
    """frontend.spawn (posix_spawn, no subprocess): stdout and stderr come
    back once it ends, its files are removed, a kill is a negative code."""
    from mirecc.frontend.clang import spawn

    child = spawn(["sh", "-c", "echo out; echo err >&2; exit 3"], str(tmp_path / "s"))
    assert child.wait() == 3
    assert (child.stdout, child.stderr) == (b"out\n", b"err\n")
    assert not list(tmp_path.iterdir())
    sleeper = spawn(["sleep", "30"], str(tmp_path / "k"))
    assert sleeper.poll() is None
    sleeper.kill()
    assert sleeper.returncode == -9
    with pytest.raises(OSError):
        spawn(["/nonexistent/clang"], str(tmp_path / "n"))
