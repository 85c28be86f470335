#!/usr/bin/env bash
# Issue 19 on a CPU: the small encoder pretrained on every corpus module (the
# large ones cut into per-function pieces) within the shipped model's budget
# (75 minutes, 4,825 steps), exported, and judged on the task benchmarks
# beside a random-init encoder of the same shape.
#
#   benchmarks/pretrain_pieces.sh [STEP...]      (default: every step, in order)
#
# Steps: pack pretrain export devmap coarsening size vectorize.  Each step
# reads what the earlier ones wrote under .work (resumable: pretrain resumes
# from its checkpoint, the benchmarks cache their embeddings).  Needs the
# corpus (`mire corpus build`, hours) and, for the benchmarks, the task data
# their README sections name (.work/size-labels, .work/vectorize/default).
set -euo pipefail
cd "$(dirname "$0")/.."
mire=.venv/bin/mire
pack=.work/corpus.pack.npz
run=.work/pretrain/pieces
model=.work/models/pieces
out=.work/bench-pieces
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(pack pretrain export devmap coarsening size vectorize)

for step in "${steps[@]}"; do
    echo "== $step"
    case "$step" in
    pack)       "$mire" corpus pack --corpus .work/corpus --out "$pack" ;;
    pretrain)   "$mire" pretrain --pack "$pack" --out "$run" --config small \
                    --max-steps 4825 --time-budget 75 --eval-modules 192 --eval-every 965 ;;
    export)     "$mire" export --model "$run/model.pt" --out "$model" --corpus .work/corpus \
                    --name mirencoder-small-pieces ;;
    devmap|coarsening|size|vectorize)
                benchmarks/encoder_tasks.sh "$model" "$out" "$step" ;;
    *)          echo "unknown step: $step" >&2; exit 2 ;;
    esac
done
