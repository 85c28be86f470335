"""The MIREncoder model in torch (mirecc.encoder.model): shapes, sizes,
masking, the auto-encoder loss by hand, matching pairs, and that a few
optimisation steps reduce the joint loss. Skipped without torch; the check
that ``mirecc.encoder`` imports without torch always runs."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

try:
    import torch
except ImportError:  # CI without torch
    torch = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="torch not installed (training extra: pip install torch==2.13.0)")


def _tiny(**kw):
    from mirecc.encoder.model import EncoderConfig
    return EncoderConfig(**{**dict(vocab_size=60, n_layer=1, n_head=2, n_embd=16, gcn_layers=2,
                                   gcn_dim=16, match_hidden=16, dropout=0.0), **kw})


def _batch(cfg, gen, stmts=12, nodes=(7, 5)):
    """A synthetic batch of len(nodes) modules."""
    from mirecc.ir.tokenizer import CLS_ID, PAD_ID, SEP_ID
    L = cfg.block_size
    ids = torch.full((stmts, L), PAD_ID)
    for i in range(stmts):
        n = int(torch.randint(3, 12, (1,), generator=gen))
        ids[i, 0] = CLS_ID
        ids[i, 1:n + 1] = torch.randint(5, cfg.vocab_size, (n,), generator=gen)
        ids[i, n + 1] = SEP_ID
    N = sum(nodes)
    node_graph = torch.cat([torch.full((n,), g) for g, n in enumerate(nodes)])
    offsets = [sum(nodes[:g]) for g in range(len(nodes))]
    edge_index = []
    for f in range(3):
        src, dst = [], []
        for g, n in enumerate(nodes):
            for j in range(n - 1 - f):   # a chain per flow, shorter for data/call
                src.append(offsets[g] + j)
                dst.append(offsets[g] + j + 1 + f)
        edge_index.append(torch.tensor([src, dst], dtype=torch.long).reshape(2, -1))
    return {"stmt_ids": ids,
            "node_stmt": torch.randint(0, stmts, (N,), generator=gen),
            "node_type": torch.randint(0, 3, (N,), generator=gen),
            "node_graph": node_graph,
            "edge_index": edge_index,
            "mlm_ids": ids}


def test_package_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import mirecc.encoder\n"
            "try:\n    import mirecc.encoder.model\nexcept ImportError:\n    print('model needs torch')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "model needs torch" in r.stdout
    r = subprocess.run([sys.executable, "-c",
                        "import sys, mirecc.encoder; print('torch' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


@needs_torch
def test_vocabulary_matches_shipped_tokenizer():
    from mirecc.encoder.model import VOCAB_SIZE, EncoderConfig
    from mirecc.ir import tokenizer
    assert EncoderConfig.small().vocab_size == VOCAB_SIZE == tokenizer.load().vocab_size
    assert EncoderConfig.small().block_size == tokenizer.MAX_LENGTH == 64


@needs_torch
def test_parameter_counts():
    from mirecc.encoder.model import EncoderConfig, MIREncoder
    paper = MIREncoder(EncoderConfig.paper()).num_parameters()["total"]
    small = MIREncoder(EncoderConfig.small()).num_parameters()["total"]
    assert abs(paper - 22e6) <= 0.15 * 22e6, paper
    assert 1e6 <= small <= 4e6, small   # trains in about an hour on 2 cores


@needs_torch
def test_shapes():
    from mirecc.encoder.model import MIREncoder
    cfg = _tiny()
    gen = torch.Generator().manual_seed(0)
    batch = _batch(cfg, gen)
    model = MIREncoder(cfg)
    h, emb = model.statements(batch["stmt_ids"])
    assert h.shape == (12, 64, 16) and emb.shape == (12, 16)
    assert model.statements.mlm_logits(h).shape == (12, 64, 60)
    from mirecc.encoder.model import mask_tokens
    masked, labels = mask_tokens(batch["mlm_ids"], gen, cfg.vocab_size)
    batch["mlm_ids"] = masked
    out, losses = model(batch, {"mlm_labels": labels}, generator=gen)
    assert out["mlm_logits"].shape == ((labels != -100).sum().item(), 60)
    assert [z.shape for z in out["z"]] == [(12, 16)] * 3
    assert out["graph_emb"].shape == out["text_emb"].shape == (2, 16)
    assert out["match_logits"].shape == (2,)
    assert {"mlm", "gae_0", "gae_1", "gae_2", "gae", "match", "loss"} <= set(losses)
    assert all(torch.isfinite(v) for v in losses.values())


@needs_torch
def test_masking_proportions_and_specials():
    from mirecc.encoder.model import IGNORE_INDEX, mask_tokens
    from mirecc.ir.tokenizer import CLS_ID, MASK_ID, PAD_ID, SEP_ID
    gen = torch.Generator().manual_seed(1)
    V = 8043
    ids = torch.randint(5, V, (4000, 64), generator=gen)
    ids[:, 0] = CLS_ID
    ids[:, 40] = SEP_ID
    ids[:, 41:] = PAD_ID
    ids[::7, 5] = 1  # [UNK]
    special = ids < 5
    masked, labels = mask_tokens(ids, gen, V)
    sel = labels != IGNORE_INDEX
    assert not (sel & special).any()
    assert torch.equal(masked[special], ids[special])
    assert torch.equal(labels[sel], ids[sel])
    frac = sel.sum().item() / (~special).sum().item()
    assert abs(frac - 0.15) < 0.005, frac
    n = sel.sum().item()
    to_mask = (masked[sel] == MASK_ID).sum().item() / n
    same = (masked[sel] == ids[sel]).sum().item() / n
    rand = 1 - to_mask - same
    assert abs(to_mask - 0.8) < 0.01 and abs(same - 0.1) < 0.01 and abs(rand - 0.1) < 0.01
    assert (masked[sel & (masked != MASK_ID)] >= 5).all()  # random tokens are never specials
    assert torch.equal(masked[~sel], ids[~sel])


@needs_torch
def test_gae_recon_loss_by_hand():
    from mirecc.encoder.model import GraphEncoder
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pos = torch.tensor([[0, 1], [2, 2]])     # edges 0-2, 1-2: both inner products 1
    neg = torch.tensor([[0, 0], [1, 2]])     # 0-1: inner product 0; 0-2: 1
    assert GraphEncoder.decode(z, pos).tolist() == [1.0, 1.0]
    s1 = 1 / (1 + math.exp(-1))
    pos_term = -math.log(s1)                               # 0.3133
    neg_term = (-math.log(1 - 0.5) - math.log(1 - s1)) / 2  # (0.6931 + 1.3133) / 2
    loss = GraphEncoder.recon_loss(z, pos, neg).item()
    assert loss == pytest.approx(pos_term + neg_term, abs=1e-6)
    assert loss == pytest.approx(0.31326 + 1.00320, abs=1e-4)


@needs_torch
def test_negative_edges_stay_in_their_module():
    from mirecc.encoder.model import GraphEncoder
    gen = torch.Generator().manual_seed(2)
    node_graph = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    src = torch.randint(0, 9, (500,), generator=gen)
    neg = GraphEncoder.negative_edges(torch.stack([src, src]), node_graph, gen)
    assert torch.equal(neg[0], src)
    assert torch.equal(node_graph[neg[1]], node_graph[src])
    assert len(set(neg[1].tolist())) == 9


@needs_torch
def test_matching_pairs_labels():
    from mirecc.encoder.model import MatchingHead
    gen = torch.Generator().manual_seed(3)
    src, labels = MatchingHead.pairs(4000, 0.5, gen)
    g = torch.arange(4000)
    assert torch.equal(labels == 1, src == g)      # positive iff its own statements
    assert abs(labels.mean().item() - 0.5) < 0.03
    assert ((src >= 0) & (src < 4000)).all()
    src, labels = MatchingHead.pairs(1, 0.5, gen)
    assert src.tolist() == [0] and labels.tolist() == [1.0]


@needs_torch
def test_optimisation_reduces_joint_loss():
    from mirecc.encoder.model import MIREncoder, MatchingHead, GraphEncoder, mask_tokens
    torch.manual_seed(0)
    cfg = _tiny()
    gen = torch.Generator().manual_seed(4)
    batch = _batch(cfg, gen, nodes=(7, 5, 6, 6))
    masked, labels = mask_tokens(batch["mlm_ids"], gen, cfg.vocab_size)
    batch["mlm_ids"] = masked
    src, mlabels = MatchingHead.pairs(4, 0.5, gen)
    targets = {"mlm_labels": labels, "match_src": src, "match_labels": mlabels,
               "neg_edge_index": [GraphEncoder.negative_edges(e, batch["node_graph"], gen)
                                  for e in batch["edge_index"]]}
    model = MIREncoder(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        _, losses = model(batch, targets)
        opt.zero_grad()
        losses["loss"].backward()
        opt.step()
        first = first if first is not None else losses["loss"].item()
    _, losses = model(batch, targets)
    assert losses["loss"].item() < 0.7 * first, (first, losses["loss"].item())
