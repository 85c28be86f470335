"""mirecc-nvcc: nvcc's own build (objects, messages, exit codes) with
mirecc's device IR on the side: clang's CUDA mode reads each kernel, the
graph builder and the shipped encoder embed it, --explain lists it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirecc import nvcc as drop_in
from mirecc.tasks.cuda_block import launches

MIRECC_NVCC = str(Path(sys.executable).with_name("mirecc-nvcc"))
NVCC = drop_in.find_nvcc()
CLANGXX = shutil.which("clang++-14")
POLYBENCH = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "polybench-acc" / "CUDA"
# CUDA 12 removed cudaThreadSynchronize, which PolyBench-ACC (2012) calls
COMPAT = "-DcudaThreadSynchronize=cudaDeviceSynchronize"

pytestmark = pytest.mark.skipif(NVCC is None or not shutil.which("g++") or not CLANGXX,
                                reason="needs nvcc (pip install '.[cuda]'), g++ and clang++-14")

SAXPY = """\
#include <cstdio>
#define BLOCK 128
__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void scale(int n, float *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] *= 2.0f;
}
int main() {
  printf("%d\\n", BLOCK);
  return 0;
}
"""


def normalised(path: Path) -> bytes:
    """An object with nvcc's temporary-file stem (tmpxft_<pid>_<n>, which
    differs between two runs of nvcc itself) blanked."""
    return re.sub(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}", b"tmpxft_" + b"0" * 17, path.read_bytes())


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env)


def test_parse_finds_sources_preprocessor_flags_and_architecture():
    cmd = drop_in.parse(["-O3", "-arch=sm_80", "-I", "inc", "-Iother", "-DX=1",
                         "--define-macro=Y", "-Xcompiler", "-fopenmp", "-o", "out.o",
                         "-c", "a.cu", "-x", "cu", "b.c", "-std=c++17", "-isystem", "sys"])
    assert cmd.sources == ["a.cu", "b.c"] and cmd.compiles
    assert cmd.preprocessor == ["-I", "inc", "-I", "other", "-DX=1", "-DY", "-std=c++17",
                                "-isystem", "sys"]
    assert drop_in.device_arch(cmd) == "sm_80"
    gencode = drop_in.parse(["-gencode", "arch=compute_70,code=sm_70", "k.cu"])
    assert drop_in.device_arch(gencode) == "sm_70"
    assert drop_in.device_arch(drop_in.parse(["k.cu"])) == drop_in.DEFAULT_ARCH
    assert not drop_in.parse(["-M", "k.cu"]).compiles
    assert drop_in.split_own(["--explain=json", "-c", "k.cu"]) == (["-c", "k.cu"], "json")
    with pytest.raises(ValueError, match="unknown --explain format"):
        drop_in.split_own(["--explain=xml"])


def test_objects_messages_and_exit_codes_are_nvccs(tmp_path):
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    ours = run([MIRECC_NVCC, "-O3", "-c", "saxpy.cu", "-o", "ours.o"], tmp_path)
    theirs = run([NVCC, "-O3", "-c", "saxpy.cu", "-o", "theirs.o"], tmp_path)
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "theirs.o")
    # a linked program runs without a GPU as far as its host code goes
    assert run([MIRECC_NVCC, "saxpy.cu", "-o", "saxpy"], tmp_path).returncode == 0
    assert run([str(tmp_path / "saxpy")], tmp_path).stdout == "128\n"
    (tmp_path / "bad.cu").write_text("__global__ void k( { }\n")
    ours = run([MIRECC_NVCC, "--explain", "-c", "bad.cu", "-o", "bad.o"], tmp_path)
    theirs = run([NVCC, "-c", "bad.cu", "-o", "bad.o"], tmp_path)
    assert ours.returncode == theirs.returncode != 0
    assert ours.stderr == theirs.stderr and ours.stdout == ""
    missing = run([MIRECC_NVCC, "-c", "saxpy.cu"], tmp_path,
                  env={"PATH": "/usr/bin:/bin", "MIRECC_NVCC": "/nonexistent/nvcc"})
    assert missing.returncode == 127 and "no nvcc found" in missing.stderr


def test_explain_lists_every_kernel_with_its_embedding(tmp_path):
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    proc = run([MIRECC_NVCC, "--explain=json", "-c", "saxpy.cu", "-o", "s.o"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    [unit] = json.loads(proc.stdout)["translation_units"]
    kernels = {k["name"]: k for k in unit["kernels"]}
    assert set(kernels) == {"_Z5saxpyifPKfPf", "_Z5scaleiPf"}
    assert all(k["instructions"] > 5 and k["embedding"] == 256 for k in kernels.values())
    assert unit["decisions"] == [] and "no CUDA head" in unit["no_decision"]
    text = run([MIRECC_NVCC, "--explain", "-c", "saxpy.cu", "-o", "s.o"], tmp_path).stdout
    assert "kernel _Z5saxpyifPKfPf:" in text and "kernel _Z5scaleiPf:" in text


@pytest.mark.skipif(not POLYBENCH.is_dir(), reason="needs ../shared/datasets/polybench-acc")
@pytest.mark.parametrize("program", ["linear-algebra/kernels/gemm/gemm.cu",
                                     "stencils/convolution-3d/3DConvolution.cu",
                                     "datamining/correlation/correlation.cu"])
def test_polybench_programs_give_nvccs_objects_and_every_kernel_a_graph(program, tmp_path):
    from mirecc.graph import build_graph_any

    source = POLYBENCH / program
    flags = ["-O3", COMPAT, f"-I{POLYBENCH / 'utilities'}", f"-I{source.parent}", "-c",
             str(source)]
    assert run([MIRECC_NVCC, *flags, "-o", "ours.o"], tmp_path).returncode == 0
    assert run([NVCC, *flags, "-o", "theirs.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "theirs.o")
    cmd = drop_in.parse(flags)
    bc = drop_in.device_ir(str(source), cmd, drop_in.toolkit_of(NVCC), CLANGXX,
                           tmp_path / "dev.bc")
    kernels = drop_in.read_kernels(bc)
    launches = set(re.findall(r"(\w+)\s*<<<", source.read_text()))
    assert len(kernels) == len(launches) > 0
    graph = build_graph_any(bc)
    assert {k.name for k in kernels} <= set(graph.function_names)
    assert all(k.embedding is not None and len(k.embedding) == 256 for k in kernels)


# ------------------------------------------------------------------ launch shapes
# A decisions profile's cuda-block entries set a kernel's block shape where
# the launch is tunable (mirecc/launch.h, or PolyBench's DIM_THREAD_BLOCK
# defines with the grid derived from them).  Nothing can run here (no GPU):
# the tests check that the decision reaches the object, and that it is
# exactly nvcc's object for the same shape set by hand.

HEADER = str(launches.HEADER_DIR)

MARKED = """\
#include <cstdio>
#include <mirecc/launch.h>
#define BX MIRECC_BLOCK_X(saxpy, 128)
#define BY MIRECC_BLOCK_Y(saxpy, 1)
// the shape also bounds the kernel, so that it shows in the device code
__global__ void __launch_bounds__(BX * BY) saxpy(int n, float a, const float *x, float *y) {
  int i = (blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void scale(int n, float *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] *= 2.0f;
}
int main() {
  dim3 block(BX, BY);
  dim3 grid((1000 + block.x * block.y - 1) / (block.x * block.y));
  saxpy<<<grid, block>>>(1000, 2.0f, 0, 0);
  scale<<<4, 256>>>(1000, 0);
  printf("%u %u\\n", block.x, block.y);
  return 0;
}
"""

MINI_H = """\
#ifndef MINI_CUH
#define MINI_CUH
#ifdef LARGE_DATASET
#define N 4096
#else
#define N 1024
#endif
/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
#define DIM_THREAD_BLOCK_KERNEL_2_X 256
#define DIM_THREAD_BLOCK_KERNEL_2_Y 1
#endif
"""

MINI = """\
#include <cstdio>
#include "mini.cuh"
__global__ void add_one(float *a) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < N && j < N) a[i * N + j] += 1.0f;
}
// one block walks every row: its grid does not follow its block
__global__ void row_sums(const float *a, float *s) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    for (int j = 0; j < N; j++) s[i] += a[i * N + j];
}
int main() {
  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((N + block.x - 1) / block.x, (N + DIM_THREAD_BLOCK_Y - 1) / DIM_THREAD_BLOCK_Y);
  add_one<<<grid, block>>>(0);
  dim3 block2(DIM_THREAD_BLOCK_KERNEL_2_X, DIM_THREAD_BLOCK_KERNEL_2_Y);
  dim3 grid2(1, 1);
  row_sums<<<grid2, block2>>>(0, 0);
  printf("%u %u %u %u\\n", block.x, block.y, block2.x, block2.y);
  return 0;
}
"""


def explained(cwd: Path, *flags: str, env=None) -> dict:
    proc = run([MIRECC_NVCC, "--explain=json", *flags], cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    [unit] = json.loads(proc.stdout)["translation_units"]
    return unit


def profiled(path: Path, *entries: tuple) -> dict:
    """MIRECC_PROFILE set to a profile at ``path`` with cuda-block ``entries``."""
    from mirecc.profile import FORMAT_LINE, format_entry

    path.write_text("\n".join([FORMAT_LINE] + [format_entry("cuda-block", *e)
                                               for e in entries]) + "\n")
    return {**os.environ, "MIRECC_PROFILE": str(path)}


def test_the_launch_header_needs_nothing_defined_and_takes_a_defined_shape(tmp_path):
    (tmp_path / "k.cu").write_text(MARKED)
    for flags, shape in (([], "128 1\n"), (["-std=c++11", "-DMIRECC_BLOCK_saxpy_X=64"], "64 1\n"),
                         (["-DMIRECC_BLOCK_saxpy_X=256", "-DMIRECC_BLOCK_saxpy_Y=4"], "256 4\n")):
        assert run([NVCC, f"-I{HEADER}", *flags, "k.cu", "-o", "k"], tmp_path).returncode == 0
        assert run([str(tmp_path / "k")], tmp_path).stdout == shape
    bad = run([NVCC, f"-I{HEADER}", "-DMIRECC_BLOCK_saxpy_Y=wide", "-c", "k.cu"], tmp_path)
    assert bad.returncode != 0 and "must be a positive integer" in bad.stdout + bad.stderr


def test_a_profiled_block_shape_reaches_the_object_through_the_header(tmp_path):
    (tmp_path / "k.cu").write_text(MARKED)
    unit = explained(tmp_path, "-c", "k.cu", "-o", "k.o")
    kernels = {k["source_name"]: k for k in unit["kernels"]}
    assert kernels["saxpy"]["block"] == {
        "shape": "128x1", "origin": "source default", "tunable": "header", "advisory": False,
        "macros": ["MIRECC_BLOCK_saxpy_X", "MIRECC_BLOCK_saxpy_Y"],
        "note": "marked with mirecc/launch.h"}
    assert kernels["scale"]["block"]["advisory"] and "not tunable" in kernels["scale"]["block"]["note"]
    # no profile: nvcc's object, the header's folder on its include path
    assert run([NVCC, "-isystem", HEADER, "-c", "k.cu", "-o", "plain.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "k.o") == normalised(tmp_path / "plain.o")

    env = profiled(tmp_path / "p.profile",
                   ("k.cu", "saxpy", kernels["saxpy"]["digest"], {"x": 256, "y": 4}, "1.30x"),
                   ("k.cu", "scale", kernels["scale"]["digest"], {"x": 64, "y": 1}))
    env["MIRECC_CACHE_DIR"] = str(tmp_path / "cache")
    proc = run([MIRECC_NVCC, "-c", "k.cu", "-o", "ours.o"], tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # counted as the C path's compiles are (mire stats)
    mire = str(Path(sys.executable).with_name("mire"))
    counted = run([mire, "stats"], tmp_path, env=env).stdout
    assert re.search(r"CUDA compiles \(mirecc-nvcc\) +1\n +with a block shape applied +1\n",
                     counted), counted
    by_hand = ["-isystem", HEADER, "-DMIRECC_BLOCK_saxpy_X=256", "-DMIRECC_BLOCK_saxpy_Y=4"]
    assert run([NVCC, *by_hand, "-c", "k.cu", "-o", "hand.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o") \
        != normalised(tmp_path / "plain.o")
    # in the device code (the kernel's bound) and in the program's launch
    assert run([MIRECC_NVCC, "-ptx", "k.cu", "-o", "k.ptx"], tmp_path, env=env).returncode == 0
    assert ".maxntid 1024, 1, 1" in (tmp_path / "k.ptx").read_text()
    assert run([MIRECC_NVCC, "k.cu", "-o", "k"], tmp_path, env=env).returncode == 0
    assert run([str(tmp_path / "k")], tmp_path).stdout == "256 4\n"

    unit = explained(tmp_path, "-c", "k.cu", "-o", "ours.o", env=env)
    saxpy, scale = unit["decisions"]
    assert saxpy["applied"] and saxpy["value"] == "256x4" and "p.profile:2 (1.30x)" in saxpy["reason"]
    assert not scale["applied"] and "not tunable" in scale["advisory"]
    text = run([MIRECC_NVCC, "--explain", "-c", "k.cu", "-o", "ours.o"], tmp_path, env=env).stdout
    assert "block 256x4 (saxpy, digest" in text and "from the decisions profile" in text
    assert "block 256x1 (scale" in text and "the profile's 64x1 is not applied" in text


def test_stale_entries_are_counted_and_a_bad_profile_is_one_warning(tmp_path):
    (tmp_path / "k.cu").write_text(MARKED)
    digest = {k["source_name"]: k["digest"] for k in explained(
        tmp_path, "-c", "k.cu", "-o", "k.o")["kernels"]}["saxpy"]
    (tmp_path / "k.cu").write_text(MARKED.replace("a * x[i]", "a * x[i] * x[i]"))
    assert run([NVCC, "-isystem", HEADER, "-c", "k.cu", "-o", "plain.o"], tmp_path).returncode == 0
    env = profiled(tmp_path / "p.profile", ("k.cu", "saxpy", digest, {"x": 256, "y": 4}))
    proc = run([MIRECC_NVCC, "-c", "k.cu", "-o", "ours.o"], tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    unit = explained(tmp_path, "-c", "k.cu", "-o", "ours.o", env=env)
    assert unit["decisions"] == []
    assert any("1 cuda-block entry for this source ignored: the kernel changed" in r
               for r in unit["no_decision_reasons"])

    (tmp_path / "p.profile").write_text(f"# mirecc decisions profile 1\n"
                                        f"cuda-block k.cu saxpy {digest} 32by8\n")
    proc = run([MIRECC_NVCC, "-c", "k.cu", "-o", "ours.o"], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    [warning] = proc.stderr.splitlines()
    assert warning.startswith("mirecc-nvcc: warning: ") and "p.profile:2" in warning \
        and "expected a thread-block shape" in warning
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")


def test_polybench_style_defines_are_rewritten_in_a_copy(tmp_path):
    mini = tmp_path / "mini"
    mini.mkdir()
    (mini / "mini.cuh").write_text(MINI_H)
    (mini / "mini.cu").write_text(MINI)
    flags = ["-c", "mini/mini.cu", "-MD", "-MF"]
    assert run([NVCC, *flags, "plain.d", "-o", "plain.o"], tmp_path).returncode == 0
    assert run([MIRECC_NVCC, *flags, "ours.d", "-o", "ours.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
    kernels = {k["source_name"]: k for k in explained(tmp_path, "-c", "mini/mini.cu")["kernels"]}
    assert kernels["add_one"]["block"]["tunable"] == "define"
    assert kernels["add_one"]["block"]["macros"] == ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"]
    assert kernels["row_sums"]["block"]["advisory"]
    assert "does not follow" in kernels["row_sums"]["block"]["note"]
    large = {k["source_name"]: k["digest"] for k in explained(
        tmp_path, "-DLARGE_DATASET", "-c", "mini/mini.cu")["kernels"]}

    env = profiled(tmp_path / "p.profile",
                   ("mini/mini.cu", "add_one", kernels["add_one"]["digest"], {"x": 64, "y": 4}),
                   ("mini/mini.cu", "add_one@LARGE_DATASET", large["add_one"], {"x": 16, "y": 16}),
                   ("mini/mini.cu", "row_sums", kernels["row_sums"]["digest"], {"x": 128, "y": 1}))
    proc = run([MIRECC_NVCC, *flags, "ours.d", "-o", "ours.o"], tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # exactly nvcc's object for the same copy rewritten by hand
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "mini.cu").write_text(MINI)
    (hand / "mini.cuh").write_text(MINI_H.replace("_X 32", "_X 64").replace("_Y 8", "_Y 4"))
    assert run([NVCC, "-c", "hand/mini.cu", "-o", "hand.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o") \
        != normalised(tmp_path / "plain.o")
    # the dependency file names the originals, as nvcc's own does
    assert (tmp_path / "ours.d").read_text().replace("ours.o", "plain.o") == \
        (tmp_path / "plain.d").read_text()
    for extra, shape in (([], "64 4 256 1\n"), (["-DLARGE_DATASET"], "16 16 256 1\n")):
        assert run([MIRECC_NVCC, *extra, "mini/mini.cu", "-o", "mini.x"], tmp_path,
                   env=env).returncode == 0
        assert run([str(tmp_path / "mini.x")], tmp_path).stdout == shape
    unit = explained(tmp_path, "-c", "mini/mini.cu", env=env)
    blocks = {k["source_name"]: k["block"] for k in unit["kernels"]}
    assert blocks["add_one"]["shape"] == "64x4" and "p.profile:2" in blocks["add_one"]["origin"]
    assert blocks["row_sums"]["shape"] == "256x1" and blocks["row_sums"]["advisory"]

    # the source asserts its shape: nvcc fails with the decision, so one
    # warning and nvcc's own build
    (mini / "mini.cu").write_text(MINI + 'static_assert(DIM_THREAD_BLOCK_X == 32, "tuned");\n')
    assert run([NVCC, "-c", "mini/mini.cu", "-o", "plain.o"], tmp_path).returncode == 0
    proc = run([MIRECC_NVCC, "-c", "mini/mini.cu", "-o", "ours.o"], tmp_path, env=env)
    assert proc.returncode == 0 and "launch decisions not applied (nvcc failed" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")


def test_a_block_macro_is_set_only_where_every_grid_follows_it(tmp_path):
    def blocks(header: str, main: str) -> dict:
        (tmp_path / "m.cuh").write_text(header)
        (tmp_path / "m.cu").write_text('#include "m.cuh"\n__global__ void k() {}\n'
                                       '__global__ void j() {}\nint main() {\n' + main + "}\n")
        cmd = drop_in.parse(["-c", str(tmp_path / "m.cu")])
        plan = launches.plan_source(launches.scan_source(str(tmp_path / "m.cu"), cmd), cmd)
        return {name: (b.tunable, b.macros, b.note) for name, b in plan.blocks.items()}

    defines = "#define DIM_THREAD_BLOCK_X 32\n#define DIM_THREAD_BLOCK_Y 8\n"
    follows = ("dim3 b(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);\n"
               "dim3 g(100 / b.x, 100 / DIM_THREAD_BLOCK_Y);\nk<<<g, b>>>();\n")
    assert blocks(defines, follows)["k"][:2] == ("define", ["DIM_THREAD_BLOCK_X",
                                                            "DIM_THREAD_BLOCK_Y"])
    # another launch shares the macro with a fixed grid: nobody may change it
    fixed = follows + "j<<<1, b>>>();\n"
    assert blocks(defines, fixed)["k"][0] is None and "j launch" in blocks(defines, fixed)["k"][2]
    # the grid's y counts blocks of x (covariance's reduce_kernel)
    crossed = follows.replace("100 / DIM_THREAD_BLOCK_Y", "100 / DIM_THREAD_BLOCK_X")
    k = blocks(defines, crossed)["k"]
    assert k[0] is None and "uses it for its y" in k[2]
    # defined under a condition, or twice
    assert blocks("#ifdef BIG\n" + defines + "#endif\n", follows)["k"][0] is None
    twice = blocks(defines + "#undef DIM_THREAD_BLOCK_X\n", follows)["k"]
    assert twice[1] == [None, "DIM_THREAD_BLOCK_Y"] and "more than once" in twice[2]
    # no macro at all: advisory
    assert blocks("", "k<<<4, 256>>>();\n")["k"][2] == "advisory: " + launches.ADVISORY
    assert drop_in.source_name("_Z5saxpyifPKfPf") == "saxpy"
    assert drop_in.source_name("_ZN2ns6kernelIfEEvPT_") == "kernel"
    assert drop_in.source_name("_ZN12_GLOBAL__N_16kernelEv") == "kernel"
    assert drop_in.source_name("plain_c_kernel") == "plain_c_kernel"


@pytest.mark.skipif(not POLYBENCH.is_dir(), reason="needs ../shared/datasets/polybench-acc")
def test_polybench_block_shapes_from_a_profile(tmp_path):
    gemm = POLYBENCH / "linear-algebra" / "kernels" / "gemm"
    flags = ["-O3", COMPAT, f"-I{POLYBENCH / 'utilities'}", f"-I{gemm}", "-c"]
    digest = {k["source_name"]: k["digest"] for k in explained(
        tmp_path, *flags, str(gemm / "gemm.cu"))["kernels"]}["gemm_kernel"]
    gram = POLYBENCH / "linear-algebra" / "solvers" / "gramschmidt"
    grams = {k["source_name"]: k for k in explained(
        tmp_path, *flags[:-2], f"-I{gram}", "-c", str(gram / "gramschmidt.cu"))["kernels"]}
    # kernel 1's grid is fixed at one block: the shared DIM_THREAD_BLOCK_X is not tunable
    assert all(k["block"]["advisory"] for k in grams.values())
    env = profiled(tmp_path / "p.profile",
                   (str(gemm / "gemm.cu"), "gemm_kernel", digest, {"x": 64, "y": 4}),
                   (str(gram / "gramschmidt.cu"), "gramschmidt_kernel2",
                    grams["gramschmidt_kernel2"]["digest"], {"x": 128, "y": 1}))
    assert run([MIRECC_NVCC, *flags, str(gemm / "gemm.cu"), "-o", "ours.o"], tmp_path,
               env=env).returncode == 0
    hand = tmp_path / "hand"
    hand.mkdir()
    shutil.copy(gemm / "gemm.cu", hand)
    (hand / "gemm.cuh").write_text((gemm / "gemm.cuh").read_text().replace(
        "DIM_THREAD_BLOCK_X 32", "DIM_THREAD_BLOCK_X 64").replace(
        "DIM_THREAD_BLOCK_Y 8", "DIM_THREAD_BLOCK_Y 4"))
    assert run([NVCC, *flags, str(hand / "gemm.cu"), "-o", "hand.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o")
    gram_flags = [*flags[:-2], f"-I{gram}", "-c", str(gram / "gramschmidt.cu")]
    assert run([MIRECC_NVCC, *gram_flags, "-o", "ours.o"], tmp_path, env=env).returncode == 0
    assert run([NVCC, *gram_flags, "-o", "plain.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")
