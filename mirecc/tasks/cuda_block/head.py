"""The block-shape head: a forest over (source, shape) rows that predicts each
candidate shape's log speedup over the source's own (``heads/cuda-block``,
written by ``mire bench cuda --write-head``).

A source's tunable kernels get one shape together, as they were timed: the
paper's shapes (``spec.yaml``'s ``shapes``), each applied per kernel with
the launch's fixed axis kept (:func:`kernel_value`), those giving a block of
more than 1024 threads, the source's own, or one that changed an output or
failed for this program in the labels (``excluded``, by source file and
kernel names), left out.  The trees'
``quantile`` of the predicted log gain ranks them; the first is applied
(``apply_cuda_block``) only where it exceeds ``min_gain``, the apply gate
calibrated leave one program out (:mod:`mirecc.learn.gates`, the sweep in
``metrics.json``'s ``"gate"``).  A head whose gate could not be calibrated
has ``refuse_forcing`` in its spec: its shapes are recorded, never applied,
and the reason says why.  The spec's
``features`` must be :data:`..features.SOURCE_FEATURES`, the source's shape
and :data:`..features.SHAPE_FEATURES`, in that order.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from mirecc.taskapi.registry import default_heads_dirs, find_head_specs, spec_task
from mirecc.tasks.cuda_block import features as F

TASK = "cuda-block"
INPUTS = [*F.SOURCE_FEATURES, "log2_source_x", "log2_source_y", *F.SHAPE_FEATURES]


class HeadError(Exception):
    """The head cannot be read or run; ``str()`` names the file."""


class BlockHead:
    def __init__(self, directory: Path, spec: dict, config=None):
        self.directory = Path(directory)
        where = self.directory / "spec.yaml"
        if spec.get("features") != INPUTS:
            raise HeadError(f"{where}: 'features' must be {INPUTS}")
        try:
            self.shapes = [(int(x), int(y)) for x, y in spec["shapes"]]
            self.quantile = float(spec["quantile"])
            self.min_gain = float(spec["min_gain"])
        except (KeyError, TypeError, ValueError):
            raise HeadError(f"{where}: needs 'shapes' ([x, y] pairs), 'quantile' and "
                            f"'min_gain' numbers") from None
        excluded = spec.get("excluded") or {}
        if not isinstance(excluded, dict):
            raise HeadError(f"{where}: 'excluded' must map a program to its shapes")
        try:
            self.excluded = {str(k): {(int(x), int(y)) for x, y in v}
                             for k, v in excluded.items()}
        except (TypeError, ValueError):
            raise HeadError(f"{where}: 'excluded' must map a program to [x, y] pairs") \
                from None
        # a gate its training could not calibrate (mirecc.learn.gates): record only
        self.refusal = spec.get("refuse_forcing")
        if self.refusal is not None and (not isinstance(self.refusal, str) or not self.refusal):
            raise HeadError(f"{where}: 'refuse_forcing' must say why the head's shapes are "
                            f"not applied")
        self.onnx_path = self.directory / str(spec.get("head", "head.onnx"))
        if not self.onnx_path.is_file():
            raise HeadError(f"{self.onnx_path}: the head file named in {where} is missing")
        self.name = self.directory.name

    def rank(self, feats: dict, source: tuple[int, int],
             allowed) -> list[tuple[tuple[int, int], float]]:
        """The shapes ``allowed(shape)`` accepts, best first, with their
        predicted speedup over the source's (the trees' quantile)."""
        # lazy: numpy and ONNX Runtime (~300 ms), only when the head ranks
        import numpy as np
        from mirecc.taskapi.onnxhead import run_onnx

        shapes = [s for s in self.shapes if allowed(s)]
        if not shapes:
            return []
        y_settable = bool(feats["y_settable"])
        rows = [[feats[f] for f in F.SOURCE_FEATURES] + F.source_shape_features(*source)
                + F.shape_features(s[0], s[1] if y_settable else source[1], feats["log2_row"])
                for s in shapes]
        try:
            gains = np.asarray(run_onnx(self.onnx_path, rows))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise HeadError(f"{self.onnx_path}: cannot run the head: {exc}") from None
        q = np.quantile(gains.reshape(len(rows), -1), self.quantile, axis=1)
        order = sorted(range(len(shapes)), key=lambda i: -q[i])
        return [(shapes[i], float(math.exp(q[i]))) for i in order]


def installed_head(config) -> BlockHead | None:
    """The installed cuda-block head (the configured heads folders), or None."""
    import yaml  # lazy: PyYAML (~40 ms); nvcc's compile step imports this module

    for spec in find_head_specs(default_heads_dirs(config)):
        if spec_task(spec.spec_path) == TASK:
            path = Path(spec.spec_path)
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise HeadError(f"{path}: cannot read: {' '.join(str(exc).split())}") \
                    from None
            return BlockHead(Path(spec.directory), data if isinstance(data, dict) else {},
                             config)
    return None


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def kernel_value(block, shape: tuple[int, int]) -> tuple[int, int] | None:
    """The block ``shape`` gives a kernel (``launches.KernelBlock``): each axis
    its macro can set takes the shape's, the others keep the source's; None
    where the result is unknown, over 1024 threads, refused by the kernel's
    own limits (a knob's: :meth:`.knobs.KnobBlock.refuses`, e.g. a 1-D knob
    takes 32..1024 in powers of two, a square one equal sides) or not
    tunable at all."""
    if not block.tunable:
        return None
    value = []
    for axis, macro, default in zip((0, 1), block.macros, block.default):
        value.append(shape[axis] if macro else _number(default))
    if None in value or value[0] * value[1] > 1024:
        return None
    refuses = getattr(block, "refuses", None)
    if refuses is not None and refuses((value[0], value[1])):
        return None
    return value[0], value[1]


def shape_blocks(blocks, shape: tuple[int, int]) -> tuple | None:
    """The blocks one program shape gives the tunable kernels' ``blocks``
    (:func:`kernel_value` each), or None where a kernel cannot take it or
    none changes: a shape is applied to every tunable kernel or not at all."""
    values = tuple(kernel_value(b, shape) for b in blocks)
    if None in values or all(v == (_number(b.default[0]), _number(b.default[1]))
                             for v, b in zip(values, blocks)):
        return None
    return values


def source_block(plan, tunable: list[str]) -> tuple[int, int] | None:
    """The first tunable kernel's block as the source has it (numbers)."""
    first = plan.blocks[tunable[0]].default
    x, y = _number(first[0]), _number(first[1])
    return (x, y) if x and y else None


def program_key(source: str, kernels) -> str:
    """How the head's ``excluded`` names a program: its source's file name
    and its tunable kernels' names."""
    return f"{os.path.basename(source)}:{','.join(sorted(kernels))}"


def rank_plan(plan, ir_text: str, head: BlockHead) -> list[tuple[tuple[int, int], float, bool]]:
    """The head's shapes for ``plan``'s source, best first, each with its
    predicted speedup and whether that clears the head's ``min_gain``;
    every tunable kernel's ``ranking`` is filled with the blocks they give
    it.  ValueError where the source has nothing to rank."""
    feats, tunable = F.plan_features(plan, ir_text)
    source = source_block(plan, tunable)
    if source is None:
        raise ValueError("the source's block is not a pair of numbers")
    blocks = [plan.blocks[k] for k in tunable]

    # shapes that changed an output or failed for this program in the labels
    excluded = head.excluded.get(program_key(plan.source, tunable), set())

    def allowed(shape):
        return shape not in excluded and shape_blocks(blocks, shape) is not None
    ranked, seen = [], set()
    for shape, gain in head.rank(feats, source, allowed):
        values = tuple(kernel_value(b, shape) for b in blocks)
        if values not in seen:          # two shapes that give every kernel the same block
            seen.add(values)
            ranked.append((shape, gain, math.log(gain) > head.min_gain))
    for b in blocks:
        b.ranking = [("%dx%d" % kernel_value(b, s), round(g, 4)) for s, g, _ in ranked]
    return ranked
