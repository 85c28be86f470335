#!/usr/bin/env bash
# Issue 19 part 2: the paper-size encoder (22.6M parameters, `--config paper`)
# pretrained on the whole corpus pack on a GPU, in calls of under 10 minutes.
#
#   benchmarks/pretrain_paper_gpu.sh start   # probe the step rate, plan, train a first stretch
#   benchmarks/pretrain_paper_gpu.sh resume  # train on from the checkpoint to the planned end
#
# Run from a checkout holding the pack (`mire corpus pack`, .work/corpus.pack.npz,
# 40 MiB: it travels with the device tool's `carry`). `start` times 40 steps
# and plans --max-steps so that training takes TRAIN_MINUTES (default 16) at
# that rate; it stops after START_MINUTES (default 7) with a checkpoint, which
# `resume` (the same machine: the checkpoint, 260 MB, stays in .work) takes
# to the end. Each call copies what must come back to $OUT (the device tool's
# folder; .work/pretrain/paper-out elsewhere): metrics.jsonl, the log and the
# weights in fp16 (43 MiB, in parts of 15 MiB: the tool returns files of at
# most 16 MiB, 64 MiB in all). Join and widen them with
# benchmarks/pretrain_paper_join.py.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pack=.work/corpus.pack.npz
run=.work/pretrain/paper
out=${OUT:-.work/pretrain/paper-out}
train_minutes=${TRAIN_MINUTES:-16}
start_minutes=${START_MINUTES:-7}
mkdir -p "$run" "$out"
common=(--pack "$pack" --out "$run" --config "${CONFIG:-paper}" --eval-modules 192
        --checkpoint-every 1000 --log-every 20 --no-progress)

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } | tee -a "$out/log.txt"

case "${1:-}" in
start)
    # the step rate of this GPU: steps 10..40 of a throwaway run
    "$py" -m mirecc.encoder.train --pack "$pack" --out /tmp/probe --config "${CONFIG:-paper}" --no-resume \
        --eval-modules 8 --max-steps 40 --log-every 10 --checkpoint-every 1000 --no-progress \
        2>&1 | tail -3 | tee -a "$out/log.txt"
    "$py" - "$train_minutes" "$start_minutes" "$run/plan.json" <<'EOF' | tee -a "$out/log.txt"
import json, sys
minutes, first, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rows = {r["step"]: r for r in map(json.loads, open("/tmp/probe/metrics.jsonl")) if r["kind"] == "train"}
rate = 30 / (rows[40]["elapsed_s"] - rows[10]["elapsed_s"])          # steps per second
plan = {"steps_per_s": rate, "max_steps": int(rate * minutes * 60 * 0.95),
        "stop_at": int(rate * first * 60), "time_budget_min": minutes + 0.5}
plan["eval_every"] = max(1, plan["max_steps"] // 6)
json.dump(plan, open(path, "w"))
print("plan:", plan)
EOF
    ;;
resume) ;;
*)  echo "usage: $0 start|resume" >&2; exit 2 ;;
esac

read -r max_steps stop_at budget eval_every < <("$py" -c "import json; p = json.load(open('$run/plan.json'))
print(p['max_steps'], p['stop_at'] if '$1' == 'start' else 0, p['time_budget_min'], p['eval_every'])")
"$py" -m mirecc.encoder.train "${common[@]}" --max-steps "$max_steps" --stop-at "$stop_at" \
    --time-budget "$budget" --eval-every "$eval_every" 2>&1 | tee -a "$out/log.txt"

cp "$run/metrics.jsonl" "$run/plan.json" "$out/"
# the weights to bring back: the final model, else the checkpoint's
src=$run/model.pt
[ "$1" = resume ] && [ -f "$src" ] || src=$run/checkpoint.pt
"$py" - "$src" "$out/weights.fp16.pt" <<'EOF'
import sys, torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
state["model"] = {k: v.half() if v.is_floating_point() else v for k, v in state["model"].items()}
state.pop("optimizer", None)
torch.save(state, sys.argv[2])
EOF
split -b 15M -d "$out/weights.fp16.pt" "$out/weights.fp16.pt.part"
rm "$out/weights.fp16.pt"
ls -la "$out"
