"""Corpus directory -> MIREncoder batches (the format in :mod:`mirecc.encoder.model`).

    index = CorpusIndex(".work/corpus")
    tok = mirecc.ir.tokenizer.load()
    mods = [encode_module(index.ir_path(sha), tok, cache_dir=index.root / "encoded")
            for sha in index.train[:8]]
    batch = collate(mods, mlm_per_batch=64, generator=torch.Generator().manual_seed(0))

Node texts: an instruction node reads its normalised statement; where
:func:`mirecc.ir.normalise.normalise_statement` gives ``None`` (debug
intrinsics, no-op pointer casts) or the node has no statement (``[external]``,
a declared function) it reads its ProGraML ``text`` (the opcode, or the
placeholder text), lowercased.  Variable and constant nodes read their type
text, normalised the same way (``i32*`` -> ``ptr``).

Size rule: :func:`collate` keeps modules in order while the batch has at most
``max_nodes`` nodes; a module that alone has more than ``max_nodes`` nodes is
skipped (counted in ``batch["skipped"]`` when the batch is returned), never
truncated, since cutting a graph leaves dangling flows.  The caller chooses
``max_nodes`` (default :data:`MAX_NODES`). :func:`pack_batches` groups a
shuffled corpus into batches that fit, so that collate drops nothing but
the modules alone over the cap.

Only :func:`collate` needs torch; indexing and encoding are numpy only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from mirecc.graph import GraphBuildError, build_graph, schema
from mirecc.ir.normalise import normalise_statement
from mirecc.ir.tokenizer import IRTokenizer
from mirecc.util.fsutil import atomic_write_bytes

#: modules whose sha256 hex prefix (first 4 digits, as an integer) is below
#: HELDOUT_FRACTION * 65536 are held out: stable as the corpus grows
HELDOUT_FRACTION = 0.05
#: default cap on nodes in one batch (and on one module)
MAX_NODES = 20000
#: bump when encode_module's output changes (invalidates the caches)
ENCODING_VERSION = 2

_ARRAY_KEYS = ("stmt_ids", "node_stmt", "node_type", "node_function",
               "edges_0", "edges_1", "edges_2")


# ------------------------------------------------------------------ index

def is_heldout(sha: str, fraction: float = HELDOUT_FRACTION) -> bool:
    """Whether a module (by its sha256 hex) is in the held-out split."""
    return int(sha[:4], 16) < fraction * 65536


class CorpusIndex:
    """The modules of a corpus directory (``manifest.jsonl`` + ``ir/aa/sha.bc``).

    A module is listed once (first manifest line per sha256) and only if its
    bitcode exists. ``kinds`` keeps only those manifest kinds.  ``train`` and
    ``heldout`` are the sorted sha256 lists of the two splits.
    """

    def __init__(self, root: str | Path, kinds: Iterable[str] | None = None,
                 heldout_fraction: float = HELDOUT_FRACTION):
        self.root = Path(root)
        kinds = set(kinds) if kinds is not None else None
        self.records: dict[str, dict] = {}
        with open(self.root / "manifest.jsonl") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                    sha = rec["sha256"]
                except (ValueError, KeyError, TypeError):
                    continue
                if sha in self.records or (kinds is not None and rec.get("kind") not in kinds):
                    continue
                if not self.ir_path(sha, rec).is_file():
                    continue
                self.records[sha] = rec
        shas = sorted(self.records)
        self.train = [s for s in shas if not is_heldout(s, heldout_fraction)]
        self.heldout = [s for s in shas if is_heldout(s, heldout_fraction)]

    def ir_path(self, sha: str, rec: dict | None = None) -> Path:
        rec = rec if rec is not None else self.records.get(sha, {})
        ir = rec.get("ir") or f"ir/{sha[:2]}/{sha}.bc"
        return self.root / ir

    def __len__(self) -> int:
        return len(self.records)


# --------------------------------------------------------------- encoding

@dataclass
class EncodedModule:
    """One module's graph with tokenised, deduplicated node texts.

    stmt_ids (S, L) int32, L = longest statement in the module (<= 64);
    node_stmt (N,) int32 into stmt_ids; node_type (N,) uint8;
    edges: three (2, E_f) int32 arrays (control, data, call);
    node_function (N,) int32: the node's function index in the module, -1
    for constants and ``[external]`` (what :mod:`mirecc.encoder.pieces`
    splits large modules by; None where not known).
    """
    stmt_ids: np.ndarray
    node_stmt: np.ndarray
    node_type: np.ndarray
    edges: tuple
    node_function: np.ndarray | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.node_type.shape[0])

    def arrays(self) -> dict:
        d = {"stmt_ids": self.stmt_ids, "node_stmt": self.node_stmt, "node_type": self.node_type}
        if self.node_function is not None:
            d["node_function"] = self.node_function
        d.update({f"edges_{f}": e for f, e in enumerate(self.edges)})
        return d

    @classmethod
    def from_arrays(cls, d) -> EncodedModule:
        fn = d["node_function"] if "node_function" in d else None
        return cls(np.asarray(d["stmt_ids"]), np.asarray(d["node_stmt"]),
                   np.asarray(d["node_type"]), tuple(np.asarray(d[f"edges_{f}"]) for f in range(3)),
                   None if fn is None else np.asarray(fn))


def node_texts(graph) -> list[str]:
    """The text every node of a ProgramGraph reads (see the module docstring)."""
    short = graph.node_texts()
    full = graph.full_texts()
    types = graph.node_type.tolist()
    memo: dict[tuple[str, str], str] = {}   # (raw text, fallback): many repeat
    out = []
    for t, s, f in zip(types, short, full):
        raw = f if t == schema.INSTRUCTION else s
        key = (raw, s)
        text = memo.get(key)
        if text is None:
            norm = normalise_statement(raw) if raw else None
            text = memo[key] = norm if norm is not None else s.strip().lower()
        out.append(text)
    return out


_TOK_SHA: dict = {}


def tokenizer_sha256(tokenizer) -> str:
    """sha256 of the tokenizer's serialised JSON (``tokenizer.tok.to_str()``,
    equivalent to hashing its file): a retrained tokenizer changes it."""
    key = id(tokenizer)
    if key not in _TOK_SHA:
        _TOK_SHA[key] = (tokenizer, hashlib.sha256(tokenizer.tok.to_str().encode()).hexdigest())
    return _TOK_SHA[key][1]


def cache_path(cache_dir: Path, bc_path: Path) -> Path:
    sha = Path(bc_path).stem
    return Path(cache_dir) / sha[:2] / f"{sha}.npz"


def encode_module(bc_path: str | Path, tokenizer, cache_dir: str | Path | None = None,
                  tok_sha: str | None = None) -> EncodedModule:
    """Build the graph of ``bc_path``, tokenise its deduplicated node texts.

    With ``cache_dir``, the result is kept in ``cache_dir/aa/<stem>.npz``
    (stem = the corpus sha256), valid only for the same tokenizer (its JSON's
    sha256, or ``tok_sha`` if given) and :data:`ENCODING_VERSION`.
    Raises :class:`mirecc.graph.GraphBuildError` for IR the builder rejects.
    """
    bc_path = Path(bc_path)
    tok_sha = tok_sha or tokenizer_sha256(tokenizer)
    cpath = cache_path(Path(cache_dir), bc_path) if cache_dir is not None else None
    if cpath is not None and cpath.is_file():
        try:
            with np.load(cpath, allow_pickle=False) as z:
                if (str(z["tokenizer_sha256"]) == tok_sha
                        and int(z["version"]) == ENCODING_VERSION):
                    return EncodedModule.from_arrays({k: z[k] for k in _ARRAY_KEYS})
        except (OSError, ValueError, KeyError):
            pass   # damaged or old entry: rebuild
    mod = encode_graph(build_graph(bc_path), tokenizer)
    if cpath is not None:
        buf = io.BytesIO()
        np.savez(buf, tokenizer_sha256=np.array(tok_sha), version=np.array(ENCODING_VERSION),
                 **mod.arrays())
        atomic_write_bytes(cpath, buf.getvalue())
    return mod


def encode_graph(graph, tokenizer) -> EncodedModule:
    """A program graph's :class:`EncodedModule` (its ``node_function``
    indexes ``graph.function_names``)."""
    texts = node_texts(graph)
    uniq: dict[str, int] = {}
    node_stmt = np.fromiter((uniq.setdefault(t, len(uniq)) for t in texts),
                            dtype=np.int32, count=len(texts))
    ids, masks = tokenizer.encode_batch(list(uniq))
    ids = np.asarray(ids, dtype=np.int32).reshape(len(uniq), -1)
    L = int(np.asarray(masks).sum(1).max()) if len(uniq) else 1
    stmt_ids = np.ascontiguousarray(ids[:, :L])
    flow = graph.edge_flow
    src, dst = graph.edge_source, graph.edge_target
    edges = tuple(np.stack([src[flow == f], dst[flow == f]]).astype(np.int32) for f in range(3))
    return EncodedModule(stmt_ids, node_stmt, np.asarray(graph.node_type, dtype=np.uint8), edges,
                         np.asarray(graph.node_function, dtype=np.int32))


# ---------------------------------------------------------------- batches

def select_modules(modules: Sequence[EncodedModule], max_nodes: int = MAX_NODES
                   ) -> tuple[list[EncodedModule], int]:
    """The size rule: modules in order while the total stays <= max_nodes;
    a module alone over max_nodes is skipped. Returns (kept, skipped)."""
    kept, total, skipped = [], 0, 0
    for m in modules:
        if m.num_nodes > max_nodes or total + m.num_nodes > max_nodes:
            skipped += 1
            continue
        kept.append(m)
        total += m.num_nodes
    return kept, skipped


def collate(modules: Sequence[EncodedModule], mlm_per_batch: int = 64, generator=None,
            max_nodes: int = MAX_NODES) -> dict:
    """Merge encoded modules into one batch dict of torch tensors.

    Statements are deduplicated across the batch; ``stmt_ids`` is trimmed to
    the batch's longest statement; node and edge indices are offset per
    module; ``mlm_ids`` holds ``min(mlm_per_batch, S)`` statements drawn
    without replacement with ``generator`` (none when ``mlm_per_batch`` is 0).
    Modules that do not fit ``max_nodes`` are dropped (see
    :func:`select_modules`); ``batch["skipped"]`` counts them (an int, not a
    tensor) and ``batch["num_graphs"]`` counts the modules kept.
    Raises ValueError when no module fits.
    """
    # lazy: torch costs ~2 s to import; only collate() needs it
    import torch
    kept, skipped = select_modules(modules, max_nodes)
    if not kept:
        raise ValueError("no module fits in a batch of max_nodes="
                         f"{max_nodes} nodes ({skipped} skipped)")
    L = max(m.stmt_ids.shape[1] for m in kept)
    rows: dict[bytes, int] = {}
    stmt_rows, node_stmt, node_type, node_graph = [], [], [], []
    edges = [[], [], []]
    offset = 0
    for g, m in enumerate(kept):
        padded = np.zeros((m.stmt_ids.shape[0], L), dtype=np.int64)
        padded[:, :m.stmt_ids.shape[1]] = m.stmt_ids
        remap = np.empty(padded.shape[0], dtype=np.int64)
        for i, row in enumerate(padded):
            key = row.tobytes()
            j = rows.get(key)
            if j is None:
                j = rows[key] = len(stmt_rows)
                stmt_rows.append(row)
            remap[i] = j
        node_stmt.append(remap[m.node_stmt])
        node_type.append(m.node_type.astype(np.int64))
        node_graph.append(np.full(m.num_nodes, g, dtype=np.int64))
        for f in range(3):
            edges[f].append(m.edges[f].astype(np.int64) + offset)
        offset += m.num_nodes
    stmt_ids = torch.from_numpy(np.stack(stmt_rows))
    batch = {
        "stmt_ids": stmt_ids,
        "node_stmt": torch.from_numpy(np.concatenate(node_stmt)),
        "node_type": torch.from_numpy(np.concatenate(node_type)),
        "node_graph": torch.from_numpy(np.concatenate(node_graph)),
        "edge_index": [torch.from_numpy(np.concatenate(e, axis=1).reshape(2, -1)) for e in edges],
        "num_graphs": len(kept),
        "skipped": skipped,
    }
    if mlm_per_batch > 0:
        k = min(mlm_per_batch, stmt_ids.size(0))
        pick = torch.randperm(stmt_ids.size(0), generator=generator)[:k]
        batch["mlm_ids"] = stmt_ids[pick]
    return batch


def iter_encoded(index: CorpusIndex, shas: Iterable[str], tokenizer,
                 cache_dir: str | Path | None = None):
    """(sha, EncodedModule) for each module of ``shas`` whose graph builds;
    modules the graph builder rejects (e.g. no function definitions) are
    left out. ``cache_dir`` defaults to ``index.root / "encoded"``."""
    cache_dir = index.root / "encoded" if cache_dir is None else cache_dir
    tok_sha = tokenizer_sha256(tokenizer)
    for sha in shas:
        try:
            yield sha, encode_module(index.ir_path(sha), tokenizer, cache_dir, tok_sha)
        except GraphBuildError:
            continue


def pack_batches(sizes: dict, max_nodes: int = MAX_NODES, max_modules: int = 64,
                 seed: int = 0, max_statements: int = 0) -> tuple[list[list[str]], list[str]]:
    """Group modules into batches of at most ``max_nodes`` nodes,
    ``max_modules`` modules and (when ``max_statements`` > 0) that many
    statements, in an order shuffled by ``seed`` (first fit over the
    shuffled order). ``sizes`` maps sha -> node count, or sha -> (nodes,
    distinct statements) as :func:`encode_corpus` returns. A module alone
    over a cap is left out: returns (batches, skipped shas). Feeding each
    group to :func:`collate` with the same ``max_nodes`` drops nothing.
    (Statements are summed per module: an upper bound, since collate
    deduplicates them across the batch.)"""
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    batches: list[list[str]] = []
    totals: list[list[int]] = []
    skipped = []
    stmt_cap = max_statements or float("inf")
    for sha in order:
        size = sizes[sha]
        n, k = (size, 0) if isinstance(size, int) else (int(size[0]), int(size[1]))
        if n > max_nodes or k > stmt_cap:
            skipped.append(sha)
            continue
        for i, (tn, tk) in enumerate(totals):
            if tn + n <= max_nodes and tk + k <= stmt_cap and len(batches[i]) < max_modules:
                batches[i].append(sha)
                totals[i] = [tn + n, tk + k]
                break
        else:
            batches.append([sha])
            totals.append([n, k])
    return batches, skipped


_WORKER_TOKENIZER = None


def _init_worker(tokenizer_json: str) -> None:
    """Pool initializer: the caller's tokenizer, rebuilt from its JSON."""
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = IRTokenizer(Tokenizer.from_str(tokenizer_json))


def _encode_one(job, tokenizer=None):
    sha, ir_path, cache_dir, tok_sha = job
    try:
        mod = encode_module(ir_path, tokenizer or _WORKER_TOKENIZER, cache_dir, tok_sha)
    except GraphBuildError:
        return sha, None
    return sha, (mod.num_nodes, int(mod.stmt_ids.shape[0]))


def encode_corpus(index: CorpusIndex, tokenizer, shas: Sequence[str] | None = None,
                  jobs: int = 0, progress: bool = True) -> dict[str, tuple[int, int]]:
    """Encode (and cache under ``index.root/encoded``) every module of
    ``shas`` (default: all) with ``jobs`` processes (0: one per core).
    Returns sha -> (nodes, distinct statements) for the modules whose graph
    builds; the others are left out. Re-running reads the cache."""
    # lazy: encoder.runtime imports this module when a compile embeds; keep that start-up
    from multiprocessing import get_context
    from tqdm import tqdm

    shas = list(index.records) if shas is None else list(shas)
    cache_dir = index.root / "encoded"
    tok_sha = tokenizer_sha256(tokenizer)
    work = [(s, index.ir_path(s), cache_dir, tok_sha) for s in shas]
    jobs = jobs or os.cpu_count() or 1
    sizes: dict[str, tuple[int, int]] = {}
    bar = tqdm(total=len(work), desc="encode modules", unit="mod", disable=not progress)
    if jobs == 1:
        for sha, size in (_encode_one(job, tokenizer) for job in work):
            if size is not None:
                sizes[sha] = size
            bar.update()
    else:
        with get_context("fork").Pool(jobs, _init_worker, (tokenizer.tok.to_str(),)) as pool:
            for sha, size in pool.imap_unordered(_encode_one, work, chunksize=4):
                if size is not None:
                    sizes[sha] = size
                bar.update()
    bar.close()
    return sizes
