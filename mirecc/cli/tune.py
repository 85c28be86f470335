"""``mire tune``: the heads rank, the user's own benchmark decides, and a
decisions profile keeps what won (:mod:`mirecc.taskapi.profile`).

    mire tune --build "make CC=mirecc" --clean "make clean" --run "./bench" \
              [--artifact ./bench] [--budget 20] [--repeats 3]

1. The build runs once with mirecc recording every TU's decisions and
   candidates (``MIRECC_RECORD``) and keeping its IR (``MIRECC_CAPTURE_DIR``;
   ``mirecc-nvcc`` records its CUDA sources' kernels and keeps no IR), and
   the run is timed ``--repeats`` times: the baseline (the heads' decisions
   only recorded, so the binary is the compiler's own).
2. Decision sites: every recorded decision whose task takes profile
   entries (``Task.profile_kind()``) applied by the front end that recorded it,
   made into a site by the task's profile kind: through ``mirecc`` the
   loops, loop nests and OpenMP parallel regions a head ranked; through
   ``mirecc-nvcc`` (CUDA sources: ``--build "make NVCC=mirecc-nvcc"``) each
   kernel whose block shape is tunable (``<mirecc/launch.h>`` or
   PolyBench-ACC's ``DIM_THREAD_BLOCK`` defines), its candidates the head's
   ranked shapes or the kind's fallback shapes, the source's own left out
   (:mod:`mirecc.tasks.cuda_block.profile`; the kernel's digest comes in
   its record, no device IR is kept).  Each site's candidates come with
   the head's predicted gain (``gains``: log speedup over the compiler's
   own; 0 where the head predicts none, as for a fallback list).
   Each site gets a share of the run.  Where ``perf`` can sample the run
   (``--time-profile``; not where every site is a kernel), the baseline run
   is sampled once and a site's share is its function's share of the
   run's samples; sites in functions under ``--min-share`` are not tried.
   Without ``perf`` (or where it finds none of the sites' functions, e.g.
   all inlined away), nesting depth stands for the function's share: a
   function weighs ``DEPTH_WEIGHT ** d``, d the depth of its deepest site
   (each loop taken to run ten times the one around it), and its share is
   that over all the sites' functions' weights.  A kernel's time is the GPU's, which neither ``perf`` nor loop
   depth can weigh: the n kernels weigh 1/n each (of equal weight, the
   whole run between them) and none is left out for its share.
   The candidates of all sites and tasks then go in one order.  First
   every candidate the head predicts to make its site faster by more than
   ``--threshold`` (what a kept candidate must gain: a predicted 1.002x
   could not be told from the noise), by the share of the run it is
   predicted to save (share x (1 - 1/predicted speedup)), largest first,
   so a cool site's promising candidate goes before the hottest site's
   unpromising one, and between two promising ones the heat and the gain
   together decide.  At the same saving a kind's ``order`` goes first (a
   parallel region before the loops that share its time: its
   configuration distributes all their work; then a function's loop-nest
   schedule: it restructures all its loops), then the deeper site.  Then the
   candidates with no gain predicted, site by site, hottest first (the
   kind's ``order``, the deeper site and the head's best score breaking
   ties), each site's in the head's order.  A candidate at a site where
   an earlier one was kept is measured on top of it (it replaces that
   site's kept value, against the best so far).
3. A candidate: the profile of what was kept so far plus this candidate is
   written, and the sources whose decisions differ from the last build's
   are touched (their mtime set to now: make cannot see a profile change,
   so this is how a plain ``make`` rebuilds exactly the changed TUs); the
   project is rebuilt and the run timed ``--repeats`` times.  ``--clean``
   runs once before the baseline, whose build must compile every TU.  With ``--artifact`` (the
   files the build makes that the run uses, e.g. the binary), the best
   build's artifacts are kept aside and the runs alternate best, candidate,
   candidate, best, ... in place, so that both are timed under the same
   machine load, and a candidate whose files are byte for byte the best's
   (the compiler did not act on the decision) is not timed at all;
   ``--pin CPU`` runs them on one CPU.  A candidate is kept
   only when its output is the baseline's byte for byte and both its median
   and its minimum beat the best's by more than ``--threshold`` and by more
   than the best's own spread (max - min over median: the noise), and its
   slowest run beats the best's median by more than ``--threshold``.  With
   ``--artifact``, the decisions kept at the end are timed once more against
   the baseline build, alternating, in fresh runs (2 x ``--repeats`` runs
   beyond the budget): if they no longer win, nothing is kept.
4. Every build and every run (timed or sampled) counts against ``--budget``;
   progress is printed; the state is saved after each candidate in
   ``--work``, so an interrupted tune resumes where it stopped.
5. The result is ``--profile`` (default ``mirecc.profile``), with each kept
   decision's measured speedup as its comment; builds apply it with
   ``MIRECC_PROFILE=mirecc.profile`` (or ``profile:`` in ``.mirecc.yaml``).
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mirecc.ir.text import disassemble
from mirecc.learn.keep import KEEP_THRESHOLD, beats
from mirecc.taskapi.profile import FORMAT_LINE, format_entry, function_digests, kinds
from mirecc.util.fsutil import atomic_write_bytes

#: the saved state's format: a state of another format is started afresh
STATE_FORMAT = 3
#: without a time profile, a site one loop deeper is taken to run this many
#: times longer (nesting depth stands for the share of the run)
DEPTH_WEIGHT = 10.0


class TuneError(Exception):
    """The build or the run cannot be used; ``str()`` says which and why."""


class _BudgetSpent(Exception):
    pass


def add_arguments(p) -> None:
    p.add_argument("--build", required=True,
                   help="shell command that rebuilds the project through mirecc "
                        "(e.g. 'make -B CC=mirecc')")
    p.add_argument("--run", required=True, help="shell command that runs the benchmark")
    p.add_argument("--clean", default="",
                   help="shell command run once before the baseline build so that it "
                        "compiles every TU (e.g. 'make clean')")
    p.add_argument("--budget", type=int, default=20,
                   help="builds plus timed runs to spend (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs per build (default: %(default)s)")
    p.add_argument("--threshold", type=float, default=KEEP_THRESHOLD,
                   help="least relative gain a change must show (default: %(default)s)")
    p.add_argument("--profile", default="mirecc.profile",
                   help="the profile to write (default: %(default)s)")
    p.add_argument("--work", default=".mirecc-tune",
                   help="state, records and IR of the tune (default: %(default)s)")
    p.add_argument("--time-profile", choices=("auto", "perf", "none"), default="auto",
                   help="how to find where the run spends its time: sample it with perf "
                        "(perf: required; auto: when perf works), or none (loop depth "
                        "stands for it) (default: %(default)s)")
    p.add_argument("--min-share", type=float, default=0.01,
                   help="with a time profile, skip loops whose function takes less than "
                        "this share of the run (default: %(default)s)")
    p.add_argument("--artifact", action="append", default=[],
                   help="a file the build makes and the run uses (repeatable): the runs "
                        "then alternate between the best build and the candidate")
    p.add_argument("--pin", type=int, default=None, metavar="CPU",
                   help="run the benchmark on this CPU only")
    p.add_argument("--seed-adapt", action="store_true",
                   help="also write the OpenMP regions kept as this machine's verdicts in "
                        "the adaptive runtime's store (as mire adapt --seed): programs "
                        "built with adapt_openmp start from them")


# ------------------------------------------------------------------ one build, one run

def _build(command: str, work: Path, profile: Path | None) -> list[dict]:
    """Run the build with mirecc recording; the TU records it wrote."""
    record = work / "record.jsonl"
    record.unlink(missing_ok=True)
    env = {**os.environ, "MIRECC_RECORD": str(record),
           "MIRECC_CAPTURE_DIR": str(work / "ir")}
    env.pop("MIRECC_PROFILE", None)
    if profile is not None:
        env["MIRECC_PROFILE"] = str(profile)
    proc = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TuneError(f"the build failed ({proc.returncode}): "
                        f"{(proc.stderr or proc.stdout)[-500:].strip()}")
    if not record.is_file():
        raise TuneError("the build compiled nothing through mirecc with optimisation "
                        "(no TU was recorded): use CC=mirecc / CXX=mirecc++ and -O2, "
                        "or mirecc-nvcc for CUDA sources")
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def _pinned(pin: int | None):
    """A preexec_fn that puts the child on CPU ``pin`` (None: no pinning)."""
    return (lambda: os.sched_setaffinity(0, {pin})) if pin is not None else None


def _run_once(command: str, pin: int | None) -> tuple[float, str]:
    """One timed run: wall seconds and its output."""
    start = time.perf_counter()
    proc = subprocess.run(command, shell=True, capture_output=True, preexec_fn=_pinned(pin))
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise TuneError(f"the run failed ({proc.returncode}): "
                        f"{proc.stderr.decode(errors='replace')[-300:].strip()}")
    return elapsed, proc.stdout.decode(errors="replace")


def _same_output(output: str | None, out: str) -> str:
    if output is not None and out != output:
        raise TuneError("the run's output differs between two runs of the same build: "
                        "it cannot tell a changed output from noise")
    return out


def _time_runs(command: str, repeats: int, pin: int | None = None) -> tuple[list[float], str]:
    """Wall times of ``repeats`` runs and their (identical) output."""
    times, output = [], None
    for _ in range(repeats):
        elapsed, out = _run_once(command, pin)
        output = _same_output(output, out)
        times.append(elapsed)
    return times, output


class Artifacts:
    """The files of ``--artifact``: the best build's copies are kept aside in
    ``work/best``, the candidate's in ``work/candidate``, and either set is
    put in place (copied over the build's files) before a run."""

    def __init__(self, paths: list[str], work: Path):
        self.paths = [Path(p).resolve() for p in paths]
        self.work = work

    def __bool__(self) -> bool:
        return bool(self.paths)

    def keep(self, which: str) -> None:
        """Copy the build's current files aside as ``which``."""
        for i, p in enumerate(self.paths):
            if not p.is_file():
                raise TuneError(f"--artifact {p}: the build did not make it")
            dest = self.work / which / f"{i}-{p.name}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)

    def same(self, a: str, b: str) -> bool:
        """Whether the two kept sets are byte for byte the same files."""
        return all((self.work / a / f"{i}-{p.name}").read_bytes()
                   == (self.work / b / f"{i}-{p.name}").read_bytes()
                   for i, p in enumerate(self.paths))

    def put(self, which: str) -> None:
        for i, p in enumerate(self.paths):
            tmp = p.with_name(f".{p.name}.mirecc-tune")
            shutil.copy2(self.work / which / f"{i}-{p.name}", tmp)
            os.replace(tmp, p)   # a running binary is not overwritten in place


def _time_alternating(command: str, repeats: int, artifacts: Artifacts, pin: int | None,
                      sides: tuple[str, str] = ("candidate", "best")
                      ) -> tuple[list[float], list[float], str, str]:
    """Runs of two kept builds (``sides``: the candidate and the best),
    alternated (B C C B B C ... so that neither always goes first):
    (candidate times, best times, candidate output, best output).  Leaves
    the best build in place."""
    candidate, best = sides
    times: dict[str, list[float]] = {best: [], candidate: []}
    outputs: dict[str, str | None] = {best: None, candidate: None}
    try:
        for r in range(repeats):
            for which in ((best, candidate) if r % 2 == 0 else (candidate, best)):
                artifacts.put(which)
                elapsed, out = _run_once(command, pin)
                outputs[which] = _same_output(outputs[which], out)
                times[which].append(elapsed)
    finally:
        artifacts.put("best")
    return times[candidate], times[best], outputs[candidate], outputs[best]


# ------------------------------------------------------------------ sites

_PERF_LINE = re.compile(r"^\s*([0-9.]+)%\s+\[[.k]\]\s+(\S+)")


def perf_works() -> bool:
    """Whether ``perf`` is installed and may sample a process here."""
    if not shutil.which("perf"):
        return False
    proc = subprocess.run(["perf", "stat", "-e", "cpu-clock", "-x,", "true"],
                          capture_output=True, text=True)
    return proc.returncode == 0


def function_shares(command: str, work: Path, pin: int | None = None) -> dict[str, float]:
    """Share of the run's samples per function (symbol as linked, not
    demangled), from one run of ``command`` under ``perf record`` (the
    cpu-clock software event: it needs no hardware counters)."""
    data = work / "perf.data"
    rec = subprocess.run(["perf", "record", "-q", "-F", "999", "-e", "cpu-clock", "-o",
                          str(data), "--", "sh", "-c", command],
                         capture_output=True, text=True, preexec_fn=_pinned(pin))
    if rec.returncode != 0:
        raise TuneError(f"perf record failed ({rec.returncode}): {rec.stderr[-300:].strip()}")
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                          "--no-demangle", "--sort", "sym", "-F", "overhead,sym"],
                         capture_output=True, text=True)
    if rep.returncode != 0:
        raise TuneError(f"perf report failed ({rep.returncode}): {rep.stderr[-300:].strip()}")
    return parse_perf_report(rep.stdout)


def parse_perf_report(text: str) -> dict[str, float]:
    """``perf report --stdio -F overhead,sym`` -> symbol: share (0..1)."""
    shares: dict[str, float] = {}
    for line in text.splitlines():
        m = _PERF_LINE.match(line)
        if m:
            shares[m.group(2)] = shares.get(m.group(2), 0.0) + float(m.group(1)) / 100
    return shares


def order_sites(sites: list[dict], shares: dict[str, float] | None, min_share: float
                ) -> tuple[list[dict], int]:
    """Each site's ``share`` of the run (``weighed``: how it was found), and
    the sites hottest first (then by their kind's ``order``: a parallel
    region before the loops that share its time; the deeper site, the
    head's best score, the name); with shares, those under ``min_share``
    are dropped (counted).  The share is the site's function's: in
    ``shares`` (perf's samples) where they hold any of the sites'
    functions, else by depth (a function weighs ``DEPTH_WEIGHT ** d``, d
    its deepest site's depth, over the sum of the functions' weights).  Sites
    the host's samples cannot weigh (``sampled`` false: CUDA kernels, whose
    time is the GPU's) are of equal weight, 1/n each of the n, and never
    dropped."""
    unseen = [s for s in sites if not s.get("sampled", True)]
    for s in unseen:
        s["share"], s["weighed"] = 1 / len(unseen), "equal"
    host = [s for s in sites if s.get("sampled", True)]
    dropped = 0
    if shares is not None and any(s["function"] in shares for s in host):
        for s in host:
            s["share"], s["weighed"] = shares.get(s["function"], 0.0), "perf"
        kept = [s for s in host if s["share"] >= min_share]
        dropped, host = len(host) - len(kept), kept
    elif host:
        deepest: dict[str, int] = {}
        for s in host:
            deepest[s["function"]] = max(deepest.get(s["function"], 0), s["depth"])
        top = max(deepest.values())     # weights relative to it: no overflow
        total = sum(DEPTH_WEIGHT ** (d - top) for d in deepest.values())
        for s in host:
            s["share"] = DEPTH_WEIGHT ** (deepest[s["function"]] - top) / total
            s["weighed"] = "depth"
    ordered = sorted(unseen + host, key=lambda s: (-s["share"], s.get("order", 1),
                                                   -s["depth"], -s["score"],
                                                   s.get("target", ""), s.get("source", "")))
    return ordered, dropped


def saving(share: float, gain: float) -> float:
    """The share of the run a candidate is predicted to save: its site's
    ``share`` times 1 - 1/speedup, the speedup e**``gain`` (a log speedup)."""
    return share * -math.expm1(-gain)


def order_candidates(sites: list[dict], threshold: float = KEEP_THRESHOLD
                     ) -> list[list[int]]:
    """The order the candidates are tried in, as [site, candidate] indices
    into ``sites`` (ordered by :func:`order_sites`): every candidate with a
    gain predicted by the share of the run it is predicted to save
    (:func:`saving`), largest first, a kind's ``order`` (a parallel region
    before the loops that share its time, then a function's loop-nest
    schedule) and the deeper site only breaking ties; then those with no gain predicted, site by site in
    ``sites``' order (hottest first), each in the head's order.  A gain is
    predicted where the candidate is predicted to make its site faster by
    more than ``threshold`` (what a kept candidate must gain, were the site
    the whole run): a predicted 1.002x could not be told from the noise."""
    promising, rest = [], []
    for i, s in enumerate(sites):
        gains = s.get("gains") or [0.0] * len(s["candidates"])
        for j, gain in enumerate(gains):
            if saving(1.0, gain) > threshold:
                promising.append((-saving(s["share"], gain), s.get("order", 1), -s["depth"],
                                  i, j))
            else:
                rest.append([i, j])
    return [[i, j] for *_, i, j in sorted(promising)] + rest


def _loop_depths(ir: Path) -> dict:
    """Loop id -> nesting depth of the TU's IR ({} when its graph cannot be
    built: its sites still count, at depth 1)."""
    # lazy: the graph builder and numpy (~150 ms), only where loop depth stands in for perf
    from mirecc.graph import GraphBuildError, build_graph_any
    from mirecc.graph.irinfo import graph_loops

    try:
        return {lp.id: lp.depth for lp in graph_loops(build_graph_any(ir))}
    except GraphBuildError:
        return {}


def sites_of(records: list[dict], work: Path) -> list[dict]:
    """The decision sites of the recorded TUs, weighed by depth (see
    :func:`order_sites`; with a time profile, order them again): {task,
    source (absolute), target, function, digest, candidates, gains, score,
    depth, order, share}, each made by its task's profile kind
    (``Task.profile_kind()``) from the head's ranked candidates (``gains``
    from :meth:`~mirecc.taskapi.profile.ProfileKind.gains` where the kind
    gives none).  A TU's kinds are those its front end applies (a
    record's ``front_end``: ``mirecc`` where it names none); the digests
    come from its captured IR, or, for a front end that captures none
    (``mirecc-nvcc``), from the decisions themselves."""
    sites = []
    for rec in records:
        front_end = rec.get("front_end", "mirecc")
        tunable = {name: k for name, k in kinds().items() if k.front_end == front_end}
        source = os.path.normpath(os.path.join(rec["cwd"], rec["source"]))
        decisions = [d for d in rec["decisions"] if d["task"] in tunable]
        if not decisions:
            continue
        if rec.get("ir_sha256"):
            ir = work / "ir" / "ir" / rec["ir_sha256"][:2] / f"{rec['ir_sha256']}.bc"
            if not ir.is_file():
                continue
            digests = function_digests(disassemble(ir.read_bytes(), str(ir)))
            loop_depths = functools.cache(functools.partial(_loop_depths, ir))
        else:
            digests = {tunable[d["task"]].function(d["target"]): d["digest"]
                       for d in decisions if d.get("digest")}
            loop_depths = dict
        for d in decisions:
            kind = tunable[d["task"]]
            site = kind.site(d, source, digests, loop_depths)
            if site is not None:
                if len(site.get("gains") or ()) != len(site["candidates"]):
                    site["gains"] = kind.gains(d, site)
                sites.append(site)
    return order_sites(sites, None, 0.0)[0]


# ------------------------------------------------------------------ the tune

def _touch_changed(before: list[dict], after: list[dict]) -> list[str]:
    """Set the mtime of every source whose profile entries differ between
    two builds' profiles to now, so that make rebuilds those TUs; returns them."""
    def entries(kept):
        out: dict[str, set] = {}
        for k in kept:
            out.setdefault(k["source"], set()).add(
                (k["task"], k["target"], json.dumps(k["value"], sort_keys=True)))
        return out
    old, new = entries(before), entries(after)
    changed = sorted(src for src in set(old) | set(new) if old.get(src) != new.get(src))
    for src in changed:
        try:
            os.utime(src)
        except OSError as exc:
            raise TuneError(f"cannot touch {src} so that it is rebuilt: {exc}") from None
    return changed


def _profile_text(kept: list[dict], where: Path) -> str:
    """The profile of ``kept`` to be written at ``where`` (sources relative to it)."""
    return "\n".join([FORMAT_LINE] + [
        format_entry(k["task"], os.path.relpath(k["source"], where.parent),
                     k["target"],
                     k["digest"], k["value"], k.get("comment", "")) for k in kept]) + "\n"


def _recheck(args, state: dict, artifacts: Artifacts, say) -> None:
    """The kept decisions against the baseline build, in fresh alternating
    runs: kept only if they still beat it (a gain made of lucky runs does
    not survive a second look)."""
    times, base, output, base_output = _time_alternating(
        args.run, args.repeats, artifacts, args.pin, sides=("best", "baseline"))
    state["rechecked"] = True
    if output == base_output == state["output"] and beats(times, base, args.threshold):
        gain = statistics.median(base) / statistics.median(times)
        say(f"re-check: the kept decisions run {gain:.3f}x the baseline in {args.repeats} "
            f"fresh alternating runs each; kept")
        state["gain"] = gain
        for entry in state["kept"]:
            entry["comment"] = (f"{gain:.3f}x the baseline's median with every kept "
                                f"decision, re-checked in {args.repeats} fresh runs")
        return
    say(f"re-check: median {statistics.median(times):.3f} s against the baseline's "
        f"{statistics.median(base):.3f} s in fresh runs, not faster beyond the noise; "
        f"nothing kept")
    state["kept"], state["gain"], state["best"] = [], 1.0, base
    artifacts.put("baseline")
    artifacts.keep("best")


def _time_profile(args, work: Path, say) -> dict[str, float] | None:
    """Per-function shares of the baseline run, or None (no perf, or none asked)."""
    if args.time_profile == "none":
        return None
    if not perf_works():
        if args.time_profile == "perf":
            raise TuneError("--time-profile perf: perf is not installed or may not sample "
                            "here (perf_event_paranoid)")
        say("perf is not available: loop depth stands for the share of the run")
        return None
    say("sampling the baseline run with perf")
    return function_shares(args.run, work, args.pin)


def run(args) -> int:
    if args.repeats < 2 or args.budget < 1:
        print("mire tune: --repeats must be at least 2 (a noise estimate) and --budget "
              "at least 1", file=sys.stderr)
        return 2
    work = Path(args.work).resolve()
    profile = Path(args.profile).resolve()
    state_file = work / "state.json"
    work.mkdir(parents=True, exist_ok=True)
    state = json.loads(state_file.read_text()) if state_file.is_file() else None
    say = lambda line: print(f"mire tune: {line}", file=sys.stderr, flush=True)  # noqa: E731

    def save() -> None:
        atomic_write_bytes(state_file, json.dumps(state, indent=1).encode())

    artifacts = Artifacts(args.artifact, work)
    try:
        if state is None or state.get("build") != args.build or state.get("run") != args.run \
                or state.get("format") != STATE_FORMAT:
            if args.clean:
                proc = subprocess.run(args.clean, shell=True, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise TuneError(f"--clean failed ({proc.returncode}): "
                                    f"{(proc.stderr or proc.stdout)[-300:].strip()}")
            say("baseline: building with the heads' decisions recorded only")
            records = _build(args.build, work, None)
            if artifacts:
                artifacts.keep("best")
                artifacts.keep("baseline")
            times, output = _time_runs(args.run, args.repeats, args.pin)
            sites, skipped = sites_of(records, work), 0
            host = any(s.get("sampled", True) for s in sites)
            # perf samples the host: with only kernels to try it has nothing to weigh
            shares = _time_profile(args, work, say) if host else None
            if shares is not None:
                sites, skipped = order_sites(sites, shares, args.min_share)
            weighed = {s["weighed"] for s in sites}
            how = [{"perf": "perf samples", "equal": "kernels of equal weight (the GPU's time)",
                    "depth": "loop depth" + (" (perf saw none of the sites' functions)"
                                             if shares is not None else "")}[w]
                   for w in ("perf", "depth", "equal") if w in weighed]
            queue = order_candidates(sites, args.threshold)
            state = {"format": STATE_FORMAT, "build": args.build, "run": args.run,
                     "spent": 1 + args.repeats + (shares is not None),   # perf's run counts
                     "baseline": times, "output": output, "best": times, "kept": [],
                     "sites": sites, "queue": queue, "tried": [], "built": []}
            save()
            per_task: dict[str, int] = {}
            for site in sites:
                per_task[site["task"]] = per_task.get(site["task"], 0) + 1
            promising = sum(1 for i, j in queue
                            if saving(1.0, sites[i]["gains"][j]) > args.threshold)
            say(f"baseline: median {statistics.median(times):.3f} s over {args.repeats} "
                f"runs; " + (", ".join(f"{n} {task} site(s)" for task, n in per_task.items())
                             or "no site") + " to try"
                + (f"; shares by {', '.join(how)}; {len(queue)} candidate(s), {promising} "
                   f"predicted to gain more than {args.threshold:.0%} (those first, by the "
                   f"share of the run each is predicted to save)" if sites else "")
                + (f"; {skipped} in functions under {args.min_share:.0%} of the run left out"
                   if skipped else ""))
        else:
            say(f"resuming: {len(state['tried'])} candidate(s) tried, {state['spent']} of "
                f"the budget spent")
        candidate_profile = work / "candidate.profile"
        for i, j in state["queue"]:
            site = state["sites"][i]
            task, value = site["task"], site["candidates"][j]
            key = [task, site["source"], site["target"], value]
            if key in state["tried"]:
                continue
            runs = args.repeats * (2 if artifacts else 1)
            if state["spent"] + 1 + runs > args.budget:
                raise _BudgetSpent
            entry = {k: site[k] for k in ("source", "target", "digest")} | {
                "task": task, "value": value}
            others = [k for k in state["kept"] if k["target"] != site["target"]
                      or k["source"] != site["source"] or k["task"] != task]
            atomic_write_bytes(candidate_profile,
                               _profile_text(others + [entry], candidate_profile).encode())
            _touch_changed(state.get("built", []), others + [entry])
            state["built"] = others + [entry]
            state["spent"] += 1 + runs
            pairs = kinds()[task].format_value(value)
            best = state["best"]
            try:
                _build(args.build, work, candidate_profile)
                if artifacts:
                    artifacts.keep("candidate")
                    if artifacts.same("candidate", "best"):
                        # the compiler did not act on the decision: timing it
                        # could only keep noise
                        state["spent"] -= runs
                        state["tried"].append(key)
                        artifacts.put("best")
                        say(f"{site['target']} {pairs}: the build is byte for byte the "
                            f"best's; not kept")
                        save()
                        continue
                    times, best, output, best_output = _time_alternating(
                        args.run, args.repeats, artifacts, args.pin)
                    if best_output != state["output"]:
                        raise TuneError("the best build's output changed between runs")
                else:
                    times, output = _time_runs(args.run, args.repeats, args.pin)
            except TuneError as exc:
                say(f"{site['target']} {pairs}: {exc}; not kept")
                times, output = None, None
            state["tried"].append(key)
            if times is not None and output != state["output"]:
                say(f"{site['target']} {pairs}: the output changed; not kept")
            elif times is not None and beats(times, best, args.threshold):
                # against the best's runs beside it, chained to the baseline
                gain = statistics.median(best) / statistics.median(times)
                speedup = state.get("gain", 1.0) * gain
                entry["comment"] = (f"{speedup:.3f}x the baseline's median, "
                                    f"{args.repeats} runs, {min(times):.3f}-"
                                    f"{max(times):.3f} s")
                state["kept"] = others + [entry]
                state["best"], state["gain"] = times, speedup
                state["rechecked"] = False
                if artifacts:
                    artifacts.put("candidate")
                    artifacts.keep("best")
                say(f"{site['target']} {pairs}: kept ({speedup:.3f}x)")
            elif times is not None:
                say(f"{site['target']} {pairs}: median {statistics.median(times):.3f} s "
                    f"against {statistics.median(best):.3f} s, not faster beyond the "
                    f"noise; not kept")
            save()
    except _BudgetSpent:
        say(f"stopping: the next candidate needs more than the {args.budget - state['spent']} "
            f"of the budget left")
    except TuneError as exc:
        print(f"mire tune: {exc}", file=sys.stderr)
        return 2
    if state["kept"] and artifacts and not state.get("rechecked") \
            and (work / "baseline").is_dir():
        _recheck(args, state, artifacts, say)
        save()
    atomic_write_bytes(profile, _profile_text(state["kept"], profile).encode())
    gain = state.get("gain", 1.0)
    print(f"mire tune: {len(state['kept'])} decision(s) kept, {gain:.3f}x the baseline's "
          f"median; {state['spent']} of the budget of {args.budget} spent; wrote {profile} "
          f"(apply it with MIRECC_PROFILE={profile})")
    if args.seed_adapt:
        from mirecc.runtime.store import seed_profile  # lazy: --seed-adapt only
        seed_profile(profile, say=lambda line: print(f"mire tune: {line}"))
    return 0
