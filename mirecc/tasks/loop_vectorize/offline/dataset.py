"""Measure every (vectorization width, interleave count) of every generated kernel.

For one kernel (:mod:`mirecc.tasks.loop_vectorize.offline.kernels`) the runner builds, with the
chosen clang at ``-O3`` plus the target flags:

* one binary per (VF, IF) in :data:`VFS` x :data:`IFS`, forced through the
  ``MIRECC_LOOP_HINT`` macro (``vectorize_width(VF) interleave_count(IF)``);
* one with no hint (clang's own choice: ``default``);
* the scalar reference (``-fno-vectorize -fno-slp-vectorize``, no hint).

Every binary's output checksum is compared with the scalar reference's; a
configuration whose output differs is ``output_changed`` and is never a
candidate for ``best``. Rows of kernels that need reassociation (float
reductions) are also built with ``-ffast-math`` (``fast_math: true``); their
outputs are compared with a relative tolerance on the printed value.

Timing runs one binary at a time pinned to one CPU, ``repeats`` rounds, each
round visiting every binary once (in a per-round shuffled order, so that drift
affects all alike). Each binary is first calibrated (a short auto run) so one
measurement takes about ``target_ns``.

One JSON line per row is appended to the labels file under a lock with
fsync; a restart skips the rows already there (and drops a half-written last
line).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from mirecc.tasks.loop_vectorize.offline.kernels import DEFAULT_PER_FAMILY, write_kernels
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.learn.labels import append_row, machine_info, read_done
from mirecc.util.paths import default_cache_dir

VFS = (1, 2, 4, 8, 16, 32, 64)
IFS = (1, 2, 4, 8, 16)
CONFIGS = [(vf, ic) for vf in VFS for ic in IFS]
SCALAR_FLAGS = ["-fno-vectorize", "-fno-slp-vectorize"]
FAST_MATH_FLAGS = ["-ffast-math"]
#: relative tolerance for fast-math rows, by the precision of the result
RTOL = 1e-3
#: the labels the shipped head was trained on (``mire vectorize-data --export``)
COMMITTED = Path(__file__).resolve().parents[4] / "heads" / "loop-vectorize" / "labels"
RUN_TIMEOUT_S = 60.0


def hint_define(vf: int, ic: int) -> str:
    """The -D flag that forces (vf, ic) on the target loop (one argv element)."""
    return ("-DMIRECC_LOOP_HINT=_Pragma(\"clang loop vectorize_width(%d) interleave_count(%d)\")"
            % (vf, ic))


_REMARK = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: remark: (?P<msg>.*?) \[-R")
_VEC = re.compile(r"vectorized loop \(vectorization width: (\d+), interleaved count: (\d+)\)")
_ILV = re.compile(r"interleaved loop \(interleaved count: (\d+)\)")


def parse_remark(stderr: str, line: int) -> dict:
    """What the loop vectorizer did to the loop at ``line``: {vf, if, msg}
    (vf = if = 1 when it left the loop alone or said nothing)."""
    res = {"vf": 1, "if": 1, "msg": None}
    for m in _REMARK.finditer(stderr):
        if int(m.group("line")) != line:
            continue
        msg = m.group("msg")
        if (v := _VEC.search(msg)):
            res = {"vf": int(v.group(1)), "if": int(v.group(2)), "msg": msg}
        elif (v := _ILV.search(msg)):
            res = {"vf": 1, "if": int(v.group(1)), "msg": msg}
        elif res["msg"] is None:
            res["msg"] = msg
    return res


def compile_one(cc: str, src: Path, out: Path, flags: list[str], target_line: int) -> dict:
    cmd = [cc, "-O3", *flags, "-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize",
           str(src), "-o", str(out)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "compile timeout", "compile_s": time.perf_counter() - t0}
    res = {"ok": p.returncode == 0, "compile_s": round(time.perf_counter() - t0, 3)}
    if p.returncode != 0:
        res["error"] = p.stderr[-2000:]
        return res
    res["remark"] = parse_remark(p.stderr, target_line)
    res["bin_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()[:16]
    return res


def timing_cpu() -> int:
    """CPU to pin timing runs to: 1 if this process may use it, else the last allowed."""
    cpus = sorted(os.sched_getaffinity(0))
    return 1 if 1 in cpus else cpus[-1]


def run_binary(exe: Path, args: list[str], cpu: int | None, env_extra: dict) -> dict:
    """Run once; parse reps / time_ns / checksum / value. ``ok`` False on a
    crash, a timeout or unparsable output."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in env_extra.items()})

    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    try:
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env,
                           timeout=RUN_TIMEOUT_S, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "run timeout"}
    if p.returncode != 0:
        return {"ok": False, "error": f"exit {p.returncode}: {p.stderr[-500:]}"}
    out = {}
    for ln in p.stdout.splitlines():
        parts = ln.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    try:
        return {"ok": True, "reps": int(out["reps"]), "time_ns": float(out["time_ns"]),
                "checksum": out["checksum"], "value": float(out["value"])}
    except (KeyError, ValueError):
        return {"ok": False, "error": f"bad output: {p.stdout[-300:]}"}


def _same_output(ref: dict, got: dict, tolerant: bool) -> tuple[bool, float | None]:
    """(same, relative error of the value) of ``got`` against ``ref``."""
    if got["checksum"] == ref["checksum"]:
        return True, 0.0
    a, b = ref["value"], got["value"]
    if math.isnan(a) or math.isnan(b):
        return False, None
    rel = abs(a - b) / max(abs(a), abs(b), 1e-300)
    return (tolerant and rel <= RTOL), rel


def measure_row(rec: dict, src: Path, *, cc: str, cc_ver: str, target_flags: list[str],
                fast_math: bool, repeats: int, configs: list[tuple[int, int]],
                target_ns: float, jobs: int, cpu: int | None, seed: int = 0) -> dict:
    """Build, check and time every configuration of one kernel; the labels row."""
    t_start = time.perf_counter()
    base = list(target_flags) + (FAST_MATH_FLAGS if fast_math else [])
    line = rec["target_line"]
    builds: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mirecc-vec-") as tmp:
        tmpd = Path(tmp)
        jobs_list = [("scalar", base + SCALAR_FLAGS), ("default", base)]
        jobs_list += [(f"vf{vf}_if{ic}", base + [hint_define(vf, ic)]) for vf, ic in configs]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = {key: pool.submit(compile_one, cc, src, tmpd / key, flags, line)
                    for key, flags in jobs_list}
            for key, fut in futs.items():
                builds[key] = fut.result()
        compile_wall = time.perf_counter() - t_start

        # calibration (also the correctness run)
        calib, reps = {}, {}
        for key, b in builds.items():
            if not b["ok"]:
                continue
            r = run_binary(tmpd / key, rec["args"], cpu, {"MIRECC_TARGET_NS": target_ns / 8})
            calib[key] = r
            if r["ok"]:
                reps[key] = max(1, math.ceil(target_ns / max(r["time_ns"], 1.0)))
        ref = calib.get("scalar")
        if not ref or not ref["ok"]:
            raise RuntimeError(f"{rec['name']}: scalar reference failed: "
                               f"{builds['scalar'].get('error') or (ref or {}).get('error')}")
        samples: dict[str, list[float]] = {k: [] for k in reps}
        rng = random.Random(f"{seed}:{rec['name']}")
        order = list(reps)
        for _ in range(repeats):
            rng.shuffle(order)
            for key in order:
                r = run_binary(tmpd / key, rec["args"], cpu, {"MIRECC_REPS": reps[key]})
                if r["ok"] and r["checksum"] == calib[key]["checksum"]:
                    samples[key].append(r["time_ns"])
                else:
                    calib[key] = {**calib[key], "ok": False,
                                  "error": r.get("error", "checksum differs between runs")}

    def entry(key: str) -> dict:
        b, c = builds[key], calib.get(key)
        e = {"ok": bool(b["ok"] and c and c["ok"] and samples.get(key))}
        if not b["ok"]:
            e["error"] = b.get("error", "")[-500:]
        elif not c or not c["ok"]:
            e["error"] = (c or {}).get("error", "not run")
        if b["ok"]:
            e["remark_vf"], e["remark_if"] = b["remark"]["vf"], b["remark"]["if"]
            e["remark"] = b["remark"]["msg"]
            e["bin_sha256"] = b["bin_sha256"]
        if c and c.get("checksum"):
            same, rel = _same_output(ref, c, fast_math)
            e["output_changed"] = not same
            e["exact_output"] = c["checksum"] == ref["checksum"]
            if rel:
                e["rel_err"] = rel
        else:
            e["output_changed"] = False
        s = samples.get(key) or []
        if s:
            e.update({"min_ns": min(s), "median_ns": statistics.median(s), "samples": s,
                      "reps": reps[key]})
        return e

    cfgs = []
    for vf, ic in configs:
        e = entry(f"vf{vf}_if{ic}")
        cfgs.append({"vf": vf, "if": ic, **e})
    default, scalar = entry("default"), entry("scalar")
    cands = [c for c in cfgs if is_candidate(c, rec.get("needs_reassoc", False), fast_math)]
    best = min(cands, key=lambda c: c["min_ns"]) if cands else None
    row = {
        "row": rec["name"] + ("+fastmath" if fast_math else ""),
        "name": rec["name"], "family": rec["family"], "params": rec["params"],
        "needs_reassoc": rec.get("needs_reassoc", False), "args": rec["args"],
        "source_sha256": rec["source_sha256"], "target_line": line,
        "cc": cc, "cc_version": cc_ver, "opt": "-O3", "flags": base,
        "target_flags": list(target_flags), "fast_math": fast_math,
        "scalar_flags": base + SCALAR_FLAGS, "repeats": repeats, "target_ns": target_ns,
        "timing_cpu": cpu, "configs": cfgs, "default": default, "scalar": scalar,
        "scalar_ref_ns": scalar.get("min_ns"),
        "best": ({"vf": best["vf"], "if": best["if"], "min_ns": best["min_ns"],
                  "median_ns": best["median_ns"]} if best else None),
        "speedup_best_over_default": (default["min_ns"] / best["min_ns"]
                                      if best and default.get("min_ns") else None),
        "n_output_changed": sum(c["output_changed"] for c in cfgs),
        "compile_wall_s": round(compile_wall, 2),
        "wall_s": round(time.perf_counter() - t_start, 2),
    }
    return row


# ---------------------------------------------------------------------------
# labels file


def is_candidate(config: dict, needs_reassoc: bool, fast_math: bool) -> bool:
    """May ``config`` be chosen?  It ran, its output matched the scalar
    reference, and it does not reassociate a floating-point reduction the
    user did not allow to be (a bit-exact match can be luck: seen with
    reduce_float-f64-sumsq-l2 at 64 x 16)."""
    if not config.get("ok") or config.get("output_changed") or not config.get("min_ns"):
        return False
    reorders = config.get("remark_vf", 1) > 1 or config.get("remark_if", 1) > 1
    return fast_math or not (needs_reassoc and reorders)


def row_candidates(row: dict) -> list[dict]:
    """The configurations of a labels row that may be chosen."""
    return [c for c in row["configs"]
            if is_candidate(c, row.get("needs_reassoc", False), row.get("fast_math", False))]


# ---------------------------------------------------------------------------
# the whole dataset


def run_dataset(out: Path | str, *, seed: int = 0, per_family: int | None = None,
                cc: str = "clang-14", target_flags: str | list[str] = "", repeats: int = 5,
                families: list[str] | None = None, limit: int | None = None,
                configs: list[tuple[int, int]] | None = None, fast_math_rows: bool = True,
                target_ns: float = 10e6, jobs: int | None = None, cpu: int | None = -1,
                progress: bool = True) -> Path:
    """Generate the kernels into ``out/kernels`` and label them into
    ``out/labels.jsonl`` (resuming); returns the labels path. ``cpu=-1``: pick
    :func:`timing_cpu`; ``None``: do not pin."""
    out = Path(out)
    kdir = out / "kernels"
    records = write_kernels(kdir, seed, per_family or DEFAULT_PER_FAMILY, families)
    tflags = shlex.split(target_flags) if isinstance(target_flags, str) else list(target_flags)
    configs = list(configs or CONFIGS)
    cpu = timing_cpu() if cpu == -1 else cpu
    jobs = jobs or os.cpu_count() or 1
    rows = []
    for rec in records:
        rows.append((rec, False))
        if fast_math_rows and rec.get("needs_reassoc"):
            rows.append((rec, True))
    if limit is not None:
        rows = rows[:limit]
    labels = out / "labels.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    done = read_done(labels)
    info = machine_info(cc)
    info.update({"target_flags": tflags, "seed": seed, "per_family": per_family or DEFAULT_PER_FAMILY,
                 "repeats": repeats, "target_ns": target_ns, "timing_cpu": cpu,
                 "configs": [list(c) for c in configs]})
    atomic_write_bytes(out / "machine.json", (json.dumps(info, indent=1) + "\n").encode())
    todo = [(r, fm) for r, fm in rows if r["name"] + ("+fastmath" if fm else "") not in done]
    bar = tqdm(total=len(rows), initial=len(rows) - len(todo), unit="kernel", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    try:
        for rec, fm in todo:
            bar.set_postfix_str(rec["name"] + ("+fm" if fm else ""), refresh=False)
            try:
                row = measure_row(rec, kdir / rec["file"], cc=cc, cc_ver=info["cc_version"],
                                  target_flags=tflags, fast_math=fm, repeats=repeats,
                                  configs=configs, target_ns=target_ns, jobs=jobs, cpu=cpu,
                                  seed=seed)
            except RuntimeError as exc:
                bar.write(f"mire vectorize-data: {exc}")
                row = {"row": rec["name"] + ("+fastmath" if fm else ""), "name": rec["name"],
                       "family": rec["family"], "error": str(exc)[:2000], "fast_math": fm}
            append_row(labels, row)
            bar.update(1)
    finally:
        bar.close()
    return labels


def summarize(rows: list[dict]) -> str:
    good = [r for r in rows if r.get("speedup_best_over_default")]
    lines = [f"rows: {len(rows)} ({sum(1 for r in rows if 'error' in r)} failed), "
             f"kernels: {len({r['name'] for r in rows})}"]
    if good:
        sp = [r["speedup_best_over_default"] for r in good]
        lines.append(f"best-over-default speedup: mean {statistics.mean(sp):.3f}, "
                     f"median {statistics.median(sp):.3f}, max {max(sp):.3f}; "
                     f"default already best (<=1.02): {sum(s <= 1.02 for s in sp)}/{len(sp)}")
    oc = [r for r in rows if r.get("n_output_changed")]
    lines.append(f"rows with output_changed configs: {len(oc)} "
                 f"({sum(r['n_output_changed'] for r in oc)} configs; "
                 f"families: {sorted({r['family'] for r in oc})}, "
                 f"fast-math rows: {sum(1 for r in oc if r.get('fast_math'))})")
    walls = [r["wall_s"] for r in rows if "wall_s" in r]
    if walls:
        lines.append(f"wall per row: mean {statistics.mean(walls):.1f} s, "
                     f"max {max(walls):.1f} s, total {sum(walls) / 60:.1f} min")
    lines.append(f"{'family':<14}{'rows':>5}{'mean':>8}{'median':>8}{'max':>8}{'changed':>8}")
    for fam in sorted({r["family"] for r in rows}):
        fr = [r for r in rows if r["family"] == fam]
        sp = [r["speedup_best_over_default"] for r in fr if r.get("speedup_best_over_default")]
        m = (f"{statistics.mean(sp):8.3f}{statistics.median(sp):8.3f}{max(sp):8.3f}" if sp
             else f"{'-':>8}{'-':>8}{'-':>8}")
        lines.append(f"{fam:<14}{len(fr):>5}{m}{sum(r.get('n_output_changed', 0) for r in fr):>8}")
    return "\n".join(lines)


def kernels_dir(data: Path) -> Path:
    """Where the kernel sources of the dataset in ``data`` are: its own
    ``kernels/``, or for an exported dataset (labels and machine.json only)
    the generator's kernels for the seed and kernels per family it was
    measured with, written once into the user cache (the generator is
    deterministic; :func:`kernel_source` checks each source).  Caches of
    what is computed from the kernels go beside this folder."""
    if (data / "kernels").is_dir():
        return data / "kernels"

    machine = data / "machine.json"
    try:
        info = json.loads(machine.read_text())
        seed, per_family = int(info["seed"]), int(info.get("per_family") or DEFAULT_PER_FAMILY)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{machine}: no kernels/ beside the labels and no readable seed to "
                         f"generate them from ({exc})") from None
    out = Path(default_cache_dir()) / "vectorize" / f"seed{seed}-per{per_family}" / "kernels"
    if not (out / "index.json").is_file():
        write_kernels(out, seed, per_family)
    return out


def kernel_source(data: Path, row: dict) -> Path:
    """The source file of ``row``'s kernel, checked against the hash its
    labels were measured with."""
    path = kernels_dir(data) / f"{row['name']}.c"
    if not path.is_file() or \
            hashlib.sha256(path.read_bytes()).hexdigest() != row.get("source_sha256"):
        raise ValueError(f"{path}: not the source {data / 'labels.jsonl'} measured for "
                         f"{row['name']} (another generator version?)")
    return path


def export(data: Path, to: Path) -> list[Path]:
    """The dataset's labels (gzip) and machine.json into ``to``, each
    replaced atomically: what ``heads/loop-vectorize/labels`` holds."""
    labels = data / "labels.jsonl"
    if not labels.is_file():
        raise ValueError(f"{labels}: no labels to export (run mire vectorize-data first)")
    to.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(to / "labels.jsonl.gz", gzip.compress(labels.read_bytes(), mtime=0))
    atomic_write_bytes(to / "machine.json", (data / "machine.json").read_bytes())
    return [to / "labels.jsonl.gz", to / "machine.json"]
