"""mirecc-nvcc: nvcc's own build (objects, messages, exit codes) with
mirecc's device IR on the side: clang's CUDA mode reads each kernel, the
graph builder and the shipped encoder embed it, --explain lists it."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from mirecc.frontend import nvcc as front

from nvcc_helpers import (CLANGXX, COMPAT, MIRECC_NVCC, NVCC, POLYBENCH, SAXPY, drop_in, needs_nvcc,
                          normalised, run)

pytestmark = needs_nvcc

def test_parse_finds_sources_preprocessor_flags_and_architecture():
    cmd = front.parse(["-O3", "-arch=sm_80", "-I", "inc", "-Iother", "-DX=1",
                         "--define-macro=Y", "-Xcompiler", "-fopenmp", "-o", "out.o",
                         "-c", "a.cu", "-x", "cu", "b.c", "-std=c++17", "-isystem", "sys"])
    assert cmd.sources == ["a.cu", "b.c"] and cmd.compiles
    assert cmd.preprocessor == ["-I", "inc", "-I", "other", "-DX=1", "-DY", "-std=c++17",
                                "-isystem", "sys"]
    assert front.device_arch(cmd) == "sm_80"
    gencode = front.parse(["-gencode", "arch=compute_70,code=sm_70", "k.cu"])
    assert front.device_arch(gencode) == "sm_70"
    assert front.device_arch(front.parse(["k.cu"])) == front.DEFAULT_ARCH
    assert not front.parse(["-M", "k.cu"]).compiles
    assert front.split_own(["--explain=json", "-c", "k.cu"]) == (["-c", "k.cu"], "json")
    with pytest.raises(ValueError, match="unknown --explain format"):
        front.split_own(["--explain=xml"])


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
    # the shipped head is shown, never applied without the setting; saxpy's
    # launches are not tunable, so it ranks nothing here
    assert unit["decisions"] == [] and unit["head"] == "cuda-block"
    assert "not applied (set MIRECC_APPLY_CUDA_BLOCK=1" in unit["no_decision"]
    assert not any("head" in k for k in kernels.values())
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
    cmd = front.parse(flags)
    bc = front.device_ir(str(source), cmd, front.toolkit_of(NVCC), CLANGXX,
                           tmp_path / "dev.bc")
    kernels = front.read_kernels(drop_in.device_context(str(source), cmd, bc))
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


def test_device_ir_reads_cuda_13s_cccl_headers_as_nvcc_does(tmp_path):
    # CUDA 13 keeps libcu++ / CUB / Thrust in include/cccl, which nvcc puts on
    # its include path and which need C++17; a -std of the command still wins
    toolkit = tmp_path / "cuda"
    (toolkit / "include" / "cccl").mkdir(parents=True)
    cmd = front.parse(["-std=c++20", "-DN=4", "-c", "k.cu"])
    line = front.device_ir_command("k.cu", cmd, toolkit, "clang++", tmp_path / "k.bc")
    i = line.index(str(toolkit / "include" / "cccl"))
    assert line[i - 1] == "-isystem" and line[i + 1] == "-std=c++17"
    assert line.index("-std=c++20") > i and "-DN=4" in line
    older = tmp_path / "cuda12"
    (older / "include").mkdir(parents=True)
    line = front.device_ir_command("k.cu", cmd, older, "clang++", tmp_path / "k.bc")
    assert "-std=c++17" not in line and not any("cccl" in a for a in line)


@needs_nvcc
def test_the_toolkit_of_an_nvcc_wrapper_is_the_real_nvccs(tmp_path):
    # a script on PATH that execs the real nvcc (as Debian's or a module's)
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {NVCC} "$@"\n')
    wrapper.chmod(0o755)
    real = front.toolkit_of(NVCC)
    assert (real / "include" / "cuda_runtime.h").is_file()
    assert front.toolkit_of(str(wrapper)) == real


@needs_nvcc
def test_device_ir_of_a_source_clang_14_cannot_read_comes_from_a_newer_clang(tmp_path):
    toolkits = [front.toolkit_of(NVCC), front.toolkit_of("/usr/local/cuda/bin/nvcc")]
    toolkit = next((t for t in toolkits if (t / "include" / "cccl").is_dir()), None)
    newer = front.newer_clang("clang++-14")
    if toolkit is None or newer is None or not shutil.which("clang++-14"):
        pytest.skip("needs CUDA 13's include/cccl, clang 14 and a newer clang")
    source = tmp_path / "k.cu"      # libcu++ of CUDA 13: C++17 and more than clang 14 reads
    source.write_text("#include <cuda/std/type_traits>\n"
                      "__global__ void k(float *a) { a[threadIdx.x] = "
                      "cuda::std::is_same_v<float, float>; }\n")
    cmd = front.parse(["-c", str(source)])
    first = subprocess.run(front.device_ir_command(str(source), cmd, toolkit, "clang++-14",
                                                   tmp_path / "a.bc", "sm_75"),
                           capture_output=True, text=True)
    assert first.returncode != 0
    bc = front.device_ir(str(source), cmd, toolkit, "clang++-14", tmp_path / "k.bc")
    assert bc.stat().st_size > 0
