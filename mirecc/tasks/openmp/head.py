"""The OpenMP head in the driver: threads, schedule and chunk per parallel region.

A head directory ``<heads_dir>/openmp/`` holds ``spec.yaml`` and the
head's ONNX forest (written by ``mire omp-train``)::

    task: openmp
    languages: [c, c++]
    head: head.onnx            # "features" (N, d) -> "tree_gains" (N, trees, classes)
    encoder: "<ModelInfo.cache_version>"   # when function_embedding is a feature
    features: [region_statistics]          # an ordered subset of ALL_FEATURES
    region_statistics: [log_instructions, ...]   # mirecc.ir.region_stats.NAMES
    classes: [t1-static-default, t2-dynamic-64, ...]   # configurations, as the dataset names them
    cores: 2                   # the machine the labels were timed on
    quantile: 0.3              # of the trees' predicted log speedups, per class
    min_gain: 0.05             # the quantile must promise more, else the runtime's default stays

Each tree predicts, per configuration, the log speedup of forcing it on the
region over the runtime's default (all cores, static, default chunk), as
the loop-vectorize head does for its factors
(:func:`mirecc.learn.forest.choose`): a region gets the
configuration whose low quantile is highest, if that exceeds ``min_gain``.

Thread counts are absolute, so a head refuses to decide on a machine with
another number of cores than the one its labels were timed on. The
decisions are applied by the plugin's ``mirecc-omp-decide`` pass (shared
decisions file: :mod:`mirecc.plugin.decisions`), which leaves a
region's team size alone when the source fixes it and a loop alone when it
has a schedule clause; ``OMP_NUM_THREADS`` / ``OMP_SCHEDULE`` at run time
win over both.

Only the standard library is imported at the top (see mirecc.taskapi.records).
"""
from __future__ import annotations

import math
import os

from mirecc.taskapi.api import HeadError, NoDecision
from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of
from mirecc.taskapi.regionhead import RegionHead

TASK = "openmp"
ALL_FEATURES = ["region_statistics", "function_embedding"]


def parse_config(key: str) -> dict:
    """'t2-dynamic-64' -> {"threads": 2, "schedule": "dynamic", "chunk": 64}."""
    threads, schedule, chunk = key.split("-")
    if not threads.startswith("t") or schedule not in ("static", "dynamic", "guided"):
        raise ValueError(key)
    value = {"threads": int(threads[1:]), "schedule": schedule,
             "chunk": None if chunk == "default" else int(chunk)}
    if value["threads"] < 1 or (value["chunk"] is not None and value["chunk"] < 1):
        raise ValueError(key)
    return value


def describe(value: dict) -> str:
    chunk = value.get("chunk")
    return (f"{value['threads']} thread{'s' if value['threads'] != 1 else ''}, "
            f"{value['schedule']}" + (f" chunk {chunk}" if chunk else ""))


#: the most candidates the plugin takes per adaptive site (FORMAT.md
#: "Adaptive sites"; more would make it refuse the whole decisions file)
MAX_CANDIDATES = 8


class OpenMPHead(RegionHead):
    task = TASK
    FEATURES = ALL_FEATURES
    FEATURES_MAY_BE_SUBSET = True

    def _validate(self) -> None:
        # lazy: the region reader (re, subprocess, dataclasses); the driver imports this
        # module for plugin_entry alone
        from mirecc.ir.region_stats import NAMES

        try:
            self.configs = [parse_config(c) for c in self.classes]
        except (TypeError, ValueError, AttributeError):
            raise self._error("'classes' must be configurations like t2-dynamic-64") from None
        if "region_statistics" in self.features and self.spec.get("region_statistics") != NAMES:
            raise self._error("'region_statistics' names other statistics than this mirecc "
                              "computes (retrain the head with mire omp-train)")
        cores = self.spec.get("cores")
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise self._error("'cores' must be the number of cores the labels were timed on")
        self.cores = cores
        self.quantile = self._number("quantile", 0.0, 1.0)
        self.min_gain = self._number("min_gain", 0.0, 10.0)
        self.apply = bool(getattr(self.config, "apply_openmp", False))
        self.adapt = bool(getattr(self.config, "adapt_openmp", False))
        self.candidates_per_site = getattr(self.config, "adapt_candidates", 4)

    def _settings(self) -> str:
        # the machine's cores decide whether the head forces: part of the key
        if self.adapt:
            return f"|adapt={self.candidates_per_site}"
        return ("|apply" if self.apply else "|record") + f"|cores={os.cpu_count()}"

    def relative(self, cfg: dict) -> str:
        """A labelled configuration in the runtime's machine-relative form,
        e.g. ``one-static-default``, ``all-dynamic-64``: its team size as a
        share of the labels' machine's cores."""
        from mirecc.runtime.store import share_name  # lazy: ~50 ms, adapt_openmp only

        return share_name(cfg["threads"], self.cores, cfg["schedule"], cfg.get("chunk"))

    # ------------------------------------------------------------- pipeline

    def _sites(self, ctx):
        """The TU's OpenMP sites, from the front end's bitcode (the IR the
        plugin counts its call ids in), with explicit clauses marked."""
        sites, stats = ctx.regions
        if not any(s.kind == "parallel" for s in sites):
            raise NoDecision("no parallel regions", code="no-parallel-regions")
        return stats, mark_schedule_clauses(sites, ctx.request)

    def rank(self, ctx):
        """Per parallel region, every configuration by the ``quantile`` of
        the trees' predicted log speedup over the runtime's default; the
        default (``{}``, score 0) is among them."""
        # lazy: numpy and the region reader, only when the head ranks
        import numpy as np
        from mirecc.ir.region_stats import region_loops

        if not self.adapt and (os.cpu_count() or 0) != self.cores:
            raise NoDecision(f"trained on a {self.cores}-core machine, this one has "
                             f"{os.cpu_count()}", code="other-machine")
        stats, sites = self._sites(ctx)
        regions = [s for s in sites if s.kind == "parallel" and s.id in stats]
        # a region with nothing to change: team size fixed and no decidable loop
        regions = [r for r in regions
                   if r.decidable or any(lp.decidable for lp in region_loops(sites, r.id))]
        if not regions:
            raise NoDecision("every region's team size and schedules are fixed by the source",
                             code="fixed-by-source")
        how = "region statistics of the build's IR"
        if "function_embedding" in self.features:
            emb, how_emb = self._embedding(ctx)
            regions = [r for r in regions if r.outlined in emb.functions]
            if not regions:
                raise NoDecision("the encoder's IR has other functions than the build's",
                                 code="functions-unmatched")
            how = f"the outlined function's embedding {how_emb}" + (
                f", {how}" if "region_statistics" in self.features else "")
        rows = []
        for r in regions:
            parts = {"region_statistics": stats[r.id]}
            if "function_embedding" in self.features:
                parts["function_embedding"] = emb.functions[r.outlined]
            rows.append([x for f in self.features for x in parts[f]])
        G = self._tree_gains(rows)
        Q = np.quantile(G, self.quantile, axis=1)
        rankings, loops_of = [], {}
        for r, q in zip(regions, Q):
            loops = loops_of[r.id] = [lp.id for lp in region_loops(sites, r.id) if lp.decidable]
            candidates = [Candidate({}, 0.0)] + [
                Candidate({**cfg, "loops": loops, "threads_fixed": not r.decidable},
                          float(score))
                for cfg, score in zip(self.configs, q.tolist())]
            candidates.sort(key=lambda c: -c.score)
            rankings.append(Ranking(r.id, tuple(candidates)))
        ctx.notes[self.name] = (G, how, {r.id: (r, loops_of[r.id]) for r in regions})
        return rankings

    def decide(self, ctx, rankings):
        """Force the best configuration only where its quantile gain exceeds
        ``min_gain``; elsewhere the runtime's default stays."""
        from mirecc.learn.forest import choose  # lazy: numpy, as in rank

        G, how, regions = ctx.notes[self.name]
        if self.adapt:
            return self._adaptive_sites(ctx, rankings, regions, how)
        share = f"{1 - self.quantile:.0%}"
        default = {"threads": self.cores, "schedule": "static", "chunk": None}
        decisions = []
        for ranking, (best, gain, agree) in zip(rankings, choose(G, self.quantile,
                                                                 self.min_gain)):
            region, loops = regions[ranking.target]
            if best is None:
                value, applied, advisory = {}, False, False
                why = (f"no configuration promises a gain: at best {share} of the trees "
                       f"predict >= {math.exp(gain):.3f}x the default's speed (needed > "
                       f"{math.exp(self.min_gain):.3f}x): the runtime's default stays")
            else:
                cfg = self.configs[best]
                value = {**cfg, "loops": loops, "threads_fixed": not region.decidable}
                applied, advisory = self.apply, not self.apply
                why = (f"{describe(cfg)}: {share} of the trees predict >= "
                       f"{math.exp(gain):.3f}x the default's speed")
                if not region.decidable:
                    why += f" (team size left to the source: {region.why})"
                if advisory:
                    why += (" (recorded only: set apply_openmp: true or "
                            "MIRECC_APPLY_OPENMP=1 to apply)")
            decisions.append(Decision(
                task=TASK, target=ranking.target, value=value, default=default,
                confidence=agree, reason=f"{why}; {how}", applied=applied,
                advisory=advisory, candidates=candidates_of(ranking)))
        return decisions

    def _adaptive_sites(self, ctx, rankings, regions, how):
        """Each region an adaptive site: its ``adapt_candidates`` best
        configurations in the head's order (machine-relative, the program's
        own configuration left out: the runtime always has it), keyed by the
        region's code digest for the runtime's store."""
        # lazy: the IR reader and the profile kind, adapt_openmp only
        from mirecc.ir.text import function_digests
        from mirecc.tasks.openmp.profile import region_digest

        digests = function_digests(ctx.ir_text)
        source = os.path.basename(ctx.request.source)
        default = {"threads": self.cores, "schedule": "static", "chunk": None}
        own = self.relative(default)
        decisions = []
        for ranking in rankings:
            region, loops = regions[ranking.target]
            names = []
            for c in ranking.candidates:
                name = self.relative(c.value) if c.value else own
                if name != own and name not in names:
                    names.append(name)
            names = names[:min(self.candidates_per_site, MAX_CANDIDATES)]
            key = region_digest(digests, region.function, region.outlined)
            if key is None or not names:
                continue
            value = {"adapt": names, "key": key, "name": f"{source} {ranking.target}",
                     "loops": loops, "threads_fixed": not region.decidable}
            why = (f"adaptive site: the runtime tries {', '.join(names)} (the head's order) "
                   f"against the program's own configuration in its runs and keeps what "
                   f"measures faster")
            if not region.decidable:
                why += f" (team size left to the source: {region.why})"
            decisions.append(Decision(
                task=TASK, target=ranking.target, value=value, default=default,
                confidence=1.0, reason=f"{why}; ranked from {how}", applied=True,
                advisory=False, candidates=candidates_of(ranking)))
        return decisions


def mark_schedule_clauses(sites, request):
    """Mark explicit the worksharing loops written with a schedule clause.

    ``schedule(static)`` compiles exactly as no clause, so only the pragma
    text tells them apart: it is read at each loop's source line, which a
    second front-end compile with line tables gives (only when some loop is
    still decidable). Without locations no loop is decided: a clause the
    user wrote must never be overridden."""
    from mirecc.ir.regions import mark_source_clauses, site_locations  # lazy: as in _validate

    if not any(s.kind == "loop" and s.decidable for s in sites):
        return sites
    cwd = request.cwd or None
    where = site_locations(request.source, request.compiler, list(request.flags), sites, cwd=cwd)
    for s in sites:
        s.location = where.get((s.kind, s.id))
        if s.kind == "loop" and s.decidable and not s.location:
            s.explicit, s.why = True, "no source line to check for a schedule clause"
    return mark_source_clauses(sites, cwd=cwd)


def openmp_plugin_entry(decisions) -> dict:
    """Applied OpenMP decisions of one source -> its plugin ``openmp`` entry
    (``passes/plugin/FORMAT.md``)."""
    parallel, worksharing, adapt = {}, {}, {}
    for d in decisions:
        v = d.value
        if not v:
            continue
        if "adapt" in v:
            adapt[d.target] = {"key": v["key"], "name": v["name"], "candidates": v["adapt"],
                               "loops": list(v.get("loops", ()))}
            continue
        if not v.get("threads_fixed"):
            parallel[d.target] = {"threads": v["threads"]}
        for loop in v.get("loops", ()):
            worksharing[loop] = {"schedule": v["schedule"],
                                 **({"chunk": v["chunk"]} if v.get("chunk") else {})}
    entry = {}
    if parallel:
        entry["parallel"] = dict(sorted(parallel.items()))
    if worksharing:
        entry["worksharing"] = dict(sorted(worksharing.items()))
    if adapt:
        entry["adapt"] = dict(sorted(adapt.items()))
    return entry


def plugin_entry(source, decisions) -> dict:
    """Applied OpenMP decisions of one source -> its ``openmp`` entry."""
    return {"openmp": openmp_plugin_entry(decisions)}


def explain_openmp_decisions(result, ctx):
    """``result`` with each region decision's source line (in its reason),
    for ``--explain`` only: it costs a front-end compile with line tables."""
    from mirecc.ir.regions import site_locations  # lazy: --explain only, as in _validate

    ours = [d for d in result.decisions if d.task == TASK]
    if not ours:
        return result
    request = ctx.request
    try:
        sites, _stats = ctx.regions
        where = site_locations(request.source, request.compiler, list(request.flags), sites,
                               cwd=request.cwd or None)
    except (OSError, RuntimeError, HeadError):
        return result
    decisions = []
    for d in result.decisions:
        line = where.get(("parallel", d.target)) if d.task == TASK else None
        if line:
            d = d.replace(reason=f"{line}: parallel region {d.target}: {d.reason}")
        decisions.append(d)
    return result.replace(decisions=decisions)
