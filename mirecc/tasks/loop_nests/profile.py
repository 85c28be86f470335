"""Loop-nest schedules in a decisions profile (:mod:`mirecc.taskapi.profile`):

    loop-nests  src/kernel.c  kernel_gemm  5e1f0c9a2b7d3e48  schedule=polly-tile64

target: the function with the nest; value: its schedule (one of
:data:`.schedules.SPACE`).  The functions Polly runs on for it (the function
and the callers a static one is inlined into) come from the build's own
reading of the IR (the head's decision in this build), so an entry for a
function the head did not read is not applied.  ``mire tune`` tries each
function's schedules in the head's order, each with the head's predicted
log speedup over LLVM's schedule (the site's ``gains``); at the same share
of the run a function's schedule goes after a parallel region's
configuration (which distributes all the region's work) and before its
loops' factors (it restructures all of them).
"""
from __future__ import annotations

from mirecc.taskapi.profile import ProfileKind, key_values
from mirecc.tasks.loop_nests.schedules import SPACE


def functions_of(candidates) -> list[str] | None:
    """The functions Polly runs on for a decision's function, from its
    ranked candidates ((value, score) pairs); None where none says."""
    for value, _ in candidates or ():
        if value and value.get("functions"):
            return list(value["functions"])
    return None


class NestKind(ProfileKind):
    noun = "function"
    target_help = "a function with a loop nest"
    #: after a parallel region (0), before the loops' factors (2)
    order = 1

    def check_target(self, target: str) -> bool:
        return bool(target) and not any(c.isspace() for c in target)

    def function(self, target: str) -> str:
        return target

    def parse_value(self, text: str) -> dict:
        value = key_values(text)
        if set(value) != {"schedule"} or value["schedule"] not in SPACE:
            raise ValueError(f"expected schedule={'|'.join(SPACE)}")
        return value

    def resolve(self, entry, decision, digests):
        functions = functions_of(decision.candidates) if decision is not None else None
        if functions is None:
            return None
        return digests.get(entry.target), {"schedule": entry.value["schedule"],
                                           "functions": functions}

    def site(self, decision, source, digests, depths):
        function = decision["target"]
        ranked = [({"schedule": v["schedule"]}, s) for v, s in decision.get("candidates") or []
                  if v]
        if function not in digests or not ranked:
            return None
        # perf's samples of a static function inlined into its caller are
        # the caller's: the last function Polly runs on for it
        where = (functions_of(decision.get("candidates")) or [function])[-1]
        depth = max((d for loop, d in depths().items() if loop.rsplit(":", 1)[0] == function),
                    default=2)
        return {"task": decision["task"], "source": source, "function": where,
                "target": function, "digest": digests[function],
                "candidates": [v for v, _ in ranked], "gains": [float(s) for _, s in ranked],
                "score": max(s for _, s in ranked), "depth": depth, "order": self.order}


KIND = NestKind()
