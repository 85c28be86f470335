"""The NUMA/prefetcher head in the driver: per OpenMP parallel region and
input size, a configuration of the published space, recorded in the binary.

A head directory ``<heads_dir>/numa/`` (written by ``mire numa-train``)::

    task: numa
    languages: [c, c++]
    head: head.onnx           # "features" (N, d) -> "tree_gains" (N, trees, classes)
    encoder: "<ModelInfo.cache_version>"
    features: [region_statistics]
    region_statistics: [log_instructions, ...]  # mirecc.ir.region_stats.NAMES
    classes: ["small:-O3_32_2_2_compact_0_0_loc", ..., "large:..."]
    default: -O3_32_2_2_compact_0_0_loc   # the configuration gains are measured against
    machine: {description: ..., vendor: intel, sockets: 2, numa_nodes: 2, hardware_threads: 64}
    quantile: 0.3             # of the trees' predictions for the chosen configuration
    min_gain: 0.0488          # that quantile must promise more (log), else the default stays

Per size, a region gets the configuration with the best mean predicted log
speedup over the default if the ``quantile`` of the trees' predictions for
it exceeds ``min_gain`` (the rule ``mire bench numa`` judges as "gated
forest"), else the default.  The decisions describe the head's machine;
``mire run`` (:mod:`mirecc.tasks.numa.launch`) maps them onto the machine
it runs on.  A decision is recorded (``record_numa``), never compiled in:
the plugin writes one JSON line per TU into the ``.mirecc.numa`` section
(:func:`numa_record`).

Only the standard library is imported at the top (see mirecc.taskapi.records).
"""
from __future__ import annotations

import json
import math

from mirecc.taskapi.api import NoDecision
from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of
from mirecc.taskapi.regionhead import RegionHead

TASK = "numa"
RECORD = "numa"            # the plugin record: section .mirecc.numa
RECORD_VERSION = 1


class NumaHead(RegionHead):
    task = TASK
    FEATURES = ["region_statistics"]

    def _validate(self) -> None:
        # lazy: dataclasses and the region reader; the driver imports this module for
        # plugin_entry alone
        from mirecc.tasks.numa.configs import parse_config
        from mirecc.ir.region_stats import NAMES

        if self.spec.get("region_statistics") != NAMES:
            raise self._error("'region_statistics' names other statistics than this mirecc "
                              "computes (retrain the head with mire numa-train)")
        self.sizes: dict[str, list[tuple[int, str]]] = {}
        try:
            for i, c in enumerate(self.classes):
                size, name = str(c).split(":", 1)
                parse_config(name)
                self.sizes.setdefault(size, []).append((i, name))
            self.default = parse_config(str(self.spec.get("default"))).name
        except ValueError:
            raise self._error("'classes' must be <size>:<configuration> and 'default' a "
                              "configuration (as mire numa-train writes them)") from None
        machine = self.spec.get("machine")
        if not isinstance(machine, dict) or not isinstance(machine.get("description"), str):
            raise self._error("'machine' must describe the machine the labels were measured on")
        self.machine = machine
        self.quantile = self._number("quantile", 0.0, 1.0)
        self.min_gain = self._number("min_gain", 0.0, 10.0)
        self.any_machine = bool(getattr(self.config, "numa_any_machine", False))
        # read once per head load (the server keeps the head), not per TU
        self.differs = self.machine_differences()

    def _settings(self) -> str:
        # whether this machine is the labels' decides whether the head acts
        return f"|{self.differs or 'same machine'}|any={self.any_machine}"

    def machine_differences(self) -> str:
        """How this machine differs from the one the labels describe (its
        vendor, sockets, NUMA nodes, hardware threads); "" when it does not."""
        from mirecc.tasks.numa.launch import probe  # lazy: as in _validate

        here = probe()
        facts = {"vendor": here.vendor, "sockets": here.sockets,
                 "numa_nodes": len(here.nodes), "hardware_threads": len(here.cpus)}
        return ", ".join(f"{key} {facts[key]} (labels: {self.machine[key]})"
                         for key in facts if key in self.machine
                         and self.machine[key] != facts[key])

    # ------------------------------------------------------------- pipeline

    def rank(self, ctx):
        """Per parallel region, the default (``{}``, score 0) and, per input
        size, each configuration scored by the trees' mean predicted log
        speedup; the quantile the gate reads is kept for :meth:`decide`."""
        import numpy as np  # lazy: numpy, only when the head ranks

        differs = self.differs
        if differs and not self.any_machine:
            raise NoDecision(f"its labels describe another machine "
                             f"({self.machine['description']}); this one differs: {differs}; "
                             f"nothing recorded (numa_any_machine: true records them anyway)",
                             code="other-machine")
        sites, stats = ctx.regions
        regions = [s for s in sites if s.kind == "parallel" and s.id in stats]
        if not regions:
            raise NoDecision("no parallel regions", code="no-parallel-regions")
        G = self._tree_gains([stats[r.id] for r in regions])
        mean, low = G.mean(axis=1), np.quantile(G, self.quantile, axis=1)
        rankings = []
        for k, region in enumerate(regions):
            candidates = [Candidate({}, 0.0)] + [
                Candidate({"size": size, "config": name}, float(mean[k, i]))
                for size, columns in self.sizes.items() for i, name in columns]
            candidates.sort(key=lambda c: -c.score)
            rankings.append(Ranking(region.id, tuple(candidates)))
        ctx.notes[self.name] = (mean, low, {r.id: r for r in regions})
        return rankings

    def decide(self, ctx, rankings):
        mean, low, regions = ctx.notes[self.name]
        share = f"{1 - self.quantile:.0%}"
        decisions = []
        for k, ranking in enumerate(rankings):
            region = regions[ranking.target]
            value, why = {}, []
            for size, columns in self.sizes.items():
                best_i, best_name = max(columns, key=lambda c: mean[k, c[0]])
                promised = low[k, best_i]
                if best_name != self.default and promised > self.min_gain:
                    value[size] = best_name
                    why.append(f"{size} input: {best_name} ({share} of the trees predict >= "
                               f"{math.exp(promised):.3f}x the default's speed)")
                else:
                    why.append(f"{size} input: the default")
            decisions.append(Decision(
                task=TASK, target=ranking.target,
                value={**value, "outlined": region.outlined} if value else {},
                default={"config": self.default, "machine": self.machine}, confidence=1.0 - self.quantile,
                reason="; ".join(why) + "; from the region statistics of the build's IR, "
                       "recorded for mire run",
                applied=True, candidates=candidates_of(ranking)))
        # a TU's regions are recorded together (those keeping the default vote
        # for it in mire run) and only when one of them has a configuration:
        # otherwise nothing reaches the object
        if not any(d.value for d in decisions):
            decisions = [d.replace(applied=False) for d in decisions]
        return decisions


def numa_record(source: str, decisions) -> str | None:
    """A TU's NUMA decisions -> its line of the binary's ``.mirecc.numa``
    section (None when every region keeps the default: nothing recorded)."""
    regions = {d.target: dict(d.value) for d in decisions}
    if not any(regions.values()):
        return None
    return json.dumps({"version": RECORD_VERSION, "source": source,
                       "default": decisions[0].default["config"],
                       "machine": decisions[0].default["machine"],
                       "regions": dict(sorted(regions.items()))},
                      sort_keys=True, separators=(",", ":"))


def plugin_entry(source, decisions) -> dict:
    """Recorded NUMA decisions of one source -> its ``record`` entry."""
    line = numa_record(source, decisions)
    return {"record": {RECORD: line}} if line else {}
