"""The OpenCL task heads in the driver: device mapping and thread coarsening.

Each ranks its classes (devices, coarsening factors) by the head's
probability; the decision is the most probable one.

A head directory ``<heads_dir>/<name>/`` holds ``spec.yaml`` and the head's
ONNX graph (written by :func:`mirecc.tasks.opencl.offline.mlp.write_onnx`)::

    task: opencl-device-mapping          # or opencl-thread-coarsening
    languages: [cl]
    head: head.onnx                      # "features" (N, d) -> "probabilities" (N, classes)
    encoder: "<ModelInfo.cache_version of the encoder it was trained on>"
    features: [embedding, log1p_transfer, log1p_wgsize]   # coarsening: [embedding, gpu_onehot]
    classes: [CPU, GPU]                  # coarsening: [1, 2, 4, 8, 16, 32]
    platform: "..."                      # device mapping: free text
    gpus: [Cypress, Tahiti, Fermi, Kepler]   # coarsening: order of the one-hot
    assumed: {transfer: 123456, wgsize: 256} # device mapping: when the build does not say
    metrics: metrics.json                # optional, not read here

Both heads are advisory: their decisions change nothing in the compile
(``applied=False, advisory=True``); they are shown by ``--explain`` and
written to the record file (``record`` / ``MIRECC_RECORD``).

This module imports only the standard library at the top: the pipeline
imports it when a head of one of these tasks is loaded, and numpy,
llvmlite and onnxruntime only when a head decides.
"""
from __future__ import annotations

import math

from mirecc.taskapi.api import NoDecision
from mirecc.taskapi.onnxhead import OnnxHead
from mirecc.taskapi.context import head_error as _head_error
from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of

DEVICE_MAPPING = "opencl-device-mapping"
THREAD_COARSENING = "opencl-thread-coarsening"


def kernel_names(ir_text: str) -> list[str]:
    """Names of the OpenCL kernels (``spir_kernel`` functions) defined in the module."""
    from mirecc.ir.text import functions  # lazy: the IR reader (re, subprocess), as the context's

    return [name for name, define, _ in functions(ir_text) if " spir_kernel " in define]


class OpenCLHead(OnnxHead):
    """What the two OpenCL heads share: their kernels and module embedding."""

    def _prepare(self, ctx):
        """Kernels, embedding and how it was made; checks the encoder first."""
        kernels = kernel_names(ctx.ir_text)     # the context's one read of the IR
        if not kernels:
            raise NoDecision("no OpenCL kernel (spir_kernel function) in the module",
                             code="no-kernels")
        emb, how = self._embedding(ctx)
        return kernels, emb.module, how

    def _ranking(self, target: str, key: str, p, extra: dict | None = None):
        """The head's classes for ``target``, most probable first."""
        order = sorted(range(len(self.classes)), key=lambda i: -float(p[i]))
        return Ranking(target, tuple(Candidate({key: self.classes[i], **(extra or {})},
                                               float(p[i])) for i in order))


class DeviceMappingHead(OpenCLHead):
    """CPU or GPU for the module's kernels, from [embedding, log1p(transfer),
    log1p(work-group size)] (Grewe et al.'s task, as in MIREncoder)."""

    task = DEVICE_MAPPING
    FEATURES = ["embedding", "log1p_transfer", "log1p_wgsize"]

    def _validate(self) -> None:
        assumed = self.spec.get("assumed")
        if not isinstance(assumed, dict):
            raise self._error("'assumed' must map transfer and wgsize to the values used "
                              "when the build does not give them")
        for key in ("transfer", "wgsize"):
            value = assumed.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not value > 0 or not math.isfinite(value):
                raise self._error(f"'assumed.{key}' must be a positive number, got {value!r}")
        self.assumed = assumed
        platform = self.spec.get("platform")
        self.platform = platform if isinstance(platform, str) and platform.strip() else None

    def _setting(self, key: str):
        """(value, where it came from) for ``transfer`` or ``wgsize``."""
        configured = getattr(self.config, f"opencl_{key}", None) if self.config else None
        if configured is not None:
            return configured, f"configured: opencl_{key}"
        return self.assumed[key], (f"assumed by the head; set opencl_{key} or "
                                   f"MIRECC_OPENCL_{key.upper()} to give the real value")

    def _settings(self) -> str:
        return "|transfer={}|wgsize={}".format(self._setting("transfer")[0],
                                               self._setting("wgsize")[0])

    def rank(self, ctx):
        kernels, embedding, how = self._prepare(ctx)
        transfer, wgsize = self._setting("transfer")[0], self._setting("wgsize")[0]
        row = [*embedding.tolist(), math.log1p(transfer), math.log1p(wgsize)]
        p = self._probabilities([row])[0]
        # with the AMD and the NVIDIA head installed, the value says which is which
        extra = {"platform": self.platform} if self.platform else {}
        return [self._ranking(", ".join(kernels), "device", p, extra)]

    def decide(self, ctx, rankings):
        transfer, transfer_from = self._setting("transfer")
        wgsize, wgsize_from = self._setting("wgsize")
        [ranking] = rankings
        best = ranking.candidates[0]
        on = f" on {self.platform}" if self.platform else ""
        reason = (f"{best.value['device']} predicted{on} for a launch transferring "
                  f"{transfer:g} bytes ({transfer_from}) with work-group size {wgsize:g} "
                  f"({wgsize_from}); module embedding {ctx.embedding()[1]}")
        return [Decision(task=self.task, target=ranking.target, value=dict(best.value),
                         default=None, confidence=float(best.score), reason=reason,
                         applied=False, advisory=True, candidates=candidates_of(ranking))]


class ThreadCoarseningHead(OpenCLHead):
    """The thread-coarsening factor of the module's kernels for each GPU of
    the head (or the configured one), from [embedding, one-hot of the GPU]
    (Magni et al.'s task, as in MIREncoder)."""

    task = THREAD_COARSENING
    FEATURES = ["embedding", "gpu_onehot"]

    def _validate(self) -> None:
        self.gpus = self._strings("gpus")

    def _settings(self) -> str:
        gpu = getattr(self.config, "opencl_gpu", None) if self.config else None
        return f"|gpu={gpu}" if gpu else ""

    def _gpus(self):
        configured = getattr(self.config, "opencl_gpu", None) if self.config else None
        if configured is not None and configured not in self.gpus:
            raise _head_error(f"opencl_gpu is '{configured}', which the head "
                              f"{self.spec_path} does not know (its GPUs: "
                              f"{', '.join(self.gpus)})")
        return configured, [configured] if configured else self.gpus

    def rank(self, ctx):
        configured, gpus = self._gpus()
        kernels, embedding, how = self._prepare(ctx)
        rows = []
        for gpu in gpus:
            onehot = [1.0 if g == gpu else 0.0 for g in self.gpus]
            rows.append([*embedding.tolist(), *onehot])
        P = self._probabilities(rows)
        return [self._ranking(", ".join(kernels), "coarsening_factor", p, {"gpu": gpu})
                for gpu, p in zip(gpus, P)]

    def decide(self, ctx, rankings):
        configured, _ = self._gpus()
        which = ("GPU configured: opencl_gpu" if configured else
                 "one decision per GPU of the head; set opencl_gpu to pick one")
        decisions = []
        for ranking in rankings:
            best = ranking.candidates[0]
            factor, gpu = best.value["coarsening_factor"], best.value["gpu"]
            decisions.append(Decision(
                task=self.task, target=ranking.target,
                value={"coarsening_factor": factor, "gpu": gpu},
                default={"coarsening_factor": 1}, confidence=float(best.score),
                reason=f"coarsening factor {factor} predicted for {gpu} "
                       f"({which}); module embedding {ctx.embedding()[1]}",
                applied=False, advisory=True, candidates=candidates_of(ranking)))
        return decisions
