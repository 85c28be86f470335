"""Loop decisions in a decisions profile (:mod:`mirecc.taskapi.profile`):

    loop-vectorize  src/kernel.c  saxpy:1  7d0c2e91a4b3f605  vectorize.width=4,interleave.count=2

target: the loop's id ``<function>:<header>``; value: the loop's factors.
``mire tune`` tries each loop the head ranked, in the head's order
(:data:`FALLBACK` where it ranked none but the compiler's own choice, with
no gain predicted), each candidate with the head's predicted log speedup
over LLVM's choice (the site's ``gains``).
"""
from __future__ import annotations

from mirecc.taskapi.profile import ProfileKind

#: candidates tried at a loop the head ranked nothing for
FALLBACK = ({"vectorize.width": 1, "interleave.count": 1},
            {"vectorize.width": 4, "interleave.count": 1},
            {"vectorize.width": 8, "interleave.count": 1},
            {"vectorize.width": 4, "interleave.count": 2})


class LoopKind(ProfileKind):
    noun = "loop"
    target_help = "a loop id <function>:<header>"
    #: at the same share, after a parallel region (0) and a function's
    #: loop-nest schedule (1), which reach all the loops they hold
    order = 2

    def site(self, decision, source, digests, depths):
        function = self.function(decision["target"])
        if function not in digests:
            return None
        ranked = [(v, s) for v, s in decision.get("candidates") or [] if v]
        return {"task": decision["task"], "source": source, "function": function,
                "target": decision["target"], "digest": digests[function],
                "candidates": [v for v, _ in ranked] or [dict(c) for c in FALLBACK],
                # the head's scores are log speedups over LLVM's choice
                "gains": [float(s) for _, s in ranked] or [0.0] * len(FALLBACK),
                "score": max((s for _, s in ranked), default=0.0),
                "depth": depths().get(decision["target"], 1), "order": self.order}


KIND = LoopKind()
