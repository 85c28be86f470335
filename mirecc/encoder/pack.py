"""The encoded corpus in one compact file, and a loader for it.

    mire corpus pack --corpus .work/corpus --out .work/corpus.pack.npz
    data = PackedCorpus(".work/corpus.pack.npz")
    data.train, data.heldout            # piece numbers of each split
    mod = data.module(data.train[0])    # an EncodedModule, ready for collate()

Why: a GPU lent for pretraining gets the working tree and at most 64 MiB
beside it (``/work/.library/device/README.md``), far less than the corpus
(~4 GB of bitcode) or its encoding cache.  The pack holds what training
reads and nothing else, per piece of :mod:`mirecc.encoder.pieces` (every
corpus module, whole or cut into per-function subgraphs):

* one statement table for the whole corpus: each distinct tokenised
  statement once, its token ids as uint16 (the vocabulary is ~8k);
* per node its statement number and node type; per edge its flow, with
  sources delta-coded and targets relative to the source, so that LZMA sees
  runs of small numbers.

The file is an ``.npz`` whose members are LZMA-compressed (``zipfile``'s
ZIP_LZMA; ``numpy.load`` reads it), written atomically.  The split is the
corpus's: a piece is held out when its module's sha256 is
(:func:`mirecc.encoder.data.is_heldout`).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterable
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.encoder import data
from mirecc.encoder.data import (ENCODING_VERSION, EncodedModule, _init_worker, is_heldout,
                                 tokenizer_sha256)
from mirecc.encoder.pieces import split_module
from mirecc.graph import GraphBuildError
from mirecc.util.fsutil import atomic_write_bytes

PACK_VERSION = 1


class PackWriter:
    """Collects pieces (:meth:`add`), then :meth:`write` s the file."""

    def __init__(self):
        self.statements: dict[bytes, int] = {}
        self.shas: list[str] = []
        self.module_nodes: list[int] = []
        self.piece_module, self.piece_index, self.piece_whole = [], [], []
        self.node_stmt, self.node_type = [], []
        self.edge_counts, self.src_delta, self.dst_rel = [], [], []

    def _statement_numbers(self, stmt_ids: np.ndarray) -> np.ndarray:
        lengths = (stmt_ids != 0).sum(axis=1)
        out = np.empty(stmt_ids.shape[0], dtype=np.int64)
        for i, (row, n) in enumerate(zip(stmt_ids, lengths.tolist())):
            key = row[:n].astype(np.uint16).tobytes()
            out[i] = self.statements.setdefault(key, len(self.statements))
        return out

    def add(self, sha: str, pieces: list[EncodedModule], whole: bool,
            module_nodes: int | None = None) -> None:
        """One module's pieces (``whole``: the module is its single piece;
        ``module_nodes``: the whole module's node count, default the pieces')."""
        if not pieces:
            return
        module = len(self.shas)
        self.shas.append(sha)
        self.module_nodes.append(module_nodes if module_nodes is not None
                                 else sum(p.num_nodes for p in pieces))
        for k, p in enumerate(pieces):
            if p.num_nodes > 65535 or int(p.stmt_ids.max(initial=0)) > 65535:
                raise ValueError(f"{sha} piece {k}: over the pack's uint16 limits")
            self.piece_module.append(module)
            self.piece_index.append(k)
            self.piece_whole.append(whole)
            self.node_stmt.append(self._statement_numbers(p.stmt_ids)[p.node_stmt].astype(np.int32))
            self.node_type.append(p.node_type.astype(np.uint8))
            counts = []
            for e in p.edges:
                order = np.lexsort((e[1], e[0]))
                src, dst = e[0][order].astype(np.int32), e[1][order].astype(np.int32)
                delta = np.diff(src, prepend=0)   # first: the source itself
                self.src_delta.append(delta)
                self.dst_rel.append(dst - src)
                counts.append(src.size)
            self.edge_counts.append(counts)

    def arrays(self, meta: dict) -> dict[str, np.ndarray]:
        rows = list(self.statements)
        lengths = np.array([len(r) // 2 for r in rows], dtype=np.int32)
        tokens = np.frombuffer(b"".join(rows), dtype=np.uint16)
        return {
            "meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8),
            "shas": np.array(self.shas, dtype="S64"),
            "module_nodes": np.array(self.module_nodes, dtype=np.int64),
            "statement_tokens": tokens,
            "statement_lengths": lengths,
            "piece_module": np.array(self.piece_module, dtype=np.int32),
            "piece_index": np.array(self.piece_index, dtype=np.int32),
            "piece_whole": np.array(self.piece_whole, dtype=np.uint8),
            "piece_nodes": np.array([a.size for a in self.node_stmt], dtype=np.int32),
            "piece_edges": np.array(self.edge_counts, dtype=np.int32).reshape(-1, 3),
            "node_stmt": _concat(self.node_stmt, np.int32),
            "node_type": _concat(self.node_type, np.uint8),
            "edge_src_delta": _concat(self.src_delta, np.int32),
            "edge_dst_rel": _concat(self.dst_rel, np.int32),
        }

    def write(self, path: str | Path, meta: dict) -> int:
        """Write the pack atomically; returns its size in bytes."""
        meta = {"pack_version": PACK_VERSION, "encoding_version": ENCODING_VERSION, **meta}
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_LZMA) as zf:
            for name, arr in self.arrays(meta).items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
        data = buf.getvalue()
        atomic_write_bytes(Path(path), data)
        return len(data)


def _concat(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)


class PackedCorpus:
    """A pack file, loaded whole (decompressed, ~20 bytes per node)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as z:
                a = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{self.path}: not a mirecc corpus pack ({exc})") from None
        try:
            self.meta = json.loads(a["meta"].tobytes())
        except (KeyError, ValueError):
            raise ValueError(f"{self.path}: not a mirecc corpus pack (no meta)") from None
        if self.meta.get("pack_version") != PACK_VERSION:
            raise ValueError(f"{self.path}: pack version {self.meta.get('pack_version')}, "
                             f"this mirecc reads {PACK_VERSION}")
        self.shas = [s.decode() for s in a["shas"].tolist()]
        self.module_nodes = a["module_nodes"]
        self.tokens = a["statement_tokens"]
        self.lengths = a["statement_lengths"]
        self.token_start = np.concatenate([[0], np.cumsum(self.lengths, dtype=np.int64)])
        self.piece_module, self.piece_index = a["piece_module"], a["piece_index"]
        self.piece_whole = a["piece_whole"].astype(bool)
        self.piece_nodes, self.piece_edges = a["piece_nodes"], a["piece_edges"]
        self.node_start = np.concatenate([[0], np.cumsum(self.piece_nodes, dtype=np.int64)])
        self.edge_start = np.concatenate([[0], np.cumsum(self.piece_edges.reshape(-1),
                                                         dtype=np.int64)])
        self.node_stmt, self.node_type = a["node_stmt"], a["node_type"]
        self.src_delta, self.dst_rel = a["edge_src_delta"], a["edge_dst_rel"]
        held = np.array([is_heldout(s) for s in self.shas], dtype=bool)
        piece_held = held[self.piece_module] if self.shas else np.zeros(0, dtype=bool)
        self.train = np.flatnonzero(~piece_held).tolist()
        self.heldout = np.flatnonzero(piece_held).tolist()

    def __len__(self) -> int:
        return int(self.piece_nodes.size)

    def key(self, i: int) -> str:
        """``<module sha256>#<piece>``."""
        return f"{self.shas[self.piece_module[i]]}#{int(self.piece_index[i])}"

    def statement_count(self, i: int) -> int:
        a, b = self.node_start[i], self.node_start[i + 1]
        return int(np.unique(self.node_stmt[a:b]).size)

    def sizes(self, pieces: Iterable[int]) -> dict[int, tuple[int, int]]:
        """piece -> (nodes, distinct statements), as pack_batches takes."""
        return {i: (int(self.piece_nodes[i]), self.statement_count(i)) for i in pieces}

    def module(self, i: int) -> EncodedModule:
        """Piece ``i`` as an EncodedModule (no node_function: not stored)."""
        a, b = self.node_start[i], self.node_start[i + 1]
        used, node_stmt = np.unique(self.node_stmt[a:b], return_inverse=True)
        lengths = self.lengths[used]
        width = int(lengths.max(initial=1))
        cols = np.arange(width)
        mask = cols[None, :] < lengths[:, None]
        stmt_ids = np.zeros((used.size, width), dtype=np.int32)
        stmt_ids[mask] = self.tokens[(self.token_start[used][:, None] + cols[None, :])[mask]]
        edges = []
        for f in range(3):
            lo, hi = self.edge_start[3 * i + f], self.edge_start[3 * i + f + 1]
            src = np.cumsum(self.src_delta[lo:hi], dtype=np.int64)
            dst = src + self.dst_rel[lo:hi]
            edges.append(np.stack([src, dst]).astype(np.int32))
        return EncodedModule(stmt_ids, node_stmt.astype(np.int32).reshape(-1),
                             self.node_type[a:b].copy(), tuple(edges))


# ------------------------------------------------------------------ build

def _split_one(job):
    """Pool worker: one corpus module -> (sha, pieces, whole, dropped nodes)."""
    sha, ir_path, cache_dir, tok_sha, max_nodes, max_statements = job
    try:
        mod = data.encode_module(ir_path, data._WORKER_TOKENIZER, cache_dir, tok_sha)
    except GraphBuildError:
        return sha, [], False, 0, 0
    pieces, dropped = split_module(mod, max_nodes, max_statements)
    whole = len(pieces) == 1 and pieces[0] is mod
    for p in pieces:
        p.node_function = None   # not packed: keep the pipe light
    return sha, pieces, whole, dropped, mod.num_nodes


def build_pack(index, tokenizer, out: str | Path, max_nodes: int = 6000,
               max_statements: int = 768, jobs: int = 0, progress: bool = True) -> dict:
    """Encode every module of ``index`` (through its cache), cut the large
    ones into pieces, write the pack to ``out``. Returns its summary (also
    stored in the pack's meta)."""
    tok_sha = tokenizer_sha256(tokenizer)
    cache_dir = index.root / "encoded"
    work = [(s, index.ir_path(s), cache_dir, tok_sha, max_nodes, max_statements)
            for s in sorted(index.records)]
    writer = PackWriter()
    results: dict[str, tuple] = {}
    summary = {"modules": 0, "modules_whole": 0, "modules_cut": 0, "modules_without_graph": 0,
               "nodes_dropped": 0}
    jobs = jobs or os.cpu_count() or 1
    with get_context("fork").Pool(jobs, _init_worker, (tokenizer.tok.to_str(),)) as pool, \
            tqdm(total=len(work), desc="pack modules", unit="mod", disable=not progress) as bar:
        for sha, pieces, whole, dropped, nodes in pool.imap_unordered(_split_one, work,
                                                                       chunksize=2):
            results[sha] = (pieces, whole, nodes)
            summary["nodes_dropped"] += dropped
            bar.update()
    for sha in sorted(results):   # a pack's content does not depend on the pool's order
        pieces, whole, nodes = results.pop(sha)
        if not pieces:
            summary["modules_without_graph"] += 1
            continue
        summary["modules"] += 1
        summary["modules_whole" if whole else "modules_cut"] += 1
        writer.add(sha, pieces, whole, nodes)
    arrays = writer.arrays({})
    summary.update({
        "pieces": int(arrays["piece_nodes"].size),
        "nodes": int(arrays["node_type"].size),
        "edges": int(arrays["edge_dst_rel"].size),
        "statements": int(arrays["statement_lengths"].size),
        "max_nodes": max_nodes, "max_statements": max_statements,
        "tokenizer_sha256": tok_sha, "corpus": str(index.root),
    })
    summary["bytes"] = writer.write(out, summary)
    return summary
