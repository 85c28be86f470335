"""The team store on real projects: what a second checkout's first build
costs when CI has verified the code-size winners, against clang and against
the same build without the store.

    .venv/bin/python benchmarks/team_store.py [--projects zlib,lua5.4]
        [--rounds 3] [--budgets zlib:10 [--only-budgets]] [--compose zlib]
        [--no-calls] [--work DIR]
        [--out docs/results/team-store.md]

Protocol, per project (Debian's source, built as ``real_projects.py`` does,
at -Oz, with the project's own ``-g`` and flags; configure included):

1. **CI** (once): mirecc with ``store_write`` on a real ``redis-server``
   started here, an empty cache, checkout path ``A``: the first build
   without a store (every searched TU pays its candidates) that fills it.
2. Then, in each round, in an order that rotates, each at checkout path
   ``B`` with an empty cache of its own, another ``HOME`` and a per-user
   server of its own (another user's):
   - ``clang``: the real clang the driver resolves;
   - ``store``: mirecc reading the store (read only);
   - ``stopped``: mirecc with the same store setting and the server
     stopped (the local search, as without a store).
   Each build's wall time (configure and make), its tests, and an inventory
   of its objects and linked outputs.

3. Then (unless ``--no-calls``) one more ``clang`` and ``store`` build,
   every compiler call timed by a wrapper: where a build's added time goes,
   per kind of call (compiles, configure's probes, links and queries).

Checks: the ``store`` and ``stopped`` builds give the same objects and
outputs byte for byte (the store's winners are the search's); their tests
pass.  Machine: this one (its CPU and cores are printed); timings are the
median (min-max) of the rounds.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects as rp  # noqa: E402

from mirecc.tu import stats  # noqa: E402
from mirecc.util.machine import cpu_model  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, work: Path):
        self.port = _free_port()
        self.dir = work / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        server = shutil.which("redis-server")
        if not server:
            raise rp.BenchError("needs redis-server (scripts/setup.sh --test installs it)")
        # the data survive a stop (dump.rdb): a server stopped and started again
        self.proc = subprocess.Popen([server, "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--dir", str(self.dir), "--save", "1 1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise rp.BenchError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            subprocess.run(["redis-cli", "-p", str(self.port), "save"], capture_output=True)
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


def build_once(project: str, source: Path, at: Path, side: rp.Side, env: dict, logs: Path,
               results: Path, tag: str) -> dict:
    """One build of ``project`` at ``at`` (a fresh copy of ``source``):
    wall time of its configure and make, its tests, its inventory (the tree
    then moved to ``results/tag``)."""
    _, build, test, _ = rp.PROJECTS[project]
    if at.exists():
        shutil.rmtree(at)
    shutil.copytree(source, at, symlinks=True)
    rp._SIDE_ENV[side.cc] = env
    rp._SIDE_ENV[side.cxx] = env
    start = time.monotonic()
    try:
        build(at, side, logs)
        seconds = time.monotonic() - start
    finally:
        if env.get("XDG_RUNTIME_DIR"):   # the side's per-user server, if it started one
            subprocess.run([str(Path(sys.executable).with_name("mire")), "serve", "--stop"],
                           env=rp.build_env(**env), capture_output=True)
    summary, _ = test(at, side, logs)
    inventory = rp.inventory(at)
    dest = results / tag
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(at), dest)
    return {"seconds": seconds, "tests": summary, "inventory": inventory}


# one compiler call timed: its wall microseconds and its kind, appended to a log
_TIMED_CALL = r"""#!/bin/bash
start=$(date +%s%N)
"{real}" "$@"
rc=$?
end=$(date +%s%N)
kind=other; c=0; out=-; prev=
for a in "$@"; do
  case "$a" in
    -c) c=1;;
    -E|-M|-MM) kind=preprocess;;
    *.c|*.cc|*.cpp|*.cxx|*.C) [ "$kind" = other ] && kind=source;;
  esac
  [ "$prev" = -o ] && out="$a"
  prev="$a"
done
if [ "$kind" = source ]; then if [ $c = 1 ]; then kind=compile; else kind=compile+link; fi; fi
echo "$(( (end - start) / 1000 )) $kind $PWD/$out" >> "{log}"
exit $rc
"""
CALL_CLASSES = ("winner", "clang's object", "probe", "compile+link", "preprocess", "other")


def timed_calls(project: str, source: Path, work: Path, side: rp.Side, env: dict, logs: Path,
                tag: str) -> dict:
    """One more build at checkout path B with every compiler call timed (a
    wrapper around the side's compiler logs each call's wall time, kind and
    output: a compile, a compile and link (configure's probes), a
    preprocessing, or anything else: links, version queries):
    ``{"calls": [[microseconds, kind, output in the tree]], "objects":
    {output: SHA-256}}`` (the objects the build left)."""
    where = work / "calls" / project / tag
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    log = where / "calls.log"
    for name, real in (("cc", side.cc), ("cxx", side.cxx)):
        (where / name).write_text(_TIMED_CALL.format(real=real, log=log))
        (where / name).chmod(0o755)
    timed = rp.Side(side.name, str(where / "cc"), str(where / "cxx"))
    build_once(project, source, work / "checkout-B" / project, timed, env, logs,
               where, "tree")
    tree = where / "tree"
    objects = {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in tree.rglob("*.o") if p.is_file()}
    shutil.rmtree(tree, ignore_errors=True)
    calls = []
    at = str(work / "checkout-B" / project) + "/"
    for line in log.read_text().splitlines():
        micro, kind, out = line.split(" ", 2)
        out = os.path.normpath(out[len(at):]) if out.startswith(at) else ""
        calls.append([int(micro), kind, out])
    return {"calls": calls, "objects": objects}


def call_classes(clang: dict, store: dict) -> dict:
    """The ``store`` side's calls (:func:`timed_calls`) by what they made:
    ``winner`` (a compile whose object is not clang's: a search's winner
    built), ``clang's object`` (a compile that left clang's object),
    ``probe`` (configure's compiles, whose objects do not stay) and the
    other kinds; ``{class: ([clang µs], [store µs])}``, matched call by call
    on (kind, output)."""
    pending: dict = {}
    for micro, kind, out in clang["calls"]:
        pending.setdefault((kind, out), []).append(micro)
    classes: dict = {}
    for micro, kind, out in store["calls"]:
        mine = pending.get((kind, out))
        if not mine:
            continue
        theirs = mine.pop(0)
        if kind == "compile":
            if out not in store["objects"]:
                kind = "probe"
            elif store["objects"][out] != clang["objects"].get(out):
                kind = "winner"
            else:
                kind = "clang's object"
        a, b = classes.setdefault(kind, ([], []))
        a.append(theirs)
        b.append(micro)
    return classes


def counters(cache: Path) -> dict:
    from mirecc.taskapi.config import Config

    return stats.read(Config(cache_dir=str(cache)))


def bench_project(project: str, work: Path, mirecc: Path, rounds: int, redis: Redis,
                  budget: int | None = None, calls: bool = False) -> dict:
    """One project's CI build and rounds; ``budget``: the mirecc sides'
    ``size_search`` and ``size_budget`` (None: the defaults); ``calls``:
    then one more ``clang`` and ``store`` build each, every compiler call
    timed (:func:`timed_calls`)."""
    package = rp.PROJECTS[project][0]
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    source = rp.fetch_source(package, work / "src", logs=logs)
    clang_side, mirecc_side = rp.sides(mirecc)
    # the shipped heads decide (pin_compilers would name none)
    rp._PINNED.pop("MIRECC_HEADS_DIR", None)
    results = work / "store-results" / project
    homes = work / "homes" / project
    if homes.exists():
        shutil.rmtree(homes)

    def side_env(name: str, **extra: str) -> dict:
        """Another user's: a HOME, a cache and a per-user server of its own
        (started by its first compile, stopped after its build)."""
        home = homes / name
        (home / "home").mkdir(parents=True, exist_ok=True)
        (home / "run").mkdir(mode=0o700, exist_ok=True)
        if budget is not None:
            extra.update(MIRECC_SIZE_SEARCH=str(budget), MIRECC_SIZE_BUDGET=str(budget))
        return {"HOME": str(home / "home"), "XDG_CACHE_HOME": str(home / "xdg"),
                "XDG_RUNTIME_DIR": str(home / "run"), "MIRECC_CACHE_DIR": str(home / "cache"),
                **extra}

    rp._OPT["level"] = "-Oz"
    redis.start()
    rp.log(f"{project}: CI build (store_write) at checkout A")
    ci_env = side_env("ci", MIRECC_STORE=redis.url, MIRECC_STORE_WRITE="1")
    ci = build_once(project, source, work / "checkout-A" / project, mirecc_side, ci_env, logs,
                    results, "ci")
    ci["counters"] = counters(Path(ci_env["MIRECC_CACHE_DIR"]))
    sides = ["clang", "store", "stopped"]
    out: dict = {"ci": ci, "rounds": {s: [] for s in sides}}
    for r in range(rounds):
        order = sides[r % 3:] + sides[:r % 3]
        for name in order:
            tag = f"{name}-{r + 1}"
            if name == "clang":
                env, side = {}, clang_side
            else:
                env = side_env(tag, MIRECC_STORE=redis.url, MIRECC_STORE_WRITE="0")
                side = mirecc_side
                if name == "stopped":
                    redis.stop()
                elif redis.proc is None:
                    redis.start()
            rp.log(f"{project}: round {r + 1} {name} at checkout B")
            got = build_once(project, source, work / "checkout-B" / project, side, env, logs,
                             results, tag)
            if name != "clang":
                got["counters"] = counters(Path(env["MIRECC_CACHE_DIR"]))
            if redis.proc is None:
                redis.start()
            rp.log(f"{project}: {name}: {got['seconds']:.1f} s")
            out["rounds"][name].append(got)
    if calls:
        out["calls"] = {}
        for name in ("clang", "store"):
            rp.log(f"{project}: {name} at checkout B, every compiler call timed")
            env = {} if name == "clang" else \
                side_env("calls", MIRECC_STORE=redis.url, MIRECC_STORE_WRITE="0")
            out["calls"][name] = timed_calls(project, source, work,
                                             clang_side if name == "clang" else mirecc_side,
                                             env, logs, name)
    redis.stop()
    return out


class Distccd:
    """A local distccd (its compiles run as the distcc user)."""

    def __init__(self, work: Path):
        self.port = _free_port()
        self.log = work / "distccd.log"
        self.proc = None

    def __enter__(self):
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                ["distccd", "--no-detach", "--daemon", "--listen", "127.0.0.1", "--port",
                 str(self.port), "--allow", "127.0.0.1", "--log-stderr", "--log-level",
                 "info", "--jobs", "2", "--enable-tcp-insecure"],
                stdout=subprocess.DEVNULL, stderr=err)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise rp.BenchError("distccd did not start")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _tool_hits(kind: str, env: dict) -> tuple[int, int]:
    """(hits, misses) of ccache or sccache so far."""
    if kind == "ccache":
        out = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True,
                             text=True).stdout
        stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        return (int(stats.get("direct_cache_hit", 0)) + int(stats.get("preprocessed_cache_hit", 0)),
                int(stats.get("cache_miss", 0)))
    out = subprocess.run(["sccache", "--show-stats"], env=env, capture_output=True,
                         text=True).stdout
    def value(prefix):
        return next((int(line.split()[-1]) for line in out.splitlines()
                     if line.startswith(prefix) and line.split()[-1].isdigit()), 0)
    return value("Cache hits"), value("Cache misses")


def compositions(project: str, work: Path, mirecc: Path, reference: dict) -> list[dict]:
    """The project built with each composition twice (the second a rebuild
    from a fresh copy, the tools' caches kept): times, the TUs the search
    built candidates for, the objects against mirecc's alone
    (``reference``: the ``stopped`` side's first inventory), tests, and the
    cache's hits on the rebuild."""
    package = rp.PROJECTS[project][0]
    logs = work / "logs"
    source = rp.fetch_source(package, work / "src", logs=logs)
    clang_side, mirecc_side = rp.sides(mirecc)
    rp._PINNED.pop("MIRECC_HEADS_DIR", None)
    identity = subprocess.run([str(mirecc), "--mirecc-identity"], capture_output=True,
                              text=True, env=rp.build_env()).stdout.strip()
    rows = []
    for name in ("ccache mirecc", "sccache mirecc", "mirecc, prefix=ccache",
                 "mirecc, prefix=distcc"):
        tool = name.split()[0] if not name.startswith("mirecc,") else name.split("=")[1]
        if not shutil.which(tool if tool != "distcc" else "distccd"):
            rows.append({"name": name, "missing": f"not run: {tool} is not installed"})
            continue
        home = work / "compose" / project / re.sub(r"[^a-z]+", "-", name)
        if home.exists():
            shutil.rmtree(home)
        home.mkdir(parents=True)
        (home / "run").mkdir(mode=0o700)
        env = {"HOME": str(home), "MIRECC_CACHE_DIR": str(home / "mirecc-cache"),
               "XDG_RUNTIME_DIR": str(home / "run"), "CCACHE_DIR": str(home / "ccache"),
               "SCCACHE_DIR": str(home / "sccache"), "DISTCC_DIR": str(home / "distcc"),
               "SCCACHE_SERVER_PORT": str(_free_port()), "SCCACHE_IDLE_TIMEOUT": "0"}
        (home / "distcc").mkdir()
        cc, cxx = mirecc_side.cc, mirecc_side.cxx
        if name == "ccache mirecc":
            cc, cxx = f"ccache {cc}", f"ccache {cxx}"
            env.update(CCACHE_COMPILERTYPE="clang",
                       CCACHE_COMPILERCHECK="%compiler% --mirecc-identity")
        elif name == "sccache mirecc":
            cc, cxx = f"sccache {cc}", f"sccache {cxx}"
            env.update(SCCACHE_C_CUSTOM_CACHE_BUSTER=identity)
        else:
            env["MIRECC_PREFIX"] = tool
        side = rp.Side("mirecc", cc, cxx)
        distccd = Distccd(home) if tool == "distcc" else None
        if distccd:
            distccd.__enter__()
            # distcc's defaults but one: a probe that fails to preprocess (configure's
            # `#error` test) would put the only host in a minute's backoff, and the
            # rest of the build would run locally (with DISTCC_FALLBACK=0: fail)
            env.update(DISTCC_HOSTS=f"127.0.0.1:{distccd.port}/2", DISTCC_BACKOFF_PERIOD="0")
        if tool == "sccache":
            subprocess.run(["sccache", "--start-server"], env={**os.environ, **env},
                           capture_output=True)
        failed = None
        try:
            runs = []
            for attempt in ("first", "rebuild"):
                before = _tool_hits(tool, {**os.environ, **env}) if tool in ("ccache", "sccache") \
                    else (0, 0)
                got = build_once(project, source, work / "checkout-B" / project, side, env, logs,
                                 work / "store-results" / project, f"compose-{attempt}")
                after = _tool_hits(tool, {**os.environ, **env}) if tool in ("ccache", "sccache") \
                    else (0, 0)
                got["tool"] = (after[0] - before[0], after[1] - before[1])
                got["counters"] = counters(home / "mirecc-cache")
                runs.append(got)
                rp.log(f"{project}: {name} {attempt}: {got['seconds']:.1f} s, "
                       f"{tool} hits/misses {got['tool']}")
        except rp.BenchError as exc:   # a row that says so, the others still run
            failed = next((ln for ln in str(exc).splitlines()[1:] if ln.strip()), str(exc))
            rp.log(f"{project}: {name}: {failed}")
        finally:
            if tool == "sccache":
                subprocess.run(["sccache", "--stop-server"], env={**os.environ, **env},
                               capture_output=True)
            if distccd:
                text = distccd.log.read_text(errors="replace")
                distccd.__exit__()
        if failed is not None:
            rows.append({"name": name, "missing": f"the build failed: {failed[:160]}"})
            continue
        c1 = runs[0]["counters"]
        rows.append({"name": name, "first": runs[0], "rebuild": runs[1],
                     "searched": stats.searched(c1, "code-size"),
                     "same": runs[0]["inventory"] == reference,
                     "distributed": text.count("COMPILE_OK") if distccd else None})
    return rows


def _median(values):
    return statistics.median(values) if values else float("nan")


def _searched(c: dict) -> int:
    """The TUs of a build's counters that the code-size search was not gated off."""
    return c.get("verified.code-size", 0) - c.get("verified.code-size.not-searched", 0)


def render(results: dict, machine: str, rounds: int, compiler: str) -> str:
    lines = ["# The team store on real projects", "",
             "Written by `benchmarks/team_store.py`. Machine: "
             f"{machine}. Compiler: {compiler}. Level: -Oz, each project's own flags "
             "(`-g` included). A real `redis-server` on this machine.",
             f"Protocol: a CI build (store_write, empty cache, checkout path A) fills the "
             f"store; then {rounds} rounds, the sides' order rotating, each side at checkout "
             "path B with an empty cache, another HOME and a per-user server of its own "
             "(started by its first compile, as another user's): `clang`; `store` (mirecc reading "
             "the store); `stopped` (the same setting, the server stopped: the local search "
             "as without a store). Times: wall seconds of configure and make, median "
             "(min-max); tests: each build's own.", "",
             "| project | clang | CI build (no store yet) | store | stopped | store / clang | "
             "stopped / clang | store = stopped (objects, outputs) | winners from the store | "
             "rejected | tests |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for project, r in results.items():
        t = {s: [x["seconds"] for x in r["rounds"][s]] for s in r["rounds"]}
        clang = _median(t["clang"])
        same = all(x["inventory"] == y["inventory"]
                   for x, y in zip(r["rounds"]["store"], r["rounds"]["stopped"]))
        counts = [x["counters"] for x in r["rounds"]["store"]]
        lines.append(
            f"| {project} | {rp.spread(t['clang'], 1)} | {r['ci']['seconds']:.1f} "
            f"({r['ci']['seconds'] / clang:.2f}x) | {rp.spread(t['store'], 1)} | "
            f"{rp.spread(t['stopped'], 1)} | {_median(t['store']) / clang:.2f}x | "
            f"{_median(t['stopped']) / clang:.2f}x | {'yes' if same else 'NO'} "
            f"({len(r['rounds']['store'][0]['inventory']['objects'])} objects, "
            f"{len(r['rounds']['store'][0]['inventory']['linked'])} linked) | "
            f"{_median([c.get('verified.code-size.from-store', 0) for c in counts]):.0f} of "
            f"{_median([_searched(c) for c in counts]):.0f} "
            f"searched TUs (the others: their static or shared twin's) | "
            f"{sum(c.get('store.rejected', 0) for c in counts)} | "
            f"{r['rounds']['store'][0]['tests']} |")
    lines += ["", "Counters of the CI build (filled) and of the first `store` and `stopped` "
              "rounds:", ""]
    for project, r in results.items():
        for name, c in (("CI", r["ci"]["counters"]),
                        ("store", r["rounds"]["store"][0]["counters"]),
                        ("stopped", r["rounds"]["stopped"][0]["counters"])):
            shown = {k: v for k, v in sorted(c.items())
                     if k.startswith(("store.", "verified.code-size"))}
            lines.append(f"- {project} {name}: " + ", ".join(f"`{k}` {v}"
                                                            for k, v in shown.items()))
    timed = {project: r["calls"] for project, r in results.items() if r.get("calls")}
    if timed:
        lines += ["", "## Where the rest goes: every compiler call timed", "",
                  "One more `clang` and `store` build of each project at checkout path B, "
                  "each compiler call timed by a wrapper (a bash script around the side's "
                  "compiler, the same on both sides) and matched across the sides by its kind "
                  "and output: `winner`: a compile whose object is not clang's (a search's "
                  "winner, built again from the store's verdict or a twin's); `clang's "
                  "object`: a compile whose object is clang's (a plain entry from the store, "
                  "or a TU the gates answered); `probe`: configure's `-c` compiles, whose "
                  "objects are removed; `compile+link`: a source without `-c`; `preprocess`: "
                  "`-E`, `-M`; `other`: links, version and option queries. Means per call in "
                  "milliseconds; added: the `store` side's sum less clang's, in seconds of "
                  "calls (under `make -j2` two run at a time, so a call's wall time includes "
                  "waiting for the core the other holds).", "",
                  "| project | calls | number | clang, ms per call | store, ms per call | "
                  "added per call, ms | added in all, s |",
                  "|---|---|---|---|---|---|---|"]
        for project, c in timed.items():
            classes = call_classes(c["clang"], c["store"])
            for kind in CALL_CLASSES:
                if kind not in classes:
                    continue
                a, b = classes[kind]
                ma, mb = sum(a) / len(a) / 1e3, sum(b) / len(b) / 1e3
                lines.append(f"| {project} | {kind} | {len(a)} | {ma:.0f} | {mb:.0f} "
                             f"| {mb - ma:+.0f} | {(sum(b) - sum(a)) / 1e6:+.1f} |")
    for project, r in results.items():
        if not r.get("compositions"):
            continue
        lines += ["", f"## Composed with compile caches and distributors ({project})", "",
                  "Each built twice at checkout path B: first with empty caches (mirecc's, the "
                  "tool's), then again from a fresh copy with the caches kept (a rebuild). "
                  "`ccache mirecc`: ccache in front, `compiler_check` = "
                  "`%compiler% --mirecc-identity`; `sccache mirecc`: its "
                  "`SCCACHE_C_CUSTOM_CACHE_BUSTER` = `mirecc --mirecc-identity`; `prefix=`: "
                  "mirecc in front, the user's own compile through the tool (a local "
                  "distccd). Objects: against mirecc alone (the `stopped` side).", "",
                  "| composition | first build (s) | TUs searched | objects = mirecc alone | "
                  "tests | rebuild (s) | the tool's hits / misses on the rebuild |",
                  "|---|---|---|---|---|---|---|"]
        for row in r["compositions"]:
            if "missing" in row:
                lines.append(f"| {row['name']} | {row['missing']} | | | | | |")
                continue
            hits = (f"{row['rebuild']['tool'][0]} / {row['rebuild']['tool'][1]}"
                    if row["name"].split()[0] in ("ccache", "sccache")
                    or "ccache" in row["name"] else
                    f"(distccd compiled {row['distributed']} of both builds' compiles)")
            same = "yes" if row["same"] else (
                "no: distcc compiles preprocessed source remotely, which gives `-g` objects "
                "other debug-info bytes (plain `distcc clang -g` differs from clang too)"
                if "distcc" in row["name"] else "NO")
            lines.append(f"| {row['name']} | {row['first']['seconds']:.1f} | {row['searched']} "
                         f"| {same} | {row['first']['tests']} | "
                         f"{row['rebuild']['seconds']:.1f} | {hits} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--projects", default="zlib,lua5.4")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compose", default="zlib",
                   help="projects also built with ccache, sccache and distcc (default: "
                        "%(default)s; '' for none)")
    p.add_argument("--budgets", default="",
                   help="PROJECT:N,...: also run PROJECT with size_search = size_budget = N "
                        "(a wider search, which the store saves)")
    p.add_argument("--only-budgets", action="store_true",
                   help="run only the --budgets rows, and add them to the last run's results "
                        "(<work>/team-store.json) in the page")
    p.add_argument("--no-calls", action="store_true",
                   help="skip the extra clang and store build per project whose every "
                        "compiler call is timed")
    p.add_argument("--work", type=Path, default=rp.DEFAULT_WORK)
    p.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "team-store.md")
    args = p.parse_args(argv)
    mirecc = rp.find_mirecc()
    work = args.work.resolve()
    redis = Redis(Path(tempfile.mkdtemp(prefix="mirecc-store-bench-")))
    results = {}
    saved = work / "team-store.json"
    if args.only_budgets and saved.exists():
        results = json.loads(saved.read_text())
    budgets = [b.split(":") for b in args.budgets.split(",") if b]
    try:
        for project in args.projects.split(","):
            if not args.only_budgets:
                results[project] = bench_project(project, work, mirecc, args.rounds, redis,
                                                 calls=not args.no_calls)
                if project in args.compose.split(","):
                    reference = results[project]["rounds"]["stopped"][0]["inventory"]
                    results[project]["compositions"] = compositions(project, work, mirecc,
                                                                    reference)
            for name, budget in budgets:
                if name == project:
                    results[f"{project} (size_search = size_budget = {budget})"] = \
                        bench_project(project, work, mirecc, args.rounds, redis, int(budget))
            saved.write_text(json.dumps(results, indent=1, default=str))
    finally:
        redis.stop()
    compiler = rp.real_compiler(mirecc)
    text = render(results, f"{cpu_model()}, {os.cpu_count()} cores", args.rounds, compiler)
    rp.publish(text, args.out)
    same = all(all(x["inventory"] == y["inventory"]
                   for x, y in zip(r["rounds"]["store"], r["rounds"]["stopped"]))
               for r in results.values())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
