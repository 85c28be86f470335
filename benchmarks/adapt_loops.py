"""Functions compiled in versions and chosen at run time (``adapt_loops``)
against clang -O3.

    .venv/bin/python benchmarks/adapt_loops.py [--rounds 8] [--polybench DIR]
        [--only NAME...] [--work DIR] [--out docs/results/adapt-loops.md]

Programs:

* the loop-vectorize head's held-out kernels (``held_out_families`` in
  ``heads/loop-vectorize/metrics.json``: families the head never saw), each
  a function called ``reps`` times per run and timed by the program itself
  (``reps`` calibrated once on clang's build to about 20 ms), so that the
  versions are explored within a run;
* with ``--polybench``, PolyBench/C 4.2.1 (a checkout; ``--dataset``, MEDIUM,
  ``-DPOLYBENCH_TIME``, the arrays dumped and hashed as its check): each run
  calls its kernel once, so the versions are explored across runs, one per
  run.

Per program: clang -O3 and mirecc -O3 with ``MIRECC_ADAPT_LOOPS=1``
(``MIRECC_CACHE=0``: every compile pays the whole ML path) built, with the
compile and link time, the program's text bytes and the functions
versioned; ``--rounds`` rounds of both sides, their order alternating, the
adapted build from an empty verdict store: first = clang's median over the
adapted build's first run; steady = ``--steady-rounds`` more rounds after
those (the store as they left it, the runtime going on as it would), the
median of clang's run over the adapted run of the same round; worst = over
the slowest adapted run; oracle = every site forced to each of its
versions in turn (a decided store), ``--oracle-rounds`` rounds each against
clang; the best of them (the selected oracle) is then
measured again in ``--oracle-rounds`` rounds of its own, so that the noise
that made it the best does not also give its speed (the oracle; off:
``--no-oracle-confirm``).  Outputs are compared on every run.  Also:
the runtime's cost per call of a decided function (``__mirecc_version_begin``
and ``_end`` in a loop of 10 million calls).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent

from mirecc.frontend.toolchain import installed_driver  # noqa: E402
from mirecc.learn.labels import read_rows  # noqa: E402
from mirecc.runtime.build import link_arguments  # noqa: E402
from mirecc.runtime.store import HEADER, decided_line, read_store  # noqa: E402
from mirecc.tasks.loop_vectorize.offline.dataset import (COMMITTED, kernel_source,  # noqa: E402
                                                         run_binary, timing_cpu)
from mirecc.util.machine import cpu_model  # noqa: E402

CLANG = "clang-14"
POLYBENCH_FLAGS = ["-DPOLYBENCH_TIME", "-DPOLYBENCH_DUMP_ARRAYS"]


def geomean(values) -> float:
    values = [v for v in values if v and v > 0 and not math.isnan(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def text_bytes(exe: Path) -> int:
    out = subprocess.run(["size", str(exe)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


def kernels() -> list[dict]:
    metrics = json.loads((ROOT / "heads" / "loop-vectorize" / "metrics.json").read_text())
    held_out = metrics["trained_on"]["held_out_families"]
    rows = [r for r in read_rows(COMMITTED / "labels.jsonl")
            if r["family"] in held_out and not r.get("fast_math")]
    return [{"name": r["name"], "suite": r["family"], "source": kernel_source(COMMITTED, r),
             "args": r["args"], "flags": [], "extra": []} for r in rows]


def polybench(tree: Path, dataset: str) -> list[dict]:
    utilities = tree / "utilities"
    out = []
    for src in sorted(tree.glob("*/**/*.c")):
        if src.parent.name == "utilities" or src.name.endswith(".orig.c"):
            continue
        out.append({"name": src.stem, "suite": "polybench", "source": src, "args": [],
                    "once": True,
                    "flags": [f"-D{dataset}_DATASET", *POLYBENCH_FLAGS, f"-I{utilities}",
                              f"-I{src.parent}"],
                    "extra": [str(utilities / "polybench.c")]})
    return out


#: the held-out loop-nest programs (``benchmarks/tune_programs.py --suite nests``)
NESTS = ("covariance", "doitgen", "mvt", "gemver", "colreduce-maxabs", "transprod-abt")


def nests(work: Path) -> list[dict]:
    """The held-out loop-nest programs in PolyBench-ACC's harness
    (STANDARD_DATASET), built with a loop-nests head fitted on every other
    labelled program (the shipped heads beside it)."""
    from mirecc.tasks.loop_nests.offline import dataset
    from mirecc.tasks.loop_nests.offline.bench import write_held_out_head

    found = {p.stem: p for _, p in dataset.programs(["polybench", "own"], work / "nest-src")}
    heads = work / "heads"
    if not (heads / "loop-nests").is_dir():
        heads.mkdir(exist_ok=True)
        for head in (ROOT / "heads").iterdir():
            if head.is_dir() and head.name != "loop-nests" and not (heads / head.name).exists():
                (heads / head.name).symlink_to(head)
        write_held_out_head(heads / "loop-nests", list(NESTS), work / "nest-ir", CLANG)
    util = dataset.polybench_root() / "utilities"
    return [{"name": n, "suite": "nests", "source": found[n], "args": [], "once": True,
             "flags": ["-w", "-DSTANDARD_DATASET", *POLYBENCH_FLAGS, f"-I{util}",
                       f"-I{found[n].parent}"],
             "extra": [str(util / "polybench.c")],
             "env": {"MIRECC_HEADS_DIR": str(heads)}} for n in NESTS]


def build(prog: dict, work: Path, adapt: bool, unroll: int = 0) -> tuple[Path, float]:
    exe = work / f"{prog['name']}.{'adapt' if adapt else 'clang'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    cc = CLANG
    if adapt:
        cc = installed_driver("mirecc")
        env.update(MIRECC_CC=CLANG, MIRECC_CACHE="0", MIRECC_ADAPT_LOOPS="1",
                   MIRECC_ADAPT_UNROLL=str(unroll), **prog.get("env", {}))
    t0 = time.perf_counter()
    subprocess.run([cc, "-O3", *prog["flags"], str(prog["source"]), *prog["extra"], "-o",
                    str(exe), "-lm"], check=True, env=env, capture_output=True)
    return exe, time.perf_counter() - t0


def run_once(prog: dict, exe: Path, store: Path | None, reps: int | None, cpu: int) -> dict:
    """{ok, seconds, check}: a kernel's own time per call; PolyBench's
    printed time and the hash of its dumped arrays."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_ADAPT")}
    env["MIRECC_ADAPT_STORE"] = str(store) if store else "/nonexistent/store.txt"
    if not prog.get("once"):
        out = run_binary(exe, prog["args"], cpu,
                         {"MIRECC_REPS": reps, "MIRECC_ADAPT_STORE": env["MIRECC_ADAPT_STORE"]})
        if not out["ok"]:
            return {"ok": False, "error": out["error"]}
        return {"ok": True, "seconds": out["time_ns"] * 1e-9, "check": out["checksum"]}
    proc = subprocess.run([str(exe)], capture_output=True, env=env,
                          preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr[-300:].decode(errors="replace")}
    return {"ok": True, "seconds": float(proc.stdout.split()[0]),
            "check": hashlib.sha256(proc.stderr).hexdigest()[:16]}


def forced_store(learned: Path, target: Path, index: int) -> int:
    """Every site of ``learned`` decided for its ``index``-th arm (or its
    default when it has fewer); how many sites have that arm."""
    lines, n = [f"{HEADER} machine=forced"], 0
    for c in read_store(learned):
        names = [a.name for a in c.arms]
        n += index < len(names)
        best = names[index] if index < len(names) else "default"
        lines.append(decided_line(c.key, c.name, best, names, bucket=c.bucket,
                                  invocations=10 ** 12, runs=1))
    target.write_text("\n".join(lines) + "\n")
    return n


def one_program(prog: dict, args, work: Path, cpu: int) -> dict:
    rec = {"name": prog["name"], "suite": prog["suite"]}
    plain, t_plain = build(prog, work, adapt=False)
    adapt, t_adapt = build(prog, work, adapt=True, unroll=args.unroll)
    rec.update(build_s={"clang": t_plain, "adapt": t_adapt},
               text={"clang": text_bytes(plain), "adapt": text_bytes(adapt)})
    reps = None
    if not prog.get("once"):
        cal = run_binary(plain, prog["args"], cpu, {"MIRECC_TARGET_NS": 2e6})
        if not cal["ok"]:
            raise RuntimeError(f"clang's build failed: {cal['error']}")
        reps = max(1, int(2e7 / max(cal["time_ns"], 1.0)))
    store = work / f"{prog['name']}.store.txt"
    store.unlink(missing_ok=True)
    checks = {"clang": set(), "adapt": set()}

    def alternate(rounds: int) -> dict[str, list[float]]:
        """``rounds`` rounds of both sides, their order alternating: the
        seconds of each side's runs (outputs into ``checks``)."""
        times = {"clang": [], "adapt": []}
        for r in range(rounds):
            for side in (("clang", "adapt") if r % 2 == 0 else ("adapt", "clang")):
                out = run_once(prog, plain if side == "clang" else adapt,
                               store if side == "adapt" else None, reps, cpu)
                if not out["ok"]:
                    raise RuntimeError(f"{side}'s build failed: {out['error']}")
                times[side].append(out["seconds"])
                checks[side].add(out["check"])
        return times

    times = alternate(args.polybench_rounds if prog.get("once") else args.rounds)
    base = statistics.median(times["clang"])
    # steady: after the rounds (the adapted build's store as they left it,
    # the runtime going on as it would), each adapted run against clang's
    # run of the same round (the machine's drift cancels)
    steady = alternate(args.steady_rounds)
    if not args.steady_rounds:      # the second half of the rounds instead
        h = len(times["adapt"]) // 2
        steady = {side: ts[h:] for side, ts in times.items()}
    paired = [c / a for c, a in zip(steady["clang"], steady["adapt"])]
    cells = read_store(store) if store.exists() else []
    rec.update(times=times, steady_times=steady, first=base / times["adapt"][0],
               steady=statistics.median(paired), worst=base / max(times["adapt"]),
               changed=len(checks["adapt"] | checks["clang"]) - 1,
               verdicts={c.name: (c.best if c.phase == 1 else c.state) for c in cells},
               # the functions in versions that ran (a dispatch inlined away leaves no symbol)
               versioned=sorted({c.name.split(" ", 1)[-1] for c in cells}))
    # the oracle: each version forced in turn
    arms = max((len(c.arms) for c in cells), default=1)

    def forced_speed(index: int) -> float:
        forced = work / f"{prog['name']}.forced{index}.txt"
        forced_store(store, forced, index)
        ts, base2 = [], []
        for r in range(args.oracle_rounds):
            for side in (("clang", "forced") if r % 2 == 0 else ("forced", "clang")):
                out = run_once(prog, plain if side == "clang" else adapt,
                               forced if side == "forced" else None, reps, cpu)
                if not out["ok"]:
                    raise RuntimeError(f"forced version {index} failed: {out['error']}")
                (base2 if side == "clang" else ts).append(out["seconds"])
                if side == "forced":
                    rec["changed"] += out["check"] not in checks["clang"]
        return statistics.median(base2) / statistics.median(ts)

    oracle = {index: forced_speed(index) for index in range(arms)}
    rec["oracle_by_version"] = oracle
    best = max(oracle, key=oracle.get)
    rec["oracle_selected"] = oracle[best]
    # the version chosen measured again, in rounds of its own: the noise
    # that made it the best of its rounds does not also give its speed
    rec["oracle_version"] = best
    rec["oracle"] = forced_speed(best) if args.oracle_confirm else oracle[best]
    if reps is not None:
        rec["reps"] = reps
        rec["trials"] = trials(prog, work, cpu, reps)
    return rec


ORDERS = ("head", "fixed", "random:1", "random:2")


def trials(prog: dict, work: Path, cpu: int, reps: int) -> dict:
    """Per order of the versions (``MIRECC_ADAPT_ORDER``: the head's, by name,
    shuffled), one run of the adapted build from an empty store: per site
    decided in that run, the calls until the version finally kept."""
    adapt = work / f"{prog['name']}.adapt"
    out = {}
    for order in ORDERS:
        store = work / f"{prog['name']}.order-{order.replace(':', '-')}.txt"
        store.unlink(missing_ok=True)
        run_binary(adapt, prog["args"], cpu, {"MIRECC_REPS": reps, "MIRECC_ADAPT_STORE": store,
                                              "MIRECC_ADAPT_ORDER": order})
        cells = read_store(store) if store.exists() else []
        # the kept version's own "at" (when it was kept), else when the site decided
        out[order] = {c.name: max([a.at for a in c.arms if a.kept] or [c.decided_at])
                      for c in cells if c.phase == 1}
    return out


PAIRS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* the plugin's site descriptor (passes/plugin/FORMAT.md, "Function versions") */
struct site { int32_t version, flags; const char *key, *name, *cands;
              int32_t sched, chunk; int64_t trip; void *state; };
int32_t __mirecc_version_begin(struct site *);
void __mirecc_adapt_end(struct site *, int32_t);
static struct site site = {1, 4, "vpairs0000000001", "pairs.c f", "8x2 4x1", 0, 0, -1, 0};
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) __mirecc_adapt_end(&site, __mirecc_version_begin(&site));
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
"""


# a function of a few nanoseconds, called 20 million times: what its dispatch
# adds per call, once decided (the fast path), against clang's build
CALLS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) int f(int n, const int *a) {
  int s = 0;
  for (int i = 0; i < n; i++) s += a[i];
  return s;
}
int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 20000000;
  static int a[4] = {1, 2, 3, 4};
  long s = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < calls; i++) {
    int n = 2;
    __asm__ volatile("" : "+r"(n));   /* not hoisted out of the loop */
    s += f(n, a);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fprintf(stderr, "%ld\n", s);
  printf("%.3f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / calls);
  return 0;
}
"""


def call_cost(work: Path, runs: int) -> dict:
    """ns per call of a tiny function: clang's build, and compiled in
    versions (through the plugin) with the runtime, decided for LLVM's
    version after the first run."""
    from mirecc.plugin.build import ensure_plugin, plugin_args

    src = work / "calls.c"
    src.write_text(CALLS)
    plain, versioned = work / "calls.clang", work / "calls.versions"
    subprocess.run([CLANG, "-O3", str(src), "-o", str(plain)], check=True)
    dec = work / "calls.json"
    dec.write_text(json.dumps({"version": 1, "modules": {"*": {"versions": {"f": {
        "key": "calls00000000001", "name": "calls.c f", "versions": [
            {"name": "1x1", "loops": {"1": {"vectorize.width": 1, "interleave.count": 1}}},
            {"name": "8x4", "loops": {"1": {"vectorize.width": 8, "interleave.count": 4}}}]}}}}}))
    subprocess.run([CLANG, "-O3", *plugin_args(14, ensure_plugin(14), dec), str(src), "-o",
                    str(versioned), *link_arguments(CLANG)], check=True)
    store = work / "calls-store.txt"
    store.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_ADAPT")}
    env["MIRECC_ADAPT_STORE"] = str(store)
    subprocess.run([str(versioned)], check=True, capture_output=True, env=env)  # decides
    out = {"clang": [], "versions": []}
    for r in range(runs):
        for side in (("clang", "versions") if r % 2 == 0 else ("versions", "clang")):
            proc = subprocess.run([str(plain if side == "clang" else versioned)], check=True,
                                  capture_output=True, text=True, env=env)
            out[side].append(float(proc.stdout))
    (cell,) = read_store(store)
    out["verdict"] = cell.best if cell.phase == 1 else cell.state
    return out


def pair_cost(work: Path, runs: int) -> dict:
    """ns per call of the runtime's own entries for a decided function (LLVM's
    version kept, no re-check due: what a call pays when the dispatch's fast
    path is closed) and with the runtime off."""
    src = work / "vpairs.c"
    src.write_text(PAIRS)
    exe = work / "vpairs"
    subprocess.run([CLANG, "-O2", str(src), "-o", str(exe), *link_arguments(CLANG)],
                   check=True)
    store = work / "vpairs-store.txt"
    store.write_text(f"{HEADER} machine=x\n" + decided_line(
        "vpairs0000000001", "pairs.c f", "default", ["default", "8x2", "4x1"],
        invocations=10 ** 12, runs=1) + "\n")
    out = {"decided": [], "off": []}
    for r in range(runs):
        for side in (("decided", "off") if r % 2 == 0 else ("off", "decided")):
            env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_ADAPT")}
            env.update({"MIRECC_ADAPT_STORE": str(store)} if side == "decided"
                       else {"MIRECC_ADAPT": "0"})
            proc = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                                  env=env)
            out[side].append(float(proc.stdout))
    return out


def runtime_text() -> int:
    """The adaptive runtime's own text bytes (its archive's member)."""
    from mirecc.runtime.build import ensure_runtime

    out = subprocess.run(["size", str(ensure_runtime(CLANG))], capture_output=True, text=True,
                         check=True).stdout
    return sum(int(line.split()[0]) for line in out.splitlines()[1:])


def page(results: list[dict], pairs: dict | None, args, started: str, cpu: int) -> str:
    ok = [r for r in results if "error" not in r]
    rt = runtime_text()
    lines = [
        "# Functions in versions, chosen at run time (adapt_loops)", "",
        f"Written by `benchmarks/adapt_loops.py` ({started}). Machine: {cpu_model()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}; compiler {CLANG} "
        f"-O3; mirecc -O3 with `MIRECC_ADAPT_LOOPS=1` (3 versions per function: LLVM's and "
        f"the shipped loop-vectorize head's two best (VF, IF) per loop; a function with a "
        f"loop nest one more, the loop-nests head's schedule, Polly on that version alone"
        + (f"; `MIRECC_ADAPT_UNROLL={args.unroll}`: one more, each ranked loop unrolled "
           f"{args.unroll} times" if getattr(args, "unroll", 0) else "")
        + ") and no result cache. The held-out loop nests (suite `nests`, PolyBench-ACC's "
        f"harness at STANDARD_DATASET) are built with a loop-nests head fitted on every "
        f"other labelled program; the other suites with the shipped head, whose labels "
        f"include PolyBench-ACC's versions of PolyBench's kernels (the runs, not the head, "
        f"decide what is kept).",
        "",
        f"Protocol: {args.rounds} rounds ({args.polybench_rounds} for PolyBench and the "
        f"nests, whose kernel runs once per process: their versions are explored across "
        f"runs, one per run) of clang's build and the adapted build, their order "
        f"alternating, runs pinned to CPU {cpu}; the adapted build starts from an empty "
        f"verdict store. Kernels: the time per call the program measures over a ~20 ms loop "
        f"of calls; PolyBench ({args.dataset}_DATASET): its printed kernel time. first = clang's median over the "
        f"adapted build's first run; steady = "
        + (f"{args.steady_rounds} more rounds after those (the store as they left it, the "
           f"runtime going on), " if args.steady_rounds else "the second half of those rounds, ")
        + f"the median of clang's run over the adapted run of the same round (the drift "
        f"cancels); worst = over the slowest adapted run; oracle = every site forced to each "
        f"version in turn, {args.oracle_rounds} rounds against clang each; the best "
        f"(oracle, selected), "
        + (f"then measured again in {args.oracle_rounds} rounds of its own (oracle: the noise "
           f"that picked it does not also give its speed). "
           if getattr(args, "oracle_confirm", False) else "its speed in those rounds (oracle). ")
        + f"Outputs "
        f"(the kernels' checksums, PolyBench's dumped arrays) compared on every run.", "",
        f"Text bytes: the program's `text` (size) over clang's; versions' bytes: what the "
        f"adapted program adds beyond the runtime's own {rt} bytes, over clang's text.", "",
        "| program | suite | first | steady | worst | oracle | oracle, selected | changed "
        "outputs | text bytes "
        "over clang's | versions' bytes | build time over clang's | functions versioned | "
        "verdicts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | {r.get('suite', '')} | failed: {r['error']} |"
                         + " |" * 10)
            continue
        verdicts = ", ".join(f"{k.split(' ', 1)[-1]}: {v}" for k, v in sorted(r["verdicts"].items()))
        lines.append(
            f"| {r['name']} | {r['suite']} | {r['first']:.3f}x | {r['steady']:.3f}x | "
            f"{r['worst']:.3f}x | {r['oracle']:.3f}x | "
            f"{r.get('oracle_selected', r['oracle']):.3f}x | {r['changed']} | "
            f"{r['text']['adapt'] / r['text']['clang']:.2f}x | "
            f"{(r['text']['adapt'] - rt - r['text']['clang']) / r['text']['clang']:+.0%} | "
            f"{r['build_s']['adapt'] / r['build_s']['clang']:.2f}x | "
            f"{', '.join(r['versioned']) or 'none'} | {verdicts or '-'} |")
    kernels_only = [r for r in ok if r["suite"] not in ("polybench", "nests")]
    groups = ["all"] + (["held-out kernels"] if kernels_only else []) + sorted(
        {r["suite"] for r in ok})
    for suite in groups:
        rs = (ok if suite == "all" else kernels_only if suite == "held-out kernels"
              else [r for r in ok if r["suite"] == suite])
        if not rs:
            continue
        o = geomean(r["oracle"] for r in rs)
        o_sel = geomean(r.get("oracle_selected", r["oracle"]) for r in rs)
        s = geomean(r["steady"] for r in rs)
        share = math.log(s) / math.log(o) if o > 1 else float("nan")
        share_sel = math.log(s) / math.log(o_sel) if o_sel > 1 else float("nan")
        lines += ["", f"**{suite}** ({len(rs)} programs): first {geomean(r['first'] for r in rs):.3f}x"
                  f", steady {s:.3f}x, oracle {o:.3f}x (steady's share of the oracle's log "
                  f"gain: {share:.0%}; of the selected oracle's {o_sel:.3f}x: "
                  f"{share_sel:.0%}); slowest steady {min(r['steady'] for r in rs):.3f}x, "
                  f"slowest run {min(r['worst'] for r in rs):.3f}x; changed outputs "
                  f"{sum(r['changed'] for r in rs)}; text bytes {geomean(r['text']['adapt'] / r['text']['clang'] for r in rs):.2f}x"
                  f" (the versions alone, beyond the runtime: median "
                  f"{statistics.median((r['text']['adapt'] - rt - r['text']['clang']) / r['text']['clang'] for r in rs):+.0%})"
                  f" and build time {geomean(r['build_s']['adapt'] / r['build_s']['clang'] for r in rs):.2f}x"
                  f" clang's (geomean); programs with a versioned function "
                  f"{sum(bool(r['versioned']) for r in rs)}."]
    with_trials = [r for r in ok if r.get("trials")]
    if with_trials:
        lines += ["", "## Trials: calls until the version kept, by order", "",
                  "One run of the adapted build per order, each from an empty store "
                  "(`MIRECC_ADAPT_ORDER`): `head`, the loop-vectorize head's order; `fixed`, "
                  "by name (no model); `random:N`, shuffled. Summed over the sites decided in "
                  "that run under every order (the same sites in each column).", "",
                  "| suite | programs | sites | " + " | ".join(ORDERS) + " |",
                  "|---|---|---|" + "---|" * len(ORDERS)]
        for suite in sorted({r["suite"] for r in with_trials}):
            rs = [r for r in with_trials if r["suite"] == suite]
            sums, sites = {o: 0 for o in ORDERS}, 0
            for r in rs:
                common = [k for k in r["trials"][ORDERS[0]]
                          if all(k in r["trials"][o] for o in ORDERS)]
                sites += len(common)
                for o in ORDERS:
                    sums[o] += sum(r["trials"][o][k] for k in common)
            lines.append(f"| {suite} | {len(rs)} | {sites} | "
                         + " | ".join(str(sums[o]) for o in ORDERS) + " |")
    if pairs:
        d, off = pairs["decided"], pairs["off"]
        lines += ["", "## Cost of a decided function", ""]
        calls = pairs.get("calls")
        if calls:
            c, v = calls["clang"], calls["versions"]
            lines += [f"A function summing two ints (noinline), called 20 million times in a "
                      f"loop, {len(c)} runs per side alternating: clang's build "
                      f"{statistics.median(c):.2f} ns per call (min {min(c):.2f}, max "
                      f"{max(c):.2f}); in 3 versions with the runtime, decided for "
                      f"{calls['verdict']} after one run (the dispatch's fast path): "
                      f"{statistics.median(v):.2f} ns (min {min(v):.2f}, max {max(v):.2f}): "
                      f"{statistics.median(v) - statistics.median(c):+.2f} ns per call.", ""]
        lines += [f"The runtime's own entries (`__mirecc_version_begin` and "
                  f"`__mirecc_adapt_end`, what a call pays while the fast path is closed: "
                  f"exploring, a re-check due, a new input size), 10 million calls in a loop"
                  f" for a decided function: {statistics.median(d):.1f} ns per call (min "
                  f"{min(d):.1f}, max {max(d):.1f}, {len(d)} runs); with the runtime off "
                  f"(`MIRECC_ADAPT=0`) {statistics.median(off):.1f} ns."]
    return "\n".join(lines) + "\n"


PROTOCOL = ("rounds", "polybench_rounds", "oracle_rounds", "oracle_confirm", "dataset",
            "steady_rounds", "unroll")


def main(argv=None) -> int:
    for name in [k for k in os.environ if k.startswith("MIRECC_ADAPT")]:
        del os.environ[name]   # the runs set their own
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--polybench-rounds", type=int, default=16,
                   help="rounds for PolyBench, whose versions are explored across runs")
    p.add_argument("--oracle-rounds", type=int, default=3)
    p.add_argument("--unroll", type=int, default=0,
                   help="MIRECC_ADAPT_UNROLL for the adapted builds (default: %(default)s)")
    p.add_argument("--steady-rounds", type=int, default=20,
                   help="rounds after the others that measure the steady state (0: the second "
                        "half of the others)")
    p.add_argument("--no-oracle-confirm", dest="oracle_confirm", action="store_false",
                   help="the oracle as the best version's speed in the rounds that chose it "
                        "(default: that version measured again in rounds of its own)")
    p.add_argument("--polybench", type=Path, help="a PolyBench/C 4.2.1 checkout")
    p.add_argument("--dataset", default="MEDIUM", choices=["SMALL", "MEDIUM", "LARGE"],
                   help="PolyBench's dataset (default: %(default)s)")
    p.add_argument("--nests", action="store_true",
                   help="the held-out loop-nest programs (STANDARD_DATASET), with a loop-nests "
                        "head that never saw them")
    p.add_argument("--no-kernels", action="store_true")
    p.add_argument("--only", nargs="*")
    p.add_argument("--work", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "adapt-loops.md")
    p.add_argument("--render", action="store_true",
                   help="write the page again from --out's JSON, running nothing")
    args = p.parse_args(argv)
    raw = args.out.with_suffix(".json")
    cpu = timing_cpu()
    if args.render:
        data = json.loads(raw.read_text())
        vars(args).update({"polybench_rounds": args.rounds, "dataset": "MEDIUM",
                           "oracle_confirm": False, "steady_rounds": 0, "unroll": 0,
                           **data["protocol"]})
        args.out.write_text(page(data["programs"], data.get("pairs"), args, data["started"],
                                 data.get("cpu", cpu)))
        print(args.out.read_text())
        return 0
    started = time.strftime("%Y-%m-%d")
    work = args.work or Path(tempfile.mkdtemp(prefix="adapt-loops-"))
    work.mkdir(parents=True, exist_ok=True)
    progs = [] if args.no_kernels else kernels()
    if args.polybench:
        progs += polybench(args.polybench, args.dataset)
    if args.nests:
        progs += nests(work)
    if args.only:
        progs = [q for q in progs if q["name"] in args.only]
    done = {}
    if raw.exists() and args.work:
        done = {r["name"]: r for r in json.loads(raw.read_text()).get("programs", [])
                if "error" not in r}
    results = []
    for i, prog in enumerate(progs):
        if prog["name"] in done:
            rec = done[prog["name"]]
            if not prog.get("once") and "trials" not in rec and \
                    (work / f"{prog['name']}.adapt").exists():
                reps = rec.get("reps") or max(1, int(2e7 / max(run_binary(
                    work / f"{prog['name']}.clang", prog["args"], cpu,
                    {"MIRECC_TARGET_NS": 2e6})["time_ns"], 1.0)))
                rec.update(reps=reps, trials=trials(prog, work, cpu, reps))
            results.append(rec)
            continue
        try:
            rec = one_program(prog, args, work, cpu)
        except (RuntimeError, subprocess.CalledProcessError, OSError, ValueError) as exc:
            rec = {"name": prog["name"], "suite": prog["suite"],
                   "error": f"{type(exc).__name__}: {exc}"[:300]}
        results.append(rec)
        if "error" in rec:
            print(f"[{i + 1}/{len(progs)}] {prog['name']}: {rec['error']}", flush=True)
        else:
            print(f"[{i + 1}/{len(progs)}] {prog['name']}: first {rec['first']:.3f}x steady "
                  f"{rec['steady']:.3f}x oracle {rec['oracle']:.3f}x changed {rec['changed']} "
                  f"versioned {','.join(rec['versioned']) or '-'}", flush=True)
        raw.write_text(json.dumps({"programs": results, "started": started, "cpu": cpu,
                                   "protocol": {k: vars(args)[k] for k in PROTOCOL}},
                                  indent=1))
    pairs = pair_cost(work, 15)
    pairs["calls"] = call_cost(work, 15)
    raw.write_text(json.dumps({"programs": results, "pairs": pairs, "started": started,
                               "cpu": cpu, "protocol": {k: vars(args)[k] for k in PROTOCOL}},
                              indent=1))
    args.out.write_text(page(results, pairs, args, started, cpu))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
