"""The loop-vectorize head in the driver: a (VF, IF) for each innermost loop.

A head directory ``<heads_dir>/loop-vectorize/`` holds ``spec.yaml`` and
the head's ONNX graph (written by ``mire vectorize-train``)::

    task: loop-vectorize
    languages: [c, c++]
    head: head.onnx            # "features" (N, d) -> "tree_gains" (N, trees, classes)
    encoder: "<ModelInfo.cache_version of the encoder it was trained on>"
    features: [loop_statistics, reassociation]   # an ordered subset of ALL_FEATURES
    loop_statistics: [share_load, ...]           # mirecc.tasks.loop_vectorize.features.NAMES
    classes: [1x1, 1x2, ..., 64x16]              # "<VF>x<IF>" forced by the plugin
    quantile: 0.3              # of the trees' predicted log speedups, per class
    min_gain: 0.02             # the quantile must promise more, else LLVM's choice stays
    target: default            # the -march the labels were measured for
    metrics: metrics.json      # optional, not read here

Each tree predicts, per class, the log speedup of forcing it over LLVM's
own choice (:mod:`mirecc.learn.forest`).  A loop gets the class whose
``quantile`` of the trees' predictions is highest, if that exceeds
``min_gain``: where the trees disagree (a loop unlike the training loops)
the low quantile keeps LLVM's choice.  The decision's confidence is the
share of trees that predict more than ``min_gain`` for the chosen class.

With ``adapt_loops`` a function holding ranked loops is compiled instead
in ``adapt_versions`` versions (:meth:`LoopVectorizeHead._versions`): LLVM's
own and, in version ``i``, each loop's ``i``-th best class, where the
trees' median expects a gain for some loop; the adaptive runtime linked
into the program chooses among them in its runs (``runtime/adapt``).

The decisions are applied by the pass plugin (:mod:`mirecc.plugin.decisions`).
With ``--explain`` each loop also gets its source line and what LLVM
chooses on its own.

Only the standard library is imported at the top (see mirecc.taskapi.records).
"""
from __future__ import annotations

import math
import os

from mirecc.runtime.versions import adapting, is_versions, unroll_of, versions_of
from mirecc.taskapi.api import NoDecision
from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of
from mirecc.taskapi.registry import task as declared_task
from mirecc.taskapi.onnxhead import OnnxHead
from mirecc.tasks.loop_vectorize.features import NAMES, callees_by_loop, statistics_by_loop

TASK = "loop-vectorize"
#: every input a head may take, in the order its feature rows are built
ALL_FEATURES = ["loop_embedding", "function_embedding", "loop_statistics", "reassociation"]
EMBEDDING_FEATURES = ("loop_embedding", "function_embedding")
# flags that choose the target's instruction set: the labels were measured
# for one target, so a TU built for another gets no decisions
TARGET_FLAG_PREFIXES = ("-march=", "-mcpu=", "-mtune=", "-mavx", "-msse", "-mno-avx",
                        "-mno-sse", "-mfma", "-mprefer-vector-width=", "--target=", "-target")


def parse_class(name: str) -> tuple[int, int]:
    """'4x2' -> (4, 2)."""
    vf, _, ic = name.partition("x")
    return int(vf), int(ic)


def reassociation_allowed(flags, opt_level: str) -> bool:
    """Did the user allow floating-point reassociation (-ffast-math,
    -fassociative-math, -Ofast)?  The last flag of each pair wins, as in clang."""
    allowed = opt_level == "fast"
    for flag in flags:
        if flag in ("-ffast-math", "-fassociative-math", "-funsafe-math-optimizations"):
            allowed = True
        elif flag in ("-fno-fast-math", "-fno-associative-math",
                      "-fno-unsafe-math-optimizations"):
            allowed = False
    return allowed


def vectorizer_enabled(flags) -> bool:
    """False when the user turned the loop vectorizer off (-fno-vectorize,
    or its GCC spelling -fno-tree-vectorize); the last flag wins, as in clang."""
    enabled = True
    for flag in flags:
        if flag in ("-fvectorize", "-ftree-vectorize"):
            enabled = True
        elif flag in ("-fno-vectorize", "-fno-tree-vectorize"):
            enabled = False
    return enabled


def target_flags(flags) -> list[str]:
    return [f for f in flags if f.startswith(TARGET_FLAG_PREFIXES)]


class LoopVectorizeHead(OnnxHead):
    task = TASK
    FEATURES = ALL_FEATURES
    FEATURES_MAY_BE_SUBSET = True

    @staticmethod
    def attribute(decisions, split, extra):
        """Which of its applied decisions changed a decided compile's object
        when more than one went in through the flags (:func:`attribute_loop_decisions`)."""
        return attribute_loop_decisions(decisions, split, extra)

    def _validate(self) -> None:
        try:
            self.factors = [parse_class(c) for c in self.classes]
        except (TypeError, ValueError, AttributeError):
            raise self._error("'classes' must be '<VF>x<IF>' names") from None
        if any(vf < 1 or ic < 1 for vf, ic in self.factors):
            raise self._error("'classes' must be '<VF>x<IF>' names")
        if "loop_statistics" in self.features and self.spec.get("loop_statistics") != NAMES:
            raise self._error("'loop_statistics' names other statistics than this mirecc "
                              "computes (retrain the head with mire vectorize-train)")
        self.quantile = self._number("quantile", 0.0, 1.0)
        self.min_gain = self._number("min_gain", 0.0, 10.0)
        # off by default: the decisions are then recorded, not applied
        self.apply = bool(getattr(self.config, "apply_loop_decisions", False))
        self.adapt = adapting(self.config)
        self.versions = versions_of(self.config)
        self.unroll = unroll_of(self.config)

    def _settings(self) -> str:
        if self.adapt:
            return f"|adapt={self.versions}|unroll={self.unroll}"
        # both states named: results cached before applying became a setting
        # (when every confident decision was applied) must not be reused
        return "|apply" if self.apply else "|record"

    # ------------------------------------------------------------- pipeline

    def applies_to(self, request) -> bool:
        # a vectorizer the user turned off stays off: nothing to decide
        return (super().applies_to(request) and request.opt_level in declared_task(TASK).opt_levels
                and vectorizer_enabled(request.flags))

    def why_not(self, request) -> str:
        if not super().applies_to(request):
            return super().why_not(request)
        if not vectorizer_enabled(request.flags):
            return "the loop vectorizer is off (-fno-vectorize): the user's choice stays"
        return f"applies with -O2, -O3 or -Ofast, not -O{request.opt_level}"

    def rank(self, ctx):
        """Per innermost loop, every class by the ``quantile`` of the trees'
        predicted log speedup over LLVM's choice, best first; LLVM's own
        choice (``{}``, score 0) is among them."""
        # lazy: subprocess (~15 ms); the driver imports this module for plugin_entry alone
        from mirecc.tasks.loop_vectorize.loops import match_loops

        request = ctx.request
        chosen_target = target_flags(request.flags)
        if chosen_target:
            raise NoDecision(f"trained for the default target, not {' '.join(chosen_target)}",
                             code="target-flags")
        every_loop = ctx.loops     # NoDecision for a TU of data alone
        if not every_loop:
            raise NoDecision("no loops", code="no-loops")
        # the vectorizer only takes innermost loops
        loops = [lp for lp in every_loop if lp.innermost]
        how = "loop statistics of the build's IR"
        if any(f in EMBEDDING_FEATURES for f in self.features):
            emb, how_emb = self._embedding(ctx)
            # matched over all loops (a function's loops pair up in order)
            matched = match_loops(every_loop, list(emb.loops))
            loops = [lp for lp in loops if lp.id in matched]
            if not loops:
                raise NoDecision("the encoder's IR (clang-14) has other loops than the "
                                 "build's", code="loops-unmatched")
            how = f"loop and function embeddings {how_emb}" + (
                f", {how}" if "loop_statistics" in self.features else "")
        statistics = (statistics_by_loop(ctx.graph, {lp.id for lp in loops})
                      if "loop_statistics" in self.features else {})
        reassoc = float(reassociation_allowed(request.flags, request.opt_level))
        rows = []
        for lp in loops:
            parts = {"reassociation": [reassoc], "loop_statistics": statistics.get(lp.id)}
            if any(f in EMBEDDING_FEATURES for f in self.features):
                parts["loop_embedding"] = emb.loops[matched[lp.id]]
                parts["function_embedding"] = emb.functions[lp.function]
            rows.append([x for f in self.features for x in parts[f]])
        import numpy as np  # lazy: numpy, only when the head ranks

        G = self._tree_gains(rows)
        Q = np.quantile(G, self.quantile, axis=1)
        rankings = []
        for lp, q in zip(loops, Q):
            candidates = [Candidate({}, 0.0)] + [
                Candidate({"vectorize.width": vf, "interleave.count": ic}, float(score))
                for (vf, ic), score in zip(self.factors, q.tolist())]
            candidates.sort(key=lambda c: -c.score)
            rankings.append(Ranking(lp.id, tuple(candidates)))
        # for decide: every tree's gains and how the inputs were made
        ctx.notes[self.name] = (G, how)
        return rankings

    def decide(self, ctx, rankings):
        """Force the best class only where its quantile gain exceeds
        ``min_gain`` (:func:`choose`, as in training): where the trees
        disagree, LLVM's choice stays."""
        from mirecc.learn.forest import choose  # lazy: numpy, as in rank

        G, how = ctx.notes[self.name]
        if self.adapt:
            return self._versions(ctx, rankings, G, how)
        share = f"{1 - self.quantile:.0%}"
        decisions = []
        for ranking, (best, gain, agree) in zip(rankings, choose(G, self.quantile,
                                                                 self.min_gain)):
            if best is None:
                value, applied, advisory = {}, False, False
                why = (f"no factors promise a gain: at best {share} of the trees predict "
                       f">= {math.exp(gain):.3f}x LLVM's speed (needed > "
                       f"{math.exp(self.min_gain):.3f}x): LLVM's choice stays")
            else:
                vf, ic = self.factors[best]
                value = {"vectorize.width": vf, "interleave.count": ic}
                applied, advisory = self.apply, not self.apply
                why = (f"VF {vf} x IF {ic}: {share} of the trees predict >= "
                       f"{math.exp(gain):.3f}x the speed of LLVM's choice")
                if advisory:
                    why += (" (recorded only: set apply_loop_decisions: true or "
                            "MIRECC_APPLY_LOOPS=1 to apply)")
            decisions.append(Decision(
                task=TASK, target=ranking.target, value=value, default=None,
                confidence=agree, reason=f"{why}; {how}", applied=applied,
                advisory=advisory, candidates=candidates_of(ranking)))
        return decisions

    def _versions(self, ctx, rankings, G, how):
        """Per function holding ranked loops, one decision: its versions
        beside LLVM's own (``adapt_versions`` in all), version ``i`` forcing
        each of its loops to that loop's ``i``-th best class in the head's
        order, and last (``adapt_unroll``) one with LLVM's factors and each
        of its loops unrolled that many times: no head ranks unroll counts,
        so the runtime judges it after the head's factors.  A function is
        versioned only where the trees' median
        expects some gain for one of its loops that could be vectorized
        (one calling a function defined elsewhere cannot: its versions
        would be the same), as versions are code (the binary grows by the
        function's size per version); its key in the runtime's store is its
        code digest and its versions."""
        import numpy as np  # lazy: numpy, only when the head ranks
        from mirecc.ir.text import function_digests  # lazy: adapt_loops only
        from mirecc.runtime.versions import ARMS, entry, versionable  # lazy: adapt_loops only

        digests = function_digests(ctx.ir_text)
        source = os.path.basename(ctx.request.source)
        median = np.median(G, axis=1)          # (loops, classes)
        # a loop that calls a function defined elsewhere (printf, rand, ...)
        # is not vectorized whatever its factors: its versions would be the same
        callees = callees_by_loop(ctx.graph, {r.target for r in rankings})
        by_function: dict[str, list] = {}
        for ranking, gains in zip(rankings, median):
            if any(not c.startswith("llvm.") and c not in digests
                   for c in callees.get(ranking.target, ())):
                continue
            fn, _, header = ranking.target.rpartition(":")
            by_function.setdefault(fn, []).append((int(header), ranking, float(gains.max())))
        decisions = []
        for fn, loops in by_function.items():
            if not versionable(fn) or fn not in digests:
                continue
            expected = max(g for _, _, g in loops)
            if expected <= 0:
                continue
            versions = []
            for i in range(1, self.versions):
                factors = {}
                for header, ranking, _ in loops:
                    ours = [c.value for c in ranking.candidates if c.value]
                    if i <= len(ours):
                        factors[str(header)] = ours[i - 1]
                if not factors:
                    break
                name = "+".join(f"{f['vectorize.width']}x{f['interleave.count']}"
                                for f in factors.values())
                if len(name) > 31:
                    name = f"v{i}-{name[:26]}"
                versions.append({"name": name, "loops": factors})
            if not versions:
                continue
            if self.unroll and len(versions) + 1 < ARMS:
                versions.append({"name": f"u{self.unroll}",
                                 "loops": {str(h): {"unroll.count": self.unroll}
                                           for h, _, _ in loops}})
            value = entry(source, fn, digests[fn], versions)
            why = (f"function {fn} in {len(versions) + 1} versions (LLVM's, "
                   f"{', '.join(v['name'] for v in versions)}; the head's order, its median "
                   f"expecting up to {math.exp(expected):.3f}x for a loop): the runtime "
                   f"tries them in the program's runs and keeps what measures faster")
            decisions.append(Decision(
                task=TASK, target=fn, value=value, default=None, confidence=1.0,
                reason=f"{why}; ranked from {how}", applied=True, advisory=False,
                candidates=()))
        if not decisions:
            raise NoDecision("no function's loops are expected to gain from other factors",
                             code="no-expected-gain")
        return decisions


def explain_loop_decisions(result, ctx):
    """``result`` with each loop-vectorize decision's source line (in its
    reason) and LLVM's own factors (its ``default``), for ``--explain`` only:
    it costs one front-end run with line tables and one compile with the
    vectorizer's remarks (the driver caches the explained result)."""
    # lazy: the graph's loop table (numpy) and subprocess, --explain only
    from mirecc.graph.irinfo import Loop
    from mirecc.tasks.loop_vectorize.loops import (emit_ir_text, llvm_default_factors,
                                                   loop_lines)

    ours = [d for d in result.decisions if d.task == TASK and not is_versions(d)]
    if not ours:
        return result
    loops = []
    for d in ours:
        fn, _, header = d.target.rpartition(":")
        loops.append(Loop(d.target, fn, int(header), 0, True))
    request = ctx.request
    compiler, flags, source = request.compiler, list(request.flags), request.source
    try:
        lines = loop_lines(emit_ir_text(compiler, flags, source), loops)
        defaults = llvm_default_factors(compiler, flags, source)
    except (OSError, RuntimeError):
        return result
    decisions = []
    for d in result.decisions:
        line = lines.get(d.target) if d.task == TASK else None
        if line:
            d = d.replace(default=defaults.get(line), reason=f"{source}:{line}: {d.reason}")
        decisions.append(d)
    return result.replace(decisions=decisions)


def attribute_loop_decisions(decisions, split, extra):
    """Which applied loop decisions changed the build (the head's
    ``attribute``, :func:`mirecc.tu.mlpath.attribute`): two compiles to nowhere, run side by side, print the
    plugin's and the vectorizer's remarks: the user's command (what LLVM
    does on its own) and the decided one (where the plugin set each
    decision, or why it left it, and what the vectorizer then did).  A
    decision the plugin left (an unsafe loop, the user's pragma), whose
    loop it marked but was gone before the vectorizer (fully unrolled), or
    whose loop the vectorizer treated as it does on its own, is not
    applied.  Where the remarks cannot tell (several loops at one place; a
    loop the plugin did not find, as when -Rpass's line tables make clang
    outline an OpenMP region differently), it stays applied."""
    # lazy: subprocess, only when several applied decisions went in through the flags
    import subprocess
    from mirecc.tasks.loop_vectorize.loops import (BOTH_REMARKS, VECTORIZER_REMARKS,
                                                   plugin_report, vectorizer_factors)

    if not any(d.task == TASK and d.applied and not is_versions(d) for d in decisions):
        return decisions
    plain = ["-fno-color-diagnostics"]

    def start(flags):
        return subprocess.Popen(split.own_command("/dev/null", "/dev/null", flags),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    procs = [start([*extra, *BOTH_REMARKS, *plain]),
             start([*VECTORIZER_REMARKS, *plain])]
    decided, own = [p.communicate()[1] for p in procs]
    if any(p.returncode != 0 for p in procs):
        return decisions
    placed, left = plugin_report(decided)
    with_, without = vectorizer_factors(decided, column=True), vectorizer_factors(own, column=True)
    out = []
    for d in decisions:
        if d.task == TASK and d.applied and not is_versions(d):
            where = placed.get(d.target, [])
            why = left.get(d.target)
            if why and why.startswith("no loop has"):
                pass                    # not found in this compile: cannot tell
            elif why:
                d = d.replace(applied=False, reason=f"{d.reason}; the plugin left it: {why}")
            elif not where:
                d = d.replace(applied=False, same_as_compiler=True,
                              reason=f"{d.reason}; the loop was gone before the vectorizer")
            elif len(where) == 1 and where[0] in with_ and with_[where[0]] == without.get(where[0]):
                d = d.replace(applied=False, same_as_compiler=True, default=without[where[0]])
        out.append(d)
    return out


def plugin_entry(source, decisions) -> dict:
    """Applied loop decisions of one source -> its ``loops`` entry (one
    loop's factors) and ``versions`` entry (a function's versions)."""
    return {"loops": {d.target: d.value for d in decisions if not is_versions(d)},
            "versions": {d.target: d.value for d in decisions if is_versions(d)}}
