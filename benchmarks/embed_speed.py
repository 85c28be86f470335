"""How long embedding one translation unit takes: ``mire embed`` against IR2Vec.

    .venv/bin/python benchmarks/embed_speed.py [--model DIR] [--repeats N]
                     [--big-repeats N] [--out PATH] [--files A.bc B.bc ...]
                     [--work DIR] [--no-ir2vec]

Protocol
--------
* Three modules, all clang-14 bitcode (the IR the native graph builder
  ``mirecc-graph-14`` reads and the encoder was pretrained on), each also
  disassembled with ``llvm-dis-14`` to text IR for IR2Vec (same module):
    - small: ``benchmarks/programs/saxpy.c`` compiled with
      ``clang-14 -O2 -Xclang -disable-llvm-passes -emit-llvm -c`` (~200
      statements);
    - 2k: the corpus module (``DIR/corpus/manifest.jsonl``) with a
      "statements" count in [1800, 2200], zlib's preferred, nearest 2000
      (zlib's ``gzread.c``, 1805 statements, in the corpus of 2026-11);
    - big: sqlite3's amalgamation, ``DIR/graph_speed/sqlite3.bc``, as
      ``graph_speed.py`` builds it (``-O1 -Xclang -disable-llvm-passes``).
  ``--files`` replaces the three (.bc, .ll or C sources; a C source is
  compiled as the small one is).
* Whole invocation, as a build pays it: a fresh process
  ``mire embed FILE --model DIR --cache C -o OUT.json`` (Python start,
  imports, model load with sha256 verification, graph build, statements,
  graph network, atomic JSON write). Wall time (``time.perf_counter``), CPU
  time and peak RSS (``os.wait4``) per run.
    - cold: ``C`` a path in a fresh empty temporary directory every run;
    - warm: ``C`` a cache filled by one untimed run of the same command on
      the same file before the timed rounds (that run doubles as the warm-up).
  Each round runs cold then warm; ``--repeats`` rounds (default 5) for the
  small and 2k modules, ``--big-repeats`` (default: ``--repeats``) for
  sqlite3, whose runs take a minute or more each.
  ``mire`` is ``.venv/bin/mire`` beside this Python, with the environment as
  it is (an editable install under ``PYTHONDONTWRITEBYTECODE=1`` compiles
  mirecc's modules from source at every start); a diagnostic row ``warm,
  pyc`` reruns the warm command on the 2k module with the bytecode cache
  usable (``PYTHONPYCACHEPREFIX`` private, filled by a warm-up), as
  ``overhead.py`` does.
* Through the per-user server (small and 2k modules): ``mire embed --server
  FILE`` with a private socket directory and statement cache; per round the
  server is stopped and the cache removed, then one timed first call (the
  client starts the server, which loads the model: what the first compile
  of a build pays) and three timed later calls (server up, cache warm).
* Start-up alone (fresh processes, ``--repeats`` each, interleaved): ``python
  -c pass``; ``import numpy, onnxruntime``; ``mirecc.cli.mire.build_parser()``
  (what every ``mire`` start does before it runs a subcommand); ``import`` of
  ``mirecc.encoder.runtime`` and ``Encoder(DIR, cache=False)`` (model load
  and hash check, no IR).
* In process: one ``Encoder(DIR, cache=<fresh path>)`` loaded once (its load
  time reported), then per round and file: a fresh empty cache, ``embed_file``
  (cold), ``embed_file`` again (warm), and ``mirecc.graph.build_graph`` alone;
  wall time of each call and the encoder's own ``stats`` (statement_seconds:
  node texts, cache look-up, tokenising, statement transformer;
  graph_seconds: the graph network; the rest of total_seconds: graph build and
  pooling).
* IR2Vec (PyPI ``ir2vec`` 2.1.1; flow-aware, program level) on the ``.ll``:
  per round a fresh process ``python -c 'import ir2vec;
  ir2vec.initEmbedding(LL, "fa", "p").getProgramVector()'``: its wall time,
  and inside it the time of ``import ir2vec`` and of ``initEmbedding`` +
  ``getProgramVector`` (in-process time; IR2Vec parses the IR and reads its
  seed vocabulary in every ``getProgramVector`` call, it keeps nothing
  between calls, so a second call in the same process costs the same).
* Reported: median, min and max of each; the 1-minute load average before
  and after (a busy machine moves every figure: compare wall and CPU time).
  Targets (whole invocation, 2k-statement module, medians): cold under
  0.5 s, warm under 50 ms.

Results go to stdout, progress to stderr, JSON to ``DIR/embed_speed.json``
(``--out``). Exit status 0 when everything ran, also when a target is missed.
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
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from mirecc.util.machine import cpu_model  # noqa: E402
from mirecc.util.fsutil import atomic_write_bytes  # noqa: E402

CLANG = os.environ.get("MIRECC_BENCH_CLANG", "/usr/bin/clang-14")
LLVM_DIS = os.environ.get("MIRECC_BENCH_LLVM_DIS", "/usr/bin/llvm-dis-14")
EMIT = ["-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c"]
TARGET_STATEMENTS = 2000
TARGET_COLD_S = 0.5
TARGET_WARM_S = 0.05

IR2VEC_CODE = (
    "import json, sys, time\n"
    "t0 = time.perf_counter()\n"
    "import ir2vec\n"
    "t1 = time.perf_counter()\n"
    "v = ir2vec.initEmbedding(sys.argv[1], 'fa', 'p').getProgramVector()\n"
    "t2 = time.perf_counter()\n"
    "print(json.dumps({'import_s': t1 - t0, 'embed_s': t2 - t1, 'dim': len(v)}), file=sys.stderr)\n"
)


def log(msg: str) -> None:
    print(f"[embed_speed] {msg}", file=sys.stderr, flush=True)


def stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "runs": [round(x, 4) for x in xs]}


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int, int, str]:
    """(wall s, CPU s, peak RSS KiB, exit status, stderr) of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode,
            err.decode(errors="replace"))


def checked(cmd: list[str], env: dict | None = None) -> tuple[float, float, int, str]:
    wall, cpu, rss, rc, err = timed(cmd, env)
    if rc != 0:
        raise SystemExit(f"embed_speed: {' '.join(cmd)} failed (exit {rc}):\n{err[-2000:]}")
    return wall, cpu, rss, err


# ------------------------------------------------------------------ inputs

def compile_c(src: Path, out_dir: Path) -> Path:
    out = out_dir / (src.stem + ".bc")
    if not (out.is_file() and out.stat().st_mtime >= src.stat().st_mtime):
        cmd = [CLANG, *EMIT, "-w", str(src), "-o", str(out)]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True)
    return out


def disassemble(bc: Path, out_dir: Path, name: str) -> Path:
    """Text IR of bc for IR2Vec (``.ll`` inputs are used as they are)."""
    if bc.suffix == ".ll":
        return bc
    out = out_dir / (name + ".ll")
    if not (out.is_file() and out.stat().st_mtime >= bc.stat().st_mtime):
        subprocess.run([LLVM_DIS, str(bc), "-o", str(out)], check=True)
    return out


def corpus_2k(work: Path) -> tuple[Path, dict]:
    """The corpus module nearest 2000 statements in [1800, 2200], zlib's first."""
    manifest = work / "corpus" / "manifest.jsonl"
    if not manifest.is_file():
        raise SystemExit(f"embed_speed: {manifest} missing: build the corpus or pass --files")
    best = None
    for line in manifest.read_text().splitlines():
        d = json.loads(line)
        n = d.get("statements", 0)
        if not 1800 <= n <= 2200 or not (manifest.parent / d["ir"]).is_file():
            continue
        key = (d.get("origin") != "zlib", abs(n - TARGET_STATEMENTS), d.get("origin", ""),
               d.get("path", ""), d["ir"])
        if best is None or key < best[0]:
            best = (key, d)
    if best is None:
        raise SystemExit(f"embed_speed: no module of 1800-2200 statements in {manifest}")
    d = best[1]
    return manifest.parent / d["ir"], {k: d.get(k) for k in (
        "origin", "path", "version", "statements", "sha256", "flags", "compiler_version")}


def default_files(work: Path, out_dir: Path) -> list[dict]:
    small = compile_c(REPO / "benchmarks" / "programs" / "saxpy.c", out_dir)
    mid, origin = corpus_2k(work)
    big = work / "graph_speed" / "sqlite3.bc"
    if not big.is_file():
        log("sqlite3.bc missing: building it with graph_speed.py's code")
        sys.path.insert(0, str(HERE))
        import graph_speed
        (work / "graph_speed").mkdir(parents=True, exist_ok=True)
        big = graph_speed.compile_ir(graph_speed.amalgamation(work), work / "graph_speed",
                                     text=False)
    return [{"label": "small", "bc": small, "source": "benchmarks/programs/saxpy.c"},
            {"label": "2k", "bc": mid, "source": f"corpus: {origin['origin']} {origin['path']}",
             "corpus": origin},
            {"label": "big", "bc": big, "source": "sqlite3 amalgamation (graph_speed.py)"}]


# ------------------------------------------------------------------ phases

def bench_invocations(mire: str, model: str, f: dict, rounds: int, scratch: Path) -> dict:
    out = str(scratch / "out.json")
    warm_cache = scratch / f"warm-{f['label']}.sqlite"
    warm_cache.unlink(missing_ok=True)
    base = [mire, "embed", str(f["bc"]), "--model", model, "-o", out, "--cache"]
    checked(base + [str(warm_cache)])  # warm-up; fills the warm cache
    runs = {"cold": [], "warm": []}
    for r in range(rounds):
        fresh = Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
        for kind, cache in (("cold", fresh / "embeddings.sqlite"), ("warm", warm_cache)):
            wall, cpu, rss, _ = checked(base + [str(cache)])
            runs[kind].append((wall, cpu, rss))
            log(f"{f['label']}: round {r + 1}: {kind} {wall:.3f} s wall, {cpu:.3f} s CPU, "
                f"{rss / 1024:.0f} MB")
        shutil.rmtree(fresh)
    return {k: {"wall": stats([x[0] for x in v]), "cpu": stats([x[1] for x in v]),
                "peak_rss_mb": round(max(x[2] for x in v) / 1024, 1)} for k, v in runs.items()}


def bench_server(mire: str, model: str, f: dict, rounds: int, scratch: Path) -> dict:
    """``mire embed --server``: first call of a build (no server: the client
    starts one, which loads the model) and later calls (server running,
    statement cache filled by the first), whole client process timed."""
    env = dict(os.environ, XDG_RUNTIME_DIR=str(scratch / f"run-{f['label']}"),
               MIRECC_CACHE_DIR=str(scratch / f"server-cache-{f['label']}"))
    cmd = [mire, "embed", "--server", str(f["bc"]), "--model", model, "-o",
           str(scratch / "out.json")]
    stop = [mire, "serve", "--stop"]
    first, warm = [], []
    try:
        for r in range(rounds):
            subprocess.run(stop, env=env, capture_output=True)
            time.sleep(0.3)                            # let it remove its socket
            shutil.rmtree(env["MIRECC_CACHE_DIR"], ignore_errors=True)
            first.append(checked(cmd, env)[0])
            warm.extend(checked(cmd, env)[0] for _ in range(3))
            log(f"{f['label']}: server round {r + 1}: first {first[-1]:.3f} s, "
                f"warm {min(warm[-3:]):.3f}-{max(warm[-3:]):.3f} s")
    finally:
        subprocess.run(stop, env=env, capture_output=True)
    return {"first": stats(first), "warm": stats(warm)}


def bench_warm_pyc(mire: str, model: str, f: dict, rounds: int, scratch: Path) -> dict:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(scratch / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cache = scratch / "warm-pyc.sqlite"
    cmd = [mire, "embed", str(f["bc"]), "--model", model, "-o", str(scratch / "out.json"),
           "--cache", str(cache)]
    checked(cmd, env)  # fills the bytecode cache and the statement cache
    runs = [checked(cmd, env)[0] for _ in range(rounds)]
    return {"wall": stats(runs)}


def bench_startup(model: str, rounds: int) -> dict:
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "import numpy, onnxruntime": [py, "-c", "import numpy, onnxruntime"],
        "mire's parser (mirecc.cli.mire.build_parser())": [
            py, "-c", "import mirecc.cli.mire; mirecc.cli.mire.build_parser()"],
        "import runtime + Encoder(model, cache=False)": [
            py, "-c", "import sys; from mirecc.encoder.runtime import Encoder; "
            "Encoder(sys.argv[1], cache=False)", model],
    }
    for cmd in cmds.values():
        checked(cmd)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for name, cmd in cmds.items():
            times[name].append(checked(cmd)[0])
    return {k: stats(v) for k, v in times.items()}


def bench_in_process(model: str, files: list[dict], rounds: dict, scratch: Path) -> dict:
    from mirecc.encoder.runtime import Encoder
    from mirecc.encoder.stmtcache import StatementCache
    from mirecc.graph import build_graph
    t0 = time.perf_counter()
    enc = Encoder(model, cache=scratch / "inproc-load.sqlite")
    load_s = time.perf_counter() - t0
    enc.cache.close()
    out = {"encoder_load_s": load_s, "files": {}}
    for f in files:
        res = {"cold": [], "warm": [], "build_graph": []}
        for _ in range(rounds[f["label"]]):
            fresh = Path(tempfile.mkdtemp(prefix="inproc-", dir=scratch))
            enc.cache = StatementCache(fresh / "embeddings.sqlite", enc.info.cache_version,
                                       enc.dim_statement)
            for kind in ("cold", "warm"):
                t = time.perf_counter()
                emb = enc.embed_file(f["bc"])
                res[kind].append((time.perf_counter() - t, dict(emb.stats)))
            t = time.perf_counter()
            build_graph(f["bc"])
            res["build_graph"].append(time.perf_counter() - t)
            enc.cache.close()
            enc.cache = None
            shutil.rmtree(fresh)
            c, w = res["cold"][-1], res["warm"][-1]
            log(f"{f['label']}: in process: cold {c[0]:.3f} s, warm {w[0]:.3f} s, "
                f"build_graph {res['build_graph'][-1]:.3f} s")
        row = {"build_graph_s": stats(res["build_graph"])}
        for kind in ("cold", "warm"):
            runs = res[kind]
            st = [s for _, s in runs]
            row[kind] = {
                "wall": stats([w for w, _ in runs]),
                "statement_s": stats([s["statement_seconds"] for s in st]),
                "graph_s": stats([s["graph_seconds"] for s in st]),
                "rest_s": stats([s["total_seconds"] - s["statement_seconds"] - s["graph_seconds"]
                                 for s in st]),
                "stats_last": st[-1],
            }
        out["files"][f["label"]] = row
    return out


def bench_ir2vec(f: dict, rounds: int) -> dict:
    cmd = [sys.executable, "-c", IR2VEC_CODE, str(f["ll"])]
    walls, inner, imports, cpus = [], [], [], []
    for r in range(rounds):
        wall, cpu, rss, rc, err = timed(cmd)
        if rc != 0:
            return {"failed": f"exit {rc}: {err.strip()[-1000:]}"}
        d = json.loads(err.strip().splitlines()[-1])
        walls.append(wall)
        cpus.append(cpu)
        inner.append(d["embed_s"])
        imports.append(d["import_s"])
        log(f"{f['label']}: IR2Vec round {r + 1}: {wall:.3f} s wall, {d['embed_s']:.3f} s in process")
    return {"wall": stats(walls), "cpu": stats(cpus), "in_process": stats(inner),
            "import_s": stats(imports), "dim": d["dim"]}


def ir2vec_version() -> str | None:
    proc = subprocess.run([sys.executable, "-c", "import ir2vec; print(ir2vec.__version__)"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


# ------------------------------------------------------------------- main

def ms(x: float) -> str:
    return f"{x * 1000:.0f}" if x >= 0.1 else f"{x * 1000:.1f}"


def spread(s: dict) -> str:
    return f"{ms(s['median'])} [{ms(s['min'])}-{ms(s['max'])}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(REPO / "mirecc" / "data" / "encoder"),
                    help="encoder model directory (default: the shipped mirecc/data/encoder)")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per file (default 5)")
    ap.add_argument("--big-repeats", type=int, default=None,
                    help="timed rounds for the big module (default: --repeats)")
    ap.add_argument("--files", nargs="+", type=Path, metavar="FILE",
                    help="modules to use instead of saxpy, the 2k corpus module and sqlite3 "
                         "(.bc, .ll or .c); the last of three or more counts as the big one")
    ap.add_argument("--work", type=Path, default=REPO / ".work")
    ap.add_argument("--out", type=Path, help="JSON result (default: WORK/embed_speed.json)")
    ap.add_argument("--no-ir2vec", action="store_true", help="leave IR2Vec out")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    big_rounds = max(1, args.big_repeats if args.big_repeats is not None else args.repeats)
    work = args.work.resolve()
    out_dir = work / "embed_speed"
    out_dir.mkdir(parents=True, exist_ok=True)
    model = str(Path(args.model).resolve())
    mire = Path(sys.executable).with_name("mire")
    mire = str(mire) if mire.is_file() else shutil.which("mire")
    if not mire:
        raise SystemExit("embed_speed: no mire console script beside this Python or on PATH")
    from mirecc.util.modelfiles import ModelError, load_model
    try:
        info = load_model(model)
    except ModelError as exc:
        raise SystemExit(f"embed_speed: {exc} (pass --model DIR)")

    if args.files:
        files = []
        for i, p in enumerate(args.files):
            p = p.resolve()
            bc = compile_c(p, out_dir) if p.suffix == ".c" else p
            big = len(args.files) >= 3 and i == len(args.files) - 1
            files.append({"label": "big" if big else f"file{i + 1}", "bc": bc, "source": str(p)})
    else:
        files = default_files(work, out_dir)
    for f in files:
        f["ll"] = disassemble(f["bc"], out_dir, f"{f['label']}-{Path(f['bc']).stem}")
    rounds = {f["label"]: big_rounds if f["label"] == "big" else args.repeats for f in files}

    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
               "python": platform.python_version(),
               "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
               "loadavg_start": round(os.getloadavg()[0], 2)}
    scratch = Path(tempfile.mkdtemp(prefix="mirecc-embed-speed-"))
    result: dict = {"machine": machine, "model": {"dir": model, "name": info.name,
                                                  "version": info.version},
                    "mire": mire, "repeats": args.repeats, "big_repeats": big_rounds,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "files": [{k: str(v) if isinstance(v, Path) else v for k, v in f.items()}
                              for f in files]}
    try:
        log("start-up alone")
        result["startup"] = bench_startup(model, args.repeats)
        result["invocation"] = {}
        for f in files:
            log(f"{f['label']}: whole invocations ({rounds[f['label']]} rounds)")
            result["invocation"][f["label"]] = bench_invocations(mire, model, f, rounds[f["label"]],
                                                                 scratch)
        result["server"] = {}
        for f in files:
            if f["label"] == "big":
                continue
            log(f"{f['label']}: through the embedding server ({rounds[f['label']]} rounds)")
            result["server"][f["label"]] = bench_server(mire, model, f, rounds[f["label"]], scratch)
        log("in-process runs")
        result["in_process"] = bench_in_process(model, files, rounds, scratch)
        # the target module: the one whose statement count is nearest 2000
        target = min(files, key=lambda f: abs(
            result["in_process"]["files"][f["label"]]["cold"]["stats_last"]["statements"]
            - TARGET_STATEMENTS))
        result["target_file"] = target["label"]
        log(f"{target['label']}: warm invocations with the bytecode cache usable")
        result["warm_pyc"] = bench_warm_pyc(mire, model, target, args.repeats, scratch)
        result["ir2vec"] = {"version": None, "files": {}}
        if not args.no_ir2vec:
            result["ir2vec"]["version"] = ir2vec_version()
            if result["ir2vec"]["version"] is None:
                result["ir2vec"]["skipped"] = "import ir2vec failed"
            else:
                for f in files:
                    log(f"{f['label']}: IR2Vec ({rounds[f['label']]} rounds)")
                    result["ir2vec"]["files"][f["label"]] = bench_ir2vec(f, rounds[f["label"]])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    machine["loadavg_end"] = round(os.getloadavg()[0], 2)

    # ---------------------------------------------------------------- report
    inv, inp, i2v = result["invocation"], result["in_process"], result["ir2vec"]
    lines = [
        "mire embed: time per translation unit",
        f"machine: {machine['cpu']}, {machine['cores']} cores, Linux {machine['kernel']}, "
        f"python {machine['python']}, PYTHONDONTWRITEBYTECODE={machine['PYTHONDONTWRITEBYTECODE']}; "
        f"load average {machine['loadavg_start']} at start, {machine['loadavg_end']} at end",
        f"model: {model} ({info.name} {info.version}); mire: {mire}",
        "protocol: fresh process `mire embed FILE --model DIR --cache C -o OUT.json`; cold: C in a "
        "fresh empty directory each run; warm: C filled by an untimed warm-up run;",
        f"          {args.repeats} rounds per file"
        + (f" ({big_rounds} for the big one)" if "big" in rounds else "") + ", each cold then "
        f"warm; in process: Encoder loaded once, embed_file with a fresh cache, then again; "
        f"IR2Vec {i2v.get('version')} (fa, program vector) on the llvm-dis-14 text of the same "
        f"module, one fresh process per round",
        "",
        "modules:",
    ]
    for f in files:
        st = inp["files"][f["label"]]["cold"]["stats_last"]
        lines.append(f"  {f['label']:<6} {st['statements']:>7} statements, {st['nodes']:>7} nodes, "
                     f"{st['distinct_texts']:>6} distinct texts: {f['source']} ({f['bc']})")
    lines += ["", "whole invocation (fresh process), wall ms: median [min-max]; CPU ms median; "
              "peak MB"]
    lines.append(f"  {'module':<8}{'cold':>24}{'cpu':>8}{'warm':>24}{'cpu':>8}{'peak MB':>9}")
    for f in files:
        r = inv[f["label"]]
        c, w = r["cold"], r["warm"]
        lines.append(f"  {f['label']:<8}{spread(c['wall']):>24}{ms(c['cpu']['median']):>8}"
                     f"{spread(w['wall']):>24}{ms(w['cpu']['median']):>8}"
                     f"{max(c['peak_rss_mb'], w['peak_rss_mb']):>9.0f}")
    p = result["warm_pyc"]["wall"]
    lines.append(f"  {target['label']:<8}warm with the bytecode cache usable (diagnostic): "
                 f"{ms(p['median'])} ms [{ms(p['min'])}-{ms(p['max'])}]")
    lines += ["", "through the per-user server (`mire embed --server`), whole client process, "
              "wall ms: first call (starts the server, cold cache) / later calls (warm)"]
    for label, r in result["server"].items():
        lines.append(f"  {label:<8}{spread(r['first']):>24}{spread(r['warm']):>24}")
    lines += ["", "start-up alone (fresh process), wall ms: median [min-max]"]
    for name, s in result["startup"].items():
        lines.append(f"  {name:<48}{ms(s['median']):>8} [{ms(s['min'])}-{ms(s['max'])}]")
    lines += ["", f"in process (Encoder loaded once, {ms(inp['encoder_load_s'])} ms to load), "
              "ms median [min-max]; statement / graph network / rest (graph build, pooling) "
              "from the encoder's stats"]
    lines.append(f"  {'module':<8}{'cache':<7}{'embed_file':>22}{'statements':>12}{'graph':>10}"
                 f"{'rest':>10}   build_graph alone")
    for f in files:
        row = inp["files"][f["label"]]
        for kind in ("cold", "warm"):
            k = row[kind]
            extra = spread(row["build_graph_s"]) if kind == "cold" else ""
            st = k["stats_last"]
            lines.append(
                f"  {f['label']:<8}{kind:<7}"
                + f"{spread(k['wall']):>22}"
                + f"{ms(k['statement_s']['median']):>12}{ms(k['graph_s']['median']):>10}"
                + f"{ms(k['rest_s']['median']):>10}   {extra}"
                + (f"  ({st['cached_texts']}/{st['distinct_texts']} texts cached)"
                   if kind == "warm" else ""))
    lines += ["", "IR2Vec (fresh process per round), ms median [min-max]"]
    if i2v.get("skipped") or args.no_ir2vec:
        lines.append(f"  skipped: {i2v.get('skipped', '--no-ir2vec')}")
    for f in files:
        r = i2v["files"].get(f["label"])
        if r is None:
            continue
        if "failed" in r:
            lines.append(f"  {f['label']:<8}failed: {r['failed'][:300]}")
            continue
        lines.append(
            f"  {f['label']:<8}whole process {ms(r['wall']['median'])} [{ms(r['wall']['min'])}-"
            f"{ms(r['wall']['max'])}]; initEmbedding + getProgramVector in process "
            f"{ms(r['in_process']['median'])} [{ms(r['in_process']['min'])}-"
            f"{ms(r['in_process']['max'])}]; import {ms(r['import_s']['median'])}; "
            f"{r['dim']} dims; mire in process cold / IR2Vec in process "
            f"{inp['files'][f['label']]['cold']['wall']['median'] / r['in_process']['median']:.2f}x")

    t = inv[target["label"]]
    srv = result["server"].get(target["label"])
    cold_ok = t["cold"]["wall"]["median"] < TARGET_COLD_S
    warm_ok = t["warm"]["wall"]["median"] < TARGET_WARM_S
    warm_srv_ok = srv is not None and srv["warm"]["median"] < TARGET_WARM_S
    tstat = inp["files"][target["label"]]["cold"]["stats_last"]["statements"]
    result["targets"] = {"module": target["label"], "statements": tstat,
                         "cold_s": TARGET_COLD_S, "cold_met": cold_ok,
                         "warm_s": TARGET_WARM_S, "warm_met": warm_ok,
                         "warm_server_met": warm_srv_ok}
    lines += ["", f"targets (whole invocation, module '{target['label']}', {tstat} statements, "
              f"medians):",
              f"  cold under {TARGET_COLD_S * 1000:.0f} ms: {ms(t['cold']['wall']['median'])} ms: "
              f"{'MET' if cold_ok else 'NOT MET'}",
              f"  warm under {TARGET_WARM_S * 1000:.0f} ms, fresh process: "
              f"{ms(t['warm']['wall']['median'])} ms: {'MET' if warm_ok else 'NOT MET'}"]
    if srv is not None:
        lines.append(f"  warm under {TARGET_WARM_S * 1000:.0f} ms, through the server: "
                     f"{ms(srv['warm']['median'])} ms: {'MET' if warm_srv_ok else 'NOT MET'}")
    if machine["loadavg_start"] > 0.5 * (machine["cores"] or 1) \
            or machine["loadavg_end"] > 0.5 * (machine["cores"] or 1):
        lines.append(f"NOTE: the machine was busy (load average {machine['loadavg_start']} -> "
                     f"{machine['loadavg_end']} on {machine['cores']} cores): timings are noisy")
    print("\n".join(lines))

    path = args.out or work / "embed_speed.json"
    atomic_write_bytes(path, (json.dumps(result, indent=2, default=str) + "\n").encode())
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
