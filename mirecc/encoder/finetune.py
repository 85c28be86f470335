"""Pretraining on compiler feedback: the encoder trained so that functions
the compiler treats alike are near (``mire pretrain-feedback``).

    mire pretrain-feedback --corpus .work/fb-corpus --labels .work/fb-labels.jsonl \\
        --out .work/pretrain/feedback --objective regression --minutes 20
    mire export ... is done by it: OUT/model (an encoder directory like
    mirecc/data/encoder, usable as --judge-model NAME=OUT/model)

The labels are :mod:`mirecc.encoder.feedback`'s per-function outcome vectors
(machine-code size after five pipelines, what -O3's passes did to it, Polly's
SCoPs).  A function's vector is pooled from the encoder's statements and
graph exactly as the runtime pools it (:meth:`mirecc.encoder.runtime.Encoder.embed_graph`:
mean statement embedding of its instructions, mean node embedding over the
three subgraphs), and the encoder is trained through it with one of two
objectives, each on the outcomes standardised over the training functions:

- ``regression``: a small MLP on the function's vector predicts its
  outcome vector (mean squared error);
- ``contrastive``: within a batch, the similarities of the functions'
  projected vectors are trained (KL divergence) towards the similarities of
  their outcome vectors (a softmax over negative squared distances), so
  functions with close outcomes are pulled together;
- ``both``: their sum.

Starts from an exported encoder (``--init``, the shipped one by default,
its weights read back from ONNX by :func:`mirecc.encoder.export.model_from_onnx`)
or from random weights (``--init random``).  Modules over the batch caps are
cut along their functions (:mod:`mirecc.encoder.pieces`).  Held out: the
corpus's sha256 split (:class:`mirecc.encoder.data.CorpusIndex`); the log
(``metrics.jsonl``) holds the held-out R^2 per outcome of a ridge fit on
the frozen vectors, before and after.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.encoder.data import CorpusIndex, collate, encode_graph
from mirecc.encoder.feedback import load_labels
from mirecc.encoder.pieces import split_module
from mirecc.graph import GraphBuildError, build_graph
from mirecc.ir import tokenizer as tokmod
from mirecc.util.fsutil import atomic_write_bytes

OBJECTIVES = ("regression", "contrastive", "both")
MAX_NODES, MAX_STATEMENTS = 6000, 768


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", type=Path, required=True, help="the corpus directory")
    p.add_argument("--labels", type=Path, required=True,
                   help="the outcome vectors (python -m mirecc.encoder.feedback)")
    p.add_argument("--out", type=Path, required=True, help="the run's directory")
    p.add_argument("--init", default="shipped",
                   help="an exported encoder to start from, 'shipped' or 'random' "
                        "(default: %(default)s)")
    p.add_argument("--objective", choices=OBJECTIVES, default="regression")
    p.add_argument("--minutes", type=float, default=20.0, help="training time budget")
    p.add_argument("--max-steps", type=int, default=0, help="0: the time budget decides")
    p.add_argument("--lr", type=float, default=1e-4, help="the encoder's learning rate "
                   "(the heads': 10 times it) (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    p.add_argument("--name", default=None, help="the exported model's name")


def _examples(corpus: Path, labels: dict):
    """(pieces, targets) of every labelled module: each piece an
    EncodedModule, its target rows (node function index -> outcome vector)."""
    index = CorpusIndex(corpus)
    tok = tokmod.load(tokmod.DEFAULT_PATH)
    out = {"train": [], "heldout": []}
    heldout = set(index.heldout)
    for sha in tqdm(sorted(set(labels) & set(index.records)), desc="encoding",
                    file=sys.stderr, disable=None, mininterval=2):
        try:
            graph = build_graph(index.ir_path(sha))
        except GraphBuildError:
            continue
        names = graph.function_names
        rows = {f: labels[sha][n] for f, n in enumerate(names) if n in labels[sha]}
        if not rows:
            continue
        pieces, _ = split_module(encode_graph(graph, tok), MAX_NODES, MAX_STATEMENTS)
        for piece in pieces:
            present = set(np.unique(piece.node_function).tolist())
            mine = {f: v for f, v in rows.items() if f in present}
            if mine:
                out["heldout" if sha in heldout else "train"].append((piece, mine))
    return out


def _batches(examples, rng, max_nodes: int = MAX_NODES):
    order = rng.permutation(len(examples))
    batch, nodes = [], 0
    for i in order:
        n = examples[i][0].num_nodes
        if batch and nodes + n > max_nodes:
            yield batch
            batch, nodes = [], 0
        batch.append(examples[i])
        nodes += n
    if batch:
        yield batch


def _function_vectors(model, batch, torch):
    """(F, 256) pooled vectors of the labelled functions of ``batch`` and
    their targets (F, outcomes), pooled as the runtime pools a function."""
    # lazy: encoder.model imports torch (~2 s); only training needs it
    from mirecc.encoder.model import segment_mean

    pieces = [p for p, _ in batch]
    b = collate(pieces, mlm_per_batch=0, max_nodes=sum(p.num_nodes for p in pieces))
    fid, targets, base = [], [], 0
    for piece, rows in batch:
        keys = sorted(rows)
        slot = {f: base + k for k, f in enumerate(keys)}
        fid.append(np.asarray([slot.get(int(f), -1) for f in piece.node_function]))
        targets += [rows[f] for f in keys]
        base += len(keys)
    fid = torch.from_numpy(np.concatenate(fid))
    stmt = model.statements.embed_bucketed(b["stmt_ids"])
    x = model.graph.node_features(stmt, b["node_stmt"], b["node_type"])
    z = torch.stack([model.graph.encode(x, e) for e in b["edge_index"]]).mean(0)
    keep = fid >= 0
    inst = keep & (b["node_type"] == 0)
    text = segment_mean(stmt[b["node_stmt"][inst]], fid[inst], base)
    node = segment_mean(z[keep], fid[keep], base)
    return torch.cat([text, node], 1), torch.from_numpy(np.stack(targets))


def _embed_all(model, examples, torch):
    vecs, ys = [], []
    with torch.no_grad():
        for batch in _batches(examples, np.random.default_rng(0)):
            v, y = _function_vectors(model, batch, torch)
            vecs.append(v.numpy())
            ys.append(y.numpy())
    return np.concatenate(vecs), np.concatenate(ys)


def _ridge_r2(train, test, alpha: float = 1.0) -> list[float]:
    """Held-out R^2 per outcome of a ridge fit on frozen vectors."""
    (X, Y), (Xt, Yt) = train, test
    mu, sd = X.mean(0), X.std(0) + 1e-6
    A, At = (X - mu) / sd, (Xt - mu) / sd
    W = np.linalg.solve(A.T @ A + alpha * np.eye(A.shape[1]), A.T @ (Y - Y.mean(0)))
    pred = At @ W + Y.mean(0)
    var = ((Yt - Yt.mean(0)) ** 2).sum(0)
    return [float(1 - e / v) if v > 0 else math.nan
            for e, v in zip(((Yt - pred) ** 2).sum(0), var)]


def run(args) -> int:
    # lazy: torch (~2 s) and the modules that import it: only training needs them
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from mirecc.encoder.export import model_from_onnx, write_model_dir
    from mirecc.encoder.model import EncoderConfig, MIREncoder

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    outcomes, labels = load_labels(args.labels)
    if not labels:
        raise SystemExit(f"mire pretrain-feedback: {args.labels}: no labelled module")
    if args.init == "random":
        cfg = json.loads((SHIPPED_MODEL_DIR / "manifest.json").read_text())["config"]
        model = MIREncoder(EncoderConfig(**{k: v for k, v in cfg.items()
                                            if k in EncoderConfig.__dataclass_fields__}))
    else:
        model = model_from_onnx(SHIPPED_MODEL_DIR if args.init == "shipped" else args.init)
    data = _examples(args.corpus, labels)
    train, held = data["train"], data["heldout"]
    Y = np.concatenate([np.stack(list(r.values())) for _, r in train])
    mu, sd = Y.mean(0), Y.std(0) + 1e-6
    norm = lambda y: (y - torch.from_numpy(mu)) / torch.from_numpy(sd)   # noqa: E731
    print(f"mire pretrain-feedback: {len(train)} training pieces ({len(Y)} functions), "
          f"{len(held)} held out; outcomes: {', '.join(outcomes)}", file=sys.stderr)
    width = model.cfg.n_embd + model.cfg.gcn_dim
    head = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, len(outcomes)))
    proj = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, 64))
    opt = torch.optim.AdamW([{"params": model.statements.parameters(), "lr": args.lr},
                             {"params": model.graph.parameters(), "lr": args.lr},
                             {"params": [*head.parameters(), *proj.parameters()],
                              "lr": args.lr * 10}], weight_decay=0.01)
    args.out.mkdir(parents=True, exist_ok=True)
    log = open(args.out / "metrics.jsonl", "a")

    def evaluate(step):
        """The held-out R^2 (none where the split holds no module out), logged."""
        rec = {"kind": "heldout", "step": step, "ridge_r2": {}, "ridge_r2_mean": None}
        if held:
            model.eval()
            r2 = _ridge_r2(_embed_all(model, train[:600], torch), _embed_all(model, held, torch))
            rec.update(ridge_r2=dict(zip(outcomes, r2)), ridge_r2_mean=float(np.nanmean(r2)))
            model.train()
            print(f"mire pretrain-feedback: step {step}: held-out ridge R^2 mean "
                  f"{rec['ridge_r2_mean']:.3f}", file=sys.stderr)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        return rec

    before = evaluate(0)
    rng = np.random.default_rng(args.seed)
    step, t0 = 0, time.time()
    done = False
    model.train()
    while not done:
        for batch in _batches(train, rng):
            vec, y = _function_vectors(model, batch, torch)
            y = norm(y)
            losses = {}
            if args.objective in ("regression", "both"):
                losses["regression"] = F.mse_loss(head(vec), y)
            if args.objective in ("contrastive", "both") and len(y) > 2:
                p = F.normalize(proj(vec), dim=1)
                eye = torch.eye(len(y), dtype=torch.bool)
                d = torch.cdist(y, y) ** 2
                scale = d[~eye].median().clamp(min=1e-3)
                want = F.softmax((-d / scale).masked_fill(eye, -1e9), dim=1)
                got = F.log_softmax((p @ p.t() / 0.1).masked_fill(eye, -1e9), dim=1)
                losses["contrastive"] = F.kl_div(got, want, reduction="batchmean")
            if not losses:
                continue      # a batch of one or two functions: nothing to contrast
            loss = sum(losses.values())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 25 == 0:
                log.write(json.dumps({"kind": "train", "step": step,
                                      "elapsed_s": round(time.time() - t0, 1),
                                      **{k: float(v.detach()) for k, v in losses.items()}}) + "\n")
                log.flush()
                print(f"\rmire pretrain-feedback: step {step} "
                      + " ".join(f"{k} {float(v):.3f}" for k, v in losses.items())
                      + f" ({time.time() - t0:.0f} s)", end="", file=sys.stderr, flush=True)
            if (args.max_steps and step >= args.max_steps) or \
                    time.time() - t0 > args.minutes * 60:
                done = True
                break
    print(file=sys.stderr)
    after = evaluate(step)
    model.eval()
    state = {"model": model.state_dict(), "config": model.cfg.to_dict(),
             "args": {"feedback": {k: str(v) for k, v in vars(args).items()
                                   if k not in ("func",)}}}
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(args.out / "model.pt", buf.getvalue())
    name = args.name or f"mirencoder-feedback-{args.objective}"
    write_model_dir(args.out / "model.pt", args.out / "model", name, args.corpus)
    summary = {"steps": step, "seconds": round(time.time() - t0), "objective": args.objective,
               "init": args.init, "train_pieces": len(train), "heldout_pieces": len(held),
               "before": before, "after": after}
    atomic_write_bytes(args.out / "summary.json", json.dumps(summary, indent=1).encode())
    print(json.dumps({k: summary[k] for k in ("steps", "seconds", "objective")}
                     | {"r2_before": before["ridge_r2_mean"], "r2_after": after["ridge_r2_mean"]}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mire pretrain-feedback", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
