"""The cuda-block task on ordinary CUDA code: a launch's block traced to the
macro, const or dim3 literal that sets it (mirecc.frontend.knobs),
refused where a change would not move every use with it, and applied
through mirecc-nvcc by -D or in a rewritten copy."""
from __future__ import annotations

import os

import pytest

from nvcc_helpers import (MIRECC_NVCC, NVCC, drop_in, explained, launches, needs_nvcc,
                          normalised, profiled, run)

from mirecc.frontend.launches import scan_source
from mirecc.frontend import nvcc as nvcc_front

# --------------------------------------------------------------- the sources

CHAIN = """\
#include <cstdio>
#ifdef RD_WG_SIZE_0_0
#define BLOCK_SIZE RD_WG_SIZE_0_0
#elif defined(RD_WG_SIZE)
#define BLOCK_SIZE RD_WG_SIZE
#else
#define BLOCK_SIZE 16
#endif
__global__ void tile(float *a, int n) {
  __shared__ float s[BLOCK_SIZE][BLOCK_SIZE + 1];
  int x = blockIdx.x * BLOCK_SIZE + threadIdx.x, y = blockIdx.y * BLOCK_SIZE + threadIdx.y;
  if (x < n && y < n) s[threadIdx.y][threadIdx.x] = a[y * n + x];
  __syncthreads();
  if (x < n && y < n) a[y * n + x] = s[threadIdx.x][threadIdx.y];
}
int main() {
  int n = 1000;
  dim3 block(BLOCK_SIZE, BLOCK_SIZE);
  dim3 grid((n + BLOCK_SIZE - 1) / BLOCK_SIZE, (n + BLOCK_SIZE - 1) / BLOCK_SIZE);
  tile<<<grid, block>>>(0, n);
  printf("%d\\n", BLOCK_SIZE);
  return 0;
}
"""

ONE_D = """\
__global__ void add(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}
int main() {
  int n = 5000;
  %s
  return 0;
}
"""
IFNDEF = "#ifndef THREADS\n#define THREADS 256\n#endif\n" + ONE_D % (
    "add<<<(n + THREADS - 1) / THREADS, THREADS>>>(0, n);")
MACRO = "#define THREADS 256\n" + ONE_D % (
    "int blocks = (n + THREADS - 1) / THREADS;\n  add<<<blocks, THREADS>>>(0, n);")
CONST = "const int kThreads = 128;\n" + ONE_D % (
    "add<<<(n + kThreads - 1) / kThreads, kThreads>>>(0, n);")
DIM3 = ONE_D % ("dim3 threads(64);\n  dim3 grid((n + threads.x - 1) / threads.x);\n"
                "  add<<<grid, threads>>>(0, n);")
RUNTIME = "#include <cstdlib>\n" + ONE_D.replace("int main() {", "int main(int c, char **v) {") % (
    "int t = atoi(v[1]);\n  add<<<(n + t - 1) / t, t>>>(0, n);")
GRID_LITERAL = "#define THREADS 256\n" + ONE_D % ("add<<<(n + 255) / 256, THREADS>>>(0, n);")
SHARED_LITERAL = CHAIN.replace("s[BLOCK_SIZE][BLOCK_SIZE + 1]", "s[16][17]")
THREAD_LITERAL = IFNDEF.replace("if (i < n) a[i] += 1.0f;",
                                "if (i < n && threadIdx.x < 255) a[i] += 1.0f;")
ROUNDS_DOWN = ("#include <cstdlib>\n#define THREADS 256\n__global__ void add(float *a) {\n"
               "  a[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;\n}\n"
               "int main(int c, char **v) {\n  int n = atoi(v[1]);\n"
               "  add<<<n / THREADS, THREADS>>>(0);\n  return 0;\n}\n")
CHECKED = ROUNDS_DOWN.replace("int n = atoi(v[1]);",
                              "int n = atoi(v[1]);\n  if (n % THREADS) return 1;")
DIVIDES = ("#define N 1536\n#define THREADS 256\n__global__ void add(float *a) {\n"
           "  a[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;\n}\n"
           "int main() {\n  add<<<N / THREADS, THREADS>>>(0);\n  return 0;\n}\n")
SHUFFLE = IFNDEF.replace("if (i < n) a[i] += 1.0f;",
                         "float v = i < n ? a[i] : 0;\n"
                         "  v += __shfl_down_sync(0xffffffff, v, 16);\n"
                         "  if (i < n) a[i] = v;")
VOLATILE = CHAIN.replace("__shared__ float s", "volatile __shared__ float s")
BOUNDS = IFNDEF.replace("__global__ void add", "__global__ void __launch_bounds__(256) add")
BOUNDS_KNOB = IFNDEF.replace("__global__ void add",
                             "__global__ void __launch_bounds__(THREADS) add")
BIG_SHARED = IFNDEF.replace(
    "if (i < n) a[i] += 1.0f;",
    "__shared__ double buf[THREADS * 8];\n  buf[threadIdx.x * 8] = i < n ? a[i] : 0;\n"
    "  __syncthreads();\n  if (i < n) a[i] = buf[(THREADS - 1 - threadIdx.x) * 8];")
CHOOSES = IFNDEF.replace("__global__", "#if THREADS > 128\n#define WIDE 1\n#endif\n__global__")
EXPORTED = MACRO.replace("__global__",
                         'extern "C" const unsigned MAX_N = 4 * THREADS;\n__global__')
STATIC_CONST = MACRO.replace("__global__", "static const unsigned MAX_N = 4 * THREADS;\n"
                             "__global__")
SHARED_KNOB = IFNDEF.replace("int main() {", "__global__ void other(float *a) {}\nint main() {") \
    .replace("  return 0;", "  other<<<THREADS, 32>>>(0);\n  return 0;")


def blocks(tmp_path, source: str, *flags: str) -> dict:
    path = tmp_path / "k.cu"
    path.write_text(source)
    cmd = nvcc_front.parse([*flags, "-c", str(path)])
    plan = launches.plan_source(scan_source(str(path), cmd), cmd)
    return plan.blocks


TABLE = [
    # (what, source, flags, kernel, tunable, refused code, in the note)
    ("ifdef chain: a -D of its first selector", CHAIN, [], "tile", "macro-D", None,
     "-DRD_WG_SIZE_0_0=<n> sets BLOCK_SIZE (k.cu:7); square shapes only"),
    ("the command line picked the chain's branch", CHAIN, ["-DRD_WG_SIZE=8"], "tile", None,
     "command-line", "which the command line sets (-DRD_WG_SIZE=8): kept"),
    ("#ifndef NAME: a -D of the name", IFNDEF, [], "add", "macro-D", None,
     "-DTHREADS=<n> sets THREADS (k.cu:2); its y is fixed at 1"),
    ("an unconditional #define: rewritten", MACRO, [], "add", "macro-rewrite", None,
     "THREADS rewritten in a copy (#define at k.cu:1)"),
    ("a const int", CONST, [], "add", "const", None,
     "kThreads rewritten in a copy (its initialiser at k.cu:1)"),
    ("a dim3 of literals", DIM3, [], "add", "dim3", None,
     "threads.x rewritten in a copy (the literal at k.cu:7)"),
    ("a run-time variable", RUNTIME, [], "add", None, "runtime",
     "the block's x is t, set at run time (t = atoi(v[1]))"),
    ("the grid has the size as a literal", GRID_LITERAL, [], "add", None, "grid-literal",
     "the grid of the add launch is computed with the literal 255 ((n + 255) / 256)"),
    ("a __shared__ array has the size as a literal", SHARED_LITERAL, [], "tile", None,
     "shared-literal", "tile's __shared__ s[16][17] has the block's size 16 without BLOCK_SIZE"),
    ("the thread index is compared with a literal", THREAD_LITERAL, [], "add", None,
     "thread-literal", "add computes with the literal 255 next to its thread index"),
    ("n / THREADS, unchecked", ROUNDS_DOWN, [], "add", None, "rounds-down",
     "(n / THREADS) divides by THREADS rounding down, and nothing checks that THREADS "
     "divides the problem size"),
    ("n / THREADS, checked with %", CHECKED, [], "add", "macro-rewrite", None, "THREADS"),
    ("N / THREADS with N known", DIVIDES, [], "add", "macro-rewrite", None,
     "the shape must divide 1536"),
    ("__shfl_down_sync", SHUFFLE, [], "add", None, "warp-sync",
     "add is warp-synchronous (__shfl_down_sync): it assumes the block's shape"),
    ("a volatile shared reduction", VOLATILE, [], "tile", None, "warp-sync",
     "tile is warp-synchronous"),
    ("__launch_bounds__ of a literal", BOUNDS, [], "add", None, "launch-bounds",
     "add has __launch_bounds__(256), which assumes the source's shape"),
    ("__launch_bounds__ of the knob", BOUNDS_KNOB, [], "add", "macro-D", None, "THREADS"),
    ("#if on the knob", CHOOSES, [], "add", None, "preprocessor",
     "#if THREADS > 128 (k.cu:4) chooses code by THREADS"),
    ("an exported object is set from the knob", EXPORTED, [], "add", None, "exported",
     "MAX_N (k.cu:2), which other translation units can read, is set from THREADS"),
    ("a file-local object set from the knob moves with it", STATIC_CONST, [], "add",
     "macro-rewrite", None, "THREADS rewritten in a copy"),
    ("the knob sizes another launch's grid", SHARED_KNOB, [], "add", None, "shared-knob",
     "THREADS also sizes the grid of the other launch, whose block it does not set"),
]


@pytest.mark.parametrize("what,source,flags,kernel,tunable,code,note", TABLE,
                         ids=[row[0] for row in TABLE])
def test_where_a_block_shape_is_set_and_whether_it_may_change(tmp_path, what, source, flags,
                                                              kernel, tunable, code, note):
    block = blocks(tmp_path, source, *flags)[kernel]
    assert (block.tunable, block.code) == (tunable, code), block.note
    assert note in block.note
    assert block.describe()["advisory"] is (tunable is None)
    if tunable is None:
        assert block.note.startswith("advisory: not tunable: ")


def test_candidates_respect_the_device_and_the_source(tmp_path):
    def shapes(source):
        return blocks(tmp_path, source)
    # 1-D: 32..1024 in powers of two; a square knob: 8, 16, 32 per side
    add = shapes(IFNDEF)["add"]
    assert add.knob.shapes() == [(32, 1), (64, 1), (128, 1), (256, 1), (512, 1), (1024, 1)]
    assert "takes 32, 64" in add.refuses((192, 1)) and "takes" in add.refuses((16, 1))
    tile = shapes(CHAIN)["tile"]
    assert tile.knob.shapes() == [(8, 8), (16, 16), (32, 32)]
    assert "must be square" in tile.refuses((32, 8))
    # 1024 doubles x 8 = 64 KiB of __shared__ memory: over 48 KiB
    big = shapes(BIG_SHARED)["add"]
    assert big.refuses((1024, 1)) == ("add would declare 65536 bytes of __shared__ memory, "
                                      "over 49152")
    assert big.refuses((512, 1)) is None and (1024, 1) not in big.knob.shapes()
    # N / THREADS with N = 1536: 1024 does not divide it
    divides = shapes(DIVIDES)["add"]
    assert "must divide 1536 (1024 does not)" in divides.refuses((1024, 1))
    assert divides.refuses((512, 1)) is None
    # the head's shapes, through the kernel's limits
    from mirecc.tasks.cuda_block.head import kernel_value
    assert kernel_value(add, (192, 1)) is None and kernel_value(add, (512, 1)) == (512, 1)
    assert kernel_value(add, (16, 16)) is None        # 16 threads: under the 1-D set
    assert kernel_value(tile, (32, 32)) == (32, 32) and kernel_value(tile, (64, 1)) is None
    assert kernel_value(big, (1024, 1)) is None


def test_recorded_decisions_carry_a_knobs_shapes_for_tune(tmp_path):
    from mirecc.tasks.cuda_block.profile import KIND

    path = tmp_path / "k.cu"
    path.write_text(BIG_SHARED)
    cmd = nvcc_front.parse(["-c", str(path)])
    plan = launches.plan_source(scan_source(str(path), cmd), cmd)
    [decision] = KIND.recorded(plan, {"add": "0123456789abcdef"})
    assert decision["allowed"] == [{"x": v, "y": 1} for v in (32, 64, 128, 256, 512)]
    site = KIND.site(decision, str(path), {"add": "0123456789abcdef"}, {})
    # the fallback's 1-D shapes first, then the knob's own; never one it refuses
    assert site["candidates"] == [{"x": 64, "y": 1}, {"x": 128, "y": 1}, {"x": 32, "y": 1},
                                  {"x": 512, "y": 1}]


# --------------------------------------------------------------- through nvcc

def _compile(tmp_path, tool, name, out, *flags, env=None):
    proc = run([tool, *flags, "-c", name, "-o", out], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@needs_nvcc
def test_a_kept_shape_builds_nvccs_object_and_a_set_one_reaches_it_by_define(tmp_path):
    (tmp_path / "k.cu").write_text(CHAIN)
    _compile(tmp_path, NVCC, "k.cu", "plain.o")
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o")
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    unit = explained(tmp_path, "-c", "k.cu", "-o", "ours.o")
    [tile] = unit["kernels"]
    env = profiled(tmp_path / "p.profile", ("k.cu", "tile", tile["digest"], {"x": 32, "y": 32}))
    env.pop("MIRECC_APPLY_CUDA_BLOCK", None)
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o", env=env)
    _compile(tmp_path, NVCC, "k.cu", "hand.o", "-DRD_WG_SIZE_0_0=32")
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o") \
        != normalised(tmp_path / "plain.o")
    [decision] = explained(tmp_path, "-c", "k.cu", "-o", "ours.o", env=env)["decisions"]
    assert decision["applied"] and decision["how"] == "-DRD_WG_SIZE_0_0=32"
    # a shape the knob cannot take: recorded, not applied, nvcc's object
    env = profiled(tmp_path / "p.profile", ("k.cu", "tile", tile["digest"], {"x": 32, "y": 8}))
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o", env=env)
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    text = run([MIRECC_NVCC, "--explain", "-c", "k.cu", "-o", "ours.o"], tmp_path, env=env).stdout
    assert "the profile's 32x8 is not applied: BLOCK_SIZE sets both the block's x and y: " \
           "the shape must be square" in text


@needs_nvcc
@pytest.mark.parametrize("source,old,new", [(CONST, "kThreads = 128", "kThreads = 512"),
                                            (DIM3, "threads(64)", "threads(512)")],
                         ids=["const", "dim3"])
def test_a_const_or_literal_is_rewritten_in_a_copy(tmp_path, source, old, new):
    (tmp_path / "k.cu").write_text(source)
    _compile(tmp_path, NVCC, "k.cu", "plain.o")
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o")
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    [add] = explained(tmp_path, "-c", "k.cu")["kernels"]
    env = profiled(tmp_path / "p.profile", ("k.cu", "add", add["digest"], {"x": 512, "y": 1}))
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o", env=env)
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "k.cu").write_text(source.replace(old, new))
    _compile(tmp_path, NVCC, "hand/k.cu", "hand.o")
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o") \
        != normalised(tmp_path / "plain.o")


@needs_nvcc
def test_a_refused_launch_is_explained_and_keeps_nvccs_object(tmp_path):
    # a refused launch: --explain says why, and the object is nvcc's
    (tmp_path / "k.cu").write_text(SHUFFLE)
    _compile(tmp_path, NVCC, "k.cu", "plain.o")
    [add] = explained(tmp_path, "-c", "k.cu")["kernels"]
    env = profiled(tmp_path / "p.profile", ("k.cu", "add", add["digest"], {"x": 512, "y": 1}))
    _compile(tmp_path, MIRECC_NVCC, "k.cu", "ours.o", env=env)
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    text = run([MIRECC_NVCC, "--explain", "-c", "k.cu"], tmp_path, env=env).stdout
    assert "not tunable: add is warp-synchronous (__shfl_down_sync)" in text
    assert "the profile's 512x1 is not applied" in text


@needs_nvcc
def test_the_head_reaches_a_knob_as_it_reaches_polybench(tmp_path):
    from mirecc.taskapi.config import load_config
    from mirecc.tasks.cuda_block.head import installed_head

    if installed_head(load_config()) is None:
        pytest.skip("no cuda-block head installed")
    (tmp_path / "k.cu").write_text(CHAIN)
    env = {**os.environ, "MIRECC_APPLY_CUDA_BLOCK": "1"}
    unit = explained(tmp_path, "-c", "k.cu", "-o", "ours.o", env=env)
    [tile] = unit["kernels"]
    # only the knob's own shapes are ranked: square, 8, 16 or 32 a side
    assert set(tile["head"]["ranking"]) <= {"8x8", "32x32"}
    _compile(tmp_path, NVCC, "k.cu", "plain.o")
    [decision] = unit["decisions"] or [None]
    if decision is None or not decision["applied"]:     # the head's gate said no
        assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
        return
    side = decision["value"].split("x")[0]
    assert decision["how"] == f"-DRD_WG_SIZE_0_0={side}"
    _compile(tmp_path, NVCC, "k.cu", "hand.o", f"-DRD_WG_SIZE_0_0={side}")
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o") \
        != normalised(tmp_path / "plain.o")


@needs_nvcc
def test_the_report_tabulates_a_tree_of_programs(tmp_path):
    from mirecc.tasks.cuda_block.offline import knobs_report

    tree = tmp_path / "tree"
    (tree / "ones" / "src").mkdir(parents=True)
    (tree / "ones" / "src" / "a.cu").write_text(IFNDEF)
    (tree / "ones" / "b.cu").write_text(SHUFFLE)
    (tree / "tiles").mkdir()
    (tree / "tiles" / "t.cu").write_text(CHAIN)
    (tree / "tiles" / "broken.cu").write_text("this is not CUDA\n")
    rows = knobs_report.survey(tree)
    by_file = {r["file"]: r for r in rows}
    assert [(lc["kernel"], lc["kind"], lc["refused"]) for lc in by_file["src/a.cu"]["launches"]] \
        == [("add", "macro-D", None)]
    assert by_file["b.cu"]["launches"][0]["refused"] == "warp-sync"
    assert by_file["broken.cu"]["object"].startswith("nvcc fails: ")
    assert [by_file[f]["object"] for f in ("src/a.cu", "b.cu", "t.cu")] == ["identical"] * 3
    text = knobs_report.render(rows, [tree], "knobs_report tree")
    assert "| tree | 2 | 4 | 3 | 2 | 2 | 0 | 0 | 0 | 1 | 3 of 3 built (1 .cu files did not " \
           "build alone) |" in text
    assert "| warp-sync | 1 |" in text
    assert "| tiles | t.cu | tile | 16x16 | -D macro | tunable (-D macro): -DRD_WG_SIZE_0_0=<n>" \
           " sets BLOCK_SIZE (t.cu:7); square shapes only [8x8, 16x16, 32x32] |" in text


def test_a_launch_written_in_a_string_is_no_launch():
    """printf("k<<<...>>>") and a character literal are text, not launches;
    the real launch beside them is still found, its offsets intact."""
    from mirecc.frontend.launches import _launches

    code = ('  printf("saxpy<<<%d, %d>>>\\n", g, b);\n'
            "  char c = '<'; puts(\"k<<<1, 2>>>()\");\n"
            "  saxpy<<<grid, BLOCK_SIZE>>>(n, x);\n")
    found = _launches(code)
    assert [(f.kernel, f.block[0]) for f in found] == [("saxpy", "BLOCK_SIZE")]
