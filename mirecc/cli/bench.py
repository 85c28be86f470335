"""``mire bench``: what mirecc does to the bundled benchmark programs, in three
parts, each against plain clang on the same machine:

1. **Code size** (on by default at ``-Oz``/``-Os``): every program built with
   clang -Oz and with mirecc -Oz (its default ``size_search``); per program
   the loadable bytes of both objects (every SHF_ALLOC section:
   :func:`mirecc.util.elf.object_sizes`), the bytes saved,
   whether mirecc's object is never larger (else flagged), whether the two
   binaries print the same, the compile-time ratio of a first build (cache
   off), and beside it the best figure the candidate library knows
   (``MIRECC_SIZE_SEARCH=<library size>``: every candidate built).
2. **-O3 with the defaults**: which tasks apply by default at -O3 (the task
   registry and configuration say; today none), what the heads decided
   (recorded, ``MIRECC_RECORD``) and applied, and whether the objects are
   clang's byte for byte (checked for every mirecc compile); for a program
   with an OpenMP pragma, also its parallel regions
   adapted at run time (``-fopenmp``, ``MIRECC_ADAPT_OPENMP=1``; a bundled
   program runs its region once per process, which the runtime explores
   over successive runs): the first run from an empty verdict
   store, the steady state and the slowest run against clang's; for every
   other program, its functions with loops compiled in versions and chosen
   at run time (``MIRECC_ADAPT_LOOPS=1``), measured the same way.
3. **One short** ``mire tune`` on one program: what it kept, and the tuned
   build re-measured against the untuned one apart from the tune's own runs.

Protocol: compiles alternate sides (clang first in even repeats, mirecc
first in odd ones), ``compile_repeats`` each, median kept with min and max;
a binary runs once to warm up (that run's output is compared) and then
``run_repeats`` times, sides alternating in the same way; objects and
binaries are compared byte for byte, and the same binary is 1.000x by
construction (not timed).  The machine (CPU model, cores, compiler) heads
the tables.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mirecc
from mirecc.util.machine import cpu_model

#: what the adapted part sets, for a program with an OpenMP pragma: adaptive
#: sites (a bundled program runs its region once per process: the runtime
#: explores its candidates over successive runs, as by default)
OPENMP_ADAPTED = {"MIRECC_ADAPT_OPENMP": "1"}
#: what it sets for the other programs: functions in versions (a bundled
#: program calls its kernel many times per run: decided within a run)
LOOPS_ADAPTED = {"MIRECC_ADAPT_LOOPS": "1"}
#: runs of the adapted program (each beside one of clang's): the first
#: explores from an empty store, the second half is the steady state
ADAPTED_RUNS = 24
#: the program ``mire tune`` runs on by default, when it is among the programs
DEFAULT_TUNE_PROGRAM = "tri_omp"
DEFAULT_TUNE_BUDGET = 26
TUNE_REPEATS = 3


def bundled_programs_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # mirecc/
    installed = package / "programs"                           # pip install
    source_tree = package.parent / "benchmarks" / "programs"   # checkout
    return installed if installed.is_dir() else source_tree


def fetched_library() -> Path | None:
    """The zlib source tree ``scripts/setup.sh`` fetches (Debian's, by
    ``benchmarks/real_projects.py --fetch-only``) in a checkout; None when
    it is not there."""
    # the checkout of an editable install, or the one whose .venv runs this
    for repo in (Path(__file__).resolve().parents[2], Path(sys.prefix).parent):
        root = repo / ".work" / "src" / "zlib"
        trees = sorted(p for p in root.glob("zlib-*") if (p / "configure").is_file())
        if trees:
            return trees[-1]
    return None


def machine_description(compiler: str) -> dict:
    # lazy: mire's parser imports this module on every command; bench alone needs this
    from mirecc.frontend.compiler import compiler_version

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "compiler": compiler_version(compiler)}


# ------------------------------------------------------------------ results

def _speedup(same: bool, before: list[float], after: list[float]) -> float:
    """Median before / median after; 1.0 for the same binary (not timed)."""
    if same or not after:
        return 1.0
    return statistics.median(before) / statistics.median(after)


@dataclass
class SizeRow:
    """One program at -Oz: clang's object against mirecc's."""
    program: str
    compile_clang_s: list[float]
    compile_mirecc_s: list[float]
    loadable_clang: int
    loadable_mirecc: int
    text_clang: int
    text_mirecc: int
    same_object: bool
    same_binary: bool
    same_output: bool
    best_known: int | None = None   # loadable bytes with every library candidate built

    @property
    def saved(self) -> int:
        return self.loadable_clang - self.loadable_mirecc

    @property
    def never_larger(self) -> bool:
        return self.loadable_mirecc <= self.loadable_clang

    @property
    def compile_ratio(self) -> float:
        return statistics.median(self.compile_mirecc_s) / statistics.median(self.compile_clang_s)

    @property
    def correct(self) -> bool:
        return self.same_output and self.never_larger


#: what zlib's ``make test`` says when its three tests pass (as LibraryRow counts)
ZLIB_TESTS_OK = "3 of 3 'test OK'"


@dataclass
class LibraryRow:
    """A real library built at -Oz by clang and by mirecc (configure and
    make, a first build): what ships, per linked file."""
    name: str
    build_clang_s: float
    build_mirecc_s: float
    shipped: dict            # linked file -> [clang, mirecc, best known or None] loadable bytes
    tests_clang: str
    tests_mirecc: str
    searched: int = 0        # TUs whose candidates mirecc built
    build_best_s: float | None = None

    @property
    def never_larger(self) -> bool:
        return all(m <= c for c, m, _ in self.shipped.values())

    @property
    def correct(self) -> bool:
        return self.never_larger and self.tests_clang == self.tests_mirecc == ZLIB_TESTS_OK


@dataclass
class LevelRow:
    """One program at -O3: with the defaults (``setting`` "defaults") or
    with a task forced (``setting`` names the variables set)."""
    program: str
    setting: str
    compile_clang_s: list[float]
    compile_mirecc_s: list[float]
    same_object: bool
    same_output: bool
    run_clang_s: list[float] = field(default_factory=list)
    run_mirecc_s: list[float] = field(default_factory=list)
    # task -> [decisions made, decisions applied] in mirecc's recorded compile
    decisions: dict = field(default_factory=dict)
    # adapted (OPENMP_ADAPTED): every run of the adapted program, in order
    # (run_mirecc_s), the first from an empty verdict store; the kept verdicts
    adapted: bool = False
    verdicts: list = field(default_factory=list)

    @property
    def applied(self) -> int:
        return sum(applied for _, applied in self.decisions.values())

    @property
    def correct(self) -> bool:
        """Same output, and the same object unless a decision was applied."""
        return self.same_output and (self.same_object or self.applied > 0)

    @property
    def compile_ratio(self) -> float:
        return statistics.median(self.compile_mirecc_s) / statistics.median(self.compile_clang_s)

    @property
    def speedup(self) -> float:
        """1.0 for the same binary (not timed: identical code has no speedup);
        adapted: the steady state, the second half of its runs."""
        if self.adapted:
            return _speedup(False, self.run_clang_s,
                            self.run_mirecc_s[len(self.run_mirecc_s) // 2:])
        return _speedup(self.same_object, self.run_clang_s, self.run_mirecc_s)

    @property
    def first(self) -> float:
        """Adapted: the first run (an empty verdict store) against clang's median."""
        return _speedup(not self.adapted, self.run_clang_s, self.run_mirecc_s[:1])

    @property
    def worst(self) -> float:
        """Adapted: the slowest run against clang's median."""
        return _speedup(not self.adapted, self.run_clang_s,
                        [max(self.run_mirecc_s)] if self.run_mirecc_s else [])


@dataclass
class TuneResult:
    program: str
    budget: int
    repeats: int
    seconds: float = 0.0
    kept: list = field(default_factory=list)      # the profile's entries, as written
    tried: int = 0                                # candidates built and judged
    log: list = field(default_factory=list)       # mire tune's progress lines
    error: str = ""
    same_binary: bool = True
    same_output: bool = True
    run_untuned_s: list = field(default_factory=list)
    run_tuned_s: list = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return _speedup(self.same_binary, self.run_untuned_s, self.run_tuned_s)

    @property
    def correct(self) -> bool:
        return not self.error and self.same_output


# ------------------------------------------------------------------ helpers

def _timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, **kw)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stderr.decode(errors='replace')}")
    return elapsed, proc


def _order(repeat: int) -> tuple[str, str]:
    """Which side goes first: clang in even repeats, mirecc in odd ones."""
    return ("clang", "mirecc") if repeat % 2 == 0 else ("mirecc", "clang")


def uses_openmp(source: Path) -> bool:
    """Does the program have an OpenMP pragma (then it is built with -fopenmp)?"""
    return re.search(r"^\s*#\s*pragma\s+omp\b", source.read_text(errors="replace"),
                     re.MULTILINE) is not None


def loadable(obj: Path) -> tuple[int, int]:
    """(loadable bytes, .text bytes) of an object: mirecc's own measure
    (:func:`mirecc.util.elf.object_sizes`, the code-size task's)."""
    from mirecc.util.elf import object_sizes  # lazy: mire's parser imports this module

    return object_sizes(str(obj))


def text_bytes(obj: Path) -> int:
    """Bytes of an ELF object's executable code."""
    return loadable(obj)[1]


def read_decisions(record: Path) -> dict[str, list[int]]:
    """task -> [decided, applied] of the last TU in a record file; decided:
    a value that differs from the compiler's own choice."""
    decisions: dict[str, list[int]] = {}
    if record.is_file() and record.read_text().strip():
        last = json.loads(record.read_text().splitlines()[-1])
        for d in last["decisions"]:
            counts = decisions.setdefault(d["task"], [0, 0])
            counts[0] += bool(d["value"])      # an empty value keeps the compiler's choice
            counts[1] += bool(d["applied"])
    return decisions


def library_size(clang: str) -> int | None:
    """How many candidates the installed code-size library holds for
    ``clang``'s LLVM (None when that cannot be read)."""
    try:
        # inside the guard: a missing head or a moved module is not measured
        from mirecc.frontend.compiler import clang_major
        from mirecc.taskapi.config import load_config
        from mirecc.tasks.code_size.head import installed_library
        return len(installed_library(load_config(), clang_major(clang))) or None
    except Exception:  # noqa: BLE001 - a missing head or a moved module: not measured
        return None


def opt_level(flags: list[str]) -> str:
    """The -O level of ``flags`` without "-O" ("3", "z"; "0" when none)."""
    level = "0"
    for flag in flags:
        if flag.startswith("-O"):
            level = flag[2:] or "1"
    return level


def defaults_text(flags: list[str]) -> tuple[list[str], str]:
    """(tasks whose decisions change a C compile by default at ``flags``'s
    level, a sentence saying so and how the others are turned on), from the
    task registry and this configuration."""
    level = opt_level(flags)
    try:
        # inside the guard: a moved registry is reported, not raised
        from mirecc.taskapi.config import load_config
        from mirecc.taskapi.registry import tasks
        config = load_config()
        declared = list(tasks().values())
    except Exception as exc:  # noqa: BLE001 - a moved registry: say so, not fail
        return [], f"(the task registry could not be read: {exc}; see mirecc --mirecc-help)"
    on, off, elsewhere = [], [], []
    for task in declared:
        if "c" not in task.languages or task.applied_when is None:
            continue            # advisory (OpenCL) tasks never change an object
        setting = next((s for s in task.settings if s.key == task.applied_when), None)
        if task.opt_levels is not None and level not in task.opt_levels:
            elsewhere.append(f"{task.name} (at -O{'/-O'.join(task.opt_levels)} only)")
        elif task.applies(config):
            on.append(task.name)
        else:
            off.append(f"{task.name} ({setting.env}=1)" if setting and setting.env
                       else task.name)
    level_text = f"-O{level}"
    sentence = (f"On by default at {level_text}: "
                f"{', '.join(on) if on else 'none'}. ")
    if off:
        sentence += (f"Decided but not applied unless set: {', '.join(off)}. ")
    if elsewhere:
        sentence += f"Not at this level: {', '.join(elsewhere)}."
    return on, sentence.strip()


def decided_text(decisions: dict) -> str:
    """'loop-vectorize 3/1' (decided / applied) per task; '-' for none."""
    return "; ".join(f"{task} {made}/{applied}"
                     for task, (made, applied) in sorted(decisions.items())) or "-"


def _spread(values: list[float], empty: str = "same binary") -> str:
    if not values:
        return empty
    return (f"{statistics.median(values) * 1e3:.1f} "
            f"({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f})")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0


def _run_pair(bins: dict[str, Path], repeats: int, progress, args: list[str] = ()
              ) -> tuple[dict[str, bytes], dict[str, list[float]]]:
    """One warm-up run of each binary (its output kept), then ``repeats``
    timed runs each, alternating which goes first."""
    outputs = {side: _timed([str(path), *args])[1].stdout for side, path in bins.items()}
    times: dict[str, list[float]] = {side: [] for side in bins}
    for r in range(repeats):
        for side in _order(r):
            times[side].append(_timed([str(bins[side]), *args])[0])
        progress()
    return outputs, times


# ------------------------------------------------------------------ the three parts

class Bench:
    def __init__(self, clang: str, mirecc: str, work: Path, compile_repeats: int,
                 run_repeats: int, progress):
        self.clang, self.mirecc, self.work = clang, mirecc, work
        self.compile_repeats, self.run_repeats = compile_repeats, run_repeats
        self.progress = progress
        # the user's own settings for mirecc's decisions stay out of the
        # defaults: each part sets what it measures
        self.base_env = {k: v for k, v in os.environ.items()
                         if k not in ("MIRECC_RECORD", "MIRECC_PROFILE", "MIRECC_APPLY_LOOPS",
                                      "MIRECC_APPLY_OPENMP", "MIRECC_RECORD_NUMA",
                                      "MIRECC_ADAPT_OPENMP", "MIRECC_ADAPT_STORE",
                                      "MIRECC_ADAPT_ACROSS_RUNS", "MIRECC_ADAPT",
                                      "MIRECC_DISABLE", "MIRECC_CAPTURE_DIR")}

    def env(self, **extra: str) -> dict:
        return dict(self.base_env, **extra)

    def compile_pair(self, source: Path, flags: list[str], tag: str, mirecc_env: dict
                     ) -> tuple[dict[str, Path], dict[str, list[float]], bool]:
        """Both sides' objects, their compile times, and whether every mirecc
        object was clang's byte for byte."""
        objs = {side: self.work / f"{source.stem}.{tag}.{side}.o" for side in ("clang", "mirecc")}
        drivers = {"clang": self.clang, "mirecc": self.mirecc}
        envs = {"clang": self.base_env, "mirecc": mirecc_env}
        times: dict[str, list[float]] = {"clang": [], "mirecc": []}
        mirecc_objects = set()
        for r in range(self.compile_repeats):
            for side in _order(r):
                t, _ = _timed([drivers[side], *flags, "-c", str(source), "-o", str(objs[side])],
                              env=envs[side])
                times[side].append(t)
                if side == "mirecc":
                    mirecc_objects.add(objs[side].read_bytes())
            self.progress()
        same = mirecc_objects == {objs["clang"].read_bytes()}
        return objs, times, same

    def link(self, obj: Path, flags: list[str], driver: str | None = None,
             env: dict | None = None) -> Path:
        """The program of ``obj``, linked by clang (or ``driver``)."""
        exe = obj.with_suffix("")
        link_flags = [f for f in flags if f.startswith("-fopenmp")]
        _timed([driver or self.clang, *link_flags, str(obj), "-o", str(exe), "-lm"], env=env)
        return exe

    # 1. code size

    def size(self, source: Path, flags: list[str], best_k: int | None) -> SizeRow:
        flags = flags + (["-fopenmp"] if uses_openmp(source) else [])
        # a first build: no winner cache (a rebuild would build the winner only)
        objs, times, same_object = self.compile_pair(source, flags, "size",
                                                     self.env(MIRECC_CACHE="0"))
        (lc, tc), (lm, tm) = loadable(objs["clang"]), loadable(objs["mirecc"])
        best = None
        if best_k:
            obj = self.work / f"{source.stem}.size.best.o"
            _timed([self.mirecc, *flags, "-c", str(source), "-o", str(obj)],
                   env=self.env(MIRECC_CACHE="0", MIRECC_SIZE_SEARCH=str(best_k),
                                MIRECC_SIZE_BUDGET=str(2 * best_k)))
            best = loadable(obj)[0]
        bins = {side: self.link(obj, flags) for side, obj in objs.items()}
        same_binary = bins["clang"].read_bytes() == bins["mirecc"].read_bytes()
        if same_binary:
            same_output = True    # the same file: the same output, not run twice
        else:
            outputs = {side: _timed([str(b)])[1].stdout for side, b in bins.items()}
            same_output = outputs["clang"] == outputs["mirecc"]
        self.progress()
        return SizeRow(source.stem, times["clang"], times["mirecc"], lc, lm, tc, tm,
                       same_object, same_binary, same_output, best)

    def library(self, tree: Path, size_flags: list[str], best_k: int | None) -> LibraryRow:
        """zlib (``tree``) configured and built with ``make -j<cores>`` by
        clang, by mirecc (a first build: an empty cache of its own) and,
        for the best known, by mirecc with ``best_k`` candidates; its shared
        library and programs measured, its ``make test`` run on each."""
        # lazy: mire's parser imports this module on every command
        from mirecc.tu import stats
        from mirecc.taskapi.config import Config

        sides = [("clang", self.clang, {}), ("mirecc", self.mirecc, {})]
        if best_k:
            sides.append(("best", self.mirecc, {"MIRECC_SIZE_SEARCH": str(best_k),
                                                 "MIRECC_SIZE_BUDGET": str(2 * best_k)}))
        built, seconds, tests, searched = {}, {}, {}, 0
        for side, cc, extra in sides:
            where = self.work / f"library-{side}"
            shutil.copytree(tree, where, symlinks=True)
            cache = self.work / f"library-cache-{side}"
            env = self.env(CC=cc, CFLAGS=" ".join(size_flags), MIRECC_CACHE_DIR=str(cache),
                           LC_ALL="C", **extra)
            start = time.perf_counter()
            _timed(["sh", "./configure"], cwd=where, env=env)
            _timed(["make", f"-j{os.cpu_count() or 1}"], cwd=where, env=env)
            seconds[side] = time.perf_counter() - start
            self.progress()
            if side != "best":
                out = _timed(["make", "test"], cwd=where, env=env)[1].stdout.decode(
                    errors="replace")
                tests[side] = f"{out.count('test OK')} of 3 'test OK'"   # ZLIB_TESTS_OK
            if side == "mirecc":
                # at -Oz: the code-size task's, the only build step there
                searched = stats.searched(stats.read(Config(cache_dir=str(cache))))
            built[side] = where
        shipped = {}
        for path in sorted(built["clang"].iterdir()):
            # linked files (the shared library, the programs): ELF, not objects
            if path.is_symlink() or not path.is_file() or path.suffix in (".o", ".lo") \
                    or path.read_bytes()[:4] != b"\x7fELF":
                continue
            shipped[path.name] = [loadable(built[s] / path.name)[0] if s in built else None
                                  for s in ("clang", "mirecc", "best")]
        return LibraryRow(tree.name, seconds["clang"], seconds["mirecc"], shipped,
                          tests["clang"], tests["mirecc"], searched, seconds.get("best"))

    # 2. -O3: the defaults, and forced OpenMP decisions

    def level(self, source: Path, flags: list[str], forced: dict | None) -> LevelRow:
        flags = flags + (["-fopenmp"] if uses_openmp(source) else [])
        tag = "forced" if forced else "defaults"
        record = self.work / f"{source.stem}.{tag}.record.jsonl"
        if forced:
            # the forced compile is the recorded one (record changes no object)
            env = self.env(MIRECC_RECORD=str(record), **forced)
            objs, times, same_object = self.compile_pair(source, flags, tag, env)
        else:
            # timed as a user's build runs it (nothing recorded), then once more
            # recording the heads' decisions; every object is compared
            objs, times, same_object = self.compile_pair(source, flags, tag, self.env())
            recorded = self.work / f"{source.stem}.{tag}.recorded.o"
            _timed([self.mirecc, *flags, "-c", str(source), "-o", str(recorded)],
                   env=self.env(MIRECC_RECORD=str(record)))
            same_object = same_object and recorded.read_bytes() == objs["clang"].read_bytes()
        decisions = read_decisions(record)
        if forced and "1" in (forced.get("MIRECC_ADAPT_OPENMP"),
                              forced.get("MIRECC_ADAPT_LOOPS")):
            return self.adapted(source, flags, objs, times, same_object, decisions, forced)
        row = LevelRow(source.stem, " ".join(f"{k}={v}" for k, v in forced.items())
                       if forced else "defaults", times["clang"], times["mirecc"],
                       same_object, True, decisions=decisions)
        if not same_object:
            bins = {side: self.link(obj, flags) for side, obj in objs.items()}
            outputs, runs = _run_pair(bins, self.run_repeats, self.progress)
            row.same_output = outputs["clang"] == outputs["mirecc"]
            row.run_clang_s, row.run_mirecc_s = runs["clang"], runs["mirecc"]
        self.progress()
        return row

    def adapted(self, source, flags, objs, times, same_object, decisions, forced) -> LevelRow:
        """The adapted program (its link through mirecc adds the runtime)
        against clang's: ``ADAPTED_RUNS`` runs, sides alternating, every
        output compared; the adapted runs share one verdict store, empty
        before the first (as a user's successive runs do)."""
        from mirecc.runtime.store import read_store  # lazy: mire's parser imports this module

        store = self.work / f"{source.stem}.adapt-store.txt"
        env = self.env(**forced, MIRECC_ADAPT_STORE=str(store))
        plain = self.link(objs["clang"], flags)
        exe = self.link(objs["mirecc"], flags, self.mirecc, env)
        reference = _timed([str(plain)])[1].stdout
        row = LevelRow(source.stem, " ".join(f"{k}={v}" for k, v in forced.items()),
                       times["clang"], times["mirecc"], same_object, True,
                       decisions=decisions, adapted=True)
        for r in range(ADAPTED_RUNS):
            for side in _order(r):
                if side == "clang":
                    row.run_clang_s.append(_timed([str(plain)])[0])
                else:
                    t, proc = _timed([str(exe)], env=env)
                    row.run_mirecc_s.append(t)
                    row.same_output &= proc.stdout == reference
            if r % 4 == 3:
                self.progress()
        if not store.exists():
            # the runtime writes a store only when a site ran
            row.verdicts = ["none: no site ran (nothing was compiled in versions or regions)"]
            return row
        try:
            row.verdicts = [f"{c.name}: {c.best if c.phase == 1 else 'exploring'} "
                            f"({c.tried} of {len(c.arms) - 1} tried"
                            + (f", kept after {c.decided_runs} runs" if c.phase == 1 else "")
                            + ")" for c in read_store(store)]
        except (OSError, ValueError) as exc:
            row.verdicts = [f"no store ({exc})"]
        return row

    # 3. one short mire tune

    def tune(self, source: Path, flags: list[str], budget: int) -> TuneResult:
        result = TuneResult(source.stem, budget, TUNE_REPEATS)
        where = self.work / "tune"
        where.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, where / source.name)
        name = source.stem
        omp = ["-fopenmp"] if uses_openmp(source) else []
        cflags = " ".join(shlex.quote(f) for f in [*flags, *omp])
        link = " ".join(shlex.quote(f) for f in omp)

        def build(obj: str, exe: str) -> str:
            return (f"{shlex.quote(self.mirecc)} {cflags} -c {name}.c -o {obj} && "
                    f"{shlex.quote(self.clang)} {link} {obj} -o {exe} -lm")

        profile = where / f"{name}.profile"
        mire = str(Path(self.mirecc).with_name("mire"))
        if not Path(mire).is_file():
            mire = shutil.which("mire") or mire
        started = time.perf_counter()
        proc = subprocess.run([mire, "tune", "--build", build(f"{name}.o", name),
                               "--run", f"./{name}", "--artifact", name,
                               "--budget", str(budget), "--repeats", str(TUNE_REPEATS),
                               "--work", "w", "--profile", str(profile)],
                              cwd=where, capture_output=True, text=True, env=self.env())
        result.seconds = time.perf_counter() - started
        result.log = [line.removeprefix("mire tune: ").replace(str(where), "<work>")
                      for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        self.progress()
        if proc.returncode != 0:
            result.error = f"mire tune failed ({proc.returncode})"
            return result
        try:
            result.tried = len(json.loads((where / "w" / "state.json").read_text())["tried"])
        except (OSError, ValueError, KeyError):
            pass
        result.kept = [line.strip() for line in profile.read_text().splitlines()
                       if line.strip() and not line.startswith("#")]
        # apart from the tune's own runs: the untuned build (the defaults) and
        # the tuned one (the profile applied), re-measured alternating
        for exe, env in ((f"{name}.untuned", self.env()),
                         (f"{name}.tuned", self.env(MIRECC_PROFILE=str(profile)))):
            obj = f"{exe}.o"
            built = subprocess.run(build(obj, exe), shell=True, cwd=where, env=env,
                                   capture_output=True, text=True)
            if built.returncode != 0:
                result.error = f"the {exe} build failed: {built.stderr[-300:].strip()}"
                return result
        bins = {"clang": where / f"{name}.untuned", "mirecc": where / f"{name}.tuned"}
        result.same_binary = bins["clang"].read_bytes() == bins["mirecc"].read_bytes()
        if not result.same_binary:
            outputs, runs = _run_pair(bins, self.run_repeats, self.progress)
            result.same_output = outputs["clang"] == outputs["mirecc"]
            result.run_untuned_s, result.run_tuned_s = runs["clang"], runs["mirecc"]
        return result


# ------------------------------------------------------------------ tables

def size_table(rows: list[SizeRow], size_flags: list[str], k: object, best_k: int | None,
               compile_repeats: int, budget: object = "?") -> list[str]:
    best_head = (f"best known (all {best_k})" if best_k else "best known")
    lines = [
        f"## 1. Code size at {' '.join(size_flags)} (on by default: size_search = {k}, "
        f"size_budget = {budget})",
        "",
        f"Loadable bytes: every allocated section of the object (code, data, unwind "
        f"tables: what the program occupies in memory), the measure mirecc minimises. "
        f"Never larger: mirecc's object has at most clang's bytes. Same output: both "
        f"binaries linked and run once, stdout compared (the same binary: not run twice). "
        f"Compile: a first build (MIRECC_CACHE=0: every candidate built), ms as median "
        f"(min-max) of {compile_repeats}. "
        + (f"Best known: the smallest object with all {best_k} candidates of the "
           f"library built (MIRECC_SIZE_SEARCH={best_k}, a budget for all), not the "
           f"default. A TU with less than 1024 bytes of .text is never searched (the "
           f"task's gate): its object is clang's at every K."
           if best_k else "Best known: not measured."),
        "",
        f"| program | clang bytes | mirecc bytes | saved | never larger | {best_head} "
        f"| same output | compile clang | compile mirecc | compile ratio |",
        "|---|---:|---:|---:|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        saved = (f"{r.saved} ({r.saved / r.loadable_clang:.1%})" if r.saved
                 else "0 (clang's own object kept)" if r.same_object else "0")
        best = "not measured" if r.best_known is None else \
            f"{r.best_known} ({(r.loadable_clang - r.best_known) / r.loadable_clang:.1%})"
        output = ("same binary" if r.same_binary else "yes") if r.same_output else "NO"
        lines.append(f"| {r.program} | {r.loadable_clang} | {r.loadable_mirecc} | {saved} | "
                     f"{'yes' if r.never_larger else 'NO: LARGER'} | {best} | {output} | "
                     f"{_spread(r.compile_clang_s)} | {_spread(r.compile_mirecc_s)} | "
                     f"{r.compile_ratio:.1f}x |")
    total_c = sum(r.loadable_clang for r in rows)
    total_m = sum(r.loadable_mirecc for r in rows)
    bests = [r.best_known for r in rows if r.best_known is not None]
    best_total = (f"{sum(bests)} ({(total_c - sum(bests)) / total_c:.1%})"
                  if len(bests) == len(rows) and rows else "not measured")
    lines.append(f"| **total** | {total_c} | {total_m} | {total_c - total_m} "
                 f"({(total_c - total_m) / max(total_c, 1):.1%}) | "
                 f"{sum(r.never_larger for r in rows)}/{len(rows)} | {best_total} | "
                 f"{sum(r.same_output for r in rows)}/{len(rows)} | | | "
                 f"{geomean([r.compile_ratio for r in rows]):.1f}x geomean |")
    smaller = sum(r.saved > 0 for r in rows)
    lines += ["", (f"mirecc's object is smaller for {smaller} of {len(rows)} programs and never "
                   f"larger" if all(r.never_larger for r in rows) else
                   f"mirecc's object is LARGER for "
                   f"{', '.join(r.program for r in rows if not r.never_larger)}")
              + ("" if smaller else "; nothing pays at this level on these programs")
              + "; the price is compile time on a first build."]
    return lines


def library_table(row: LibraryRow | None, size_flags: list[str], best_k: int | None,
                  why_not: str = "") -> list[str]:
    flags = " ".join(size_flags)
    lines = [f"### A real library: zlib at {flags}", ""]
    if row is None:
        return lines + [f"Not built: {why_not}"]
    lines += [
        f"Debian's {row.name}, `CFLAGS={flags} ./configure && make -j{os.cpu_count()}` with "
        f"CC=clang and CC=mirecc (an empty cache: a first build), once each; what ships: "
        f"the shared library and the programs, loadable bytes (every allocated section of "
        f"the linked file). "
        + (f"Best known: mirecc with all {best_k} candidates of the library built for every "
           f"searched TU." if best_k else "Best known: not measured."), "",
        "| linked file | clang bytes | mirecc bytes | saved | never larger | best known |",
        "|---|---:|---:|---:|---|---:|"]
    for name, (c, m, b) in row.shipped.items():
        best = "not measured" if b is None else f"{b} ({(c - b) / c:.2%})"
        lines.append(f"| {name} | {c} | {m} | {c - m} ({(c - m) / c:.2%}) | "
                     f"{'yes' if m <= c else 'NO: LARGER'} | {best} |")
    best_s = (f", with all candidates {row.build_best_s:.1f} s"
              if row.build_best_s is not None else "")
    lines += ["", f"Build (configure and make, wall): clang {row.build_clang_s:.1f} s, mirecc "
                  f"{row.build_mirecc_s:.1f} s ({row.build_mirecc_s / row.build_clang_s:.2f}x; "
                  f"one build each: this machine's timings move by about 15%){best_s}; "
                  f"candidates built for {row.searched} TUs. `make test`: clang "
                  f"{row.tests_clang}, mirecc {row.tests_mirecc}."]
    return lines


def level_table(rows: list[LevelRow], flags: list[str], defaults_sentence: str,
                compile_repeats: int, run_repeats: int, has_openmp: bool) -> list[str]:
    lines = [
        f"## 2. {' '.join(flags)} with the defaults, and OpenMP regions and loops adapted "
        f"at run time",
        "",
        defaults_sentence,
        "",
        f"Defaults: mirecc as a build runs it (nothing recorded), compiled "
        f"{compile_repeats} times and recorded once more (MIRECC_RECORD, to show what "
        f"the heads decided); every one of its objects is compared with clang's. "
        f"Decided/applied: decisions that differ from the compiler's own choice / of "
        f"those, applied. Runs: ms as median (min-max) of {run_repeats} after one "
        f"warm-up, sides alternating; the same object links to the same binary: "
        f"1.000x, not timed.",
        "",
        "| program | settings | decided/applied | same object | same output | "
        "compile clang | compile mirecc | compile ratio | run clang | run mirecc | speedup |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        same = "yes" if r.same_object else ("no (applied)" if r.applied else "NO")
        output = ("same binary" if r.same_object else "yes") if r.same_output else "NO"
        lines.append(f"| {r.program} | {r.setting} | {decided_text(r.decisions)} | {same} | "
                     f"{output} | {_spread(r.compile_clang_s)} | "
                     f"{_spread(r.compile_mirecc_s)} | {r.compile_ratio:.2f}x | "
                     f"{_spread(r.run_clang_s)} | {_spread(r.run_mirecc_s)} | "
                     f"{r.speedup:.3f}x |")
    defaults = [r for r in rows if r.setting == "defaults"]
    forced = [r for r in rows if r.setting != "defaults"]
    identical = sum(r.same_object for r in defaults)
    applied = sum(r.applied for r in defaults)
    lines += ["", f"With the defaults: {identical} of {len(defaults)} objects are clang's "
                  f"byte for byte, {applied} decision(s) applied"
                  + (": nothing pays at this level, every program runs at 1.000x by "
                     "construction; what mirecc costs here is compile time (geomean "
                     f"{geomean([r.compile_ratio for r in defaults]):.2f}x)."
                     if identical == len(defaults) and not applied else ".")]
    for r in forced:
        if r.adapted:
            what = ("its functions whose loops a head expects to gain are compiled in "
                    "versions (LLVM's, the loop-vectorize head's best factors, and for a "
                    "loop nest the loop-nests head's Polly schedule); the program "
                    "linked by mirecc carries the runtime, which tries the versions against "
                    "LLVM's and keeps what measures faster (a function called once per "
                    "process: one version per run)" if "ADAPT_LOOPS" in r.setting else
                    "its parallel regions are adaptive sites; the program linked by mirecc "
                    "carries the runtime, which tries the OpenMP head's candidates against "
                    "the program's own configuration and keeps what measures faster (a region"
                    " that runs once per process: one candidate per run)")
            lines.append(
                f"Adapted ({r.setting}) on {r.program}: {what}. "
                f"{len(r.run_mirecc_s)} runs from an empty store, each "
                f"beside one of clang's, alternating: first run {r.first:.3f}x, steady state"
                f" (median of the second half) {r.speedup:.3f}x, slowest run {r.worst:.3f}x "
                f"clang's median; outputs {'the same' if r.same_output else 'DIFFERENT'}. "
                f"Verdicts: {'; '.join(r.verdicts) or 'none'}.")
            continue
        made = sum(m for m, _ in r.decisions.values())
        if not r.applied:
            what = (f"the heads decided {made} thing(s) and applied none" if made else
                    "the OpenMP head decided nothing (no configuration passed its gate: "
                    "the runtime's default stays)")
            lines.append(f"Forced ({r.setting}) on {r.program}: {what}; "
                         + ("the same binary, 1.000x: nothing pays." if r.same_object
                            else f"the object differs, run {r.speedup:.3f}x."))
        else:
            lines.append(f"Forced ({r.setting}) on {r.program}: {r.applied} decision(s) "
                         f"applied, run {r.speedup:.3f}x clang's "
                         f"(output {'the same' if r.same_output else 'DIFFERENT'}).")
    if not has_openmp:
        lines.append("No program with an OpenMP pragma among these: adapted OpenMP "
                     "not shown.")
    return lines


def tune_table(t: TuneResult | None, run_repeats: int) -> list[str]:
    if t is None:
        return ["## 3. mire tune", "", "Not run (--tune-program none)."]
    lines = [
        f"## 3. mire tune on {t.program} (budget {t.budget}, {t.repeats} runs per "
        f"candidate)",
        "",
        f"`mire tune --build 'mirecc ... && clang ...' --run ./{t.program} --artifact "
        f"{t.program} --budget {t.budget} --repeats {t.repeats}`: the heads rank each "
        f"site's candidates, the program's own runs decide, and a decision is kept only "
        f"when faster beyond the noise and re-checked. Then, apart from the tune's runs, "
        f"the untuned build (the defaults) and the tuned one (MIRECC_PROFILE) run "
        f"{run_repeats} times each after one warm-up, alternating; ms as median (min-max).",
        "",
    ]
    if t.error:
        lines += [f"FAILED: {t.error}", ""] + [f"    {line}" for line in t.log[-8:]]
        return lines
    kept = "<br>".join(" ".join(entry.split()[i] for i in (0, 2, 4)) +
                       (f" ({entry.split('#', 1)[1].strip()})" if "#" in entry else "")
                       for entry in t.kept) or "nothing kept"
    output = ("same binary" if t.same_binary else "yes") if t.same_output else "NO"
    lines += [
        "| program | tune time | candidates tried | kept (task site value) | same output "
        "| run untuned | run tuned | speedup |",
        "|---|---:|---:|---|---|---:|---:|---:|",
        f"| {t.program} | {t.seconds:.1f} s | {t.tried} | {kept} | {output} | "
        f"{_spread(t.run_untuned_s)} | {_spread(t.run_tuned_s)} | {t.speedup:.3f}x |",
        "",
        "The tune's log:",
        "",
    ] + [f"    {line}" for line in t.log]
    if not t.kept:
        lines += ["", ("Nothing kept: " + (
            f"none of the {t.tried} candidate(s) tried beat the untuned build beyond the "
            f"noise" if t.tried else "the budget left no room for a candidate")
            + ", so the tuned build is the untuned one (1.000x by construction).")]
    return lines


def markdown(machine: dict, version: str, wall_s: float, sections: list[list[str]],
             command: str = "mire bench") -> str:
    head = [
        "# mire bench: what mirecc does to the bundled programs",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['compiler']}; "
        f"mirecc {version}; `{command}` took {wall_s:.0f} s.",
        "",
    ]
    body = []
    for section in sections:
        body += section + [""]
    return "\n".join(head + body).rstrip() + "\n"


def plot(path: Path, sizes: list[SizeRow], levels: list[LevelRow], tune: TuneResult | None,
         title: str = "-O3", library: LibraryRow | None = None) -> bool:
    """Bytes saved per program (default and best known), per linked file of
    the library, and the run-time speedups; False without matplotlib."""
    from mirecc.util.plots import pyplot, save  # lazy: matplotlib, ~0.5 s, bench only

    plt = pyplot()
    if plt is None:
        return False
    if library is not None:
        fig, (left, middle, right) = plt.subplots(1, 3, figsize=(17, 4.2))
        names = list(library.shipped)
        xs = range(len(names))
        middle.bar([x - 0.2 for x in xs], [100 * (c - m) / c for c, m, _ in
                                           library.shipped.values()],
                   width=0.4, label="mirecc -Oz (default)", color="tab:blue")
        middle.bar([x + 0.2 for x in xs], [100 * (c - b) / c if b is not None else 0
                                           for c, _, b in library.shipped.values()],
                   width=0.4, label="best known (all candidates)", color="tab:gray")
        middle.axhline(0, color="black", linewidth=0.8)
        middle.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
        middle.set_ylabel("% of loadable bytes saved vs clang -Oz")
        ratio = library.build_mirecc_s / library.build_clang_s
        middle.set_title(f"zlib as shipped (build {ratio:.1f}x clang's)")
        middle.legend(fontsize=8)
    else:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    names = [r.program for r in sizes]
    xs = range(len(names))
    left.bar([x - 0.2 for x in xs], [r.saved for r in sizes], width=0.4,
             label="mirecc -Oz (default)", color="tab:blue")
    if any(r.best_known is not None for r in sizes):
        left.bar([x + 0.2 for x in xs],
                 [r.loadable_clang - r.best_known if r.best_known is not None else 0
                  for r in sizes], width=0.4, label="best known (all candidates)",
                 color="tab:gray")
    left.set_xticks(list(xs), names, rotation=30, ha="right")
    left.set_ylabel("loadable bytes saved vs clang -Oz")
    left.set_title("Code size (never larger)")
    left.legend()
    bars = []
    for r in levels:
        if r.adapted:
            bars += [(f"{r.program}\nadapted, 1st run", r.first, False),
                     (f"{r.program}\nadapted, steady", r.speedup, False)]
        else:
            bars.append((f"{r.program}\n{'defaults' if r.setting == 'defaults' else 'forced'}",
                         r.speedup, r.same_object))
    if tune is not None and not tune.error:
        bars.append((f"{tune.program}\nmire tune", tune.speedup, tune.same_binary))
    right.bar(range(len(bars)), [b[1] for b in bars],
              color=["tab:gray" if b[2] else "tab:green" for b in bars])
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=30, ha="right",
                     fontsize=7)
    right.set_ylabel("run-time speedup vs clang (grey: same binary)")
    right.set_title(f"{title}: defaults, adapted OpenMP, mire tune")
    low = min([b[1] for b in bars] + [1.0])
    high = max([b[1] for b in bars] + [1.0])
    right.set_ylim(min(0.9, low - 0.05), max(1.1, high + 0.05))
    save(fig, path)
    return True


# ------------------------------------------------------------------ the command

def run_bench(programs: Path, out: Path, flags: list[str], compile_repeats: int,
              run_repeats: int, clang: str | None = None, size_flags: list[str] | None = None,
              best_known: int | None = -1, tune_program: str | None = None,
              tune_budget: int = DEFAULT_TUNE_BUDGET, library: str | None = None) -> int:
    """The three parts on the ``*.c`` of ``programs``; tables to stdout and
    ``out``/bench.md, data to bench.json, the plot to bench.png.
    ``best_known``: candidates built for the best-known size (-1: the whole
    library, 0: not measured); ``tune_program``: the program to tune (None:
    tri_omp when present, else the first; "none": no tune); ``library``: the
    zlib source tree of the code-size part's library (None: the one set-up
    fetched, :func:`fetched_library`; "none": not built)."""
    # lazy: tqdm (~70 ms) and the compiler's modules: mire's parser imports this module
    from tqdm import tqdm
    from mirecc.frontend.compiler import find_compiler
    from mirecc.taskapi.config import load_config
    from mirecc.frontend.toolchain import installed_driver

    started = time.perf_counter()
    sources = sorted(programs.glob("*.c"))
    if not sources:
        print(f"mire bench: no .c programs in {programs}", file=sys.stderr)
        return 2
    size_flags = size_flags or ["-Oz"]
    tune_source = None
    if tune_program != "none":
        wanted = tune_program or DEFAULT_TUNE_PROGRAM
        tune_source = next((s for s in sources if s.stem == wanted), None)
        if tune_source is None and tune_program:
            print(f"mire bench: --tune-program {tune_program}: no {tune_program}.c in "
                  f"{programs}", file=sys.stderr)
            return 2
        tune_source = tune_source or sources[0]
    clang = clang or find_compiler(load_config(), cxx=False)
    os.environ.setdefault("MIRECC_CC", clang)  # compare against the very same clang
    mirecc_driver = installed_driver("mirecc")
    machine = machine_description(clang)
    best_k = library_size(clang) if best_known == -1 else (best_known or None)
    k = getattr(load_config(), "size_search", "?")
    openmp_sources = [s for s in sources if uses_openmp(s)]
    steps = len(sources) * 2 + len(openmp_sources) + (tune_source is not None)
    steps += (len(sources) * 2 + len(openmp_sources)) * compile_repeats
    # loops adapted at the levels the loop-vectorize head decides at
    adapt_loops = any(f in ("-O2", "-O3", "-Ofast") for f in flags)
    steps += (len(sources) if adapt_loops else len(openmp_sources)) * (ADAPTED_RUNS // 4)
    library_tree, why_not = None, "--size-project none"
    if library != "none":
        library_tree = Path(library) if library else fetched_library()
        why_not = ("no zlib source here (scripts/setup.sh fetches it into .work/src/zlib)"
                   if library_tree is None else "")
        if library_tree is not None and not (library_tree / "configure").is_file():
            print(f"mire bench: --size-project {library_tree}: no configure script there",
                  file=sys.stderr)
            return 2
    steps += (2 + bool(best_k)) if library_tree is not None else 0
    sizes, levels, tuned = [], [], None
    _, defaults_sentence = defaults_text(flags)
    # disable=None: no progress bar when stderr is not a terminal (CI logs)
    with tempfile.TemporaryDirectory(prefix="mire-bench-") as tmp, \
            tqdm(total=steps, desc="mire bench", unit="step", file=sys.stderr,
                 disable=None) as bar:
        bench = Bench(clang, mirecc_driver, Path(tmp), compile_repeats, run_repeats,
                      lambda: bar.update(1))
        # warm-up: the first ML-path compile starts the pipeline server
        _timed([mirecc_driver, *flags, "-c", str(sources[0]), "-o", str(Path(tmp) / "warm.o")],
               env=bench.env(MIRECC_RECORD=str(Path(tmp) / "warm.jsonl")))
        for source in sources:
            bar.set_postfix_str(f"size {source.stem}")
            sizes.append(bench.size(source, size_flags, best_k))
        library_row = None
        if library_tree is not None:
            bar.set_postfix_str(f"size {library_tree.name}")
            try:
                library_row = bench.library(library_tree, size_flags, best_k)
            except RuntimeError as exc:     # its build failed: said in the page
                why_not = " ".join(str(exc).split())[:300]
        for source in sources:
            bar.set_postfix_str(f"{' '.join(flags)} {source.stem}")
            levels.append(bench.level(source, flags, None))
            if source in openmp_sources:
                levels.append(bench.level(source, flags, OPENMP_ADAPTED))
            elif adapt_loops:
                levels.append(bench.level(source, flags, LOOPS_ADAPTED))
        if tune_source is not None:
            bar.set_postfix_str(f"tune {tune_source.stem}")
            tuned = bench.tune(tune_source, flags, tune_budget)
    wall_s = time.perf_counter() - started
    sections = [
        size_table(sizes, size_flags, k, best_k, compile_repeats,
                   getattr(load_config(), "size_budget", "?"))
        + [""] + library_table(library_row, size_flags, best_k, why_not),
        level_table(levels, flags, defaults_sentence, compile_repeats, run_repeats,
                    bool(openmp_sources)),
        tune_table(tuned, run_repeats),
    ]
    version = getattr(mirecc, "__version__", "?")
    command = (shlex.join(["mire", *sys.argv[1:]])
               if Path(sys.argv[0]).name == "mire" else "mire bench")
    table = markdown(machine, version, wall_s, sections, command)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.md").write_text(table)
    (out / "bench.json").write_text(json.dumps({
        "machine": machine, "mirecc": version, "wall_s": wall_s, "flags": flags,
        "size_flags": size_flags, "size_search": k, "best_known_candidates": best_k,
        "compile_repeats": compile_repeats, "run_repeats": run_repeats,
        "defaults": defaults_sentence,
        "size": [asdict(r) | {"saved": r.saved, "never_larger": r.never_larger,
                              "compile_ratio": r.compile_ratio} for r in sizes],
        "levels": [asdict(r) | {"compile_ratio": r.compile_ratio, "speedup": r.speedup,
                                "applied": r.applied} | ({"first": r.first, "worst": r.worst}
                                                         if r.adapted else {})
                   for r in levels],
        "tune": None if tuned is None else asdict(tuned) | {"speedup": tuned.speedup},
        "library": None if library_row is None else asdict(library_row),
    }, indent=2))
    plotted = plot(out / "bench.png", sizes, levels, tuned, " ".join(flags), library_row)
    print(table)
    print(f"saved {out / 'bench.md'}, {out / 'bench.json'}"
          + (f" and {out / 'bench.png'}" if plotted else " (no matplotlib: no plot)"))
    bad = ([f"{r.program} (-Oz)" for r in sizes if not r.correct]
           + [f"{r.program} ({r.setting})" for r in levels if not r.correct]
           + ([f"{tuned.program} (tune)"] if tuned is not None and not tuned.correct else [])
           + ([f"{library_row.name} (library)"] if library_row is not None
              and not library_row.correct else []))
    if bad:
        print(f"mire bench: results differ from clang (or are larger) for: {', '.join(bad)}",
              file=sys.stderr)
        return 1
    return 0
