"""CUDA block-shape decisions in a decisions profile (:mod:`mirecc.taskapi.profile`):

    cuda-block  src/gemm.cu  gemm_kernel@LARGE_DATASET  0b1c2d3e4f5a6b7c  64x4  # 1.10x

target: a kernel's name as written in the source, optionally with an
input-size class ``@MACRO``: the entry then applies only to compiles that
define MACRO (``-DLARGE_DATASET``), and wins over a classless one; digest:
the kernel's function in the device IR; value: the block shape ``XxY``.
``mirecc-nvcc`` applies the entries (:mod:`.launches`).

``mire tune`` tries the shapes of each tunable kernel that ``mirecc-nvcc``
recorded (:meth:`BlockKind.recorded`, with the kernel's digest: the tune
keeps no device IR): the head's ranking, else :data:`FALLBACK`, the
source's own shape left out, each with the head's predicted log speedup
over the source's shape (the site's ``gains``; none predicted for the
fallback).  The host's perf samples cannot see a kernel's time (it is the
GPU's), so the kernels are of equal weight (``sampled`` false): each
takes an equal part of the run.
"""
from __future__ import annotations

import math
import re

from mirecc.taskapi.profile import ProfileKind

#: threads per block every CUDA GPU since compute capability 2.0 allows
MAX_BLOCK_THREADS = 1024
_KERNEL_TARGET = re.compile(r"[A-Za-z_]\w*(@[A-Za-z_]\w*)?")
_BLOCK_SHAPE = re.compile(r"([1-9]\d{0,4})x([1-9]\d{0,4})")
#: the task whose entries these are (:data:`.launches.TASK`)
TASK = "cuda-block"
#: shapes ``mire tune`` tries, in this order, at a kernel the head ranked
#: none for (the source's own shape and shapes on an axis the launch fixes
#: left out); 8x8 and 16x16 are the best fixed shapes on PolyBench-ACC's
#: labels (docs/cuda.md)
FALLBACK = ("32x8", "8x8", "16x16", "32x32", "64x1", "128x1", "256x1", "32x4", "16x8")
AXES = ("x", "y")


def _shape(axes) -> dict:
    """A block's x and y as written -> {"x": .., "y": ..}, integers where digits."""
    return {a: int(v) if str(v).isdigit() else str(v) for a, v in zip(AXES, axes)}


class BlockKind(ProfileKind):
    front_end = "mirecc-nvcc"
    noun = "kernel"
    target_help = "a kernel name, optionally with an input-size class <kernel>@<MACRO>"

    def check_target(self, target):
        return bool(_KERNEL_TARGET.fullmatch(target))

    def function(self, target):
        return target.partition("@")[0]

    def size_class(self, target):
        return target.partition("@")[2] or None

    def parse_value(self, text):
        shape = _BLOCK_SHAPE.fullmatch(text)
        if not shape:
            raise ValueError("expected a thread-block shape XxY of positive integers "
                             "(e.g. 32x8)")
        x, y = int(shape[1]), int(shape[2])
        if x * y > MAX_BLOCK_THREADS:   # the launch would fail: the output would change
            raise ValueError(f"{x * y} threads per block, more than CUDA's "
                             f"{MAX_BLOCK_THREADS}")
        return {"x": x, "y": y}

    def format_value(self, value):
        return f"{value['x']}x{value['y']}"

    def recorded(self, plan, digests: dict[str, str]) -> list[dict]:
        """The decisions a record line (``MIRECC_RECORD``) carries for one
        CUDA source's plan (:class:`.launches.SourcePlan`): one per tunable
        kernel whose device function is in ``digests`` (kernel name ->
        digest, :func:`mirecc.frontend.nvcc.kernel_digests`), with its digest, the
        source's shape (``default``), the axes no decision can set
        (``fixed``), the shape in effect and the head's ranking as
        candidates ([shape, predicted speedup], best first)."""
        applied = {self.function(d["target"]) for d in plan.decisions if d.get("applied")}
        out = []
        for name, block in plan.blocks.items():
            if block.tunable is None or name not in digests:
                continue
            ranked = []
            for shape, speedup in block.ranking:
                try:
                    ranked.append([self.parse_value(shape), float(speedup)])
                except (TypeError, ValueError):   # a shape no launch may take
                    continue
            out.append({"task": TASK, "target": name, "digest": digests[name],
                        "value": _shape(block.shape), "default": _shape(block.default),
                        "fixed": [a for a, m in zip(AXES, block.macros) if m is None],
                        "applied": name in applied, "advisory": False, "confidence": None,
                        "reason": block.origin, "candidates": ranked})
            knob = getattr(block, "knob", None)
            if knob is not None:    # a knob's own limits: the only shapes it may take
                out[-1]["allowed"] = [_shape(s) for s in knob.shapes()]
        return out

    def site(self, decision, source, digests, depths):
        function = self.function(decision["target"])
        if function not in digests:
            return None
        default = decision.get("default") or {}
        fixed = decision.get("fixed") or ()

        allowed = decision.get("allowed")

        def applicable(value):   # another shape than the source's, on its tunable axes
            return value != default and all(str(value[a]) == str(default.get(a))
                                            for a in fixed) and (
                allowed is None or value in allowed)
        ranked = [(v, s) for v, s in decision.get("candidates") or [] if applicable(v)]
        ranked = [(v, s) for i, (v, s) in enumerate(ranked)
                  if v not in [w for w, _ in ranked[:i]]]
        # the head's scores are predicted speedups over the source's shape
        gains = [math.log(s) if s > 0 else 0.0 for _, s in ranked]
        candidates = [v for v, _ in ranked]
        if not candidates:
            candidates = [v for v in map(self.parse_value, FALLBACK) if applicable(v)]
            # a knob's own shapes after the fallback's (a 1-D knob: 32..1024)
            candidates += [v for v in allowed or () if applicable(v)]
            candidates = [c for i, c in enumerate(candidates) if c not in candidates[:i]]
            gains = [0.0] * len(candidates)
        if not candidates:
            return None
        # a kernel runs on the GPU: perf's host samples cannot weigh it
        return {"task": decision["task"], "source": source, "function": function,
                "target": decision["target"], "digest": digests[function],
                "candidates": candidates, "gains": gains,
                "score": max((s for _, s in ranked), default=0.0),
                "depth": 1, "order": self.order, "sampled": False}


KIND = BlockKind()
