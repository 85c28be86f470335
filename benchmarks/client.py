"""What a compile costs through mirecc's compiled client, against clang,
against the Python driver alone (mirecc before the client) and against
ccache: per call, and whole builds.

    .venv/bin/python benchmarks/client.py calls [--rounds 100]
        [--md docs/results/client-calls.md]
    .venv/bin/python benchmarks/client.py builds [--rounds 5] [--work DIR]
        [--md docs/results/client-builds.md]

Sides:

- ``clang``: the clang mirecc drives (``/usr/bin/clang-14``);
- ``mirecc``: the installed ``mirecc`` (the compiled client; its compile
  server warm: started by an untimed warm-up call);
- ``python``: the Python driver alone (``.venv/libexec/mirecc/mirecc``,
  what ``mirecc`` was before the client), its pipeline server warm;
- ``ccache`` (calls only): ``ccache`` in front of the same clang, its own
  cache directory.

mirecc runs with its defaults (the shipped heads: code size at -Oz/-Os;
nothing applies at -O3), pinned to the same clang, each side with a cache
directory of its own (emptied where a row says "first").

**calls**: each row a kind of call, ``--rounds`` rounds; in each, every side
runs it once, the order of the sides rotating round by round; each call
timed alone (wall milliseconds from process start to exit).  ccache
recaches (its miss) except where a row says it hits.  Rows: a query
(``--version``), ``-E``, ``-O0 -c``, ``-O3 -c``, ``-O0 -c`` handed to the
compile server (which passes it to clang: the server's floor; forced with
``MIRECC_DEBUG_FAULT=none``, a fault hook that names no fault), ``-Oz -c`` of a new tiny
source (under code size's size floor: the object is too small to search;
a configure probe), a direct-mode hit (``-Oz -c`` of a source compiled
before: mirecc's kept object, ccache's direct hit, clang compiling), and a
team-store winner (``-Oz -c`` with an empty local cache and a shared-folder
team store CI filled: mirecc builds the verified winner beside the user's
compile instead of searching).

**builds**: whole builds, ``--rounds`` rounds, sides rotating: the bundled
programs (``benchmarks/programs``, each ``-O3 -c``), zlib's configure,
libyaml's configure (autoreconf'd once, untimed), zlib's ``make -j2`` at
-O2 (configure untimed) and bzip2's ``make -j2`` at -O2 (nothing reads the
IR at -O2 by default), and zlib's first build at -Oz (configure and make,
each side's cache empty: the code-size search paid).  Debian bookworm's
sources, fetched by ``real_projects.py``.  The machine, the protocol and the
noise (median, min-max) are written with the figures.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402  (fetch_source, machine_info, publish)

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CLANG = "/usr/bin/clang-14"
CLANGXX = "/usr/bin/clang++-14"
SIDES = {"clang": [CLANG], "mirecc": [str(BIN / "mirecc")],
         "python": [str(BIN.parent / "libexec" / "mirecc" / "mirecc")]}
PROBE = "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", {n}); return 0; }\n"


def base_env(tmp: Path, side: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIRECC_", "CCACHE_"))}
    env.update(MIRECC_CC=CLANG, MIRECC_CXX=CLANGXX, LC_ALL="C",
               MIRECC_CACHE_DIR=str(tmp / f"cache-{side}"),
               CCACHE_DIR=str(tmp / "ccache"), CCACHE_NOHASHDIR="1")
    return env


def timed(cmd, cwd, env) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    took = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed in {cwd}:\n"
                         f"{proc.stderr.decode(errors='replace')}")
    return took


def rotated(sides, r: int) -> list:
    """The sides in round ``r``'s order: each starts a round in turn."""
    order = list(sides)
    return order[r % len(order):] + order[:r % len(order)]


def progress(title: str, times: dict) -> dict:
    """A row's medians on stderr; the row's times."""
    print(title, " ".join(f"{s}={statistics.median(v):.2f}" for s, v in times.items()),
          file=sys.stderr)
    return times


def header(what: str, command: str) -> list[str]:
    """A results page's title and the machine that wrote it."""
    machine = rp.machine_info(CLANG)
    return [f"# The compiled client: {what}", "",
            f"Written by `benchmarks/client.py {command}`.  Machine: {machine['cpu']}, "
            f"{machine['cores']} cores, {machine['platform']}; {machine['clang']}.", ""]


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


# ------------------------------------------------------------------ calls

def calls(rounds: int, md: Path | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mirecc-client-calls-"))
    sides = dict(SIDES, ccache=["ccache", CLANG])
    if not shutil.which("ccache"):
        del sides["ccache"]
    work = tmp / "work"
    work.mkdir()
    src = (REPO / "benchmarks" / "programs" / "stencil2d.c").read_text()
    (work / "a.c").write_text(src)
    envs = {s: base_env(tmp, s) for s in sides}
    store = tmp / "team-store"
    # CI fills the team store (shared folder): a.c's verified object
    ci = dict(envs["mirecc"], MIRECC_STORE=str(store), MIRECC_STORE_WRITE="1",
              MIRECC_CACHE_DIR=str(tmp / "cache-ci"))
    timed(SIDES["mirecc"] + ["-Oz", "-c", "a.c", "-o", "ci.o"], work, ci)
    counter = iter(range(10 ** 9))

    def probe(side):       # a new source each call, as configure writes them
        name = f"p{next(counter)}.c"
        (work / name).write_text(PROBE.replace("{n}", str(len(name))))
        return ["-Oz", "-c", name, "-o", f"{name}.{side}.o"]

    def store_hit(side):   # an empty local cache each call: the object from the store
        return ["-Oz", "-c", "a.c", "-o", f"st.{side}.o"]

    # opts: "store": the team store named; "hit": ccache may hit (else it
    # recaches: its miss); "server": the call handed to the compile server,
    # which passes it to clang (MIRECC_DEBUG_FAULT names no fault: the
    # server's floor; the other sides run it plainly)
    rows = [
        ("query (--version)", lambda s: ["--version"], {}),
        ("-E", lambda s: ["-E", "a.c", "-o", "/dev/null"], {}),
        ("-O0 -c", lambda s: ["-O0", "-c", "a.c", "-o", f"o0.{s}.o"], {}),
        ("-O3 -c (defaults: nothing applies)", lambda s: ["-O3", "-c", "a.c", "-o", f"o3.{s}.o"],
         {}),
        ("-O0 -c handed to the compile server (its floor)",
         lambda s: ["-O0", "-c", "a.c", "-o", f"sv.{s}.o"], {"server": True}),
        ("-Oz -c, a new tiny source (under the size floor)", probe, {}),
        ("-Oz -c, direct-mode hit (ccache: a hit)",
         lambda s: ["-Oz", "-c", "a.c", "-o", f"hit.{s}.o"], {"hit": True}),
        ("-Oz -c, team-store winner (empty local cache; ccache: a hit)", store_hit,
         {"store": True, "hit": True}),
    ]
    results = {}
    for title, args, opts in rows:
        times = {s: [] for s in sides}
        # warm-up: servers started, bytecode read, caches filled where a row hits
        def env_for(s, r):
            env = dict(envs[s])
            if opts.get("store"):
                env.update(MIRECC_STORE=str(store),
                           MIRECC_CACHE_DIR=str(tmp / f"cache-{s}-st{r}"))
            if not opts.get("hit"):
                env["CCACHE_RECACHE"] = "1"
            if opts.get("server") and s == "mirecc":
                env["MIRECC_DEBUG_FAULT"] = "none"
            return env

        for s, cmd in sides.items():
            timed(cmd + args(s), work, env_for(s, "warm"))
        for r in range(rounds):
            for s in rotated(sides, r):
                times[s].append(timed(sides[s] + args(s), work, env_for(s, r)))
        results[title] = progress(title, times)
    lines = header("per call", f"calls --rounds {rounds}") + [
             "Wall milliseconds per call, median (min-max) of "
             f"{rounds} rounds, the sides' order rotating each round.  `mirecc`: the compiled "
             "client (its compile server warm); `python`: the Python driver alone (mirecc "
             "before the client); `ccache`: ccache in front of the same clang.  Source: "
             "`benchmarks/programs/stencil2d.c` (the probe row: a new three-line source each "
             "call).", "",
             "| call | " + " | ".join(sides) + " | mirecc - clang |",
             "|---|" + "---|" * (len(sides) + 1)]
    for title, times in results.items():
        delta = statistics.median(times["mirecc"]) - statistics.median(times["clang"])
        lines.append(f"| {title} | " + " | ".join(fmt(times[s]) for s in sides)
                     + f" | {delta:+.1f} ms |")
    lines.append("")
    rp.publish("\n".join(lines), md)
    shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ builds

def builds(rounds: int, work_root: Path, md: Path | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mirecc-client-builds-"))
    src_root = work_root / "src"
    zlib = rp.fetch_source("zlib", src_root)
    bzip2 = rp.fetch_source("bzip2", src_root)
    yaml = rp.fetch_source("libyaml", src_root)
    yaml_ready = tmp / "libyaml-ready"
    shutil.copytree(yaml, yaml_ready, symlinks=True)
    subprocess.run(["autoreconf", "-fi"], cwd=yaml_ready, check=True, capture_output=True)
    programs = sorted((REPO / "benchmarks" / "programs").glob("*.c"))

    def fresh(src: Path, side: str) -> Path:
        tree = tmp / f"tree-{side}"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(src, tree, symlinks=True)
        return tree

    def programs_o3(side, env):
        out = tmp / f"programs-{side}"
        out.mkdir(exist_ok=True)
        t = 0.0
        for p in programs:
            flags = ["-fopenmp"] if "omp" in p.name else []
            t += timed(SIDES[side] + ["-O3", *flags, "-c", str(p), "-o", str(out / (p.stem + ".o"))],
                       out, env)
        return t / 1000

    def configure(src, cflags="-O2 -g"):
        def run(side, env):
            tree = fresh(src, side)
            return timed(["./configure"], tree, dict(env, CC=" ".join(SIDES[side]),
                                                     CFLAGS=cflags)) / 1000
        return run

    def zlib_make(side, env):
        tree = fresh(zlib, side)
        e = dict(env, CC=" ".join(SIDES[side]), CFLAGS="-O2 -g")
        timed(["./configure"], tree, e)
        return timed(["make", "-j2"], tree, e) / 1000

    def bzip2_make(side, env):
        tree = fresh(bzip2, side)
        return timed(["make", "-j2", f"CC={' '.join(SIDES[side])}",
                      "CFLAGS=-O2 -g -D_FILE_OFFSET_BITS=64", "libbz2.a", "bzip2",
                      "bzip2recover"], tree, env) / 1000

    def zlib_oz_first(side, env):
        tree = fresh(zlib, side)
        cache = tmp / f"cold-{side}-{time.monotonic_ns()}"
        e = dict(env, CC=" ".join(SIDES[side]), CFLAGS="-Oz -g", MIRECC_CACHE_DIR=str(cache))
        t = timed(["./configure"], tree, e)
        return (t + timed(["make", "-j2"], tree, e)) / 1000

    rows = [("bundled programs, -O3 -c each (defaults)", programs_o3, rounds),
            ("zlib ./configure", configure(zlib), rounds),
            ("libyaml ./configure (autotools)", configure(yaml_ready), rounds),
            ("zlib make -j2, -O2 (configure untimed)", zlib_make, rounds),
            ("bzip2 make -j2, -O2", bzip2_make, rounds),
            ("zlib first build at -Oz (configure + make, empty cache)", zlib_oz_first,
             max(2, rounds // 2))]
    envs = {s: base_env(tmp, s) for s in SIDES}
    for s in SIDES:     # servers up, bytecode read
        (tmp / "w.c").write_text("int w;\n")
        timed(SIDES[s] + ["-Oz", "-c", "w.c", "-o", f"w-{s}.o"], tmp, envs[s])
    results = {}
    for title, fn, n in rows:
        times = {s: [] for s in SIDES}
        for r in range(n):
            for s in rotated(SIDES, r):
                times[s].append(fn(s, envs[s]))
        results[title] = progress(title, times)
    lines = header("whole builds", f"builds --rounds {rounds}") + [
             "Wall seconds per build, median (min-max); the sides' order rotating each round "
             "(the -Oz row: half the rounds, at least 2).  `mirecc`: the compiled client, its "
             "compile server warm; `python`: the Python driver alone (mirecc before the "
             "client).  Defaults, the shipped heads.", "",
             "| build | clang | mirecc | python | mirecc / clang | python / clang |",
             "|---|---|---|---|---|---|"]
    for title, times in results.items():
        c = statistics.median(times["clang"])
        lines.append(f"| {title} | {fmt(times['clang'])} | {fmt(times['mirecc'])} | "
                     f"{fmt(times['python'])} | {statistics.median(times['mirecc']) / c:.3f}x | "
                     f"{statistics.median(times['python']) / c:.3f}x |")
    lines.append("")
    rp.publish("\n".join(lines), md)
    shutil.rmtree(tmp, ignore_errors=True)


def compile_bytecode() -> None:
    """mirecc's modules compiled to bytecode first: with
    ``PYTHONDONTWRITEBYTECODE=1`` (this machine's environment) a module
    edited since set-up would be compiled from source on every ``python``
    side call."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "mirecc")],
                   check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("calls", help="per call")
    c.add_argument("--rounds", type=int, default=100)
    c.add_argument("--md", type=Path)
    b = sub.add_parser("builds", help="whole builds")
    b.add_argument("--rounds", type=int, default=5)
    b.add_argument("--work", type=Path, default=REPO / ".work")
    b.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    compile_bytecode()
    if args.what == "calls":
        calls(args.rounds, args.md)
    else:
        builds(args.rounds, args.work.absolute(), args.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
