"""The loop-nest head in the driver: a schedule per function with a loop nest.

A head directory ``<heads_dir>/loop-nests/`` (written by ``mire bench nests
--nests-write-head``)::

    task: loop-nests
    languages: [c, c++]
    head: head.onnx          # "features" (N, d) -> "tree_gains" (N, trees, classes)
    encoder: none            # reads no embedding (the bench shows none adds)
    features: [loop_nest_statistics]
    loop_nest_statistics: [loops, max_depth, ...]   # .features.FEATURES
    classes: [polly, polly-no-matmul, ...]          # .schedules.SPACE
    quantile: 0.3            # of the trees' predicted log speedups over LLVM's
    min_gain: 0.1            # the quantile must promise more, else LLVM's stays

Per function with a nest of depth 2 or more (:mod:`.features`), each tree
predicts every schedule's log speedup over LLVM's own; the ``quantile`` of
the trees ranks them.  Polly's settings are per compile, so a TU gets one
schedule: the one whose predicted gains, summed over the functions where it
clears ``min_gain``, are largest; those functions (and the callers a static
one is inlined into, :func:`.features.apply_set`) get it
(:func:`inject`).  A user's own ``-mllvm -polly...`` or loop pragmas win.

With ``adapt_loops`` the schedule is not a bet but a trial
(:meth:`LoopNestHead._versions`): each function whose trees' median expects
a gain from the TU's schedule gets a version of its own with it (Polly on
that clone alone, ``<fn>.mirecc.v<i>.polly``), beside LLVM's and the
loop-vectorize head's versions; the adaptive runtime linked into the
program keeps it only where it measures faster.

Only the standard library is imported at the top (see mirecc.taskapi.records).
"""
from __future__ import annotations

import math
import os

from mirecc.runtime.versions import adapting, is_versions
from mirecc.taskapi.api import NoDecision
from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of
from mirecc.taskapi.registry import task as declared_task
from mirecc.taskapi.onnxhead import OnnxHead
from mirecc.tasks.loop_nests.schedules import SPACE, flags, user_schedule

TASK = "loop-nests"


class LoopNestHead(OnnxHead):
    task = TASK
    FEATURES = ["loop_nest_statistics"]

    def _validate(self) -> None:
        # lazy: the statistics (numpy); the driver imports this module for inject() alone
        from mirecc.tasks.loop_nests.features import FEATURES

        if self.spec.get("loop_nest_statistics") != list(FEATURES):
            raise self._error("'loop_nest_statistics' names other statistics than this "
                              "mirecc computes (retrain: mire bench nests --nests-write-head)")
        if any(c not in SPACE for c in self.classes):
            raise self._error(f"'classes' must be schedules of {list(SPACE)}")
        self.quantile = self._number("quantile", 0.0, 1.0)
        self.min_gain = self._number("min_gain", 0.0, 10.0)
        self.apply = bool(getattr(self.config, "apply_loop_nests", False))
        self.adapt = adapting(self.config)

    def _settings(self) -> str:
        if self.adapt:
            return "|adapt"
        return "|apply" if self.apply else "|record"

    def applies_to(self, request) -> bool:
        return (super().applies_to(request) and request.opt_level in declared_task(TASK).opt_levels
                and user_schedule(request.flags) is None)

    def why_not(self, request) -> str:
        if not super().applies_to(request):
            return super().why_not(request)
        chosen = user_schedule(request.flags)
        if chosen:
            return f"the user chose the loop-nest schedule (-mllvm {chosen}): it stays"
        return f"applies with -O2, -O3 or -Ofast, not -O{request.opt_level}"

    def rank(self, ctx):
        """Per function with a nest, every schedule by the trees' quantile of
        its predicted log speedup over LLVM's, best first (LLVM's own, ``{}``,
        scores 0)."""
        # lazy: numpy and the statistics, as in _validate
        import numpy as np
        from mirecc.tasks.loop_nests import features as F

        text = ctx.ir_text
        funcs = F.parse_functions(text)
        feats = F.function_features(text, funcs)
        if not feats:
            raise NoDecision("no loop nest of depth 2 or more", code="no-nests")
        pragmas = F.pragma_functions(text, funcs)
        names = [f for f in sorted(feats) if f not in pragmas]
        if not names:
            raise NoDecision("every loop nest has the source's loop pragmas",
                             code="user-schedule")
        G = self._tree_gains([F.row(feats[f]) for f in names])
        Q = np.quantile(G, self.quantile, axis=1)
        rankings = []
        for name, q in zip(names, Q):
            # the functions Polly runs on for this one (read by profile entries)
            only = F.apply_set(funcs, name)
            cands = [Candidate({}, 0.0)] + [Candidate({"schedule": c, "functions": only},
                                                      float(s))
                                            for c, s in zip(self.classes, q.tolist())]
            cands.sort(key=lambda c: -c.score)
            rankings.append(Ranking(name, tuple(cands)))
        # for decide: the trees' gains, and per function whether any of its
        # accesses moves with its loops (what a schedule reorders)
        ctx.notes[self.name] = (G, [feats[f]["unit_share"] + feats[f]["strided_share"] > 0
                                    for f in names])
        return rankings

    def decide(self, ctx, rankings):
        """One schedule for the TU: the one with the largest sum of quantile
        gains over the functions where it clears ``min_gain``; those
        functions get it, the others keep LLVM's."""
        G, moving = ctx.notes[self.name]
        if self.adapt:
            return self._versions(ctx, rankings, G, moving)
        score = {c: 0.0 for c in self.classes}
        for r in rankings:
            for cand in r.candidates:
                if cand.value and cand.score > self.min_gain:
                    score[cand.value["schedule"]] += cand.score
        best = max(self.classes, key=lambda c: (score[c], -self.classes.index(c)))
        if score[best] <= 0:
            best = None
        k = self.classes.index(best) if best else None
        chosen = [r.target for r in rankings if best and
                  next(c.score for c in r.candidates if c.value.get("schedule") == best)
                  > self.min_gain]
        share = f"{1 - self.quantile:.0%}"
        decisions = []
        for i, r in enumerate(rankings):
            top = r.candidates[0]
            if r.target in chosen:
                gain = next(c.score for c in r.candidates if c.value.get("schedule") == best)
                agree = float((G[i, :, k] > self.min_gain).mean())
                only = next(c.value["functions"] for c in r.candidates if c.value)
                value = {"schedule": best, "functions": only}
                applied, advisory = self.apply, not self.apply
                why = (f"{best}: {share} of the trees predict >= {math.exp(gain):.2f}x "
                       f"LLVM's schedule's speed")
                if len(only) > 1:
                    why += (f" (Polly also on {', '.join(only[1:])}: a static function is "
                            f"inlined before Polly runs)")
                if advisory:
                    why += (" (recorded only: set apply_loop_nests: true or "
                            "MIRECC_APPLY_LOOP_NESTS=1 to apply)")
            else:
                value, applied, advisory, agree = {}, False, False, None
                if top.value and best and top.value["schedule"] != best \
                        and top.score > self.min_gain:
                    why = (f"{top.value['schedule']} predicted {math.exp(top.score):.2f}x, "
                           f"but the TU's schedule is {best} (one Polly setting per "
                           f"compile): LLVM's schedule stays")
                else:
                    why = (f"no schedule promises a gain: at best {share} of the trees "
                           f"predict {math.exp(max(top.score, 0.0)):.2f}x (needed > "
                           f"{math.exp(self.min_gain):.2f}x): LLVM's schedule stays")
            decisions.append(Decision(
                task=TASK, target=r.target, value=value, default="llvm",
                confidence=agree, reason=f"{why}; loop-nest statistics of the build's IR",
                applied=applied, advisory=advisory, candidates=candidates_of(r)))
        return decisions

    def _versions(self, ctx, rankings, G, moving):
        """With ``adapt_loops``: the TU's schedule (the one whose trees'
        median gains, summed over the functions expecting one, are largest:
        Polly's settings are per compile) as a version of each function
        whose median expects a gain from it, Polly on that clone alone.  The
        median, not the head's low quantile: a version is tried where the
        program runs and kept only where it measures faster.  A function
        none of whose accesses moves with its loops (no unit-stride or
        strided access: zlib's byte loops, pointers walked in a while) gets
        none: a schedule has nothing there to reorder, and no labelled
        program is like it (each has a third or more of such accesses)."""
        import numpy as np  # lazy: numpy, as in rank
        from mirecc.ir.text import function_digests  # lazy: adapt_loops only
        # lazy: adapt_loops only
        from mirecc.runtime.versions import POLLY_TAG, entry, versionable

        median = np.median(G, axis=1)              # (functions, classes)
        digests = function_digests(ctx.ir_text)
        offered = [i for i, r in enumerate(rankings) if moving[i] and r.target in digests
                   and versionable(r.target)]
        if not any(moving):
            raise NoDecision("no function with a nest has an access that moves with its "
                             "loops: a schedule has nothing to reorder", code="no-schedule-gain")
        score = np.clip(median[offered], 0.0, None).sum(axis=0) if offered else None
        if score is None or float(score.max()) <= 0.0:
            raise NoDecision("no schedule's median expects a gain for a function with a nest",
                             code="no-schedule-gain")
        k = int(score.argmax())
        best = self.classes[k]
        source = os.path.basename(ctx.request.source)
        decisions = []
        for i in offered:
            r, gain = rankings[i], float(median[i, k])
            if gain <= 0.0:
                continue
            versions = [{"name": best, "loops": {}, "tag": POLLY_TAG}]
            value = {**entry(source, r.target, digests[r.target], versions), "schedule": best}
            why = (f"function {r.target} with a version scheduled by {best} (Polly on that "
                   f"version alone; the trees' median expects {math.exp(gain):.2f}x LLVM's "
                   f"schedule's speed): the runtime tries it in the program's runs and keeps "
                   f"it only where it measures faster")
            decisions.append(Decision(
                task=TASK, target=r.target, value=value, default="llvm",
                confidence=float((G[i, :, k] > 0.0).mean()),
                reason=f"{why}; loop-nest statistics of the build's IR", applied=True,
                advisory=False, candidates=candidates_of(r)))
        if not decisions:
            raise NoDecision(f"no function's median expects a gain from {best}",
                             code="no-schedule-gain")
        return decisions


def plugin_entry(source, decisions) -> dict:
    """The task's part of a module entry (``Task.plugin_entry``): its functions'
    versions; a schedule on the function itself needs no plugin."""
    return {"versions": {d.target: {k: d.value[k] for k in ("key", "name", "versions")}
                         for d in decisions if is_versions(d)}}


def inject(decisions_by_source: dict, compiler: str, config) -> list[str]:
    """The flags of the applied loop-nest decisions (the task's
    ``Task.injection()``): Polly with the TU's schedule on its chosen functions
    (with ``adapt_loops``: on their clones tagged for it).
    Sources of one command that want different schedules cannot be served
    by one set of flags: ValueError (the plain compile runs)."""
    schedules, functions, clones = set(), set(), set()
    for decisions in decisions_by_source.values():
        for d in decisions:
            if d.applied and d.value:
                schedules.add(d.value["schedule"])
                if is_versions(d):
                    clones.add(d.target)
                else:
                    functions.update(d.value["functions"])
    if not schedules:
        return []
    if len(schedules) > 1:
        raise ValueError(f"the sources of one command want different loop-nest schedules "
                         f"({', '.join(sorted(schedules))})")
    if clones:
        # lazy: adapt_loops only
        from mirecc.runtime.versions import POLLY_TAG, tagged_clones

        return flags(schedules.pop(), sorted(functions),
                     [tagged_clones(f, POLLY_TAG) for f in sorted(clones)])
    return flags(schedules.pop(), sorted(functions))
