"""MIREncoder in torch: statement transformer, graph auto-encoder, matching.

Training code only (the driver never imports torch). The three pretraining
tasks of MIREncoder (Dutta, Jannesari; PACT'24, section 3.3), trained
jointly in one forward pass:

1. masked language modelling over single tokenised IR statements
   (:class:`StatementEncoder`, :func:`mask_tokens`);
2. a graph auto-encoder over the ProGraML graph, one reconstruction loss
   per subgraph (control, data, call), summed (:class:`GraphEncoder`);
3. IR-graph matching: do these statements come from the same module as
   this graph? (:class:`MatchingHead`).

A batch is a dict of tensors (``G`` modules, ``N`` nodes, ``S`` distinct
statements, ``L`` = 64 tokens):

- ``stmt_ids`` (S, L) long: tokenised node texts, deduplicated across the
  batch; ``node_stmt`` (N,) long indexes it for every node.
- ``node_type`` (N,) long: ProGraML node type (instruction 0, variable 1,
  constant 2, :mod:`mirecc.graph.schema`).
- ``node_graph`` (N,) long: which module each node belongs to, sorted.
- ``edge_index`` list of three (2, E_f) long tensors, one per flow in
  :data:`mirecc.graph.schema.EDGE_FLOWS` order, global node indices.
- ``mlm_ids`` (B, L) long, optional: statements for masked language
  modelling (usually sampled from ``stmt_ids``); they are masked inside
  ``forward`` unless ``targets["mlm_labels"]`` gives the masking.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from mirecc.ir.tokenizer import MASK_ID, MAX_LENGTH, PAD_ID, SPECIAL_TOKENS

#: vocabulary of the shipped tokenizer (mirecc/data/tokenizer.json)
VOCAB_SIZE = 8043
#: the three ProGraML subgraphs, in mirecc.graph.schema.EDGE_FLOWS order
NUM_FLOWS = 3
#: ProGraML node types: instruction, variable, constant
NUM_NODE_TYPES = 3
#: BERT's masking recipe (section 3.3.1)
MASK_PROB = 0.15
MASK_REPLACE = 0.8   # of the selected positions: [MASK]
RANDOM_REPLACE = 0.1  # of the selected positions: a random token; the rest unchanged
#: label ignored by cross-entropy
IGNORE_INDEX = -100
#: keeps log() finite in the auto-encoder loss (as PyG's autoencoder)
EPS = 1e-15


@dataclass
class EncoderConfig:
    vocab_size: int = VOCAB_SIZE    # tokenizer vocabulary, specials included
    block_size: int = MAX_LENGTH    # tokens per statement ([CLS] ... [SEP] + padding)
    n_layer: int = 3                # transformer blocks in the statement encoder
    n_head: int = 4                 # attention heads per block
    n_embd: int = 128               # token/statement embedding width
    mlp_ratio: int = 4              # transformer MLP hidden = mlp_ratio * n_embd
    gcn_layers: int = 2             # GCN layers in the graph encoder
    gcn_dim: int = 128              # GCN hidden and latent width (node embedding z)
    match_hidden: int = 128         # hidden width of the matching head's MLP
    dropout: float = 0.1            # dropout in transformer, GCN and heads
    match_neg_prob: float = 0.5     # share of matching pairs that are negatives
    gae_weight: float = 1.0         # weight of the summed auto-encoder losses
    match_weight: float = 1.0       # weight of the matching loss

    @classmethod
    def small(cls, **kw) -> "EncoderConfig":
        """~1.7M parameters, what ships: pretrains on 2 CPU cores in about an
        hour (~600 statements/s of training) and embeds a 2k-statement
        module well under the 0.5 s target. Measured on the corpus batches:
        256 wide x 4 blocks (5.6M) trained at ~90 statements/s, 6x slower."""
        return cls(**{**dict(n_layer=3, n_head=4, n_embd=128, gcn_layers=2, gcn_dim=128,
                             match_hidden=128), **kw})

    @classmethod
    def paper(cls, **kw) -> "EncoderConfig":
        """~22M parameters, the paper's size (sections 4.7 and 5). The paper
        gives no widths or depths: we chose a BERT-style 512-wide, 5-block,
        8-head transformer with 3 GCN layers (the transformer dominates)."""
        return cls(**{**dict(n_layer=5, n_head=8, n_embd=512, gcn_layers=3, gcn_dim=512,
                             match_hidden=512), **kw})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# --------------------------------------------------------------- masking

def mask_tokens(ids: torch.Tensor, generator: Optional[torch.Generator] = None,
                vocab_size: int = VOCAB_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: 15% of non-special positions; of those 80% [MASK], 10%
    a random non-special token, 10% unchanged.

    Args:
        ids (LongTensor): (B, L) token ids.
        generator (torch.Generator, optional): for reproducible masks.
        vocab_size (int): random tokens are drawn from [len(SPECIAL_TOKENS), vocab_size).

    Returns:
        (masked ids (B, L), labels (B, L)): labels hold the original id at
        selected positions and -100 elsewhere.
    """
    special = ids < len(SPECIAL_TOKENS)   # [PAD] [UNK] [CLS] [SEP] [MASK] are never selected
    # drawn on the CPU (where generators live), then moved: same draws on any device
    r = torch.rand(ids.shape, generator=generator).to(ids.device)
    selected = (r < MASK_PROB) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    r2 = torch.rand(ids.shape, generator=generator).to(ids.device)
    to_mask = selected & (r2 < MASK_REPLACE)
    to_random = selected & (r2 >= MASK_REPLACE) & (r2 < MASK_REPLACE + RANDOM_REPLACE)
    random_ids = torch.randint(len(SPECIAL_TOKENS), vocab_size, ids.shape,
                               generator=generator).to(ids.device)
    out = torch.where(to_mask, torch.full_like(ids, MASK_ID), ids)
    out = torch.where(to_random, random_ids, out)
    return out, labels


# ----------------------------------------------------- statement encoder

class SelfAttention(nn.Module):
    """Bidirectional multi-head attention with a key padding mask."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)                     # 3 x (B, L, C)
        q, k, v = (t.view(B, L, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in (q, k, v))                              # (B, h, L, C/h)
        keep = keep.clone()
        keep[:, 0] = True                       # an all-[PAD] row would give NaN attention
        mask = keep[:, None, None, :]                               # (B, 1, 1, L) True = attend
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, L, C)            # (B, L, C)
        return self.proj(y)


class Block(nn.Module):
    """Pre-LayerNorm transformer block."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, cfg.mlp_ratio * cfg.n_embd), nn.GELU(),
                                 nn.Linear(cfg.mlp_ratio * cfg.n_embd, cfg.n_embd),
                                 nn.Dropout(cfg.dropout))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), keep))
        return x + self.mlp(self.ln2(x))


class StatementEncoder(nn.Module):
    """Transformer over one tokenised statement (section 3.3.1).

    The statement embedding is the mean of the final token states over
    non-[PAD] positions (more robust than [CLS] alone for an encoder that
    is never fine-tuned). The MLM head is BERT's: dense, GELU, LayerNorm,
    then a decoder tied to the token embedding.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd, padding_idx=PAD_ID)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.mlm_transform = nn.Sequential(nn.Linear(cfg.n_embd, cfg.n_embd), nn.GELU(),
                                           nn.LayerNorm(cfg.n_embd))
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, L) -> (token states (B, L, C), statement embeddings (B, C))."""
        B, L = ids.shape
        assert L <= self.cfg.block_size, f"statement of {L} tokens > {self.cfg.block_size}"
        keep = ids != PAD_ID                                        # (B, L)
        pos = torch.arange(L, device=ids.device)
        x = self.drop(self.tok_emb(ids) + self.pos_emb(pos))        # (B, L, C)
        for block in self.blocks:
            x = block(x, keep)
        h = self.ln_f(x)                                            # (B, L, C)
        w = keep.unsqueeze(-1).to(h.dtype)                          # (B, L, 1)
        emb = (h * w).sum(1) / w.sum(1).clamp(min=1.0)              # (B, C)
        return h, emb

    def embed_bucketed(self, ids: torch.Tensor, bucket_rows: int = 128) -> torch.Tensor:
        """Statement embeddings (S, C) of ids (S, L), computed in buckets of
        similar length, each trimmed to its longest statement: a batch is
        mostly short statements padded to its few long ones, and padding
        costs as much as tokens. The same embeddings as ``self(ids)[1]``
        (padding is masked out of attention and pooling)."""
        S = ids.size(0)
        if S <= bucket_rows:
            return self(ids[:, :max(1, int((ids != PAD_ID).sum(1).max()))])[1]
        lengths = (ids != PAD_ID).sum(1)
        order = torch.argsort(lengths)
        parts = []
        for chunk in order.split(bucket_rows):
            L = max(1, int(lengths[chunk].max()))
            parts.append(self(ids[chunk, :L])[1])
        out = torch.empty(S, parts[0].size(1), dtype=parts[0].dtype, device=ids.device)
        return out.index_copy(0, order, torch.cat(parts))

    def mlm_logits(self, h: torch.Tensor) -> torch.Tensor:
        """token states (B, L, C) -> vocabulary logits (B, L, V)."""
        return self.mlm_transform(h) @ self.tok_emb.weight.t() + self.mlm_bias

    def mlm_loss(self, ids: torch.Tensor, labels: torch.Tensor,
                 bucket_rows: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """masked ids (B, L), labels (B, L) -> (logits (M, V) at the M
        selected positions, their labels (M,), loss). Runs in length buckets as
        :meth:`embed_bucketed`, and projects only the selected ~15% of
        positions onto the vocabulary, which saves most of the head's cost.
        Logits and labels come in bucket order; the loss is the mean over all M."""
        lengths = (ids != PAD_ID).sum(1)
        order = (torch.argsort(lengths) if ids.size(0) > bucket_rows
                 else torch.arange(ids.size(0), device=ids.device))
        states, targets = [], []
        for chunk in order.split(bucket_rows):
            L = max(1, int(lengths[chunk].max()))
            h, _ = self(ids[chunk, :L])
            lab = labels[chunk, :L]
            sel = lab != IGNORE_INDEX                               # (b, L)
            states.append(h[sel])
            targets.append(lab[sel])
        logits, targets = self.mlm_logits(torch.cat(states)), torch.cat(targets)  # (M, V), (M,)
        if logits.size(0) == 0:                  # nothing selected: no signal, not NaN
            return logits, targets, logits.sum()
        return logits, targets, F.cross_entropy(logits, targets)


# --------------------------------------------------------- graph encoder

def gcn_norm(edge_index: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Undirected edges plus self-loops with symmetric normalisation
    D^-1/2 (A + I) D^-1/2 (Kipf and Welling, 2017).

    Returns (src, dst, weight) flattened as (2, E') indices and (E',) weights.
    """
    loops = torch.arange(num_nodes, device=edge_index.device)
    src = torch.cat([edge_index[0], edge_index[1], loops])
    dst = torch.cat([edge_index[1], edge_index[0], loops])
    deg = torch.zeros(num_nodes, device=edge_index.device).index_add_(
        0, dst, torch.ones_like(dst, dtype=torch.float))
    norm = deg.rsqrt()
    return torch.stack([src, dst]), norm[src] * norm[dst]


class GCNLayer(nn.Module):
    """One graph convolution: x' = D^-1/2 (A + I) D^-1/2 x W + b, with
    index_add message passing (exports to ONNX, no PyG needed)."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, x: torch.Tensor, edges: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x = self.lin(x)                                             # (N, D)
        msg = x[edges[0]] * weight.unsqueeze(-1)                    # (E', D)
        return torch.zeros_like(x).index_add_(0, edges[1], msg) + self.bias


class GraphEncoder(nn.Module):
    """GCN encoder shared by the three subgraphs (section 3.3.2).

    Node features: the statement embedding of the node's text plus a
    learned node-type embedding. Instruction nodes carry their statement;
    ProGraML variable and constant nodes carry their type text (``i32``,
    ``float*``), which the same statement encoder embeds at almost no cost
    after deduplication and which says more than a bare type id. The
    type embedding tells a variable ``i32`` from a constant ``i32``.

    :meth:`encode` runs the GCN stack on one subgraph's adjacency, giving
    that subgraph's latent node embeddings z; :meth:`recon_loss` is the
    inner-product decoder with negative sampling, as in PyG's GAE.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.type_emb = nn.Embedding(NUM_NODE_TYPES, cfg.n_embd)
        dims = [cfg.n_embd] + [cfg.gcn_dim] * cfg.gcn_layers
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.drop = nn.Dropout(cfg.dropout)

    def node_features(self, stmt_emb: torch.Tensor, node_stmt: torch.Tensor,
                      node_type: torch.Tensor) -> torch.Tensor:
        """(S, C) statement embeddings -> (N, C) node features."""
        return stmt_emb[node_stmt] + self.type_emb(node_type)

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """x (N, C), edge_index (2, E) -> z (N, D); no activation on the last layer."""
        edges, weight = gcn_norm(edge_index, x.size(0))
        for i, layer in enumerate(self.layers):
            x = layer(x, edges, weight)
            if i < len(self.layers) - 1:
                x = self.drop(F.relu(x))
        return x

    @staticmethod
    def decode(z: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Inner-product decoder: edge logits z_u . z_v, (E,)."""
        return (z[edge_index[0]] * z[edge_index[1]]).sum(-1)

    @staticmethod
    def negative_edges(edge_index: torch.Tensor, node_graph: torch.Tensor,
                       generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """One negative per positive edge: keep the source, draw the target
        uniformly among the nodes of the same module (negatives across
        modules would be trivially easy). A draw may hit a true edge, which
        is rare in sparse IR graphs and ignored, as in PyG's GAE."""
        counts = torch.bincount(node_graph)                         # (G,)
        offsets = torch.cumsum(counts, 0) - counts                  # (G,)
        g = node_graph[edge_index[0]]                               # (E,)
        r = torch.rand(g.shape, generator=generator).to(g.device)
        dst = offsets[g] + (r * counts[g]).long().clamp(max=counts[g] - 1)
        return torch.stack([edge_index[0], dst])

    @classmethod
    def recon_loss(cls, z: torch.Tensor, pos_edge_index: torch.Tensor,
                   neg_edge_index: torch.Tensor) -> torch.Tensor:
        """-mean log sigmoid(pos) - mean log (1 - sigmoid(neg))."""
        pos = torch.sigmoid(cls.decode(z, pos_edge_index))
        neg = torch.sigmoid(cls.decode(z, neg_edge_index))
        return -torch.log(pos + EPS).mean() - torch.log(1 - neg + EPS).mean()


# ---------------------------------------------------------- matching head

class MatchingHead(nn.Module):
    """IR-graph matching (section 3.3.3): the mean statement embedding of a
    module and a pooled graph embedding -> MLP -> logit.

    The two are projected to ``match_hidden`` (p, q) and the MLP reads the
    concatenation [p, q, p * q, |p - q|], not [text, graph] alone: with the
    bare concatenation the matching loss stayed at ln 2 (chance) for the
    first 550 steps of a real run, and on that run's frozen embeddings a
    bare-concatenation head reached 0.71 held-out accuracy where this one
    reached 0.92 (1,500 steps each). The product and difference features
    let a shallow head compare the two vectors instead of learning to.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.text_proj = nn.Linear(cfg.n_embd, cfg.match_hidden)
        self.graph_proj = nn.Linear(cfg.gcn_dim, cfg.match_hidden)
        self.mlp = nn.Sequential(nn.Linear(4 * cfg.match_hidden, cfg.match_hidden), nn.GELU(),
                                 nn.Dropout(cfg.dropout), nn.Linear(cfg.match_hidden, 1))

    @staticmethod
    def pairs(num_graphs: int, neg_prob: float = 0.5,
              generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """For each graph g, the module whose statements it is paired with
        and the label: with probability neg_prob another module of the
        batch (label 0), else g itself (label 1). Needs 2+ graphs for
        negatives; with one graph every pair is positive."""
        g = torch.arange(num_graphs)
        if num_graphs < 2:
            return g, torch.ones(num_graphs)
        neg = torch.rand(num_graphs, generator=generator) < neg_prob
        shift = torch.randint(1, num_graphs, (num_graphs,), generator=generator)
        src = torch.where(neg, (g + shift) % num_graphs, g)
        return src, (~neg).float()

    def forward(self, text: torch.Tensor, graph: torch.Tensor) -> torch.Tensor:
        """text (G, C), graph (G, D) -> logits (G,)."""
        p, q = self.text_proj(text), self.graph_proj(graph)
        return self.mlp(torch.cat([p, q, p * q, (p - q).abs()], dim=-1)).squeeze(-1)


def segment_mean(x: torch.Tensor, seg: torch.Tensor, num: int) -> torch.Tensor:
    """Mean of the rows of x (N, C) per segment id seg (N,) -> (num, C)."""
    s = torch.zeros(num, x.size(1), dtype=x.dtype, device=x.device).index_add_(0, seg, x)
    n = torch.zeros(num, dtype=x.dtype, device=x.device).index_add_(
        0, seg, torch.ones_like(seg, dtype=x.dtype))
    return s / n.clamp(min=1.0).unsqueeze(-1)


# ------------------------------------------------------------- the model

class MIREncoder(nn.Module):
    """The three pretraining tasks, trained jointly."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.statements = StatementEncoder(cfg)
        self.graph = GraphEncoder(cfg)
        self.matching = MatchingHead(cfg)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def embed(self, batch: dict) -> dict:
        """Statement, node, per-flow latent and module embeddings (no losses)."""
        stmt_emb = self.statements.embed_bucketed(batch["stmt_ids"])  # (S, C)
        node_graph = batch["node_graph"]
        G = int(node_graph.max()) + 1 if node_graph.numel() else 0
        x = self.graph.node_features(stmt_emb, batch["node_stmt"], batch["node_type"])  # (N, C)
        z = [self.graph.encode(x, e) for e in batch["edge_index"]]  # 3 x (N, D)
        graph_emb = segment_mean(torch.stack(z).mean(0), node_graph, G)            # (G, D)
        is_inst = batch["node_type"] == 0
        text_emb = segment_mean(stmt_emb[batch["node_stmt"][is_inst]],
                                node_graph[is_inst], G)                             # (G, C)
        return dict(stmt_emb=stmt_emb, z=z, graph_emb=graph_emb, text_emb=text_emb,
                    num_graphs=G)

    def forward(self, batch: dict, targets: Optional[dict] = None,
                generator: Optional[torch.Generator] = None) -> tuple[dict, dict]:
        """Returns (outputs, losses). ``targets`` may fix the randomness:
        ``mlm_labels`` (with ``batch["mlm_ids"]`` already masked),
        ``neg_edge_index`` (three (2, E_f) tensors), ``match_src`` and
        ``match_labels``; what it leaves out is drawn with ``generator``."""
        targets = targets or {}
        out = self.embed(batch)
        losses = {}
        # 1. masked language modelling
        if "mlm_ids" in batch:
            if "mlm_labels" in targets:
                ids, labels = batch["mlm_ids"], targets["mlm_labels"]
            else:
                ids, labels = mask_tokens(batch["mlm_ids"], generator, self.cfg.vocab_size)
            out["mlm_logits"], out["mlm_targets"], losses["mlm"] = self.statements.mlm_loss(ids, labels)
        # 2. graph auto-encoder, one loss per subgraph, summed
        gae = []
        for f, (z, pos) in enumerate(zip(out["z"], batch["edge_index"])):
            if pos.size(1) == 0:
                continue  # e.g. no call edges in a one-function module
            neg = (targets["neg_edge_index"][f] if "neg_edge_index" in targets
                   else self.graph.negative_edges(pos, batch["node_graph"], generator))
            losses[f"gae_{f}"] = self.graph.recon_loss(z, pos, neg)
            gae.append(losses[f"gae_{f}"])
        if gae:
            losses["gae"] = torch.stack(gae).sum()
        # 3. IR-graph matching
        if "match_src" in targets:
            src, labels = targets["match_src"], targets["match_labels"]
        else:
            src, labels = self.matching.pairs(out["num_graphs"], self.cfg.match_neg_prob, generator)
        src, labels = src.to(out["graph_emb"].device), labels.to(out["graph_emb"].device)
        out["match_logits"] = self.matching(out["text_emb"][src], out["graph_emb"])
        out["match_labels"] = labels
        losses["match"] = F.binary_cross_entropy_with_logits(out["match_logits"], labels)
        losses["loss"] = (losses.get("mlm", 0.0) + self.cfg.gae_weight * losses.get("gae", 0.0)
                          + self.cfg.match_weight * losses["match"])
        return out, losses

    @classmethod
    def from_state(cls, state: dict) -> "MIREncoder":
        """The model saved in ``model.pt`` / ``checkpoint.pt`` (a dict with
        ``config`` and ``model``), in eval mode."""
        model = cls(EncoderConfig(**state["config"]))
        model.load_state_dict(state["model"])
        return model.eval()

    def num_parameters(self) -> dict:
        """Parameters per part (the MLM decoder is tied to the token embedding)."""
        count = lambda m: sum(p.numel() for p in m.parameters())
        s = self.statements
        return {"token+position embedding": count(s.tok_emb) + count(s.pos_emb),
                "transformer blocks": count(s.blocks) + count(s.ln_f),
                "MLM head": count(s.mlm_transform) + s.mlm_bias.numel(),
                "graph encoder": count(self.graph),
                "matching head": count(self.matching),
                "total": count(self)}

    def print_parameters(self) -> None:
        """Print what the model decided: its config and parameter counts."""
        print(f"MIREncoder {self.cfg.to_dict()}")
        for name, n in self.num_parameters().items():
            print(f"  {name:26s} {n / 1e6:8.3f}M")
