#!/usr/bin/env python3
"""Thread-block-shape labels for the project's own CUDA kernels, timed on a GPU.

    python3 mirecc/tasks/cuda_block/offline/cuda_own_labels.py --out "$OUT/own" --deadline-s 300

The kernels (``kernels/*.cu`` beside this file: a transpose, 2-D and 3-D
stencils, a matrix-vector product by rows and by columns, C = A B^T, a 5x5
convolution) take their launch's block shape from ``<mirecc/launch.h>``, the
header a user puts on a tunable launch, so a shape is applied as mirecc-nvcc
applies it: ``-DMIRECC_BLOCK_<kernel>_X=..`` (and ``_Y``), one build per
shape; the source shape is the build with nothing defined.  The candidates
are the MIREncoder paper's 20 shapes (``cuda_labels.paper_shapes``); a 1-D
kernel takes only their x, duplicates are left out, blocks of more than 1024
threads are recorded as skipped.

Protocol: compile every (kernel, shape) in parallel; a check pass runs every
build once with the CPU reference on every size (``-c``; ``--check-workers``
at a time; a shape is wrong when its miss count differs from the source
shape's, or on a CUDA error); then ``--repeats`` timing rounds, one GPU
process at a time, shapes in an order rotated per round.  A process runs
every size of its kernel (``SIZES``): per size one warm-up launch then the
median of ``--reps`` launches timed with CUDA events.  Ends by
``--deadline-s``; every run is flushed as it ends.

Standard library only; shares the PolyBench-ACC labeller's machinery and its
output files and summary (``cuda_labels.py``).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__:
    from . import cuda_labels as cl
else:             # run by path on a GPU machine (no mirecc installed): the sibling script
    sys.path.insert(0, HERE)
    import cuda_labels as cl  # noqa: E402  (shapes, machine, summary)

KERNEL_DIR = os.path.join(HERE, "kernels")
#: <mirecc/launch.h>: mirecc/data/include
INCLUDE = os.path.join(HERE, os.pardir, os.pardir, os.pardir, "data", "include")

#: kernel -> its source shape (the launch's defaults; one value: a 1-D block)
#: and its sizes (n), small first
KERNELS = {
    "transpose": ((32, 8), (2048, 8192)),
    "stencil2d": ((16, 16), (1024, 4096)),
    "stencil3d": ((32, 4), (128, 320)),
    "matvec": ((256,), (2048, 8192)),
    "colsum": ((128,), (2048, 8192)),
    "matmul_nt": ((16, 16), (512, 1536)),
    "conv5x5": ((32, 8), (2048, 8192)),
}


def size_label(n: int) -> str:
    return f"N{n}"


def shapes_for(kernel: str) -> list:
    """The source shape then the paper's candidates, as applied macros."""
    source = KERNELS[kernel][0]
    axes = "XY"[:len(source)]
    values = {f"MIRECC_BLOCK_{kernel}_{a}": v for a, v in zip(axes, source)}
    return cl.plan_shapes(values, list(values))


def split_sizes(text: str) -> dict[int, str]:
    """What one process printed, per ``size N`` section."""
    parts = re.split(r"^size (\d+)\s*$", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def run_once(exe, kernel, shape, phase, repeat, args, env, timeout):
    """One process over every size of ``kernel``: one record per size."""
    sizes = KERNELS[kernel][1]
    cmd = [exe, *map(str, sizes), "-r", str(args.reps)] + (["-c"] if phase == "check" else [])
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=timeout, env=env)
        code, out = p.returncode, p.stdout + p.stderr
        status = None
    except subprocess.TimeoutExpired as exc:
        code, status = None, "timeout"
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) \
            else (exc.stdout or "")
    wall = time.monotonic() - t0
    cuda_error = (re.search(r"CUDA error: (\w+)", out) or [None, None])[1]
    sections = split_sizes(out)
    records = []
    for n in sizes:
        parsed = cl.parse_run_output(sections.get(n, ""))
        st = status or ("cuda_error" if cuda_error else
                        "ok" if parsed["gpu_seconds"] is not None and
                        (phase != "check" or parsed["mismatches"] is not None) else
                        "crash" if code else "no_output")
        job = cl.Job(0, kernel, size_label(n), shape, phase, repeat, phase == "check", [])
        records.append(cl._job_record(job, **parsed, returncode=code, cuda_error=cuda_error,
                                      wall_s=round(wall, 4), status=st))
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=300.0)
    ap.add_argument("--reserve-s", type=float, default=5.0)
    ap.add_argument("--nvcc")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--check-workers", type=int,
                    default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10, help="timed launches per size and run")
    ap.add_argument("--kernels", help="comma-separated (default: all)")
    ap.add_argument("--call-timeout", type=float, default=60.0)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args(argv)

    t_start = time.monotonic()
    hard_stop = t_start + args.deadline_s - args.reserve_s
    os.makedirs(args.out, exist_ok=True)
    for name in cl.OUT_FILES:
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    rec = cl.Recorder(args.out)
    kernels = [k.strip() for k in args.kernels.split(",")] if args.kernels else list(KERNELS)
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        ap.error(f"unknown kernels: {unknown}; known: {list(KERNELS)}")
    nvcc = cl.find_nvcc(args.nvcc)
    info = cl.machine_info(nvcc)
    plan = {k: shapes_for(k) for k in kernels}
    meta = {"machine": info, "args": vars(args), "nvcc_flags": ["-O3"],
            "sizes": {k: [size_label(n) for n in KERNELS[k][1]] for k in kernels},
            "plan": {k: [dict(s.record(), skip=s.skip) for s in v] for k, v in plan.items()},
            "compile": {}}

    def save_meta():
        with open(os.path.join(args.out, "cuda_machine.json"), "w") as fh:
            json.dump(meta, fh, indent=1, sort_keys=True)
    if nvcc is None:
        rec.log("no nvcc found")
        save_meta()
        return 2
    build = tempfile.mkdtemp(prefix="cuda-own-")
    flags, keepalive_exe, _ = cl.probe_flags(nvcc, args.arch, build, rec)
    meta["nvcc_arch_flags"] = flags
    rec.log(f"nvcc: {nvcc}; GPU: {info.get('nvidia_smi', '').splitlines()[-1:]}; "
            f"flags {flags}; kernels {len(kernels)}")

    # -- builds
    exes = {}

    compile_stop = t_start + 0.4 * args.deadline_s

    def compile_one(item):
        kernel, shape = item
        if time.monotonic() > compile_stop:
            return item, None, False, "not compiled: past the compile stage's share of the deadline"
        exe = os.path.join(build, f"{kernel}.{shape.label}.exe")
        defines = [] if shape.is_source else [f"-D{m}={v}" for m, v in shape.applied.items()]
        code, out = cl._run([nvcc, *flags, "-O3", "-I", INCLUDE, *defines,
                             os.path.join(KERNEL_DIR, f"{kernel}.cu"), "-o", exe], timeout=300)
        return item, exe, code == 0, out.strip()[-400:]
    todo = [(k, s) for k in kernels for s in plan[k] if not s.skip]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for (kernel, shape), exe, ok, out in pool.map(compile_one, todo):
            meta["compile"][f"{kernel}.{shape.label}"] = {"ok": ok, "message": out}
            if ok:
                exes[(kernel, shape.label)] = exe
            else:
                rec.log(f"compile failed: {kernel} {shape.label}: {out}")
    rec.log(f"compiled {len(exes)}/{len(todo)} in {time.monotonic() - t0:.1f}s")
    save_meta()
    for k in kernels:
        for s in plan[k]:
            if s.skip:
                for n in KERNELS[k][1]:
                    job = cl.Job(0, k, size_label(n), s, "plan", None, 0, [])
                    rec.write(cl._job_record(job, status="skipped", reason=s.skip))
    if args.compile_only:
        rec.close()
        return 0 if len(exes) == len(todo) else 1

    env = dict(os.environ, CUDA_MODULE_LOADING="EAGER")
    keep = None
    if keepalive_exe:
        keep = subprocess.Popen([keepalive_exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
    runs = [(k, s) for k in kernels for s in plan[k] if (k, s.label) in exes]

    def one(item, phase, repeat):
        k, s = item
        left = hard_stop - time.monotonic()
        if left < 2:
            return []
        return run_once(exes[(k, s.label)], k, s, phase, repeat, args, env,
                        min(args.call_timeout, left))
    try:
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.check_workers) as pool:
            for records in pool.map(lambda it: one(it, "check", None), runs):
                for r in records:
                    rec.write(r)
        rec.log(f"check pass: {len(runs)} processes, {time.monotonic() - t0:.1f}s")
        for repeat in range(args.repeats):
            t0 = time.monotonic()
            done = 0
            for k in kernels:
                mine = [it for it in runs if it[0] == k]
                shift = repeat % max(1, len(mine))
                for it in mine[shift:] + mine[:shift]:
                    for r in one(it, "time", repeat):
                        rec.write(r)
                        done += 1
            rec.log(f"timing round {repeat}: {done} records, {time.monotonic() - t0:.1f}s")
            if time.monotonic() >= hard_stop - 2:
                rec.log("deadline: stopping")
                break
    finally:
        if keep:
            keep.stdin.close()
            keep.wait(timeout=10)
        title = (f"{info.get('nvidia_smi', '').splitlines()[-1:]}; {info['date_utc']}; "
                 f"own kernels, launch.h defines; {' '.join(flags)} -O3")
        summary = cl.summarize(rec.records, kernels,
                               lambda k: [size_label(n) for n in KERNELS[k][1]], title)
        with open(os.path.join(args.out, "cuda_summary.txt"), "w") as fh:
            fh.write(summary)
        save_meta()
        rec.close()
        print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
