#!/usr/bin/env bash
# One GPU lease of CUDA block-shape labels (the device tool runs it in the
# repository root; results under $OUT, copied to heads/cuda-block/labels/):
#   1. the project's own kernels (kernels/, <mirecc/launch.h>),
#      two sizes each, outputs checked against a CPU reference;
#   2. PolyBench-ACC at one size past those already labelled (LARGE; the next
#      class where the earlier labels used a custom size), timed only: a CPU
#      reference at these sizes takes minutes; wrong shapes are known from the
#      three checked sizes.  correlation (STANDARD: seconds per run) and the
#      programs with no settable macro (gramschmidt, lu, adi) are left out.
# .cudasrc is a copy of ../shared/datasets/polybench-acc/CUDA (carried).
set -u
out=${OUT:-/tmp/cuda-lease}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 mirecc/tasks/cuda_block/offline/cuda_own_labels.py --out "$out/own" --deadline-s "${OWN_S:-280}"
python3 mirecc/tasks/cuda_block/offline/cuda_labels.py --src .cudasrc --out "$out/more" --deadline-s "${MORE_S:-230}" \
    --no-check --sizes LARGE,covariance=SMALL,2mm=STANDARD,syr2k=STANDARD,fdtd-2d=STANDARD \
    --programs covariance,2mm,3mm,atax,bicg,doitgen,gemm,gemver,gesummv,mvt,syr2k,syrk,convolution-2d,convolution-3d,fdtd-2d,jacobi-1d-imper,jacobi-2d-imper
