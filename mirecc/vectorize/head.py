"""The loop-vectorize head in the driver: a (VF, IF) for each innermost loop.

A head directory ``<heads_dir>/loop-vectorize/`` holds ``spec.yaml`` and
the head's ONNX graph (written by ``mire vectorize-train``)::

    task: loop-vectorize
    languages: [c, c++]
    head: head.onnx            # "features" (N, d) -> "probabilities" (N, classes)
    encoder: "<ModelInfo.cache_version of the encoder it was trained on>"
    features: [loop_embedding, function_embedding, reassociation]
    classes: [default, 1x1, 2x1, ..., 64x16]   # "<VF>x<IF>"; default: LLVM's choice
    min_confidence: 0.3        # below it, LLVM's choice stays
    target: default            # the -march the labels were measured for
    metrics: metrics.json      # optional, not read here

The decisions are applied by the pass plugin (:mod:`mirecc.vectorize.inject`);
a loop whose best class is ``default``, or whose confidence is below
``min_confidence``, keeps LLVM's own choice.  With ``--explain`` each loop
also gets its source line and what LLVM chooses on its own.

Only the standard library is imported at the top (see mirecc.pipeline).
"""
from __future__ import annotations

from mirecc.tasks.onnxhead import OnnxHead
from mirecc.tasks.tu_embedding import _head_error

TASK = "loop-vectorize"
FEATURES = ["loop_embedding", "function_embedding", "reassociation"]
OPT_LEVELS = ("2", "3", "fast")
# flags that choose the target's instruction set: the labels were measured
# for one target, so a TU built for another gets no decisions
TARGET_FLAG_PREFIXES = ("-march=", "-mcpu=", "-mtune=", "-mavx", "-msse", "-mno-avx",
                        "-mno-sse", "-mfma", "-mprefer-vector-width=", "--target=", "-target")


def parse_class(name: str) -> tuple[int, int] | None:
    """'4x2' -> (4, 2); 'default' -> None."""
    if name == "default":
        return None
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


def target_flags(flags) -> list[str]:
    return [f for f in flags if f.startswith(TARGET_FLAG_PREFIXES)]


class LoopVectorizeHead(OnnxHead):
    task = TASK
    FEATURES = FEATURES

    def _validate(self) -> None:
        try:
            parsed = [parse_class(c) for c in self.classes]
        except (TypeError, ValueError, AttributeError):
            raise self._error("'classes' must be 'default' and '<VF>x<IF>' names") from None
        if any(p is not None and (p[0] < 1 or p[1] < 1) for p in parsed):
            raise self._error("'classes' must be 'default' and '<VF>x<IF>' names")
        self.factors = parsed
        self.min_confidence = self.spec.get("min_confidence", 0.0)
        if isinstance(self.min_confidence, bool) or not isinstance(
                self.min_confidence, (int, float)) or not 0 <= self.min_confidence <= 1:
            raise self._error("'min_confidence' must be a number in [0, 1]")
        # off by default: the decisions are then recorded, not applied
        self.apply = bool(getattr(self.config, "apply_loop_decisions", False))

    def _settings(self) -> str:
        # both states named: results cached before applying became a setting
        # (when every confident decision was applied) must not be reused
        return "|apply" if self.apply else "|record"

    # ------------------------------------------------------------- pipeline

    def applies_to(self, request) -> bool:
        return super().applies_to(request) and request.opt_level in OPT_LEVELS

    def why_not(self, request) -> str:
        if not super().applies_to(request):
            return super().why_not(request)
        return f"applies with -O2, -O3 or -Ofast, not -O{request.opt_level}"

    def decide(self, request, summary):
        from mirecc.graph import GraphBuildError
        from mirecc.pipeline import Decision, NoDecision
        from mirecc.vectorize.loops import match_loops, module_loops

        chosen_target = target_flags(request.flags)
        if chosen_target:
            raise NoDecision(f"trained for the default target, not {' '.join(chosen_target)}")
        try:
            every_loop = module_loops(request.bitcode_path)
        except GraphBuildError as exc:
            raise _head_error(f"cannot list the loops of {request.source}: {exc}") from None
        if not every_loop:
            raise NoDecision("no loops")
        emb, how = self._embedding(request)
        # matched over all loops (a function's loops pair up in order), then
        # only the innermost ones decided: the vectorizer only takes those
        matched = match_loops(every_loop, list(emb.loops))
        loops = [lp for lp in every_loop if lp.innermost and lp.id in matched]
        if not loops:
            raise NoDecision("the encoder's IR (clang-14) has other loops than the build's")
        reassoc = reassociation_allowed(request.flags, request.opt_level)
        rows = [[*emb.loops[matched[lp.id]], *emb.functions[lp.function], float(reassoc)]
                for lp in loops]
        P = self._probabilities(rows)
        decisions = []
        for lp, p in zip(loops, P):
            best = int(p.argmax())
            factors, confidence = self.factors[best], float(p[best])
            advisory = False
            if factors is None:
                value, applied = None, False
                why = "the head prefers LLVM's own choice"
            else:
                value = {"vectorize.width": factors[0], "interleave.count": factors[1]}
                confident = confidence >= self.min_confidence
                applied, advisory = confident and self.apply, confident and not self.apply
                why = (f"VF {factors[0]} x IF {factors[1]} predicted" if confident else
                       f"VF {factors[0]} x IF {factors[1]} predicted, but confidence "
                       f"{confidence:.2f} < {self.min_confidence:g}: LLVM's choice stays")
                if advisory:
                    why += (" (recorded only: set apply_loop_decisions: true or "
                            "MIRECC_APPLY_LOOPS=1 to apply)")
            decisions.append(Decision(
                task=TASK, target=lp.id, value=value or {}, default=None,
                confidence=confidence, reason=f"{why}; loop and function embeddings {how}",
                applied=applied, advisory=advisory))
        return decisions


def explain_loop_decisions(result, compiler: str, flags: list[str], source: str):
    """``result`` with each loop-vectorize decision's source line (in its
    reason) and LLVM's own factors (its ``default``), for ``--explain`` only:
    it costs one more front-end run and one more compile of the TU."""
    from dataclasses import replace
    from mirecc.vectorize.loops import (Loop, emit_ir_text, llvm_default_factors,
                                        loop_lines)

    ours = [d for d in result.decisions if d.task == TASK]
    if not ours:
        return result
    loops = []
    for d in ours:
        fn, _, header = d.target.rpartition(":")
        loops.append(Loop(d.target, fn, int(header), 0, True))
    try:
        lines = loop_lines(emit_ir_text(compiler, flags, source), loops)
        defaults = llvm_default_factors(compiler, flags, source)
    except (OSError, RuntimeError):
        return result
    decisions = []
    for d in result.decisions:
        line = lines.get(d.target) if d.task == TASK else None
        if line:
            d = replace(d, default=defaults.get(line), reason=f"{source}:{line}: {d.reason}")
        decisions.append(d)
    return replace(result, decisions=decisions)
