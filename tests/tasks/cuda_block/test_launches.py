"""The cuda-block task: where a launch's block shape can be set (mirecc/launch.h,
PolyBench-ACC's DIM_THREAD_BLOCK defines), profile entries applied through
mirecc-nvcc, and what --explain says of each kernel's block."""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from nvcc_helpers import (COMPAT, HEADER, MARKED, MINI, MINI_H, MIRECC_NVCC, NVCC, POLYBENCH,
                          drop_in, explained, launches, needs_nvcc, normalised, profiled, run)

from mirecc.frontend.launches import scan_source
from mirecc.frontend import nvcc as nvcc_front

pytestmark = needs_nvcc

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
        cmd = nvcc_front.parse(["-c", str(tmp_path / "m.cu")])
        plan = launches.plan_source(scan_source(str(tmp_path / "m.cu"), cmd), cmd)
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
    # a literal block whose grid is a fixed count: advisory
    assert blocks("", "k<<<4, 256>>>();\n")["k"][2] == (
        "advisory: not tunable: the grid of the k launch (4) does not follow the block's x (256)")
    assert nvcc_front.source_name("_Z5saxpyifPKfPf") == "saxpy"
    assert nvcc_front.source_name("_ZN2ns6kernelIfEEvPT_") == "kernel"
    assert nvcc_front.source_name("_ZN12_GLOBAL__N_16kernelEv") == "kernel"
    assert nvcc_front.source_name("plain_c_kernel") == "plain_c_kernel"


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
