"""The adaptive OpenMP runtime on held-out programs: first run, steady state, oracle, trials.

    .venv/bin/python benchmarks/adapt_openmp.py \\
        --rodinia /work/.mirror/yuhc+gpu-rodinia/repo \\
        --npb /work/.mirror/benchmark-subsetting+NPB3.0-omp-C/repo \\
        [--only NAME ...] [--rounds 6] [--out docs/results/adapt-openmp.md]

(the snapshots: ``fetch github:yuhc/gpu-rodinia`` and
``fetch github:benchmark-subsetting/NPB3.0-omp-C``; the programs, their
inputs and output checks are :mod:`omp_suites`; none is behind the OpenMP
head's labels.)

Protocol, per program
---------------------
* Three builds, each timed whole (sources extracted, every TU compiled, the
  link): ``clang-14 -O3 -fopenmp`` (the reference), ``mirecc -O3`` (the
  shipped heads, no setting: objects are clang's), and ``mirecc -O3`` with
  ``MIRECC_ADAPT_OPENMP=1`` (adaptive sites; the runtime linked in): the
  setting's compile-time cost.
* Runs: ``--rounds`` rounds of four sides, their order rotating each
  round: the clang build; mirecc's build without the setting (clang's
  binary byte for byte: A/A, the noise floor); the adapted build; the
  adapted build with the runtime off (``MIRECC_ADAPT=0``: what the sites'
  code alone does, the program's own configuration everywhere).  Every
  output is checked against the clang build's first with the program's
  own check (clang's own runs are checked too: a program that is not
  deterministic shows there).  The adapted build starts from an empty
  verdict store, so its first run explores and later runs start from what
  the earlier ones kept.  Reported: the first run's ratio (clang's median
  over the adapted first run), the steady state (clang's median over the
  median of the adapted runs of the second half of the rounds), the worst
  adapted run's ratio, the A/A ratio and its worst run, changed outputs.
  Identical outputs are required of integral results; programs with
  floating-point reductions are checked within their own tolerance (the
  check column).
* The oracle (best configuration per region, measured offline): a build
  with every configuration of the head's space as candidates
  (``MIRECC_ADAPT_CANDIDATES=8``) runs ``--oracle-runs`` times with no
  exploration bound (``MIRECC_ADAPT_BUDGET=1``); per site the arm with the
  lowest median invocation time becomes the site's forced verdict in a
  fresh store, and that build is timed against clang's, alternating.
* Trials: the same all-candidates build, one fresh run per order: the
  head's, a fixed order (by name: no model) and ``--random`` random
  orders; per site, the invocations until the configuration finally kept
  got its verdict (for the program's own configuration: until every
  candidate had one).  Fewer is better: what the head's order saves.
* ``--overhead``: a tiny region (64 iterations of a multiply-add) run
  200,000 times, clang's build against the adapted one whose verdict is set
  to the program's own configuration (nothing left to explore): the cost
  per invocation; and beside them the adapted build with what the runtime
  learned in one run.

Writes ``--out`` (a markdown page), the raw figures beside it as JSON and a
plot (PNG).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import omp_suites  # noqa: E402

from mirecc.runtime.store import HEADER, decided_line, read_store  # noqa: E402
from mirecc.util.machine import cpu_model  # noqa: E402

BIN = Path(sys.executable).parent
CLANG = "clang-14"


def build(prog, cc: str, work: Path, env: dict) -> tuple[Path, float]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        t0 = time.perf_counter()
        exe = prog.build(cc, ["-O3"], work)
        return exe, time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_env(store: Path | None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "KMP_", "MIRECC_ADAPT"))}
    if store is not None:
        env["MIRECC_ADAPT_STORE"] = str(store)
    env.update(extra)
    return env


def timed(prog, work: Path, env: dict, reference: str | None) -> tuple[float, str | None]:
    out, seconds = prog.run(work, env=env)
    problem = None if reference is None else prog.check(reference, out)
    return seconds, problem


#: the options the page's protocol text states, kept with the data for --render
PROTOCOL = ("rounds", "oracle_runs", "oracle_rounds")


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def force_store(source: Path, target: Path) -> dict:
    """A store that forces each site's fastest arm (lowest median) of ``source``."""
    lines, chosen = [f"{HEADER} machine=oracle"], {}
    for cell in read_store(source):
        arms = [a for a in cell.arms if len(a.times) >= 2]
        if not arms:
            continue
        best = min(arms, key=lambda a: a.median)
        chosen[f"{cell.name} b{cell.bucket}"] = best.name
        lines.append(decided_line(cell.key, cell.name, best.name, [a.name for a in cell.arms],
                                  bucket=cell.bucket, invocations=1000000000, runs=1))
    target.write_text("\n".join(lines) + "\n")
    return chosen


def trials(store: Path) -> dict:
    """Per site: invocations until the verdict finally kept was reached."""
    out = {}
    for cell in read_store(store):
        if cell.phase != 1:
            out[f"{cell.name} b{cell.bucket}"] = None
            continue
        kept = next((a for a in cell.arms if a.name == cell.best), None)
        at = kept.at if kept is not None and cell.best != "default" else cell.decided_at
        out[f"{cell.name} b{cell.bucket}"] = at
    return out


def one_program(prog, args, root: Path) -> dict:
    work = root / prog.name
    rec = {"name": prog.name, "suite": prog.suite, "check": prog.check_kind,
           "invocations": prog.invocations}
    mirecc = str(BIN / "mirecc")
    plain_exe, rec["build_clang_s"] = build(prog, CLANG, work / "clang", {})
    _, rec["build_mirecc_s"] = build(prog, mirecc, work / "mirecc",
                                     {"MIRECC_ADAPT_OPENMP": "0"})
    _, rec["build_adapt_s"] = build(prog, mirecc, work / "adapt", {"MIRECC_ADAPT_OPENMP": "1"})
    reference, _ = prog.run(work / "clang", env=run_env(None))
    rec["identical"] = (work / "clang" / prog.argv[0]).read_bytes() == \
        (work / "mirecc" / prog.argv[0]).read_bytes()
    store = work / "adapt-store.txt"
    # four sides, the order rotating each round: clang's build; mirecc's
    # without the setting (clang's binary: the noise floor, A/A); the adapted
    # build; the adapted build with the runtime off (MIRECC_ADAPT=0: what the
    # sites' code alone does)
    sides = [("clang", "clang", run_env(None)), ("same", "mirecc", run_env(None)),
             ("adapt", "adapt", run_env(store)),
             ("off", "adapt", run_env(None, MIRECC_ADAPT="0"))]
    t = {name: [] for name, _, _ in sides}
    changed = {name: 0 for name, _, _ in sides}
    for r in range(args.rounds):
        for name, folder, env in sides[r % 4:] + sides[:r % 4]:
            seconds, problem = timed(prog, work / folder, env, reference)
            t[name].append(seconds)
            changed[name] += problem is not None
            if problem:
                print(f"  {prog.name} {name} round {r}: output differs: {problem}", flush=True)
    base = statistics.median(t["clang"])
    half = t["adapt"][len(t["adapt"]) // 2:]
    rec.update(times=t, changed_by_side=changed, changed=changed["adapt"] + changed["off"],
               first=ratio(base, t["adapt"][0]), steady=ratio(base, statistics.median(half)),
               worst=ratio(base, max(t["adapt"])),
               aa=ratio(base, statistics.median(t["same"])), aa_worst=ratio(base, max(t["same"])),
               off=ratio(base, statistics.median(t["off"])),
               verdicts={f"{c.name} b{c.bucket}": (c.best if c.phase == 1 else
                                                   ("short" if c.phase == 2 else "exploring"))
                         for c in read_store(store)} if store.exists() else {})

    # the oracle: every configuration, explored without bound, then forced
    _, _ = build(prog, mirecc, work / "all", {"MIRECC_ADAPT_OPENMP": "1",
                                             "MIRECC_ADAPT_CANDIDATES": "8"})
    explore = work / "oracle-explore.txt"
    for _ in range(args.oracle_runs):
        prog.run(work / "all", env=run_env(explore, MIRECC_ADAPT_BUDGET="1"))
    forced = work / "oracle-forced.txt"
    rec["oracle_choice"] = force_store(explore, forced) if explore.exists() else {}
    oracle_t, plain2 = [], []
    for r in range(args.oracle_rounds):
        pair = [("clang", None), ("all", forced)]
        for side, st in (pair if r % 2 == 0 else pair[::-1]):
            seconds, problem = timed(prog, work / side, run_env(st), reference)
            (plain2 if side == "clang" else oracle_t).append(seconds)
            if side == "all":
                rec["changed"] += problem is not None
    rec.update(oracle_clang_s=plain2, oracle_s=oracle_t,
               oracle=ratio(statistics.median(plain2), statistics.median(oracle_t)))

    # trials: invocations to the kept verdict, per order
    orders = ["head", "fixed"] + [f"random:{i + 1}" for i in range(args.random)]
    rec["trials"] = {}
    for order in orders:
        st = work / f"order-{order.replace(':', '-')}.txt"
        st.unlink(missing_ok=True)
        prog.run(work / "all", env=run_env(st, MIRECC_ADAPT_ORDER=order))
        rec["trials"][order] = trials(st) if st.exists() else {}
    return rec


OVERHEAD = r"""
#include <stdio.h>
static double v[64];
int main(void) {
  double s = 0;
  for (int t = 0; t < 200000; t++) {
    #pragma omp parallel for
    for (int i = 0; i < 64; i++) v[i] = v[i] * 0.5 + i;
    s += v[t % 64];
  }
  printf("%.6f\n", s);
  return 0;
}
"""


PAIRS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* the plugin's site descriptor (passes/plugin/FORMAT.md, "Adaptive sites") */
struct site { int32_t version, flags; const char *key, *name, *cands;
              int32_t sched, chunk; int64_t trip; void *state; };
int32_t __mirecc_adapt_begin(struct site *, void *);
void __mirecc_adapt_end(struct site *, int32_t);
static struct site site = {1, 1, "pairs00000000001", "pairs.c main:0",
                           "one-static-default all-dynamic-8", 0, 0, -1, 0};
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) __mirecc_adapt_end(&site, __mirecc_adapt_begin(&site, 0));
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
"""


def pair_cost(root: Path, runs: int) -> dict:
    """ns per begin/end pair of a site whose verdict is the program's own
    configuration (decided, no re-check due), and with the runtime off."""
    from mirecc.runtime.build import link_arguments

    src = root / "pairs.c"
    src.write_text(PAIRS)
    exe = root / "pairs"
    subprocess.run([CLANG, "-O2", "-fopenmp", str(src), "-o", str(exe),
                    *link_arguments(CLANG)], check=True)
    store = root / "pairs-store.txt"
    store.write_text(f"{HEADER} machine=x\n" + decided_line(
        "pairs00000000001", "pairs.c main:0", "default",
        ["default", "one-static-default", "all-dynamic-8"], invocations=1000000000000,
        runs=1) + "\n")
    # skipped: the same site still exploring but run too few times per run
    # (4 invocations in 5 runs) with exploration across runs off: left on
    # the program's own configuration (the OpenMP runtime's one skip left:
    # a site too short to time alone is timed in batches)
    skipped = root / "pairs-skipped.txt"
    line = decided_line("pairs00000000001", "pairs.c main:0", "default",
                        ["default", "one-static-default", "all-dynamic-8"],
                        invocations=4, runs=5).split("\t")
    line[3] = "0"
    skipped.write_text(f"{HEADER} machine=x\n" + "\t".join(line) + "\n")
    out = {"decided": [], "skipped": [], "off": []}
    for r in range(runs):
        for side in (("decided", "skipped", "off") if r % 2 == 0
                     else ("off", "skipped", "decided")):
            env = (run_env(store) if side == "decided" else
                   run_env(skipped, MIRECC_ADAPT_ACROSS_RUNS="0") if side == "skipped" else
                   run_env(None, MIRECC_ADAPT="0"))
            proc = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                                  env=env)
            out[side].append(float(proc.stdout))
    return out


def overhead(root: Path, rounds: int) -> dict:
    src = root / "overhead.c"
    src.write_text(OVERHEAD)
    exe_plain, exe_adapt = root / "ovh_clang", root / "ovh_adapt"
    subprocess.run([CLANG, "-O3", "-fopenmp", str(src), "-o", str(exe_plain)], check=True)
    subprocess.run([str(BIN / "mirecc"), "-O3", "-fopenmp", str(src), "-o", str(exe_adapt)],
                   check=True, env={**os.environ, "MIRECC_ADAPT_OPENMP": "1"})
    # one run from an empty store: what the runtime makes of the tiny region;
    # then its verdict replaced by "default, decided" (no re-check due): the
    # site with nothing left to explore, timed against clang's build
    learned = root / "ovh-learned.txt"
    learned.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([str(exe_adapt)], check=True, capture_output=True, env=run_env(learned))
    first = time.perf_counter() - t0
    (cell,) = read_store(learned)
    store = root / "ovh-store.txt"
    store.write_text(f"{HEADER} machine=x\n" + decided_line(
        cell.key, cell.name, "default", [a.name for a in cell.arms], bucket=cell.bucket,
        invocations=1000000000, runs=1) + "\n")
    times = {"clang": [], "adapt": [], "learned": []}
    envs = {"clang": run_env(None), "adapt": run_env(store), "learned": run_env(learned)}
    for r in range(rounds):
        for side in (["clang", "adapt", "learned"] if r % 2 == 0
                     else ["learned", "adapt", "clang"]):
            exe = exe_plain if side == "clang" else exe_adapt
            t0 = time.perf_counter()
            subprocess.run([str(exe)], check=True, capture_output=True, env=envs[side])
            times[side].append(time.perf_counter() - t0)
    per = (statistics.median(times["adapt"]) - statistics.median(times["clang"])) / 200000
    return {"times": times, "ns_per_invocation": per * 1e9, "first_run_s": first,
            "pairs_ns": pair_cost(root, rounds),
            "learned": f"{cell.name}: {'too short' if cell.phase == 2 else cell.best}"
                       f" after one run"}


def geomean(values) -> float:
    values = [v for v in values if v and v > 0 and not math.isnan(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def page(results: list[dict], ovh: dict | None, args, started: str) -> str:
    lines = [
        "# The adaptive OpenMP runtime on held-out programs",
        "",
        f"Written by `benchmarks/adapt_openmp.py` ({started}). Machine: {cpu_model()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}; compiler "
        f"{CLANG} (-O3 -fopenmp, libomp); mirecc with `MIRECC_ADAPT_OPENMP=1` and the shipped "
        f"OpenMP head (its labels: PolyBench-ACC and generated kernels; these programs are "
        f"none of them).",
        "",
        f"Protocol: {args.rounds} rounds of four sides, their order rotating each round: clang's"
        f" build; mirecc's without the setting (A/A: clang's binary, unless the program's "
        f"build embeds the compiler's command, as NPB's does: NOT IDENTICAL); the adapted build;"
        f" the adapted build with the runtime off (`MIRECC_ADAPT=0`: what the sites' code alone "
        f"does). The adapted build starts from an empty verdict store. first = clang's median over "
        f"the adapted build's first run; steady = clang's median over the median of the "
        f"adapted runs of the second half; worst = clang's median over the slowest adapted "
        f"run; oracle = each site forced to its fastest configuration (measured by the runtime"
        f" over {args.oracle_runs} runs with every candidate), {args.oracle_rounds} rounds "
        f"against clang, alternating. Whole-process wall time. Outputs checked every run "
        f"with the program's own check.",
        "",
        "| program | first | steady | worst | oracle | A/A (worst) | sites, runtime off | "
        "changed outputs (clang's own) | build clang / mirecc / adapt (s) | verdicts | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} | | | | | | | | | |")
            continue
        kept = sorted({v for v in r["verdicts"].values()})
        lines.append(
            f"| {r['name']} | {r['first']:.3f}x | {r['steady']:.3f}x | "
            f"{r['worst']:.3f}x | {r['oracle']:.3f}x | {r['aa']:.3f}x ({r['aa_worst']:.3f}x)"
            f"{'' if r['identical'] else ' NOT IDENTICAL'} | {r['off']:.3f}x | "
            f"{r['changed']} ({r['changed_by_side']['clang'] + r['changed_by_side']['same']}) | "
            f"{r['build_clang_s']:.1f} / {r['build_mirecc_s']:.1f} / {r['build_adapt_s']:.1f} | "
            f"{len(r['verdicts'])}: {', '.join(kept)} | {r['check']} |")
    ok = [r for r in results if "error" not in r]
    if ok:
        lines += ["", f"Geomean over {len(ok)} programs: first {geomean(r['first'] for r in ok):.3f}x,"
                  f" steady {geomean(r['steady'] for r in ok):.3f}x, oracle "
                  f"{geomean(r['oracle'] for r in ok):.3f}x, A/A (the same binary as clang's) "
                  f"{geomean(r['aa'] for r in ok):.3f}x, the sites with the runtime off "
                  f"{geomean(r['off'] for r in ok):.3f}x; worst adapted run "
                  f"{min(r['worst'] for r in ok):.3f}x, worst A/A run "
                  f"{min(r['aa_worst'] for r in ok):.3f}x; changed outputs of the adapted "
                  f"build {sum(r['changed'] for r in ok)} (of clang's own builds: "
                  f"{sum(r['changed_by_side']['clang'] + r['changed_by_side']['same'] for r in ok)}).",
                  "", "Build time with the setting over mirecc's without it: geomean "
                  f"{geomean(r['build_adapt_s'] / r['build_mirecc_s'] for r in ok):.3f}x; over "
                  f"clang's: {geomean(r['build_adapt_s'] / r['build_clang_s'] for r in ok):.3f}x."]
        orders = list(ok[0]["trials"])
        lines += ["", "## Trials: invocations until the kept verdict, by order", "",
                  "One run of the all-candidates build per order, each from a fresh store. "
                  "`head`: the head's order; `fixed`: by name (no model); `random:N`: "
                  "shuffled. Per program, summed over the sites that reached a verdict in that"
                  " run under every order (the same sites for each column); sites reaching a "
                  "verdict under each order beside.", "",
                  "| program | sites | " + " | ".join(orders) + " | verdicts per order |",
                  "|---|---|" + "---|" * len(orders) + "---|"]
        totals = {o: 0 for o in orders}
        for r in ok:
            tr = r["trials"]
            common = [k for k in tr[orders[0]]
                      if all(tr[o].get(k) is not None for o in orders)]
            if not common:
                continue
            sums = {o: sum(tr[o][k] for k in common) for o in orders}
            for o in orders:
                totals[o] += sums[o]
            reached = ", ".join(f"{sum(v is not None for v in tr[o].values())}" for o in orders)
            lines.append(f"| {r['name']} | {len(common)} | "
                         + " | ".join(str(sums[o]) for o in orders) + f" | {reached} |")
        lines.append("| **total** | | " + " | ".join(f"**{totals[o]}**" for o in orders)
                     + " | |")
    if ovh:
        def spread(v):
            return f"{statistics.median(v):.3f} s (min {min(v):.3f}, max {max(v):.3f})"
        pairs = ovh["pairs_ns"]
        lines += ["", "## Cost of a site with nothing to explore", "",
                  f"The runtime's own cost: a site whose verdict is the program's own "
                  f"configuration (decided, no re-check due), `__mirecc_adapt_begin` and "
                  f"`_end` called 10 million times in a loop without the region: "
                  f"{statistics.median(pairs['decided']):.1f} ns per invocation (min "
                  f"{min(pairs['decided']):.1f}, max {max(pairs['decided']):.1f}, "
                  f"{len(pairs['decided'])} runs); with the runtime off (`MIRECC_ADAPT=0`) "
                  f"{statistics.median(pairs['off']):.1f} ns."
                  + (f" A site skipped (run too few times per run to explore, with "
                     f"exploration across runs off: the program's own configuration, timed "
                     f"for its store line): {statistics.median(pairs['skipped']):.1f} ns (min "
                     f"{min(pairs['skipped']):.1f}, max {max(pairs['skipped']):.1f})."
                     if pairs.get("skipped") else "")
                  + " A fork and join of libomp's team costs microseconds (below).",
                  "",
                  f"Whole programs: a 64-iteration region run 200,000 times ({len(ovh['times']['clang'])} runs "
                  f"per side, sides alternating). The adapted build with its verdict set to "
                  f"the program's own configuration (decided, no re-check due): clang "
                  f"{spread(ovh['times']['clang'])}, adapted {spread(ovh['times']['adapt'])}:"
                  f" {ovh['ns_per_invocation']:.0f} ns per invocation. The same region "
                  f"left to the runtime ({ovh['learned']}; that first run "
                  f"{ovh['first_run_s']:.3f} s): {spread(ovh['times']['learned'])}."]
        ok = [r for r in results if "error" not in r]
        if ok:
            # the runtime's whole cost where nothing is sampled, bounded from
            # the pair cost: far below what wall time can resolve here
            ns = statistics.median(pairs["decided"])
            share = {r["name"]: r["invocations"] * ns * 1e-9
                     / statistics.median(r["times"]["clang"]) for r in ok}
            worst = max(share, key=share.get)
            lines += ["", f"The held-out programs with every site decided: invocations per "
                      f"run times {ns:.1f} ns over clang's median run: at most "
                      f"{100 * share[worst]:.4f}% ({worst}); median "
                      f"{100 * statistics.median(share.values()):.5f}%. (The A/A column "
                      f"above shows what wall time resolves on this machine.)"]
    return "\n".join(lines) + "\n"


def plot(results: list[dict], path: Path) -> None:
    try:
        from mirecc.util.plots import pyplot
        plt = pyplot()
    except Exception:  # noqa: BLE001 - no matplotlib: the table stands alone
        return
    ok = [r for r in results if "error" not in r]
    if not ok:
        return
    fig, ax = plt.subplots(figsize=(max(6, len(ok) * 0.9), 3.6))
    width = 0.2
    for k, (key, label) in enumerate([("first", "first run"), ("steady", "steady state"),
                                      ("oracle", "oracle"), ("aa", "A/A (same binary)")]):
        ax.bar([i + (k - 1.5) * width for i in range(len(ok))], [r[key] for r in ok], width,
               label=label, color=None if key != "aa" else "lightgrey")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(0.97, color="grey", linewidth=0.6, linestyle="--")
    ax.set_xticks(range(len(ok)))
    ax.set_xticklabels([r["name"] for r in ok], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("speed over clang -O3")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rodinia", type=Path)
    p.add_argument("--npb", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--oracle-runs", type=int, default=3)
    p.add_argument("--oracle-rounds", type=int, default=5)
    p.add_argument("--random", type=int, default=2)
    p.add_argument("--overhead", action="store_true")
    p.add_argument("--overhead-runs", type=int, default=21,
                   help="runs per side of the whole-program and per-pair costs")
    p.add_argument("--work", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "adapt-openmp.md")
    p.add_argument("--render", action="store_true",
                   help="write the page and plot again from --out's JSON, running nothing")
    args = p.parse_args(argv)
    started = time.strftime("%Y-%m-%d")
    if args.render:
        data = json.loads(args.out.with_suffix(".json").read_text())
        # the protocol of the run that wrote the data (older files: the options)
        vars(args).update(data.get("protocol", {}))
        args.out.write_text(page(data["programs"], data.get("overhead"), args,
                                 data.get("started", started)))
        plot(data["programs"], args.out.with_suffix(".png"))
        print(args.out.read_text())
        return 0
    root = args.work or Path(tempfile.mkdtemp(prefix="adapt-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    progs = omp_suites.programs(args.rodinia, args.npb)
    if args.only:
        progs = [q for q in progs if q.name in args.only]
    raw = args.out.with_suffix(".json")
    done = {}
    if raw.exists() and args.work:
        done = {r["name"]: r for r in json.loads(raw.read_text()).get("programs", [])}
    results = []
    for i, prog in enumerate(progs):
        if prog.name in done and "error" not in done[prog.name]:
            results.append(done[prog.name])
            continue
        print(f"[{i + 1}/{len(progs)}] {prog.name}", flush=True)
        try:
            results.append(one_program(prog, args, root))
        except Exception as exc:  # noqa: BLE001 - one program's failure is reported, not fatal
            results.append({"name": prog.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        r = results[-1]
        if "error" not in r:
            print(f"  first {r['first']:.3f}x steady {r['steady']:.3f}x worst {r['worst']:.3f}x "
                  f"oracle {r['oracle']:.3f}x changed {r['changed']}", flush=True)
        else:
            print(f"  {r['error']}", flush=True)
        raw.write_text(json.dumps({"programs": results}, indent=1))
    ovh = overhead(root, args.overhead_runs) if args.overhead else None
    raw.write_text(json.dumps({"programs": results, "overhead": ovh, "started": started,
                               "protocol": {k: vars(args)[k] for k in PROTOCOL}},
                              indent=1))
    args.out.write_text(page(results, ovh, args, started))
    plot(results, args.out.with_suffix(".png"))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
