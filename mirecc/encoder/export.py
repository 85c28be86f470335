"""Export a pretrained MIREncoder to ONNX: ``mire export``.

    mire export --model .work/pretrain/small/model.pt --out mirecc/data/encoder

The encoder is split in two graphs so that inference can deduplicate
statements, look them up in a cache and bucket the rest by length before
the transformer runs (:mod:`mirecc.encoder.runtime`):

- ``statements.onnx``: ``ids`` (S, L) int64 -> ``embedding`` (S, C) float32,
  dynamic S and L (L <= 64);
- ``graph.onnx``: ``stmt_emb`` (S, C), ``node_stmt`` (N,), ``node_type``
  (N,), ``edges_control`` / ``edges_data`` / ``edges_call`` (2, E) ->
  ``node_embeddings`` (3, N, D): node embeddings of the GCN per subgraph.

Both come from the dynamo exporter at opset 18; after export each is run in
onnxruntime against torch and refused if any output differs by more than
:data:`PARITY_TOLERANCE`. The output directory also gets the tokenizer and
``manifest.json`` (config, sha256 of every file, the corpus summary and the
training metrics), which :func:`mirecc.util.modelfiles.load_model` verifies.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
from torch.export import Dim

from mirecc.encoder.model import EncoderConfig, MIREncoder
from mirecc.encoder.runtime import GRAPH_THREADS
from mirecc.ir import tokenizer as tokmod
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.modelfiles import MANIFEST_NAME, sha256_file

OPSET = 18
PARITY_TOLERANCE = 1e-4
STATEMENTS_FILE = "statements.onnx"
GRAPH_FILE = "graph.onnx"
GRAPH_INPUTS = ("stmt_emb", "node_stmt", "node_type", "edges_control", "edges_data", "edges_call")


class StatementGraph(nn.Module):
    """ids (S, L) -> statement embeddings (S, C)."""

    def __init__(self, model: MIREncoder):
        super().__init__()
        self.statements = model.statements

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.statements(ids)[1]


class NodeGraph(nn.Module):
    """Statement embeddings + graph -> node embeddings (3, N, D), one per subgraph."""

    def __init__(self, model: MIREncoder):
        super().__init__()
        self.gnn = model.graph   # not "graph": that name is taken in an exported FX module

    def forward(self, stmt_emb, node_stmt, node_type, edges_control, edges_data, edges_call):
        x = self.gnn.node_features(stmt_emb, node_stmt, node_type)
        return torch.stack([self.gnn.encode(x, e) for e in (edges_control, edges_data, edges_call)])


def example_inputs(model: MIREncoder, S: int = 7, L: int = 12, N: int = 23, E: int = 31,
                   seed: int = 0) -> tuple[tuple, tuple]:
    """Random inputs of the two graphs (sizes > 1, so no dimension is
    specialised), used for export and for the parity check."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.cfg
    ids = torch.randint(5, cfg.vocab_size, (S, L), generator=g)
    ids[:, 0] = 2                                  # [CLS]
    ids[1, L // 2:] = 0                            # some padding
    stmt_emb = torch.randn(S, cfg.n_embd, generator=g)
    node_stmt = torch.randint(0, S, (N,), generator=g)
    node_type = torch.randint(0, 3, (N,), generator=g)
    edges = tuple(torch.randint(0, N, (2, E + f), generator=g) for f in range(3))
    return (ids,), (stmt_emb, node_stmt, node_type) + edges


def _export(module: nn.Module, args: tuple, names: list[str], dynamic: dict, out: str, path: Path):
    program = torch.onnx.export(module, args, dynamo=True, opset_version=OPSET,
                                input_names=names, output_names=[out],
                                dynamic_shapes=dynamic, optimize=True, verbose=False)
    tmp = path.with_name(path.name + ".tmp")
    program.save(str(tmp))
    tmp.replace(path)


def check_parity(module: nn.Module, args: tuple, path: Path, threads: int = 0) -> float:
    """Max abs difference between torch and onnxruntime on ``args``;
    raises RuntimeError over :data:`PARITY_TOLERANCE`. ``threads``: the
    session's intra-op threads as the runtime sets them (0: onnxruntime's default)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    got = sess.run(None, feeds)[0]
    with torch.no_grad():
        want = module(*args).numpy()
    diff = float(np.abs(got - want).max()) if want.size else 0.0
    if got.shape != want.shape or not diff <= PARITY_TOLERANCE:
        raise RuntimeError(f"{path}: onnxruntime differs from torch by {diff:.3g} "
                           f"(shapes {got.shape} vs {want.shape}); tolerance {PARITY_TOLERANCE}")
    return diff


def export_onnx(model: MIREncoder, out_dir: str | Path) -> dict:
    """Write the two ONNX graphs into ``out_dir`` and check each against
    torch on inputs of other sizes than the export used. Returns the max
    abs differences per file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    stmt_args, graph_args = example_inputs(model)
    S, L, N = Dim("S"), Dim("L", max=model.cfg.block_size), Dim("N")
    stmt_mod, graph_mod = StatementGraph(model).eval(), NodeGraph(model).eval()
    _export(stmt_mod, stmt_args, ["ids"], {"ids": {0: S, 1: L}}, "statement_embeddings",
            out_dir / STATEMENTS_FILE)
    graph_dyn = {"stmt_emb": {0: Dim("S")}, "node_stmt": {0: N}, "node_type": {0: N},
                 "edges_control": {1: Dim("E0")}, "edges_data": {1: Dim("E1")},
                 "edges_call": {1: Dim("E2")}}
    _export(graph_mod, graph_args, list(GRAPH_INPUTS), graph_dyn, "node_embeddings", out_dir / GRAPH_FILE)
    diffs = {STATEMENTS_FILE: 0.0, GRAPH_FILE: 0.0}
    for seed, sizes in enumerate([dict(S=3, L=64, N=5, E=9), dict(S=40, L=5, N=3000, E=7000)]):
        (ids,), graph_args = example_inputs(model, seed=seed + 1, **sizes)
        diffs[STATEMENTS_FILE] = max(diffs[STATEMENTS_FILE],
                                     check_parity(stmt_mod, (ids,), out_dir / STATEMENTS_FILE))
        diffs[GRAPH_FILE] = max(diffs[GRAPH_FILE],
                                check_parity(graph_mod, graph_args, out_dir / GRAPH_FILE,
                                             threads=GRAPH_THREADS))
    return diffs


def training_summary(run_dir: Path) -> dict:
    """The last held-out evaluation (and the one at step 0, the randomly
    initialised encoder) from a run's metrics.jsonl, and its steps/time."""
    summary: dict = {}
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return summary
    heldout, last_train = [], None
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "heldout":
            heldout.append(rec)
        elif rec.get("kind") == "train":
            last_train = rec
    if heldout:
        summary["heldout_final"] = heldout[-1]
        summary["heldout_random_init"] = next((r for r in heldout if r["step"] == 0), None)
    if last_train:
        summary["steps"] = last_train["step"]
        summary["train_seconds"] = round(last_train["elapsed_s"], 1)
    return summary


def pretrain_command(args: dict) -> str:
    """The ``mire pretrain`` command line that reproduces a run's arguments."""
    parts = ["mire pretrain"]
    for k, v in sorted(args.items()):
        if k in ("command",) or v is None or v is False:
            continue
        flag = "--" + k.replace("_", "-")
        parts.append(flag if v is True else f"{flag} {v}")
    return " ".join(parts)


def write_model_dir(model_pt: Path, out_dir: Path, name: str, corpus: Path | None) -> dict:
    """Export, copy the tokenizer, write the manifest (last, atomically: a
    directory without a manifest is not a model)."""
    state = torch.load(model_pt, map_location="cpu", weights_only=True)
    model = MIREncoder.from_state(state)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)
    diffs = export_onnx(model, out_dir)
    shutil.copyfile(tokmod.DEFAULT_PATH, out_dir / "tokenizer.json")
    files = {f: sha256_file(out_dir / f) for f in (STATEMENTS_FILE, GRAPH_FILE, "tokenizer.json")}
    corpus_summary = None
    if corpus is not None and (corpus / "report.json").is_file():
        report = json.loads((corpus / "report.json").read_text())
        corpus_summary = {k: report[k] for k in report if not isinstance(report[k], (list, dict))}
        corpus_summary.update({k: report[k] for k in ("total", "by_kind") if k in report})
    manifest = {
        "name": name,
        "version": datetime.date.today().isoformat(),
        "files": files,
        "config": model.cfg.to_dict(),
        "parameters": model.num_parameters(),
        "embedding": {"statement": model.cfg.n_embd, "node": model.cfg.gcn_dim,
                      "module": model.cfg.n_embd + model.cfg.gcn_dim},
        "onnx": {"opset": OPSET, "parity_max_abs_diff": diffs, "torch": torch.__version__},
        "training": {**training_summary(model_pt.parent), "args": state.get("args"),
                     "command": pretrain_command(state.get("args") or {})},
        "corpus": corpus_summary,
    }
    atomic_write_bytes(out_dir / MANIFEST_NAME,
                       (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return manifest



def random_init_model_dir(trained: Path, work: Path, seed: int = 0) -> Path:
    """A randomly initialised encoder with ``trained``'s config (the baseline
    that shows what pretraining adds), exported once into ``work`` and reused
    while config and seed match."""
    config = json.loads((Path(trained) / "manifest.json").read_text())["config"]
    key = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    out = Path(work) / f"random-init-{key}-seed{seed}"
    if (out / "manifest.json").is_file():
        return out
    print(f"mire: exporting a random-init encoder to {out} ...", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".random-", dir=out.parent) as tmp:
        tmp = Path(tmp)
        torch.manual_seed(seed)
        m = MIREncoder(EncoderConfig(**config))
        torch.save({"model": m.state_dict(), "config": m.cfg.to_dict(), "args": {}},
                   tmp / "random.pt")
        write_model_dir(tmp / "random.pt", tmp / "random-model", "random-init", None)
        try:
            os.replace(tmp / "random-model", out)
        except OSError:        # another run got there first
            if not (out / "manifest.json").is_file():
                shutil.rmtree(out, ignore_errors=True)
                os.replace(tmp / "random-model", out)
    return out

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=".work/pretrain/small/model.pt",
                   help="model.pt written by mire pretrain")
    p.add_argument("--out", default="mirecc/data/encoder", help="model directory to write")
    p.add_argument("--name", default="mirencoder-small")
    p.add_argument("--corpus", default=".work/corpus",
                   help="corpus directory, for the summary in the manifest")


def run(args: argparse.Namespace) -> int:
    corpus = Path(args.corpus) if args.corpus else None
    manifest = write_model_dir(Path(args.model), Path(args.out), args.name, corpus)
    print(f"wrote {args.out}: " + ", ".join(manifest["files"]))
    print("torch vs onnxruntime max abs diff: " + ", ".join(
        f"{k} {v:.2e}" for k, v in manifest["onnx"]["parity_max_abs_diff"].items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mire export", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())


def model_from_onnx(model_dir: str | Path) -> MIREncoder:
    """The torch model behind an exported encoder (``statements.onnx``,
    ``graph.onnx`` and the manifest's config), for training on from where it
    stopped when its ``model.pt`` is not at hand: named initializers are
    the parameters themselves (``gnn.`` is ``graph.``); the statement
    blocks' linear weights were folded to transposed constants, which come
    in the blocks' order.  Checked against both ONNX files (RuntimeError
    when they differ beyond :data:`PARITY_TOLERANCE`).  The heads that were
    not exported (masked-token prediction, matching) keep their fresh
    initialisation."""
    # lazy: onnx costs ~1.3 s to import; only model_from_onnx() needs it
    import onnx
    from onnx import numpy_helper

    model_dir = Path(model_dir)
    manifest = json.loads((model_dir / "manifest.json").read_text())
    fields = EncoderConfig.__dataclass_fields__
    model = MIREncoder(EncoderConfig(**{k: v for k, v in manifest["config"].items()
                                        if k in fields}))
    state = model.state_dict()
    loaded: set[str] = set()
    for name in (STATEMENTS_FILE, GRAPH_FILE):
        folded = []
        for init in onnx.load(str(model_dir / name)).graph.initializer:
            key = "graph." + init.name[4:] if init.name.startswith("gnn.") else init.name
            array = numpy_helper.to_array(init)
            if key in state and tuple(state[key].shape) == array.shape:
                state[key] = torch.from_numpy(array.copy())
                loaded.add(key)
            elif array.ndim == 2 and not init.name.startswith(("statements.", "gnn.")):
                folded.append(array)
        if name == STATEMENTS_FILE:
            missing = [k for k in state if k.startswith("statements.blocks.")
                       and k.endswith(".weight") and state[k].dim() == 2 and k not in loaded]
            if len(missing) != len(folded):
                raise RuntimeError(f"{model_dir / name}: {len(folded)} folded weights for "
                                   f"{len(missing)} linear layers")
            for key, array in zip(missing, folded):
                if tuple(state[key].shape) != array.T.shape:
                    raise RuntimeError(f"{model_dir / name}: {key}: shape {array.shape}")
                state[key] = torch.from_numpy(array.T.copy())
                loaded.add(key)
    model.load_state_dict(state)
    model.eval()
    for seed, sizes in enumerate([dict(S=3, L=64, N=5, E=9), dict(S=40, L=5, N=300, E=700)]):
        (ids,), graph_args = example_inputs(model, seed=seed + 1, **sizes)
        check_parity(StatementGraph(model).eval(), (ids,), model_dir / STATEMENTS_FILE)
        check_parity(NodeGraph(model).eval(), graph_args, model_dir / GRAPH_FILE,
                     threads=GRAPH_THREADS)
    return model
