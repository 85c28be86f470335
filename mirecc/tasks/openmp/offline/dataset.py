"""Time every (threads, schedule, chunk) of every OpenMP region of a program.

For one program (:mod:`.programs`) and input size, the harness

* lists the module's regions and worksharing loops (:mod:`..sites`: the
  plugin's call ids, locations, explicit clauses);
* builds the **default** binary: ``clang -O3 -fopenmp``, no decisions, i.e.
  the runtime's default: a team of all cores, static schedule, default chunk;
* per region and per configuration of the space (:data:`SPACES`), builds a
  binary through mirecc's pass plugin with a decisions file that
  sets the region's team size (unless the source fixes it: ``num_threads``,
  ``omp_set_num_threads``) and the schedule and chunk of all of its loops
  that have no schedule clause; every other region stays default. Binaries
  are cached by the hash of what makes them (compiler, flags, sources,
  decisions, plugin) under ``<out>/work``, so a rerun does not rebuild;
* times them: ``repeats`` rounds, each running the default binary and every
  distinct configuration binary once, in an order shuffled per round (drift
  hits all alike); the time is the program's own kernel time (PolyBench's
  ``POLYBENCH_TIME``, the kernels' clock_gettime section). Configurations
  whose binaries are byte-identical (a decision the plugin refused, a
  team-size-only region) share one binary and its runs;
* checks outputs: each run's output (PolyBench's ``POLYBENCH_DUMP_ARRAYS``
  dump, the kernels' checksum) must equal the default's first run byte for
  byte; otherwise the configuration is ``output_changed`` and never a
  candidate for best.

Programs run with no ``OMP_*``, ``KMP_*`` or ``GOMP_*`` variable in their
environment (the runtime's defaults), each run under a timeout.

One JSON line per (program, size, region, configuration) is appended to
``<out>/labels.jsonl`` under a lock (the loop dataset's
:func:`~mirecc.learn.labels.append_row`); a rerun
skips the rows already there. ``<out>/meta.json`` records the machine, the
compiler and the protocol.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from mirecc.plugin.build import clang_major, ensure_plugin, plugin_args
from mirecc.util.fsutil import atomic_write_bytes, file_identity, replace_dir
from mirecc.learn.labels import (append_row, cc_version, machine_info, read_done,
                                 read_rows)
from mirecc.tasks.openmp.offline.programs import DEFAULT_SIZES, Program, parse_output
from mirecc.ir.regions import Site, program_sites

THREADS = (1, 2, 4)
SCHEDULES = ("static", "dynamic", "guided")
#: None: the runtime's default chunk for the schedule
CHUNKS = (None, 1, 8, 32, 64, 128, 256, 512)
OPT = "-O3"
RUN_TIMEOUT_S = 300.0
#: environment variables removed from every run (prefixes)
ENV_REMOVED = ("OMP_", "KMP_", "GOMP_")


@dataclass(frozen=True)
class Config:
    threads: int
    schedule: str
    chunk: int | None = None

    @property
    def key(self) -> str:
        return f"t{self.threads}-{self.schedule}-{self.chunk or 'default'}"

    @classmethod
    def parse(cls, key: str) -> "Config":
        m = re.fullmatch(r"t(\d+)-(static|dynamic|guided)-(default|\d+)", key.strip())
        if not m:
            raise ValueError(f"bad configuration {key!r} (form: t2-dynamic-8, t4-static-default)")
        chunk = None if m.group(3) == "default" else int(m.group(3))
        if int(m.group(1)) < 1 or (chunk is not None and chunk < 1):
            raise ValueError(f"bad configuration {key!r}: threads and chunk must be >= 1")
        return cls(int(m.group(1)), m.group(2), chunk)

    def as_dict(self) -> dict:
        return {"threads": self.threads, "schedule": self.schedule, "chunk": self.chunk}


FULL_SPACE = [Config(t, s, c) for t in THREADS for s in SCHEDULES for c in CHUNKS]
SMALL_SPACE = [Config(t, s, c) for t in (1, 2)
               for s, c in (("static", None), ("static", 8), ("dynamic", 1), ("dynamic", 64),
                            ("guided", None))]
SPACES = {"full": FULL_SPACE, "small": SMALL_SPACE}


def space_configs(space: str = "full", keys: list[str] | None = None) -> list[Config]:
    """The configurations of a named space, or the ones ``keys`` name."""
    if keys:
        return [Config.parse(k) for k in keys]
    if space not in SPACES:
        raise ValueError(f"unknown space {space!r} (known: {', '.join(SPACES)})")
    return list(SPACES[space])


# ---------------------------------------------------------------------------
# the toolchain: libomp and omp.h for a clang


def _llvm_dirs() -> list[Path]:
    """/usr/lib/llvm-N with a libomp, newest first."""
    found = [Path(p).parent.parent for p in sorted(
        Path("/usr/lib").glob("llvm-*/lib/libomp.so"))]
    return sorted(found, key=lambda d: -int(re.sub(r"\D", "", d.name) or 0))


def omp_toolchain(cc: str, work: Path) -> dict:
    """Flags with which ``cc -fopenmp`` compiles ``#include <omp.h>`` and links
    and runs a program: none, or another LLVM's ``omp.h`` (a folder under
    ``work`` holding only it) and libomp (Debian's clang-19 without
    libomp-19-dev uses LLVM 14's). Raises RuntimeError when nothing works."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "omp-probe.c"
    src.write_text("#include <omp.h>\n#include <stdio.h>\nint main(void) { int n = 0;\n"
                   "#pragma omp parallel\n{\n#pragma omp atomic\nn++;\n}\n"
                   "printf(\"%d\\n\", n == omp_get_max_threads()); return 0; }\n")
    tries = [([], [])]
    for d in _llvm_dirs():
        ld = [f"-L{d / 'lib'}", f"-Wl,-rpath,{d / 'lib'}"]
        tries.append(([], ld))
        headers = sorted(d.glob("lib/clang/*/include/omp.h"))
        if headers:
            inc = work / f"omp-include-{d.name}"
            inc.mkdir(exist_ok=True)
            link = inc / "omp.h"
            if not link.exists():
                try:
                    link.symlink_to(headers[-1])
                except FileExistsError:
                    pass
            tries.append((["-isystem", str(inc)], ld))
    errors = []
    for cflags, ldflags in tries:
        exe = work / "omp-probe"
        p = subprocess.run([cc, "-fopenmp", *cflags, str(src), "-o", str(exe), *ldflags],
                           capture_output=True, text=True)
        if p.returncode == 0:
            r = subprocess.run([str(exe)], capture_output=True, text=True, env=clean_env(),
                               timeout=60)
            if r.returncode == 0 and r.stdout.strip() == "1":
                return {"cflags": cflags, "ldflags": ldflags}
            errors.append(f"runs badly: {r.stderr.strip()[-200:]}")
        else:
            errors.append(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
    raise RuntimeError(f"{cc} -fopenmp: no working OpenMP runtime found ({'; '.join(errors)})")


def clean_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_REMOVED)}
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------------
# building


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_REMARK = re.compile(r"^(?P<loc>[^\n]*?): remark: (?P<msg>.*?) \[-R(?P<kind>pass|pass-missed)="
                     r"mirecc-loophints\]$", re.M)


def parse_remarks(stderr: str) -> dict:
    """The plugin's remarks: {"applied": [...], "missed": [...]}."""
    out = {"applied": [], "missed": []}
    for m in _REMARK.finditer(stderr):
        out["applied" if m.group("kind") == "pass" else "missed"].append(m.group("msg"))
    return out


class Builder:
    """Builds program binaries, cached by content hash under ``work``."""

    def __init__(self, cc: str, work: Path, *, plugin: Path | None = None,
                 major: int | None = None, toolchain: dict | None = None):
        self.cc, self.work = cc, Path(work)
        self.cc_id = file_identity(shutil.which(cc) or cc) + "|" + cc_version(cc)
        self.toolchain = toolchain if toolchain is not None else omp_toolchain(cc, self.work / "omp")
        self.plugin, self.major = plugin, major
        self.plugin_id = _sha(Path(plugin).read_bytes()) if plugin else None
        self._dep_cache: dict[Path, str] = {}

    def _deps_hash(self, program: Program) -> str:
        parts = []
        for p in (program.source, *program.support, *program.deps):
            if p not in self._dep_cache:
                self._dep_cache[p] = _sha(Path(p).read_bytes())
            parts.append(f"{p}={self._dep_cache[p]}")
        return _sha("\n".join(parts).encode())

    def base_flags(self, program: Program, size: str) -> list[str]:
        return [OPT, "-fopenmp", *self.toolchain["cflags"], *program.flags(size)]

    def sites(self, program: Program, size: str) -> list[Site]:
        """The program source's sites, cached (ids from the plain compile)."""
        flags = self.base_flags(program, size)
        key = _sha(json.dumps([self.cc_id, flags, str(program.source),
                               self._deps_hash(program)]).encode())
        path = self.work / "sites" / f"{key}.json"
        if path.is_file():
            try:
                return [Site(**d) for d in json.loads(path.read_text())]
            except (ValueError, TypeError):
                pass
        sites = program_sites(program.source, self.cc, flags)
        atomic_write_bytes(path, json.dumps([s.to_dict() for s in sites]).encode())
        return sites

    def _support_objects(self, program: Program, size: str) -> list[Path]:
        objs = []
        for src in program.support:
            flags = [OPT, "-fopenmp", *self.toolchain["cflags"], *program.defines,
                     *(f"-I{d}" for d in program.include_dirs)]
            key = _sha(json.dumps([self.cc_id, flags, str(src),
                                   self._deps_hash(program)]).encode())
            obj = self.work / "obj" / f"{key}.o"
            if not obj.is_file():
                obj.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(suffix=".o", dir=obj.parent)
                os.close(fd)
                p = subprocess.run([self.cc, *flags, "-c", str(src), "-o", tmp],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    os.unlink(tmp)
                    raise RuntimeError(f"{src}: {p.stderr[-1000:]}")
                os.replace(tmp, obj)
            objs.append(obj)
        return objs

    def sequential_output(self, program: Program, size: str, timeout: float) -> str | None:
        """The output hash of the program built without ``-fopenmp`` (its
        pragmas ignored): what a race-free program's parallel runs print.
        None when it does not build that way (it calls the OpenMP runtime)
        or does not run; cached."""
        flags = [OPT, *program.flags(size)]
        key = _sha(json.dumps([self.cc_id, flags, str(program.source),
                               self._deps_hash(program), program.libs]).encode())
        path = self.work / "sequential" / f"{key}.json"
        if path.is_file():
            try:
                return json.loads(path.read_text())["out_sha256"]
            except (ValueError, KeyError):
                pass
        out = None
        with tempfile.TemporaryDirectory(prefix="mirecc-seq-") as tmp:
            exe = Path(tmp) / "seq"
            p = subprocess.run([self.cc, *flags, str(program.source), *map(str, program.support),
                                "-o", str(exe), *program.libs], capture_output=True, text=True)
            if p.returncode == 0:
                res = run_once(exe, timeout)
                out = res["out_sha256"] if res["ok"] else None
        atomic_write_bytes(path, json.dumps({"out_sha256": out}).encode())
        return out

    def decisions_file(self, program: Program, openmp: dict) -> Path:
        """A decisions file (content-named: new content, new name) giving the
        program's source module the ``openmp`` entry."""
        doc = {"version": 1, "modules": {str(program.source): {"openmp": openmp}}}
        data = json.dumps(doc, sort_keys=True, indent=1).encode()
        path = self.work / "decisions" / f"{_sha(data)[:24]}.json"
        if not path.is_file():
            atomic_write_bytes(path, data)
        return path

    def build(self, program: Program, size: str, openmp: dict | None) -> dict:
        """Build the program at ``size``, with the ``openmp`` decisions (None:
        the default build, without the plugin). Returns {ok, exe,
        bin_sha256, remarks, cached, error}."""
        flags = self.base_flags(program, size)
        meta_key = [self.cc_id, flags, self.toolchain, str(program.source),
                    self._deps_hash(program), program.libs]
        if openmp is not None:
            if not self.plugin:
                raise RuntimeError("no plugin to build decided binaries with")
            meta_key += [self.plugin_id, openmp]
        key = _sha(json.dumps(meta_key, sort_keys=True).encode())
        exe = self.work / "bin" / key[:2] / key
        info_path = exe.with_suffix(".json")
        if exe.is_file() and info_path.is_file():
            try:
                return {**json.loads(info_path.read_text()), "exe": str(exe), "cached": True}
            except ValueError:
                pass
        try:
            objs = self._support_objects(program, size)
        except RuntimeError as exc:
            return {"ok": False, "error": f"support source: {exc}", "cached": False}
        extra = []
        if openmp is not None:
            extra = [*plugin_args(self.major, self.plugin, self.decisions_file(program, openmp)),
                     "-Rpass=mirecc-loophints", "-Rpass-missed=mirecc-loophints"]
        exe.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".build-", dir=exe.parent)
        os.close(fd)
        cmd = [self.cc, *flags, *extra, str(program.source), *map(str, objs), "-o", tmp,
               *program.libs, *self.toolchain["ldflags"]]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            os.unlink(tmp)
            return {"ok": False, "error": "compile timeout", "cached": False}
        if p.returncode != 0:
            os.unlink(tmp)
            return {"ok": False, "error": p.stderr[-2000:], "cached": False}
        info = {"ok": True, "bin_sha256": _sha(Path(tmp).read_bytes()),
                "remarks": parse_remarks(p.stderr),
                "compile_s": round(time.perf_counter() - t0, 3)}
        os.replace(tmp, exe)
        atomic_write_bytes(info_path, json.dumps(info).encode())
        return {**info, "exe": str(exe), "cached": False}


# ---------------------------------------------------------------------------
# running


def run_once(exe: str | Path, timeout: float = RUN_TIMEOUT_S) -> dict:
    """Run a program once: {ok, time_s, out_sha256, out_bytes} or {ok: False, error}."""
    try:
        p = subprocess.run([str(exe)], capture_output=True, env=clean_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"run timeout ({timeout:g} s)"}
    stdout = p.stdout.decode("utf-8", "replace")
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        return {"ok": False, "error": f"exit {p.returncode}: {stderr[-300:]}"}
    t, out = parse_output(stdout, stderr)
    if t is None:
        return {"ok": False, "error": f"no time in the output: {stdout[-200:]}"}
    return {"ok": True, "time_s": t, "out_sha256": _sha(out)[:32], "out_bytes": len(out)}


def _stats(times: list[float]) -> dict:
    if not times:
        return {"times_s": [], "median_s": None, "min_s": None, "max_s": None}
    return {"times_s": times, "median_s": statistics.median(times), "min_s": min(times),
            "max_s": max(times)}


# ---------------------------------------------------------------------------
# one program, size and region


def region_decisions(region: Site, loops: list[Site], config: Config) -> dict:
    """The ``openmp`` entry that forces ``config`` on a region: its team size
    (unless the source fixes it) and its decidable loops' schedule and chunk."""
    entry: dict = {}
    if region.decidable:
        entry["parallel"] = {region.id: {"threads": config.threads}}
    ws = {}
    for lp in loops:
        if lp.decidable:
            ws[lp.id] = {"schedule": config.schedule,
                         **({"chunk": config.chunk} if config.chunk else {})}
    if ws:
        entry["worksharing"] = ws
    return entry


def row_id(program: str, size: str, region: str, config: str) -> str:
    return f"{program}|{size}|{region}|{config}"


def measure_region(program: Program, size: str, region: Site, loops: list[Site],
                   configs: list[Config], *, builder: Builder, default: dict, repeats: int,
                   timeout: float, jobs: int, seed: int = 0, progress=None) -> list[dict]:
    """Build and time ``configs`` on one region, alongside the default
    binary; one row per configuration."""
    t_start = time.perf_counter()
    entries = {c.key: region_decisions(region, loops, c) for c in configs}

    def note(text: str) -> None:
        if progress:
            progress(text)

    # builds (identical decisions are one build)
    builds: dict[str, dict] = {}
    distinct = {}
    for c in configs:
        distinct.setdefault(json.dumps(entries[c.key], sort_keys=True), entries[c.key])
    done = 0

    def build(text_entry):
        return text_entry, builder.build(program, size, distinct[text_entry])
    by_entry = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for text_entry, b in pool.map(build, list(distinct)):
            by_entry[text_entry] = b
            done += 1
            note(f"build {done}/{len(distinct)}")
    for c in configs:
        builds[c.key] = by_entry[json.dumps(entries[c.key], sort_keys=True)]
    compile_wall = time.perf_counter() - t_start

    # the binaries to time: one per distinct binary content
    exes = {default["bin_sha256"]: default["exe"]}
    for b in builds.values():
        if b.get("ok"):
            exes.setdefault(b["bin_sha256"], b["exe"])
    runs: dict[str, list[dict]] = {sha: [] for sha in exes}
    dead: set[str] = set()
    rng = random.Random(f"{seed}:{program.name}:{size}:{region.id}")
    order = list(exes)
    # the default alone first: a program that fails or runs over the timeout
    # (a size macro the header overrides) costs one run, not one per binary
    probe = run_once(exes[default["bin_sha256"]], timeout)
    if not probe["ok"]:
        runs[default["bin_sha256"]].append(probe)
        dead.add(default["bin_sha256"])
    for r in range(repeats if not dead else 0):
        rng.shuffle(order)
        for i, sha in enumerate(order):
            if sha in dead:
                continue
            note(f"round {r + 1}/{repeats}, run {i + 1}/{len(order)}")
            res = run_once(exes[sha], timeout)
            runs[sha].append(res)
            if not res["ok"]:
                dead.add(sha)     # a crash or a timeout: not again
        if default["bin_sha256"] in dead:
            break
    wall = time.perf_counter() - t_start

    def summary(sha: str) -> dict:
        rs = runs.get(sha, [])
        bad = next((x for x in rs if not x["ok"]), None)
        times = [x["time_s"] for x in rs if x["ok"]]
        outs = sorted({x["out_sha256"] for x in rs if x["ok"]})
        return {"ok": bad is None and bool(times), "error": bad["error"] if bad else None,
                "outputs": outs, **_stats(times)}

    d = summary(default["bin_sha256"])
    ref = next((x["out_sha256"] for x in runs[default["bin_sha256"]] if x["ok"]), None)
    default_info = {k: d[k] for k in ("ok", "error", "times_s", "median_s", "min_s", "max_s")}
    seq = default.get("sequential_sha256")
    default_info.update({"bin_sha256": default["bin_sha256"],
                         "output_sha256": ref, "stable_output": len(d["outputs"]) <= 1,
                         "sequential_output_sha256": seq,
                         "matches_sequential": None if seq is None or ref is None
                         else ref == seq})
    rows = []
    decided_loops = [lp.id for lp in loops if lp.decidable]
    for c in configs:
        b = builds[c.key]
        row = {
            "row": row_id(program.name, size, region.id, c.key),
            "program": program.name, "suite": program.suite, "group": program.group,
            "size": size, "region": region.id, "region_location": region.location,
            "region_parent": region.region,
            "region_threads_fixed": not region.decidable, "loops": decided_loops,
            "loops_explicit": {lp.id: lp.why for lp in loops if not lp.decidable},
            "config": c.as_dict(), "config_key": c.key, "decisions": entries[c.key],
            "default": default_info,
        }
        if not b.get("ok"):
            row.update({"ok": False, "error": f"build: {b.get('error', '')[-1500:]}",
                        "output_changed": False, **_stats([])})
        else:
            s = summary(b["bin_sha256"])
            changed = ref is not None and any(o != ref for o in s["outputs"])
            row.update({"ok": s["ok"] and d["ok"], "output_changed": changed,
                        "error": s["error"] or (None if d["ok"] else f"default: {d['error']}"),
                        **{k: s[k] for k in ("times_s", "median_s", "min_s", "max_s")},
                        "bin_sha256": b["bin_sha256"],
                        "same_binary_as_default": b["bin_sha256"] == default["bin_sha256"],
                        "remarks": b.get("remarks")})
            if row["ok"] and s["median_s"] and d["median_s"]:
                row["speedup"] = d["median_s"] / s["median_s"]
        row.update({"repeats": repeats, "cc": builder.cc, "opt": OPT,
                    "compile_wall_s": round(compile_wall, 2), "unit_wall_s": round(wall, 2)})
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# the whole dataset


def run_dataset(out: Path | str, programs: list[Program], *, sizes=DEFAULT_SIZES,
                configs: list[Config] | None = None, space: str = "full",
                cc: str = "clang-14", repeats: int = 5, timeout: float = RUN_TIMEOUT_S,
                jobs: int | None = None, seed: int = 0, progress: bool = True,
                plugin: Path | None = None) -> Path:
    """Measure ``programs`` at ``sizes`` into ``out/labels.jsonl`` (resuming);
    returns its path. ``configs``: the configurations (default: ``space``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    configs = list(configs or space_configs(space))
    if not configs:
        raise ValueError("no configurations to measure")
    labels = out / "labels.jsonl"
    done = read_done(labels)
    info = machine_info(cc)
    try:
        before = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError):
        before = {}
    if before.get("cc_version") not in (None, info["cc_version"]):
        raise ValueError(f"{out} holds labels of {before['cc_version']}, not of "
                         f"{info['cc_version']} ({cc}): give another --out")
    major = clang_major(cc)
    plugin = Path(plugin) if plugin else ensure_plugin(major)
    builder = Builder(cc, out / "work", plugin=plugin, major=major)
    jobs = jobs or os.cpu_count() or 1
    info["protocol"] = {
        "repeats": repeats, "space": space if configs == space_configs(space) else "custom",
        "configs": [c.key for c in configs], "sizes": list(sizes),
        "timeout_s": timeout, "seed": seed, "opt": OPT, "env_removed": list(ENV_REMOVED),
        "omp_cflags": builder.toolchain["cflags"], "omp_ldflags": builder.toolchain["ldflags"],
        "plugin": str(plugin), "timing": "median of the kernel's own time over repeats "
        "rounds; the default and the distinct configuration binaries of a region in an "
        "order shuffled per round"}
    # a later run into the same folder adds programs; it does not forget the first ones
    info["programs"] = list(dict.fromkeys([*before.get("programs", []),
                                           *(p.name for p in programs)]))
    atomic_write_bytes(out / "meta.json", (json.dumps(info, indent=1) + "\n").encode())

    units = [(p, s) for p in programs for s in sizes]
    bar = tqdm(total=len(units), unit="program", file=sys.stderr, disable=not progress,
               dynamic_ncols=True)
    try:
        for program, size in units:
            tag = f"{program.name} {size}"
            bar.set_postfix_str(tag, refresh=False)
            if row_id(program.name, size, "*", "-") in done:
                bar.update(1)
                continue
            try:
                sites = builder.sites(program, size)
            except RuntimeError as exc:
                append_row(labels, {"row": row_id(program.name, size, "*", "-"),
                                    "program": program.name, "size": size,
                                    "error": f"sites: {str(exc)[-1500:]}"})
                bar.update(1)
                continue
            regions = [s for s in sites if s.kind == "parallel"]
            todo = []
            for region in regions:
                if row_id(program.name, size, region.id, "-") in done:
                    continue
                loops = [s for s in sites if s.kind == "loop" and s.region == region.id]
                left = [c for c in configs
                        if row_id(program.name, size, region.id, c.key) not in done]
                if left:
                    todo.append((region, loops, left))
            if not regions:
                append_row(labels, {"row": row_id(program.name, size, "*", "-"),
                                    "program": program.name, "size": size,
                                    "skipped": "no parallel region"})
            default = None
            for region, loops, left in todo:
                if not region.decidable and not any(lp.decidable for lp in loops):
                    append_row(labels, {
                        "row": row_id(program.name, size, region.id, "-"),
                        "program": program.name, "suite": program.suite, "size": size,
                        "region": region.id, "region_location": region.location,
                        "skipped": f"nothing to decide: team size fixed ({region.why}), "
                                   f"no loop without a schedule clause"})
                    continue
                if default is None:
                    bar.set_postfix_str(f"{tag}: default build", refresh=True)
                    default = builder.build(program, size, None)
                    if default.get("ok"):
                        bar.set_postfix_str(f"{tag}: sequential reference", refresh=True)
                        default["sequential_sha256"] = builder.sequential_output(
                            program, size, timeout)
                if not default.get("ok"):
                    append_row(labels, {"row": row_id(program.name, size, "*", "-"),
                                        "program": program.name, "size": size,
                                        "error": f"default build: {default.get('error')}"})
                    break

                def progress_note(text, _tag=f"{tag} {region.id}"):
                    bar.set_postfix_str(f"{_tag}: {text}", refresh=True)
                rows = measure_region(program, size, region, loops, left, builder=builder,
                                      default=default, repeats=repeats, timeout=timeout,
                                      jobs=jobs, seed=seed, progress=progress_note)
                for row in rows:
                    row.update({"cc_version": info["cc_version"],
                                "space": info["protocol"]["space"]})
                    append_row(labels, row)
            bar.update(1)
    finally:
        bar.close()
    return labels


# ---------------------------------------------------------------------------
# summary: per program and size, the best configuration per region and the
# oracle


def is_candidate(row: dict) -> bool:
    """May this configuration be chosen? It ran, and its output is the default's."""
    return bool(row.get("ok") and not row.get("output_changed") and row.get("median_s")
                and (row.get("default") or {}).get("median_s"))


def combine(ratios: dict[str, float], parents: dict[str, str | None] | None = None) -> float:
    """The whole program's speedup when each region runs ``ratios[region]``
    times as fast as by default (each measured on the whole program's kernel
    time with that region alone changed), assuming the regions independent:
    each saves the share 1 - 1/ratio of the default's time, and the shares
    add up. A nested region (``parents``: region -> enclosing region) runs
    inside its parent's time, so a tree of nested regions counts once, with
    the largest saving among its regions. One region: its own ratio, as
    measured."""
    if not ratios:
        return 1.0
    if len(ratios) == 1:
        return next(iter(ratios.values()))
    parents = parents or {}

    def root(rid: str) -> str:
        seen = set()
        while parents.get(rid) in ratios and rid not in seen:
            seen.add(rid)
            rid = parents[rid]
        return rid
    trees: dict[str, float] = {}
    for rid, ratio in ratios.items():
        saved = 1.0 - 1.0 / ratio
        top = root(rid)
        trees[top] = max(trees.get(top, saved), saved)
    total = sum(trees.values())
    if total >= 1.0:            # not possible for independent regions: noise
        return max(ratios.values())
    return 1.0 / (1.0 - total)


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def oracle(rows: list[dict]) -> dict:
    """Per (program, size): the default time, the best configuration per
    region (a region may also stay default: the oracle's ratio per region is
    at least 1), the oracle speedup (:func:`combine`: an estimate when there
    are several regions), and the best single configuration for all regions
    of all programs (the one with the best geomean over program/size pairs,
    among those that are candidates in every region)."""
    units: dict[tuple, dict] = {}
    for r in rows:
        if "config_key" not in r:
            continue
        u = units.setdefault((r["program"], r["size"]), {"regions": {}, "suite": r.get("suite")})
        u["regions"].setdefault(r["region"], []).append(r)
    per = {}
    for (prog, size), u in sorted(units.items()):
        regions, defaults, parents = {}, [], {}
        for rid, rs in u["regions"].items():      # in module order
            d = next((x["default"]["median_s"] for x in rs
                      if (x.get("default") or {}).get("median_s")), None)
            if d:
                defaults.append(d)
            parents[rid] = rs[0].get("region_parent")
            cands = [x for x in rs if is_candidate(x)]
            best = min(cands, key=lambda x: x["median_s"]) if cands else None
            regions[rid] = {
                "location": rs[0].get("region_location"), "default_s": d,
                "best": best["config_key"] if best else None,
                "best_s": best["median_s"] if best else None,
                "speedup": (best["default"]["median_s"] / best["median_s"]) if best else None,
                "by_config": {x["config_key"]: x["default"]["median_s"] / x["median_s"]
                              for x in cands},
                "configs": len(rs),
                "output_changed": sum(bool(x.get("output_changed")) for x in rs),
                "failed": sum(not x.get("ok") for x in rs),
                "default_unstable": any((x.get("default") or {}).get("stable_output") is False
                                        for x in rs),
                "default_racy": any(
                    (x.get("default") or {}).get("stable_output") is False
                    or (x.get("default") or {}).get("matches_sequential") is False
                    for x in rs)}
        ratios = {rid: max(1.0, g["speedup"]) for rid, g in regions.items() if g["speedup"]}
        per[(prog, size)] = {
            "program": prog, "size": size, "suite": u["suite"],
            "default_s": statistics.median(defaults) if defaults else None,
            "regions": regions, "parents": parents,
            "oracle": combine(ratios, parents) if ratios else None,
            "oracle_estimated": len(ratios) > 1,
            "racy": any(g["default_racy"] for g in regions.values())}
    # a racy program's outputs differ whatever is decided: not in the figures
    clean = [p for p in per.values() if not p["racy"]]
    common = None
    for p in clean:
        for g in p["regions"].values():
            keys = set(g["by_config"])
            common = keys if common is None else common & keys
    single = None
    for key in sorted(common or ()):
        sp = [combine({rid: g["by_config"][key] for rid, g in p["regions"].items()},
                      p["parents"]) for p in clean]
        gm = geomean(sp)
        if gm and (single is None or gm > single["geomean"]):
            single = {"config": key, "geomean": gm,
                      "per": {f"{p['program']}|{p['size']}": x for p, x in zip(clean, sp)}}
    return {"per": per, "single": single,
            "geomean_oracle": geomean([p["oracle"] for p in per.values()
                                       if p["oracle"] and not p["racy"]])}


def _short(location: str | None) -> str:
    return location.rsplit("/", 1)[-1] if location else "?"


def summarize(rows: list[dict]) -> tuple[str, str]:
    """(text, markdown) summary of a labels file's rows."""
    o = oracle(rows)
    per, single = o["per"], o["single"]
    cfg_rows = [r for r in rows if "config_key" in r]
    failed_programs = [r for r in rows if r.get("error") and "config_key" not in r]
    skipped = [r for r in rows if r.get("skipped")]
    unstable = [k for k, p in per.items()
                if any(g["default_unstable"] for g in p["regions"].values())]
    head = [f"rows: {len(cfg_rows)} configurations, {len(per)} program/size pairs; "
            f"output_changed: {sum(bool(r.get('output_changed')) for r in cfg_rows)}; "
            f"failed: {sum(not r.get('ok') for r in cfg_rows)}; programs that failed: "
            f"{len(failed_programs)}; regions with nothing to decide: {len(skipped)}; "
            f"defaults whose output varies between runs: {len(unstable)}; racy sources "
            f"(the default's output varies, or differs from the build without -fopenmp), "
            f"left out of the geomean: "
            f"{', '.join(sorted({k[0] for k, p in per.items() if p['racy']})) or 'none'}",
            "speedup: the default's median kernel time / the configuration's, timed in the "
            "same rounds",
            "oracle: per region its best configuration, or the default where none is faster; "
            "'est.': several regions, their bests combined assuming the regions independent "
            "(a nested tree counts once, by its largest saving): an estimate, not a "
            "measurement"]
    single_name = single["config"] if single else "-"
    text = head + ["", f"{'program':<24}{'size':<10}{'default s':>11}{'oracle':>12}"
                   f"{'single':>8}  region (location): best configuration, speedup"]
    md = ["# OpenMP dataset summary", ""] + [f"- {h}" for h in head] + [
        "", f"| program | size | default s | oracle | single ({single_name}) | region | "
        "best | speedup |", "|---|---|---:|---:|---:|---|---|---:|"]
    for (prog, size), p in per.items():
        dflt = f"{p['default_s']:.6f}" if p["default_s"] else "-"
        orc = (f"{p['oracle']:.3f}" + (" est." if p["oracle_estimated"] else "")
               + (" racy" if p["racy"] else "") if p["oracle"] else "-")
        sgl = single["per"].get(f"{prog}|{size}") if single else None
        sgl_s = f"{sgl:.3f}" if sgl else "-"
        for i, (rid, g) in enumerate(p["regions"].items()):
            first = i == 0
            best = (f"{g['best']}, {g['speedup']:.3f}" if g["speedup"] else "none")
            if g["speedup"] and g["speedup"] < 1:
                best += " (the default is faster)"
            text.append(f"{prog if first else '':<24}{size if first else '':<10}"
                        f"{dflt if first else '':>11}{orc if first else '':>12}"
                        f"{sgl_s if first else '':>8}  {rid} ({_short(g['location'])}): {best}")
            md.append(f"| {prog if first else ''} | {size if first else ''} | "
                      f"{dflt if first else ''} | {orc if first else ''} | "
                      f"{sgl_s if first else ''} | {rid} ({_short(g['location'])}) | "
                      f"{g['best'] or '-'} | "
                      f"{'%.3f' % g['speedup'] if g['speedup'] else '-'} |")
    go = o["geomean_oracle"]
    tail = [f"geomean oracle speedup over the default: {go:.3f}" if go
            else "geomean oracle speedup: -"]
    if single:
        tail.append(f"best single configuration for all regions of all programs: "
                    f"{single['config']}, geomean speedup {single['geomean']:.3f}")
    else:
        tail.append("best single configuration: none is a candidate in every region")
    for r in failed_programs:
        tail.append(f"failed: {r['program']} {r.get('size')}: {r['error'][:200]}")
    text += [""] + tail
    md += [""] + [f"- {t}" for t in tail]
    return "\n".join(text), "\n".join(md) + "\n"


def write_summary(out: Path | str) -> str:
    """Summarise ``out/labels.jsonl`` into ``out/summary.md``; the text."""
    out = Path(out)
    text, md = summarize(read_rows(out / "labels.jsonl"))
    atomic_write_bytes(out / "summary.md", md.encode())
    return text


#: protocol entries two label sets must share to be merged into one
MERGE_KEYS = ("space", "configs", "repeats", "opt")


def export_labels(src: Path | str, dest: Path | str) -> int:
    """Merge the labels of a dataset directory (``src/labels.jsonl``) into
    the committed form at ``dest`` (``labels.jsonl.gz``, ``meta.json``,
    ``summary.md``, and ``kernels-index.json`` that regenerates the kernels
    for training), keeping the rows already there (a row of ``src`` replaces
    the one with its id). Both must have been measured with the same
    compiler, machine cores and protocol. Returns the number of rows."""
    src, dest = Path(src), Path(dest)
    new = read_rows(src / "labels.jsonl")
    if not new:
        raise ValueError(f"{src}: no labels.jsonl to export")
    meta = json.loads((src / "meta.json").read_text())
    rows = {}
    if (dest / "labels.jsonl.gz").is_file():
        old_meta = json.loads((dest / "meta.json").read_text())
        def facts(m: dict) -> dict:
            return {"cc_version": m.get("cc_version"), "cores": m.get("cores"),
                    **{key: m["protocol"].get(key) for key in MERGE_KEYS}}
        theirs = facts(meta)
        for key, a in facts(old_meta).items():
            b = theirs[key]
            if a != b:
                raise ValueError(f"{dest} holds labels measured with {key} {a!r}, {src} with "
                                 f"{b!r}: not one dataset (export to another folder)")
        with gzip.open(dest / "labels.jsonl.gz", "rt") as f:
            rows = {r["row"]: r for r in (json.loads(line) for line in f if line.strip())}
        meta["dates"] = sorted(set(old_meta.get("dates", [old_meta.get("date")]))
                               | {meta.get("date")})
    rows.update((r["row"], r) for r in new)
    merged = [rows[k] for k in sorted(rows)]
    meta["programs"] = sorted({r["program"] for r in merged})
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as f:   # same rows, same bytes
        f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in merged).encode())
    files = {f.name: f.read_bytes() for f in sorted(dest.glob("*")) if f.is_file()}
    index = src / "kernels" / "index.json"
    if index.is_file():
        kept = files.get("kernels-index.json")
        if kept is not None and json.loads(kept) != json.loads(index.read_text()):
            raise ValueError(f"{src} generated other kernels than {dest}'s (their "
                             "kernels-index.json differ): export to another folder")
        files["kernels-index.json"] = index.read_bytes()
    files.update({"labels.jsonl.gz": buf.getvalue(),
                  "meta.json": (json.dumps(meta, indent=1) + "\n").encode(),
                  "summary.md": summarize(merged)[1].encode()})
    replace_dir(dest, files)         # all files new, or all old
    return len(merged)
