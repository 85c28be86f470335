"""What mirecc costs a real build: zlib built with CC=clang and CC=mirecc.

    .venv/bin/python benchmarks/overhead.py [--work DIR] [--repeats N]
                     [--startup-repeats N] [--strict]

Protocol
--------
* zlib is Debian bookworm's source package, fetched (once) into
  ``DIR/src`` by the code of ``real_projects.py``.
* Three copies of it are configured once each (``./configure``, CFLAGS
  ``-O2 -g``) under ``DIR/overhead/``:
    - ``clang``:          CC=<the real clang that mirecc resolves>
    - ``mirecc``:         CC=<.venv/bin/mirecc>, default mode: no MIRECC_*
      variables, no task heads installed (checked with ``--explain``), so
      mirecc starts Python, classifies the command line and execs clang;
    - ``mirecc-capture``: the same mirecc with ``MIRECC_CAPTURE_DIR`` set to
      a fresh empty temporary directory for every build (and
      ``MIRECC_CACHE_DIR`` likewise, so every build starts cold): mirecc then
      runs a side clang to emit each TU's IR and stores it;
    - ``mirecc-pyc``:     diagnostic row, the default mode again but with
      Python's bytecode cache usable (``PYTHONDONTWRITEBYTECODE`` unset,
      ``PYTHONPYCACHEPREFIX`` a private directory filled by the warm-up).
      An editable install has no ``.pyc`` files, so where the environment sets
      ``PYTHONDONTWRITEBYTECODE=1`` every mirecc start compiles mirecc's
      modules from source; a regular ``pip install`` precompiles them.  The
      headline figure is the ``mirecc`` row, as the environment is.
* One untimed warm-up build of each (page cache, Python bytecode of the
  standard library), then ``--repeats`` rounds (default 5, at least 3); each
  round builds every variant once, the order rotating from round to round so
  no variant always runs first or last.  A build is ``make clean`` (untimed)
  followed by the timed ``make -j1`` (the whole default target: static and
  shared library, six test programs), one job so that every compiler start
  adds to the wall time.  Wall time with ``time.perf_counter``; CPU time
  (user+sys of the children) from ``getrusage``.
* Reported per variant: median, min and max wall time, median CPU time, and
  the ratio of its median to clang's median.  Target for the default mode:
  ratio <= 1.15.
* Driver start-up alone: ``mirecc --version`` (start Python, classify, exec
  ``clang --version``) against ``clang --version``, and
  ``mirecc --mirecc-version`` (Python only, no clang), and ``mirecc
  --version`` with the bytecode cache usable; ``--startup-repeats`` (default
  20) runs each, interleaved; median, min, max.

Results go to stdout, progress to stderr and JSON to ``DIR/overhead.json``.
The exit status is 0 when everything ran (also when the target is missed,
unless ``--strict``), 1 when a build failed, 3 when ``--strict`` and the
target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402

TARGET_RATIO = 1.15


def _timed(cmd: list[str], cwd: Path, env: dict, log_path: Path) -> tuple[float, float, str]:
    """Run cmd; return (wall seconds, child CPU seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_path, "a") as fh:
        fh.write(f"\n$ cd {cwd} && {' '.join(cmd)}\n{proc.stdout}[exit status "
                 f"{proc.returncode}, {wall:.3f} s]\n")
    if proc.returncode != 0:
        raise rp.BenchError(f"{' '.join(cmd)} failed in {cwd} (exit status "
                            f"{proc.returncode}); log: {log_path}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "runs": [round(x, 4) for x in xs]}


def heads_state(mirecc: Path, scratch: Path) -> str:
    """What mirecc's --explain says about task heads for an -O2 compile."""
    src = scratch / "probe.c"
    src.write_text("int probe(int x) { return x + 1; }\n")
    proc = subprocess.run([str(mirecc), "--explain=json", "-O2", "-c", str(src), "-o",
                           str(scratch / "probe.o")], env=rp.build_env(),
                          capture_output=True, text=True)
    tu = None
    for stream in (proc.stdout, proc.stderr):
        try:
            tu = json.loads(stream)["translation_units"][0]
            break
        except (ValueError, KeyError, IndexError):
            continue
    if tu is None:
        return f"unknown (--explain failed: {proc.stderr.strip()[:200]})"
    if tu["decisions"]:
        return f"HEADS INSTALLED: {len(tu['decisions'])} decision(s) on a probe"
    return "; ".join(tu["no_decision_reasons"]) or "no decisions"


def startup(mirecc: Path, clang: str, repeats: int, pycache: Path) -> dict:
    env = rp.build_env()
    pyc_env = dict(env, PYTHONPYCACHEPREFIX=str(pycache))
    pyc_env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmds = {
        "clang --version": ([clang, "--version"], env),
        "mirecc --version": ([str(mirecc), "--version"], env),
        "mirecc --mirecc-version": ([str(mirecc), "--mirecc-version"], env),
        "mirecc --version (pyc)": ([str(mirecc), "--version"], pyc_env),
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for name, (cmd, e) in cmds.items():  # warm-up
        subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, check=True)
    for _ in range(repeats):
        for name, (cmd, e) in cmds.items():
            start = time.perf_counter()
            subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
    return {k: _stats(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=rp.DEFAULT_WORK)
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed builds per variant (default 5, at least 3)")
    parser.add_argument("--startup-repeats", type=int, default=20)
    parser.add_argument("--mirecc", type=Path, default=None)
    parser.add_argument("--strict", action="store_true",
                        help=f"exit 3 when the default-mode ratio exceeds {TARGET_RATIO}")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be at least 3")
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    mirecc = args.mirecc.absolute() if args.mirecc else rp.find_mirecc()
    clang = rp.real_compiler(mirecc)
    rp.pin_compilers(clang, rp.real_compiler(mirecc.with_name("mirecc++"), cxx=True))
    machine = rp.machine_info(clang)
    machine["loadavg_start"] = os.getloadavg()
    machine["PYTHONDONTWRITEBYTECODE"] = os.environ.get("PYTHONDONTWRITEBYTECODE")

    try:
        src = rp.fetch_source("zlib", work / "src", logs=logs)
    except rp.BenchError as exc:
        print(f"overhead: {exc}", file=sys.stderr)
        return 1
    version = rp.source_version(src)
    root = work / "overhead"
    scratch = Path(tempfile.mkdtemp(prefix="mirecc-overhead-"))
    heads = heads_state(mirecc, scratch)
    log_path = logs / "overhead.log"
    log_path.unlink(missing_ok=True)

    variants = {"clang": clang, "mirecc": str(mirecc), "mirecc-pyc": str(mirecc),
                "mirecc-capture": str(mirecc)}
    trees = {}
    for name, cc in variants.items():
        tree = root / name
        if tree.exists():
            shutil.rmtree(tree)
        tree.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, tree, symlinks=True)
        rp.log(f"overhead: configuring {name} (CC={cc})")
        rp.run(["./configure"], cwd=tree, env=rp.build_env(CC=cc, CFLAGS=rp.ZLIB_CFLAGS),
               log_path=log_path, stage=f"configure {name}")
        trees[name] = tree

    def build(name: str, timed_round: int | None) -> tuple[float, float, int, int | None]:
        tree = trees[name]
        env = rp.build_env()
        captured = None
        if name == "mirecc-capture":
            fresh = Path(tempfile.mkdtemp(prefix="capture-", dir=scratch))
            env["MIRECC_CAPTURE_DIR"] = str(fresh / "ir")
            env["MIRECC_CACHE_DIR"] = str(fresh / "cache")
        if name == "mirecc-pyc":
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        subprocess.run(["make", "clean"], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        what = "warm-up" if timed_round is None else f"round {timed_round + 1}"
        wall, cpu, out = _timed(["make", "-j1"], tree, env, log_path)
        calls = sum(1 for ln in out.splitlines() if ln.startswith(variants[name] + " "))
        if name == "mirecc-capture":
            manifest = Path(env["MIRECC_CAPTURE_DIR"]) / "manifest.jsonl"
            captured = len(manifest.read_text().splitlines()) if manifest.exists() else 0
            shutil.rmtree(fresh)
        rp.log(f"overhead: {what}: {name:<15} {wall:7.3f} s wall, {cpu:7.3f} s cpu"
               + (f", {captured} TUs captured" if captured is not None else ""))
        return wall, cpu, calls, captured

    results: dict[str, dict] = {n: {"wall": [], "cpu": []} for n in variants}
    try:
        for name in variants:
            _, _, calls, captured = build(name, None)
            results[name]["compiler_calls"] = calls
            if captured is not None:
                results[name]["tus_captured_per_build"] = captured
        order = list(variants)
        for r in range(args.repeats):
            for name in order[r % len(order):] + order[:r % len(order)]:
                wall, cpu, _, captured = build(name, r)
                results[name]["wall"].append(wall)
                results[name]["cpu"].append(cpu)
                if captured is not None and captured != results[name]["tus_captured_per_build"]:
                    raise rp.BenchError(f"capture mode stored {captured} TUs in round {r + 1}, "
                                        f"{results[name]['tus_captured_per_build']} in warm-up")
    except (rp.BenchError, subprocess.CalledProcessError) as exc:
        print(f"overhead: {exc}", file=sys.stderr)
        return 1

    rp.log(f"overhead: start-up, {args.startup_repeats} runs each")
    start_times = startup(mirecc, clang, args.startup_repeats, scratch / "pycache")
    machine["loadavg_end"] = os.getloadavg()
    shutil.rmtree(scratch, ignore_errors=True)

    base = statistics.median(results["clang"]["wall"])
    rows = {}
    for name, r in results.items():
        wall, cpu = _stats(r["wall"]), _stats(r["cpu"])
        rows[name] = {"wall": wall, "cpu": cpu, "ratio": wall["median"] / base,
                      "ratio_of_min": wall["min"] / min(results["clang"]["wall"]),
                      "cpu_ratio": cpu["median"] / statistics.median(results["clang"]["cpu"]),
                      "compiler_calls": r.get("compiler_calls"),
                      "tus_captured_per_build": r.get("tus_captured_per_build")}
    ratio = rows["mirecc"]["ratio"]
    meets = ratio <= TARGET_RATIO
    calls = rows["mirecc"]["compiler_calls"] or 0
    per_call_ms = ((rows["mirecc"]["wall"]["median"] - base) / calls * 1000) if calls else None

    out = [
        "mirecc build overhead on zlib",
        f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}",
        f"compiler: {clang} ({machine['clang']}); mirecc: {mirecc}; "
        f"python {machine['python']}",
        f"environment: PYTHONDONTWRITEBYTECODE={machine['PYTHONDONTWRITEBYTECODE']}; "
        f"load average at start {machine['loadavg_start'][0]:.2f}, "
        f"at end {machine['loadavg_end'][0]:.2f}",
        f"mirecc default mode: {heads}",
        f"protocol: zlib {version}, ./configure CFLAGS='{rp.ZLIB_CFLAGS}' once per variant; "
        f"per build: make clean (untimed), then timed `make -j1`;",
        f"          1 untimed warm-up + {args.repeats} timed rounds per variant, order "
        f"rotated each round; capture mode: fresh MIRECC_CAPTURE_DIR and MIRECC_CACHE_DIR "
        f"per build",
        "",
        f"{'variant':<16}{'median s':>10}{'min s':>9}{'max s':>9}{'ratio':>8}"
        f"{'cpu med s':>11}{'cpu ratio':>11}{'calls':>7}",
    ]
    for name, row in rows.items():
        w = row["wall"]
        out.append(f"{name:<16}{w['median']:>10.3f}{w['min']:>9.3f}{w['max']:>9.3f}"
                   f"{row['ratio']:>7.3f}x{row['cpu']['median']:>11.3f}"
                   f"{row['cpu_ratio']:>10.3f}x{row['compiler_calls'] or 0:>7}")
    out += [
        "(ratio: median wall time over clang's median; cpu: user+sys of make and "
        "its children)",
        "",
        f"default mode: ratio of medians {ratio:.3f}x (target <= {TARGET_RATIO:.2f}x): "
        f"{'MEETS the target' if meets else 'MISSES the target'}"
        + (f"; {per_call_ms:+.1f} ms per compiler call ({calls} calls)"
           if per_call_ms is not None else ""),
        f"              ratio of minimums {rows['mirecc']['ratio_of_min']:.3f}x, "
        f"ratio of median CPU times {rows['mirecc']['cpu_ratio']:.3f}x (context only)",
        f"mirecc-pyc (bytecode cache usable): ratio of medians "
        f"{rows['mirecc-pyc']['ratio']:.3f}x (diagnostic, see the docstring)",
        f"capture mode: ratio of medians {rows['mirecc-capture']['ratio']:.3f}x, "
        f"{rows['mirecc-capture']['tus_captured_per_build']} TUs captured per build",
        "",
        f"driver start-up ({args.startup_repeats} runs each, interleaved):",
    ]
    for name, st in start_times.items():
        out.append(f"  {name:<26} median {st['median'] * 1000:7.1f} ms   "
                   f"min {st['min'] * 1000:6.1f}   max {st['max'] * 1000:6.1f}")
    extra = (start_times["mirecc --version"]["median"]
             - start_times["clang --version"]["median"]) * 1000
    out.append(f"  mirecc adds {extra:.1f} ms per call before clang starts")
    # make -j1 keeps one core busy: wall time well above CPU time means the
    # build waited for a core that other processes held.
    waits = [w / c for r in results.values() for w, c in zip(r["wall"], r["cpu"]) if c > 0]
    contention = statistics.median(waits) if waits else 1.0
    machine["median_wall_over_cpu"] = contention
    out.append(f"contention check: median wall/cpu time of the timed builds "
               f"{contention:.3f} (1.0 = never waited for a core; a busy neighbour on "
               f"the other core slows CPU time too, which this does not show: compare the "
               f"load averages)")
    if contention > 1.05 or max(waits, default=1.0) > 1.25:
        out.append(f"NOTE: builds waited for a core (worst wall/cpu {max(waits):.2f}): other "
                   f"processes competed for the {machine['cores']} cores; wall times are noisy")
    print("\n".join(out))

    data = {"machine": machine, "mirecc": str(mirecc), "compiler": clang,
            "zlib_version": version, "heads": heads, "repeats": args.repeats,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "builds": rows,
            "default_ratio": ratio, "target_ratio": TARGET_RATIO, "meets_target": meets,
            "per_call_overhead_ms": per_call_ms, "startup": start_times,
            "startup_overhead_ms": extra}
    path = work / "overhead.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nJSON: {path}")
    return 3 if (args.strict and not meets) else 0


if __name__ == "__main__":
    sys.exit(main())
