"""Record every compiler command line of real builds, one JSON line per call.

    .venv/bin/python benchmarks/record_calls.py [--projects zlib,lua5.4,...]
                     [--out DIR] [--work DIR] [--keep]

With no arguments every project is recorded; ``--projects a,b`` records some.
For each project ``P`` the calls go to ``tests/data/calls/P.jsonl`` (``--out``
changes the directory), one line per compiler call, in the order the calls
started::

    {"mode": "c", "cwd": "<build>", "args": ["-O2", "-g", "-c", "adler32.c", ...]}

``mode`` is ``"c"`` for a call of the C compiler (CC) and ``"c++"`` for the
C++ compiler (CXX); ``cwd`` is the directory the compiler ran in; ``args``
are its arguments without argv[0].  The absolute temporary directory a
project is built in is replaced by ``<build>`` in ``cwd`` and in every
argument (so the files do not depend on the machine or the run); everything
else is as the build passed it.  Nothing is filtered: configure probes,
CMake's compiler identification and try-compiles, libtool's calls, links,
``-E``/``-v`` queries, compiles that fail on purpose are all there.  The
files are test data for the driver (what real build systems ask a compiler).

How it records
--------------
A temporary directory gets two tiny bash scripts, ``bin/cc-rec`` and
``bin/c++-rec``, used as CC and CXX.  Each call appends one NUL-separated
record to a log (mode, ``$PWD``, ``$#``, the arguments) while holding an
``flock`` on the log, so that calls the build runs in parallel never
interleave, then ``exec``s the real compiler (``/usr/bin/clang-14``,
``/usr/bin/clang++-14``; ``--cc``/``--cxx`` change them) with the same
arguments: the build goes on as usual.  Once the build is over the log is
converted to JSON lines.  Every build runs in a fresh copy of its source in
the temporary directory (sources are never built in place), with ``MIRECC_*``
and the usual build variables (CC, CFLAGS, MAKEFLAGS, ...) removed from the
environment and ``LC_ALL=C``; the temporary directory is removed at the end
(``--keep`` keeps it, and it is kept when a build fails; its build logs are
in ``logs/``).

Projects
--------
zlib, zlib-Oz
    Debian's zlib source (``WORK/src/zlib``, as ``benchmarks/real_projects.py``
    fetches it): ``./configure`` then ``make -j2``, with ``CC=cc-rec`` and
    ``CFLAGS="-O2 -g"`` (zlib) or ``CFLAGS="-Oz"`` (zlib-Oz) in the
    environment of both.
lua5.4
    Debian's lua5.4 source, built exactly as ``real_projects.py``'s
    ``build_lua`` builds it (its function is called): ``autoreconf`` and
    ``configure`` of ``debian/configure.ac`` to make a libtool for CC/CXX,
    then ``make linux-readline`` through that libtool with Debian's
    ``dpkg-buildflags`` (``-g -O2`` + hardening; ``-Os`` for
    llex/lparser/lcode; every file also compiled by CXX).  The libtool
    configure's probes are recorded too.
libyaml-configure
    Debian's libyaml source: ``autoreconf -fi`` (not recorded), then
    ``./configure CC=cc-rec CXX=c++-rec`` and ``make -j2`` (through libtool).
cmake-sample
    What ``real_projects.py``'s cmake-sample builds: the repository's
    top-level ``CMakeLists.txt`` (with ``benchmarks/programs/`` and
    ``passes/``, copied into the temporary directory first, so that no path
    of this checkout appears), ``cmake -S <build>/src -B <build>/build
    -DCMAKE_C_COMPILER=cc-rec -DCMAKE_CXX_COMPILER=c++-rec
    -DCMAKE_BUILD_TYPE=Release`` then ``cmake --build <build>/build -j2``.
    ``passes/`` is only built where an LLVM CMake package is installed.
libyaml-cmake
    Debian's libyaml source with its own ``CMakeLists.txt``: the same two
    cmake commands (``-S <build> -B <build>/cmake-build``).

Debian sources are looked up in ``WORK/src/<package>/`` (``WORK`` is
``.work`` of the checkout, ``--work`` changes it) where
``real_projects.py --fetch-only`` leaves them; a missing one is fetched
there with ``real_projects.fetch_source`` (``apt-get source``; it adds a
deb-src entry to apt when none exists and this runs as root).  lua5.4 and
libyaml need autoconf, automake and libtool (``apt-get install``), and lua5.4
``libreadline-dev``.  Only the standard library is used, except that lua5.4
and fetching a missing source import ``benchmarks/real_projects.py`` (which
imports mirecc).

A progress line is printed per project (with its number of calls); the exit
status is 0 when every project was recorded, 1 otherwise (the failing
project's .jsonl is then not written).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO / ".work"
DEFAULT_OUT = REPO / "tests" / "data" / "calls"
PLACEHOLDER = "<build>"
ALL_PROJECTS = ("zlib", "zlib-Oz", "lua5.4", "libyaml-configure", "cmake-sample",
                "libyaml-cmake")
# Debian source package of each project (None: the repository's own files).
PACKAGES = {"zlib": "zlib", "zlib-Oz": "zlib", "lua5.4": "lua5.4",
            "libyaml-configure": "libyaml", "libyaml-cmake": "libyaml", "cmake-sample": None}
# Variables that would change a build from outside (as mirecc.corpus.util's).
BUILD_VARIABLES = {"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS",
                   "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS"}
BUILD_TIMEOUT = 3600

_T0 = time.monotonic()


class RecordError(Exception):
    """A build step failed; the message says which and where its log is."""


def progress(message: str) -> None:
    print(f"[{time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# the recorder

RECORDER = """#!/bin/bash
# Written by mirecc's benchmarks/record_calls.py: log this {mode} compiler call
# (NUL-separated: mode, cwd, argument count, arguments), then run the real one.
{{
  {lock}printf '%s\\0' {mode_q} "$PWD" "$#" "$@" >&9
}} 9>>{log_q}
exec {real_q} "$@"
"""


def write_recorders(bin_dir: Path, log: Path, cc: str, cxx: str) -> tuple[str, str]:
    """bin_dir/cc-rec and bin_dir/c++-rec, logging to ``log``; their paths."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    # flock keeps a record whole even when bash writes it in several pieces
    # (records longer than stdio's buffer) while other calls append too.
    lock = "flock 9 && " if shutil.which("flock") else ""
    paths = []
    for name, mode, real in (("cc-rec", "c", cc), ("c++-rec", "c++", cxx)):
        path = bin_dir / name
        path.write_text(RECORDER.format(mode=mode, mode_q=shlex.quote(mode), lock=lock,
                                        log_q=shlex.quote(str(log)),
                                        real_q=shlex.quote(real)))
        path.chmod(0o755)
        paths.append(str(path))
    return paths[0], paths[1]


def read_log(log: Path) -> list[tuple[str, str, list[str]]]:
    """The (mode, cwd, args) records of a recorder log, in order."""
    if not log.exists():
        return []
    fields = log.read_bytes().split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    fields = [f.decode("utf-8", "surrogateescape") for f in fields]
    records, i = [], 0
    while i < len(fields):
        if i + 3 > len(fields) or not fields[i + 2].isdigit():
            raise RecordError(f"{log}: malformed record at field {i}")
        mode, cwd, count = fields[i], fields[i + 1], int(fields[i + 2])
        args = fields[i + 3:i + 3 + count]
        if len(args) != count:
            raise RecordError(f"{log}: truncated record at field {i}")
        records.append((mode, cwd, args))
        i += 3 + count
    return records


def anonymise(text: str, prefixes: list[str]) -> str:
    for prefix in prefixes:
        text = text.replace(prefix, PLACEHOLDER)
    return text


def write_jsonl(records, build_dir: Path, out: Path) -> None:
    # the directory as given and as resolved (if a symlink leads to it),
    # longest first so that one is never left half replaced
    prefixes = sorted({str(build_dir), os.path.realpath(build_dir)}, key=len, reverse=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "w", encoding="utf-8") as fh:
        for mode, cwd, args in records:
            fh.write(json.dumps({"mode": mode, "cwd": anonymise(cwd, prefixes),
                                 "args": [anonymise(a, prefixes) for a in args]}) + "\n")
    tmp.replace(out)


# --------------------------------------------------------------------------
# summaries

def summary(records) -> str:
    """'N calls, M compiles (-c) at -O2 x, -Os y' for a progress line."""
    compiles = [args for _, _, args in records if "-c" in args]
    levels: dict[str, int] = {}
    for args in compiles:
        opts = [a for a in args if re.fullmatch(r"-O(\d+|s|z|g|fast)?", a)]
        level = opts[-1] if opts else "(none)"
        levels[level] = levels.get(level, 0) + 1
    modes = {m: sum(1 for r in records if r[0] == m) for m in ("c", "c++")}
    by_level = ", ".join(f"{k} {v}" for k, v in sorted(levels.items()))
    return (f"{len(records)} calls (c {modes['c']}, c++ {modes['c++']}), "
            f"{len(compiles)} compiles (-c){': ' + by_level if by_level else ''}")


# --------------------------------------------------------------------------
# running builds

def build_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MIRECC_") and k not in BUILD_VARIABLES}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> None:
    """Run ``cmd`` with its output appended to ``log``; RecordError if it fails."""
    from mirecc.corpus.util import run_logged  # lazy: mirecc only once a build runs

    rc = run_logged(cmd, cwd=cwd, env=env, log=log, timeout=BUILD_TIMEOUT)
    if rc != 0:
        lines = log.read_text(errors="replace").splitlines()[-15:]
        raise RecordError(f"{shlex.join(cmd)} failed (exit status {rc}); log: {log}\n"
                          + "\n".join(lines))


def _real_projects():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import real_projects
    finally:
        sys.path.pop(0)
    return real_projects


def source_tree(package: str, work: Path) -> Path:
    """The unpacked Debian source of ``package`` (fetched if missing)."""
    marker = work / "src" / package / "fetched.json"
    try:
        tree = marker.parent / json.loads(marker.read_text())["tree"]
        if tree.is_dir():
            return tree
    except (OSError, ValueError, KeyError):
        pass
    progress(f"{package}: not in {marker.parent}, fetching it (apt-get source)")
    rp = _real_projects()
    try:
        return rp.fetch_source(package, work / "src", logs=work / "logs")
    except rp.BenchError as exc:
        raise RecordError(str(exc)) from None


def need_tools(tools: dict[str, str]) -> None:
    """Install the packages of missing tools with apt-get (root only)."""
    missing = sorted({pkg for tool, pkg in tools.items() if not shutil.which(tool)})
    if not missing:
        return
    if os.geteuid() != 0:
        raise RecordError(f"needs {' '.join(missing)}: apt-get install {' '.join(missing)}")
    progress(f"installing {' '.join(missing)}")
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                   check=True, env=build_env(DEBIAN_FRONTEND="noninteractive"),
                   stdout=subprocess.DEVNULL)


AUTOTOOLS = {"autoreconf": "autoconf", "aclocal": "automake", "libtoolize": "libtool"}


def copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=True)


# Each builder gets the source copy's directory (the <build> of the .jsonl),
# the recorders and the log directory; it runs the recorded build.

def build_zlib(cflags: str):
    def build(tree: Path, cc: str, cxx: str, logs: Path) -> None:
        env = build_env(CC=cc, CFLAGS=cflags)
        run(["./configure"], cwd=tree, env=env, log=logs / "build.log")
        run(["make", "-j2"], cwd=tree, env=env, log=logs / "build.log")
    return build


def build_lua(tree: Path, cc: str, cxx: str, logs: Path) -> None:
    rp = _real_projects()
    try:
        rp.build_lua(tree, rp.Side("record", cc, cxx), logs)
    except rp.BenchError as exc:
        raise RecordError(str(exc)) from None


def build_libyaml_configure(tree: Path, cc: str, cxx: str, logs: Path) -> None:
    need_tools(AUTOTOOLS)
    run(["autoreconf", "-fi"], cwd=tree, env=build_env(), log=logs / "build.log")
    env = build_env()
    run(["./configure", f"CC={cc}", f"CXX={cxx}"], cwd=tree, env=env, log=logs / "build.log")
    run(["make", "-j2"], cwd=tree, env=env, log=logs / "build.log")


def cmake_build(source: Path, build: Path, cc: str, cxx: str, logs: Path) -> None:
    env = build_env()
    run(["cmake", "-S", str(source), "-B", str(build), f"-DCMAKE_C_COMPILER={cc}",
         f"-DCMAKE_CXX_COMPILER={cxx}", "-DCMAKE_BUILD_TYPE=Release"],
        cwd=source, env=env, log=logs / "build.log")
    run(["cmake", "--build", str(build), "-j2"], cwd=source, env=env, log=logs / "build.log")


def build_cmake_sample(tree: Path, cc: str, cxx: str, logs: Path) -> None:
    cmake_build(tree / "src", tree / "build", cc, cxx, logs)


def build_libyaml_cmake(tree: Path, cc: str, cxx: str, logs: Path) -> None:
    cmake_build(tree, tree / "cmake-build", cc, cxx, logs)


BUILDERS = {"zlib": build_zlib("-O2 -g"), "zlib-Oz": build_zlib("-Oz"), "lua5.4": build_lua,
            "libyaml-configure": build_libyaml_configure, "cmake-sample": build_cmake_sample,
            "libyaml-cmake": build_libyaml_cmake}


def prepare_source(name: str, work: Path, dest: Path) -> None:
    """A fresh copy of the project's source at ``dest``."""
    package = PACKAGES[name]
    if package is not None:
        copy_tree(source_tree(package, work), dest)
        return
    # cmake-sample: the files of the repository's CMake project
    src = dest / "src"
    src.mkdir(parents=True)
    shutil.copy2(REPO / "CMakeLists.txt", src / "CMakeLists.txt")
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.o")
    for sub in ("benchmarks/programs", "passes"):
        shutil.copytree(REPO / sub, src / sub, symlinks=True, ignore=ignore)


def record(name: str, *, work: Path, out_dir: Path, tmp_root: Path,
           cc: str, cxx: str) -> tuple[bool, str]:
    """Record one project; (ok, summary or error)."""
    tree = tmp_root / name          # the <build> of this project
    logs = tmp_root / "logs" / name
    log = tmp_root / "calls" / f"{name}.calls"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    rec_cc, rec_cxx = write_recorders(tmp_root / "bin", log, cc, cxx)
    try:
        if name in ("lua5.4", "libyaml-configure"):
            need_tools(AUTOTOOLS)
        prepare_source(name, work, tree)
        BUILDERS[name](tree, rec_cc, rec_cxx, logs)
        records = read_log(log)
    except (RecordError, OSError, subprocess.CalledProcessError) as exc:
        return False, str(exc)
    if not records:
        return False, f"the build made no compiler call (log: {logs / 'build.log'})"
    out = out_dir / f"{name}.jsonl"
    write_jsonl(records, tree, out)
    return True, f"{summary(records)} -> {out}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="record_calls.py", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", default=",".join(ALL_PROJECTS),
                        help=f"comma-separated subset of {','.join(ALL_PROJECTS)} "
                             "(default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"directory of the .jsonl files (default: {DEFAULT_OUT})")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help=f"where the Debian sources are, in src/<package>/ "
                             f"(default: {DEFAULT_WORK})")
    parser.add_argument("--cc", default="/usr/bin/clang-14",
                        help="the real C compiler (default: /usr/bin/clang-14)")
    parser.add_argument("--cxx", default="/usr/bin/clang++-14",
                        help="the real C++ compiler (default: /usr/bin/clang++-14)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (builds, logs, raw call logs)")
    args = parser.parse_args(argv)
    projects = [p.strip() for p in args.projects.split(",") if p.strip()]
    unknown = [p for p in projects if p not in ALL_PROJECTS]
    if unknown or not projects:
        parser.error(f"unknown project(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(ALL_PROJECTS)}")
    for compiler in (args.cc, args.cxx):
        if not shutil.which(compiler):
            parser.error(f"compiler not found: {compiler}")
    cc, cxx = shutil.which(args.cc), shutil.which(args.cxx)
    tmp_root = Path(tempfile.mkdtemp(prefix="record-calls-"))
    failed = []
    for name in projects:
        progress(f"{name}: building with {cc} / {cxx} in {tmp_root / name}")
        ok, text = record(name, work=args.work.absolute(), out_dir=args.out.absolute(),
                          tmp_root=tmp_root, cc=cc, cxx=cxx)
        progress(f"{name}: {text}" if ok else f"{name}: FAILED: {text}")
        if not ok:
            failed.append(name)
    if args.keep or failed:
        progress(f"temporary directory kept: {tmp_root}")
    else:
        shutil.rmtree(tmp_root, ignore_errors=True)
    if failed:
        progress(f"not recorded: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
