"""OpenMP region decisions in a decisions profile (:mod:`mirecc.taskapi.profile`):

    openmp  src/cov.c  kernel_covariance:0  5e1f0c9a2b7d3e48  threads=2,schedule=static,chunk=8

target: the region's id ``<function>:<n>`` (the plugin's); value: the team
size, schedule and optional chunk.  The region's worksharing loops and a
team size the source fixed come from the build's own reading of the source
(the head's decision in this build), so a clause the user wrote still wins:
an entry for a region the head did not read is not applied.  The digest
covers the region's outlined function too (:func:`region_digest`).
In ``mire tune`` a region goes before the loops that share its time (its
configuration distributes all their work).
"""
from __future__ import annotations

import hashlib

from mirecc.taskapi.profile import ProfileKind, key_values

SCHEDULES = ("static", "dynamic", "guided")


def region_outlined(candidates) -> tuple[str | None, dict]:
    """From an openmp decision's ranked candidates ((value, score) pairs):
    the region's outlined function (the function of its worksharing loops;
    None when it has none to decide) and the part of a configuration the
    build reads from the source (``loops``, ``threads_fixed``)."""
    for value, _ in candidates or ():
        if value:
            loops = list(value.get("loops", ()))
            outlined = loops[0].rsplit(":", 1)[0] if loops else None
            return outlined, {"loops": loops, "threads_fixed": bool(value.get("threads_fixed"))}
    return None, {"loops": [], "threads_fixed": False}


def region_digest(digests: dict[str, str], function: str, outlined: str | None) -> str | None:
    """A parallel region's digest: its function's and its outlined
    function's (where the region's body is), so an edit of either drops the
    entry; None when a function is missing."""
    if function not in digests or (outlined is not None and outlined not in digests):
        return None
    if outlined is None:
        return digests[function]
    return hashlib.sha256(f"{digests[function]}|{digests[outlined]}".encode()).hexdigest()[:16]


def openmp_value(value: dict) -> dict:
    """The part of an openmp configuration a profile keeps."""
    return {"threads": value["threads"], "schedule": value["schedule"],
            **({"chunk": value["chunk"]} if value.get("chunk") else {})}


class RegionKind(ProfileKind):
    noun = "region"
    target_help = "a region id <function>:<n>"
    order = 0
    adapts = True

    def adapt_arm(self, value, cores):
        from mirecc.runtime.store import share_name  # lazy: ~50 ms, an adapting arm only
        return share_name(value["threads"], cores, value["schedule"], value.get("chunk"))

    def parse_value(self, text):
        value = key_values(text)
        threads, chunk = value.get("threads"), value.get("chunk", 1)
        if (set(value) - {"threads", "schedule", "chunk"} or not isinstance(threads, int)
                or threads < 1 or value.get("schedule") not in SCHEDULES
                or not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"expected threads=N,schedule={'|'.join(SCHEDULES)}[,chunk=N] "
                             f"with N >= 1")
        return value

    def resolve(self, entry, decision, digests):
        # a region the head did not read (no such region now, or another
        # machine) cannot be applied: its loops are not known
        if decision is None:
            return None
        outlined, from_source = region_outlined(decision.candidates)
        return (region_digest(digests, entry.function, outlined),
                {**entry.value, "chunk": entry.value.get("chunk"), **from_source})

    def site(self, decision, source, digests, depths):
        function = self.function(decision["target"])
        outlined, _ = region_outlined(decision.get("candidates"))
        digest = region_digest(digests, function, outlined)
        ranked = [(openmp_value(v), s) for v, s in decision.get("candidates") or [] if v]
        if digest is None or not ranked:
            return None
        return {"task": decision["task"], "source": source, "function": outlined or function,
                "target": decision["target"], "digest": digest,
                "candidates": [v for v, _ in ranked], "score": max(s for _, s in ranked),
                "depth": 1, "order": self.order}


KIND = RegionKind()
