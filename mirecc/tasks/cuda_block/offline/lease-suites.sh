#!/usr/bin/env bash
# One GPU lease of block-shape labels for other suites' CUDA programs
# (Rodinia, NVIDIA's CUDA Samples, HeCBench): the device tool runs it in the
# repository root with .work/cuda-suites carried, built here first (no GPU):
#   python -m mirecc.tasks.cuda_block.offline.suite_labels prepare \
#       --rodinia <gpu-rodinia> --samples <cuda-samples> --hecbench <HeCBench> \
#       --nvcc /usr/local/cuda/bin/nvcc --out .work/cuda-suites
# Call it with timeout_s 570: the run stops starting processes at 480 s.
# Results under $OUT/suites; cuda_labels.jsonl goes to
# heads/cuda-block/labels/suites.jsonl.gz and cuda_machine.json to
# suites-machine.json.gz (gzip -n), the summary and log beside them.
set -u
out=${OUT:-/tmp/cuda-lease}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 mirecc/tasks/cuda_block/offline/suite_labels.py run --bundle .work/cuda-suites \
    --out "$out/suites" --deadline-s "${SUITES_S:-480}" --repeats "${REPEATS:-5}" \
    --call-timeout "${CALL_S:-20}"
