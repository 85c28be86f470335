"""``mire tune``: the heads rank, the user's own benchmark decides, and a
decisions profile keeps what won (:mod:`mirecc.profile`).

    mire tune --build "make -B CC=mirecc" --run "./bench" [--budget 20] [--repeats 3]

1. The build runs once with mirecc recording every TU's decisions and
   candidates (``MIRECC_RECORD``) and keeping its IR (``MIRECC_CAPTURE_DIR``),
   and the run is timed ``--repeats`` times: the baseline (the heads'
   decisions only recorded, so the binary is the compiler's own).
2. Decision sites: every loop the loop-vectorize head ranked, the deepest
   first (nesting depth standing for the share of the run), then by the
   head's best predicted gain; at each, the head's candidates in its order
   (:data:`FALLBACK` where no head ranked the loop).
3. A candidate: the profile of what was kept so far plus this candidate is
   written, the project rebuilt (``--build`` must rebuild what changed: a
   profile is not a file make knows about, so use ``make -B`` or a clean
   first), the run timed ``--repeats`` times.  It is kept only when its
   output is the baseline's byte for byte and both its median and its
   minimum beat the best so far by more than ``--threshold`` and by more
   than the best's own spread (max - min over median: the noise).
4. Every build and every timed run counts against ``--budget`` (runs);
   progress is printed; the state is saved after each candidate in
   ``--work``, so an interrupted tune resumes where it stopped.
5. The result is ``--profile`` (default ``mirecc.profile``), with each kept
   decision's measured speedup as its comment; builds apply it with
   ``MIRECC_PROFILE=mirecc.profile`` (or ``profile:`` in ``.mirecc.yaml``).

Not yet: per-function time from ``perf`` to pick the sites that matter,
runs alternated between builds, OpenMP and CUDA sites.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TASK = "loop-vectorize"
#: candidates tried at a loop no head ranked
FALLBACK = ({"vectorize.width": 1, "interleave.count": 1},
            {"vectorize.width": 4, "interleave.count": 1},
            {"vectorize.width": 8, "interleave.count": 1},
            {"vectorize.width": 4, "interleave.count": 2})


class TuneError(Exception):
    """The build or the run cannot be used; ``str()`` says which and why."""


class _BudgetSpent(Exception):
    pass


def add_arguments(p) -> None:
    p.add_argument("--build", required=True,
                   help="shell command that rebuilds the project through mirecc "
                        "(e.g. 'make -B CC=mirecc')")
    p.add_argument("--run", required=True, help="shell command that runs the benchmark")
    p.add_argument("--budget", type=int, default=20,
                   help="builds plus timed runs to spend (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs per build (default: %(default)s)")
    p.add_argument("--threshold", type=float, default=0.02,
                   help="least relative gain a change must show (default: %(default)s)")
    p.add_argument("--profile", default="mirecc.profile",
                   help="the profile to write (default: %(default)s)")
    p.add_argument("--work", default=".mirecc-tune",
                   help="state, records and IR of the tune (default: %(default)s)")


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
                        "(no TU was recorded): use CC=mirecc / CXX=mirecc++ and -O2")
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def _time_runs(command: str, repeats: int) -> tuple[list[float], str]:
    """Wall times of ``repeats`` runs and their (identical) output."""
    times, output = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(command, shell=True, capture_output=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise TuneError(f"the run failed ({proc.returncode}): "
                            f"{proc.stderr.decode(errors='replace')[-300:].strip()}")
        out = proc.stdout.decode(errors="replace")
        if output is not None and out != output:
            raise TuneError("the run's output differs between two runs of the same build: "
                            "it cannot tell a changed output from noise")
        times.append(elapsed)
        output = out
    return times, output


# ------------------------------------------------------------------ sites

def sites_of(records: list[dict], work: Path) -> list[dict]:
    """Loop decision sites, most promising first: {source (absolute), target,
    digest, candidates, score, depth}.  Without a time profile, the loop's
    nesting depth stands for its share of the run (the innermost loop of a
    deep nest runs the most), then the head's best predicted gain."""
    from mirecc.corpus.irtext import disassemble
    from mirecc.graph import build_graph_any
    from mirecc.irinfo import graph_loops
    from mirecc.profile import function_digests

    sites = []
    for rec in records:
        source = os.path.normpath(os.path.join(rec["cwd"], rec["source"]))
        ir = work / "ir" / "ir" / rec["ir_sha256"][:2] / f"{rec['ir_sha256']}.bc"
        if not ir.is_file():
            continue
        digests = function_digests(disassemble(ir.read_bytes(), str(ir)))
        depths = {lp.id: lp.depth for lp in graph_loops(build_graph_any(ir))}
        for d in rec["decisions"]:
            if d["task"] != TASK:
                continue
            function = d["target"].rsplit(":", 1)[0]
            if function not in digests:
                continue
            ranked = [(v, s) for v, s in d.get("candidates") or [] if v]
            candidates = [v for v, _ in ranked] or [dict(c) for c in FALLBACK]
            sites.append({"source": source,
                          "target": d["target"], "digest": digests[function],
                          "candidates": candidates,
                          "score": max((s for _, s in ranked), default=0.0),
                          "depth": depths.get(d["target"], 1)})
    sites.sort(key=lambda s: (-s["depth"], -s["score"]))
    return sites


# ------------------------------------------------------------------ the tune

def _profile_text(kept: list[dict], where: Path) -> str:
    """The profile of ``kept`` to be written at ``where`` (sources relative to it)."""
    from mirecc.profile import FORMAT_LINE, format_entry
    return "\n".join([FORMAT_LINE] + [
        format_entry(TASK, os.path.relpath(k["source"], where.parent), k["target"],
                     k["digest"], k["value"], k.get("comment", "")) for k in kept]) + "\n"


def _beats(candidate: list[float], best: list[float], threshold: float) -> bool:
    """Faster beyond the threshold and beyond the best's own spread, in both
    the median and the minimum."""
    noise = (max(best) - min(best)) / statistics.median(best)
    margin = 1 - max(threshold, noise)
    return (statistics.median(candidate) < statistics.median(best) * margin
            and min(candidate) < min(best) * margin)


def run(args) -> int:
    from mirecc.fsutil import atomic_write_bytes

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

    try:
        if state is None or state.get("build") != args.build or state.get("run") != args.run:
            say("baseline: building with the heads' decisions recorded only")
            records = _build(args.build, work, None)
            times, output = _time_runs(args.run, args.repeats)
            sites = sites_of(records, work)
            state = {"build": args.build, "run": args.run, "spent": 1 + args.repeats,
                     "baseline": times, "output": output, "best": times, "kept": [],
                     "sites": sites, "tried": []}
            save()
            say(f"baseline: median {statistics.median(times):.3f} s over {args.repeats} "
                f"runs; {len(sites)} loop site(s) to try")
        else:
            say(f"resuming: {len(state['tried'])} candidate(s) tried, {state['spent']} of "
                f"the budget spent")
        candidate_profile = work / "candidate.profile"
        for site in state["sites"]:
            for value in site["candidates"]:
                key = [site["source"], site["target"], value]
                if key in state["tried"]:
                    continue
                if state["spent"] + 1 + args.repeats > args.budget:
                    raise _BudgetSpent
                entry = {k: site[k] for k in ("source", "target", "digest")} | {"value": value}
                others = [k for k in state["kept"] if k["target"] != site["target"]
                          or k["source"] != site["source"]]
                atomic_write_bytes(candidate_profile,
                                   _profile_text(others + [entry], candidate_profile).encode())
                state["spent"] += 1 + args.repeats
                pairs = ",".join(f"{k}={v}" for k, v in value.items())
                try:
                    _build(args.build, work, candidate_profile)
                    times, output = _time_runs(args.run, args.repeats)
                except TuneError as exc:
                    say(f"{site['target']} {pairs}: {exc}; not kept")
                    times, output = None, None
                state["tried"].append(key)
                if times is not None and output != state["output"]:
                    say(f"{site['target']} {pairs}: the output changed; not kept")
                elif times is not None and _beats(times, state["best"], args.threshold):
                    speedup = statistics.median(state["baseline"]) / statistics.median(times)
                    entry["comment"] = (f"{speedup:.3f}x the baseline's median, "
                                        f"{args.repeats} runs, {min(times):.3f}-"
                                        f"{max(times):.3f} s")
                    state["kept"] = others + [entry]
                    state["best"] = times
                    say(f"{site['target']} {pairs}: kept ({speedup:.3f}x)")
                elif times is not None:
                    say(f"{site['target']} {pairs}: median {statistics.median(times):.3f} s, "
                        f"not faster beyond the noise; not kept")
                save()
    except _BudgetSpent:
        say(f"budget of {args.budget} spent")
    except TuneError as exc:
        print(f"mire tune: {exc}", file=sys.stderr)
        return 2
    atomic_write_bytes(profile, _profile_text(state["kept"], profile).encode())
    gain = statistics.median(state["baseline"]) / statistics.median(state["best"])
    print(f"mire tune: {len(state['kept'])} decision(s) kept, {gain:.3f}x the baseline's "
          f"median; {state['spent']} of the budget of {args.budget} spent; wrote {profile} "
          f"(apply it with MIRECC_PROFILE={profile})")
    return 0
