#!/usr/bin/env python3
"""Thread-block-shape labels for the 21 PolyBench-ACC CUDA programs, timed on a GPU.

    python3 mirecc/tasks/cuda_block/offline/cuda_labels.py --src .cudasrc --out "$OUT" --deadline-s 420

Self-contained: standard library only (no mirecc, no numpy), for a lent GPU
machine with nvcc (``--nvcc``, else ``$MIRECC_NVCC``, ``nvcc`` on PATH,
``/usr/local/cuda/bin/nvcc``).  ``--src`` is a copy of
``shared/datasets/polybench-acc/CUDA``.  Everything, compiles included, ends
by ``--deadline-s`` wall-clock seconds; results are flushed after every run,
so what is done by then is kept.

Shapes
------
The MIREncoder paper's 20 shapes, written there (Y, X): (8,8) (16,16)
(24,24) (32,32) and (1,64) (1,128) ... (1,1024) in steps of 64.  (1,N) is a
1-D block of N threads along x (consecutive in memory): it is applied as
``DIM_THREAD_BLOCK[_KERNEL_<n>]_X = N``, ``_Y = 1``; (8,8) as X=8, Y=8.
Each program's own shape is a 21st candidate, the baseline
(``is_source_shape``).  A shape sets only the macros that
``mirecc-nvcc`` may set (``mirecc/tasks/cuda_block/launches.py``: the grid of every launch
follows that macro on that axis; ``TUNABLE`` below, checked against
mirecc's analysis by ``tests/tasks/cuda_block/test_labels.py``); the others keep the
source's value (e.g. atax's and mvt's Y stays 8: their grids' y is 1).  All
kernels of a program get the same shape (per-kernel macros each get it).
Shapes whose applied macros give the same values as an earlier one are not
run twice; a shape giving a block of more than 1024 threads is recorded as
skipped.  gramschmidt, lu and adi have no settable macro: their source shape
is timed (a baseline), nothing else.

How a shape is applied (``--shape-mode``)
-----------------------------------------
``runtime`` (default): one build per (program, size): the settable
``#define DIM_THREAD_BLOCK..`` lines (in the program's .cuh) become
``(mirecc_dim[i])``, a host variable, and the program's ``main`` becomes a
function that a small driver calls once per run, in one process, with the
shape of that run.  None of these macros is used in device code (nvcc
would reject a host variable there), so the kernels' code is the same as
with the shape written in the define; the host computes the grid at run
time instead of compile time.  ``define``: one build per (program, size,
shape) with the define lines rewritten to the shape's numbers (what
mirecc-nvcc does), one process per run (far slower: use with
``--limit-programs`` to cross-check).

In both modes the ``#ifdef RUN_ON_CPU`` block (CPU reference and compare)
becomes ``if (mirecc_run_cpu)``: timing runs skip it; check runs do it.

Sizes
-----
Three per program, small first (``SIZES``; ``--sizes`` overrides for all):
PolyBench-ACC's classes MINI, SMALL, STANDARD (``-D<CLASS>_DATASET``),
except where the CPU reference of a check run would take more than ~2.5 s
(measured on a 2-core VM): correlation MINI/N768/SMALL, covariance and
gramschmidt N256/MINI/N768, 2mm and syr2k MINI/SMALL/N768, fdtd-2d
N256/MINI/SMALL, where N256/N768 set every size macro of the header to 256
/ 768 (``CUSTOM_SIZES``; written into the header copy, before its "user
defines the size" guard: on nvcc's command line ``-DN=..`` would also hit
cuda.h).  A timing run (host init, copies, GPU part) then takes at most
~0.3 s of host time.

Protocol
--------
1. Compile everything in parallel (``--jobs``, default os.cpu_count();
   ``nvcc -O3 -arch=sm_90 -DcudaThreadSynchronize=cudaDeviceSynchronize
   -DPOLYBENCH_NO_FLUSH_CACHE -w -D<CLASS>_DATASET``: the flush-cache pass,
   a CPU-cache flush before the timer starts, only costs time here; the
   -arch falls back to ``native`` then sm_80 if nvcc refuses sm_90;
   failures recorded).
2. Per size class, in order: timing round 0 for every program, a check
   pass, timing rounds 1 .. ``--repeats``-1.  A timing round is one process
   per program, one GPU program at a time: a warm-up run with the source
   shape (phase ``warmup``), then every shape once (order rotated per
   round); no CPU reference.  The check pass runs every shape once with the
   CPU reference and the program's own compare, ``--check-chunk`` shapes
   per process, ``--check-workers`` processes at a time (their times are
   not used).  A shape is wrong when its
   mismatch count differs from the source shape's, or when a CUDA error
   was seen in any of its runs.
3. The measure is the program's own GPU timer (``GPU Time in seconds:`` /
   ``%0.6f``: wall time around the kernels and their synchronisation).
4. A run gets ``--call-timeout`` seconds (killed, status ``timeout``; a
   crash is ``crash``); at the deadline the running process is killed
   (``deadline``) and no more is started.  A process holding a CUDA context
   (``keepalive``) stays open during the runs, so that the driver is not
   torn down and set up for every process (no GPU setting is changed).

Output (``--out``): ``cuda_labels.jsonl`` (one line per run, also the
skipped shapes), ``cuda_machine.json`` (machine, nvcc, flags, plan, compile
results), ``cuda_summary.txt`` (per program and size: best correct shape,
its median, the source's median, speedup), ``cuda_log.txt``.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import itertools
import json
import os
import platform
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

#: program -> (its .cu under --src, the block-shape macros a shape may set).
#: From mirecc/driver/nvcc.py's analysis (_settable: every launch's grid follows the
#: macro on its own axis); tests/tasks/cuda_block/test_labels.py checks it still agrees.
TUNABLE = {
    "correlation": ("datamining/correlation/correlation.cu",
                    ["DIM_THREAD_BLOCK_KERNEL_1_X", "DIM_THREAD_BLOCK_KERNEL_2_X",
                     "DIM_THREAD_BLOCK_KERNEL_3_X", "DIM_THREAD_BLOCK_KERNEL_3_Y",
                     "DIM_THREAD_BLOCK_KERNEL_4_X"]),
    "covariance": ("datamining/covariance/covariance.cu",
                   ["DIM_THREAD_BLOCK_KERNEL_1_X", "DIM_THREAD_BLOCK_KERNEL_3_X"]),
    "2mm": ("linear-algebra/kernels/2mm/2mm.cu", ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "3mm": ("linear-algebra/kernels/3mm/3mm.cu", ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "atax": ("linear-algebra/kernels/atax/atax.cu", ["DIM_THREAD_BLOCK_X"]),
    "bicg": ("linear-algebra/kernels/bicg/bicg.cu", ["DIM_THREAD_BLOCK_X"]),
    "doitgen": ("linear-algebra/kernels/doitgen/doitgen.cu",
                ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "gemm": ("linear-algebra/kernels/gemm/gemm.cu", ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "gemver": ("linear-algebra/kernels/gemver/gemver.cu",
               ["DIM_THREAD_BLOCK_KERNEL_1_X", "DIM_THREAD_BLOCK_KERNEL_1_Y",
                "DIM_THREAD_BLOCK_KERNEL_2_X", "DIM_THREAD_BLOCK_KERNEL_3_X"]),
    "gesummv": ("linear-algebra/kernels/gesummv/gesummv.cu", ["DIM_THREAD_BLOCK_X"]),
    "mvt": ("linear-algebra/kernels/mvt/mvt.cu", ["DIM_THREAD_BLOCK_X"]),
    "syr2k": ("linear-algebra/kernels/syr2k/syr2k.cu",
              ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "syrk": ("linear-algebra/kernels/syrk/syrk.cu", ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "gramschmidt": ("linear-algebra/solvers/gramschmidt/gramschmidt.cu", []),
    "lu": ("linear-algebra/solvers/lu/lu.cu", []),
    "adi": ("stencils/adi/adi.cu", []),
    "convolution-2d": ("stencils/convolution-2d/2DConvolution.cu",
                       ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "convolution-3d": ("stencils/convolution-3d/3DConvolution.cu",
                       ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "fdtd-2d": ("stencils/fdtd-2d/fdtd2d.cu", ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
    "jacobi-1d-imper": ("stencils/jacobi-1d-imper/jacobi1D.cu", ["DIM_THREAD_BLOCK_X"]),
    "jacobi-2d-imper": ("stencils/jacobi-2d-imper/jacobi2D.cu",
                        ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]),
}

#: program -> its three sizes, small first: PolyBench-ACC's classes
#: (-D<CLASS>_DATASET) or one of CUSTOM_SIZES (its -D size macros).  Chosen
#: from the CPU reference's time on a 2-core VM (check runs): MINI / SMALL /
#: STANDARD where that is at most ~2.5 s; smaller ones where it is not.
DEFAULT_SIZES = ("MINI", "SMALL", "STANDARD")
SIZES = {name: DEFAULT_SIZES for name in TUNABLE}
SIZES.update({
    "correlation": ("MINI", "N768", "SMALL"),       # STANDARD: 15 s of CPU reference
    "covariance": ("N256", "MINI", "N768"),         # SMALL: 3.6 s, STANDARD: > 40 s
    "2mm": ("MINI", "SMALL", "N768"),               # STANDARD: 2.5 s
    "syr2k": ("MINI", "SMALL", "N768"),             # STANDARD: 2.5 s
    "gramschmidt": ("N256", "MINI", "N768"),        # SMALL: 15 s
    "fdtd-2d": ("N256", "MINI", "SMALL"),           # STANDARD: 6.7 s
})
#: sizes that are no PolyBench-ACC class: (program, name) -> the size macros
#: (all those of the header's "user defines the size" guard)
CUSTOM_SIZES = {
    ("correlation", "N768"): "M=768 N=768",
    ("covariance", "N256"): "M=256 N=256",
    ("covariance", "N768"): "M=768 N=768",
    ("2mm", "N768"): "NI=768 NJ=768 NK=768 NL=768",
    ("syr2k", "N768"): "NI=768 NJ=768",
    ("gramschmidt", "N256"): "NI=256 NJ=256",
    ("gramschmidt", "N768"): "NI=768 NJ=768",
    ("fdtd-2d", "N256"): "TMAX=500 NX=256 NY=256",
}
CLASSES = ("MINI", "SMALL", "STANDARD", "LARGE", "EXTRALARGE")


def size_defines(program: str, size: str) -> list[str]:
    """``size`` of ``program`` as defines: ``-D<CLASS>_DATASET`` for a class,
    else the custom size's macros, which :func:`prepare_build` writes into
    the program's header (on nvcc's command line, ``N`` or ``M`` would also
    reach cuda.h's parameter names)."""
    custom = CUSTOM_SIZES.get((program, size))
    if custom is not None:
        return [f"-D{d}" for d in custom.split()]
    if size not in CLASSES:
        raise ValueError(f"{program}: unknown size {size!r} (classes: {', '.join(CLASSES)})")
    return [f"-D{size}_DATASET"]


_SIZE_GUARD = re.compile(r"^[ \t]*#[ \t]*if[ \t]+!defined\((?!\w*_DATASET)", re.M)


def set_custom_size(header: str, defines: list[str]) -> str:
    """``header`` with ``#define NAME VALUE`` for each ``-DNAME=VALUE`` put just
    before its "user defines the size" guard (``# if !defined(NI) && ..``)."""
    m = _SIZE_GUARD.search(header)
    if m is None:
        raise ValueError("no '# if !defined(<size macro>)' guard")
    lines = "".join(f"#define {d[2:].replace('=', ' ', 1)} /* cuda_labels.py size */\n"
                    for d in defines)
    return header[:m.start()] + lines + header[m.start():]


#: programs whose CPU reference is slow: their check runs start first
HEAVY_CHECKS = ["covariance", "correlation", "gramschmidt", "fdtd-2d", "syr2k", "2mm", "syrk",
                "lu", "convolution-2d", "convolution-3d"]
MAX_THREADS = 1024
UTILITIES = "utilities"
NVCC_FLAGS = ["-O3", "-DcudaThreadSynchronize=cudaDeviceSynchronize",  # COMPAT_FLAG
              "-DPOLYBENCH_NO_FLUSH_CACHE", "-w"]
OUT_FILES = ("cuda_labels.jsonl", "cuda_machine.json", "cuda_summary.txt", "cuda_log.txt")


def paper_shapes() -> list[tuple[int, int]]:
    """The paper's 20 shapes as (x, y): (Y, X) = (8,8) .. (32,32), then
    (1,64) .. (1,1024), i.e. 1-D blocks of 64 .. 1024 threads along x."""
    return [(n, n) for n in (8, 16, 24, 32)] + [(n, 1) for n in range(64, 1025, 64)]


# ------------------------------------------------------------------ sources

_DEFINE = re.compile(r"^([ \t]*#[ \t]*define[ \t]+)(DIM_THREAD_BLOCK(?:_KERNEL_\d+)?_[XY])"
                     r"([ \t]+)([^ \t\r/]+)(.*)$")


def block_defines(text: str) -> dict[str, int]:
    """``#define DIM_THREAD_BLOCK[_KERNEL_<n>]_X/Y <int>`` lines: macro -> value."""
    out = {}
    for line in text.split("\n"):
        m = _DEFINE.match(line)
        if m:
            value = m[4].strip("()")
            out[m[2]] = int(value) if value.isdigit() else None
    return out


def rewrite_block_defines(text: str, values: dict[str, str]) -> str:
    """``text`` with the value of each macro of ``values`` replaced (each must
    be defined exactly once); line count and everything else unchanged."""
    lines, seen = text.split("\n"), {}
    for i, line in enumerate(lines):
        m = _DEFINE.match(line)
        if m and m[2] in values:
            seen[m[2]] = seen.get(m[2], 0) + 1
            lines[i] = f"{m[1]}{m[2]}{m[3]}{values[m[2]]}{m[5]}"
    bad = [k for k in values if seen.get(k) != 1]
    if bad:
        raise ValueError(f"not defined exactly once: {', '.join(bad)}")
    return "\n".join(lines)


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)")
_MAIN = re.compile(r"^([ \t]*int[ \t]+)main([ \t]*\()", re.M)

DRIVER = r"""
/* ---- cuda_labels.py driver: one run of the program per argument
   "<id>:<run cpu>:<dim0>,<dim1>,..." ---- */
#include <cuda_runtime.h>
#include <time.h>
static double mirecc_now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv)
{
  int j;
  double t0;
  for (j = 1; j < argc; j++) {
    const char *p = strchr(argv[j], ':');
    int id = atoi(argv[j]), n = 0, rc;
    char *args[2];
    cudaError_t sync, last, again;
    mirecc_run_cpu = p ? atoi(p + 1) : 1;
    p = p ? strchr(p + 1, ':') : NULL;
    while (p && n < MIRECC_MAX_DIMS) {
      mirecc_dim[n++] = atoi(p + 1);
      p = strchr(p + 1, ',');
    }
    args[0] = argv[0];
    args[1] = NULL;
    cudaGetLastError();
    printf("@@MIRECC-BEGIN %d\n", id);
    fflush(stdout);
    t0 = mirecc_now();
    rc = mirecc_program_main(1, args);
    sync = cudaDeviceSynchronize();
    last = cudaGetLastError();
    again = cudaDeviceSynchronize();
    /* a context that still fails is unusable: stop; the caller restarts */
    int sticky = again != cudaSuccess && again != cudaErrorNoDevice
                 && again != cudaErrorInsufficientDriver;
    printf("\n@@MIRECC-END %d %d %s %s %d %.6f\n", id, rc, cudaGetErrorName(sync),
           cudaGetErrorName(last), sticky, mirecc_now() - t0);
    fflush(stdout);
    if (sticky)
      return 3;
  }
  return 0;
}
"""

PRELUDE = ("#define MIRECC_MAX_DIMS 16\n"
           "int mirecc_dim[MIRECC_MAX_DIMS]; int mirecc_run_cpu = 1; /* cuda_labels.py */\n")


def instrument_program(text: str) -> str:
    """The program's .cu with ``main`` renamed ``mirecc_program_main``, its
    ``#ifdef RUN_ON_CPU`` / ``#else`` / ``#endif`` made ``if
    (mirecc_run_cpu) {`` / ``} else {`` / ``}``, the run-time shape
    variables declared first (one line) and the driver appended."""
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines)
              if re.match(r"^[ \t]*#[ \t]*ifdef[ \t]+RUN_ON_CPU\b", ln)]
    if len(starts) != 1:
        raise ValueError(f"expected one '#ifdef RUN_ON_CPU', found {len(starts)}")
    depth, els, end = 0, None, None
    for i in range(starts[0] + 1, len(lines)):
        m = _DIRECTIVE.match(lines[i])
        word = m[1] if m else ""
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            if depth == 0:
                end = i
                break
            depth -= 1
        elif word in ("else", "elif") and depth == 0:
            if word == "elif":
                raise ValueError("#elif in the RUN_ON_CPU block")
            els = i
    if end is None:
        raise ValueError("no #endif for '#ifdef RUN_ON_CPU'")
    lines[starts[0]] = "\tif (mirecc_run_cpu) {"
    if els is not None:
        lines[els] = "\t} else {"
    lines[end] = "\t}"
    text = "\n".join(lines)
    text, n = _MAIN.subn(r"\1mirecc_program_main\2", text)
    if n != 1:
        raise ValueError(f"expected one 'int main(', found {n}")
    return PRELUDE + text + "\n" + DRIVER


# ------------------------------------------------------------------ shapes

class Shape:
    """One candidate for one program: its label, the macros' values applied."""

    def __init__(self, label, x, y, applied, is_source=False, skip=None):
        self.label, self.x, self.y = label, x, y
        self.applied = applied          # every DIM_THREAD_BLOCK macro -> value in effect
        self.is_source = is_source
        self.skip = skip                # why it is not run, or None

    def key(self):
        return tuple(sorted(self.applied.items()))

    def block(self):
        """The blocks in effect: 'XxY', or per kernel '1:XxY 2:XxY ..'."""
        pairs = _pairs(self.applied)
        shown = [(name, f"{self.applied.get(p.get('x'), 1)}x{self.applied.get(p.get('y'), 1)}")
                 for name, p in sorted(pairs.items())]
        if len(shown) == 1:
            return shown[0][1]
        return " ".join(f"{name.rsplit('_', 1)[-1]}:{b}" for name, b in shown)

    def record(self):
        return {"shape": self.label, "shape_x": self.x, "shape_y": self.y, "block": self.block(),
                "is_source_shape": self.is_source, "applied": self.applied}


def _pairs(macros) -> dict[str, dict[str, str]]:
    """'DIM_THREAD_BLOCK_KERNEL_1' -> {'x': macro, 'y': macro}."""
    out = {}
    for m in macros:
        out.setdefault(m[:-2], {})[m[-1].lower()] = m
    return out


def plan_shapes(source_values: dict[str, int], tunable: list[str],
                candidates=None) -> list[Shape]:
    """The source shape then each candidate (x, y), as applied to a program
    whose DIM_THREAD_BLOCK macros have ``source_values``: only the
    ``tunable`` macros take the candidate's x (``_X``) or y (``_Y``); a
    candidate the same as an earlier one once applied is left out; one with
    a block of more than 1024 threads is kept with ``skip`` set."""
    pairs = _pairs(source_values)
    main = pairs.get("DIM_THREAD_BLOCK", next(iter(pairs.values()), {}))
    src_x, src_y = source_values.get(main.get("x")), source_values.get(main.get("y"), 1)
    same = len({(source_values.get(p.get("x")), source_values.get(p.get("y")))
                for p in pairs.values()}) == 1
    source = Shape(f"{src_x}x{src_y}" if same else "source", src_x if same else None,
                   src_y if same else None, dict(source_values), is_source=True)
    shapes, seen = [source], {source.key(): source}
    for x, y in (paper_shapes() if candidates is None else candidates):
        applied = {m: (x if m.endswith("_X") else y) if m in tunable else v
                   for m, v in source_values.items()}
        shape = Shape(f"{x}x{y}", x, y, applied)
        if shape.key() in seen:       # the same block as an earlier one (or the source's)
            continue
        threads = max((applied.get(p.get("x"), 1) or 1) * (applied.get(p.get("y"), 1) or 1)
                      for p in pairs.values()) if pairs else 1
        if threads > MAX_THREADS:
            shape.skip = f"a block of {threads} threads (> {MAX_THREADS})"
        seen[shape.key()] = shape
        shapes.append(shape)
    return shapes


# ------------------------------------------------------------------ output parsing

_GPU = re.compile(r"GPU Time in seconds:\s*\n\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)"
                  r"|GPU Runtime:\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)\s*s")
_CPU = re.compile(r"CPU Time in seconds:\s*\n\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)"
                  r"|CPU Runtime:\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?\d+)?)\s*s")
_MISMATCH = re.compile(r"Non-Matching CPU-GPU Outputs Beyond Error Threshold of\s*"
                       r"[-+0-9.eE]+\s*Percent:\s*(-?\d+)|Number of misses:\s*(-?\d+)")


def parse_run_output(text: str) -> dict:
    """The program's own GPU time (s), CPU reference time (s) and mismatch
    count from what one run printed; None for what it did not print."""
    def last(rx, conv):
        found = [next(g for g in m.groups() if g is not None) for m in rx.finditer(text)]
        return conv(found[-1]) if found else None
    return {"gpu_seconds": last(_GPU, float), "cpu_seconds": last(_CPU, float),
            "mismatches": last(_MISMATCH, int)}


class RunStream:
    """Splits a driver's stdout, fed line by line, into runs: ``feed``
    returns a finished run's dict (``id``, ``returncode``, ``sync_error``,
    ``last_error``, ``sticky``, ``output`` and :func:`parse_run_output`'s
    fields) at each end marker, else None; ``current`` is the run begun
    and not ended."""

    def __init__(self):
        self.current, self.lines = None, []

    def feed(self, line: str):
        line = line.rstrip("\r\n")
        if line.startswith("@@MIRECC-BEGIN "):
            self.current, self.lines = int(line.split()[1]), []
            return None
        if line.startswith("@@MIRECC-END "):
            parts = line.split()
            output = "\n".join(self.lines)
            try:
                run = {"id": int(parts[1]), "returncode": int(parts[2]),
                       "sync_error": parts[3], "last_error": parts[4],
                       "sticky": parts[5] == "1",
                       "wall_s": float(parts[6]) if len(parts) > 6 else None}
            except (IndexError, ValueError):      # not the driver's line after all
                self.lines.append(line)
                return None
            run.update(output=output, **parse_run_output(output))
            self.current, self.lines = None, []
            return run
        if self.current is not None:
            self.lines.append(line)
        return None


# ------------------------------------------------------------------ running

class Job:
    """One run: a shape of a (program, size), in a phase and round."""

    def __init__(self, jid, program, size, shape, phase, repeat, run_cpu, dims):
        self.id, self.program, self.size, self.shape = jid, program, size, shape
        self.phase, self.repeat, self.run_cpu, self.dims = phase, repeat, run_cpu, dims

    def arg(self):
        return f"{self.id}:{int(self.run_cpu)}:" + ",".join(str(d) for d in self.dims)


class Recorder:
    """Appends JSON lines (flushed each) and log lines, thread-safe."""

    def __init__(self, out):
        self.lock = threading.Lock()
        self.labels = open(os.path.join(out, "cuda_labels.jsonl"), "a", encoding="utf-8")
        self.log_file = open(os.path.join(out, "cuda_log.txt"), "a", encoding="utf-8")
        self.records = []
        self.t0 = time.monotonic()
        self.log_bytes = 0

    def write(self, record):
        with self.lock:
            self.records.append(record)
            self.labels.write(json.dumps(record, sort_keys=True) + "\n")
            self.labels.flush()

    def log(self, message, echo=True):
        line = f"[{time.monotonic() - self.t0:7.1f}s] {message}"
        with self.lock:
            if echo:
                print(line, flush=True)
            if self.log_bytes < 4_000_000:
                self.log_bytes += len(line) + 1
                self.log_file.write(line + "\n")
                self.log_file.flush()

    def close(self):
        self.labels.close()
        self.log_file.close()


def _job_record(job, **fields):
    rec = {"program": job.program, "size": job.size, **job.shape.record(),
           "phase": job.phase, "repeat": job.repeat, "cpu_check": bool(job.run_cpu)}
    rec.update({"gpu_seconds": None, "cpu_seconds": None, "mismatches": None,
                "returncode": None, "cuda_error": None, "wall_s": None, "status": None})
    rec.update(fields)
    return rec


def _reader(stream, q):
    for line in iter(stream.readline, ""):
        q.put(line)
    q.put(None)


def run_jobs(exe, jobs, rec, *, call_timeout, hard_stop, env, cwd):
    """Run ``jobs`` (runs of one executable) in as few processes as can be:
    a process that crashes, hangs past ``call_timeout`` in one run, or
    stops on a CUDA error it cannot go on from, is replaced by a new one
    for the runs left.  Each run is recorded as it ends.  Returns the
    number of runs recorded."""
    pending, done = list(jobs), 0
    while pending:
        if time.monotonic() >= hard_stop:
            return done
        by_id = {j.id: j for j in pending}
        started = time.monotonic()
        proc = subprocess.Popen([exe] + [j.arg() for j in pending], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                env=env, cwd=cwd, start_new_session=True)
        q: queue.Queue = queue.Queue()
        errq: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        threading.Thread(target=_reader, args=(proc.stderr, errq), daemon=True).start()
        stream, finished, last_event, begun_at = RunStream(), set(), started, None
        failed, why = None, None
        while True:
            limit = (begun_at or last_event) + call_timeout
            wait = min(limit, hard_stop) - time.monotonic()
            try:
                line = q.get(timeout=max(wait, 0.01))
            except queue.Empty:
                if time.monotonic() < min(limit, hard_stop):
                    continue
                why = "deadline" if time.monotonic() >= hard_stop else "timeout"
                _kill(proc)
                break
            if line is None:
                break
            if line.startswith("@@MIRECC-BEGIN "):
                begun_at = time.monotonic()
            run = stream.feed(line)
            if run is None:
                continue
            now = time.monotonic()
            job = by_id.get(run["id"])
            if job is None:
                continue
            errors = [e for e in (run["last_error"], run["sync_error"]) if e != "cudaSuccess"]
            status = ("cuda_error" if errors else
                      "ok" if run["gpu_seconds"] is not None else "no_time")
            rec.write(_job_record(job, gpu_seconds=run["gpu_seconds"],
                                  cpu_seconds=run["cpu_seconds"], mismatches=run["mismatches"],
                                  returncode=run["returncode"],
                                  cuda_error=errors[0] if errors else None,
                                  wall_s=run["wall_s"], status=status))
            finished.add(job.id)
            done += 1
            last_event, begun_at = now, None
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(proc)
            code = proc.wait()
        stderr_tail = _drain(errq)[-400:]
        current = stream.current
        if current is None and why is not None:          # hung before its first run began
            current = next((j.id for j in pending if j.id not in finished), None)
        if current is not None and current in by_id:
            failed = by_id[current]
            status = why or "crash"
            rec.write(_job_record(failed, returncode=code, status=status,
                                  wall_s=round(time.monotonic() - (begun_at or started), 6),
                                  stderr_tail=stderr_tail or None))
            done += 1
            finished.add(failed.id)
            if status != "deadline":
                rec.log(f"  {failed.program} {failed.size} {failed.shape.label} "
                        f"{failed.phase}: {status} (exit {code})")
        left = [j for j in pending if j.id not in finished]
        if why == "deadline":
            return done
        if left and not finished:      # no progress: do not loop
            for j in left:
                rec.write(_job_record(j, returncode=code, status="not_run",
                                      stderr_tail=stderr_tail or None))
            rec.log(f"  {left[0].program} {left[0].size}: exit {code} before any run: "
                    f"{stderr_tail.strip()[-200:]}")
            return done
        pending = left
    return done


def _kill(proc):
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(q) -> str:
    out = []
    while True:
        try:
            line = q.get(timeout=0.5)
        except queue.Empty:
            break
        if line is None:
            break
        out.append(line)
    return "".join(out)


# ------------------------------------------------------------------ building

def find_nvcc(explicit=None):
    for cand in (explicit, os.environ.get("MIRECC_NVCC"), shutil.which("nvcc"),
                 "/usr/local/cuda/bin/nvcc"):
        if cand and (shutil.which(cand) or os.access(cand, os.X_OK)):
            return os.path.abspath(shutil.which(cand) or cand)
    return None


def _run(cmd, timeout=60, **kw):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=timeout, **kw)
        return p.returncode, p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{type(exc).__name__}: {exc}"


KEEPALIVE = r"""#include <cuda_runtime.h>
#include <stdio.h>
int main(void) {
  cudaError_t e = cudaFree(0);
  printf("keepalive %s\n", cudaGetErrorName(e));
  fflush(stdout);
  while (getchar() != EOF) {}
  return 0;
}
"""


def probe_flags(nvcc, arch, build, rec):
    """Compile the keep-alive program: the -arch to use (``arch``, else
    ``native``, else sm_80), with -allow-unsupported-compiler if nvcc asks
    for it.  Returns (flags, exe or None, message)."""
    src = os.path.join(build, "keepalive.cu")
    with open(src, "w") as fh:
        fh.write(KEEPALIVE)
    exe = os.path.join(build, "keepalive.exe")
    message = ""
    for a in dict.fromkeys([arch, "native", "sm_80"]):
        for extra in ([], ["-allow-unsupported-compiler"]):
            flags = [f"-arch={a}"] + extra
            code, out = _run([nvcc, *flags, "-O3", src, "-o", exe], timeout=180)
            if code == 0:
                return flags, exe, message
            message += f"[-arch={a} {' '.join(extra)}] {out.strip()[-300:]}\n"
            if "unsupported" not in out or extra:
                break
    rec.log(f"keepalive/arch probe failed:\n{message}")
    return [f"-arch={arch}"], None, message


def prepare_build(src_root, program, size, shape_values, build_dir, mode):
    """Write the program's folder (its .cu instrumented; in ``define`` mode
    its defines set to ``shape_values``, in ``runtime`` mode the tunable
    ones made run-time variables) into ``build_dir``; the .cu copy's path."""
    rel, tunable = TUNABLE[program]
    folder = os.path.join(src_root, os.path.dirname(rel))
    os.makedirs(build_dir, exist_ok=True)
    main_cu, sized = None, False
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or not name.endswith((".cu", ".cuh", ".h")):
            continue
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
            text = fh.read()
        present = set(block_defines(text))
        if mode == "runtime":
            values = {m: f"(mirecc_dim[{i}])" for i, m in enumerate(tunable) if m in present}
        else:
            values = {m: str(v) for m, v in shape_values.items() if m in present}
        if values:
            text = rewrite_block_defines(text, values)
        if (program, size) in CUSTOM_SIZES and _SIZE_GUARD.search(text):
            text = set_custom_size(text, size_defines(program, size))
            sized = True
        if name == os.path.basename(rel):
            text = instrument_program(text)
            main_cu = os.path.join(build_dir, name)
        with open(os.path.join(build_dir, name), "w", encoding="utf-8",
                  errors="surrogateescape", newline="") as fh:
            fh.write(text)
    if main_cu is None:
        raise FileNotFoundError(rel)
    if (program, size) in CUSTOM_SIZES and not sized:
        raise ValueError(f"{program}: no size guard for the custom size {size}")
    return main_cu


COMPAT_FLAG = "-DcudaThreadSynchronize=cudaDeviceSynchronize"


def compile_one(nvcc, flags, src_root, program, cu, size, exe, timeout):
    """nvcc's build of ``cu``; should it fail, once more without the
    cudaThreadSynchronize compatibility define (needed from CUDA 12 on; a
    toolkit that still declares the call might object to it)."""
    base = [nvcc, *flags, *NVCC_FLAGS,
            *([] if (program, size) in CUSTOM_SIZES else size_defines(program, size)),
            "-I", os.path.join(src_root, UTILITIES), cu, "-o", exe]
    t0 = time.monotonic()
    code, out = _run(base, timeout=timeout, cwd=os.path.dirname(cu))
    result = {"returncode": code, "message": "" if code == 0 else out.strip()[-600:]}
    if code not in (0, None):
        code, out2 = _run([a for a in base if a != COMPAT_FLAG], timeout=timeout,
                          cwd=os.path.dirname(cu))
        if code == 0:
            result = {"returncode": 0, "message": "", "without": COMPAT_FLAG}
    result.update(ok=code == 0 and os.path.exists(exe),
                  seconds=round(time.monotonic() - t0, 3))
    return result


# ------------------------------------------------------------------ machine

def machine_info(nvcc):
    info = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "python": sys.version.split()[0], "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "nvcc": nvcc}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in fh
                                      if ln.startswith("model name")), None)
    except OSError:
        pass
    for key, cmd in (("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,"
                                     "clocks.max.sm", "--format=csv"]),
                     ("nvidia_smi_more", ["nvidia-smi", "--query-gpu=name,memory.total,"
                                          "persistence_mode,compute_mode,clocks.sm,"
                                          "clocks.mem,power.limit,temperature.gpu",
                                          "--format=csv"]),
                     ("nvcc_version", [nvcc or "nvcc", "--version"]),
                     ("gxx_version", ["g++", "--version"])):
        code, out = _run(cmd, timeout=30)
        info[key] = out.strip() if code == 0 else f"failed ({code}): {out.strip()[-300:]}"
    return info


# ------------------------------------------------------------------ summary

def _median(xs):
    return statistics.median(xs) if xs else None


def classify(runs: list[dict]) -> tuple[dict, str | None]:
    """The runs of one (program, size) -> ({shape: {"median", "bad", "checked",
    "rounds"}}, the source shape's label). Only shapes that were timed; a
    shape is bad when a run of it raised a CUDA error, crashed or timed out,
    or its check's mismatch count differs from the source shape's."""
    shapes, src_label = {}, None
    for r in runs:
        s = shapes.setdefault(r["shape"], {"times": [], "errors": 0, "mism": None,
                                           "checked": False, "skip": False, "ran": False})
        if r["is_source_shape"]:
            src_label = r["shape"]
        if r["status"] == "skipped":
            s["skip"] = True
        if r.get("cuda_error") or r["status"] in ("crash", "timeout"):
            s["errors"] += 1
        if r["phase"] == "time":
            s["ran"] = True
            if r["status"] == "ok":
                s["times"].append(r["gpu_seconds"])
        if r["phase"] == "check" and r["status"] in ("ok", "cuda_error"):
            s["checked"], s["mism"] = True, r["mismatches"]
    src = shapes.get(src_label, {})
    table = {}
    for label, s in shapes.items():
        if s["skip"] or not s["ran"]:
            continue
        both_checked = bool(s["checked"] and src.get("checked"))
        table[label] = {"median": _median(s["times"]), "checked": both_checked,
                        "rounds": len(s["times"]),
                        "bad": s["errors"] > 0 or (both_checked and s["mism"] != src.get("mism"))}
    return table, src_label


def summarize(records, programs, sizes_of, title="") -> str:
    lines = ([f"# {title}"] if title else []) + [
             "# cuda_labels summary: per program and size, the fastest correct shape "
             "(median of the timing rounds' GPU times) against the source shape.",
             "# wrong = mismatch count differs from the source shape's, or a CUDA error; "
             "unchecked = no check run recorded.",
             f"{'program':16} {'size':9} {'best':>8} {'best_s':>10} {'source':>8} "
             f"{'source_s':>10} {'speedup':>8} {'timed':>5} {'wrong':>5} {'unchk':>5} "
             f"{'rounds':>6}"]
    for program in programs:
        for size in sizes_of(program):
            mine = [r for r in records if r["program"] == program and r["size"] == size]
            if not mine:
                continue
            table, src_label = classify(mine)
            best, best_t = None, None
            for label, s in table.items():
                t = s["median"]
                if not s["bad"] and t is not None and (best_t is None or t < best_t):
                    best, best_t = label, t
            src_t = table.get(src_label, {}).get("median")
            wrong = sum(s["bad"] for s in table.values())
            unchecked = sum(not s["checked"] for s in table.values())
            rounds = max((s["rounds"] for s in table.values()), default=0)
            speed = f"{src_t / best_t:.3f}" if src_t and best_t else "-"
            lines.append(f"{program:16} {size:9} {best or '-':>8} "
                         f"{best_t if best_t is not None else float('nan'):10.6f} "
                         f"{src_label or '-':>8} "
                         f"{src_t if src_t is not None else float('nan'):10.6f} {speed:>8} "
                         f"{len(table):5d} {wrong:5d} {unchecked:5d} {rounds:6d}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="copy of polybench-acc/CUDA")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=420.0)
    ap.add_argument("--reserve-s", type=float, default=8.0,
                    help="seconds kept at the end for the summary (default 8)")
    ap.add_argument("--nvcc")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles")
    ap.add_argument("--check-workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)),
                    help="check runs (CPU reference) in parallel")
    ap.add_argument("--check-chunk", type=int, default=3,
                    help="check runs per process (default 3)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", help="comma-separated classes for all programs, and "
                                    "PROGRAM=CLASS entries for one (default: per "
                                    "program, SIZES)")
    ap.add_argument("--programs", help="comma-separated names (default: all 21)")
    ap.add_argument("--limit-programs", type=int)
    ap.add_argument("--limit-shapes", type=int, help="the first N paper shapes only")
    ap.add_argument("--shape-mode", choices=("runtime", "define"), default="runtime")
    ap.add_argument("--call-timeout", type=float, default=30.0)
    ap.add_argument("--compile-timeout", type=float, default=240.0)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="skip the CPU-reference pass")
    ap.add_argument("--build-dir", help="default: a temporary folder, removed at the end")
    args = ap.parse_args(argv)

    t_start = time.monotonic()
    hard_stop = t_start + args.deadline_s - args.reserve_s
    os.makedirs(args.out, exist_ok=True)
    for name in OUT_FILES:
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    rec = Recorder(args.out)
    src_root = os.path.abspath(args.src)
    programs = [p.strip() for p in args.programs.split(",")] if args.programs else list(TUNABLE)
    unknown = [p for p in programs if p not in TUNABLE]
    if unknown:
        ap.error(f"unknown programs: {unknown}; known: {list(TUNABLE)}")
    programs = programs[:args.limit_programs] if args.limit_programs else programs
    forced, per_program = (), {}
    for entry in (args.sizes or "").split(","):
        name, _, size = entry.strip().rpartition("=")
        if name:
            per_program[name] = per_program.get(name, ()) + (size.strip().upper(),)
        elif size.strip():
            forced += (size.strip().upper(),)

    def sizes_of(p):
        return per_program.get(p) or forced or SIZES[p]
    if set(per_program) - set(TUNABLE):
        ap.error(f"--sizes: unknown programs: {sorted(set(per_program) - set(TUNABLE))}")
    try:
        for p in programs:
            for size in sizes_of(p):
                size_defines(p, size)
    except ValueError as exc:
        ap.error(str(exc))
    candidates = paper_shapes()[:args.limit_shapes] if args.limit_shapes else paper_shapes()

    nvcc = find_nvcc(args.nvcc)
    info = machine_info(nvcc)
    meta = {"machine": info, "args": vars(args), "nvcc_flags": NVCC_FLAGS,
            "paper_shapes_xy": paper_shapes(),
            "sizes": {p: {z: size_defines(p, z) for z in sizes_of(p)} for p in programs},
            "plan": {}, "compile": {}}

    def save_meta():
        with open(os.path.join(args.out, "cuda_machine.json"), "w") as fh:
            json.dump(meta, fh, indent=1, sort_keys=True)
    rec.log(f"nvcc: {nvcc}; GPU: {info.get('nvidia_smi', '').splitlines()[-1:]}")
    if nvcc is None:
        rec.log("no nvcc found (--nvcc, MIRECC_NVCC, PATH, /usr/local/cuda/bin/nvcc)")
        save_meta()
        return 2

    # -- plan
    shapes_of = {}
    for p in programs:
        rel, tunable = TUNABLE[p]
        folder = os.path.join(src_root, os.path.dirname(rel))
        values = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith((".cu", ".cuh", ".h")):
                with open(os.path.join(folder, name), errors="replace") as fh:
                    values.update(block_defines(fh.read()))
        shapes_of[p] = plan_shapes(values, tunable, candidates if tunable else [])
        meta["plan"][p] = [dict(s.record(), skip=s.skip) for s in shapes_of[p]]
    build_root = args.build_dir or tempfile.mkdtemp(prefix="cuda-labels-")
    os.makedirs(build_root, exist_ok=True)
    flags, keepalive_exe, probe_msg = probe_flags(nvcc, args.arch, build_root, rec)
    meta["nvcc_arch_flags"], meta["probe_message"] = flags, probe_msg
    rec.log(f"flags: {flags + NVCC_FLAGS}; programs: {len(programs)}; "
            f"mode: {args.shape_mode}")

    # -- builds: (program, size, shape key or None) -> exe
    builds = []
    for size_index in range(max(len(sizes_of(p)) for p in programs)):
        for p in programs:
            if size_index >= len(sizes_of(p)):
                continue
            size = sizes_of(p)[size_index]
            if args.shape_mode == "runtime":
                builds.append((p, size, None))
            else:
                builds += [(p, size, s) for s in shapes_of[p] if not s.skip]
    exes = {}

    def build(item):
        p, size, shape = item
        tag = f"{p}.{size}" + (f".{shape.label}" if shape else "")
        where = os.path.join(build_root, tag)
        try:
            cu = prepare_build(src_root, p, size, shape.applied if shape else {}, where,
                               args.shape_mode)
        except (OSError, ValueError) as exc:
            return item, tag, {"ok": False, "message": f"prepare: {exc}"}, None
        exe = os.path.join(where, "prog.exe")
        result = compile_one(nvcc, flags, src_root, p, cu, size, exe, args.compile_timeout)
        return item, tag, result, exe
    compile_stop = t_start + 0.6 * args.deadline_s
    t_compile = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(build, b) for b in builds]
        try:
            for fut in concurrent.futures.as_completed(
                    futures, timeout=max(1.0, compile_stop - time.monotonic())):
                item, tag, result, exe = fut.result()
                meta["compile"][tag] = result
                if result["ok"]:
                    exes[(item[0], item[1], item[2].key() if item[2] else None)] = exe
                else:
                    rec.log(f"compile failed: {tag}: {result['message'][-300:]}")
        except concurrent.futures.TimeoutError:
            rec.log("compile stage past its share of the deadline: stopping it")
            for f in futures:
                f.cancel()
    ok = sum(r["ok"] for r in meta["compile"].values())
    rec.log(f"compiled {ok}/{len(builds)} in {time.monotonic() - t_compile:.1f}s "
            f"({args.jobs} jobs)")
    save_meta()
    if args.compile_only:
        rec.close()
        _finish_build(args, build_root)
        return 0 if ok == len(builds) else 1

    # -- skipped shapes, recorded once
    for p in programs:
        for size in sizes_of(p):
            for s in shapes_of[p]:
                if s.skip:
                    rec.write(dict(_job_record(Job(0, p, size, s, "plan", None, 0, []),
                                               status="skipped", reason=s.skip)))

    env = dict(os.environ, CUDA_MODULE_LOADING="EAGER")
    meta["run_env"] = {"CUDA_MODULE_LOADING": "EAGER"}
    keep = None
    if keepalive_exe:
        keep = subprocess.Popen([keepalive_exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
        reader = threading.Thread(target=lambda: meta.__setitem__(
            "keepalive", keep.stdout.readline().strip()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        rec.log(f"keep-alive process: {meta.get('keepalive', 'no answer in 30 s')}")
    ids = itertools.count(1)
    gpu = info.get("nvidia_smi", "").strip().splitlines()[-1:] or ["?"]
    title = f"{gpu[0]}; {info['date_utc']}; {args.shape_mode} shapes; {' '.join(flags)}"

    def jobs_for(p, size, phase, repeat):
        run_cpu = phase == "check"
        shapes = [s for s in shapes_of[p] if not s.skip]
        if phase == "time" and repeat:
            k = (repeat * max(1, len(shapes) // max(1, args.repeats))) % len(shapes)
            shapes = shapes[k:] + shapes[:k]
        tunable = TUNABLE[p][1]
        out = []
        if phase == "time":
            out.append((shapes_of[p][0], "warmup"))
        out += [(s, phase) for s in shapes]
        jobs = []
        for s, ph in out:
            jobs.append(Job(next(ids), p, size, s, ph, repeat, run_cpu,
                            [s.applied[m] for m in tunable]))
        return jobs

    def groups_for(p, size, phase, repeat):
        """[(executable, its jobs)]: the runs of one process each (at first)."""
        jobs = jobs_for(p, size, phase, repeat)
        if args.shape_mode == "define":      # a build per shape: a process per run
            groups = []
            for j in jobs:
                if j.phase == "warmup":
                    continue
                group = [j]
                if phase == "time":      # after a warm-up run of the same build
                    group = [Job(next(ids), p, size, j.shape, "warmup", repeat, 0, j.dims), j]
                groups.append((exes.get((p, size, j.shape.key())), group))
            return groups
        exe = exes.get((p, size, None))
        if phase == "check":           # CPU-bound: in chunks, spread over the workers
            k = max(1, args.check_chunk)
            return [(exe, jobs[i:i + k]) for i in range(0, len(jobs), k)]
        return [(exe, jobs)]

    def run_group(group):
        exe, jobs = group
        if time.monotonic() >= hard_stop:
            return 0
        if exe is None:
            for j in jobs:
                rec.write(_job_record(j, status="not_built"))
            return 0
        return run_jobs(exe, jobs, rec, call_timeout=args.call_timeout,
                        hard_stop=hard_stop, env=env, cwd=os.path.dirname(exe))

    def run_program(p, size, phase, repeat):
        return sum(run_group(g) for g in groups_for(p, size, phase, repeat))

    def check_groups(todo, size_index):
        """All programs' check chunks, those with a slow CPU reference first,
        taking turns."""
        per = [groups_for(p, sizes_of(p)[size_index], "check", 0)
               for p in sorted(todo, key=lambda p: HEAVY_CHECKS.index(p)
                               if p in HEAVY_CHECKS else len(HEAVY_CHECKS))]
        return [g for turn in itertools.zip_longest(*per) for g in turn if g]

    try:
        for size_index in range(max(len(sizes_of(p)) for p in programs)):
            todo = [p for p in programs if size_index < len(sizes_of(p))]
            phases = [("time", 0)] + ([] if args.no_check else [("check", 0)]) + \
                     [("time", r) for r in range(1, args.repeats)]
            for phase, repeat in phases:
                if time.monotonic() >= hard_stop:
                    break
                t0 = time.monotonic()
                if phase == "time":
                    counts = []
                    for p in todo:
                        if time.monotonic() >= hard_stop:
                            break
                        t1 = time.monotonic()
                        counts.append(run_program(p, sizes_of(p)[size_index], phase, repeat))
                        rec.log(f"  {p} {sizes_of(p)[size_index]} time r{repeat}: "
                                f"{counts[-1]} runs, {time.monotonic() - t1:.2f}s", echo=False)
                else:
                    with concurrent.futures.ThreadPoolExecutor(
                            max_workers=max(1, args.check_workers)) as pool:
                        counts = list(pool.map(run_group, check_groups(todo, size_index)))
                rec.log(f"size #{size_index} {phase} r{repeat}: {sum(counts)} runs, "
                        f"{time.monotonic() - t0:.1f}s (left {hard_stop - time.monotonic():.0f}s)")
            with open(os.path.join(args.out, "cuda_summary.txt"), "w") as fh:
                fh.write(summarize(rec.records, programs, sizes_of, title))
    finally:
        if keep:
            try:
                keep.stdin.close()
                keep.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                keep.kill()
        summary = summarize(rec.records, programs, sizes_of, title)
        with open(os.path.join(args.out, "cuda_summary.txt"), "w") as fh:
            fh.write(summary)
        meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
        meta["runs_recorded"] = len(rec.records)
        save_meta()
        rec.log(f"done in {meta['elapsed_s']}s: {len(rec.records)} records")
        print(summary)
        rec.close()
        _finish_build(args, build_root)
    return 0


def _finish_build(args, build_root):
    if not args.build_dir:
        shutil.rmtree(build_root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
