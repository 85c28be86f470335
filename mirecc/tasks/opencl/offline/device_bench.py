"""``mire bench opencl-device``: the device confirmed at run time.

Where a program's device request finds several devices, ``mire run
--opencl --opencl-device=confirm`` gives it each in turn, run by run, and
keeps one only when its runs beat the program's own device beyond the noise
(``runtime/opencl``).  This bench measures that on the two devices pocl
offers on this machine when asked (``POCL_DEVICES="basic pthread"``: one
thread, and a thread per core), on the project's own host program
(``benchmarks/opencl/cl_driver.c``, which takes the first device listed) and
its kernels, and Rodinia's gaussian where given.

Protocol, per program: ``--runs`` rounds; in each, three sides run once in
an order that rotates by one per round: ``own`` (no interposer: the first
device, pocl's ``basic``), ``other`` (no interposer, ``POCL_DEVICES=pthread``
alone) and ``confirm`` (the interposer with ``--opencl-device=confirm``, its
store empty before the first round; the coarsening planner is not set, so
the kernels run as written and only the device changes).  A side's time is
the process's wall time.  ``confirm, all runs``: own's median times the
number of runs over the confirm runs' total (every warm-up and trial run
included); ``after the verdict``: own's median over the median of the
confirm runs from the one decided on (or of its last three).  Outputs: each
side's against own's, without timing lines and the lines listing devices.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirecc.tasks.opencl.offline.run_bench import (
    PROGRAMS, _machine, build_driver, build_gaussian, kernel_source, read_record)
from mirecc.tasks.opencl.run import run_environment

TWO_DEVICES = "basic pthread"
SIDES = ("own", "other", "confirm")


def add_arguments(p) -> None:
    p.add_argument("--device-runs", type=int, default=12,
                   help="opencl-device: rounds per program (each runs every side once; "
                        "default %(default)s)")
    p.add_argument("--device-only", help="opencl-device: comma-separated programs to run")
    p.add_argument("--device-rodinia", metavar="DIR",
                   help="opencl-device: a Rodinia tree with opencl/gaussian and opencl/util "
                        "(its gaussian is run unmodified)")
    p.add_argument("--device-out", default="docs/results/opencl-device.md",
                   help="opencl-device: the report (and its .json beside it)")
    p.add_argument("--device-render", action="store_true",
                   help="opencl-device: write the report again from its .json, running nothing")


def _environment(side: str, store: Path, record: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MIRECC_OPENCL", "MIRECC_ADAPT")) and k != "LD_PRELOAD"}
    env["POCL_DEVICES"] = "pthread" if side == "other" else TWO_DEVICES
    if side == "confirm":
        extra, _ = run_environment(argparse.Namespace(
            opencl=True, opencl_record=str(record), opencl_factor=None,
            opencl_device="confirm"))
        extra.pop("MIRECC_OPENCL_PLANNER", None)   # the device alone changes
        env.update(extra)
        env["MIRECC_ADAPT_STORE"] = str(store)
    return env


def _output(out: str, devices: list[str]) -> str:
    """The program's output without its timing lines (as ``mire bench
    opencl``) and the lines that list its devices (gaussian prints what the
    platform offers, which the sides change)."""
    return "\n".join(ln for ln in out.splitlines() if not re.match(
        r"(seconds|Init|MemAlloc|HtoD|Exec|DtoH|Close|Total)\b|\d+x\d+ |no of devices", ln)
        and not any(d in ln for d in devices))


def run_program(name: str, command: list[str], cwd: Path, work: Path, runs: int,
                progress, devices: list[str]) -> dict:
    store = work / f"store-{name}.txt"
    store.unlink(missing_ok=True)
    times = {s: [] for s in SIDES}
    outputs, used, phases = {}, [], []
    for r in range(runs):
        order = SIDES[r % 3:] + SIDES[:r % 3]
        for side in order:
            record = work / f"record-{name}.tsv"
            record.unlink(missing_ok=True)
            t0 = time.perf_counter()
            proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                                  env=_environment(side, store, record), timeout=600)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"{name} ({side}) exited {proc.returncode}: "
                                   f"{proc.stderr.strip()[-300:]}")
            times[side].append(wall)
            out = _output(proc.stdout, devices)
            outputs.setdefault(side, out)
            if outputs[side] != out:
                outputs[side] = None    # differs from run to run
            if side == "confirm":
                rows = [row for row in read_record(record) if row.get("kernel") == "(device)"] \
                    if record.is_file() else []
                used.append(rows[0]["device"] if rows else "-")
                phases.append(rows[0]["phase"] if rows else "-")
            progress(name, r, side, wall)
    own = statistics.median(times["own"])
    other = statistics.median(times["other"])
    decided = next((i for i, p in enumerate(phases) if p == "decided"), None)
    after = times["confirm"][decided:] if decided is not None else times["confirm"][-3:]
    return {"name": name, "times": times, "used": used, "phases": phases,
            "decided_at": None if decided is None else decided + 1,
            "kept": used[decided] if decided is not None else None,
            "outputs_equal": all(outputs.get(s) is not None and outputs[s] == outputs["own"]
                                 for s in SIDES),
            "own": own, "other": other,
            "all_runs": own * runs / sum(times["confirm"]),
            "last_runs": own / statistics.median(after),
            "best": max(1.0, own / other)}


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _fmt(ts: list[float]) -> str:
    return f"{statistics.median(ts):.3f} ({min(ts):.3f}-{max(ts):.3f})"


def report(data: dict) -> str:
    progs = data["programs"]
    lines = [
        "# OpenCL device confirmed at run time (`mire run --opencl --opencl-device=confirm`)",
        "",
        f"Written by `mire bench opencl-device`. Machine: {data['machine']}; OpenCL: pocl with "
        f"`POCL_DEVICES=\"{TWO_DEVICES}\"` ({', '.join(data['devices'])}).",
        "",
        f"Protocol: {data['runs']} rounds per program; in each, `own` (no interposer: the "
        "program takes the first device listed, pocl's single-threaded `basic`), `other` (no "
        "interposer, `pthread` alone) and `confirm` (the interposer with "
        "`--opencl-device=confirm`, its store empty before the first round, the coarsening "
        "planner not set: only the device changes) run once each, in an order that rotates by "
        "one side per round. Times: the process's wall time, median (min-max) in seconds. "
        "`all runs`: own's median times the rounds over confirm's total (its warm-up and "
        "trial runs included); `after the verdict`: own's median over confirm's median from "
        "the run that was decided on (no verdict: its last three runs); `best`: the faster "
        "device's median over own's. Identical runs would be 1.0x. Devices per confirm run: "
        "`b` basic, `p` pthread, upper case once decided. Outputs: each side's against own's, "
        "without the timing lines and the lines that list the devices (gaussian prints them).",
        "",
        "| program | own | other | confirm, all runs | after the verdict | best | kept "
        "(decided at run) | devices run by run | outputs equal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in progs:
        seq = "".join((d[:1].upper() if ph == "decided" else d[:1]) if d != "-" else "-"
                      for d, ph in zip(p["used"], p["phases"]))
        kept = (f"{p['kept'].split('-')[0]} ({p['decided_at']})" if p["kept"]
                else "no verdict")
        lines.append(
            f"| {p['name']} | {_fmt(p['times']['own'])} | {_fmt(p['times']['other'])} | "
            f"{p['all_runs']:.2f}x | {p['last_runs']:.2f}x | {p['best']:.2f}x | {kept} | "
            f"`{seq}` | {'yes' if p['outputs_equal'] else 'NO'} |")
    lines += ["", "| measure | confirm, all runs | after the verdict | best device |",
              "|---|---|---|---|",
              f"| geomean over own | {_geomean(p['all_runs'] for p in progs):.3f}x | "
              f"{_geomean(p['last_runs'] for p in progs):.3f}x | "
              f"{_geomean(p['best'] for p in progs):.3f}x |",
              f"| programs below 0.97x | {sum(p['all_runs'] < 0.97 for p in progs)} | "
              f"{sum(p['last_runs'] < 0.97 for p in progs)} | 0 |", ""]
    for f in data.get("failed", []):
        lines.append(f"- {f}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    if args.device_render:
        out = Path(args.device_out)
        text = report(json.loads(out.with_suffix(".json").read_text()))
        out.write_text(text)
        print(text)
        return 0
    probe = subprocess.run(
        [sys.executable, "-c", "from mirecc.tasks.opencl.run import opencl_devices as d; "
         "print('\\n'.join(x[1] for x in d()))"],
        capture_output=True, text=True, env={**os.environ, "POCL_DEVICES": TWO_DEVICES})
    devices = [ln for ln in probe.stdout.splitlines() if ln.strip()]
    if len(devices) < 2:
        print("mire bench opencl-device: the OpenCL platform does not offer two devices "
              f"with POCL_DEVICES=\"{TWO_DEVICES}\" (pocl-opencl-icd, installed by set-up)",
              file=sys.stderr)
        return 2
    only = set(args.device_only.split(",")) if args.device_only else None
    programs, failed = [], []

    def progress(name, r, side, seconds):
        print(f"\r  {name}: round {r + 1}/{args.device_runs} {side} {seconds:.2f}s   ",
              end="", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="mirecc-bench-cldev-") as tmp:
        work = Path(tmp)
        driver = build_driver(work)
        todo = []
        for name, (global_, local, launches, params) in PROGRAMS.items():
            if name == "withbarrier":
                continue   # the same launches as tiles, for the coarsening refusal
            cl = work / f"{name}.cl"
            cl.write_text(kernel_source(name))
            todo.append((name, [str(driver), str(cl), name, global_, local, str(launches),
                                *params], work))
        if args.device_rodinia:
            exe = build_gaussian(Path(args.device_rodinia), work)
            todo.append(("rodinia-gaussian", [str(exe), "-s", "512", "-v", "-p", "0", "-d", "0"],
                         exe.parent))
        for name, command, cwd in todo:
            if only and name not in only:
                continue
            try:
                programs.append(run_program(name, command, cwd, work, args.device_runs,
                                            progress, devices))
            except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                failed.append(f"{name} did not run: {exc}")
        print(file=sys.stderr)
    data = {"machine": _machine(), "devices": devices, "runs": args.device_runs,
            "programs": programs, "failed": failed}
    out = Path(args.device_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = report(data)
    tmp_out = out.with_suffix(".md.tmp")
    tmp_out.write_text(text)
    tmp_out.replace(out)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)
    return 0 if programs else 1
