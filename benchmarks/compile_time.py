"""Compile time: what mirecc costs over plain clang when building real projects.

    .venv/bin/python benchmarks/compile_time.py [--projects bzip2,zlib]
                     [--modes passthrough,cold,warm] [--repeats 3]
                     [--json PATH] [--cc PATH] [--work DIR] [--no-explain-file]
    .venv/bin/python benchmarks/compile_time.py --fetch-only

What it measures
----------------
The wall time of a project's ``make`` (``time.perf_counter`` around
``subprocess.run``), once with ``CC=<plain clang>`` and once with
``CC=<absolute path of .venv/bin/mirecc>``.  The plain clang is the one
mirecc itself drives (``mirecc --explain=json -fsyntax-only`` names it), or
``--cc PATH``.

Projects (Debian bookworm source packages, fetched once into
``DIR/src/<package>/`` with ``apt-get source`` by the helpers of
``real_projects.py``):

bzip2 (1.0.8)
    Its own Makefile: ``make -j1 CC=<cc> CFLAGS="-O2 -g -D_FILE_OFFSET_BITS=64"
    libbz2.a bzip2 bzip2recover`` (not ``all``, which runs the tests, so only
    compiles and links are timed).  Debian's Makefile also builds the shared
    library (``*.sho`` objects) that ``bzip2`` links against.
zlib
    ``./configure`` with ``CC`` and ``CFLAGS=-O2 -g`` in the environment (not
    timed), then ``make -j1`` (timed): static and shared library plus the
    test programs.

Modes of mirecc, each a separate series (``--modes``):

passthrough
    ``MIRECC_HEADS_DIR`` names an empty directory: no task heads, nothing
    reads the IR; mirecc starts Python, classifies the command, execs clang.
cold
    ``MIRECC_APPLY_LOOPS=1`` (the shipped loop-vectorize head decides and its
    factors are applied; ``--apply`` names another setting, e.g.
    ``MIRECC_APPLY_LOOP_NESTS``, and ``--opt -O3`` builds at -O3) with a fresh empty ``MIRECC_CACHE_DIR`` for every
    build: every translation unit misses the result cache.
warm
    ``MIRECC_APPLY_LOOPS=1`` with one ``MIRECC_CACHE_DIR`` filled by an
    unmeasured mirecc build (same path, same flags) before the rounds; the
    number of files each measured build adds to it is recorded (0 = fully
    warm).

Every other ``MIRECC_*`` variable (and CC, CFLAGS, MAKEFLAGS, ...) is removed
from the environment of all builds; both compilers of a mode get the same
environment, only ``CC`` differs.  The per-user pipeline server that mirecc
starts on demand (``mire serve``, socket under ``/tmp/mirecc-<uid>/`` or
``$XDG_RUNTIME_DIR``) is not part of the result cache: once started it stays
up between builds, so "cold" means a cold result cache, not a cold server.
Whether one answered before the first build is recorded in the JSON.

Protocol
--------
For each project and mode, ``--repeats N`` rounds (default 3).  A round
builds once with clang and once with mirecc, clang first in odd rounds and
mirecc first in even ones.  Every build starts from a fresh copy of the
pristine source tree at the same absolute path, ``DIR/compile_time/build/
<project>`` (``make clean`` is not trusted, and ``-g`` embeds that path, so
both compilers see identical command lines).  Copying and configuring are
not timed; only ``make`` is.  A failing ``make`` stops the benchmark with an
error naming project, mode and compiler and the last 20 lines of its output.

Reported per project and mode: median, min and max of clang's and of
mirecc's times and the ratio of the medians (mirecc / clang), as a markdown
table on stdout; every ``mirecc:`` warning or error line the builds printed
is listed under the table.

Also, unless ``--no-explain-file``: ``mirecc --explain -O2 -I. -c gzread.c
-o /dev/null`` in a fresh copy of the zlib tree configured with the plain
clang (``gzread.c`` needs the ``zconf.h`` that ``./configure`` writes), with
``MIRECC_APPLY_LOOPS=1`` and a fresh empty ``MIRECC_CACHE_DIR`` for every
run (so each run does the whole pipeline: IR, embeddings, head); one
unmeasured warm-up run, then 5 measured ones: median, min and max.

JSON (``--json PATH``, default ``DIR/compile_time.json``): every individual
time (wall, and user+sys CPU of make and its children), the round order, the
make command, and the machine: CPU model (``/proc/cpuinfo``), cores, load
average before and after, clang version, the mirecc commit (``git rev-parse
HEAD``) and whether the checkout had uncommitted changes.  Progress goes to
stderr, one line per build; make's output to ``DIR/logs/compile_time.log``.

``DIR`` is ``.work/`` in the repository unless ``--work`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402  (fetch helpers, work directory, machine facts)

ALL_PROJECTS = ("bzip2", "zlib")
ALL_MODES = ("passthrough", "cold", "warm")
BZIP2_CFLAGS = "-O2 -g -D_FILE_OFFSET_BITS=64"
ZLIB_CFLAGS = "-O2 -g"
#: the setting cold and warm builds turn on (``--apply``)
APPLY = {"name": "MIRECC_APPLY_LOOPS"}
EXPLAIN_RUNS = 5
TAIL_LINES = 20


class BuildFailed(Exception):
    """A timed or untimed step failed; the message says which and shows its output."""


def progress(message: str, end: str = "\n") -> None:
    print(message, end=end, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# projects

def configure_cmd(project: str) -> list[str] | None:
    """The untimed step before make, run in the fresh tree (None: none)."""
    return ["./configure"] if project == "zlib" else None


def make_cmd(project: str, cc: str) -> list[str]:
    """The timed command."""
    if project == "bzip2":
        return ["make", "-j1", f"CC={cc}", f"CFLAGS={BZIP2_CFLAGS}",
                "libbz2.a", "bzip2", "bzip2recover"]
    return ["make", "-j1"]


def project_env(project: str, cc: str, mode_env: dict[str, str]) -> dict[str, str]:
    """Environment of configure and make: neutral (no MIRECC_*, no CC/CFLAGS/
    MAKEFLAGS...), the mode's variables, and for zlib's configure CC/CFLAGS."""
    extra = dict(mode_env)
    if project == "zlib":
        extra.update(CC=cc, CFLAGS=ZLIB_CFLAGS)
    return rp.neutral_build_env(**extra)


# --------------------------------------------------------------------------
# running one build

@dataclass
class Build:
    wall_s: float
    cpu_s: float
    output: str


def run_step(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path,
             what: str) -> Build:
    """Run ``cmd`` (output to log_path too); raise BuildFailed with the last
    lines of its output when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(log_path, "a") as fh:
        fh.write(f"\n### {what}\n$ cd {cwd} && {' '.join(cmd)}\n{proc.stdout}"
                 f"[exit status {proc.returncode}, {wall:.3f} s]\n")
    if proc.returncode != 0:
        last = "\n".join(proc.stdout.splitlines()[-TAIL_LINES:])
        raise BuildFailed(f"{what}: `{' '.join(cmd)}` failed with exit status "
                          f"{proc.returncode} in {cwd}\n"
                          f"--- last {TAIL_LINES} lines of its output (whole log: "
                          f"{log_path}) ---\n{last}")
    return Build(wall, cpu, proc.stdout)


def fresh_tree(src: Path, dest: Path) -> None:
    """A pristine copy of ``src`` at ``dest`` (whatever was there is removed)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True)


def build_once(project: str, src: Path, tree: Path, cc: str, mode_env: dict[str, str],
               log_path: Path, what: str) -> Build:
    """Fresh tree, untimed configure, timed make."""
    fresh_tree(src, tree)
    env = project_env(project, cc, mode_env)
    configure = configure_cmd(project)
    if configure:
        run_step(configure, tree, env, log_path, f"{what} (configure)")
    return run_step(make_cmd(project, cc), tree, env, log_path, what)


def file_count(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def mirecc_messages(output: str) -> list[str]:
    """mirecc's own warning / error lines in a build's output."""
    return [ln.strip() for ln in output.splitlines() if ln.lstrip().startswith("mirecc:")]


# --------------------------------------------------------------------------
# one project in one mode

def stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "runs": [round(x, 4) for x in xs]}


@dataclass
class Series:
    project: str
    version: str | None
    mode: str
    make: str
    env: dict[str, str]                     # the mode's MIRECC_* variables
    times: dict[str, list[float]] = field(default_factory=lambda: {"clang": [], "mirecc": []})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"clang": [], "mirecc": []})
    order: list[list[str]] = field(default_factory=list)
    cache_files_added: list[int] = field(default_factory=list)   # warm mode
    messages: dict[str, int] = field(default_factory=dict)       # mirecc: lines -> count

    def to_dict(self) -> dict:
        clang, mirecc = stats(self.times["clang"]), stats(self.times["mirecc"])
        d = {"project": self.project, "version": self.version, "mode": self.mode,
             "make": self.make, "mode_env": self.env, "clang": clang, "mirecc": mirecc,
             "ratio_of_medians": mirecc["median"] / clang["median"],
             "cpu": {side: stats(v) for side, v in self.cpu.items()},
             "order": self.order, "mirecc_messages": self.messages}
        if self.mode == "warm":
            d["cache_files_added_per_warm_build"] = self.cache_files_added
        return d


def run_series(project: str, src: Path, mode: str, compilers: dict[str, str], repeats: int,
               work: Path, scratch: Path, log_path: Path) -> Series:
    tree = work / "compile_time" / "build" / project
    no_heads = Path(tempfile.mkdtemp(prefix="no-heads-", dir=scratch))
    warm_cache = scratch / f"warm-cache-{project}"
    series = Series(project, rp.source_version(src), mode,
                    " ".join(make_cmd(project, "<cc>")), {})

    def mode_env() -> dict[str, str]:
        if mode == "passthrough":
            return {"MIRECC_HEADS_DIR": str(no_heads)}
        if mode == "cold":
            cache = Path(tempfile.mkdtemp(prefix="cold-cache-", dir=scratch))
            return {APPLY["name"]: "1", "MIRECC_CACHE_DIR": str(cache)}
        return {APPLY["name"]: "1", "MIRECC_CACHE_DIR": str(warm_cache)}

    def note_messages(output: str) -> None:
        for line in mirecc_messages(output):
            series.messages[line] = series.messages.get(line, 0) + 1

    series.env = mode_env()
    if mode == "cold":
        series.env["MIRECC_CACHE_DIR"] = "<fresh empty directory per build>"
    if mode == "warm":
        if warm_cache.exists():
            shutil.rmtree(warm_cache)
        warm_cache.mkdir()
        what = f"{project} warm: filling the result cache with mirecc (not timed)"
        progress(f"{what} ... ", end="")
        fill = build_once(project, src, tree, compilers["mirecc"], mode_env(), log_path, what)
        note_messages(fill.output)
        progress(f"{fill.wall_s:.2f} s, {file_count(warm_cache)} cache files")

    for r in range(repeats):
        order = ["clang", "mirecc"] if r % 2 == 0 else ["mirecc", "clang"]
        series.order.append(order)
        for side in order:
            what = f"{project} {mode} round {r + 1}/{repeats}: {side}"
            progress(f"{what} ... ", end="")
            env = mode_env()
            cached_before = file_count(warm_cache) if mode == "warm" else 0
            try:
                b = build_once(project, src, tree, compilers[side], env, log_path, what)
            except BuildFailed:
                progress("FAILED")
                raise
            progress(f"{b.wall_s:.2f} s")
            series.times[side].append(b.wall_s)
            series.cpu[side].append(b.cpu_s)
            if side == "mirecc":
                note_messages(b.output)
                if mode == "warm":
                    series.cache_files_added.append(file_count(warm_cache) - cached_before)
            if mode == "cold":
                shutil.rmtree(env["MIRECC_CACHE_DIR"], ignore_errors=True)
    return series


# --------------------------------------------------------------------------
# mirecc --explain on one file

def explain_file(src: Path, mirecc: str, clang: str, work: Path, scratch: Path,
                 log_path: Path) -> dict:
    tree = work / "compile_time" / "build" / "zlib"
    fresh_tree(src, tree)
    # gzread.c needs the zconf.h that ./configure writes (unistd.h for close()).
    run_step(["./configure"], tree, project_env("zlib", clang, {}), log_path,
             "explain gzread.c: zlib ./configure with plain clang (not timed)")
    cmd = [mirecc, "--explain", "-O2", "-I.", "-c", "gzread.c", "-o", os.devnull]
    result, messages, first_output = {}, {}, ""
    # cold: a fresh empty result cache per run (the whole pipeline each time);
    # warm: one cache, filled by the warm-up run (what a rebuild sees)
    warm_cache = Path(tempfile.mkdtemp(prefix="explain-cache-", dir=scratch))
    for kind in ("cold", "warm"):
        times = []
        for i in range(EXPLAIN_RUNS + 1):
            what = (f"explain gzread.c {kind}: warm-up (not timed)" if i == 0
                    else f"explain gzread.c {kind}: run {i}/{EXPLAIN_RUNS}")
            cache = (warm_cache if kind == "warm"
                     else Path(tempfile.mkdtemp(prefix="explain-cache-", dir=scratch)))
            env = rp.neutral_build_env(MIRECC_APPLY_LOOPS="1", MIRECC_CACHE_DIR=str(cache))
            progress(f"{what}: mirecc ... ", end="")
            try:
                b = run_step(cmd, tree, env, log_path, what)
            except BuildFailed:
                progress("FAILED")
                raise
            if kind == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            progress(f"{b.wall_s:.2f} s")
            for line in mirecc_messages(b.output):
                messages[line] = messages.get(line, 0) + 1
            if i == 0 and kind == "cold":
                first_output = b.output
            elif i > 0:
                times.append(b.wall_s)
        result[kind] = stats(times)
    shutil.rmtree(warm_cache, ignore_errors=True)
    return {"command": " ".join(cmd), "cwd": "zlib source tree after ./configure",
            "mode_env": {"MIRECC_APPLY_LOOPS": "1",
                         "MIRECC_CACHE_DIR": "cold: a fresh empty directory per run; "
                                             "warm: one directory, filled by the warm-up"},
            "warmup_runs": 1, **result, "mirecc_messages": messages,
            "explain_output": first_output[:8000]}


# --------------------------------------------------------------------------
# report

def git_facts() -> dict:
    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=rp.REPO, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""
    return {"mirecc_commit": git("rev-parse", "HEAD") or "unknown",
            "mirecc_uncommitted_changes": bool(git("status", "--porcelain",
                                                   "--untracked-files=no"))}


def embedding_server_running() -> bool | None:
    try:
        from mirecc.tu.server import ping
        return ping() is not None
    except Exception:  # noqa: BLE001  (a fact for the JSON, never a reason to stop)
        return None


def table(results: list[Series], explain: dict | None) -> str:
    def triple(s: dict) -> str:
        return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"

    lines = ["| project | mode | runs | clang s: median (min-max) | "
             "mirecc s: median (min-max) | ratio of medians |",
             "|---|---|---:|---:|---:|---:|"]
    for s in results:
        d = s.to_dict()
        lines.append(f"| {s.project} | {s.mode} | {len(s.times['clang'])} | "
                     f"{triple(d['clang'])} | {triple(d['mirecc'])} | "
                     f"{d['ratio_of_medians']:.2f}x |")
    if explain:
        lines += ["", "| measurement | runs | median s | min s | max s |",
                  "|---|---:|---:|---:|---:|"]
        for kind in ("cold", "warm"):
            s = explain[kind]
            lines.append(f"| `mirecc --explain -O2 -I. -c gzread.c -o /dev/null` (zlib, "
                         f"MIRECC_APPLY_LOOPS=1, {kind} result cache) | {len(s['runs'])} | "
                         f"{s['median']:.3f} | {s['min']:.3f} | {s['max']:.3f} |")
    notes = []
    for s in results:
        if s.mode == "warm" and any(s.cache_files_added):
            notes.append(f"{s.project} warm: the measured mirecc builds added "
                         f"{s.cache_files_added} files to the filled cache (not fully warm)")
        for line, n in s.messages.items():
            notes.append(f"{s.project} {s.mode}: {n}x {line}")
    for line, n in (explain or {}).get("mirecc_messages", {}).items():
        notes.append(f"explain gzread.c (2 x (warm-up + {EXPLAIN_RUNS} runs)): {n}x {line}")
    if notes:
        lines += ["", "mirecc messages and notes:"] + [f"- {n}" for n in notes]
    return "\n".join(lines)


# --------------------------------------------------------------------------

def parse_list(text: str, allowed: tuple[str, ...], what: str,
               parser: argparse.ArgumentParser) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in items if x not in allowed]
    if unknown or not items:
        parser.error(f"unknown {what} {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", default=",".join(ALL_PROJECTS),
                        help=f"comma-separated subset of {','.join(ALL_PROJECTS)} "
                             "(default: all)")
    parser.add_argument("--modes", default=",".join(ALL_MODES),
                        help=f"comma-separated subset of {','.join(ALL_MODES)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds per project and mode (default 3)")
    parser.add_argument("--explain-file", action=argparse.BooleanOptionalAction, default=True,
                        help="time `mirecc --explain` on zlib's gzread.c (default: on)")
    parser.add_argument("--cc", default=None,
                        help="plain compiler (default: the clang mirecc drives)")
    parser.add_argument("--mirecc", type=Path, default=None,
                        help="mirecc to time (default: the one next to this Python)")
    parser.add_argument("--work", type=Path, default=rp.DEFAULT_WORK,
                        help=f"work directory (default: {rp.DEFAULT_WORK})")
    parser.add_argument("--json", type=Path, default=None,
                        help="write results here (default: WORK/compile_time.json)")
    parser.add_argument("--fetch-only", action="store_true",
                        help="only fetch the source packages, then stop")
    parser.add_argument("--opt", default="-O2", choices=("-O2", "-O3"),
                        help="the projects' optimisation level (default: -O2)")
    parser.add_argument("--apply", default="MIRECC_APPLY_LOOPS", metavar="VAR",
                        help="the setting turned on in cold and warm builds "
                             "(default: MIRECC_APPLY_LOOPS)")
    args = parser.parse_args(argv)
    global BZIP2_CFLAGS, ZLIB_CFLAGS
    BZIP2_CFLAGS = BZIP2_CFLAGS.replace("-O2", args.opt)
    ZLIB_CFLAGS = ZLIB_CFLAGS.replace("-O2", args.opt)
    APPLY["name"] = args.apply
    projects = parse_list(args.projects, ALL_PROJECTS, "project(s)", parser)
    modes = parse_list(args.modes, ALL_MODES, "mode(s)", parser)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    work = args.work.absolute()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    packages = list(projects)
    if args.explain_file and "zlib" not in packages:
        packages.append("zlib")
    try:
        sources = {p: rp.fetch_source(p, work / "src", logs=logs) for p in packages}
    except rp.BenchError as exc:
        print(f"compile_time: {exc}", file=sys.stderr)
        return 2
    if args.fetch_only:
        for p, tree in sources.items():
            progress(f"{p}: {tree}")
        return 0

    try:
        mirecc = args.mirecc.absolute() if args.mirecc else rp.find_mirecc()
        driven = rp.real_compiler(mirecc)
    except rp.BenchError as exc:
        print(f"compile_time: {exc}", file=sys.stderr)
        return 2
    clang = args.cc or driven
    if os.path.realpath(shutil.which(clang) or clang) != os.path.realpath(driven):
        progress(f"compile_time: note: --cc {clang} is not the compiler mirecc drives "
                 f"({driven}); the ratio then compares two different compilers")
    compilers = {"clang": clang, "mirecc": str(mirecc)}
    progress(f"clang: {clang}; mirecc: {mirecc}; work directory: {work}")

    machine = rp.machine_info(clang)
    machine.update(git_facts())
    machine["loadavg_before"] = os.getloadavg()
    machine["embedding_server_running_before"] = embedding_server_running()
    machine["PYTHONDONTWRITEBYTECODE"] = os.environ.get("PYTHONDONTWRITEBYTECODE")
    log_path = logs / "compile_time.log"
    log_path.unlink(missing_ok=True)
    (work / "compile_time").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=work / "compile_time"))

    results: list[Series] = []
    explain = None
    try:
        for project in projects:
            for mode in modes:
                results.append(run_series(project, sources[project], mode, compilers,
                                          args.repeats, work, scratch, log_path))
        if args.explain_file:
            explain = explain_file(sources["zlib"], str(mirecc), clang, work, scratch,
                                   log_path)
    except BuildFailed as exc:
        print(f"\ncompile_time: BUILD FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    machine["loadavg_after"] = os.getloadavg()

    print(f"mirecc compile time on {machine['cpu']} ({machine['cores']} cores), "
          f"{machine['clang']}; mirecc {machine['mirecc_commit'][:12]}"
          f"{' (+ uncommitted changes)' if machine['mirecc_uncommitted_changes'] else ''}; "
          f"load average {machine['loadavg_before'][0]:.2f} before, "
          f"{machine['loadavg_after'][0]:.2f} after\n")
    print(table(results, explain))
    out = (args.json or work / "compile_time.json").absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "compile_time", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine, "clang": clang, "mirecc": str(mirecc),
        "repeats": args.repeats, "results": [s.to_dict() for s in results],
        "explain_file": explain}, indent=2) + "\n")
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
