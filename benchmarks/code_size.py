"""Code size on real projects: zlib, bzip2, lua5.4 and sqlite3 (Debian
bookworm's source packages, ``apt-get source``), each built at ``-Oz`` once
with plain clang and once with mirecc at ``MIRECC_SIZE_SEARCH=K`` and
``MIRECC_SIZE_BUDGET=B`` (both mirecc's defaults unless given); total
``.text`` bytes of the objects, and the projects' tests run on both builds.

    .venv/bin/python benchmarks/code_size.py [--k K] [--budget B] [--projects zlib,bzip2,...]
                     [--cc clang-19] [--work DIR] [--out FILE] [--rebuilds N] [--timing N]
                     [--md PAGE]

Protocol
--------
Both builds of a project start from a fresh copy of the same unpacked source
in the same absolute directory (``WORK/code-size/build/<project>``; paths end
up in objects, e.g. through ``__FILE__``), and differ only in the compiler:
``CC=<real clang>`` (the clang mirecc itself drives, e.g.
``/usr/bin/clang-14``) or ``CC=<absolute path of mirecc>`` with
``MIRECC_SIZE_SEARCH=K``, a private, emptied ``MIRECC_CACHE_DIR`` (so every
candidate is really built and the counters are this project's) and
``MIRECC_CC``/``MIRECC_CXX`` pinned to the reference compilers.  Code size is
deterministic for a given mirecc and candidate library (``heads/``; the
report and the JSON name the repository's commit), so there is one build
per side; build seconds (configure and make, not the tests) are a single
sample each, informational only (the machine may be busy).  Each side's
tree is then moved to ``WORK/code-size/results/<project>/<side>``.

Rebuilds (``--rebuilds N``): then N rounds, each a fresh copy of the same
source in the same directory built by both sides (clang first in odd
rounds, mirecc first in even ones), mirecc with the cache its first build
filled: the build of an unchanged project, as after ``make clean`` or in
CI with a kept cache.  Per side the median and range of the build seconds
(configure included); for mirecc, how many objects are byte for byte its
first build's, and the TUs whose kept object was copied with nothing
compiled (``tus.object``).

Timing (``--timing N``): then N rounds, the sides alternating (clang first
in odd rounds), each a fresh copy built from scratch -- mirecc with an
emptied cache of its own, a first build -- with configure and make timed
apart, then ``make clean`` and make again (mirecc with the cache that build
filled: what a developer's rebuild after ``make clean`` costs).  Per side
the median and range of the first build (configure included), of configure
alone and of the make after ``make clean``; the machine is not otherwise
idle-checked, so run it alone.

Measured: the loadable bytes (every allocated section: code, read-only
data, data, unwind tables) of every linked library and program both sides
built, what a user ships; the loadable and the ``.text`` bytes (executable sections) of every object file
in the tree (ELF relocatable: ``*.o``, libtool's PIC copies in ``.libs/``,
bzip2's PIC ``*.sho``; not archive members, which repeat the objects),
summed over the objects present on both sides (an object present on one
side only is listed).  Every compile command in the make output must end
at ``-Oz`` (the last ``-O`` flag wins), else the side fails.

Projects
--------
zlib
    ``CC=... CFLAGS=-Oz ./configure --static && make -j2``; tests: its
    ``make test`` (static and 64-bit-offset test programs, 2 "test OK"
    lines), differential: both builds must print the same.
bzip2
    Its Makefile: ``make -j1 CC=... CFLAGS="-Wall -Winline -Oz -g
    -D_FILE_OFFSET_BITS=64" libbz2.a bzip2 bzip2recover`` (the default
    target minus ``test``, so the build seconds are the build's; Debian's
    Makefile also compiles PIC ``*.sho`` objects for ``libbz2.so``); tests: its
    ``make test`` (compresses and decompresses three samples and compares
    the results with the shipped reference files, ``cmp``), differential as
    well.
lua5.4
    Debian's ``src/Makefile`` without debhelper:
    ``make -C src a lua MYCFLAGS=-Oz SYSCFLAGS=-DLUA_USE_LINUX ...``
    (``MYCFLAGS`` replaces Debian's ``dpkg-buildflags`` flags; the
    ``linux`` platform's SYSCFLAGS/SYSLIBS give popen, dlopen etc.) through
    ``libtool --quiet`` (``libtool-bin``), after writing
    ``src/lua5.4-deb-multiarch.h`` as debian/rules does.  The Makefile
    compiles every file as C and again as C++ (``CXX``: clang++, or
    mirecc++ on the mirecc side), PIC and not.  Debian's Makefile compiles
    llex, lparser and lcode with a hard-coded ``-Os`` *after* CFLAGS (Lua's
    CMCFLAGS, inlined), which would beat ``-Oz``: the copy's ``src/Makefile``
    gets that ``-Os`` removed (the same edit on both sides), so every object
    is ``-Oz``.  Objects are compiled with ``make -j2 o``, then libraries
    and programs linked with ``-j1`` (the package's two-library rule races
    under ``-j2``); ``o`` also compiles ``luac.o``.  Tests: every
    ``benchmarks/lua_tests/*.lua`` run with the built ``lua``: exit status
    0, its ``OK <name>`` line, and the same output on both builds.
sqlite3
    ``./configure --disable-tcl --disable-shared --enable-fts4 --enable-fts5
    CFLAGS=-Oz CC=...`` and
    ``make -j2 sqlite3`` (Makefile.in's shell target: tclsh generates the
    amalgamation ``sqlite3.c``, compiled by libtool into ``sqlite3.o``, a
    single big TU).  The shell, ``shell.c``, is compiled and linked in one
    step, so it leaves no object and is not in the ``.text`` figures; the
    build tools (lemon, mksourceid) are linked the same way.  The
    configuration has JSON and math functions, FTS4 and FTS5.  Tests: SQLite's
    TCL suite is too slow here, so the scripts in
    ``benchmarks/sqlite_tests/*.sql`` (tables, indexes, joins, aggregates,
    window functions, CTEs incl. recursive ones, JSON, string and date
    functions, triggers, transactions with rollback and savepoints,
    printf formats, integer overflow and real arithmetic) run with the built
    shell, ``sqlite3 -bail :memory: < script``: exit status 0, some output,
    and the same output on both builds.  A script whose first line is
    ``-- requires: OPTION ...`` runs only when ``PRAGMA compile_options``
    lists every OPTION (``fts.sql`` needs FTS4 and FTS5).

expat (not among the defaults: it was in the size search's training
    packages, so its sizes are not held-out figures; it is here for its
    tests, which caught a miscompile the csmith check had not)
    Its ``expat/`` tree, ``./buildconf.sh`` once on the fetched source
    (autoreconf: Debian's source has no ``configure``), then
    ``./configure CC=... CXX=... CFLAGS=-Oz CXXFLAGS=-Oz`` and ``make -j2``
    (static and shared libraries, ``-fPIC`` copies, ``xmlwf``).  Tests:
    ``make check`` (its C and C++ test programs, 365 checks each), every
    test passed, and the same summary on both builds.
pcre2 (not among the defaults, which the earlier pages measured; not in
    the size search's packages either)
    ``./configure CC=... CFLAGS=-Oz`` and ``make -j2`` (libpcre2-8, static
    and shared, libpcre2-posix, pcre2grep, pcre2test).  Tests: ``make check
    TESTS="RunTest pcre2posix_test"``, both passed and the same summary on
    both builds.  RunGrepTest is left out: its script-callout case prints
    the output of ``/bin/echo`` and of pcre2grep in an order that varies
    under load, on clang's build as on mirecc's (3 of 60 runs each, with
    pcre2grep.o byte-identical on both).

polybench (not a Debian package: ``--polybench DIR``, a PolyBench/C 4.2.1
    checkout, e.g. MatthiasJReisinger/PolyBenchC-4.2.1; held out: never in
    the size search's corpus)
    A Makefile written into the copy (the configure step): each of the 30
    kernels compiled to ``<kernel>.o`` and linked with
    ``utilities/polybench.o`` into its program, ``-Oz -DSMALL_DATASET
    -DPOLYBENCH_DUMP_ARRAYS``, ``make -j2``.  Tests: every program run, its
    arrays dumped (stderr) the same on both builds.

Output: a markdown table on stdout (project, .text per side, change, tests,
build seconds; total over the projects), the machine and K, mirecc's
counters (``verified.code-size``: TUs whose candidates were built,
``.improved``: TUs where a candidate was smaller than clang's -Oz; both
count every -Oz compile mirecc saw, configure's checks included), progress
on stderr, logs in ``WORK/logs/code-size-*``, JSON in ``--out``.  Exit
status 1 if any build or test failed on either side, or if mirecc's total
is larger than clang's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402  (fetching sources, running logged commands)
from real_projects import BenchError, log  # noqa: E402

from mirecc.tu import stats  # noqa: E402
from mirecc.cli.bench import machine_description  # noqa: E402
from mirecc.taskapi.config import Config  # noqa: E402
from mirecc.corpus.util import neutral_build_env  # noqa: E402
from mirecc.util.elf import object_sizes  # noqa: E402  (loadable bytes, as shipped)

HERE = Path(__file__).resolve().parent
LUA_TESTS = HERE / "lua_tests"
SQLITE_TESTS = HERE / "sqlite_tests"
ALL_PROJECTS = ("zlib", "bzip2", "lua5.4", "sqlite3")
COUNTERS = ("verified.code-size", "verified.code-size.improved", "tus.object",
            "verified.code-size.not-searched", "verified.code-size.too-small",
            "verified.code-size.predicted-no-gain", "verified.code-size.from-twin",
            "verified.code-size.inline-policy", "verified.code-size.inline-policy-kept")

# how many jobs each project's make runs (bzip2's Makefile is built one job at a time)
MAKE_JOBS = {"zlib": 2, "bzip2": 1, "lua5.4": 2, "sqlite3": 2, "expat": 2, "pcre2": 2,
             "libogg": 2, "libyaml": 2, "polybench": 2}
#: sources that are not Debian packages: project -> the folder given on the command line
LOCAL_SOURCES: dict[str, Path] = {}
POLYBENCH_FLAGS = "-Oz -DSMALL_DATASET -DPOLYBENCH_DUMP_ARRAYS"

BZIP2_CFLAGS = "-Wall -Winline -Oz -g -D_FILE_OFFSET_BITS=64"
LUA_MAKE_VARS = ["MYCFLAGS=-Oz", "MYLDFLAGS=", "MYLIBS=-ldl", "SYSCFLAGS=-DLUA_USE_LINUX",
                 "SYSLIBS=-Wl,-E -ldl", "LIBTOOL=libtool --quiet"]
# FTS4/FTS5 on: more code under test (benchmarks/sqlite_tests/fts.sql)
SQLITE_CONFIGURE = ["--disable-tcl", "--disable-shared", "--enable-fts4", "--enable-fts5",
                    "CFLAGS=-Oz"]


def revision() -> str | None:
    """The repository's commit, with "+dirty" when mirecc/ or heads/ have
    uncommitted changes: the figures depend on the candidate library the
    heads ship, so they are tied to this."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(rp.REPO), *args], capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return None
    return commit + ("+dirty" if git("status", "--porcelain", "--", "mirecc", "heads") else "")


def chosen_compilers(cc: str, cxx: str | None) -> tuple[str, str]:
    """Absolute paths of --cc and --cxx (by default clang-N's clang++-N)."""
    if cxx is None:
        name = Path(cc).name
        if not name.startswith("clang"):
            raise BenchError(f"--cc {cc}: give --cxx too (not a clang name)")
        cxx = str(Path(cc).with_name("clang++" + name[len("clang"):]))
    found = []
    for tool in (cc, cxx):
        path = shutil.which(tool)
        if path is None:
            raise BenchError(f"{tool}: not found (on PATH or as a path)")
        found.append(os.path.abspath(path))
    return found[0], found[1]


def default_k() -> int:
    """mirecc's own default K (the size_search setting), or 5 where it is 0 (off)."""
    return Config().size_search or 5


@dataclass(frozen=True)
class Side:
    """One of the two builds of a project."""
    name: str              # "clang" or "mirecc"
    cc: str
    cxx: str
    extra_env: dict        # MIRECC_* settings of the mirecc side

    def env(self, **more: str) -> dict[str, str]:
        """The environment of its builds and tests: ours without MIRECC_* and
        without variables that change a build from outside (CC, CFLAGS,
        MAKEFLAGS, ...), plus the side's own settings."""
        return neutral_build_env(**self.extra_env, **more)


# --------------------------------------------------------------------------
# running commands

def sh(cmd: list[str], tree: Path, side: Side, lp: Path, stage: str, **env: str) -> str:
    """Run ``cmd`` in ``tree`` with the side's environment (plus ``env``), its
    output appended to ``lp``; returns that output, raises BenchError on
    failure."""
    start = lp.stat().st_size if lp.exists() else 0
    rp.run(cmd, cwd=tree, env=side.env(**env), log_path=lp, stage=stage)
    return lp.read_text(errors="replace")[start:]


def timed(step, tree: Path, side: Side, lp: Path) -> float:
    """Run a project's step (configure, make, clean); its wall seconds."""
    started = time.monotonic()
    step(tree, side, lp)
    return time.monotonic() - started


def check_opt_level(make_output: str, side: Side, stage: str) -> None:
    """Every compile command (`` -c ``, naming the side's compiler) must end
    at -Oz: the last -O flag wins, and a Makefile may add its own after
    CFLAGS.  No compile command at all means the check saw nothing: an
    error too."""
    compilers = (side.cc, side.cxx)
    seen, wrong = 0, []
    for line in make_output.splitlines():
        if " -c " not in f" {line} " or not any(c in line for c in compilers):
            continue
        seen += 1
        levels = re.findall(r"(?<!\S)-O\S*", line)
        if not levels or levels[-1] != "-Oz":
            wrong.append(line.strip())
    if wrong:
        raise BenchError(f"{stage}: {len(wrong)} compile command(s) not at -Oz, e.g.: "
                         f"{wrong[0][:300]}")
    if not seen:
        raise BenchError(f"{stage}: no compile command in make's output to check")


def differential_lines(output: str) -> str:
    """Test output without the log's command headers and make's own lines,
    which name the compiler or the directory."""
    return "\n".join(ln for ln in output.splitlines()
                     if not ln.startswith(("$ cd ", "make", "[exit")))


# --------------------------------------------------------------------------
# the projects: build(tree, side, lp) and test(tree, side, lp) -> (summary, output)

def configure_zlib(tree: Path, side: Side, lp: Path) -> None:
    flags = {"CC": side.cc, "CFLAGS": "-Oz"}  # zlib's configure reads them from the environment
    sh(["./configure", "--static"], tree, side, lp, "zlib ./configure", **flags)


def make_zlib(tree: Path, side: Side, lp: Path) -> None:
    flags = {"CC": side.cc, "CFLAGS": "-Oz"}
    out = sh(["make", f"-j{MAKE_JOBS['zlib']}"], tree, side, lp, "zlib make", **flags)
    check_opt_level(out, side, "zlib make")


def test_zlib(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    out = sh(["make", "test"], tree, side, lp, "zlib make test")
    oks = [ln.strip(" \t*") for ln in out.splitlines() if "test OK" in ln]
    # --static: the static and the 64-bit-offset test programs (no shared one)
    if len(oks) < 2 or "FAILED" in out:
        raise BenchError(f"zlib make test printed {len(oks)} 'test OK' lines, expected 2; "
                         f"log: {lp}")
    return f"make test: {', '.join(oks)}", differential_lines(out)


def make_bzip2(tree: Path, side: Side, lp: Path) -> None:
    out = sh(["make", f"-j{MAKE_JOBS['bzip2']}", f"CC={side.cc}", f"CFLAGS={BZIP2_CFLAGS}",
              "libbz2.a", "bzip2", "bzip2recover"], tree, side, lp, "bzip2 make")
    check_opt_level(out, side, "bzip2 make")


def test_bzip2(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    # make fails if a cmp with the reference files fails
    out = sh(["make", "-j1", f"CC={side.cc}", f"CFLAGS={BZIP2_CFLAGS}", "test"], tree, side,
             lp, "bzip2 make test")
    cmps = sum(1 for ln in out.splitlines() if ln.startswith("cmp "))
    if cmps != 6:
        raise BenchError(f"bzip2 make test ran {cmps} cmp commands, expected 6; log: {lp}")
    return "make test: 3 samples compressed and decompressed, 6 cmp OK", \
        differential_lines(out)


def configure_lua(tree: Path, side: Side, lp: Path) -> None:
    if not shutil.which("libtool"):
        raise BenchError("lua5.4 needs libtool: apt-get install libtool-bin")
    # the header debian/rules generates (luaconf.h includes it)
    (tree / "src" / "lua5.4-deb-multiarch.h").write_text(
        f'#define DEB_HOST_MULTIARCH "{rp._multiarch()}"\n')
    # Debian's rules for llex.o, lparser.o and lcode.o (C and C++ copies)
    # put a literal -Os after CFLAGS, which would override -Oz.
    makefile = tree / "src" / "Makefile"
    text = makefile.read_text()
    if text.count("$(CFLAGS) -Os -c") != 6:
        raise BenchError("lua5.4: src/Makefile no longer has the six '$(CFLAGS) -Os -c' "
                         "rules this benchmark removes -Os from; check it")
    makefile.write_text(text.replace("$(CFLAGS) -Os -c", "$(CFLAGS) -c"))


def make_lua(tree: Path, side: Side, lp: Path) -> None:
    make = ["make", "-C", "src", f"CC={side.cc} -std=gnu99", f"CXX={side.cxx}", *LUA_MAKE_VARS]
    out = sh([*make, f"-j{MAKE_JOBS['lua5.4']}", "o"], tree, side, lp,
             "lua5.4 make o (objects)")
    check_opt_level(out, side, "lua5.4 make o")
    sh([*make, "-j1", "a", "lua"], tree, side, lp, "lua5.4 make a lua (link)")


def test_lua(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    scripts = sorted(LUA_TESTS.glob("*.lua"))
    if not scripts:
        raise BenchError(f"no Lua test scripts in {LUA_TESTS}")
    scratch = tree / "code-size-lua-tests"
    scratch.mkdir(exist_ok=True)
    outputs = []
    for script in scripts:
        proc = run_test([str(tree / "src" / "lua"), str(script)], scratch, side, lp)
        if proc.returncode != 0 or f"OK {script.stem}" not in proc.stdout:
            raise BenchError(f"lua {script.name} failed (exit status {proc.returncode}): "
                             f"{proc.stderr.strip()[-400:]}; log: {lp}")
        outputs.append(f"== {script.name}\n{proc.stdout}")
    return f"{len(scripts)} scripts of benchmarks/lua_tests passed", "".join(outputs)


def configure_sqlite(tree: Path, side: Side, lp: Path) -> None:
    sh(["./configure", *SQLITE_CONFIGURE, f"CC={side.cc}"], tree, side, lp,
       "sqlite3 ./configure")


def make_sqlite(tree: Path, side: Side, lp: Path) -> None:
    out = sh(["make", f"-j{MAKE_JOBS['sqlite3']}", "sqlite3"], tree, side, lp,
             "sqlite3 make sqlite3")
    check_opt_level(out, side, "sqlite3 make")


def test_sqlite(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    shell = str(tree / "sqlite3")
    options = set(run_test([shell, ":memory:", "PRAGMA compile_options;"], tree, side,
                           lp).stdout.split())
    scripts = sorted(SQLITE_TESTS.glob("*.sql"))
    if not scripts:
        raise BenchError(f"no SQL test scripts in {SQLITE_TESTS}")
    outputs, ran, skipped = [], 0, []
    for script in scripts:
        first = script.read_text().splitlines()[0]
        needs = first.split(":", 1)[1].split() if first.startswith("-- requires:") else []
        if not set(needs) <= options:
            skipped.append(script.name)
            continue
        with open(script) as stdin:
            proc = run_test([shell, "-bail", ":memory:"], tree, side, lp, stdin=stdin)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise BenchError(f"sqlite3 < {script.name} failed (exit status "
                             f"{proc.returncode}, {len(proc.stdout)} bytes of output): "
                             f"{proc.stderr.strip()[-400:]}; log: {lp}")
        outputs.append(f"== {script.name}\n{proc.stdout}")
        ran += 1
    summary = f"{ran} scripts of benchmarks/sqlite_tests passed"
    if skipped:
        summary += f" ({', '.join(skipped)} skipped: options not compiled in)"
    return summary, "".join(outputs)


def prepare_expat(src: Path, lp: Path) -> None:
    """Debian's expat source has no configure script: buildconf.sh makes it,
    once, before either side's copy (so neither side's time includes it)."""
    tree = src / "expat"
    if (tree / "configure").is_file():
        return
    if not shutil.which("autoreconf"):
        raise BenchError("expat needs autoreconf: apt-get install autoconf automake libtool")
    proc = subprocess.run(["./buildconf.sh"], cwd=tree, capture_output=True, text=True)
    with open(lp, "a") as fh:
        fh.write(f"\n$ cd {tree} && ./buildconf.sh\n{proc.stdout}{proc.stderr}"
                 f"[exit status {proc.returncode}]\n")
    if proc.returncode != 0 or not (tree / "configure").is_file():
        raise BenchError(f"expat ./buildconf.sh failed; log: {lp}")


def configure_expat(tree: Path, side: Side, lp: Path) -> None:
    sh(["./configure", f"CC={side.cc}", f"CXX={side.cxx}", "CFLAGS=-Oz", "CXXFLAGS=-Oz"],
       tree / "expat", side, lp, "expat ./configure")


def make_expat(tree: Path, side: Side, lp: Path) -> None:
    out = sh(["make", f"-j{MAKE_JOBS['expat']}", "V=1"], tree / "expat", side, lp,
             "expat make")
    check_opt_level(out, side, "expat make")


def test_expat(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    out = sh(["make", f"-j{MAKE_JOBS['expat']}", "check"], tree / "expat", side, lp,
             "expat make check")
    passed = re.search(r"^# PASS: +(\d+)$", out, re.M)
    if not passed or int(passed.group(1)) < 2 or not re.search(r"^# FAIL: +0$", out, re.M):
        raise BenchError(f"expat make check did not pass its tests; log: {lp}")
    checks = [ln.strip() for ln in (tree / "expat" / "tests" / "runtests.log")
              .read_text(errors="replace").splitlines() if "Checks:" in ln]
    # sorted: make -j finishes the test programs in either order
    return f"make check: {passed.group(1)} test programs passed ({'; '.join(checks)})", \
        "\n".join(sorted(ln for ln in differential_lines(out).splitlines()
                         if ln.startswith(("PASS", "FAIL", "# ")))) + "\n" + "\n".join(checks)


def configure_pcre2(tree: Path, side: Side, lp: Path) -> None:
    sh(["./configure", f"CC={side.cc}", "CFLAGS=-Oz"], tree, side, lp, "pcre2 ./configure")


def make_pcre2(tree: Path, side: Side, lp: Path) -> None:
    out = sh(["make", f"-j{MAKE_JOBS['pcre2']}", "V=1"], tree, side, lp, "pcre2 make")
    check_opt_level(out, side, "pcre2 make")


def test_pcre2(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    out = sh(["make", f"-j{MAKE_JOBS['pcre2']}", "check", "TESTS=RunTest pcre2posix_test"],
             tree, side, lp, "pcre2 make check")
    lines = [ln for ln in differential_lines(out).splitlines()
             if ln.startswith(("PASS", "FAIL", "# "))]
    if "# PASS:  2" not in lines or "# FAIL:  0" not in lines:
        raise BenchError(f"pcre2 make check did not pass RunTest and pcre2posix_test; "
                         f"log: {lp}")
    runtest = (tree / "RunTest.log").read_text(errors="replace")
    return "make check: RunTest and pcre2posix_test passed", "\n".join(lines) + runtest


def autotools(name: str, checks: int):
    """configure (CFLAGS=-Oz), make and make check steps of an autotools
    package whose ``make check`` runs ``checks`` test programs (libogg's
    and libyaml's shared libraries: what the link adds is judged there)."""
    def configure(tree: Path, side: Side, lp: Path) -> None:
        sh(["./configure", f"CC={side.cc}", "CFLAGS=-Oz"], tree, side, lp,
           f"{name} ./configure")

    def make(tree: Path, side: Side, lp: Path) -> None:
        out = sh(["make", f"-j{MAKE_JOBS[name]}", "V=1"], tree, side, lp, f"{name} make")
        check_opt_level(out, side, f"{name} make")

    def test(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
        out = sh(["make", f"-j{MAKE_JOBS[name]}", "check"], tree, side, lp,
                 f"{name} make check")
        lines = [ln for ln in differential_lines(out).splitlines()
                 if ln.startswith(("PASS", "FAIL", "# "))]
        if lines:       # automake's test driver
            if f"# PASS:  {checks}" not in lines or "# FAIL:  0" not in lines:
                raise BenchError(f"{name} make check did not pass its {checks} tests; "
                                 f"log: {lp}")
            return f"make check: {checks} test programs passed", "\n".join(lines)
        # a check target of its own (libogg's self tests print "... ok.")
        oks = [ln.strip() for ln in out.splitlines() if ln.rstrip().endswith("ok.")]
        if len(oks) < checks:
            raise BenchError(f"{name} make check printed {len(oks)} 'ok.' lines; log: {lp}")
        return f"make check: {len(oks)} self tests ok", "\n".join(oks)
    return configure, make, test


def prepare_autoreconf(name: str):
    """A Debian source without a configure script (libyaml's): autoreconf
    once, before either side's copy."""
    def step(src: Path, lp: Path) -> None:
        tree = src
        if (tree / "configure").is_file():
            return
        proc = subprocess.run(["autoreconf", "-fi"], cwd=tree, capture_output=True, text=True)
        with open(lp, "a") as fh:
            fh.write(f"\n$ cd {tree} && autoreconf -fi\n{proc.stdout}{proc.stderr}"
                     f"[exit status {proc.returncode}]\n")
        if proc.returncode != 0 or not (tree / "configure").is_file():
            raise BenchError(f"{name}: autoreconf -fi failed; log: {lp}")
    return step


def polybench_kernels(tree: Path) -> list[Path]:
    """The kernels' sources (relative), not the utilities."""
    return sorted(p.relative_to(tree) for p in tree.glob("*/**/*.c")
                  if p.parent.name != "utilities" and not p.name.endswith(".orig.c"))


def configure_polybench(tree: Path, side: Side, lp: Path) -> None:
    kernels = polybench_kernels(tree)
    if len(kernels) != 30:
        raise BenchError(f"{tree}: {len(kernels)} PolyBench/C kernels, expected 30 "
                         f"(--polybench names a PolyBench/C 4.2.1 checkout)")
    rules = [f"CFLAGS = {POLYBENCH_FLAGS} -Iutilities",
             "all: " + " ".join(str(k.with_suffix("")) for k in kernels),
             "utilities/polybench.o: utilities/polybench.c\n\t$(CC) $(CFLAGS) -c $< -o $@"]
    for k in kernels:
        exe, obj = k.with_suffix(""), k.with_suffix(".o")
        rules += [f"{obj}: {k}\n\t$(CC) $(CFLAGS) -I{k.parent} -c $< -o $@",
                  f"{exe}: {obj} utilities/polybench.o\n\t$(CC) $^ -lm -o $@"]
    rules.append("clean:\n\trm -f utilities/polybench.o "
                 + " ".join(f"{k.with_suffix('.o')} {k.with_suffix('')}" for k in kernels))
    (tree / "Makefile").write_text("\n".join(rules) + "\n")
    with open(lp, "a") as fh:
        fh.write(f"wrote {tree / 'Makefile'}: {len(kernels)} kernels\n")


def make_polybench(tree: Path, side: Side, lp: Path) -> None:
    out = sh(["make", f"-j{MAKE_JOBS['polybench']}", f"CC={side.cc}"], tree, side, lp,
             "polybench make")
    check_opt_level(out, side, "polybench make")


def test_polybench(tree: Path, side: Side, lp: Path) -> tuple[str, str]:
    dumps = []
    for k in polybench_kernels(tree):
        proc = run_test([str(tree / k.with_suffix(""))], tree, side, lp)
        if proc.returncode != 0 or "==BEGIN DUMP_ARRAYS==" not in proc.stderr:
            raise BenchError(f"polybench {k.stem}: exit status {proc.returncode}, "
                             f"no array dump; log: {lp}")
        dumps.append(f"{k.stem}\n{proc.stderr}")
    return f"{len(dumps)} programs ran, arrays dumped", "\n".join(dumps)


#: a step on the fetched source before either side's copy, by project
PREPARE = {"expat": prepare_expat, "libyaml": prepare_autoreconf("libyaml")}


def run_test(cmd: list[str], cwd: Path, side: Side, lp: Path,
             stdin=None) -> subprocess.CompletedProcess:
    """A test program's run, its output captured and appended to the log."""
    proc = subprocess.run(cmd, cwd=cwd, env=side.env(), stdin=stdin, capture_output=True,
                          text=True, errors="replace", timeout=600)
    with open(lp, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}{' < ' + stdin.name if stdin else ''}\n"
                 f"{proc.stdout}{proc.stderr}[exit status {proc.returncode}]\n")
    return proc


def clean(*cmd: str):
    def step(tree: Path, side: Side, lp: Path) -> None:
        sh(list(cmd), tree, side, lp, " ".join(cmd))
    return step


class Project(tuple):
    """(Debian source package, configure step or None, make step, clean
    step, test, flags in words); ``build`` = configure, then make."""
    package = property(lambda self: self[0])
    configure = property(lambda self: self[1])
    make = property(lambda self: self[2])
    clean = property(lambda self: self[3])
    test = property(lambda self: self[4])
    flags = property(lambda self: self[5])

    def build(self, tree: Path, side: Side, lp: Path) -> None:
        if self.configure:
            self.configure(tree, side, lp)
        self.make(tree, side, lp)


PROJECTS = {
    "zlib": Project(("zlib", configure_zlib, make_zlib, clean("make", "clean"), test_zlib,
                     "./configure --static, CFLAGS=-Oz")),
    "bzip2": Project(("bzip2", None, make_bzip2, clean("make", "clean"), test_bzip2,
                      f"its Makefile, CFLAGS={BZIP2_CFLAGS}")),
    "lua5.4": Project(("lua5.4", configure_lua, make_lua, clean("make", "-C", "src", "clean"),
                       test_lua, "src/Makefile, MYCFLAGS=-Oz (Debian's -Os for "
                       "llex/lparser/lcode removed), C and C++ copies")),
    "sqlite3": Project(("sqlite3", configure_sqlite, make_sqlite, clean("make", "clean"),
                        test_sqlite, f"./configure {' '.join(SQLITE_CONFIGURE)}, "
                        f"make sqlite3")),
    "expat": Project(("expat", configure_expat, make_expat,
                      clean("make", "-C", "expat", "clean"), test_expat,
                      "expat/: ./buildconf.sh, ./configure CFLAGS=-Oz CXXFLAGS=-Oz, "
                      "make -j2")),
    "pcre2": Project(("pcre2", configure_pcre2, make_pcre2, clean("make", "clean"),
                      test_pcre2, "./configure CFLAGS=-Oz, make -j2")),
    "polybench": Project(("polybench", configure_polybench, make_polybench,
                          clean("make", "clean"), test_polybench,
                          f"a Makefile per kernel, CFLAGS={POLYBENCH_FLAGS}, make -j2")),
    **{name: Project((name, configure, make, clean("make", "clean"), test,
                      "./configure CFLAGS=-Oz, make -j2"))
       for name, (configure, make, test) in (("libogg", autotools("libogg", 2)),
                                             ("libyaml", autotools("libyaml", 2)))},
}


# --------------------------------------------------------------------------
# measuring

def object_text(tree: Path) -> tuple[dict, dict]:
    """Under ``tree``, by relative path: every object file's (ELF
    relocatable, whatever its name: ``*.o``, bzip2's ``*.sho``) [loadable
    bytes, .text bytes], and every linked library's and program's (ELF
    shared object or executable, not a symbolic link) loadable bytes: the
    allocated sections, what the user ships."""
    objects, shipped = {}, {}
    for path in sorted(tree.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as fh:
            kind = rp._elf_type(fh.read(18))
        if kind == 1:
            objects[str(path.relative_to(tree))] = list(object_sizes(str(path)))
        elif kind in (2, 3):
            shipped[str(path.relative_to(tree))] = object_sizes(str(path))[0]
    return objects, shipped


@dataclass
class SideResult(rp.SideResult):
    """real_projects' side result, plus what code size measures."""
    objects: dict = field(default_factory=dict)    # relative path -> [loadable, .text]
    shipped: dict = field(default_factory=dict)    # libraries, programs -> loadable bytes
    counters: dict = field(default_factory=dict)   # mirecc's stats (mirecc side)
    rebuild_s: list = field(default_factory=list)  # --rebuilds: seconds per round
    rebuild_same: list = field(default_factory=list)    # objects = the first build's
    rebuild_objects: list = field(default_factory=list)  # tus.object per round (mirecc)
    # --timing: per round, a first build (mirecc: empty cache), its configure,
    # and make again after make clean (mirecc: the cache that build filled)
    first_s: list = field(default_factory=list)
    configure_s: list = field(default_factory=list)
    clean_rebuild_s: list = field(default_factory=list)
    clean_rebuild_same: list = field(default_factory=list)  # objects = the first build's


@dataclass
class ProjectResult:
    project: str
    version: str | None = None
    flags: str = ""
    sides: dict = field(default_factory=dict)      # side name -> SideResult
    text_clang: int = 0       # over the objects both sides have
    text_mirecc: int = 0
    loadable_clang: int = 0   # the same objects' allocated sections
    loadable_mirecc: int = 0
    shipped_clang: int = 0    # linked libraries and programs both sides have
    shipped_mirecc: int = 0
    only_clang: list = field(default_factory=list)
    only_mirecc: list = field(default_factory=list)
    test_output_same: bool | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return (self.error is None and len(self.sides) == 2
                and all(s.build_ok and s.tests_ok for s in self.sides.values()))

    def larger_objects(self) -> list[str]:
        """Objects with more loadable bytes on the mirecc side than clang's."""
        plain = self.sides["clang"].objects if "clang" in self.sides else {}
        ours = self.sides["mirecc"].objects if "mirecc" in self.sides else {}
        return sorted(k for k in plain.keys() & ours.keys() if ours[k][0] > plain[k][0])

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok, "larger_objects": self.larger_objects()}


def run_project(name: str, work: Path, sides: list[Side], rebuilds: int = 0,
                timing: int = 0) -> ProjectResult:
    """Fetch, then per side: fresh copy, build, measure, test, move away;
    then ``rebuilds`` rounds of both sides' builds and ``timing`` rounds of
    first builds and rebuilds after make clean (module docstring)."""
    project = PROJECTS[name]
    package, build, test = project.package, project.build, project.test
    result = ProjectResult(name, flags=project.flags)
    try:
        if name in LOCAL_SOURCES:
            src = LOCAL_SOURCES[name]
            if not src.is_dir():
                raise BenchError(f"{src}: no such folder (the {name} checkout)")
        else:
            src = rp.fetch_source(package, work / "src", logs=work / "logs")
    except BenchError as exc:
        result.error = str(exc)
        log(f"{name}: FAILED: {str(exc).splitlines()[0]}")
        return result
    result.version = rp.source_version(src) if name not in LOCAL_SOURCES else src.name
    if name in PREPARE:
        try:
            PREPARE[name](src, work / "logs" / f"code-size-{name}-prepare.log")
        except BenchError as exc:
            result.error = str(exc)
            log(f"{name}: FAILED: {exc}")
            return result
    build_dir = work / "code-size" / "build" / name
    outputs = {}
    for side in sides:
        sr = result.sides[side.name] = SideResult(side.name, side.cc)
        lp = work / "logs" / f"code-size-{name}-{side.name}.log"
        lp.unlink(missing_ok=True)
        cache = None
        if "MIRECC_SIZE_SEARCH" in side.extra_env:
            # a private, empty cache: every candidate is really built, and
            # the counters are this build's
            cache = work / "code-size" / "cache" / name
            shutil.rmtree(cache, ignore_errors=True)
            side = replace(side, extra_env={**side.extra_env, "MIRECC_CACHE_DIR": str(cache)})
        shutil.rmtree(build_dir, ignore_errors=True)
        build_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, build_dir, symlinks=True)
        try:
            log(f"{name} [{side.name}]: building")
            started = time.monotonic()
            build(build_dir, side, lp)
            sr.build_s = round(time.monotonic() - started, 1)
            sr.build_ok = True
            sr.objects, sr.shipped = object_text(build_dir)
            if cache:
                counts = stats.read(Config(cache_dir=str(cache)))
                sr.counters = {c: counts.get(c, 0) for c in COUNTERS}
            log(f"{name} [{side.name}]: built in {sr.build_s} s; testing")
            sr.tests, outputs[side.name] = test(build_dir, side, lp)
            sr.test_output_sha256 = hashlib.sha256(outputs[side.name].encode()).hexdigest()
            sr.tests_ok = True
        except (BenchError, subprocess.TimeoutExpired, OSError) as exc:
            sr.error = str(exc)
            log(f"{name} [{side.name}]: FAILED: {str(exc).splitlines()[0]}")
        dest = work / "code-size" / "results" / name / side.name
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(build_dir), str(dest))
    for round_ in range(rebuilds if len(outputs) == 2 else 0):
        order = sides if round_ % 2 == 0 else sides[::-1]
        for side in order:
            sr = result.sides[side.name]
            if "MIRECC_SIZE_SEARCH" in side.extra_env:
                cache = work / "code-size" / "cache" / name     # the first build's
                side = replace(side, extra_env={**side.extra_env,
                                                "MIRECC_CACHE_DIR": str(cache)})
                before = stats.read(Config(cache_dir=str(cache))).get("tus.object", 0)
            lp = work / "logs" / f"code-size-{name}-{side.name}-rebuild.log"
            shutil.rmtree(build_dir, ignore_errors=True)
            shutil.copytree(src, build_dir, symlinks=True)
            log(f"{name} [{side.name}]: rebuild {round_ + 1}/{rebuilds}")
            started = time.monotonic()
            try:
                build(build_dir, side, lp)
            except (BenchError, subprocess.TimeoutExpired, OSError) as exc:
                sr.error = f"rebuild: {exc}"
                break
            sr.rebuild_s.append(round(time.monotonic() - started, 2))
            first = work / "code-size" / "results" / name / side.name
            sr.rebuild_same.append(sum(
                (first / rel).is_file() and (first / rel).read_bytes()
                == (build_dir / rel).read_bytes() for rel in sr.objects))
            if "MIRECC_CACHE_DIR" in side.extra_env:
                sr.rebuild_objects.append(
                    stats.read(Config(cache_dir=side.extra_env["MIRECC_CACHE_DIR"]))
                    .get("tus.object", 0) - before)
    for round_ in range(timing if len(outputs) == 2 else 0):
        for side in (sides if round_ % 2 == 0 else sides[::-1]):
            sr = result.sides[side.name]
            if "MIRECC_SIZE_SEARCH" in side.extra_env:
                cache = work / "code-size" / "cache" / f"{name}-timing"
                shutil.rmtree(cache, ignore_errors=True)     # a first build: nothing known
                side = replace(side, extra_env={**side.extra_env,
                                                "MIRECC_CACHE_DIR": str(cache)})
            lp = work / "logs" / f"code-size-{name}-{side.name}-timing.log"
            shutil.rmtree(build_dir, ignore_errors=True)
            shutil.copytree(src, build_dir, symlinks=True)
            log(f"{name} [{side.name}]: timing round {round_ + 1}/{timing}")
            try:
                configure = timed(project.configure, build_dir, side, lp) \
                    if project.configure else 0.0
                first = configure + timed(project.make, build_dir, side, lp)
                timed(project.clean, build_dir, side, lp)
                again = timed(project.make, build_dir, side, lp)
            except (BenchError, subprocess.TimeoutExpired, OSError) as exc:
                sr.error = f"timing: {exc}"
                break
            sr.first_s.append(round(first, 2))
            sr.configure_s.append(round(configure, 2))
            sr.clean_rebuild_s.append(round(again, 2))
            kept = work / "code-size" / "results" / name / side.name
            sr.clean_rebuild_same.append(sum(
                (kept / rel).is_file() and (build_dir / rel).is_file()
                and (kept / rel).read_bytes() == (build_dir / rel).read_bytes()
                for rel in sr.objects))
    shutil.rmtree(build_dir, ignore_errors=True)
    if len(outputs) == 2:
        # clang's build is the reference: a difference is mirecc's failure
        result.test_output_same = outputs["clang"] == outputs["mirecc"]
        if not result.test_output_same:
            sr = result.sides["mirecc"]
            sr.tests_ok = False
            sr.error = "test output differs from the clang build's"
    plain, ours = result.sides["clang"].objects, result.sides["mirecc"].objects
    common = plain.keys() & ours.keys()
    result.text_clang = sum(plain[k][1] for k in common)
    result.text_mirecc = sum(ours[k][1] for k in common)
    result.loadable_clang = sum(plain[k][0] for k in common)
    result.loadable_mirecc = sum(ours[k][0] for k in common)
    plain_ship, our_ship = result.sides["clang"].shipped, result.sides["mirecc"].shipped
    both = plain_ship.keys() & our_ship.keys()
    result.shipped_clang = sum(plain_ship[k] for k in both)
    result.shipped_mirecc = sum(our_ship[k] for k in both)
    result.only_clang = sorted(plain.keys() - ours.keys())
    result.only_mirecc = sorted(ours.keys() - plain.keys())
    return result


# --------------------------------------------------------------------------
# report

def change(a: int, b: int) -> str:
    return f"{100 * (b - a) / a:+.2f}%" if a else "-"


def report(results: list[ProjectResult], machine: dict, k: int, rev: str | None,
           budget: float, inline: bool = False) -> str:
    def ok(r: ProjectResult, side: str) -> str:
        s = r.sides.get(side)
        return "-" if s is None else "ok" if s.tests_ok else "FAIL"

    def secs(r: ProjectResult, side: str) -> str:
        s = r.sides.get(side)
        return "-" if s is None or s.build_s is None else f"{s.build_s:.0f}"

    lines = [f"Machine: {machine['cpu']}, {machine['cores']} cores, Linux {machine['kernel']}; "
             f"{machine['compiler']}; -Oz; mirecc ({rev or 'revision unknown'}) with "
             f"MIRECC_SIZE_SEARCH={k} MIRECC_SIZE_BUDGET={budget:g}"
             f"{' MIRECC_SIZE_INLINE=1' if inline else ''}", "",
             "| project | clang .text | mirecc .text | change | objects' loadable bytes "
             "clang / mirecc | change | libraries and programs, loadable clang / mirecc "
             "| change | tests clang/mirecc | build s clang/mirecc |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        lines.append(f"| {r.project} | {r.text_clang} | {r.text_mirecc} | "
                     f"{change(r.text_clang, r.text_mirecc)} | {r.loadable_clang} / "
                     f"{r.loadable_mirecc} | {change(r.loadable_clang, r.loadable_mirecc)} | "
                     f"{r.shipped_clang} / {r.shipped_mirecc} | "
                     f"{change(r.shipped_clang, r.shipped_mirecc)} | "
                     f"{ok(r, 'clang')}/{ok(r, 'mirecc')} "
                     f"| {secs(r, 'clang')}/{secs(r, 'mirecc')} |")

    def total(field: str) -> tuple[int, int]:
        return (sum(getattr(r, f"{field}_clang") for r in results),
                sum(getattr(r, f"{field}_mirecc") for r in results))
    (a, b), (la, lb), (sa, sb) = total("text"), total("loadable"), total("shipped")
    lines += [f"| **total** | {a} | {b} | {change(a, b)} | {la} / {lb} | {change(la, lb)} | "
              f"{sa} / {sb} | {change(sa, sb)} | | |", ""]
    for r in results:
        lines.append(f"{r.project} {r.version or ''}: {r.flags}")
        mirecc = r.sides.get("mirecc")
        if mirecc and mirecc.counters:
            none = mirecc.counters.get(COUNTERS[3], 0)
            small, gated, twins = (mirecc.counters.get(c, 0) for c in COUNTERS[4:7])
            lines.append(f"  mirecc built candidates for {mirecc.counters[COUNTERS[0]] - none} "
                         f"TUs ({twins} of them with the verdict of their static/shared twin; "
                         f"none for {small} too small to gain and {gated} where the "
                         f"object gate expected no gain); one was "
                         f"smaller than clang's -Oz in "
                         f"{mirecc.counters[COUNTERS[1]]}")
            if mirecc.counters.get(COUNTERS[7]):
                lines.append(f"  the inlining policy's candidate was built for "
                             f"{mirecc.counters[COUNTERS[7]]} TUs and kept in "
                             f"{mirecc.counters.get(COUNTERS[8], 0)}")
        mirecc, clang = r.sides.get("mirecc"), r.sides.get("clang")
        if mirecc and clang and mirecc.rebuild_s and clang.rebuild_s:
            med = statistics.median
            lines.append(
                f"  rebuild of the unchanged project, {len(mirecc.rebuild_s)} rounds: clang "
                f"{med(clang.rebuild_s):.2f} s ({min(clang.rebuild_s):.2f}-"
                f"{max(clang.rebuild_s):.2f}), mirecc {med(mirecc.rebuild_s):.2f} s "
                f"({min(mirecc.rebuild_s):.2f}-{max(mirecc.rebuild_s):.2f}): "
                f"{med(mirecc.rebuild_s) / med(clang.rebuild_s):.2f}x clang; objects "
                f"identical to mirecc's first build {min(mirecc.rebuild_same)}/"
                f"{len(mirecc.objects)}; kept objects copied per round "
                f"{', '.join(map(str, mirecc.rebuild_objects))}")
        if mirecc and clang and mirecc.first_s and clang.first_s:
            lines.append(f"  make -j{MAKE_JOBS.get(r.project, 2)} wall time, "
                         f"{len(mirecc.first_s)} rounds, sides "
                         f"alternating, median (min-max), mirecc over clang:")
            for what, field_ in (("first build, configure included", "first_s"),
                                 ("configure alone", "configure_s"),
                                 ("make after make clean", "clean_rebuild_s")):
                a, b = getattr(clang, field_), getattr(mirecc, field_)
                if not any(a):
                    continue
                med = statistics.median
                lines.append(f"    {what}: clang {med(a):.2f} s ({min(a):.2f}-{max(a):.2f}), "
                             f"mirecc {med(b):.2f} s ({min(b):.2f}-{max(b):.2f}): "
                             f"{med(b) / med(a):.2f}x")
            lines.append(f"    objects after make clean identical to mirecc's first build: "
                         f"{min(mirecc.clean_rebuild_same)}/{len(mirecc.objects)}")
        objects = len(r.sides["clang"].objects) if "clang" in r.sides else 0
        larger = r.larger_objects()
        lines.append(f"  objects measured: {objects - len(r.only_clang)}; larger than clang's "
                     f"in loadable bytes: {len(larger)}"
                     + (f" ({', '.join(larger)})" if larger else ""))
        for side, names in (("clang", r.only_clang), ("mirecc", r.only_mirecc)):
            if names:
                lines.append(f"  only in the {side} build: {', '.join(names)}")
        for s in r.sides.values():
            lines.append(f"  [{s.side}] {s.tests or 'tests not run'}")
            if s.error:
                lines.append("    error: " + s.error.replace("\n", "\n    "))
        if r.test_output_same is not None:
            lines.append(f"  test output identical on both builds: {r.test_output_same}")
        if r.error:
            lines.append("  error: " + r.error.replace("\n", "\n  "))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=None,
                        help=f"MIRECC_SIZE_SEARCH (default: mirecc's default, or 5 where "
                             f"that is 0: {default_k()})")
    parser.add_argument("--projects", default=",".join(ALL_PROJECTS),
                        help=f"comma-separated subset of {','.join(PROJECTS)} "
                             f"(default: {','.join(ALL_PROJECTS)})")
    parser.add_argument("--work", type=Path, default=rp.DEFAULT_WORK,
                        help=f"work directory, sources under WORK/src (default: "
                             f"{rp.DEFAULT_WORK})")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON results (default: WORK/code_size.json)")
    parser.add_argument("--cc", default=None,
                        help="the clang both sides use (for example clang-19; default: the "
                             "one mirecc drives); the library is the spec's for its LLVM")
    parser.add_argument("--md", type=Path, default=None,
                        help="also write the report as a Markdown page (e.g. docs/results/"
                             "code-size-packages.md)")
    parser.add_argument("--rebuilds", type=int, default=0,
                        help="then N rounds rebuilding the unchanged project with both "
                             "compilers, mirecc with its warm cache (default: 0)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"MIRECC_SIZE_BUDGET (default: mirecc's default, "
                             f"{Config().size_budget:g})")
    parser.add_argument("--timing", type=int, default=0,
                        help="then N rounds, sides alternating, of a first build (mirecc "
                             "with an empty cache; configure timed apart) and make after "
                             "make clean (default: 0)")
    parser.add_argument("--cxx", default=None,
                        help="the clang++ beside --cc (default: --cc's name with clang++)")
    parser.add_argument("--inline", action="store_true",
                        help="MIRECC_SIZE_INLINE=1: the inlining policy's candidate first "
                             "(default: off, mirecc's default)")
    parser.add_argument("--polybench", type=Path, default=None, metavar="DIR",
                        help="a PolyBench/C 4.2.1 checkout, for the project polybench")
    args = parser.parse_args()
    if args.polybench:
        LOCAL_SOURCES["polybench"] = args.polybench.absolute()
    k = default_k() if args.k is None else args.k
    budget = Config().size_budget if args.budget is None else args.budget
    if k < 1:
        parser.error("--k must be at least 1 (0 turns the search off)")
    projects = [p.strip() for p in args.projects.split(",") if p.strip()]
    unknown = [p for p in projects if p not in PROJECTS]
    if "polybench" in projects and not args.polybench:
        parser.error("the project polybench needs --polybench DIR (a PolyBench/C 4.2.1 checkout)")
    if unknown or not projects:
        parser.error(f"unknown project(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(PROJECTS)}")
    work = args.work.absolute()
    out = (args.out or work / "code_size.json").absolute()

    try:
        mirecc = rp.find_mirecc()
        mirecxx = rp.find_mirecc("mirecc++")
        if args.cc:
            cc, cxx = chosen_compilers(args.cc, args.cxx)
        else:
            cc, cxx = rp.real_compiler(mirecc), rp.real_compiler(mirecxx, cxx=True)
    except BenchError as exc:
        print(f"code_size: {exc}", file=sys.stderr)
        return 2
    sides = [Side("clang", cc, cxx, {}),
             # mirecc drives the very clang the reference build uses
             Side("mirecc", str(mirecc), str(mirecxx),
                  {"MIRECC_SIZE_SEARCH": str(k), "MIRECC_SIZE_BUDGET": f"{budget:g}",
                   "MIRECC_SIZE_INLINE": "1" if args.inline else "0",
                   "MIRECC_CC": cc, "MIRECC_CXX": cxx})]
    log(f"clang: {cc}; mirecc: {mirecc}; K={k}; inlining policy "
        f"{'on' if args.inline else 'off'}; work directory: {work}")
    results = []
    for name in projects:
        log(f"=== {name}")
        results.append(run_project(name, work, sides, args.rebuilds, args.timing))

    machine, rev = machine_description(cc), revision()
    text = report(results, machine, k, rev, budget, args.inline)
    print(text)
    if args.md:
        from mirecc.util.fsutil import atomic_write_bytes
        command = "benchmarks/code_size.py " + " ".join(sys.argv[1:])
        atomic_write_bytes(args.md.absolute(), (
            f"# Code size on packages, written by `{command}`\n\n{text}\n").encode())
    total_clang = sum(r.text_clang for r in results)
    total_mirecc = sum(r.text_mirecc for r in results)
    totals = {f"{f}_{side}": sum(getattr(r, f"{f}_{side}") for r in results)
              for f in ("loadable", "shipped") for side in ("clang", "mirecc")}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": machine, "k": k, "budget": budget, "inline": args.inline, "clang": cc, "mirecc": str(mirecc), "revision": rev,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "total": {"text_clang": total_clang, "text_mirecc": total_mirecc, **totals},
        "results": [r.to_dict() for r in results]}, indent=2) + "\n")
    print(f"\nJSON: {out}")
    return 0 if all(r.ok for r in results) and total_mirecc <= total_clang else 1


if __name__ == "__main__":
    sys.exit(main())
