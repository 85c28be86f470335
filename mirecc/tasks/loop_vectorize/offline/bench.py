"""``mire bench vectorize``: binaries built by ``mirecc -O3`` against ``clang -O3``.

Programs: the dataset's kernels of the families the shipped head never saw
(``held_out_families`` in its metrics.json), or any directory of C
programs (``--programs DIR``, one program per ``.c`` file, run with
``--run``).  Each program is built with the plain clang and with mirecc
driving the same clang (compile time measured, median of
``--compile-repeats``), both binaries are run alternately ``--repeats``
times pinned to one CPU, and their outputs are compared.  Reported per
program: the speedup of the median times with its min-max over the
pairings; overall: the geomean, the worst case, the number of programs
whose output changed, and for dataset kernels the oracle (best forced
factors of the dataset run over its LLVM default, measured there).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.frontend.compiler import find_compiler
from mirecc.frontend.toolchain import installed_driver
from mirecc.learn.labels import read_rows
from mirecc.learn.pages import update_page
from mirecc.taskapi.config import load_config
from mirecc.taskapi.registry import default_heads_dirs
from mirecc.tasks.loop_vectorize.offline.dataset import (COMMITTED, kernel_source, run_binary,
                                                         timing_cpu)
from mirecc.tasks.loop_vectorize.offline.train import oracle_speedup
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.machine import cpu_model
from mirecc.util.plots import pyplot, save

DEFAULT_DATA = COMMITTED


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``mire bench vectorize`` (added to the shared ``bench`` parser)."""
    g = p.add_argument_group("vectorize")
    g.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="vectorize: dataset directory of mire vectorize-data "
                        "(default: %(default)s)")
    g.add_argument("--run", default="{exe}",
                   help="vectorize: with --programs, the command that runs a program "
                        "({exe}: the binary; default: %(default)s)")
    g.add_argument("--repeats", type=int, default=7,
                   help="vectorize: timed runs per binary (default: %(default)s)")
    g.add_argument("--heads-dir", type=Path, default=None,
                   help="vectorize: heads directory mirecc uses (default: the shipped heads)")


def _compile(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, proc


def _time_plain(cmd: list[str], cpu: int) -> dict:
    """Wall time and stdout of a program that does not time itself."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    return {"ok": proc.returncode == 0, "time_ns": (time.perf_counter() - t0) * 1e9,
            "checksum": proc.stdout, "error": proc.stderr[-300:]}


def bench_programs(programs: list[dict], cc: str, flags: list[str], repeats: int,
                   compile_repeats: int, heads_dir: Path | None, workdir: Path) -> list[dict]:
    """Build, check and time each program ({name, source, args | run}); one result each."""
    mirecc = installed_driver("mirecc")
    # no result cache: every compile pays the whole ML path, as a first build does
    env = dict(os.environ, MIRECC_CC=cc, MIRECC_QUIET="0", MIRECC_CACHE="0",
               MIRECC_APPLY_LOOPS="1")   # the head's factors applied, not only recorded
    if heads_dir:
        env["MIRECC_HEADS_DIR"] = str(heads_dir)
    record = workdir / "record.jsonl"
    env["MIRECC_RECORD"] = str(record)
    cpu = timing_cpu()
    results = []
    for prog in tqdm(programs, desc="bench vectorize", unit="program", file=sys.stderr,
                     disable=None):
        res = {"name": prog["name"], "source": str(prog["source"])}
        exes, ctimes = {}, {"clang": [], "mirecc": []}
        for who in ("clang", "mirecc"):
            exe = workdir / f"{prog['name']}.{who}"
            driver = cc if who == "clang" else mirecc
            cmd = [driver, *flags, str(prog["source"]), "-o", str(exe), "-lm"]
            for _ in range(compile_repeats):
                seconds, proc = _compile(cmd, env)
                if proc.returncode != 0:
                    res["error"] = f"{who} failed: {proc.stderr.strip()[-500:]}"
                    break
                if who == "mirecc" and "mirecc: warning" in proc.stderr:
                    res["mirecc_warning"] = proc.stderr.strip().splitlines()[-1]
                ctimes[who].append(seconds)
            exes[who] = exe
        if "error" in res:
            results.append(res)
            continue
        res["compile_s"] = {w: statistics.median(t) for w, t in ctimes.items()}

        def run(who):
            if "args" in prog:
                return run_binary(exes[who], prog["args"], cpu, {"MIRECC_REPS": reps[who]})
            return _time_plain(shlex.split(prog["run"].format(exe=exes[who])), cpu)

        reps = {}
        if "args" in prog:   # self-timing kernels: calibrate the repeat count once
            for who in exes:
                cal = run_binary(exes[who], prog["args"], cpu, {"MIRECC_TARGET_NS": 2e6})
                reps[who] = max(1, int(2e7 / max(cal.get("time_ns", 1.0), 1.0)))
        samples = {"clang": [], "mirecc": []}
        outputs = {}
        for r in range(repeats):
            for who in (("clang", "mirecc") if r % 2 == 0 else ("mirecc", "clang")):
                out = run(who)
                if not out["ok"]:
                    res["error"] = f"{who} binary failed: {out.get('error')}"
                    break
                samples[who].append(out["time_ns"])
                outputs.setdefault(who, out["checksum"])
            if "error" in res:
                break
        if "error" in res:
            results.append(res)
            continue
        ratios = [c / m for c, m in zip(samples["clang"], samples["mirecc"])]
        res.update({
            "output_changed": outputs["clang"] != outputs["mirecc"],
            "median_ns": {w: statistics.median(s) for w, s in samples.items()},
            "speedup": statistics.median(samples["clang"]) / statistics.median(samples["mirecc"]),
            "speedup_min": min(ratios), "speedup_max": max(ratios),
            "same_binary": exes["clang"].read_bytes() == exes["mirecc"].read_bytes(),
        })
        results.append(res)
    decisions = {}
    if record.is_file():
        for line in record.read_text().splitlines():
            d = json.loads(line)
            decisions[Path(d["source"]).stem] = [
                (x["target"], x["value"], round(x["confidence"], 2), x["applied"])
                for x in d["decisions"] if x["task"] == "loop-vectorize"]
    for res in results:
        res["decisions"] = decisions.get(res["name"], [])
    return results


def dataset_programs(data: Path, families: list[str]) -> list[dict]:
    rows = [r for r in read_rows(data / "labels.jsonl")
            if r["family"] in families and not r.get("fast_math") and r.get("best")]

    return [{"name": r["name"], "source": kernel_source(data, r),
             "args": r["args"], "family": r["family"], "oracle": oracle_speedup(r)}
            for r in rows]


def _forced(decisions) -> str:
    """The loops whose factors mirecc forced, e.g. 'kernel:1: 8x2 (trees 90%)'."""
    return "; ".join(f"{t}: {v['vectorize.width']}x{v['interleave.count']} (trees {c:.0%})"
                     for t, v, c, applied in decisions if applied and v)


def geomean(xs) -> float:
    return float(np.exp(np.mean(np.log(xs))))


def report(results: list[dict], meta: dict) -> str:
    ok = [r for r in results if "speedup" in r]
    lines = ["# mire bench vectorize", "",
             f"Machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores; compiler "
             f"{meta['cc']} {' '.join(meta['flags'])}; {meta['repeats']} runs per binary, "
             f"alternating, pinned to CPU {meta['cpu']}; speedup = median clang time / median "
             f"mirecc time (min-max over the pairings).  Oracle: best forced (VF, IF) over "
             f"LLVM's default in the dataset run (`mire vectorize-data`).", "",
             "| program | family | speedup | min-max | oracle | output | binary | loops mirecc "
             "forced (share of trees agreeing) |",
             "|---|---|---:|---:|---:|---|---|---|"]
    for r in results:
        if "speedup" not in r:
            lines.append(f"| {r['name']} | {r.get('family', '')} | error | | | | | "
                         f"{r['error']} |")
            continue
        oracle = f"{r['oracle']:.3f}" if r.get("oracle") else ""
        lines.append(f"| {r['name']} | {r.get('family', '')} | {r['speedup']:.3f} | "
                     f"{r['speedup_min']:.3f}-{r['speedup_max']:.3f} | {oracle} | "
                     f"{'CHANGED' if r['output_changed'] else 'same'} | "
                     f"{'same' if r['same_binary'] else 'differs'} | "
                     f"{_forced(r['decisions']) or 'none (LLVM decides)'} |")
    if ok:
        s = meta["summary"]
        lines += ["", f"Geomean speedup over clang -O3: **{s['geomean']:.3f}x** over "
                  f"{len(ok)} programs (target 1.15); worst {s['worst']:.3f} (target >= 0.95); "
                  f"outputs changed: {s['output_changed']} (must be 0); "
                  f"compile time mirecc / clang: median {s['compile_ratio_median']:.2f}x."]
        same = [r["speedup"] for r in ok if r["same_binary"]]
        if same:
            # identical binaries differ only by noise: the run-to-run spread
            lines.append(f"{len(same)} of {len(ok)} programs got the byte-identical binary "
                         f"from both compilers; their \"speedups\" (noise) range "
                         f"{min(same):.3f}-{max(same):.3f}, geomean {geomean(same):.3f}.")
        if s.get("oracle_geomean"):
            lines.append(f"Oracle geomean {s['oracle_geomean']:.3f}x: mirecc reaches "
                         f"{s['fraction_of_oracle_gain']:.1%} of the oracle's gain over "
                         f"clang -O3 (log speedup / log oracle; target 85%); the plain ratio "
                         f"of the geomeans is {s['fraction_of_oracle']:.1%}, which also counts "
                         f"what clang's default already has.")
    return "\n".join(lines) + "\n"


def labels_paragraph(metrics: dict) -> str:
    """The head's figures computed from the dataset's timings (mire vectorize-train)."""
    chosen, held = metrics["chosen"], metrics["held_out_from_labels"]

    def figures(p):
        return (f"{p['geomean']:.3f}x (oracle {p['oracle_geomean']:.3f}x, worst "
                f"{p['worst']:.3f}, {p['slower_than_0.95']} below 0.95)")
    lines = [f"\nFrom the dataset's own timings (`mire vectorize-train`, speedup over LLVM's "
             f"default with the same binaries as the labels), leave-one-family-out over the "
             f"{metrics['trained_on']['kernels']} training kernels, each input set at its "
             f"best quantile and min_gain:\n",
             "| inputs | quantile | min_gain | geomean (oracle, worst, below 0.95) |",
             "|---|---:|---:|---|"]
    for p in metrics["ablation"]:
        lines.append(f"| {' + '.join(p['features'])} | {p['quantile']} | {p['min_gain']} | "
                     f"{figures(p)} |")
    lines.append(f"\nShipped: {' + '.join(chosen['features'])}, quantile "
                 f"{chosen['quantile']}, min_gain {chosen['min_gain']} (chosen on the "
                 f"training families).  The held-out families "
                 f"({', '.join(metrics['trained_on']['held_out_families'])}, "
                 f"{held['kernels']} kernels), from the labels: {figures(held)}.")
    enc = metrics.get("encoder_against_statistics")
    if enc:
        low, high = enc["log_gain_interval"]
        lines.append(f"The best input set with the encoder ({' + '.join(enc['features'])}, "
                     f"{enc['geomean']:.4f}x) against the statistics' best: log geomean "
                     f"difference {low:+.4f} to {high:+.4f} (90%, families resampled); "
                     + ("clear of zero, so it ships and every compile that reads the head "
                        "runs the encoder." if enc["chosen"] else
                        "not clear of zero, so the statistics ship and no compile runs the "
                        "encoder for this head."))
    return "\n".join(lines) + "\n"


def plot(results: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    ok = [r for r in results if "speedup" in r]
    if not ok:
        return
    x = np.arange(len(ok))
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(ok)), 4))
    sp = np.asarray([r["speedup"] for r in ok])
    err = np.asarray([[r["speedup"] - r["speedup_min"], r["speedup_max"] - r["speedup"]]
                      for r in ok]).T
    ax.bar(x, sp, yerr=err, color="tab:blue", label="mirecc -O3 / clang -O3")
    orc = [r.get("oracle") for r in ok]
    if any(orc):
        ax.scatter(x, [o or np.nan for o in orc], color="tab:red", marker="_", s=200,
                   label="oracle (dataset run)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(x, [r["name"] for r in ok], rotation=90, fontsize=7)
    ax.set_ylabel("speedup over clang -O3")
    ax.legend(fontsize=8)
    save(fig, path, dpi=120)


def run(args: argparse.Namespace) -> int:
    cc = args.cc or find_compiler(load_config(), cxx=False)
    flags = args.flags.split()
    if args.programs:
        programs = [{"name": p.stem, "source": p, "run": args.run}
                    for p in sorted(Path(args.programs).glob("*.c"))]
        families = None
        head_metrics = None
    else:
        heads = args.heads_dir or Path(default_heads_dirs(load_config())[0])
        metrics = heads / "loop-vectorize" / "metrics.json"
        try:
            head_metrics = json.loads(metrics.read_text())
            families = head_metrics["trained_on"]["held_out_families"]
        except (OSError, KeyError, ValueError) as exc:
            print(f"mire bench vectorize: {metrics}: cannot read the held-out families "
                  f"({exc}); train the head with mire vectorize-train", file=sys.stderr)
            return 2
        programs = dataset_programs(args.data, families)
    if not programs:
        print("mire bench vectorize: no programs to run", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mirecc-bv-") as tmp:
        results = bench_programs(programs, cc, flags, args.repeats, args.compile_repeats,
                                 args.heads_dir, Path(tmp))
    for r, p in zip(results, programs):
        r["family"], r["oracle"] = p.get("family"), p.get("oracle")
    ok = [r for r in results if "speedup" in r]
    summary = {}
    if ok:
        summary = {"programs": len(ok), "errors": len(results) - len(ok),
                   "geomean": geomean([r["speedup"] for r in ok]),
                   "worst": min(r["speedup"] for r in ok),
                   "output_changed": sum(r["output_changed"] for r in ok),
                   "compile_ratio_median": statistics.median(
                       r["compile_s"]["mirecc"] / r["compile_s"]["clang"] for r in ok)}
        if all(r.get("oracle") for r in ok):
            summary["oracle_geomean"] = geomean([r["oracle"] for r in ok])
            summary["fraction_of_oracle"] = summary["geomean"] / summary["oracle_geomean"]
            summary["fraction_of_oracle_gain"] = (
                math.log(summary["geomean"]) / math.log(summary["oracle_geomean"])
                if summary["oracle_geomean"] > 1 else float("nan"))
    meta = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count()}, "cc": cc,
            "flags": flags, "repeats": args.repeats, "cpu": timing_cpu(),
            "held_out_families": families, "summary": summary}
    text = report(results, meta)
    if head_metrics:
        text += labels_paragraph(head_metrics)
    atomic_write_bytes(out / "vectorize.md", text.encode())
    atomic_write_bytes(out / "vectorize.json",
                       (json.dumps({**meta, "results": results}, indent=1, default=str)
                        + "\n").encode())
    plot(results, out / "vectorize.png")
    if args.update_readme:
        update_page(Path(args.update_readme), "vectorize", text)
        # the page shows the plot beside it
        atomic_write_bytes(Path(args.update_readme).parent / "vectorize.png",
                           (out / "vectorize.png").read_bytes())
    print(text)
    print(f"saved {out / 'vectorize.md'}, vectorize.json, vectorize.png")
    return 0 if ok else 1
