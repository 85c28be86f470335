"""Test helper: a loop-vectorize head made here, for the tests of the head
itself (tests/tasks/loop_vectorize/test_vectorize_head.py) and of the driver
with a head installed (tests/driver/test_direct.py, test_promises.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def make_head(root: Path, answer: str, min_gain: float = 0.0,
              features: tuple[str, ...] = ("loop_statistics", "reassociation")) -> Path:
    """A loop-vectorize head whose every tree predicts a gain of 0.5 (log)
    for ``answer`` and a loss for every other class, for every loop
    ('default': a loss for every class)."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    pytest.importorskip("onnx")
    import yaml
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.util.modelfiles import load_model
    from mirecc.tasks.loop_vectorize.features import NAMES
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes
    from mirecc.tasks.loop_vectorize.offline.train import CLASSES

    directory = root / "loop-vectorize"
    directory.mkdir(parents=True)
    width = {"loop_embedding": 256, "function_embedding": 256,
             "loop_statistics": len(NAMES), "reassociation": 1}
    d = sum(width[f] for f in features)
    X = np.random.default_rng(0).normal(size=(8, d)).astype(np.float32)
    Y = np.full((8, len(CLASSES)), -0.5)
    if answer != "default":
        Y[:, CLASSES.index(answer)] = 0.5
    forest = fit_forest(X, Y, ForestConfig(trees=5))
    (directory / "head.onnx").write_bytes(onnx_bytes(forest, d))
    spec = {"task": "loop-vectorize", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version,
            "features": list(features), "loop_statistics": NAMES, "classes": CLASSES,
            "quantile": 0.3, "min_gain": min_gain, "target": "default"}
    (directory / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root
