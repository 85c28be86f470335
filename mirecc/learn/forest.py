"""The loop-vectorize head's model: a forest of regression trees that
predicts, for each forced (VF, IF), the log speedup over LLVM's default.

Each tree's prediction is kept (not only their mean): the driver applies a
factor only when a low quantile of the trees' predictions still promises a
gain, which keeps it from forcing factors on loops unlike the training
loops, where the trees disagree.

Training uses scikit-learn's ``ExtraTreesRegressor`` (``bench`` extra); the
driver runs the exported ONNX graph (ONNX-ML ``TreeEnsembleRegressor``,
which every onnxruntime build has)::

    features (N, d) float32
      -> TreeEnsembleRegressor: the number of the leaf reached, one output per tree
      -> + tree offsets -> Gather from the (trees * leaves, classes) table
      -> tree_gains (N, trees, classes)

Storing leaf numbers, not per-output leaf weights, keeps the file small:
one table of leaf values instead of a weight attribute per leaf and class.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mirecc.taskapi.onnxhead import run_onnx
from mirecc.util.fsutil import atomic_write_bytes

OUTPUT = "tree_gains"


@dataclass(frozen=True)
class ForestConfig:
    trees: int = 100
    min_samples_leaf: int = 3
    max_features: float = 0.5
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def fit_forest(X: np.ndarray, Y: np.ndarray, config: ForestConfig = ForestConfig()):
    """An ``ExtraTreesRegressor`` of X (n, d) -> Y (n, classes)."""
    # lazy: scikit-learn (~1.5 s) only to train; heads import this module when compiling
    from sklearn.ensemble import ExtraTreesRegressor

    model = ExtraTreesRegressor(n_estimators=config.trees,
                                min_samples_leaf=config.min_samples_leaf,
                                max_features=config.max_features,
                                random_state=config.seed, n_jobs=1)
    return model.fit(np.asarray(X, np.float32), np.asarray(Y, np.float64))


def tree_predictions(model, X: np.ndarray) -> np.ndarray:
    """(N, trees, classes): every tree's prediction."""
    X = np.asarray(X, np.float32)
    return np.stack([t.predict(X) for t in model.estimators_], axis=1).reshape(
        len(X), len(model.estimators_), -1)


def onnx_bytes(model, n_features: int) -> bytes:
    """``model`` as the ONNX graph in the module docstring, checked against
    :func:`tree_predictions` on random inputs spread like the training data.

    ``model`` may also be a list of forests with the same number of trees
    over the same features: their classes are concatenated (tree i of each
    gives tree i's row), as a task with several forests (one per input
    size) ships one head file; per class, the trees are still one forest's."""
    # lazy: onnx (~1.3 s) only to export; heads import this module when compiling
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    models = model if isinstance(model, (list, tuple)) else [model]
    if len({len(m.estimators_) for m in models}) != 1:
        raise ValueError("forests concatenated by class need the same number of trees")
    nodes, tables, parts = [], [], []
    for k, forest in enumerate(models):
        name = f"f{k}_" if len(models) > 1 else ""
        node, table, offsets = _forest_nodes(forest, name)
        nodes += node
        tables += [numpy_helper.from_array(table, f"{name}table"),
                   numpy_helper.from_array(offsets, f"{name}offsets")]
        parts.append(f"{name}gains" if len(models) > 1 else OUTPUT)
    if len(models) > 1:
        nodes.append(helper.make_node("Concat", parts, [OUTPUT], axis=2))
    n_trees = len(models[0].estimators_)
    n_classes = sum(m.estimators_[0].tree_.value.shape[1] for m in models)
    graph = helper.make_graph(
        nodes, "mirecc_loop_forest",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", n_features])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                       ["N", n_trees, n_classes])],
        tables)
    onnx_model = helper.make_model(graph, producer_name="mirecc", opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    onnx_model.ir_version = 8          # readable by every onnxruntime we support
    onnx.checker.check_model(onnx_model)
    data = onnx_model.SerializeToString()
    _check(data, models, n_features)
    return data


def _forest_nodes(model, prefix: str):
    """One forest's nodes (features -> ``<prefix>gains``, or :data:`OUTPUT`
    without a prefix), its leaf table and its trees' offsets in the table."""
    # lazy: onnx (~1.3 s) only to export; heads import this module when compiling
    from onnx import TensorProto, helper

    trees = model.estimators_
    n_classes = trees[0].tree_.value.shape[1]
    # leaves are numbered 0.. within each tree; a tree's rows in the table
    # start at tree * width
    width = max(int((t.tree_.children_left == -1).sum()) for t in trees)
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids",
                             "nodes_values", "nodes_modes", "nodes_truenodeids",
                             "nodes_falsenodeids", "target_treeids", "target_nodeids",
                             "target_ids", "target_weights")}
    table = np.zeros((len(trees) * width, n_classes), np.float32)
    for t, est in enumerate(trees):
        tree = est.tree_
        leaves = 0
        for node in range(tree.node_count):
            leaf = tree.children_left[node] == -1
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(0 if leaf else int(tree.feature[node]))
            attrs["nodes_values"].append(0.0 if leaf else float(tree.threshold[node]))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(0 if leaf else int(tree.children_left[node]))
            attrs["nodes_falsenodeids"].append(0 if leaf else int(tree.children_right[node]))
            if leaf:
                # this tree's output (target t) is the leaf's number
                attrs["target_treeids"].append(t)
                attrs["target_nodeids"].append(node)
                attrs["target_ids"].append(t)
                attrs["target_weights"].append(float(leaves))
                table[t * width + leaves] = tree.value[node, :, 0]
                leaves += 1
    offsets = (np.arange(len(trees), dtype=np.int64) * width)[None, :]
    out = f"{prefix}gains" if prefix else OUTPUT
    nodes = [
        helper.make_node("TreeEnsembleRegressor", ["features"], [f"{prefix}leaf_float"],
                         domain="ai.onnx.ml", n_targets=len(trees), aggregate_function="SUM",
                         post_transform="NONE", **attrs),
        helper.make_node("Cast", [f"{prefix}leaf_float"], [f"{prefix}leaf"],
                         to=TensorProto.INT64),
        helper.make_node("Add", [f"{prefix}leaf", f"{prefix}offsets"], [f"{prefix}row"]),
        helper.make_node("Gather", [f"{prefix}table", f"{prefix}row"], [out], axis=0),
    ]
    return nodes, table, offsets


def _check(data: bytes, models: list, n_features: int) -> None:
    rng = np.random.default_rng(0)
    # thresholds are where the inputs matter: sample around them
    thresholds = np.concatenate([t.tree_.threshold[t.tree_.children_left != -1]
                                 for model in models for t in model.estimators_])
    X = rng.choice(thresholds, size=(64, n_features)) if len(thresholds) else \
        np.zeros((64, n_features))
    X = (X + rng.normal(scale=1e-3, size=X.shape)).astype(np.float32)
    got = np.asarray(run_onnx(data, X))
    want = np.concatenate([tree_predictions(model, X) for model in models], axis=2)
    diff = float(np.abs(got - want).max())
    if diff > 1e-4:
        raise RuntimeError(f"ONNX forest differs from scikit-learn's by {diff:.2e}")


def choose(tree_gains, quantile: float, min_gain: float):
    """Per row of ``tree_gains`` (N, trees, classes): (class index or None
    for LLVM's choice, the chosen quantile gain, the share of trees that
    predict more than ``min_gain`` for that class)."""
    G = np.asarray(tree_gains, dtype=np.float64)
    Q = np.quantile(G, quantile, axis=1)
    out = []
    for g, q in zip(G, Q):
        best = int(q.argmax())
        agree = float((g[:, best] > min_gain).mean())
        out.append((best if q[best] > min_gain else None, float(q[best]), agree))
    return out


def write_forest_head(out, model, n_features: int, spec: str, metrics: dict,
                      forest: dict, results: dict, who: str) -> None:
    """Write a forest head into ``out``: ``head.onnx`` (:func:`onnx_bytes`),
    ``spec.yaml`` (``spec``) and ``metrics.json`` (``metrics``' ``trained_on``,
    the forest's settings ``forest``, the rest of ``metrics``, and the
    leave-one-program-out ``results`` of the bench that trained it, each
    mode's per-case speeds left out);
    ``who``: the command, in the line that says what was written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "head.onnx", onnx_bytes(model, n_features))
    atomic_write_bytes(out / "spec.yaml", spec.encode())
    metrics = {"trained_on": metrics["trained_on"], "forest": forest, **metrics,
               "leave_one_program_out": {
                   name: {how: {k: v for k, v in r.items() if k != "speeds"}
                          for how, r in modes.items()}
                   for name, modes in results.items()}}
    atomic_write_bytes(out / "metrics.json", json.dumps(metrics, indent=1).encode())
    print(f"{who}: wrote {out}/head.onnx, spec.yaml, metrics.json")
