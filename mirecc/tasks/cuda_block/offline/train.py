"""Write the block-shape head (``mire bench cuda --cuda-write-head DIR``): the
statistics forest of :mod:`.bench`, fitted on every labelled case, as
``head.onnx`` (:mod:`mirecc.learn.forest`), ``spec.yaml`` and
``metrics.json`` (the leave-one-program-out figures of the same run).
Same labels, same files: fixed seeds, one thread."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from mirecc.tasks.cuda_block.head import INPUTS, TASK
from mirecc.tasks.cuda_block.offline import bench as B
from mirecc.tasks.cuda_block.offline import cuda_labels as cl

SPEC = """# Written by `mire bench cuda --cuda-write-head heads/cuda-block`; do not edit (head.onnx is trained for exactly these inputs).
task: {task}
languages: [cuda]
head: head.onnx
# the trees' quantile of the predicted log speedup ranks the shapes; the first
# is applied (apply_cuda_block) only where it exceeds min_gain
quantile: {quantile}
min_gain: {min_gain}
shapes: {shapes}
# per program (source file: tunable kernels), the shapes that changed an output
# or failed in the labels at some size: never its candidates
excluded: {excluded}
features:
{features}
"""


def excluded(cases) -> dict[str, list]:
    """Program key -> the shapes wrong or failed at any of its sizes."""
    out: dict[str, set] = {}
    for c in cases:
        if c.bad:
            out.setdefault(c.key, set()).update(c.bad)
    return {k: [list(s) for s in sorted(v)] for k, v in out.items()}


def write_head(cases, results: dict, emb, out: Path) -> None:
    from mirecc.util.fsutil import atomic_write_bytes
    from mirecc.learn.forest import onnx_bytes

    idx = list(range(len(cases)))
    V = B.case_vectors(cases, "statistics", emb, idx, [])
    X, own, shapes = B._rows(cases, V, lambda c: list(c.speed))
    y = np.asarray([math.log(cases[o].speed[s]) for o, s in zip(own, shapes)])
    if X.shape[1] != len(INPUTS):
        raise RuntimeError(f"{X.shape[1]} inputs, the head declares {len(INPUTS)}")
    model = B.fit(X, y)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "head.onnx", onnx_bytes(model, X.shape[1]))
    spec = SPEC.format(task=TASK, quantile=B.QUANTILE, min_gain=B.MIN_GAIN,
                       shapes=json.dumps([list(s) for s in cl.paper_shapes()]),
                       excluded=json.dumps(excluded(cases), sort_keys=True),
                       features="\n".join(f"- {f}" for f in INPUTS))
    atomic_write_bytes(out / "spec.yaml", spec.encode())
    metrics = {"trained_on": {"cases": len(cases), "rows": int(len(y)),
                              "programs": sorted({c.program for c in cases})},
               "forest": {"trees": B.TREES, "min_samples_leaf": B.LEAF, "max_features": 0.5,
                          "seed": 0},
               "leave_one_program_out": {
                   name: {how: {k: v for k, v in r.items() if k != "speeds"}
                          for how, r in modes.items()}
                   for name, modes in results.items()}}
    atomic_write_bytes(out / "metrics.json", json.dumps(metrics, indent=1).encode())
    print(f"mire bench cuda: wrote {out}/head.onnx, spec.yaml, metrics.json")
