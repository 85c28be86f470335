"""What the mirecc-nvcc tests share: nvcc, the commands, small CUDA sources."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirecc.driver import nvcc as drop_in
from mirecc.frontend.launches import HEADER_DIR
from mirecc.frontend.nvcc import find_nvcc
from mirecc.tasks.cuda_block import launches

MIRECC_NVCC = str(Path(sys.executable).with_name("mirecc-nvcc"))
NVCC = find_nvcc()
CLANGXX = shutil.which("clang++-14")
POLYBENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "polybench-acc" / "CUDA"
# CUDA 12 removed cudaThreadSynchronize, which PolyBench-ACC (2012) calls
COMPAT = "-DcudaThreadSynchronize=cudaDeviceSynchronize"

needs_nvcc = pytest.mark.skipif(NVCC is None or not shutil.which("g++") or not CLANGXX,
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
    """An object with nvcc's temporary-file stem blanked (the front end's)."""
    from mirecc.frontend.nvcc import normalised_object

    return normalised_object(path)


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env)


HEADER = str(HEADER_DIR)

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
    from mirecc.taskapi.profile import FORMAT_LINE, format_entry

    path.write_text("\n".join([FORMAT_LINE] + [format_entry("cuda-block", *e)
                                               for e in entries]) + "\n")
    return {**os.environ, "MIRECC_PROFILE": str(path)}
