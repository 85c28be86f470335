"""The coarsening transform checked by running it: ``mire bench coarsen-check``.

Each kernel (the 17 of the thread-coarsening dataset's ``kernels_ir/`` and
the project's own :data:`OWN_KERNELS`) goes through the plugin's
``mirecc-coarsen`` pass (``passes/plugin/mirecc_coarsen.cpp``) at factors
2..32, consecutive and strided, with the real ``opt`` of each LLVM; every
form accepted is compiled for this CPU with a small work-item emulator (the
OpenCL work-item functions and the builtins the kernels call, defined in C
and LLVM IR) and run on the same inputs as factor 1, launched with the
global size (and the local size) divided by the factor; the outputs (every
buffer the kernel can write) are compared byte for byte.  The emulator runs
work-items one after another, which OpenCL allows for kernels that never
wait for each other, the only ones the pass accepts.  Where a kernel's
work-items race on the generated inputs (its factor 1 run in reverse order
gives other bytes), the strided form, which reorders them, is reported as
such rather than as an error; the consecutive form keeps the order.

Inputs are generated from the kernel's signature: each buffer of 2^20
elements (integers 0..15, floats in (0, 1]: indices read from a buffer stay
in bounds), each integer scalar 8, each float scalar 0.5; a global size of
256 x 16 x 4 over the dimensions the kernel reads, local size 32 x 4 x 1.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.ir.regions import split_args
from mirecc.ir.text import functions
from mirecc.learn.datasets import default_root
from mirecc.plugin.build import PluginError, ensure_plugin
from mirecc.tasks.opencl.coarsen import coarsen_ir as coarsen
from mirecc.tasks.opencl.coarsen import llvm_tool as _tool
from mirecc.util.fsutil import atomic_write_bytes

FACTORS = (2, 4, 8, 16, 32)
MODES = ("consecutive", "strided")
GLOBAL = (256, 16, 4)
LOCAL = (32, 4, 1)
ELEMENTS = 1 << 20

# The project's own kernels: a launch shape each of the pass's cases needs.
OWN_KERNELS = {
    "saxpy": r"""
__kernel void saxpy(__global float *y, __global const float *x, float a, int n) {
  int i = get_global_id(0);
  if (i >= n * 32) return;
  y[i] = a * x[i] + y[i];
}""",
    "stencil2d": r"""
__kernel void stencil2d(__global float *out, __global const float *in, int w) {
  int x = get_global_id(0), y = get_global_id(1);
  int W = get_global_size(0), H = get_global_size(1);
  if (x == 0 || y == 0 || x == W - 1 || y == H - 1) { out[y * W + x] = in[y * W + x]; return; }
  out[y * W + x] = 0.25f * (in[y * W + x - 1] + in[y * W + x + 1] + in[(y - 1) * W + x]
                            + in[(y + 1) * W + x]) + w;
}""",
    "gridstride": r"""
__kernel void gridstride(__global int *hist, __global const int *v, int n) {
  for (size_t i = get_global_id(0); i < (size_t)n * 4096; i += get_global_size(0))
    hist[i] = v[i] * 3 + (int)(i % 7);
}""",
    "tiles": r"""
__kernel void tiles(__global float *out, __global const float *in) {
  size_t g = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
  out[g * L + l] = in[g * L + l] * (float)(l + 1) + (float)g;
}""",
    "withbarrier": r"""
__kernel void withbarrier(__global float *out, __global const float *in) {
  size_t i = get_global_id(0);
  out[i] = in[i];
  barrier(CLK_GLOBAL_MEM_FENCE);
  out[i] += in[(i + 1) % get_global_size(0)];
}""",
}

# The builtins the dataset's kernels call, in LLVM IR (no pointers: the same
# text for typed-pointer LLVM 14 and opaque-pointer LLVM 19).  CND (the
# cumulative normal blackscholes calls) is declared but not defined in the
# dataset; any function of its input serves to compare factors.
BUILTINS = {
    "_Z4sqrtf": "define float @_Z4sqrtf(float %x) {\n  %r = call float @llvm.sqrt.f32(float %x)\n"
                "  ret float %r\n}\ndeclare float @llvm.sqrt.f32(float)",
    "_Z5rsqrtf": "define float @_Z5rsqrtf(float %x) {\n  %s = call float @llvm.sqrt.f32(float %x)\n"
                 "  %r = fdiv float 1.0, %s\n  ret float %r\n}\ndeclare float @llvm.sqrt.f32(float)",
    "_Z3logf": "define float @_Z3logf(float %x) {\n  %r = call float @logf(float %x)\n  ret float %r\n}"
               "\ndeclare float @logf(float)",
    "_Z3expf": "define float @_Z3expf(float %x) {\n  %r = call float @expf(float %x)\n  ret float %r\n}"
               "\ndeclare float @expf(float)",
    "_Z3sinf": "define float @_Z3sinf(float %x) {\n  %r = call float @sinf(float %x)\n  ret float %r\n}"
               "\ndeclare float @sinf(float)",
    "_Z3cosf": "define float @_Z3cosf(float %x) {\n  %r = call float @cosf(float %x)\n  ret float %r\n}"
               "\ndeclare float @cosf(float)",
    "CND": "define float @CND(float %x) {\n  %a = fmul float %x, 0.25\n  %r = fadd float %a, 0.5\n"
           "  ret float %r\n}",
    "_Z14convert_float4Dv4_h": "define <4 x float> @_Z14convert_float4Dv4_h(<4 x i8> %v) {\n"
                               "  %r = uitofp <4 x i8> %v to <4 x float>\n  ret <4 x float> %r\n}",
    "_Z14convert_uchar4Dv4_f": (
        "define <4 x i8> @_Z14convert_uchar4Dv4_f(<4 x float> %v) {\n"
        "  %lo = call <4 x float> @llvm.maxnum.v4f32(<4 x float> %v, <4 x float> zeroinitializer)\n"
        "  %c = call <4 x float> @llvm.minnum.v4f32(<4 x float> %lo, <4 x float> "
        "<float 255.0, float 255.0, float 255.0, float 255.0>)\n"
        "  %r = fptoui <4 x float> %c to <4 x i8>\n  ret <4 x i8> %r\n}\n"
        "declare <4 x float> @llvm.maxnum.v4f32(<4 x float>, <4 x float>)\n"
        "declare <4 x float> @llvm.minnum.v4f32(<4 x float>, <4 x float>)"),
    "_Z5hypotDv4_fS_": (
        "define <4 x float> @_Z5hypotDv4_fS_(<4 x float> %a, <4 x float> %b) {\n"
        "  %a2 = fmul <4 x float> %a, %a\n  %b2 = fmul <4 x float> %b, %b\n"
        "  %s = fadd <4 x float> %a2, %b2\n"
        "  %r = call <4 x float> @llvm.sqrt.v4f32(<4 x float> %s)\n  ret <4 x float> %r\n}\n"
        "declare <4 x float> @llvm.sqrt.v4f32(<4 x float>)"),
}

WORK_ITEM = r"""
#include <stddef.h>
size_t mirecc_G[3] = {1, 1, 1}, mirecc_L[3] = {1, 1, 1}, mirecc_ID[3], mirecc_GR[3];
unsigned mirecc_WD = 1;
size_t _Z13get_global_idj(unsigned d) { return d < 3 ? mirecc_GR[d] * mirecc_L[d] + mirecc_ID[d] : 0; }
size_t _Z15get_global_sizej(unsigned d) { return d < 3 ? mirecc_G[d] : 1; }
size_t _Z12get_local_idj(unsigned d) { return d < 3 ? mirecc_ID[d] : 0; }
size_t _Z14get_local_sizej(unsigned d) { return d < 3 ? mirecc_L[d] : 1; }
size_t _Z12get_group_idj(unsigned d) { return d < 3 ? mirecc_GR[d] : 0; }
size_t _Z14get_num_groupsj(unsigned d) { return d < 3 ? mirecc_G[d] / mirecc_L[d] : 1; }
size_t _Z17get_global_offsetj(unsigned d) { (void)d; return 0; }
unsigned _Z12get_work_dimv(void) { return mirecc_WD; }
"""

C_SCALAR = {"i8": "char", "i16": "short", "i32": "int", "i64": "long", "float": "float",
            "double": "double"}


@dataclass
class Param:
    llvm: str             # the LLVM type as the define line has it
    cl: str               # kernel_arg_type (e.g. "float*", "uint2")
    pointer: bool


@dataclass
class Kernel:
    name: str
    source: str           # dataset file stem or own kernel name
    params: list[Param]
    dims: int
    needs: list[str]      # declared functions that are not work-item functions
    ir: Path


@dataclass
class Row:
    kernel: str
    source: str
    major: int
    cells: dict = field(default_factory=dict)   # "k/mode" -> "equal" | "refused: ..." | ...


def _metadata_strings(ir: str, ref: str) -> list[str]:
    m = re.search(rf"^{re.escape(ref)} = !\{{(.*)\}}$", ir, re.M)
    return re.findall(r'!"([^"]*)"', m.group(1)) if m else []


def read_kernel(ir_path: Path, source: str) -> Kernel:
    """The kernel of an IR file (the first spir_kernel, else the first
    function with kernel_arg_type metadata): its parameters, dimensions and
    the functions it needs that the emulator must define."""
    ir = ir_path.read_text()
    define = next((d for _, d, _ in functions(ir)
                   if " spir_kernel " in d or "!kernel_arg_type" in d), None)
    m = define and re.match(r"^define [^@]*void @([\w.]+)\((.*?)\)([^\n]*)\{$", define)
    if not m:
        raise ValueError(f"{ir_path}: no kernel")
    name, params_text, tail = m.group(1), m.group(2), m.group(3)
    types_ref = re.search(r"!kernel_arg_type (![0-9]+)", tail)
    cl_types = _metadata_strings(ir, types_ref.group(1)) if types_ref else []
    params = []
    for i, p in enumerate(split_args(params_text)):
        llvm = p.split(" ")[0] if not p.startswith("<") else p[:p.index(">") + 1] + (
            "*" if p[p.index(">") + 1:].startswith("*") else "")
        pointer = llvm.endswith("*") or llvm == "ptr" or p.startswith("ptr ")
        params.append(Param(llvm=llvm, cl=cl_types[i] if i < len(cl_types) else "", pointer=pointer))
    dims = 1
    for d in re.findall(r"@_Z\d+get_(?:global|local|group)_\w+j\(i32 (?:noundef )?(\d)\)", ir):
        dims = max(dims, int(d) + 1)
    declared = re.findall(r"^declare [^@]*@([\w.]+)\(", ir, re.M)
    needs = [d for d in declared if not d.startswith("llvm.") and not re.match(
        r"_Z\d+get_(global|local|group|num|work|enqueued)", d)]
    return Kernel(name, source, params, min(dims, 3), needs, ir_path)


def _element(cl: str) -> tuple[int, bool]:
    """(bytes per element, is float) of a pointer parameter's kernel_arg_type."""
    base = cl.replace("*", "").replace("const", "").replace("__global", "").strip()
    m = re.match(r"([a-z]+?)(\d*)$", base)
    scalar, width = (m.group(1), int(m.group(2) or 1)) if m else ("float", 1)
    size = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "long": 8,
            "ulong": 8, "float": 4, "double": 8, "half": 2}.get(scalar, 4)
    return size * width, scalar in ("float", "double", "half")


def launcher(kernel: Kernel) -> str:
    """The C main: inputs from the signature, the NDRange from argv (global
    and local size per dimension), a digest line per buffer."""
    decl, setup, call, typedefs = [], [], [], {}
    for i, p in enumerate(kernel.params):
        if p.pointer:
            size, is_float = _element(p.cl)
            decl.append("void *")
            setup.append(f"  unsigned char *b{i} = malloc({ELEMENTS}ul * {size});\n"
                         f"  fill(b{i}, {ELEMENTS}ul, {size}, {int(is_float)}, {i});")
            call.append(f"b{i}")
            continue
        vec = re.match(r"<(\d+) x (\w+)>", p.llvm)
        if vec:
            n, t = int(vec.group(1)), C_SCALAR.get(vec.group(2), "int")
            name = f"{t}{n}_t"
            typedefs[name] = f"typedef {t} {name} __attribute__((ext_vector_type({n})));"
            decl.append(name)
            call.append(f"({name})(8)")
        else:
            t = C_SCALAR.get(p.llvm, "int")
            decl.append(t)
            call.append("0.5f" if t in ("float", "double") else "8")
    pointers = [i for i, p in enumerate(kernel.params) if p.pointer]
    digests = "\n".join(
        f"  printf(\"%016llx\\n\", fnv(b{i}, {ELEMENTS}ul * {_element(kernel.params[i].cl)[0]}));"
        for i in pointers)
    return f"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern size_t mirecc_G[3], mirecc_L[3], mirecc_ID[3], mirecc_GR[3];
extern unsigned mirecc_WD;
{chr(10).join(typedefs.values())}
void {kernel.name}({", ".join(decl) or "void"});
static void fill(unsigned char *b, unsigned long n, int size, int is_float, int seed) {{
  for (unsigned long e = 0; e < n; e++) {{
    unsigned h = (unsigned)(e * 2654435761u + seed * 40503u);
    if (is_float && size % 4 == 0) {{
      for (int j = 0; j < size / 4; j++) {{ float f = ((h >> 8) % 997 + 1 + j) / 1000.0f;
        memcpy(b + e * size + 4 * j, &f, 4); }}
    }} else if (size % 4 == 0) {{
      for (int j = 0; j < size / 4; j++) {{ int v = (h >> 4) % 16; memcpy(b + e * size + 4 * j, &v, 4); }}
    }} else {{
      for (int j = 0; j < size; j++) b[e * size + j] = (unsigned char)((h >> (j + 3)) % 16);
    }}
  }}
}}
static unsigned long long fnv(const unsigned char *p, unsigned long n) {{
  unsigned long long h = 1469598103934665603ull;
  for (unsigned long i = 0; i < n; i++) {{ h ^= p[i]; h *= 1099511628211ull; }}
  return h;
}}
int main(int argc, char **argv) {{
  if (argc != 7 && argc != 8) return 2;
  int reverse = argc == 8;
  for (int d = 0; d < 3; d++) {{ mirecc_G[d] = strtoul(argv[1 + d], 0, 10);
                                 mirecc_L[d] = strtoul(argv[4 + d], 0, 10); }}
  mirecc_WD = {kernel.dims};
{chr(10).join(setup)}
  size_t n = mirecc_G[0] * mirecc_G[1] * mirecc_G[2];
  for (size_t j = 0; j < n; j++) {{
    size_t i = reverse ? n - 1 - j : j;   /* reverse: the last work-item first */
    size_t x = i % mirecc_G[0], y = i / mirecc_G[0] % mirecc_G[1], z = i / mirecc_G[0] / mirecc_G[1];
    mirecc_GR[0] = x / mirecc_L[0]; mirecc_GR[1] = y / mirecc_L[1]; mirecc_GR[2] = z / mirecc_L[2];
    mirecc_ID[0] = x % mirecc_L[0]; mirecc_ID[1] = y % mirecc_L[1]; mirecc_ID[2] = z % mirecc_L[2];
    {kernel.name}({", ".join(call)});
  }}
{digests}
  return 0;
}}
"""


def own_kernel_ir(name: str, source: str, major: int, work: Path) -> Path:
    """An own kernel's IR from OpenCL C, by clang -x cl for this CPU (the
    optimisation of the IR left to the compile after the pass)."""
    cl = work / f"{name}.cl"
    cl.write_text(source)
    out = work / f"{name}-{major}.ll"
    subprocess.run([_tool("clang", major), "-x", "cl", "-cl-std=CL1.2", "-Xclang",
                    "-finclude-default-header", "-O1", "-Xclang", "-disable-llvm-passes",
                    "-emit-llvm", "-S", str(cl), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def _build_run(ir: Path, kernel: Kernel, major: int, work: Path, tag: str,
               launch: tuple[tuple[int, ...], tuple[int, ...]], reverse: bool = False) -> str:
    # the emulator's sources, written once per kernel
    lib, main = (work / f"builtins-{kernel.source}-{kernel.name}.ll",
                 work / f"main-{kernel.source}-{kernel.name}.c")
    if not main.is_file():
        lib.write_text("\n".join(BUILTINS[n] for n in kernel.needs if n in BUILTINS) + "\n")
        (work / "workitem.c").write_text(WORK_ITEM)
        main.write_text(launcher(kernel))
    exe = work / f"run-{tag}"
    clang = _tool("clang", major)
    proc = subprocess.run([clang, "-O2", "-Wno-override-module", "-w", str(ir), str(lib),
                           str(work / "workitem.c"), str(main), "-lm", "-o", str(exe)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"does not build: {proc.stderr.strip()[-300:]}")
    g, loc = launch
    proc = subprocess.run([str(exe), *map(str, g), *map(str, loc), *(["r"] if reverse else [])],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}")
    return proc.stdout


def check_kernel(kernel: Kernel, major: int, plugin: Path, work: Path,
                 factors=FACTORS, modes=MODES) -> Row:
    row = Row(kernel.name, kernel.source, major)
    missing = [n for n in kernel.needs if n not in BUILTINS]
    g = tuple(GLOBAL[d] if d < kernel.dims else 1 for d in range(3))
    loc = tuple(LOCAL[d] if d < kernel.dims else 1 for d in range(3))
    try:
        base = None if missing else _build_run(kernel.ir, kernel, major, work, "k1", (g, loc))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        base, missing = None, [f"factor 1 does not run here ({exc})"]
    # a kernel whose work-items race on these inputs (one writes what another
    # reads) gives other bytes in another order of its work-items, which OpenCL
    # leaves open: the strided form's reordering is then no error
    racy = base is not None and _build_run(kernel.ir, kernel, major, work, "k1r", (g, loc),
                                           reverse=True) != base
    for mode in modes:
        for k in factors:
            out = work / f"{kernel.name}-{k}-{mode}.ll"
            ok, line = coarsen(kernel.ir, kernel.name, k, mode, major, plugin, out)
            key = f"{k}/{mode}"
            if not ok:
                row.cells[key] = "refused: " + line.split(": refused: ", 1)[-1]
                continue
            if base is None:
                row.cells[key] = "accepted, not run: " + "; ".join(missing)
                continue
            # the host's side of the transform: global and local size / k
            gk, lk = (g[0] // k, *g[1:]), (loc[0] // k, *loc[1:])
            try:
                got = _build_run(out, kernel, major, work, f"k{k}{mode[0]}", (gk, lk))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                row.cells[key] = f"accepted, failed to run: {exc}"
                continue
            if got == base:
                row.cells[key] = "equal"
            elif racy and mode == "strided":
                row.cells[key] = "order: the kernel races on these inputs (factor 1 reversed differs too)"
            else:
                row.cells[key] = "DIFFERS"
    return row


def dataset_kernels(dataset: Path) -> list[tuple[str, Path]]:
    return [(p.stem, p) for p in sorted((dataset / "kernels_ir").glob("*.ll"))]


def run_check(majors, plugins: dict, dataset: Path | None, factors=FACTORS, modes=MODES,
              progress=None) -> list[Row]:
    rows = []
    for major in majors:
        with tempfile.TemporaryDirectory(prefix="mirecc-coarsen-") as tmp:
            work = Path(tmp)
            items = [(stem, p) for stem, p in (dataset_kernels(dataset) if dataset else [])]
            items += [(name, own_kernel_ir(name, src, major, work))
                      for name, src in OWN_KERNELS.items()]
            for stem, path in items:
                kernel = read_kernel(path, stem)
                rows.append(check_kernel(kernel, major, plugins[major], work, factors, modes))
                if progress:
                    progress(rows[-1])
    return rows


def table_markdown(rows: list[Row]) -> str:
    keys = [f"{k}/{m}" for m in MODES for k in FACTORS]
    head = ("| kernel (source) | LLVM | " + " | ".join(keys) + " |\n|---|---|"
            + "---|" * len(keys))
    lines = [head]
    for r in rows:
        cells = []
        for key in keys:
            c = r.cells.get(key, "")
            cells.append("=" if c == "equal" else ("refused" if c.startswith("refused")
                                                   else "race" if c.startswith("order")
                                                   else c.split(":")[0]))
        lines.append(f"| {r.kernel} ({r.source}) | {r.major} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_arguments(p) -> None:
    p.add_argument("--coarsen-llvm", default="14,19",
                   help="LLVM majors whose opt and clang run the check (default: %(default)s)")
    p.add_argument("--coarsen-factors", default=",".join(map(str, FACTORS)),
                   help="coarsening factors (default: %(default)s)")
    p.add_argument("--coarsen-dataset", default=None,
                   help="the thread-coarsening dataset (default: ../shared/datasets/"
                        "thread_coarsening or $MIRECC_DATASETS; without it the project's "
                        "kernels only)")
    p.add_argument("--coarsen-out", default="docs/results/coarsen-transform.md",
                   help="the table to write (default: %(default)s)")


def run(args) -> int:
    majors = [int(m) for m in str(args.coarsen_llvm).split(",") if m.strip()]
    factors = tuple(int(f) for f in str(args.coarsen_factors).split(",") if f.strip())

    dataset = (Path(args.coarsen_dataset) if args.coarsen_dataset
               else default_root() / "thread_coarsening")
    if not (dataset / "kernels_ir").is_dir():
        print(f"mire bench coarsen-check: no kernels_ir/ under {dataset}; the project's own "
              f"kernels only", file=sys.stderr)
        dataset = None
    try:
        plugins = {m: ensure_plugin(m) for m in majors}
        for m in majors:
            _tool("opt", m)
    except (PluginError, FileNotFoundError) as exc:
        print(f"mire bench coarsen-check: {exc}", file=sys.stderr)
        return 2
    start = time.time()
    done = []

    def progress(row):
        done.append(row)
        bad = [k for k, c in row.cells.items() if c == "DIFFERS" or "failed" in c]
        print(f"[{len(done)}] LLVM {row.major} {row.kernel}: "
              f"{sum(c == 'equal' for c in row.cells.values())} equal, "
              f"{sum(c.startswith('refused') for c in row.cells.values())} refused"
              + (f", differs or failed: {', '.join(bad)}" if bad else ""), flush=True)

    rows = run_check(majors, plugins, dataset, factors, MODES, progress)
    reasons = sorted({(r.kernel, r.source, c.split(": ", 1)[1]) for r in rows
                      for c in r.cells.values() if c.startswith("refused")})
    cells = [c for r in rows for c in r.cells.values()]
    text = "\n".join([
        "# The coarsening transform, run",
        "",
        "Written by `mire bench coarsen-check` "
        f"(`mirecc/tasks/opencl/offline/coarsen_check.py`), {time.time() - start:.0f} s. Each "
        "kernel through the plugin's `mirecc-coarsen` pass with each LLVM's own `opt`, "
        "every accepted form compiled with a work-item emulator and run against factor 1 on "
        "the same generated inputs (global size 256 x 16 x 4 over the kernel's dimensions, "
        "local 32 x 4 x 1; the coarsened form launched with both divided by the factor "
        "along dimension 0); `=`: every buffer byte-identical to factor 1's.",
        "",
        f"{sum(c == 'equal' for c in cells)} forms equal, "
        f"{sum(c == 'DIFFERS' for c in cells)} differ, "
        f"{sum(c.startswith('order') for c in cells)} differ where the kernel itself races "
        f"on the generated inputs (`race`: factor 1 run with its work-items in reverse "
        f"order differs from factor 1 too; the strided form reorders them), "
        f"{sum(c.startswith('refused') for c in cells)} refused, "
        f"{sum(c.startswith('accepted, ') for c in cells)} accepted but not run.",
        "",
        table_markdown(rows),
        "",
        "Refusals (the pass's reasons):",
        "",
        *[f"- {k} ({s}): {why}" for k, s, why in reasons],
        "",
    ])
    out = Path(args.coarsen_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, text.encode())
    print(f"wrote {out}")
    return 1 if any(c == "DIFFERS" or "failed" in c for c in cells) else 0
