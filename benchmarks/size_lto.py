"""Code size at the LTO link: each held-out package's program built with
``-Oz -flto``, linked by clang and by mirecc (its link step: the machine
outliner in the LTO back end, the smaller output kept), with loadable
bytes, the link's wall time and the program's tests on both.

Usage::

    .venv/bin/python benchmarks/size_lto.py [--projects zlib,bzip2,lua5.4,sqlite3]
        [--cc clang-14] [--rounds 3] [--jobs 1] [--work .work/size-lto]
        [--md docs/results/code-size-lto.md]

Protocol: the sources (``apt-get source``, as ``benchmarks/code_size.py``)
are compiled with ``-Oz -flto -c`` by each side (mirecc passes an ``-flto``
compile to clang as it is: it writes bitcode, and no candidate can be
built for it), then the program is linked ``--rounds`` times per side,
the sides alternating (clang first in odd rounds), each link timed alone
(wall seconds; median, min-max).  The build column adds each side's
compile of the sources, one after another, timed once (mirecc's must give
clang's objects byte for byte), to its median link.  Sizes are deterministic: loadable bytes
(every allocated section) and ``.text`` of the linked program.  Tests:
zlib's ``minigzip`` and bzip2's ``bzip2`` compress and decompress a
sample (the round trip must give it back, the compressed bytes must be the
same on both sides); lua's ``benchmarks/lua_tests`` and sqlite3's shell
with ``benchmarks/sqlite_tests``, outputs compared between the sides.
mirecc runs with an empty cache of its own and its defaults, but
``--jobs`` as ``MIRECC_SIZE_JOBS`` (2: the candidate link beside the
user's, as under ``make -j2`` when a slot is free at the link).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402
from real_projects import BenchError, log  # noqa: E402

from mirecc.tu import stats  # noqa: E402
from mirecc.cli.bench import machine_description  # noqa: E402
from mirecc.taskapi.config import Config  # noqa: E402
from mirecc.util.elf import object_sizes  # noqa: E402  (loadable bytes, as shipped)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIRECC = str(Path(sys.executable).with_name("mirecc"))
FLAGS = ["-Oz", "-flto"]

ZLIB = ["adler32", "compress", "crc32", "deflate", "gzclose", "gzlib", "gzread", "gzwrite",
        "infback", "inffast", "inflate", "inftrees", "trees", "uncompr", "zutil"]
BZIP2 = ["blocksort", "huffman", "crctable", "randtable", "compress", "decompress", "bzlib",
         "bzip2"]
LUA = ["lapi", "lcode", "lctype", "ldebug", "ldo", "ldump", "lfunc", "lgc", "llex", "lmem",
       "lobject", "lopcodes", "lparser", "lstate", "lstring", "ltable", "ltm", "lundump",
       "lvm", "lzio", "lauxlib", "lbaselib", "lcorolib", "ldblib", "liolib", "lmathlib",
       "loadlib", "loslib", "lstrlib", "ltablib", "lutf8lib", "linit", "lua"]

# project -> (Debian package, sources relative to the tree, compile flags,
# link libraries, program name)
PROJECTS = {
    "zlib": ("zlib", [f"{n}.c" for n in ZLIB] + ["test/minigzip.c"], ["-I."], [], "minigzip"),
    "bzip2": ("bzip2", [f"{n}.c" for n in BZIP2], ["-D_FILE_OFFSET_BITS=64"], [], "bzip2"),
    "lua5.4": ("lua5.4", [f"src/{n}.c" for n in LUA],
               ["-std=gnu99", "-DLUA_COMPAT_5_3", "-DLUA_USE_LINUX"], ["-lm", "-ldl"], "lua"),
    "sqlite3": ("sqlite3", ["sqlite3.c", "shell.c"],
                ["-DSQLITE_ENABLE_FTS4", "-DSQLITE_ENABLE_FTS5", "-DSQLITE_ENABLE_MATH_FUNCTIONS",
                 "-DSQLITE_THREADSAFE=0"],
                ["-lm", "-ldl"], "sqlite3"),
}


def run(cmd: list, cwd: Path, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, **kw)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) \
            else proc.stderr
        raise BenchError(f"{' '.join(map(str, cmd[:4]))} ... failed: {err.strip()[-600:]}")
    return proc


def prepare(name: str, tree: Path, cc: str) -> None:
    """What the sources need before a compile (a generated header, the
    sqlite3 amalgamation)."""
    if name == "lua5.4":
        (tree / "src" / "lua5.4-deb-multiarch.h").write_text(
            f'#define DEB_HOST_MULTIARCH "{rp._multiarch()}"\n')
    elif name == "sqlite3" and not (tree / "sqlite3.c").exists():
        run(["./configure", "--disable-tcl", "--disable-shared", f"CC={cc}"], tree)
        run(["make", "sqlite3.c", "shell.c"], tree)
    elif name == "zlib" and not (tree / "zconf.h").exists():
        shutil.copy(tree / "zconf.h.in", tree / "zconf.h")


def compile_objects(name: str, tree: Path, cc: str, objects: Path, env) -> list[Path]:
    """Compile the sources one after another (the bitcode objects)."""
    _, sources, cflags, _, _ = PROJECTS[name]
    objects.mkdir(parents=True, exist_ok=True)
    out = []
    for source in sources:
        obj = objects / (Path(source).stem + ".o")
        run([cc, *FLAGS, *cflags, "-c", tree / source, "-o", obj], tree, env=env)
        out.append(obj)
    return out


def tests(name: str, program: Path, scratch: Path) -> str:
    """The program's tests; their output (compared between the sides)."""
    scratch.mkdir(parents=True, exist_ok=True)
    if name in ("zlib", "bzip2"):
        sample = ROOT / "benchmarks" / "lua_tests"
        data = b"".join(p.read_bytes() for p in sorted(sample.glob("*.lua"))) * 20
        packed = run([program, "-c"], scratch,
                     input=data).stdout
        back = run([program, "-d", "-c"], scratch, input=packed).stdout
        if back != data:
            raise BenchError(f"{name}: the round trip did not give the sample back")
        return f"round trip of {len(data)} bytes, compressed to {len(packed)}: " \
               f"{packed.hex()[:64]}...{len(packed)}"
    if name == "lua5.4":
        outputs = []
        for script in sorted((HERE / "lua_tests").glob("*.lua")):
            proc = run([program, script], scratch, text=True)
            if f"OK {script.stem}" not in proc.stdout:
                raise BenchError(f"lua {script.name}: no OK line")
            outputs.append(proc.stdout)
        return "".join(outputs)
    outputs = []
    options = set(run([program, ":memory:", "PRAGMA compile_options;"], scratch,
                      text=True).stdout.split())
    for script in sorted((HERE / "sqlite_tests").glob("*.sql")):
        first = script.read_text().splitlines()[0]
        needs = first.split(":", 1)[1].split() if first.startswith("-- requires:") else []
        if not set(needs) <= options:
            continue
        outputs.append(run([program, "-bail", ":memory:"], scratch, text=True,
                           input=script.read_text()).stdout)
    return "".join(outputs)


def project(name: str, work: Path, cc: str, rounds: int, jobs: int) -> dict:
    package, _, _, libs, program = PROJECTS[name]
    src = rp.fetch_source(package, work / "src", logs=work / "logs")
    tree = work / "build" / name
    if not tree.exists():
        shutil.copytree(src, tree, symlinks=True)
    prepare(name, tree, cc)
    cache = work / "cache" / name
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "MIRECC_CC": shutil.which(cc) or cc, "MIRECC_CACHE_DIR": str(cache),
           "MIRECC_SIZE_JOBS": str(jobs)}
    env.pop("MAKEFLAGS", None)
    sides = {"clang": ([cc], os.environ), "mirecc": ([MIRECC], env)}
    compile_s, objs = {}, {}
    for side, (cmd, side_env) in sides.items():
        log(f"{name} [{side}]: compiling with {' '.join(FLAGS)}")
        started = time.monotonic()
        objs[side] = compile_objects(name, tree, cmd[0], work / "objects" / name / side,
                                     side_env)
        compile_s[side] = time.monotonic() - started
    if any(a.read_bytes() != b.read_bytes() for a, b in zip(objs["clang"], objs["mirecc"])):
        raise BenchError(f"{name}: mirecc's -flto objects differ from clang's")
    objects = objs["clang"]
    times = {side: [] for side in sides}
    outs = {side: work / "out" / name / side / program for side in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for side in order:
            cmd, side_env = sides[side]
            outs[side].parent.mkdir(parents=True, exist_ok=True)
            outs[side].unlink(missing_ok=True)
            started = time.monotonic()
            run([*cmd, *FLAGS, *objects, *libs, "-o", outs[side]], tree, env=side_env)
            times[side].append(time.monotonic() - started)
        log(f"{name}: link round {r + 1}/{rounds}: clang {times['clang'][-1]:.2f} s, "
            f"mirecc {times['mirecc'][-1]:.2f} s")
    sizes = {side: object_sizes(str(outs[side])) for side in sides}
    results = {side: tests(name, outs[side], work / "scratch" / name / side) for side in sides}
    counted = stats.read(Config(cache_dir=str(cache)))
    return {"name": name, "version": rp.source_version(src), "sizes": sizes, "times": times,
            "compile_s": compile_s,
            "tests_same": results["clang"] == results["mirecc"],
            "improved": counted.get("links.code-size.improved", 0),
            "links": counted.get("links.code-size", 0) // max(rounds, 1)}


def change(a: int, b: int) -> str:
    return f"{100 * (b - a) / a:+.2f}%"


def report(rows: list[dict], cc: str, rounds: int, jobs: int, command: str) -> str:
    m = machine_description(shutil.which(cc) or cc)
    lines = [f"# Code size at the LTO link, written by `{command}`", "",
             f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; "
             f"{m.get('compiler', cc)}; `{' '.join(FLAGS)}`; mirecc's defaults "
             f"(the link step on), MIRECC_SIZE_JOBS={jobs}. Each link timed alone, {rounds} rounds, sides alternating; "
             f"median (min-max) wall seconds. Sizes are the linked program's.", "",
             "| program | loadable clang / mirecc | change | .text clang / mirecc | change "
             "| link s clang | link s mirecc | ratio | build s (compile + link) | tests |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    tot = [0, 0, 0, 0]
    for r in rows:
        (lc, tc), (lm, tm) = r["sizes"]["clang"], r["sizes"]["mirecc"]
        tot = [tot[0] + lc, tot[1] + lm, tot[2] + tc, tot[3] + tm]
        c, mm = r["times"]["clang"], r["times"]["mirecc"]
        build_c = r["compile_s"]["clang"] + statistics.median(c)
        build_m = r["compile_s"]["mirecc"] + statistics.median(mm)
        lines.append(
            f"| {r['name']} ({PROJECTS[r['name']][4]}) | {lc:,} / {lm:,} | {change(lc, lm)} | "
            f"{tc:,} / {tm:,} | {change(tc, tm)} | {rp.spread(c)} | {rp.spread(mm)} | "
            f"{statistics.median(mm) / statistics.median(c):.2f}x"
            f" | {build_c:.1f} / {build_m:.1f}: {build_m / build_c:.2f}x"
            f" | {'same output' if r['tests_same'] else 'OUTPUTS DIFFER'} |")
    lines.append(f"| **total** | {tot[0]:,} / {tot[1]:,} | {change(tot[0], tot[1])} | "
                 f"{tot[2]:,} / {tot[3]:,} | {change(tot[2], tot[3])} | | | | | |")
    lines += ["", "Versions: " + ", ".join(f"{r['name']} {r['version']}" for r in rows), ""]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--projects", default="zlib,bzip2,lua5.4,sqlite3")
    p.add_argument("--cc", default="clang-14")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=1,
                   help="MIRECC_SIZE_JOBS for mirecc (2: the candidate beside the user's link)")
    p.add_argument("--work", type=Path, default=ROOT / ".work" / "size-lto")
    p.add_argument("--md", type=Path)
    args = p.parse_args()
    rows = []
    for name in args.projects.split(","):
        try:
            rows.append(project(name, args.work.resolve(), args.cc, args.rounds, args.jobs))
        except BenchError as exc:
            log(f"{name}: FAILED: {exc}")
            return 1
    command = "benchmarks/size_lto.py " + " ".join(sys.argv[1:])
    rp.publish(report(rows, args.cc, args.rounds, args.jobs, command), args.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
