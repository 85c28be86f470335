#!/usr/bin/env python3
"""Confirm the CUDA block-shape head on a GPU: PolyBench-ACC programs built by
``mirecc-nvcc`` with the head's shapes applied against nvcc's own build.

    .venv/bin/python benchmarks/cuda_confirm.py build --work .work/cuda-confirm   # here (no GPU)
    python3 benchmarks/cuda_confirm.py run --work .work/cuda-confirm --out "$OUT"  # on the GPU

``build`` (needs mirecc): every tunable PolyBench-ACC CUDA program at one
size class (``--size``, default MINI: the programs' own CPU reference, which
each run computes and compares, stays fast), built twice with the same
flags (``-O3 -arch=sm_90 -DcudaThreadSynchronize=cudaDeviceSynchronize
-DPOLYBENCH_NO_FLUSH_CACHE -w -D<SIZE>_DATASET``): by nvcc, and by
``mirecc-nvcc`` with ``MIRECC_APPLY_CUDA_BLOCK=1`` (its ``--explain=json``
kept); with ``--leave-one-out`` each program's head is one trained on the
labels of the other programs only (``MIRECC_HEADS_DIR``), so the GPU sees
the head's guess on a program it never saw.  Where the two executables are byte for byte the same (nvcc's
temporary-file names blanked) the head applied nothing: 1.0x by
construction, not run.

``run`` (standard library only, for a GPU machine without mirecc): each
pair ``--rounds`` times, sides alternating (plain first in even rounds),
one process at a time; the program's own ``GPU Time in seconds`` and its
CPU-GPU comparison (``Non-Matching CPU-GPU Outputs``).  Writes
``cuda_confirm.json`` and ``cuda_confirm.md`` (median, min, max per side,
speedup of the medians, mismatches per side) to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLAGS = ["-O3", "-arch=sm_90", "-DcudaThreadSynchronize=cudaDeviceSynchronize",
         "-DPOLYBENCH_NO_FLUSH_CACHE", "-w"]


def build(args) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mirecc.learn.datasets import default_root
    from mirecc.frontend.nvcc import find_nvcc
    from mirecc.frontend.nvcc import normalised_object
    from mirecc.tasks.cuda_block.offline import cuda_labels as cl

    src = args.polybench or default_root() / "polybench-acc" / "CUDA"
    nvcc = find_nvcc()
    mirecc_nvcc = Path(sys.executable).parent / "mirecc-nvcc"
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    manifest = {"size": args.size, "flags": FLAGS, "nvcc": nvcc, "programs": {},
                "heads": "leave one program out" if args.leave_one_out else "shipped"}
    cases = None
    if args.leave_one_out:
        import contextlib
        import io

        from mirecc.tasks.cuda_block.offline import bench

        groups = bench.read_labels([bench.LABELS / f for f in bench.LABEL_FILES
                                    if (bench.LABELS / f).is_file()])
        cases = bench.attach_features(bench.cases_of(groups), src, work / "bench")
    for program, (rel, _) in sorted(cl.TUNABLE.items()):
        env = {**os.environ, "MIRECC_APPLY_CUDA_BLOCK": "1"}
        if cases is not None:      # a head that never saw this program
            heads = work / "heads" / program
            with contextlib.redirect_stdout(io.StringIO()):
                bench.write_head([c for c in cases if c.program != program], {}, {},
                           heads / "cuda-block")
            env["MIRECC_HEADS_DIR"] = str(heads)
        folder = work / "src" / program
        shutil.copytree(src / os.path.dirname(rel), folder)
        cu = str(folder / os.path.basename(rel))
        common = [*FLAGS, f"-D{args.size}_DATASET", "-I", str(src / cl.UTILITIES), cu]
        plain, head = work / "bin" / f"{program}.plain", work / "bin" / f"{program}.head"
        p1 = subprocess.run([nvcc, *common, "-o", str(plain)], capture_output=True, text=True)
        p2 = subprocess.run([str(mirecc_nvcc), "--explain=json", *common, "-o", str(head)],
                            capture_output=True, text=True, env=env)
        entry = {"built": p1.returncode == 0 and p2.returncode == 0}
        if entry["built"]:
            explained = json.loads(p2.stdout[p2.stdout.index("{"):])
            entry["decisions"] = [d for u in explained["translation_units"]
                                  for d in u["decisions"]]
            entry["same"] = normalised_object(plain) == normalised_object(head)
            if entry["same"]:
                head.unlink()
        else:
            entry["error"] = (p1.stderr + p2.stderr)[-400:]
        manifest["programs"][program] = entry
        shown = ", ".join(f"{d['target']} {d['value']}" for d in entry.get("decisions", [])
                          if d["applied"]) or "nothing applied"
        print(f"{program:16} {'built' if entry['built'] else 'FAILED'}: {shown}", flush=True)
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return 0


def _run_one(exe: Path, timeout: float) -> dict:
    t0 = time.monotonic()
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout,
                              cwd=exe.parent)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    text = proc.stdout + proc.stderr
    gpu = re.search(r"GPU Time in seconds:\s*([0-9.eE+-]+)", text)
    miss = re.search(r"Non-Matching CPU-GPU Outputs[^:]*:\s*(\d+)|Number of misses:\s*(\d+)",
                     text)
    return {"status": "ok" if proc.returncode == 0 and gpu else f"rc {proc.returncode}",
            "gpu_s": float(gpu[1]) if gpu else None,
            "mismatches": int(miss[1] or miss[2]) if miss else None,
            "wall_s": round(time.monotonic() - t0, 3),
            "cuda_error": bool(re.search(r"CUDA error|cudaError|invalid configuration", text))}


def run(args) -> int:
    work, out = Path(args.work).resolve(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((work / "manifest.json").read_text())
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout
    except OSError:
        gpu = "no nvidia-smi"
    results = {"machine": {"gpu": gpu.strip(), "host": platform.node()}, "size":
               manifest["size"], "flags": manifest["flags"], "rounds": args.rounds,
               "programs": {}}
    deadline = time.monotonic() + args.deadline_s
    pairs = [p for p, e in manifest["programs"].items() if e.get("built") and not e["same"]]
    for p in pairs:
        results["programs"][p] = {"plain": [], "head": [],
                                  "decisions": manifest["programs"][p]["decisions"]}
    for r in range(args.rounds):
        for p in pairs:
            if time.monotonic() > deadline:
                break
            for side in (("plain", "head") if r % 2 == 0 else ("head", "plain")):
                results["programs"][p][side].append(
                    _run_one(work / "bin" / f"{p}.{side}", args.call_timeout))
        (out / "cuda_confirm.json").write_text(json.dumps(results, indent=1))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    lines = [f"# mirecc-nvcc with the head's shapes against nvcc, {manifest['size']} size",
             "", f"GPU: {results['machine']['gpu']}; {args.rounds} rounds, sides alternating; "
             "GPU time is the program's own timer; mismatches: the program's CPU-GPU compare.",
             "", "| program | shapes applied | nvcc median s (min-max) | head median s (min-max) "
             "| speedup | mismatches nvcc / head |", "|---|---|---|---|---|---|"]
    logs = []
    for p, e in manifest["programs"].items():
        if not e.get("built"):
            lines.append(f"| {p} | build failed | | | | |")
            continue
        if e["same"]:
            lines.append(f"| {p} | nothing applied | | | 1.0 (same executable) | |")
            continue
        res = results["programs"][p]
        t = {s: [x["gpu_s"] for x in res[s] if x.get("gpu_s")] for s in ("plain", "head")}
        m = {s: sorted({x.get("mismatches") for x in res[s]}, key=str) for s in ("plain", "head")}
        shapes = ", ".join(sorted({d["value"] for d in e["decisions"] if d["applied"]}))
        if t["plain"] and t["head"]:
            sp = statistics.median(t["plain"]) / statistics.median(t["head"])
            logs.append(sp)
            cell = {s: f"{statistics.median(t[s]):.6f} ({min(t[s]):.6f}-{max(t[s]):.6f})"
                    for s in t}
            lines.append(f"| {p} | {shapes} | {cell['plain']} | {cell['head']} | {sp:.3f} | "
                         f"{m['plain']} / {m['head']} |")
        else:
            lines.append(f"| {p} | {shapes} | runs failed: {[x['status'] for x in res['head']]}"
                         f" | | | |")
    if logs:
        import math
        g = math.exp(sum(map(math.log, logs)) / len(logs))
        lines += ["", f"Geomean over the {len(logs)} programs whose executable changed: "
                      f"{g:.3f}x; below 0.95x: {sum(s < 0.95 for s in logs)}."]
    (out / "cuda_confirm.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build")
    b.add_argument("--work", default=".work/cuda-confirm")
    b.add_argument("--size", default="MINI")
    b.add_argument("--polybench", type=Path, default=None)
    b.add_argument("--leave-one-out", action="store_true",
                   help="build each program with a head trained without it")
    r = sub.add_parser("run")
    r.add_argument("--work", default=".work/cuda-confirm")
    r.add_argument("--out", required=True)
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--call-timeout", type=float, default=60)
    r.add_argument("--deadline-s", type=float, default=400)
    args = ap.parse_args(argv)
    return build(args) if args.mode == "build" else run(args)


if __name__ == "__main__":
    sys.exit(main())
