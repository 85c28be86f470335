"""``mire nests-data``: the loop-nests dataset, timed on this machine.

    mire nests-data --size STANDARD --repeats 2     # then --size SMALL --repeats 3

Programs: PolyBench-ACC's OpenMP sources (``../shared/datasets/polybench-acc``)
built without ``-fopenmp`` (sequential: the pragmas are ignored), and
mirecc's own loop-nest families (:mod:`.families`: stencils with time
loops, convolutions, transposed products, triangular updates, column
reductions), all with PolyBench's harness and timer.

Protocol: every (program, configuration of :data:`..schedules.TIMED`) is
built twice with ``--cc -O3``: a timing build at ``--size``
(``-DPOLYBENCH_TIME``) and a check build at ``--check-size`` with
``-DPOLYBENCH_DUMP_ARRAYS`` (the arrays printed to stderr, ``%0.2lf``),
whose output is hashed: a configuration whose hash differs from ``llvm``'s
changed the output.  Each (program, configuration) is also compiled once with ``-c``, timed
(the compile-time cost of a schedule).  Then ``--repeats`` rounds: each runs every program's
configurations once, one process at a time, pinned to CPU 0, the
configurations' order rotated per round.  Runs are appended to
``--work``/runs.jsonl as they come (a rerun skips what is there).  At the
end the labels are written (``--labels``, atomically): a first line with the
machine and compiler, then one line per (program, configuration) with every
round's seconds and the output hash.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from mirecc.learn.datasets import default_root
from mirecc.learn.labels import machine_info
from mirecc.tasks.loop_nests.offline.families import write_programs
from mirecc.tasks.loop_nests.schedules import TIMED
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
LABELS = ROOT / "heads" / "loop-nests" / "labels"
#: PolyBench-ACC programs left out, and why
EXCLUDED = {"correlation": "never ends at MINI size in these sources, even at -O3"}


def polybench_root() -> Path:
    return default_root() / "polybench-acc" / "OpenMP"


def programs(suites, work: Path) -> list[tuple[str, Path]]:
    """(suite, source) of every program of ``suites`` (``polybench``, ``own``)."""
    out = []
    if "polybench" in suites:
        root = polybench_root()
        listed = (root / "utilities" / "benchmark_list").read_text().split()
        out += [("polybench", root / p) for p in listed
                if (root / p).is_file() and Path(p).stem not in EXCLUDED]
    if "own" in suites:
        out += [("own", p) for p in write_programs(work / "src")]
    return out


def build(cc: str, src: Path, flags: list[str], defines: list[str], out: Path):
    util = polybench_root() / "utilities"
    cmd = [cc, "-O3", *flags, *defines, "-Wno-unknown-pragmas", "-w", "-I", str(util),
           "-I", str(src.parent), str(src), str(util / "polybench.c"), "-lm", "-o", str(out)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, round(time.monotonic() - t0, 3), proc.stderr[-300:]


def run_timed(exe: Path, timeout: float) -> float | None:
    try:
        proc = subprocess.run(["taskset", "-c", "0", str(exe)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"([0-9]+\.[0-9]+)\s*$", proc.stdout.strip())
    return float(m[1]) if proc.returncode == 0 and m else None


def compile_times(cc: str, progs, size: str, path: Path) -> dict:
    """(program, configuration) -> seconds of one ``-O3 -c`` of the program's
    source with it, timed once, sequentially, pinned to CPU 0 (kept in
    ``path``; a rerun times only what is missing)."""
    util = polybench_root() / "utilities"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.is_file() else []
    out = {(r["program"], r["config"]): r["seconds"] for r in rows}
    todo = [(p, c) for _, p in progs for c in TIMED if (p.stem, c) not in out]
    with path.open("a") as fh:
        for n, (p, c) in enumerate(todo):
            cmd = ["taskset", "-c", "0", cc, "-O3", *TIMED[c], f"-D{size}_DATASET",
                   "-DPOLYBENCH_TIME", "-w", "-I", str(util), "-I", str(p.parent), "-c",
                   str(p), "-o", os.devnull]
            t0 = time.monotonic()
            ok = subprocess.run(cmd, capture_output=True).returncode == 0
            seconds = round(time.monotonic() - t0, 3) if ok else None
            out[(p.stem, c)] = seconds
            fh.write(json.dumps({"program": p.stem, "config": c, "seconds": seconds}) + "\n")
            fh.flush()
            print(f"\rmire nests-data: compile times {n + 1}/{len(todo)}", end="",
                  file=sys.stderr, flush=True)
    if todo:
        print(file=sys.stderr)
    return out


def checksum(exe: Path, timeout: float) -> str | None:
    try:
        proc = subprocess.run([str(exe)], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return hashlib.sha256(proc.stderr).hexdigest()[:16] if proc.returncode == 0 else None


def add_arguments(ap) -> None:
    ap.add_argument("--cc", default="clang-14", help="the compiler (default: %(default)s)")
    ap.add_argument("--size", default="STANDARD", help="the timed input size")
    ap.add_argument("--check-size", default="MINI", help="the input size of the output check")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per run")
    ap.add_argument("--suites", default="polybench,own", help="polybench, own or both")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--work", type=Path, default=None,
                    help="binaries and runs (default: .work/nest-data/<cc>-<size>)")
    ap.add_argument("--labels", type=Path, default=None,
                    help="the labels written (default: heads/loop-nests/labels/<cc>-<size>.jsonl)")


def run(args) -> int:
    work = args.work or Path(".work") / "nest-data" / f"{args.cc}-{args.size}"
    labels = args.labels or LABELS / f"{args.cc}-{args.size}.jsonl"
    progs = programs(args.suites.split(","), work)
    if args.only:
        progs = [(s, p) for s, p in progs if p.stem in args.only.split(",")]
    (work / "bin").mkdir(parents=True, exist_ok=True)
    runs = work / "runs.jsonl"
    done = [json.loads(x) for x in runs.read_text().splitlines() if x.strip()] \
        if runs.is_file() else []

    jobs = []
    for _, p in progs:
        for c, flags in TIMED.items():
            for kind, size, extra in (("time", args.size, ["-DPOLYBENCH_TIME"]),
                                      ("check", args.check_size, ["-DPOLYBENCH_DUMP_ARRAYS"])):
                exe = work / "bin" / f"{p.stem}.{c}.{kind}"
                if not exe.exists():
                    jobs.append((p, flags, [f"-D{size}_DATASET", *extra], exe))
    failed = []
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for n, (job, (ok, _, err)) in enumerate(zip(jobs, pool.map(
                lambda j: build(args.cc, *j), jobs))):
            if not ok:
                failed.append(f"{job[3].name}: {err.strip().splitlines()[-1:] or ''}")
            print(f"\rmire nests-data: built {n + 1}/{len(jobs)}", end="", file=sys.stderr,
                  flush=True)
    print(file=sys.stderr)
    for f in failed:
        print(f"mire nests-data: build failed: {f}", file=sys.stderr)

    compile_s = compile_times(args.cc, progs, args.size, work / "compile.jsonl")
    have = {(d["program"], d["config"], d["round"]) for d in done}
    names = list(TIMED)
    todo = sum((p.stem, c, r) not in have for _, p in progs for c in names
               for r in range(args.repeats))
    n = 0
    with runs.open("a") as fh:
        for r in range(args.repeats):
            order = names[r % len(names):] + names[:r % len(names)]
            for _, p in progs:
                for c in order:
                    if (p.stem, c, r) in have:
                        continue
                    exe = work / "bin" / f"{p.stem}.{c}.time"
                    t = run_timed(exe, args.timeout) if exe.exists() else None
                    rec = {"program": p.stem, "config": c, "round": r, "seconds": t}
                    done.append(rec)
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    n += 1
                    print(f"\rmire nests-data: timed {n}/{todo} (round {r + 1}/{args.repeats})",
                          end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    times: dict = {}
    for d in done:
        times.setdefault((d["program"], d["config"]), []).append(d["seconds"])
    meta = {"meta": {**machine_info(args.cc), "size": args.size, "check_size": args.check_size,
                     "repeats": args.repeats, "configs": TIMED,
                     "protocol": "clang -O3 + config, runs pinned to CPU 0, configurations "
                                 "rotated per round; PolyBench's own timer"}}
    lines = [json.dumps(meta)]
    for suite, p in progs:
        for c in names:
            exe = work / "bin" / f"{p.stem}.{c}.check"
            lines.append(json.dumps({
                "program": p.stem, "suite": suite, "size": args.size, "config": c,
                "seconds": times.get((p.stem, c), []),
                "compile_s": compile_s.get((p.stem, c)),
                "check": checksum(exe, args.timeout) if exe.exists() else None}))
    labels.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(labels, ("\n".join(lines) + "\n").encode())
    print(f"mire nests-data: {len(progs)} programs x {len(names)} configurations -> {labels}",
          file=sys.stderr)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
