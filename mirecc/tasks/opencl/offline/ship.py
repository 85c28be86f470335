"""Train the OpenCL heads the driver uses and write their directories.

A shipped head is trained on every row of its dataset, with the kernel's IR
as the driver sees it in a build: the ``src`` column compiled by clang
(``-x cl -O2 -Xclang -disable-llvm-passes``), not the dataset's LLVM 9 IR.
Its confidences are calibrated: a temperature fitted on the out-of-fold
probabilities of the same folds scales the logits (argmax, hence accuracy,
unchanged).  Its ``metrics.json`` holds that calibration and the
cross-validated figures of the same head measured by ``mire bench`` in the
same run (the ``src:`` rows).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from mirecc.util.fsutil import replace_dir
from mirecc.tasks.opencl.offline import datasets as D
from mirecc.learn import embeddings as F
from mirecc.tasks.opencl.offline import protocol as P
from mirecc.tasks.opencl.offline.mlp import (HeadConfig, fit_temperature, onnx_bytes, out_of_fold_proba,
                                train_head, with_temperature)
from mirecc.util.modelfiles import load_model

DEVMAP_TASK = "opencl-device-mapping"
COARSENING_TASK = "opencl-thread-coarsening"
PLATFORM_NAMES = {"amd": "AMD Tahiti 7970 GPU vs Intel Core i7-3820 CPU",
                  "nvidia": "NVIDIA GTX 970 GPU vs Intel Core i7-3820 CPU"}


def _spec_yaml(spec: dict) -> str:
    return ("# Written by `mire bench " + spec.pop("_command") + " --write-heads DIR`; "
            "do not edit (head.onnx is trained for exactly these inputs).\n"
            + yaml.safe_dump(spec, sort_keys=False))


def _calibrated_head(X, y, folds, config, classes):
    """The head trained on every row, its confidences made honest by a
    temperature fitted on out-of-fold probabilities (same folds as the
    bench), so that --explain's "confidence 0.9" means right ~9 times in 10."""
    calibration = fit_temperature(out_of_fold_proba(X, y, folds, config, classes), y, classes)
    head = with_temperature(train_head(X, y, config, classes), calibration["temperature"])
    return head, calibration


def write_task_heads(task: str, root: Path, encoder_dir: Path, config: HeadConfig,
                     results: dict, out: Path, cache: Path | None) -> list[Path]:
    encoder = load_model(encoder_dir).cache_version
    written = []
    if task == "devmap":
        for plat in D.PLATFORMS:
            rows = D.load_devmap(root, plat)
            vec, _ = F.embed_kernels(F.kernel_texts(rows, "src"), encoder_dir, cache)
            keep = [r for r in rows if r["src_key"] in vec]
            X = np.hstack([np.stack([vec[r["src_key"]] for r in keep]),
                           P.devmap_extra_features(keep)])
            y = [r["oracle"] for r in keep]
            folds = np.asarray(D.devmap_folds(rows))[[r["src_key"] in vec for r in rows]]
            head, calibration = _calibrated_head(X, y, folds, config, ["CPU", "GPU"])
            measured = results["platforms"][plat]["results"]
            spec = {"_command": "devmap", "task": DEVMAP_TASK, "languages": ["cl"],
                    "head": "head.onnx", "encoder": encoder,
                    "features": ["embedding", "log1p_transfer", "log1p_wgsize"],
                    "classes": ["CPU", "GPU"], "platform": PLATFORM_NAMES[plat],
                    "assumed": {"transfer": int(np.median([r["transfer"] for r in keep])),
                                "wgsize": int(np.median([r["wgsize"] for r in keep]))},
                    "trained_on": {"rows": len(keep), "ir": "clang -x cl, as the driver"},
                    "metrics": "metrics.json"}
            metrics = {"calibration": calibration,
                       "cross_validated_on_src": measured["src: OpenCL source via clang"],
                       "dataset_ir_same_rows": measured["src: dataset IR, same rows"],
                       "config": config.to_dict()}
            written.append(replace_dir(Path(out) / f"devmap-{plat}", {
                "spec.yaml": _spec_yaml(spec).encode(), "head.onnx": onnx_bytes(head),
                "metrics.json": json.dumps(metrics, indent=1).encode()}))
    elif task == "coarsening":
        rows = D.load_coarsening(root)
        vec, _ = F.embed_kernels(F.kernel_texts(rows, "src"), encoder_dir, cache)
        keep = [r for r in rows if r["src_key"] in vec]
        X = np.hstack([np.stack([vec[r["src_key"]] for r in keep]), P.coarsening_gpu_onehot(keep)])
        y = [r["oracle_cf"] for r in keep]
        head, calibration = _calibrated_head(X, y, P.coarsening_folds(keep, "row"), config,
                                             list(P.FACTORS))
        spec = {"_command": "coarsening", "task": COARSENING_TASK, "languages": ["cl"],
                "head": "head.onnx", "encoder": encoder,
                "features": ["embedding", "gpu_onehot"], "classes": list(P.FACTORS),
                "gpus": list(D.GPUS), "trained_on": {"rows": len(keep),
                                                     "ir": "clang -x cl, as the driver"},
                "metrics": "metrics.json"}
        metrics = {"calibration": calibration,
                   "cross_validated_on_src": results["results"].get("src: OpenCL source via clang"),
                   "dataset_ir_same_rows": results["results"].get("src: dataset IR, same rows"),
                   "config": config.to_dict()}
        written.append(replace_dir(Path(out) / "coarsening", {
            "spec.yaml": _spec_yaml(spec).encode(), "head.onnx": onnx_bytes(head),
            "metrics.json": json.dumps(metrics, indent=1).encode()}))
    else:
        raise ValueError(f"unknown task {task!r}")
    return written
