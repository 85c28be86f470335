"""Write the loop-nests head (``mire bench nests --nests-write-head DIR``): the
statistics forest of :mod:`.bench`, fitted on every labelled case, as
``head.onnx`` (:mod:`mirecc.learn.forest`), ``spec.yaml`` and
``metrics.json`` (the leave-one-program-out figures of the same run).
Same labels, same files: fixed seeds, one thread."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mirecc.tasks.loop_nests.features import FEATURES
from mirecc.tasks.loop_nests.head import TASK
from mirecc.tasks.loop_nests.offline import bench as B
from mirecc.tasks.loop_nests.schedules import SPACE

SPEC = """# Written by `mire bench nests --nests-write-head heads/loop-nests`; do not edit (head.onnx is trained for exactly these inputs).
task: {task}
languages: [c, c++]
head: head.onnx
# the head reads loop-nest statistics, no embedding (none added to them in the bench)
encoder: none
features: [loop_nest_statistics]
# the trees' quantile of each schedule's predicted log speedup over LLVM's ranks
# them; the first is applied (apply_loop_nests) only where it exceeds min_gain,
# the apply gate calibrated leave one program out (metrics.json "gate")
quantile: {quantile}
min_gain: {min_gain}
classes: {classes}
loop_nest_statistics:
{features}
"""


def write_head(cases, results: dict, gate, out: Path) -> None:
    """``gate``: :func:`.bench.gate_sweep`'s (rows, chosen row, refusal): the
    chosen threshold is the spec's ``min_gain``; with none, ``refuse_forcing``."""
    from mirecc.util.fsutil import atomic_write_bytes
    from mirecc.learn.gates import gate_document
    from mirecc.learn.forest import onnx_bytes

    rows, chosen, refusal = gate

    idx = list(range(len(cases)))
    X = B.case_vectors(cases, "statistics", {}, idx, [])
    Y = B.targets(cases)
    model = B.fit(X, Y)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "head.onnx", onnx_bytes(model, X.shape[1]))
    spec = SPEC.format(task=TASK, quantile=B.QUANTILE,
                       min_gain=chosen.threshold if chosen else B.MIN_GAIN,
                       classes=json.dumps(list(SPACE)),
                       features="\n".join(f"- {f}" for f in FEATURES))
    if refusal:
        spec += f"refuse_forcing: {json.dumps(refusal)}\n"
    atomic_write_bytes(out / "spec.yaml", spec.encode())
    metrics = {"trained_on": {"cases": len(cases), "programs": sorted({c.program for c in cases}),
                              "mean_target": np.round(Y.mean(0), 4).tolist()},
               "forest": {"trees": B.TREES, "min_samples_leaf": B.LEAF, "max_features": 0.5,
                          "seed": 0},
               "gate": gate_document(f"leave one program out over {len(cases)} cases of "
                                     f"{len({c.program for c in cases})} programs", "program",
                                     B.MIN_GAIN, rows, chosen, refusal),
               "leave_one_program_out": {
                   name: {how: {k: v for k, v in r.items() if k != "speeds"}
                          for how, r in modes.items()}
                   for name, modes in results.items()}}
    atomic_write_bytes(out / "metrics.json", json.dumps(metrics, indent=1).encode())
    print(f"mire bench nests: wrote {out}/head.onnx, spec.yaml, metrics.json")
