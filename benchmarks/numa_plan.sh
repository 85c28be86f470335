#!/usr/bin/env bash
# Build two programs of ../shared/datasets/numa-prefetch with mirecc recording
# the NUMA head's per-region decisions (MIRECC_RECORD_NUMA=1): NPB's SP (class
# A) and Rodinia's lavaMD; run each once, and print the plan `mire run`
# applies on this machine for each input size.
#
#   benchmarks/numa_plan.sh [WORK_DIR]      (default .work/numa-plan)
#
# Needs the dataset's sources; runs `mire numa-regions` first when NPB's
# generated npbparams.h is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
work="$(realpath -m "${1:-.work/numa-plan}")"
venv="$repo/.venv/bin"
sources="$(realpath "${MIRECC_DATASETS:-$repo/../shared/datasets}")/numa-prefetch/sources"
npb="$sources/npb3.0-omp-c"
lavamd="$sources/rodinia-3.1-openmp/lavaMD"
params="$repo/.work/numa/work/npbparams/SP"
[ -f "$params/npbparams.h" ] || "$venv/mire" numa-regions --out "$repo/.work/numa" >/dev/null
export MIRECC_RECORD_NUMA=1 MIRECC_SERVER=0

build() {  # build NAME FLAGS -- SOURCES...: compile each with mirecc, link
    local name="$1"; shift
    local flags=()
    while [ "$1" != "--" ]; do flags+=("$1"); shift; done; shift
    mkdir -p "$work/$name"
    local objects=()
    for src in "$@"; do
        local obj="$work/$name/$(basename "${src%.c}").o"
        "$venv/mirecc" -O3 -fopenmp "${flags[@]}" -c "$src" -o "$obj" 2>> "$work/$name/build.log"
        objects+=("$obj")
    done
    "$venv/mirecc" -fopenmp "${objects[@]}" -lm -o "$work/$name/$name"
}

plan() {  # plan NAME RUN-ARGS...
    local name="$1"; shift
    echo "== $name: built with mirecc ($("$venv/mirecc" --version | head -1)), MIRECC_RECORD_NUMA=1"
    (cd "$work/$name" && OMP_NUM_THREADS=2 "./$name" "$@" > run.log 2>&1) \
        && echo "ran: ./$name $* (output in $work/$name/run.log)"
    for size in small large; do
        echo "--- mire run --dry-run --input-size $size -- ./$name $*"
        (cd "$work/$name" && "$venv/mire" run --dry-run --input-size "$size" -- "./$name" "$@")
    done
}

build sp -I"$npb/common" -I"$params" -- "$npb/SP/sp.c" \
    "$npb"/common/{c_print_results,c_randdp,c_timers,wtime}.c
build lavamd -- "$lavamd/main.c" "$lavamd/kernel/kernel_cpu.c" "$lavamd/util/num/num.c" \
    "$lavamd/util/timer/timer.c"
plan sp
plan lavamd -cores 2 -boxes1d 10
