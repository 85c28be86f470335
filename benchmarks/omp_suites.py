"""Held-out OpenMP programs (Rodinia 3.1 OpenMP + NPB 3.0 OpenMP C) for an adaptive OpenMP runtime.

Every program here starts its parallel regions many times per process (time-step, iteration,
level or block-step loops), so a runtime that picks threads/schedule/chunk per region while the
program runs has something to adapt.  No benchmark code is kept in this repository: build()
extracts it at run time from the git snapshots named on the command line.

Sources (the `fetch` tool; pass the git dir it returns, or the folder holding .git):
  --rodinia  github:yuhc/gpu-rodinia                 commit 9c10d3ea16ddba2ba057cc3951a9efc4c2cc18a4
             -> /work/.mirror/yuhc+gpu-rodinia/repo
  --npb      github:benchmark-subsetting/NPB3.0-omp-C commit 5d565d916cad47bf09a2fa7432bf8e5fa95446ec
             -> /work/.mirror/benchmark-subsetting+NPB3.0-omp-C/repo/.git
  (that commit is used when the snapshot has it, else HEAD.)  The Rodinia snapshot's data/ is
  empty (and it lacks some large blobs, e.g. openmp/hotspot3D/output.out), so every input is
  generated deterministically in the work directory; only the needed folders are extracted.

  .venv/bin/python benchmarks/omp_suites.py \
      --rodinia /work/.mirror/yuhc+gpu-rodinia/repo \
      --npb /work/.mirror/benchmark-subsetting+NPB3.0-omp-C/repo [--cc clang-14] [--cflags "-O3"] \
      [--runs 3] [--only NAME...] [--count] [--work DIR --keep]

Measured here (2 cores, clang-14 -O3; whole-process wall time; median of 3 runs with
OMP_NUM_THREADS unset, then one run with OMP_NUM_THREADS=1 and the thread argument 1).
Another job was compiling on one of the two cores the whole time, so 2 threads rarely beat
1 and times moved by up to 2x between two sweeps (e.g. hotspot 1.00 s, then 0.52 s).
All 12: the 3 runs agree with each other and with the 1-thread run under the check.
invocations = parallel regions started per process, counted with --count (an OMPT tool);
"sites" = distinct region call sites seen (inlined copies count apart).

  program                2thr(s) 1thr(s) regions invocations/sites  check
  rodinia-hotspot          0.52    0.50      1      800/1    tolerance rel 1e-4 (output.out)
  rodinia-srad_v1          0.74    0.70      2      300/2    tolerance abs 1 per 8-bit pixel (image_out.pgm)
  rodinia-lud              1.16    1.17      2      254/2    exact stdout, no result values (see below)
  rodinia-nw               0.36    0.35      2      511/2    exact (result.txt traceback)
  rodinia-cfd              1.85    1.32      5    16001/9    tolerance rel 1e-4 (density, momentum, density_energy)
  rodinia-streamcluster    1.03    0.86      2     1450/2    tolerance rel 1e-4 (output.txt)
  rodinia-bfs              0.92    0.91      2     2046/2    exact (result.txt)
  npb-cg.A                 1.57    1.39     14      471/40   NPB verification + rel 1e-8 / abs 1e-10
  npb-mg.W                 0.25    0.20     10     1821/19   NPB verification + rel 1e-8 / abs 1e-10
  npb-ft.W                 0.34    0.32      7       39/10   NPB verification + rel 1e-8 / abs 1e-10
  npb-sp.W40               1.13    0.88      7      248/8    rel 1e-8 / abs 1e-10 on the printed RMS norms
  npb-bt.W40               0.95    0.83      9      210/15   rel 1e-8 / abs 1e-10 on the printed RMS norms

Inputs: hotspot 512x512 grid, 800 steps (generated temp/power files); srad_v1 502x458 generated
speckled PGM, 150 iterations, lambda 0.5; lud -s 2048 (generated internally); nw 4096, penalty
10; cfd: a generated 40x32-cell 2-D mesh (far field in x, periodic in y, a 4x4 solid block;
1264 elements, block_length=8) for its fixed 2000 iterations -- fine-grained regions (~80 us);
streamcluster 10 20 64 8192 8192 1000 (points generated from its fixed seed); bfs: a generated
256x768 grid graph with 15% of the edges dropped (1023 BFS levels); NPB CG class A, MG and FT
class W (official verification); SP and BT at the class-W grid (36^3, 24^3) with 40 time steps
through inputsp.data / inputbt.data (class U: NPB has no reference, the norms are compared).
lud: without -v it prints no result values, and -v adds a serial O(n^3) check (1.9 s at n=1024
vs 0.27 s of factorisation), so its check only compares stdout text.

Rodinia programs that take a thread count (hotspot, srad_v1, lud, streamcluster) call
omp_set_num_threads() with it (nw and bfs only print or ignore theirs); argv carries
os.cpu_count() there and Program.thread_arg says where (Program.command(threads) rewrites it).

Dropped (all candidates build with clang-14):
  rodinia kmeans         prints no result (the centre printout is commented out in this snapshot)
                         and sizes its per-thread partial sums by -n: a team larger than -n writes
                         out of bounds; 71 invocations at 60000x34 points.
  rodinia particlefilter seeds its generator with time(0): output differs run to run.
  rodinia pathfinder     BENCH_PRINT is hard-coded: it prints its whole rows x cols input, so the
                         run is serial printf; each region is a few microseconds.
  rodinia hotspot3D      one parallel region around the whole time loop (1 invocation), plus a
                         serial reference run.
  rodinia lavaMD         1 invocation; backprop: 4 invocations.
  rodinia srad_v2        prints no result unless built with -DOUTPUT (whole matrix); srad_v1 kept.
  npb LU                 SSOR pipelines its threads with spin-wait flags (omp flush): class W took
                         96 s at 2 threads on this loaded machine vs 9.5 s at 1; class S 0.08 s.
  npb IS, EP             2 invocations each (the iteration loop is inside one region).
  not tried: rodinia b+tree, heartwall, leukocyte, myocyte, mummergpu, nn (need data files or
  have few regions).

API: Program(name, suite, build, argv, check, check_kind, regions, invocations, cwd=".",
outputs=[], thread_arg=None, notes=""); Program.build(cc, cflags, work) -> binary;
Program.run(work, env=None, threads=None, timeout=600) -> (output, seconds);
Program.command(threads=None) -> argv; programs(rodinia, npb) -> list[Program];
compare(ref, out, rel, abs_, ignore) -> str|None; count_invocations(prog, work, cc) -> (n, sites).
"""
from __future__ import annotations

import argparse
import io
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

RODINIA_REPO = "yuhc/gpu-rodinia"
RODINIA_COMMIT = "9c10d3ea16ddba2ba057cc3951a9efc4c2cc18a4"
NPB_REPO = "benchmark-subsetting/NPB3.0-omp-C"
NPB_COMMIT = "5d565d916cad47bf09a2fa7432bf8e5fa95446ec"

#: default value of the thread-count argument some Rodinia programs take on their command line
#: (they call omp_set_num_threads() with it)
DEFAULT_THREADS = os.cpu_count() or 1


# --------------------------------------------------------------------------- data model
@dataclass
class Program:
    """One benchmark program.

    build(cc, cflags, work) extracts the sources from the mirror into work/src, writes the
    generated inputs into work, compiles every source with `cc *cflags -fopenmp`, links with
    `cc *cflags -fopenmp ... <own libs>` and returns the binary (work/<name>).
    argv[0] is relative to work; the process runs in work/cwd and the other arguments are
    relative to that directory.  Output = stdout + the files in `outputs` (relative to
    work/cwd), see `run()`.  check(reference_output, output) -> None when they agree, else a
    message.
    """

    name: str
    suite: str
    build: Callable[[str, list, Path], Path]
    argv: list
    check: Callable[[str, str], Optional[str]]
    check_kind: str
    regions: int  # `#pragma omp parallel` constructs in the program's sources (static count)
    invocations: int  # parallel regions started per process (measured with --count, OMPT)
    cwd: str = "."
    outputs: list = field(default_factory=list)
    thread_arg: Optional[int] = None  # index in argv of the program's own thread-count argument
    notes: str = ""

    def command(self, threads: Optional[int] = None) -> list:
        """argv, with the program's thread-count argument (if any) set to `threads`."""
        argv = list(self.argv)
        if threads is not None and self.thread_arg is not None:
            argv[self.thread_arg] = str(threads)
        return argv

    def run(self, work: Path, env: Optional[dict] = None, threads: Optional[int] = None,
            timeout: float = 600.0) -> tuple:
        """Run once; returns (output, wall seconds).  `threads` sets OMP_NUM_THREADS and the
        program's thread argument; None leaves OMP_NUM_THREADS unset (removed from env)."""
        work = Path(work).resolve()
        rundir = work / self.cwd
        for o in self.outputs:
            (rundir / o).unlink(missing_ok=True)
        e = dict(os.environ if env is None else env)
        if threads is None:
            e.pop("OMP_NUM_THREADS", None)
        else:
            e["OMP_NUM_THREADS"] = str(threads)
        argv = self.command(threads)
        argv[0] = str(work / argv[0])
        t0 = time.perf_counter()
        p = subprocess.run(argv, cwd=rundir, env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{self.name}: exit {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
        out = p.stdout.decode(errors="replace")
        for o in self.outputs:
            f = rundir / o
            body = f.read_text(errors="replace") if f.exists() else "<missing>\n"
            out += f"\n=== file {o} ===\n" + body
        return out, dt


# --------------------------------------------------------------------------- checks
_FILE_SEP = re.compile(r"^=== file (.*) ===$", re.M)


def _num(tok: str) -> Optional[float]:
    try:
        return float(tok)
    except ValueError:
        return None


def compare(ref: str, out: str, rel: float = 0.0, abs_: float = 0.0,
            ignore: Optional[str] = None) -> Optional[str]:
    """Token-wise comparison; numeric tokens agree when |a-b| <= max(rel*max(|a|,|b|), abs_)
    (rel = abs_ = 0: exact).  Lines matching the regex `ignore` are dropped first."""
    ig = re.compile(ignore) if ignore else None

    def lines(text):
        return [(i + 1, ln.split()) for i, ln in enumerate(text.splitlines())
                if ln.strip() and not (ig and ig.search(ln))]

    a, b = lines(ref), lines(out)
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} compared lines"
    for (la, ta), (lb, tb) in zip(a, b):
        if len(ta) != len(tb):
            return f"line {la}/{lb}: {' '.join(ta)[:120]!r} vs {' '.join(tb)[:120]!r}"
        for x, y in zip(ta, tb):
            fx, fy = _num(x), _num(y)
            if (fx is not None and math.isnan(fx)) or (fy is not None and math.isnan(fy)):
                return f"line {la}/{lb}: {x!r} vs {y!r} (nan)"
            if x == y:
                continue
            if fx is None or fy is None:
                return f"line {la}/{lb}: {x!r} vs {y!r}"
            d = abs(fx - fy)
            if d > max(rel * max(abs(fx), abs(fy)), abs_):
                return f"line {la}/{lb}: {x} vs {y} (diff {d:.3g}; rel {rel:g}, abs {abs_:g})"
    return None


def _checker(rel: float = 0.0, abs_: float = 0.0, ignore: Optional[str] = None):
    return lambda ref, out: compare(ref, out, rel, abs_, ignore)


_NPB_IGNORE = r"(?i)time|thread|mop/s|compile|^\s*(CC|CLINK|C_LIB|C_INC|CFLAGS|CLINKFLAGS|RAND|Version)\s*="


def _npb_check(ref: str, out: str) -> Optional[str]:
    """NPB: the program's own verification line must agree; the numbers it prints (residual
    norms, checksums, zeta, ...) must agree to the NPB epsilon (rel 1e-8, abs 1e-10 for values
    that are roundoff noise such as CG's ||r|| ~ 1e-15)."""
    def verif(text):
        m = re.search(r"Verification\s*=\s*(\S+)", text)
        return m.group(1) if m else None

    if verif(ref) != verif(out):
        return f"Verification {verif(ref)} vs {verif(out)}"

    def body(text):
        i = text.find("Benchmark Completed")
        return text[:i] if i >= 0 else text

    return compare(body(ref), body(out), 1e-8, 1e-10, _NPB_IGNORE)


# --------------------------------------------------------------------------- sources, building
def _git_dir(p: Path) -> Path:
    p = Path(p)
    return p / ".git" if (p / ".git").is_dir() else p


def _rev(gitdir: Path, commit: str) -> str:
    r = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "-e", commit + "^{commit}"],
                       capture_output=True)
    return commit if r.returncode == 0 else "HEAD"


def _extract(gitdir: Path, commit: str, paths: list, dest: Path) -> None:
    """git archive <commit> -- paths | untar into dest (only the needed folders: the Rodinia
    snapshot lacks some large blobs elsewhere)."""
    gitdir = _git_dir(gitdir)
    data = subprocess.run(["git", "--git-dir", str(gitdir), "archive", "--format=tar",
                           _rev(gitdir, commit), "--", *paths],
                          check=True, capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                continue
            if hasattr(tarfile, "data_filter"):
                tf.extract(m, dest, filter="data")
            else:
                tf.extract(m, dest)


def _sh(argv: list, cwd: Path) -> None:
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"failed ({p.returncode}): {' '.join(map(str, argv))}\n{p.stderr[-4000:]}")


def _compile_link(cc: str, cflags: list, sources: list, out: Path, src_dir: Path,
                  own_cflags: list = (), libs: list = ()) -> Path:
    """Compile each source to an object with cc (+ -fopenmp), then link with cc."""
    objdir = out.parent / (out.name + ".obj")
    objdir.mkdir(parents=True, exist_ok=True)
    objs = []
    for s in sources:
        o = objdir / (Path(s).name + ".o")
        _sh([cc, *cflags, "-fopenmp", *own_cflags, "-c", str(s), "-o", str(o)], src_dir)
        objs.append(str(o))
    _sh([cc, *cflags, "-fopenmp", *objs, "-o", str(out), *libs], src_dir)
    return out


# --------------------------------------------------------------------------- input generators
def _gen_hotspot(work: Path, n: int) -> None:
    rnd = random.Random(12345)
    temp, power = [], []
    for i in range(n):
        for j in range(n):
            temp.append("%.6f\n" % (323.0 + 20.0 * rnd.random()))
            hot = 1.0 if ((i // 64) + (j // 64)) % 3 == 0 else 0.1
            power.append("%.8f\n" % (0.004 * hot * rnd.random()))
    (work / f"temp_{n}").write_text("".join(temp))
    (work / f"power_{n}").write_text("".join(power))


def _gen_pgm(path: Path, rows: int, cols: int) -> None:
    rnd = random.Random(4242)
    lines = ["P2", f"{cols} {rows}", "255"]
    for i in range(rows):
        row = []
        for j in range(cols):
            v = 110 + 50 * math.sin(i / 23.0) * math.cos(j / 17.0)
            if (i - rows / 2) ** 2 + (j - cols / 2) ** 2 < (rows / 5) ** 2:
                v += 60
            v *= 0.6 + 0.8 * rnd.random()  # multiplicative speckle
            row.append(str(max(1, min(255, int(v)))))
        lines.append(" ".join(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _gen_cfd(path: Path, nx: int, ny: int, bw: int = 4, bh: int = 4, volume: float = 1.0) -> None:
    """Synthetic 2-D finite-volume mesh in euler3d's format (nel; per element: volume, then for
    4 faces: neighbour (1-based, 0 = wall, -1 = far field) and the outward normal*area).
    nx*ny unit cells, periodic in y, far field at x = 0 and x = nx, and a solid box in the
    middle whose faces are walls (its cells are not part of the mesh)."""
    bx0, bx1, by0, by1 = nx // 4, nx // 4 + bw, ny // 2 - bh // 2, ny // 2 - bh // 2 + bh
    solid = lambda x, y: bx0 <= x < bx1 and by0 <= y < by1  # noqa: E731
    ids = {}
    for y in range(ny):
        for x in range(nx):
            if not solid(x, y):
                ids[(x, y)] = len(ids) + 1
    out = [str(len(ids))]
    for y in range(ny):
        for x in range(nx):
            if solid(x, y):
                continue
            faces = []
            for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                xx, yy = x + dx, (y + dy) % ny
                if not 0 <= xx < nx:
                    nb = -1
                elif solid(xx, yy):
                    nb = 0
                else:
                    nb = ids[(xx, yy)]
                faces.append(f"{nb} {float(dx)} {float(dy)} 0.0")
            out.append(f"{volume} " + " ".join(faces))
    path.write_text("\n".join(out) + "\n")


def _gen_bfs(path: Path, w: int, h: int) -> None:
    """Rodinia graph format: w*h grid graph (4-neighbour) with ~15% of edges dropped
    deterministically; source 0 (a corner), edge costs 1..10."""
    rnd = random.Random(99)
    n = w * h
    keep = {}
    for y in range(h):
        for x in range(w):
            u = y * w + x
            if x + 1 < w:
                keep[(u, u + 1)] = rnd.random() > 0.15
            if y + 1 < h:
                keep[(u, u + w)] = rnd.random() > 0.15
    adj_start, edges = [], []
    for y in range(h):
        for x in range(w):
            u = y * w + x
            nbrs = []
            for v in (u - w if y > 0 else None, u - 1 if x > 0 else None,
                      u + 1 if x + 1 < w else None, u + w if y + 1 < h else None):
                if v is not None and keep[(min(u, v), max(u, v))]:
                    nbrs.append(v)
            adj_start.append(f"{len(edges)} {len(nbrs)}")
            edges.extend(f"{v} {rnd.randint(1, 10)}" for v in nbrs)
    path.write_text("\n".join([str(n), *adj_start, "", "0", "", str(len(edges)), *edges]) + "\n")


# --------------------------------------------------------------------------- program table
def _rodinia_programs(mirror: Path) -> list:
    T = str(DEFAULT_THREADS)
    progs = []

    def rod_build(paths, build_fn):
        def build(cc, cflags, work):
            work = Path(work).resolve()
            src = work / "src"
            _extract(mirror, RODINIA_COMMIT, paths, src)
            return build_fn(cc, list(cflags), work, src / "openmp")
        return build

    # ---- hotspot: 2-D thermal simulation, one `parallel for` per time step
    HS_N, HS_T = 512, 800

    def hotspot(cc, cflags, work, om):
        _gen_hotspot(work, HS_N)
        return _compile_link(cc, cflags, [om / "hotspot/hotspot_openmp.cpp"], work / "hotspot",
                             om / "hotspot", libs=["-lstdc++", "-lm"])
    progs.append(Program(
        "rodinia-hotspot", "rodinia", rod_build(["openmp/hotspot"], hotspot),
        ["hotspot", str(HS_N), str(HS_N), str(HS_T), T, f"temp_{HS_N}", f"power_{HS_N}", "output.out"],
        _checker(1e-4, 1e-6, r"(?i)time"), "tolerance rel 1e-4 (output.out, %g temperatures)",
        regions=1, invocations=HS_T, outputs=["output.out"], thread_arg=4))

    # ---- srad_v1: speckle-reducing anisotropic diffusion, 2 `parallel for` per iteration
    SR_IT = 150

    def srad(cc, cflags, work, om):
        _gen_pgm(work / "src/data/srad/image.pgm", 502, 458)
        d = om / "srad/srad_v1"
        return _compile_link(cc, cflags, [d / "main.c"], work / "srad", d, libs=["-lm"])
    progs.append(Program(
        "rodinia-srad_v1", "rodinia", rod_build(["openmp/srad/srad_v1"], srad),
        # binary path relative to work; it runs in src/openmp/srad/srad_v1 (reads ../../../data/srad/image.pgm)
        ["srad", str(SR_IT), "0.5", "502", "458", T],
        _checker(0, 1.0, r"(?i)time|%|^[0-9.]+ s$"), "tolerance abs 1 per 8-bit pixel (image_out.pgm)",
        regions=2, invocations=2 * SR_IT, cwd="src/openmp/srad/srad_v1", outputs=["image_out.pgm"],
        thread_arg=5))

    # ---- lud: blocked LU decomposition, 2 `parallel for` per 16-wide block step
    LUD_N = 2048

    def lud(cc, cflags, work, om):
        d = om / "lud/omp"
        return _compile_link(cc, cflags, [d / "lud.c", d / "lud_omp.c", om / "lud/common/common.c"],
                             work / "lud", d, own_cflags=["-I" + str(om / "lud/common")], libs=["-lm"])
    progs.append(Program(
        "rodinia-lud", "rodinia", rod_build(["openmp/lud"], lud),
        ["lud", "-s", str(LUD_N), "-n", T],
        _checker(0, 0, r"(?i)time"),
        "exact stdout, which holds no result values (lud prints results only with -v, whose serial "
        "O(n^3) check would dominate the run)",
        regions=2, invocations=2 * (LUD_N // 16 - 1), thread_arg=4))

    # ---- nw: Needleman-Wunsch, one `parallel for` per anti-diagonal of 16x16 blocks
    NW_N = 4096

    def nw(cc, cflags, work, om):
        return _compile_link(cc, cflags, [om / "nw/needle.cpp"], work / "needle", om / "nw",
                             libs=["-lstdc++"])
    progs.append(Program(
        "rodinia-nw", "rodinia", rod_build(["openmp/nw"], nw),
        ["needle", str(NW_N), "10", T],
        _checker(0, 0, r"(?i)time|threads"), "exact (result.txt traceback)",
        regions=2, invocations=2 * (NW_N // 16) - 1, outputs=["result.txt"], thread_arg=3))

    # ---- cfd euler3d_cpu: 2000 fixed iterations x (copy + step factor + 3 x (flux, time step))
    CFD_NX, CFD_NY = 40, 32

    def cfd(cc, cflags, work, om):
        _gen_cfd(work / "mesh.domn", CFD_NX, CFD_NY)
        return _compile_link(cc, cflags, [om / "cfd/euler3d_cpu.cpp"], work / "euler3d_cpu", om / "cfd",
                             own_cflags=["-Dblock_length=8"], libs=["-lstdc++", "-lm"])
    progs.append(Program(
        "rodinia-cfd", "rodinia", rod_build(["openmp/cfd"], cfd),
        ["euler3d_cpu", "mesh.domn"],
        _checker(1e-4, 1e-6, r"(?i)time"), "tolerance rel 1e-4 (density, momentum, density_energy files)",
        regions=5, invocations=2000 * 8 + 1, outputs=["density", "momentum", "density_energy"]))

    # ---- streamcluster: online clustering, parallel fors inside pgain() (many calls)
    def sc(cc, cflags, work, om):
        return _compile_link(cc, cflags, [om / "streamcluster/streamcluster_omp.cpp"], work / "sc_omp",
                             om / "streamcluster", libs=["-lstdc++", "-lm", "-lpthread"])
    progs.append(Program(
        "rodinia-streamcluster", "rodinia", rod_build(["openmp/streamcluster"], sc),
        ["sc_omp", "10", "20", "64", "8192", "8192", "1000", "none", "output.txt", T],
        _checker(1e-4, 1e-6, r"(?i)time|loops"), "tolerance rel 1e-4 (output.txt centres)",
        regions=2, invocations=1450, outputs=["output.txt"], thread_arg=9))

    # ---- bfs: level-synchronous BFS, 2 `parallel for` per level
    BFS_W, BFS_H = 256, 768

    def bfs(cc, cflags, work, om):
        _gen_bfs(work / "graph.txt", BFS_W, BFS_H)
        return _compile_link(cc, cflags, [om / "bfs/bfs.cpp"], work / "bfs", om / "bfs", libs=["-lstdc++"])
    progs.append(Program(
        "rodinia-bfs", "rodinia", rod_build(["openmp/bfs"], bfs),
        ["bfs", T, "graph.txt"],
        _checker(0, 0, r"(?i)time"), "exact (result.txt costs)",
        regions=2, invocations=2046, outputs=["result.txt"], thread_arg=1))
    return progs


def _npb_programs(mirror: Path) -> list:
    progs = []

    def npb(bench: str, cls: str, input_name: str = "", input_text: str = ""):
        B = bench.upper()

        def build(cc, cflags, work):
            work = Path(work).resolve()
            src = work / "src"
            _extract(mirror, NPB_COMMIT, ["common", "config", "sys", B], src)
            # setparams (a build-time tool) reads config/make.def and writes npbparams.h
            tmpl = (src / "config/make.def.template").read_text()
            tmpl = re.sub(r"(?m)^(CC|CLINK)\s*=.*$", lambda m: f"{m.group(1)} = {cc}", tmpl)
            tmpl = re.sub(r"(?m)^CFLAGS\s*=.*$", "CFLAGS = " + " ".join(cflags + ["-fopenmp"]), tmpl)
            (src / "config/make.def").write_text(tmpl)
            _sh([cc, "-o", "setparams", "setparams.c"], src / "sys")
            _sh(["../sys/setparams", bench, cls], src / B)
            srcs = [src / B / f"{bench}.c", src / "common/c_print_results.c",
                    src / "common/c_timers.c", src / "common/wtime.c"]
            if bench != "is":
                srcs.append(src / "common/c_randdp.c")
            if input_name:
                (work / input_name).write_text(input_text)
            return _compile_link(cc, cflags, srcs, work / f"{bench}.{cls}", src / B,
                                 own_cflags=["-I" + str(src / "common")], libs=["-lm"])
        return build

    progs.append(Program("npb-cg.A", "npb", npb("cg", "A"), ["cg.A"], _npb_check,
                         "NPB verification + tolerance rel 1e-8 / abs 1e-10", regions=14, invocations=471))
    progs.append(Program("npb-mg.W", "npb", npb("mg", "W"), ["mg.W"], _npb_check,
                         "NPB verification + tolerance rel 1e-8 / abs 1e-10", regions=10, invocations=1821))
    progs.append(Program("npb-ft.W", "npb", npb("ft", "W"), ["ft.W"], _npb_check,
                         "NPB verification + tolerance rel 1e-8 / abs 1e-10", regions=7, invocations=39))
    progs.append(Program("npb-sp.W40", "npb",
                         npb("sp", "W", "inputsp.data", "40\n0.0015\n36 36 36\n"), ["sp.W"], _npb_check,
                         "tolerance rel 1e-8 / abs 1e-10 on the printed RMS norms (class U: no NPB reference)",
                         regions=7, invocations=248,
                         notes="class W grid (36^3), 40 time steps via inputsp.data instead of 400"))
    progs.append(Program("npb-bt.W40", "npb",
                         npb("bt", "W", "inputbt.data", "40\n0.0008\n24 24 24\n"), ["bt.W"], _npb_check,
                         "tolerance rel 1e-8 / abs 1e-10 on the printed RMS norms (class U: no NPB reference)",
                         regions=9, invocations=210,
                         notes="class W grid (24^3), 40 time steps via inputbt.data instead of 200"))
    return progs


def programs(rodinia: Optional[Path], npb: Optional[Path]) -> list:
    """The benchmark programs whose suite mirror is given (a git dir or a checkout with .git)."""
    out = []
    if rodinia is not None:
        out += _rodinia_programs(Path(rodinia))
    if npb is not None:
        out += _npb_programs(Path(npb))
    return out


# --------------------------------------------------------------------------- OMPT counter
_OMPT_COUNTER = r"""
#include <omp-tools.h>
#include <stdio.h>
#include <stdlib.h>
static unsigned long n_par, n_sites;
static const void *sites[8192];
static void on_begin(ompt_data_t *td, const ompt_frame_t *f, ompt_data_t *pd,
                     unsigned int req, int flags, const void *ra) {
  (void)td; (void)f; (void)pd; (void)req; (void)flags;
  __atomic_fetch_add(&n_par, 1, __ATOMIC_RELAXED);
  for (unsigned long i = 0; i < n_sites; i++) if (sites[i] == ra) return;
  if (n_sites < 8192) sites[n_sites++] = ra;
}
static int init(ompt_function_lookup_t lookup, int dev, ompt_data_t *d) {
  (void)dev; (void)d;
  ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
  set(ompt_callback_parallel_begin, (ompt_callback_t)on_begin);
  return 1;
}
static void fini(ompt_data_t *d) {
  (void)d;
  const char *p = getenv("OMPT_COUNT_FILE");
  FILE *f = p ? fopen(p, "w") : stderr;
  if (f) { fprintf(f, "%lu %lu\n", n_par, n_sites); if (p) fclose(f); }
}
ompt_start_tool_result_t *ompt_start_tool(unsigned int v, const char *rv) {
  (void)v; (void)rv;
  static ompt_start_tool_result_t r = {init, fini, {0}};
  return &r;
}
"""


def count_invocations(prog: Program, work: Path, cc: str = "clang-14") -> tuple:
    """(parallel regions started, distinct call sites) for one run, via an OMPT tool
    (needs an OMPT-enabled libomp, as LLVM's is)."""
    work = Path(work).resolve()
    lib = work / "libompt_count.so"
    if not lib.exists():
        (work / "ompt_count.c").write_text(_OMPT_COUNTER)
        _sh([cc, "-O2", "-shared", "-fPIC", "-fopenmp", "ompt_count.c", "-o", str(lib)], work)
    res = work / "ompt_count.txt"
    res.unlink(missing_ok=True)
    env = dict(os.environ, OMP_TOOL="enabled", OMP_TOOL_LIBRARIES=str(lib), OMPT_COUNT_FILE=str(res))
    prog.run(work, env=env)
    n, s = res.read_text().split()
    return int(n), int(s)


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rodinia", type=Path, help=f"git dir of a {RODINIA_REPO} snapshot")
    ap.add_argument("--npb", type=Path, help=f"git dir of a {NPB_REPO} snapshot")
    ap.add_argument("--cc", default="clang-14")
    ap.add_argument("--cflags", default="-O3", help="space separated")
    ap.add_argument("--work", type=Path, help="work root (default: a temporary directory)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="program names (substring match)")
    ap.add_argument("--count", action="store_true", help="also count parallel-region invocations (OMPT)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args(argv)
    if a.rodinia is None and a.npb is None:
        ap.error("give --rodinia and/or --npb")
    progs = programs(a.rodinia, a.npb)
    if a.only:
        progs = [p for p in progs if any(s in p.name for s in a.only)]
    root = a.work.resolve() if a.work else Path(tempfile.mkdtemp(prefix="omp_suites."))
    root.mkdir(parents=True, exist_ok=True)
    cflags = a.cflags.split()
    rc = 0
    print(f"{'program':24} {'median(s)':>9} {'1thr(s)':>8} {'runs agree':>10} {'1thr agrees':>11}"
          f" {'regions':>7} {'invoc':>7}  check")
    for p in progs:
        work = root / p.name
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        try:
            p.build(a.cc, cflags, work)
            outs, times = [], []
            for _ in range(a.runs):
                o, t = p.run(work)
                outs.append(o)
                times.append(t)
            o1, t1 = p.run(work, threads=1)
            bad = [m for m in (p.check(outs[0], o) for o in outs[1:]) if m]
            bad1 = p.check(outs[0], o1)
            inv = f"{p.invocations}"
            if a.count:
                n, s = count_invocations(p, work, a.cc)
                inv = f"{n}/{s}"
            print(f"{p.name:24} {statistics.median(times):9.2f} {t1:8.2f} {'yes' if not bad else 'NO':>10}"
                  f" {'yes' if not bad1 else 'NO':>11} {p.regions:7} {inv:>7}  {p.check_kind}", flush=True)
            for m in bad + ([bad1] if bad1 else []):
                print(f"    mismatch: {m}")
                rc = 1
        except Exception as e:  # report and go on with the next program
            print(f"{p.name:24} FAILED: {e}", flush=True)
            rc = 1
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
    if not a.keep and not a.work:
        shutil.rmtree(root, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
