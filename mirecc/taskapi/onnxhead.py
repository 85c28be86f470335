"""The base of the driver's task heads: a head directory with ``spec.yaml``
and an ONNX graph (``features`` (N, d) -> ``probabilities`` (N, classes), or
a task's own outputs), trained on one encoder.

ONNX Runtime sessions are kept per head file for the life of the process,
so the per-user server loads each head once.

Only the standard library is imported at the top (see mirecc.taskapi.records).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mirecc.taskapi.context import encoder_model
from mirecc.taskapi.context import head_error as _head_error
from mirecc.taskapi.registry import spec_language
from mirecc.util.caches import process_cache

# (path, size, mtime) -> onnxruntime.InferenceSession
_SESSIONS = process_cache("onnx sessions")


def run_onnx(model: bytes | str | Path, X, input_name: str = "features"):
    """The first output of the ONNX graph ``model`` (a file, or its bytes)
    for rows ``X``; one session per file and process."""
    # lazy: numpy and ONNX Runtime (~300 ms), only when a head runs its graph
    import numpy as np
    import onnxruntime as ort

    key = None
    if not isinstance(model, bytes):
        st = os.stat(model)
        key = (str(model), st.st_size, st.st_mtime_ns)
    sess = _SESSIONS.get(key) if key else None
    if sess is None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        sess = ort.InferenceSession(model if key is None else str(model), opts,
                                    providers=["CPUExecutionProvider"])
        if key:
            _SESSIONS[key] = sess
    return sess.run(None, {input_name: np.asarray(X, np.float32)})[0]


class OnnxHead:
    """What the driver's heads share: the spec, the ONNX head, the encoder check.

    A subclass sets ``task`` and ``FEATURES``, may accept other feature lists
    in ``_features_ok``, may check more of the spec in ``_validate`` and adds
    the build settings it reads to the cache key in ``_settings``."""

    task = ""
    FEATURES: list[str] = []
    #: True: the spec may name any non-empty subset of FEATURES, in their order
    FEATURES_MAY_BE_SUBSET = False

    def __init__(self, directory: Path, spec: dict, config=None):
        self.directory = Path(directory)
        self.spec_path = self.directory / "spec.yaml"
        self.name = self.directory.name
        self.spec = spec
        self.config = config
        self.languages = self._strings("languages")
        head = spec.get("head")
        if not isinstance(head, str) or not head:
            raise self._error("'head' must name the head's ONNX file")
        self.onnx_path = self.directory / head
        if not self.onnx_path.is_file():
            raise _head_error(f"{self.onnx_path}: head file named in {self.spec_path} "
                              f"is missing")
        self.encoder = spec.get("encoder")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise self._error("'encoder' must be the cache_version of the encoder the "
                              "head was trained on")
        self.features = spec.get("features")
        if not self._features_ok(self.features):
            raise self._error(f"'features' is {self.features!r}; a {self.task} head takes "
                              f"{self.FEATURES!r}")
        self.classes = spec.get("classes")
        if not isinstance(self.classes, list) or len(self.classes) < 2 or not all(
                isinstance(c, (str, int, float)) and not isinstance(c, bool)
                for c in self.classes):
            raise self._error("'classes' must be a list of at least two names or numbers")
        # a gate its training could not calibrate (mirecc.learn.gates): record only
        self.refusal = spec.get("refuse_forcing")
        if self.refusal is not None and (not isinstance(self.refusal, str) or not self.refusal):
            raise self._error("'refuse_forcing' must say why the head's decisions are not applied")
        self._validate()
        digest = hashlib.sha256()
        for path in (self.spec_path, self.onnx_path):
            try:
                digest.update(path.read_bytes())
            except OSError as exc:
                raise _head_error(f"{path}: cannot read: {exc.strerror}") from None
        # the cache key: the head's files and the build settings it reads
        self.version = f"{self.task}/{self.name}@{digest.hexdigest()[:16]}{self._settings()}"

    # ----------------------------------------------------------- validation

    def _error(self, message: str):
        return _head_error(f"{self.spec_path}: {message}")

    def _strings(self, key: str) -> list[str]:
        value = self.spec.get(key)
        if not isinstance(value, list) or not value or not all(
                isinstance(v, str) and v for v in value):
            raise self._error(f"'{key}' must be a list of names")
        return value

    def _features_ok(self, features) -> bool:
        if self.FEATURES_MAY_BE_SUBSET:   # any non-empty subset of FEATURES, in its order
            return (isinstance(features, list) and bool(features)
                    and features == [f for f in self.FEATURES if f in features])
        return features == self.FEATURES

    def _number(self, key: str, lo: float, hi: float) -> float:
        """The spec's number ``key``, which must lie in [lo, hi]."""
        value = self.spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not lo <= value <= hi:
            raise self._error(f"'{key}' must be a number in [{lo:g}, {hi:g}]")
        return float(value)

    def _tree_gains(self, rows):
        """Run a forest head (:mod:`mirecc.learn.forest`) on
        feature rows: every tree's gain per class, (N, trees, classes)."""
        import numpy as np  # lazy: as in run_onnx

        try:
            G = np.asarray(run_onnx(self.onnx_path, np.asarray(rows, dtype=np.float32)))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise _head_error(f"{self.onnx_path}: cannot run the head: {exc}") from None
        if G.ndim != 3 or G.shape[0] != len(rows) or G.shape[2] != len(self.classes) \
                or not np.all(np.isfinite(G)):
            raise _head_error(f"{self.onnx_path}: the head returned gains of shape "
                              f"{G.shape}, expected ({len(rows)}, trees, {len(self.classes)})")
        return G

    def _validate(self) -> None:
        pass

    def _settings(self) -> str:
        return ""

    # ------------------------------------------------------------- pipeline

    def applies_to(self, request) -> bool:
        return spec_language(request.language) in self.languages

    def why_not(self, request) -> str:
        return f"applies to {', '.join(self.languages)} sources, not {request.language}"

    def _embedding(self, ctx):
        """The TU's embeddings and how they were made, after checking that the
        encoder in use is the one the head was trained on."""
        info = encoder_model(self.config)
        if info.cache_version != self.encoder:
            raise self._error(f"the head was trained on encoder {self.encoder}, but the "
                              f"encoder in use is {info.cache_version} ({info.directory})")
        return ctx.embedding()

    def rank(self, ctx) -> list:
        """Candidates per target, best first (see :mod:`mirecc.taskapi.api`)."""
        raise NotImplementedError

    def decide(self, ctx, rankings) -> list:
        raise NotImplementedError

    def _probabilities(self, rows):
        """Run the ONNX head on raw feature rows; (N, len(classes)) probabilities."""
        import numpy as np  # lazy: as in run_onnx

        X = np.asarray(rows, dtype=np.float32)
        try:
            P = np.asarray(run_onnx(self.onnx_path, X))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise _head_error(f"{self.onnx_path}: cannot run the head: {exc}") from None
        if P.shape != (len(X), len(self.classes)) or not np.all(np.isfinite(P)):
            raise _head_error(f"{self.onnx_path}: the head returned probabilities of shape "
                              f"{P.shape}, expected ({len(X)}, {len(self.classes)})")
        return P
