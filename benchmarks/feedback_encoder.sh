#!/usr/bin/env bash
# The encoder pretrained on compiler feedback, from nothing to its judgement:
#
#   benchmarks/feedback_encoder.sh [STEP...]      (default: every step, in order)
#
# corpus:  1,500 generated loop kernels and nine Debian packages (mire corpus build)
# labels:  each function's outcome vector (python -m mirecc.encoder.feedback; resumes)
# train:   mire pretrain-feedback from the shipped weights, once per objective
#          (regression, contrastive), 25 minutes each, one thread each, side by side
# speed:   what a function's own vector costs (benchmarks/function_embed_speed.py)
# judge:   mire bench encoder with both trained encoders beside the shipped one
#          (docs/results/encoder-judge.md)
#
# Everything goes under .work/ (not committed); each step skips what it has done.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python mire=.venv/bin/mire
corpus=.work/fb-corpus labels=.work/fb-labels.jsonl
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(corpus labels train speed judge)
objectives=(regression contrastive)

for step in "${steps[@]}"; do
    echo "== $step"
    case "$step" in
    corpus) "$mire" corpus build --out "$corpus" --sources kernels --kernel-count 1500
            "$mire" corpus build --out "$corpus" --sources debian --jobs 2 \
                --packages zlib,bzip2,lua5.4,libyaml,libogg,expat,libpng1.6,jansson,lz4 ;;
    labels) "$py" -m mirecc.encoder.feedback --corpus "$corpus" --out "$labels" --jobs 2 ;;
    train)  for o in "${objectives[@]}"; do
                [ -f ".work/pretrain/feedback-$o/model/manifest.json" ] && continue
                "$mire" pretrain-feedback --corpus "$corpus" --labels "$labels" \
                    --out ".work/pretrain/feedback-$o" --objective "$o" --minutes 25 \
                    --threads 1 &
            done
            wait ;;
    speed)  "$py" benchmarks/function_embed_speed.py ;;
    judge)  models=() kinds="statistics,ir2vec,random-init,encoder,statistics+encoder"
            kinds+=",random-init@function,encoder@function,statistics+random-init@function"
            kinds+=",statistics+encoder@function"
            for o in "${objectives[@]}"; do
                models+=(--judge-model "$o=.work/pretrain/feedback-$o/model")
                kinds+=",$o,$o@function,statistics+$o,statistics+$o@function"
            done
            "$mire" bench encoder --out .work/bench-encoder --judge-kinds "$kinds" --judge-jobs 2 \
                "${models[@]}" \
                --judge-seeds 2 --judge-efficiency-kinds "statistics,statistics+encoder,statistics+regression,statistics+contrastive" ;;
    *)      echo "unknown step: $step" >&2; exit 2 ;;
    esac
done
