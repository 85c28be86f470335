"""``mire bench opencl``: thread coarsening applied at run time, measured.

Each program runs through ``mire run --opencl`` on this machine's OpenCL
platform: the project's own host driver (``benchmarks/opencl/cl_driver.c``,
an ordinary OpenCL program) on the project's kernels, and an unmodified
open-source OpenCL program where a checkout is given (Rodinia's
``opencl/gaussian``, built as its Makefile does).  Sides, in rotating order
in each round:

- ``plain``: the program alone;
- ``f<k>``: ``--opencl-factor k`` (every accepted kernel at factor k; f1:
  the program's own kernels through the interposer, every launch timed);
- ``fall``: ``--opencl-factor all``, every factor in turn, launch by launch:
  the labels (each factor's median launch time, the factors compared within
  one run, as the adaptive runtime compares them);
- ``adaptive``: ``--opencl`` with a verdict store of the benchmark's own,
  empty at the first round (that run explores; later ones use its verdicts).

Each program reports its own kernel time (the driver: the launches' wall time
after clFinish; gaussian: its ``Exec`` line, the sum of its launches'
profiling events); outputs are compared with the plain run's (the driver's
buffer digests; gaussian's printed matrices at a small size).  Per kernel,
the interposer's records give the median launch time at each factor: factor
1, the head's guess (the first factor it ranks), the confirmed factor (the
adaptive run's verdict) and the best.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirecc.learn.datasets import default_root
from mirecc.tasks.opencl.coarsen import (DEFAULT_FACTORS, ORDERS, TRIES, source_kernels,
                                         split_params)
from mirecc.tasks.opencl.offline.coarsen_check import OWN_KERNELS
from mirecc.tasks.opencl.run import opencl_devices

REPO = Path(__file__).resolve().parents[4]
DRIVER = REPO / "benchmarks" / "opencl" / "cl_driver.c"
FACTORS = (2, 4, 8, 16, 32)

EXTRA_KERNELS = {
    "mandel": r"""
__kernel void mandel(__global int *out, int width, int iters) {
  int i = get_global_id(0);
  float cx = -2.0f + 3.0f * (float)(i % width) / (float)width;
  float cy = -1.5f + 3.0f * (float)(i / width) / (float)width;
  float x = 0.0f, y = 0.0f;
  int n = 0;
  while (n < iters && x * x + y * y < 4.0f) {
    float t = x * x - y * y + cx;
    y = 2.0f * x * y + cy;
    x = t;
    n++;
  }
  out[i] = n;
}""",
    "rowsum": r"""
__kernel void rowsum(__global float *out, __global const float *in, int n) {
  int r = get_global_id(0);
  float s = 0.0f;
  for (int j = 0; j < n; j++) s += in[r * n + j];
  out[r] = s;
}""",
}

#: kernel -> (global, local, launches, driver arguments)
PROGRAMS = {
    "saxpy": ("4194304", "0", 40, ["f:4194304", "f:4194304", "F:0.5", "I:131072"]),
    "stencil2d": ("2048x2048", "0", 20, ["f:4194304", "f:4194304", "I:1"]),
    "gridstride": ("65536", "0", 20, ["i:1048576", "i:1048576", "I:256"]),
    "tiles": ("4194304", "64", 40, ["f:4194304", "f:4194304"]),
    "withbarrier": ("1048576", "64", 20, ["f:1048576", "f:1048576"]),
    "mandel": ("262144", "0", 20, ["i:262144", "I:512", "I:256"]),
    "rowsum": ("4096", "0", 40, ["f:4096", "f:4194304", "I:1024"]),
}


#: the published kernels' launches here: work-items per dimension count
#: (the dimensions a kernel reads), a local size like the transform check's,
#: buffers of 2^22 elements, float scalars 0.5; integer scalars 8 in 1-D
#: kernels (their loop counts) and the global size along dimension 0 in 2-D
#: and 3-D ones (their leading dimensions: 8 would make work-items write the
#: same elements)
DATASET_GLOBAL = {1: "65536", 2: "256x256", 3: "64x64x4"}
DATASET_LOCAL = {1: "32", 2: "32x4", 3: "32x4x1"}
DATASET_ELEMENTS = 1 << 22
DATASET_LAUNCHES = 20


def _param_spec(param: str, leading: int = 8) -> str | None:
    """cl_driver's argument for one kernel parameter; None: not supported."""
    words = param.replace("*", " * ").split()
    if "__local" in words or "local" in words:
        return None
    base = next((w for w in words if re.match(
        r"(unsigned|u?char|u?short|u?int|u?long|float|double|half|size_t)\d*$", w)), None)
    if base is None:
        return None
    m = re.match(r"([a-z_]+?)(\d*)$", base)
    scalar, width = m.group(1), int(m.group(2) or 1)
    if "*" in words:
        if scalar in ("char", "uchar"):
            return f"c:{DATASET_ELEMENTS * width}"
        if scalar in ("float", "int", "uint", "unsigned"):
            return f"{'f' if scalar == 'float' else 'i'}:{DATASET_ELEMENTS * width}"
        return None
    if width != 1:
        return None
    if scalar in ("float",):
        return "F:0.5"
    if scalar in ("int", "uint", "unsigned"):
        return f"I:{leading}"
    return None


def dataset_programs(dataset: Path) -> dict:
    """name -> (source, kernel, global, local, launches, arguments) for the
    published kernels whose source the dataset gives whole (its ``src``
    column is normalised: a kernel whose helpers it lost does not compile)
    and whose parameters the driver can pass."""
    csv.field_size_limit(1 << 24)
    out = {}
    with open(dataset / "pact-2014-runtimes.csv", newline="") as f:
        for row in csv.DictReader(f):
            name, src = row["kernel"], row["src"]
            if name in out:
                continue
            kernels = source_kernels(src)
            if len(kernels) != 1:
                continue
            k = kernels[0]
            dims = min(3, max([1, *(int(d) + 1 for d in re.findall(
                r"get_(?:global|local|group)_\w+\(\s*(\d)\s*\)", src))]))
            leading = 8 if dims == 1 else int(DATASET_GLOBAL[dims].split("x")[0])
            specs = [_param_spec(p, leading) for p in split_params(k.params)]
            if not specs or None in specs:
                continue
            out[name] = (src, k.name, DATASET_GLOBAL[dims], DATASET_LOCAL[dims],
                         DATASET_LAUNCHES, specs)
    return out


def kernel_source(name: str) -> str:
    return (OWN_KERNELS.get(name) or EXTRA_KERNELS[name]).strip() + "\n"


def build_driver(work: Path) -> Path:
    exe = work / "cl_driver"
    cc = shutil.which("clang-14") or shutil.which("cc") or "cc"
    subprocess.run([cc, "-O2", str(DRIVER), "-o", str(exe), "-lOpenCL"], check=True,
                   capture_output=True, text=True)
    return exe


def build_gaussian(rodinia: Path, work: Path) -> Path:
    """Rodinia's opencl/gaussian, unmodified, built as its Makefile does
    (g++ -O3 -fopenmp, with its own utilities)."""
    rodinia = rodinia.resolve()   # the build runs in its own folder
    src = rodinia / "opencl" / "gaussian"
    if not (src / "gaussianElim.cpp").is_file():
        raise FileNotFoundError(f"{src}: no Rodinia opencl/gaussian there")
    out = work / "gaussian"
    shutil.copytree(src, out, dirs_exist_ok=True)
    cxx = shutil.which("g++") or shutil.which("clang++-14") or "c++"
    subprocess.run([cxx, "-O3", "-fopenmp", "clutils.cpp", "gaussianElim.cpp", "utils.cpp",
                    "-o", "gaussian.out", f"-I{rodinia / 'opencl' / 'util'}", "-lOpenCL",
                    "-DTIMING", "-w"], cwd=out, check=True, capture_output=True, text=True)
    return out / "gaussian.out"


def _mire_run(side: str, record: Path, store: Path) -> list[str]:
    if side == "plain":
        return []
    # the mire script beside this Python (a task runs mire as a user does)
    mire = Path(sys.executable).with_name("mire")
    base = [str(mire) if mire.is_file() else shutil.which("mire") or "mire", "run", "--opencl",
            "--opencl-record", str(record), "--no-numa"]
    if side.startswith("f"):
        return [*base, "--opencl-factor", side[1:], "--"]   # fall: 'all'
    return [*base, "--"]


def run_side(command: list[str], side: str, cwd: Path, work: Path, store: Path,
             timeout: float = 600, factors: list[int] | None = None,
             env: dict | None = None) -> dict:
    """One run: the program's own kernel time, its output (timing lines
    removed) and the interposer's record; ``env``: more of the environment
    (the platform's cache folder, ...)."""
    record = work / f"record-{side}-{os.getpid()}.tsv"
    record.unlink(missing_ok=True)
    env = {**os.environ, **(env or {}), "MIRECC_ADAPT_STORE": str(store)}
    env.pop("MIRECC_OPENCL_FACTORS", None)
    if side.startswith("f"):   # forced: a plan that carries every factor
        env["MIRECC_OPENCL_FACTORS"] = ",".join(map(str, FACTORS))
    elif factors:               # adaptive: the order learned without this kernel
        env["MIRECC_OPENCL_FACTORS"] = ",".join(map(str, factors))
    t0 = time.perf_counter()
    proc = subprocess.run([*_mire_run(side, record, store), *command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{side}: {' '.join(command[:2])} exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-300:]}")
    out = proc.stdout
    m = re.search(r"^seconds ([0-9.]+)$", out, re.M) or re.search(r"^Exec: ([0-9.]+)$", out,
                                                                  re.M)
    seconds = float(m.group(1)) if m else wall
    if "Exec:" in out:
        seconds /= 1000.0   # gaussian reports milliseconds
    kept = "\n".join(ln for ln in out.splitlines() if not re.match(
        r"(seconds|Init|MemAlloc|HtoD|Exec|DtoH|Close|Total)\b|\d+x\d+ ", ln))
    return {"seconds": seconds, "wall": wall, "output": kept,
            "record": read_record(record) if record.is_file() else []}


def read_record(path: Path) -> list[dict]:
    rows = []
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    if not lines:
        return rows
    header = lines[0].split("\t")
    for ln in lines[1:]:
        row = dict(zip(header, ln.split("\t")))
        arms = {}
        for arm in row.get("arms", "-").split(";"):
            parts = arm.split(":")
            if len(parts) >= 3 and parts[0].startswith("f"):
                arms[int(parts[0][1:])] = {"samples": int(parts[1]), "median": float(parts[2]),
                                           "dropped": "dropped" in parts[3:],
                                           "kept": "kept" in parts[3:]}
        row["arms"] = arms
        rows.append(row)
    return rows


def bench_program(name: str, command: list[str], check: list[str] | None, cwd: Path,
                  work: Path, rounds: int, progress, factors: list[int] | None = None,
                  adaptive_runs: int = 1) -> dict:
    sides = ["plain", "f1", *(f"f{k}" for k in FACTORS), "fall", "adaptive"]
    store = work / f"store-{name}.txt"
    store.unlink(missing_ok=True)
    results: dict = {s: [] for s in sides}
    # outputs: every side against the plain run (a small size where given)
    outputs = {}
    for side in sides:
        probe_store = work / f"probe-store-{name}.txt"
        outputs[side] = run_side(check or command, side, cwd, work, probe_store,
                                 factors=factors)["output"]
    again = run_side(check or command, "plain", cwd, work, work / "unused-store.txt")["output"]
    if again != outputs["plain"]:
        # the program's own output differs from run to run (work-items racing
        # on these inputs): nothing to compare with
        equal = {s: None for s in sides}
    else:
        equal = {s: outputs[s] == outputs["plain"] for s in sides}
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for side in order:
            # the adaptive side: several runs in a row (a program run again and
            # again: its verdicts need runs to be reached)
            for _ in range(adaptive_runs if side == "adaptive" else 1):
                results[side].append(run_side(command, side, cwd, work, store, factors=factors))
                if progress:
                    progress(name, r, side, results[side][-1]["seconds"])
    kernels = {}
    for side in sides:
        for run_ in results[side]:
            for row in run_["record"]:
                k = kernels.setdefault(row["kernel"], {"note": row["note"], "phase": row["phase"],
                                                       "factors": {}, "confirmed": None,
                                                       "adaptive_phases": []})
                if side == "fall" and row["phase"] == "forced":
                    for f, arm in row["arms"].items():
                        if arm["samples"]:
                            k["factors"].setdefault(f, []).append(arm["median"])
                elif side == "adaptive":
                    k["confirmed"] = int(row["kept"][1:]) if row["kept"].startswith("f") else 1
                    k["adaptive_phases"].append(row["phase"])
                    k["phase"] = row["phase"]
                    k["note"] = row["note"]
    return {"name": name, "equal": equal, "adaptive_factors": factors, "kernels": kernels,
            "adaptive_runs": adaptive_runs,
            "times": {s: [r["seconds"] for r in results[s]] for s in sides}}


def amortized(p: dict) -> float:
    """The adaptive side's speedup over every one of its runs: plain's
    median time for as many runs, over the adaptive runs' total (every
    launch spent trying and every compile of a factor's kernel included)."""
    t = p["times"]
    return statistics.median(t["plain"]) * len(t["adaptive"]) / sum(t["adaptive"])


def after_verdicts(p: dict) -> float:
    """The adaptive side's speedup in its last round (its verdicts reached
    or not): plain's median over the last round's runs' median."""
    t = p["times"]
    last = t["adaptive"][-p.get("adaptive_runs", 1):]
    return statistics.median(t["plain"]) / statistics.median(last)


def _fmt(times: list[float]) -> str:
    return (f"{statistics.median(times):.4f} ({min(times):.4f}-{max(times):.4f})"
            if times else "-")


def report(programs: list[dict], machine: str, rounds: int, device: str,
           failures: dict | None = None) -> str:
    adaptive_runs = max((p.get("adaptive_runs", 1) for p in programs), default=1)
    lines = [
        "# OpenCL thread coarsening applied at run time (`mire run --opencl`)",
        "",
        "Written by `mire bench opencl`. Machine: " + machine + f"; OpenCL device: {device}.",
        f"Protocol: {rounds} rounds; in each, every side runs once, in an order that rotates "
        "by one side per round. A side's time is the program's own report of its kernels "
        "(the driver: its launches' wall time after clFinish; Rodinia gaussian: its `Exec` "
        "line, the sum of its launches' profiling events), median (min-max) in seconds. "
        "`adaptive`: `mire run --opencl` with a store of its own, empty before the first "
        f"round, run {adaptive_runs} times in a row in each round (a program run again and "
        "again; its verdicts need runs to be reached); `f<k>`: every accepted kernel at "
        "factor k. Speedups are over `plain` (medians); identical binaries (plain against "
        "plain) would be 1.0x; `adaptive, all runs`: plain's median times the number of "
        "adaptive runs over their total (every launch spent trying and every compile "
        "included); `last round`: the last round's adaptive runs. Outputs: each side's "
        "against plain's.",
        "",
        "## Programs",
        "",
        "| program | plain | f1 (interposer, every launch timed) | adaptive | adaptive, all "
        "runs | adaptive first run | last round | best factor | outputs equal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in programs:
        t = p["times"]
        base = statistics.median(t["plain"])
        best = min((s for s in t if s.startswith("f") and s not in ("f1", "fall")),
                   key=lambda s: statistics.median(t[s]))
        same = "yes" if all(p["equal"].values()) else \
            "not comparable: two plain runs differ" if None in p["equal"].values() else \
            "NO: " + ", ".join(s for s, ok in p["equal"].items() if not ok)
        lines.append(
            f"| {p['name']} | {_fmt(t['plain'])} | {_fmt(t['f1'])} "
            f"({base / statistics.median(t['f1']):.2f}x) | {_fmt(t['adaptive'])} "
            f"({base / statistics.median(t['adaptive']):.2f}x) | {amortized(p):.2f}x | "
            f"{t['adaptive'][0]:.4f} ({base / t['adaptive'][0]:.2f}x) | "
            f"{after_verdicts(p):.2f}x | "
            f"{best} {_fmt(t[best])} ({base / statistics.median(t[best]):.2f}x) | {same} |")
    for name, why in (failures or {}).items():
        lines.append(f"| {name} | did not run: {why} | | | | | | | |")
    lines += ["", "## Kernels", "",
              "Labels: the median launch time per factor (seconds) from the `fall` runs "
              "(every factor in turn, launch by launch, within each run; the median over "
              "the rounds' medians); guess: the first factor the plan ranks; confirmed: the adaptive "
              "runs' verdict.", "",
              "| program | kernel | factor 1 | guess | confirmed | best | verdict | note |",
              "|---|---|---|---|---|---|---|---|"]
    for p in programs:
        for name, k in sorted(p["kernels"].items()):
            f = {int(x): statistics.median(v) for x, v in k["factors"].items() if v}
            if not f or 1 not in f:
                lines.append(f"| {p['name']} | {name} | - | - | - | - | {k['phase']} | "
                             f"{k['note']} |")
                continue
            guess = DEFAULT_FACTORS[0]
            best = min(f, key=f.get)
            conf = k["confirmed"] or 1

            def cell(x):
                return f"f{x} {f[1] / f[x]:.2f}x" if x in f else f"f{x} -"
            lines.append(f"| {p['name']} | {name} | {f[1]:.6f} | {cell(guess)} | {cell(conf)} | "
                         f"{cell(best)} | {' → '.join(dict.fromkeys(k['adaptive_phases']))} | "
                         f"{k['note']} |")
    lab = labels(programs)
    if len(lab) >= 3:
        lines += loko_section(programs, lab)
    return "\n".join(lines) + "\n"


def loko_section(programs: list[dict], lab: dict) -> list[str]:
    result = loko(lab)
    rows = result["rows"]
    confirmed, tried, last = {}, {}, {}
    for p in programs:
        if p.get("adaptive_factors"):
            tried[p["name"]] = ",".join(map(str, p["adaptive_factors"]))
        if p["name"] in rows:
            confirmed[p["name"]] = amortized(p)
            last[p["name"]] = after_verdicts(p)
    below = (lambda values, x: sum(v < x for v in values))
    guess = [r["guess_speedup"] for r in rows.values()]
    fixed = [r["fixed_speedup"] for r in rows.values()]
    lines = ["", "## Leave one kernel out on this device's labels", "",
             "Labels: the median launch time at each factor above (the `fall` runs, through the "
             "interposer, outputs equal to the plain run's). Learned order: the factors by "
             "geomean speedup over factor 1 on the other kernels; guess: its first factor for "
             "the held-out kernel; fixed: the planner's default first factor "
             f"(f{DEFAULT_FACTORS[0]}); confirmed: the adaptive runs' kernel time against the "
             "plain run's (all runs: their total against as many plain runs, the launches "
             "spent trying and the platform's compiles of each factor's kernel included; "
             "last round: after the verdicts reached by then); tried: the factors its adaptive runs "
             "tried (where given: the first of the order learned without the kernel on an "
             "earlier run's labels, `--opencl-loko-order`; else the planner's).", "",
             "| kernel | oracle | guess (learned order) | fixed | confirmed (all runs) | "
             "confirmed (last round) | tried |",
             "|---|---|---|---|---|---|---|"]
    for n, r in sorted(rows.items()):
        lines.append(f"| {n} | f{r['oracle']} {r['oracle_speedup']:.2f}x | "
                     f"f{r['guess']} {r['guess_speedup']:.2f}x | {r['fixed_speedup']:.2f}x | "
                     f"{confirmed.get(n, float('nan')):.2f}x | {last.get(n, float('nan')):.2f}x | "
                     f"{tried.get(n, ', '.join(map(str, DEFAULT_FACTORS)))} |")
    conf_rows = {n: {**rows[n], "c": confirmed[n], "l": last[n]} for n in confirmed}
    lines += ["", "| measure | learned guess | fixed | confirmed (all runs) | "
              "confirmed (last round) | oracle |",
              "|---|---|---|---|---|---|",
              f"| geomean over factor 1 | {_geomean(guess):.3f}x | {_geomean(fixed):.3f}x | "
              f"{_geomean(confirmed.values()):.3f}x | {_geomean(last.values()):.3f}x | "
              f"{_geomean(r['oracle_speedup'] for r in rows.values()):.3f}x |",
              f"| share of the oracle's log gain | {_share(rows, 'guess_speedup')} | "
              f"{_share(rows, 'fixed_speedup')} | {_share(conf_rows, 'c')} | "
              f"{_share(conf_rows, 'l')} | 100% |",
              f"| kernels below 0.95x | {below(guess, 0.95)} | {below(fixed, 0.95)} | "
              f"{below(confirmed.values(), 0.95)} | {below(last.values(), 0.95)} | 0 |",
              f"| kernels below 0.97x | {below(guess, 0.97)} | {below(fixed, 0.97)} | "
              f"{below(confirmed.values(), 0.97)} | {below(last.values(), 0.97)} | 0 |",
              "", f"Kernels: {len(rows)}. Learned on all of them (this device's order): "
              + ", ".join(f"f{f} ({math_exp(result['score'][f]):.2f}x)" for f in result["order"])
              + "."]
    return lines


def math_exp(x: float) -> float:
    return math.exp(x)


def labels(programs: list[dict]) -> dict:
    """kernel -> {factor: median launch seconds} from the forced runs, for
    kernels measured at factor 1 and some other factor whose every output
    equals the plain run's."""
    out = {}
    for p in programs:
        if not all(p["equal"].values()):
            continue
        for name, k in p["kernels"].items():
            f = {int(x): statistics.median(v) for x, v in k["factors"].items() if v}
            if 1 in f and len(f) > 1:
                out[p["name"]] = f
    return out


def loko(labels_: dict) -> dict:
    """Leave one kernel out: the held-out kernel's factor is the one with the
    best geomean speedup over factor 1 on the other kernels of this device
    (the device's learned order); returns per kernel its guess, the
    fixed order's first factor and the oracle, and the order learned on all."""
    def order(names):
        score = {}
        for f in FACTORS:
            logs = [math.log(labels_[n][1] / labels_[n][f]) for n in names if f in labels_[n]]
            if logs:
                score[f] = sum(logs) / len(logs)
        return sorted(score, key=lambda f: -score[f]), score
    rows = {}
    for n in labels_:
        learned, _ = order([m for m in labels_ if m != n])
        lab = labels_[n]
        guess = next((f for f in learned if f in lab), 1)
        best = min(lab, key=lab.get)
        rows[n] = {"guess": guess, "guess_speedup": lab[1] / lab[guess], "order": learned,
                   "fixed": DEFAULT_FACTORS[0],
                   "fixed_speedup": lab[1] / lab.get(DEFAULT_FACTORS[0], lab[1]),
                   "oracle": best, "oracle_speedup": lab[1] / lab[best]}
    learned, score = order(list(labels_))
    return {"rows": rows, "order": learned, "score": score}


def _share(rows: dict, key: str) -> str:
    gain = sum(math.log(r["oracle_speedup"]) for r in rows.values())
    got = sum(math.log(r[key]) for r in rows.values())
    return f"{100 * got / gain:.0f}%" if gain > 0 else "-"


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def add_arguments(p) -> None:
    p.add_argument("--opencl-rodinia", metavar="DIR",
                   help="opencl: a Rodinia checkout whose opencl/gaussian runs unmodified")
    p.add_argument("--opencl-rounds", type=int, default=3,
                   help="opencl: rounds of every side (default: %(default)s)")
    p.add_argument("--opencl-adaptive-runs", type=int, default=3,
                   help="opencl: runs of the adaptive side in a row in each round "
                        "(default: %(default)s)")
    p.add_argument("--opencl-size", type=int, default=1024,
                   help="opencl: gaussian's matrix size (default: %(default)s)")
    p.add_argument("--opencl-only", help="opencl: comma-separated programs to run")
    p.add_argument("--opencl-dataset", default=_default_dataset(),
                   help="opencl: the thread-coarsening dataset whose kernels run too "
                        "(default: %(default)s)")
    p.add_argument("--opencl-write-order", action="store_true",
                   help="opencl: write the factor order learned on every kernel's labels for "
                        "this kind of device into heads/coarsening-runtime/orders.json (the "
                        "planner tries its first factors)")
    p.add_argument("--opencl-loko-order", metavar="JSON",
                   help="opencl: the adaptive side of each kernel tries the first factors of "
                        "the order learned on the other kernels' labels in this earlier "
                        "report's JSON (leave one kernel out); default: the planner's order")
    p.add_argument("--opencl-render", action="store_true",
                   help="opencl: write the report again from its JSON, running nothing")
    p.add_argument("--opencl-fresh", action="store_true",
                   help="opencl: start again instead of resuming the programs already run")
    p.add_argument("--opencl-out", default="docs/results/opencl-run.md",
                   help="opencl: the report (default: %(default)s; JSON beside it)")


def _default_dataset() -> str | None:
    path = default_root() / "thread_coarsening"
    return str(path) if path.is_dir() else None


def run(args) -> int:
    if args.opencl_render:
        out = Path(args.opencl_out)
        data = json.loads(out.with_suffix(".json").read_text())
        text = report(data["programs"], data["machine"], data["rounds"], data["device"],
                      data.get("failed"))
        out.write_text(text)
        if args.opencl_write_order:
            path = write_order(labels(data["programs"]), data["device"].split(" (")[0],
                               data["machine"], REPO / "heads" / "coarsening-runtime")
            print(f"mire bench opencl: wrote {path}", file=sys.stderr)
        print(text)
        return 0

    devices = opencl_devices()
    if not devices:
        print("mire bench opencl: no OpenCL device (install pocl-opencl-icd)", file=sys.stderr)
        return 2
    device = f"{devices[0][1]} ({devices[0][0]})"
    only = set(args.opencl_only.split(",")) if args.opencl_only else None
    machine = _machine()
    programs = []

    def progress(name, r, side, seconds):
        print(f"  {name} round {r + 1} {side}: {seconds:.4f} s", file=sys.stderr)

    out = Path(args.opencl_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # resumable: each program's result is kept as it finishes
    partial = out.with_name(f".{out.stem}.partial.json")
    done = {} if args.opencl_fresh or not partial.is_file() else json.loads(partial.read_text())
    if done.get("machine") != machine or done.get("rounds") != args.opencl_rounds:
        done = {"machine": machine, "rounds": args.opencl_rounds, "programs": {}}
    failures = {}
    dataset = Path(args.opencl_dataset) if args.opencl_dataset else None
    held_out = {}
    if args.opencl_loko_order:
        earlier = json.loads(Path(args.opencl_loko_order).read_text())["programs"]
        held_out = {n: r["order"][:TRIES] for n, r in loko(labels(earlier))["rows"].items()}
    with tempfile.TemporaryDirectory(prefix="mirecc-bench-opencl-") as tmp:
        work = Path(tmp)
        driver = build_driver(work)
        jobs = []
        for name, (glob, loc, launches, argv) in PROGRAMS.items():
            jobs.append((name, kernel_source(name), name, glob, loc, launches, argv))
        if dataset and (dataset / "pact-2014-runtimes.csv").is_file():
            for name, (src, kernel, glob, loc, launches, argv) in \
                    dataset_programs(dataset).items():
                jobs.append((f"{name} (published)", src, kernel, glob, loc, launches, argv))
        for name, src, kernel, glob, loc, launches, argv in jobs:
            if only and name.split()[0] not in only:
                continue
            if name in done["programs"]:
                programs.append(done["programs"][name])
                continue
            cl = work / f"{name.split()[0]}.cl"
            cl.write_text(src)
            cmd = [str(driver), str(cl), kernel, glob, loc, str(launches), *argv]
            try:
                result = bench_program(name, cmd, None, work, work, args.opencl_rounds, progress,
                                       held_out.get(name), args.opencl_adaptive_runs)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                failures[name] = str(exc).splitlines()[0][:200]
                print(f"mire bench opencl: {name}: {failures[name]}", file=sys.stderr)
                continue
            programs.append(result)
            done["programs"][name] = result
            partial.write_text(json.dumps(done, default=str))
        if args.opencl_rodinia and (not only or "gaussian" in only):
            name = "rodinia-gaussian"
            if name in done["programs"]:
                programs.append(done["programs"][name])
            else:
                exe = build_gaussian(Path(args.opencl_rodinia), work)
                cmd = [str(exe), "-s", str(args.opencl_size), "-p", "0", "-d", "0"]
                check = [str(exe), "-s", "64", "-v", "-p", "0", "-d", "0"]
                programs.append(bench_program(name, cmd, check, exe.parent, work,
                                              args.opencl_rounds, progress, held_out.get(name),
                                              args.opencl_adaptive_runs))
                done["programs"][name] = programs[-1]
                partial.write_text(json.dumps(done, default=str))
    text = report(programs, machine, args.opencl_rounds, device, failures)
    tmp_out = out.with_name(f".{out.name}.tmp")
    tmp_out.write_text(text)
    os.replace(tmp_out, out)
    out.with_suffix(".json").write_text(json.dumps(
        {"machine": machine, "device": device, "rounds": args.opencl_rounds,
         "programs": programs, "failed": failures}, indent=1, default=str))
    partial.unlink(missing_ok=True)
    if args.opencl_write_order:
        lab = labels(programs)
        if len(lab) < 3:
            print("mire bench opencl: fewer than 3 kernels with labels: no order written",
                  file=sys.stderr)
            return 1
        write_order(lab, devices[0][1], machine, REPO / "heads" / "coarsening-runtime")
    print(text)
    return 0


def write_order(lab: dict, device: str, machine: str, folder: Path) -> Path:
    """The learned order for this device's type (CPU: what pocl offers here)."""
    result = loko(lab)
    path = folder.parent / ORDERS
    data = json.loads(path.read_text()) if path.is_file() else {"format": 1, "devices": {}}
    data["_written_by"] = "mire bench opencl --opencl-write-order (labels: docs/results/" \
        "opencl-run.json)"
    data["devices"]["cpu"] = {"order": result["order"], "device": device, "machine": machine,
                              "kernels": len(lab),
                              "geomean_speedup": {str(f): round(math_exp(v), 4)
                                                  for f, v in result["score"].items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path




def _machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"
