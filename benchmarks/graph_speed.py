"""How fast the native graph builder is on a big module: sqlite3's amalgamation.

    .venv/bin/python benchmarks/graph_speed.py [--work DIR] [--repeats N]
                     [--llvm2graph] [--json PATH]

Protocol
--------
* sqlite3 is Debian bookworm's source package (``apt-get source sqlite3``,
  fetched once into ``DIR/src`` by ``real_projects.fetch_source``; default
  DIR is ``.work``). The source package holds the split sources, not
  ``sqlite3.c``: the amalgamation is generated once with the package's own
  ``configure && make sqlite3.c`` (needs ``tclsh``: Debian's ``tcl``) in
  ``DIR/graph_speed/sqlite3-build``.
* It is compiled once to bitcode with
  ``clang-14 -O1 -Xclang -disable-llvm-passes -emit-llvm -c sqlite3.c``
  (and to text IR with ``-S`` for ``--llvm2graph``).
* Every built ``mirecc-graph-<LLVM major>`` (see mirecc/graph/native.py) is
  run ``--repeats`` times (default 5) on the bitcode after one untimed
  warm-up: wall time (``time.perf_counter``) and peak resident memory of
  the process (``os.wait4``'s ``ru_maxrss``) per run; reported: min and
  median wall time, max peak memory, the tool's own phase times
  (``--stats``: parse, print, build, write) of the fastest run, nodes and
  edges. Then the time ``mirecc.graph.load`` takes to load the file.
  Target: under 2 s wall.
* The llvmlite fallback (``mirecc.graph.fallback``) is timed
  ``--fallback-repeats`` times (default 1, 0 skips it) on the same bitcode,
  each run a fresh Python process (wall time includes the imports; the
  in-process build time is reported beside it), with its peak memory and
  the arrays, if any, in which its graph differs from each native builder's.
* ``--llvm2graph``: ProGraML's llvm2graph-10 (programl 0.3.2 wheel) once on
  the same module, text IR rewritten for LLVM 10 (tests/graph_ref.py), with
  its wall time, peak memory and node/edge counts next to mirecc's. It takes
  minutes and gigabytes; left out by default.

Timings on a shared machine move with its load: the script prints the
1-minute load average before and after, and the CPU time (user + sys, both
threads of mirecc-graph) beside the wall time: on an otherwise idle machine
the wall time is at most about the CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

CLANG = os.environ.get("MIRECC_BENCH_CLANG", "/usr/bin/clang-14")
EMIT = ["-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm"]


def log(msg: str) -> None:
    print(f"[graph_speed] {msg}", file=sys.stderr, flush=True)


def amalgamation(work: Path) -> Path:
    """DIR/graph_speed/sqlite3-build/sqlite3.c, generated when missing."""
    build = work / "graph_speed" / "sqlite3-build"
    out = build / "sqlite3.c"
    if out.is_file():
        return out
    import real_projects  # fetch_source: apt-get source with deb-src handling
    tree = real_projects.fetch_source("sqlite3", work / "src", logs=work / "logs")
    shipped = next(iter(tree.glob("**/sqlite3.c")), None)
    if shipped is not None:
        return shipped
    if not shutil.which("tclsh"):
        raise SystemExit("generating sqlite3.c needs tclsh: apt-get install tcl")
    build.mkdir(parents=True, exist_ok=True)
    log(f"generating the amalgamation in {build} (configure && make sqlite3.c)")
    with open(build / "build.log", "w") as lg:
        for cmd in ([str(tree / "configure")], ["make", "sqlite3.c"]):
            rc = subprocess.run(cmd, cwd=build, stdout=lg, stderr=subprocess.STDOUT).returncode
            if rc != 0:
                raise SystemExit(f"{' '.join(cmd)} failed in {build}; see {build / 'build.log'}")
    return out


def compile_ir(src: Path, out_dir: Path, text: bool) -> Path:
    out = out_dir / ("sqlite3.ll" if text else "sqlite3.bc")
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    cmd = [CLANG, *EMIT, *(["-S"] if text else ["-c"]), str(src), "-o", str(out)]
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, cwd=src.parent)
    return out


def timed(cmd: list[str], stdin=None, stdout=subprocess.DEVNULL
          ) -> tuple[float, int, int, bytes, float]:
    """(wall seconds, peak RSS in KiB, exit status, stderr, CPU seconds) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss, proc.returncode, err, usage.ru_utime + usage.ru_stime


def bench_builder(builder: str, bc: Path, out_dir: Path, repeats: int) -> dict:
    from mirecc.graph import load
    out = out_dir / f"sqlite3-{Path(builder).name}.mgraph"
    cmd = [builder, "--stats", "-o", str(out), str(bc)]
    timed(cmd)  # warm-up
    runs = []
    for _ in range(repeats):
        wall, rss, rc, err, cpu = timed(cmd)
        if rc != 0:
            raise SystemExit(f"{builder} failed: {err.decode(errors='replace')}")
        runs.append((wall, rss, json.loads(err.decode().strip().splitlines()[-1]), cpu))
    t0 = time.perf_counter()
    g = load(out)
    load_s = time.perf_counter() - t0
    best = min(runs, key=lambda r: r[0])
    return {
        "builder": builder,
        "llvm_major": g.meta.get("llvm_major"),
        "wall_s_min": round(best[0], 3),
        "wall_s_median": round(statistics.median(r[0] for r in runs), 3),
        "wall_s_all": [round(r[0], 3) for r in runs],
        "cpu_s_min": round(min(r[3] for r in runs), 3),
        "cpu_s_median": round(statistics.median(r[3] for r in runs), 3),
        "peak_rss_mb": round(max(r[1] for r in runs) / 1024, 1),
        "phases_ms_fastest": best[2],
        "nodes": g.num_nodes,
        "edges": g.num_edges,
        "node_counts": g.node_counts(),
        "edge_counts": g.edge_counts(),
        "instructions": int(sum(1 for _ in g.statements())),
        "functions": len(g.function_names),
        "loops": g.num_loops,
        "file_mb": round(out.stat().st_size / 2**20, 1),
        "python_load_s": round(load_s, 4),
    }


def bench_fallback(bc: Path, out_dir: Path, repeats: int, natives: list[dict]) -> dict:
    """The llvmlite fallback (mirecc.graph.fallback) in a fresh Python process
    per run: wall time (imports included) and peak memory of the process."""
    from mirecc.graph import load
    out = out_dir / "sqlite3-fallback.mgraph"
    code = ("import sys, time; t = time.perf_counter(); "
            "from mirecc.graph.fallback import build_graph_llvmlite; from mirecc.graph import dump; "
            "g = build_graph_llvmlite(sys.argv[1]); b = time.perf_counter() - t; "
            "dump(g, sys.argv[2]); print(round(b, 3), file=sys.stderr)")
    cmd = [sys.executable, "-c", code, str(bc), str(out)]
    runs = []
    for _ in range(repeats):
        wall, rss, rc, err, cpu = timed(cmd)
        if rc != 0:
            raise SystemExit(f"fallback failed: {err.decode(errors='replace')[-2000:]}")
        runs.append((wall, rss, float(err.decode().strip().splitlines()[-1]), cpu))
    g = load(out)
    same = {}
    for r in natives:  # same arrays as a native builder's graph of this module?
        n = load(out_dir / f"sqlite3-{Path(r['builder']).name}.mgraph")
        same[f"llvm{r['llvm_major']}"] = sorted(
            k for k in n.arrays if k in g.arrays and not (
                n.arrays[k].shape == g.arrays[k].shape and (n.arrays[k] == g.arrays[k]).all()))
    best = min(runs, key=lambda r: r[0])
    return {"wall_s_min": round(best[0], 3), "wall_s_all": [round(r[0], 3) for r in runs],
            "build_s_in_process": best[2], "cpu_s_min": round(min(r[3] for r in runs), 3),
            "peak_rss_mb": round(max(r[1] for r in runs) / 1024, 1),
            "nodes": g.num_nodes, "edges": g.num_edges,
            "arrays_differing_from_native": same}


def bench_llvm2graph(ll: Path, out_dir: Path) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    import graph_ref
    why = graph_ref.llvm2graph_problem()
    if why:
        return {"skipped": why}
    rewritten = out_dir / "sqlite3.llvm10.ll"
    rewritten.write_text(graph_ref.rewrite_for_llvm10(ll.read_text()))
    out = out_dir / "sqlite3.llvm2graph.json"
    log("running llvm2graph-10 (minutes)")
    with open(rewritten, "rb") as fin, open(out, "wb") as fout:
        wall, rss, rc, err, cpu = timed([graph_ref.llvm2graph_path(), "--stdout_fmt=json"],
                                        stdin=fin, stdout=fout)
    if rc != 0:
        return {"failed": err.decode(errors="replace")[-1000:], "wall_s": round(wall, 1)}
    nodes, edges, _ = graph_ref.reference_counts(json.loads(out.read_text()))
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(rss / 1024, 1),
            "nodes": sum(nodes.values()), "edges": sum(edges.values()),
            "node_counts": nodes, "edge_counts": edges}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=REPO / ".work")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--llvm2graph", action="store_true",
                    help="also time ProGraML's llvm2graph-10 (minutes, GBs)")
    ap.add_argument("--fallback-repeats", type=int, default=1,
                    help="runs of the llvmlite fallback (mirecc.graph.fallback); 0 = skip")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)

    from mirecc.graph import native
    builders = native.find_builders()
    if not builders:
        native.find_builder()  # raises with the build command
    src = amalgamation(args.work.resolve())
    out_dir = args.work.resolve() / "graph_speed"
    out_dir.mkdir(parents=True, exist_ok=True)
    bc = compile_ir(src, out_dir, text=False)
    result = {
        "module": str(bc), "source": str(src), "bitcode_mb": round(bc.stat().st_size / 2**20, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_before": round(os.getloadavg()[0], 2)},
        "mirecc_graph": [],
    }
    for b in builders:
        log(f"timing {b}")
        result["mirecc_graph"].append(bench_builder(b, bc, out_dir, max(1, args.repeats)))
    if args.fallback_repeats > 0:
        log("timing the llvmlite fallback")
        result["fallback"] = bench_fallback(bc, out_dir, args.fallback_repeats,
                                            result["mirecc_graph"])
    if args.llvm2graph:
        ll = compile_ir(src, out_dir, text=True)
        result["llvm2graph_10"] = bench_llvm2graph(ll, out_dir)
    result["machine"]["load_after"] = round(os.getloadavg()[0], 2)

    print(f"sqlite3 amalgamation: {bc} ({result['bitcode_mb']} MB bitcode)")
    for r in result["mirecc_graph"]:
        ok = "under" if r["wall_s_min"] < 2.0 else "OVER"
        print(f"  mirecc-graph (LLVM {r['llvm_major']}): {r['wall_s_min']:.2f} s min, "
              f"{r['wall_s_median']:.2f} s median of {len(r['wall_s_all'])} ({ok} the 2 s target; "
              f"CPU {r['cpu_s_min']:.2f} s min, {r['cpu_s_median']:.2f} s median, two threads), "
              f"peak {r['peak_rss_mb']:.0f} MB; {r['nodes']} nodes, {r['edges']} edges, "
              f"{r['instructions']} instructions, {r['loops']} loops; "
              f"phases {r['phases_ms_fastest']}; Python load {r['python_load_s'] * 1000:.1f} ms")
    if "fallback" in result:
        r = result["fallback"]
        print(f"  llvmlite fallback: {r['wall_s_min']:.2f} s min of {len(r['wall_s_all'])} "
              f"(fresh process, imports included; {r['build_s_in_process']:.2f} s in-process build), "
              f"CPU {r['cpu_s_min']:.2f} s, peak {r['peak_rss_mb']:.0f} MB; {r['nodes']} nodes, "
              f"{r['edges']} edges; arrays differing from the native graphs: "
              f"{r['arrays_differing_from_native']}")
    if "llvm2graph_10" in result:
        r = result["llvm2graph_10"]
        if "wall_s" in r and "nodes" in r:
            print(f"  llvm2graph-10 (ProGraML 0.3.2): {r['wall_s']:.1f} s ({r['cpu_s']:.1f} s CPU), peak "
                  f"{r['peak_rss_mb']:.0f} MB; {r['nodes']} nodes, {r['edges']} edges")
        else:
            print(f"  llvm2graph-10: {r}")
    print(f"  load average {result['machine']['load_before']} -> {result['machine']['load_after']} "
          f"on {result['machine']['cpus']} CPUs")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
