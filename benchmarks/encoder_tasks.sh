#!/usr/bin/env bash
# The task benchmarks of an exported encoder, each beside a random-init
# encoder of the same shape (made and cached by the benchmarks themselves):
#
#   benchmarks/encoder_tasks.sh MODEL_DIR OUT_DIR [TASK...]
#
# Tasks (default: all, in order): devmap coarsening size vectorize. Reads
# the task data their README sections name (.work/size-labels,
# .work/vectorize/default); the benchmarks cache their embeddings, so a
# task run again only redoes its folds.
set -euo pipefail
cd "$(dirname "$0")/.."
mire=.venv/bin/mire
model=$1 out=$2
shift 2
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(devmap coarsening size vectorize)
name=$(basename "$model")

for task in "${tasks[@]}"; do
    echo "== $task ($model)"
    case "$task" in
    devmap|coarsening)
               "$mire" bench "$task" --model "$model" --out "$out" ;;
    size)      "$mire" bench size --model "$model" --out "$out/size" ;;
    vectorize) "$mire" vectorize-train --data .work/vectorize/default --model "$model" \
                   --out ".work/heads-vt/$name"
               "$mire" bench tune --tune-data .work/vectorize/default \
                   --tune-head ".work/heads-vt/$name" --tune-model "$model" --out "$out/tune" ;;
    *)         echo "unknown task: $task" >&2; exit 2 ;;
    esac
done
