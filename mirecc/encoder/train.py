"""Pretraining MIREncoder: ``mire pretrain``.

    mire pretrain --corpus .work/corpus --out .work/pretrain/small --config small

One step = one packed batch of training modules (at most ``max_nodes`` nodes
and ``max_statements`` distinct statements, so that a step's cost is
bounded) through the three joint tasks (:class:`mirecc.encoder.model.MIREncoder`).

Reproducible and resumable: every step reseeds torch from ``(seed, step)``,
so masks, negatives and dropout depend only on the step, and a run stopped
at any checkpoint and resumed reaches the same weights as one that was not
stopped (up to floating-point reduction order across thread counts). The
output directory holds:

- ``checkpoint.pt``: model, optimiser, step; written atomically every
  ``--checkpoint-every`` steps and at the end; ``--resume`` (the default
  when it exists) continues from it;
- ``metrics.jsonl``: one JSON line per logged step (losses, learning rate,
  statements/s) and per held-out evaluation;
- ``model.pt``: the final weights and config, what ``mire export`` reads.

Multi-process: ``torchrun --nproc-per-node N -m mirecc.encoder.train ...``
runs distributed data parallel (gloo on CPU, nccl on GPUs); each rank takes
every N-th batch and rank 0 alone evaluates and writes. A visible GPU is
used unless ``--cpu`` (one per rank, ``LOCAL_RANK``), with TF32 matrix
products; the single-GPU path trained the paper-size model on an H100
(``benchmarks/pretrain_paper_gpu.sh``), the multi-GPU one has not run.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from mirecc.encoder.data import (CorpusIndex, EncodedModule, collate, encode_corpus,
                                 encode_module, pack_batches, tokenizer_sha256)
from mirecc.encoder.model import (NUM_FLOWS, EncoderConfig, MIREncoder, mask_tokens)
from mirecc.encoder.pack import PackedCorpus
from mirecc.ir import tokenizer as tokmod
from mirecc.util.fsutil import atomic_write_bytes

CONFIGS = {"small": EncoderConfig.small, "paper": EncoderConfig.paper}
FLOW_NAMES = ("control", "data", "call")


# ---------------------------------------------------------------- metrics

def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Area under the ROC curve of scores of positives vs negatives: the
    probability that a random positive outranks a random negative (ties
    count half), by the Mann-Whitney rank sum."""
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    scores = np.concatenate([pos, neg])
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(scores)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    rank_sum = ranks[:len(pos)].sum()
    return float((rank_sum - len(pos) * (len(pos) + 1) / 2.0) / (len(pos) * len(neg)))


@torch.no_grad()
def evaluate(model: MIREncoder, batches: list[dict], seed: int = 12345) -> dict:
    """Held-out metrics over fixed batches, with the same draws every call:
    masked-token accuracy (chance: always guessing the most frequent
    masked token), link-prediction AUC per subgraph (chance 0.5) and
    IR-graph matching accuracy (chance 0.5)."""
    was_training = model.training
    model.eval()
    correct = total = 0
    label_counts: dict[int, int] = {}
    scores = {f: ([], []) for f in range(NUM_FLOWS)}
    match_correct = match_total = 0
    losses: dict[str, list[float]] = {}
    device = next(model.parameters()).device
    for i, batch in enumerate(batches):
        batch = to_device(batch, device)
        gen = torch.Generator().manual_seed(seed + i)
        ids, labels = mask_tokens(batch["mlm_ids"], gen, model.cfg.vocab_size)
        negs = [model.graph.negative_edges(e, batch["node_graph"], gen) for e in batch["edge_index"]]
        src, mlabels = model.matching.pairs(int(batch["num_graphs"]), model.cfg.match_neg_prob, gen)
        out, loss = model({**batch, "mlm_ids": ids},
                          targets=dict(mlm_labels=labels, neg_edge_index=negs,
                                       match_src=src, match_labels=mlabels))
        for k, v in loss.items():
            losses.setdefault(k, []).append(float(v))
        sel = out["mlm_targets"].cpu()
        correct += int((out["mlm_logits"].argmax(-1).cpu() == sel).sum())
        total += int(sel.numel())
        for t in sel.tolist():
            label_counts[t] = label_counts.get(t, 0) + 1
        for f in range(NUM_FLOWS):
            pos = batch["edge_index"][f]
            if pos.size(1):
                z = out["z"][f]
                scores[f][0].append(model.graph.decode(z, pos).cpu().numpy())
                scores[f][1].append(model.graph.decode(z, negs[f]).cpu().numpy())
        match_correct += int(((out["match_logits"].cpu() > 0).float() == mlabels).sum())
        match_total += int(mlabels.numel())
    model.train(was_training)
    metrics = {
        "mlm_accuracy": correct / max(total, 1),
        "mlm_chance_majority": max(label_counts.values(), default=0) / max(total, 1),
        "mlm_chance_uniform": 1.0 / model.cfg.vocab_size,
        "match_accuracy": match_correct / max(match_total, 1),
        "match_chance": 0.5,
        "masked_tokens": total, "match_pairs": match_total,
    }
    for f, name in enumerate(FLOW_NAMES):
        pos, neg = scores[f]
        metrics[f"auc_{name}"] = (roc_auc(np.concatenate(pos), np.concatenate(neg))
                                  if pos else float("nan"))
        metrics[f"edges_{name}"] = int(sum(len(p) for p in pos))
    metrics["auc_chance"] = 0.5
    metrics.update({f"loss_{k}": float(np.mean(v)) for k, v in losses.items()})
    return metrics


def to_device(batch: dict, device: torch.device) -> dict:
    """A collated batch with its tensors (and the edge list's) on ``device``."""
    if device.type == "cpu":
        return batch
    move = lambda v: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return {k: [move(e) for e in v] if isinstance(v, list) else move(v) for k, v in batch.items()}


# ------------------------------------------------------------- scheduling

def learning_rate(step: int, peak: float, warmup: int, total: int, floor: float = 0.1) -> float:
    """Linear warm-up to ``peak``, then cosine decay to ``floor * peak`` at ``total``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


# ------------------------------------------------------------------ state

def save_checkpoint(path: Path, model: MIREncoder, optimizer, step: int, args: dict,
                    elapsed_s: float) -> None:
    """Atomic (tmp + rename): a crash mid-write leaves the previous checkpoint."""
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                "config": model.cfg.to_dict(), "args": args, "elapsed_s": elapsed_s}, buf)
    atomic_write_bytes(path, buf.getvalue())


def record_step(args, model, optimizer, losses, step, total, per_epoch, eval_every, stopping,
                eval_batches, run_args, paths, extra, bar) -> None:
    """Rank 0's bookkeeping after a step: metrics line, checkpoint, held-out evaluation."""
    ckpt_path, metrics_path = paths
    if step % args.log_every == 0 or step == total:
        log_metrics(metrics_path, {"kind": "train", "step": step, "epoch": step / per_epoch,
                                   **extra, **{f"loss_{k}": v.item() for k, v in losses.items()}})
    if step % args.checkpoint_every == 0 or step == total or stopping:
        save_checkpoint(ckpt_path, model, optimizer, step, run_args, extra["elapsed_s"])
    if step % eval_every == 0 or step == total or stopping:
        m = evaluate(model, eval_batches)
        log_metrics(metrics_path, {"kind": "heldout", "step": step, "epoch": step / per_epoch, **m})
        bar.write(f"step {step}: held-out MLM acc {m['mlm_accuracy']:.3f} "
                  f"(majority {m['mlm_chance_majority']:.3f}), AUC control/data/call "
                  f"{m['auc_control']:.3f}/{m['auc_data']:.3f}/{m['auc_call']:.3f}, "
                  f"matching {m['match_accuracy']:.3f} (chance 0.5)")


def log_metrics(path: Path, record: dict) -> None:
    """Append one JSON line (O_APPEND: a line is never interleaved or torn)."""
    with open(path, "a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


# ------------------------------------------------------------------- data

def load_modules(index: CorpusIndex, shas: list[str], tokenizer) -> dict[str, EncodedModule]:
    """Encoded modules by sha (from the cache that ``encode_corpus`` filled)."""
    cache, tok_sha = index.root / "encoded", tokenizer_sha256(tokenizer)
    return {s: encode_module(index.ir_path(s), tokenizer, cache, tok_sha) for s in shas}


def corpus_data(args, tok, rank: int):
    """Whole corpus modules within ``--max-nodes`` (the larger ones left out):
    (train shas, held-out shas, sizes, loader)."""
    index = CorpusIndex(args.corpus)
    eligible = [s for s in index.records if index.records[s].get("graph_nodes", 0) <= args.max_nodes]
    if rank == 0:
        print(f"corpus {index.root}: {len(index)} modules ({len(index.train)} train, "
              f"{len(index.heldout)} held out); {len(eligible)} within {args.max_nodes} nodes")
    sizes = encode_corpus(index, tok, eligible, jobs=args.jobs,
                          progress=rank == 0 and not args.no_progress)
    train = [s for s in index.train if s in sizes]
    heldout = [s for s in index.heldout if s in sizes][:args.eval_modules]
    return train, heldout, sizes, lambda shas: load_modules(index, shas, tok)


def pack_data(args, tok, rank: int):
    """Every piece of a corpus pack (``mire corpus pack``: large modules cut
    into per-function pieces): (train pieces, held-out pieces, sizes,
    loader). Held out: the same modules as corpus_data's, so that the
    metrics compare with a model trained on whole modules."""
    data = PackedCorpus(args.pack)
    meta = data.meta
    if meta.get("tokenizer_sha256") != tokenizer_sha256(tok):
        sys.exit(f"mire pretrain: {args.pack} was packed with another tokenizer")
    if meta["max_nodes"] > args.max_nodes or meta["max_statements"] > args.max_statements:
        sys.exit(f"mire pretrain: {args.pack} has pieces of up to {meta['max_nodes']} nodes and "
                 f"{meta['max_statements']} statements, over --max-nodes/--max-statements")
    sizes = data.sizes(range(len(data)))
    # the modules corpus_data would take (the first --eval-modules held out
    # within --max-nodes), of which collate keeps the whole ones
    first = [i for i in data.heldout if data.piece_index[i] == 0
             and data.module_nodes[data.piece_module[i]] <= args.max_nodes][:args.eval_modules]
    heldout = [i for i in first if data.piece_whole[i]]
    if rank == 0:
        print(f"pack {args.pack}: {meta['modules']} modules ({meta['modules_cut']} cut) in "
              f"{len(data)} pieces, {meta['nodes']} nodes; {len(data.train)} training pieces, "
              f"{len(data.heldout)} held out")
    return data.train, heldout, sizes, lambda keys: {k: data.module(k) for k in keys}


def make_batches(shas: list[str], sizes: dict, args, seed: int
                 ) -> tuple[list[list[str]], list[str]]:
    return pack_batches({s: sizes[s] for s in shas if s in sizes}, max_nodes=args.max_nodes,
                        max_modules=args.max_modules, max_statements=args.max_statements,
                        seed=seed)


# ------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mire pretrain", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", default=".work/corpus", help="corpus directory (mire corpus build)")
    p.add_argument("--pack", default="",
                   help="train on a corpus pack instead (mire corpus pack): every module, the "
                        "large ones as per-function pieces")
    p.add_argument("--out", default=".work/pretrain/small", help="run directory (checkpoints, metrics)")
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after this many steps (0: --epochs full passes)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--stop-at", type=int, default=0,
                   help="stop with a checkpoint at this step, as if interrupted; run again "
                        "to resume (e.g. to split training over sessions)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="minutes; stop (with a checkpoint) when exceeded (0: no limit)")
    p.add_argument("--max-nodes", type=int, default=6000, help="nodes per batch (and per module)")
    p.add_argument("--max-statements", type=int, default=768,
                   help="distinct statements per batch (the transformer's work)")
    p.add_argument("--max-modules", type=int, default=32)
    p.add_argument("--mlm-per-batch", type=int, default=256,
                   help="statements masked for MLM per batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-modules", type=int, default=128, help="held-out modules evaluated")
    p.add_argument("--eval-every", type=int, default=0,
                   help="steps between held-out evaluations (0: once per epoch and at the end)")
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--no-resume", action="store_true", help="start over even if a checkpoint exists")
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: all cores)")
    p.add_argument("--cpu", action="store_true", help="train on the CPU even if a GPU is visible")
    p.add_argument("--jobs", type=int, default=0, help="processes for encoding the corpus")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--eval-only", default="", metavar="MODEL_PT",
                   help="train nothing: evaluate this model.pt (its own config) on the "
                        "held-out modules and print the metrics as JSON (--out's "
                        "checkpoint is neither read nor written)")


def run(args: argparse.Namespace) -> int:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available() and not args.cpu
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
        # TF32 matrix products: fp32 weights and optimiser, ~3x the matmul rate on Ampere+
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")
    threads = args.threads or max(1, (os.cpu_count() or 1) // world)
    torch.set_num_threads(threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_path, metrics_path = out / "checkpoint.pt", out / "metrics.jsonl"

    tok = tokmod.load()
    if args.pack:
        train, heldout, sizes, load = pack_data(args, tok, rank)
    else:
        train, heldout, sizes, load = corpus_data(args, tok, rank)

    cfg = CONFIGS[args.config]()
    torch.manual_seed(args.seed)
    model = MIREncoder(cfg).to(device)
    if rank == 0:
        model.print_parameters()
        print(f"device: {device}" + (f" ({torch.cuda.get_device_name(device)})" if cuda else
                                     f", {torch.get_num_threads()} threads"))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    step, elapsed_before = 0, 0.0
    if ckpt_path.exists() and not args.no_resume and not args.eval_only:
        state = torch.load(ckpt_path, map_location=device, weights_only=True)
        if state["config"] != cfg.to_dict():
            sys.exit(f"mire pretrain: {ckpt_path} was trained with another config; "
                     "use --no-resume or another --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, elapsed_before = state["step"], state.get("elapsed_s", 0.0)
        if rank == 0:
            print(f"resuming from {ckpt_path} at step {step}")
    ddp = model
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if cuda else None, find_unused_parameters=True)

    epoch_batches, _ = make_batches(train, sizes, args, seed=args.seed)
    per_epoch = max(1, len(epoch_batches) // world)
    total = args.max_steps or max(1, int(args.epochs * per_epoch))
    eval_every = args.eval_every or per_epoch
    run_args = {k: v for k, v in vars(args).items() if k != "func"}
    eval_batches = []
    if rank == 0:
        hb, _ = make_batches(heldout, sizes, args, seed=0)
        mods = load([s for b in hb for s in b])
        for i, b in enumerate(hb):
            eval_batches.append(collate([mods[s] for s in b], args.mlm_per_batch,
                                        torch.Generator().manual_seed(i), args.max_nodes))
        print(f"{len(train)} training modules in {per_epoch} batches per epoch (per rank); "
              f"{total} steps; held-out: {len(heldout)} modules in {len(eval_batches)} batches")

    if args.eval_only:
        return evaluate_saved(Path(args.eval_only), eval_batches, device)
    if rank == 0 and step == 0:   # the randomly initialised encoder, for comparison
        m = evaluate(model, eval_batches)
        log_metrics(metrics_path, {"kind": "heldout", "step": 0, "epoch": 0.0, **m})
    start = time.monotonic() - elapsed_before   # training time counts across resumes
    bar = tqdm(total=total, initial=step, desc="pretrain", unit="step",
               disable=rank != 0 or args.no_progress)
    stmts_done, tick = 0, time.monotonic()
    batches_epoch = -1
    model.train()
    while step < total:
        epoch, i = divmod(step, per_epoch)
        if batches_epoch != epoch:   # each epoch its own shuffle
            batches, _ = make_batches(train, sizes, args, seed=args.seed + epoch)
            batches = batches[rank::world][:per_epoch]
            batches_epoch = epoch
        shas = batches[i % len(batches)]   # another shuffle may pack into fewer batches
        mods = load(shas)
        torch.manual_seed(args.seed * 1_000_003 + step * world + rank)
        batch = to_device(collate([mods[s] for s in shas], args.mlm_per_batch, None, args.max_nodes),
                          device)
        lr = learning_rate(step, args.lr, args.warmup, total)
        for group in optimizer.param_groups:
            group["lr"] = lr
        _, losses = ddp(batch)
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        stmts_done += int(batch["stmt_ids"].size(0)) + int(batch["mlm_ids"].size(0))
        bar.update()
        bar.set_postfix(loss=f"{losses['loss'].item():.3f}", mlm=f"{losses['mlm'].item():.2f}")
        over_time = bool(args.time_budget and (time.monotonic() - start) > args.time_budget * 60)
        if world > 1:   # every rank must stop at the same step
            flag = torch.tensor([float(over_time)], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            over_time = bool(flag.item())
        stopping = over_time or step == args.stop_at
        if rank == 0:
            record_step(args, model, optimizer, losses, step, total, per_epoch, eval_every,
                        stopping, eval_batches, run_args, paths=(ckpt_path, metrics_path),
                        extra={"lr": lr, "grad_norm": grad_norm.item(),
                               "statements_per_s": stmts_done / (time.monotonic() - tick),
                               "elapsed_s": time.monotonic() - start}, bar=bar)
            if step % args.log_every == 0:
                stmts_done, tick = 0, time.monotonic()
        if stopping:
            bar.write(f"stopped at step {step} of {total}" + (
                f": time budget of {args.time_budget} min reached" if over_time else ""))
            break
    bar.close()
    if rank == 0 and (step == total or over_time):
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "config": cfg.to_dict(), "step": step,
                    "args": run_args, "train_seconds": time.monotonic() - start}, buf)
        atomic_write_bytes(out / "model.pt", buf.getvalue())
        print(f"wrote {out / 'model.pt'} after {step} steps")
    if world > 1:
        # rank 0 may still be evaluating and writing model.pt: a rank that
        # tears gloo down before the others are done can abort (SIGABRT,
        # "terminate called without an active exception"), and torchrun
        # then kills rank 0 too
        dist.barrier()
        dist.destroy_process_group()
    return 0


def evaluate_saved(path: Path, eval_batches: list[dict], device: torch.device) -> int:
    """``--eval-only``: the held-out metrics of a saved model, as JSON on stdout."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model = MIREncoder.from_state(state).to(device)
    metrics = evaluate(model, eval_batches)
    print(json.dumps({"model": str(path), "step": state.get("step"), **metrics}, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
