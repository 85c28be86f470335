"""Task heads: a small MLP over [frozen encoder embedding, task features].

Training needs torch (``pip install 'mirecc[train]'``); a trained head is
plain numpy arrays (:class:`MLPHead`) that run without torch, and ship as
ONNX (:func:`write_onnx`, checked against the numpy forward pass) for the
driver, which runs them in ONNX Runtime.

Input standardisation (mean and standard deviation of the training rows) is
part of the head, so callers pass raw features.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mirecc.taskapi.onnxhead import run_onnx
from mirecc.util.fsutil import atomic_write_bytes


@dataclass(frozen=True)
class HeadConfig:
    """Hyper-parameters; the defaults are the ones every head uses (chosen on
    fold seeds other than the evaluation's, see ``mire bench devmap``)."""
    hidden: int = 64
    layers: int = 1
    epochs: int = 300
    lr: float = 1e-2
    weight_decay: float = 1e-3
    dropout: float = 0.0
    seed: int = 0
    ensemble: int = 1      # members averaged (each its own seed)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MLPHead:
    """A trained head: standardisation, then Linear-ReLU layers, then a
    Linear to ``len(classes)`` logits; an ensemble averages probabilities."""
    mean: np.ndarray
    std: np.ndarray
    members: list[list[tuple[np.ndarray, np.ndarray]]]   # per member: (W (out,in), b)
    classes: list = field(default_factory=list)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        Z = (np.asarray(X, np.float32) - self.mean) / self.std
        total = 0.0
        for layers in self.members:
            h = Z
            for i, (W, b) in enumerate(layers):
                h = h @ W.T + b
                if i < len(layers) - 1:
                    h = np.maximum(h, 0.0)
            h = h - h.max(1, keepdims=True)
            p = np.exp(h)
            total = total + p / p.sum(1, keepdims=True)
        return (total / len(self.members)).astype(np.float32)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.classes)[self.predict_proba(X).argmax(1)]


def train_head(X: np.ndarray, y, config: HeadConfig = HeadConfig(),
               classes: list | None = None, sample_weight: np.ndarray | None = None) -> MLPHead:
    """Fit a head on rows ``X`` (n, d) with labels ``y`` (any hashable
    values; ``classes`` fixes their order, default: sorted distinct labels).
    Full-batch AdamW; deterministic for a given config (one torch thread)."""
    # lazy: torch costs ~2 s to import; only training needs it
    import torch

    X = np.asarray(X, np.float32)
    classes = list(classes) if classes is not None else sorted(set(np.asarray(y).tolist()))
    index = {c: i for i, c in enumerate(classes)}
    target = torch.tensor([index[v] for v in np.asarray(y).tolist()], dtype=torch.long)
    mean = X.mean(0)
    std = X.std(0)
    std = np.where(std > 1e-6, std, 1.0).astype(np.float32)   # constant columns stay 0
    Xt = torch.tensor((X - mean) / std)
    weight = None if sample_weight is None else torch.tensor(sample_weight, dtype=torch.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny matrices: threads only add noise and overhead
    try:
        members = [_fit_member(Xt, target, len(classes), config, config.seed + m, weight)
                   for m in range(config.ensemble)]
    finally:
        torch.set_num_threads(threads)
    return MLPHead(mean.astype(np.float32), std, members, classes)


def _fit_member(Xt, target, n_classes, config, seed, weight):
    # lazy: torch costs ~2 s to import; only training needs it
    import torch
    from torch import nn

    torch.manual_seed(seed)
    mods, width = [], Xt.shape[1]
    for _ in range(config.layers):
        mods += [nn.Linear(width, config.hidden), nn.ReLU(), nn.Dropout(config.dropout)]
        width = config.hidden
    net = nn.Sequential(*mods, nn.Linear(width, n_classes))
    opt = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for _ in range(config.epochs):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(Xt), target, reduction="none")
        loss = (loss * weight).sum() / weight.sum() if weight is not None else loss.mean()
        loss.backward()
        opt.step()
    return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
            for m in net if isinstance(m, nn.Linear)]


def write_onnx(head: MLPHead, path: Path, input_name: str = "features") -> None:
    """Write :func:`onnx_bytes` to ``path`` atomically."""
    atomic_write_bytes(Path(path), onnx_bytes(head, input_name))


def onnx_bytes(head: MLPHead, input_name: str = "features") -> bytes:
    """The head as an ONNX graph: ``features`` (N, d) float32 ->
    ``probabilities`` (N, classes); checked against :meth:`predict_proba`."""
    # lazy: onnx costs ~1.3 s to import; only onnx_bytes() needs it
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(head.mean, "mean"), numpy_helper.from_array(head.std, "std")]
    nodes = [helper.make_node("Sub", [input_name, "mean"], ["centred"]),
             helper.make_node("Div", ["centred", "std"], ["z"])]
    member_outputs = []
    for m, layers in enumerate(head.members):
        h = "z"
        for i, (W, b) in enumerate(layers):
            w, bias, out = f"m{m}_w{i}", f"m{m}_b{i}", f"m{m}_h{i}"
            inits += [numpy_helper.from_array(W.astype(np.float32), w),
                      numpy_helper.from_array(b.astype(np.float32), bias)]
            nodes.append(helper.make_node("Gemm", [h, w, bias], [out], transB=1))
            if i < len(layers) - 1:
                nodes.append(helper.make_node("Relu", [out], [out + "_relu"]))
                out += "_relu"
            h = out
        nodes.append(helper.make_node("Softmax", [h], [f"m{m}_p"], axis=1))
        member_outputs.append(f"m{m}_p")
    inits.append(numpy_helper.from_array(np.float32(1.0 / len(member_outputs)), "inv_members"))
    nodes.append(helper.make_node("Sum", member_outputs, ["p_sum"]))
    nodes.append(helper.make_node("Mul", ["p_sum", "inv_members"], ["probabilities"]))
    d, k = head.mean.shape[0], len(head.classes)
    graph = helper.make_graph(
        nodes, "mirecc_head",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["N", d])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", k])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="mirecc")
    model.ir_version = 8          # readable by every onnxruntime we support
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    check = np.random.default_rng(0).normal(size=(16, d)).astype(np.float32) * head.std + head.mean
    got = run_onnx(data, check, input_name)
    diff = float(np.abs(got - head.predict_proba(check)).max())
    if diff > 1e-4:
        raise RuntimeError(f"ONNX head differs from the numpy head by {diff:.2e}")
    return data


def out_of_fold_proba(X: np.ndarray, y, folds: np.ndarray, config: HeadConfig,
                      classes: list) -> np.ndarray:
    """Each row's class probabilities from a head trained without its fold."""
    X = np.asarray(X, np.float32)
    y = np.asarray(y)
    proba = np.zeros((len(X), len(classes)), np.float32)
    for k in np.unique(folds):
        test = folds == k
        proba[test] = train_head(X[~test], y[~test], config, classes).predict_proba(X[test])
    return proba


def fit_temperature(proba: np.ndarray, y, classes: list) -> dict:
    """The temperature T that makes out-of-fold probabilities honest
    (Guo et al., 2017: minimise the negative log-likelihood of softmax(z/T)),
    by a grid search over log T; with the NLL and expected calibration error
    (10 bins) before and after."""
    index = {c: i for i, c in enumerate(classes)}
    target = np.asarray([index[v] for v in np.asarray(y).tolist()])
    logits = np.log(np.clip(proba, 1e-12, 1.0))   # softmax(log p) = p, up to a constant

    def scaled(T):
        z = logits / T
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def nll(p):
        return float(-np.mean(np.log(np.clip(p[np.arange(len(p)), target], 1e-12, 1.0))))

    def ece(p, bins=10):
        conf, right = p.max(1), p.argmax(1) == target
        edges = np.linspace(0, 1, bins + 1)
        total = 0.0
        for lo, hi in zip(edges[:-1], edges[1:]):
            inside = (conf > lo) & (conf <= hi)
            if inside.any():
                total += inside.mean() * abs(conf[inside].mean() - right[inside].mean())
        return float(total)

    grid = np.exp(np.linspace(np.log(0.25), np.log(20.0), 400))
    best = min(grid, key=lambda T: nll(scaled(T)))
    return {"temperature": float(best), "nll_before": nll(proba), "nll_after": nll(scaled(best)),
            "ece_before": ece(proba), "ece_after": ece(scaled(best)), "rows": len(proba)}


def with_temperature(head: MLPHead, temperature: float) -> MLPHead:
    """The head with its logits divided by ``temperature`` (the last layer's
    weights and bias scaled: the ONNX graph stays the same shape)."""
    members = [[*layers[:-1], (layers[-1][0] / temperature, layers[-1][1] / temperature)]
               for layers in head.members]
    return MLPHead(head.mean, head.std, members, head.classes)
