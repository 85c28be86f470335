"""Embedding IR with the frozen encoder in ONNX Runtime (no torch).

    from mirecc.encoder.runtime import Encoder
    enc = Encoder()                       # the shipped model, hashes verified
    emb = enc.embed_file("kernel.c")      # or .ll / .bc
    emb.module                            # (256,) float32
    emb.functions["main"], emb.loops["main:3"]

Steps for one module: program graph (:func:`mirecc.graph.build_graph`),
node texts (normalised statements, :func:`mirecc.encoder.data.node_texts`),
distinct texts looked up in the statement cache
(:mod:`mirecc.encoder.stmtcache`), the rest tokenised, sorted by length and
run through ``statements.onnx`` in buckets trimmed to their longest
statement, then ``graph.onnx`` over the whole graph.

Granularities: an embedding of a set of nodes is the mean statement
embedding of its instruction nodes concatenated with the mean node
embedding (over the three subgraphs) of all its nodes: the same two halves
that the IR-graph matching task was trained to relate. Module: every node;
function: the nodes of the function; loop: the instructions whose innermost
loop it is, and those of the loops nested in it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mirecc.encoder import SHIPPED_MODEL_DIR as DEFAULT_MODEL_DIR
from mirecc.util.modelfiles import ModelError, load_model
#: intra-op threads of the graph session. onnxruntime 1.31's ScatterND with
#: reduction="add" (what index_add_ exports to) races on repeated indices
#: when it runs on several threads: 2 threads gave differences of ~1e-2 from
#: torch and between two runs on 3000 nodes / 7000 edges, 1 thread gives 0.
#: The GCN is a small share of the time, so one thread costs little.
GRAPH_THREADS = 1
#: statements per transformer call; a bucket is trimmed to its longest statement
BUCKET_ROWS = 64
IR_SUFFIXES = (".ll", ".bc")
SOURCE_SUFFIXES = {".c": "c", ".i": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".C": "c++",
                   ".cl": "cl", ".cu": "cuda", ".m": "objective-c"}


class EmbedError(Exception):
    """The input cannot be embedded; the message names the file and the problem."""


class Embeddings:
    """Module, function and loop embeddings of one LLVM module."""

    def __init__(self, module: np.ndarray, functions: dict, loops: dict, stats: dict):
        self.module, self.functions, self.loops, self.stats = module, functions, loops, stats

    def to_json(self) -> dict:
        return {"module": self.module.tolist(),
                "functions": {k: v.tolist() for k, v in self.functions.items()},
                "loops": {k: v.tolist() for k, v in self.loops.items()},
                "stats": self.stats}


class Encoder:
    """The frozen encoder: two ONNX Runtime sessions and the tokenizer.

    ``model_dir`` defaults to the shipped model; every file is checked
    against the manifest's sha256 (:class:`mirecc.util.modelfiles.ModelError` if one
    differs). ``cache``: a :class:`~mirecc.encoder.stmtcache.StatementCache`
    path, ``None`` for the default path, or ``False`` for no cache.
    """

    def __init__(self, model_dir: str | Path | None = None, cache=None, threads: int = 0):
        # lazy: ONNX Runtime and the tokenizer (~200 ms): the modules that import this one
        # for compile_to_ir alone (mire bench's suites) never pay them
        import onnxruntime as ort
        from mirecc.ir import tokenizer as tokmod
        self.info = load_model(model_dir or DEFAULT_MODEL_DIR)
        root = self.info.directory
        self.manifest = json.loads((root / "manifest.json").read_text())
        try:
            self.dim_statement = int(self.manifest["embedding"]["statement"])
            self.dim_node = int(self.manifest["embedding"]["node"])
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{root / 'manifest.json'}: no 'embedding' table with the "
                             "statement and node widths (not an encoder model?)") from None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.statements = ort.InferenceSession(str(root / "statements.onnx"), opts,
                                                   providers=["CPUExecutionProvider"])
            graph_opts = ort.SessionOptions()
            graph_opts.intra_op_num_threads = GRAPH_THREADS
            graph_opts.log_severity_level = 3
            self.graph = ort.InferenceSession(str(root / "graph.onnx"), graph_opts,
                                              providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ModelError(f"{root}: cannot load the ONNX model: {exc}") from None
        self.tokenizer = tokmod.load(root / "tokenizer.json")
        self.cache = None
        if cache is not False:
            # lazy: sqlite3, as ONNX Runtime above
            from mirecc.encoder.stmtcache import CacheError, StatementCache, default_path
            try:
                self.cache = StatementCache(cache or default_path(), self.info.cache_version,
                                            self.dim_statement)
            except CacheError as exc:
                self._drop_cache(exc)

    def _drop_cache(self, exc: Exception) -> None:
        """The statement cache is an optimisation: on any error, say so once
        and go on without it."""
        print(f"mire: warning: {exc}; embedding without the statement cache", file=sys.stderr)
        self.cache = None

    # ------------------------------------------------------------ statements

    def embed_statements(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Embeddings (len(texts), C) of distinct statement texts, and how
        many of them came from the cache."""
        from mirecc.encoder.stmtcache import CacheError  # lazy: as in __init__
        out = np.empty((len(texts), self.dim_statement), dtype=np.float32)
        cached = {}
        if self.cache is not None:
            try:
                cached = self.cache.get_many(texts)
            except CacheError as exc:
                self._drop_cache(exc)
        missing = []
        for i, t in enumerate(texts):
            vec = cached.get(t)
            if vec is None:
                missing.append(i)
            else:
                out[i] = vec
        if missing:
            ids, masks = self.tokenizer.encode_batch([texts[i] for i in missing])
            ids = np.asarray(ids, dtype=np.int64)
            lengths = np.asarray(masks).sum(1)
            order = np.argsort(lengths, kind="stable")
            for b in range(0, len(order), BUCKET_ROWS):
                rows = order[b:b + BUCKET_ROWS]
                L = max(1, int(lengths[rows].max()))
                emb = self.statements.run(None, {"ids": ids[rows, :L]})[0]
                out[np.asarray(missing)[rows]] = emb
            if self.cache is not None:
                try:
                    self.cache.put_many([texts[i] for i in missing], out[missing])
                except CacheError as exc:
                    self._drop_cache(exc)
        return out, len(texts) - len(missing)

    # ----------------------------------------------------------------- graph

    def embed_graph(self, graph) -> Embeddings:
        """Embeddings of a :class:`mirecc.graph.ProgramGraph`."""
        # lazy: the graph package and the corpus reader (tokenizers), as in __init__
        from mirecc.encoder.data import node_texts
        from mirecc.graph import schema
        t0 = time.perf_counter()
        texts = node_texts(graph)
        index: dict[str, int] = {}
        node_stmt = np.fromiter((index.setdefault(t, len(index)) for t in texts),
                                dtype=np.int64, count=len(texts))
        stmt_emb, hits = self.embed_statements(list(index))
        t1 = time.perf_counter()
        flow, src, dst = graph.edge_flow, graph.edge_source, graph.edge_target
        feeds = {"stmt_emb": stmt_emb, "node_stmt": node_stmt,
                 "node_type": np.asarray(graph.node_type, dtype=np.int64)}
        for f, name in enumerate(("edges_control", "edges_data", "edges_call")):
            feeds[name] = np.stack([src[flow == f], dst[flow == f]]).astype(np.int64)
        z = self.graph.run(None, feeds)[0].mean(0)                 # (N, D)
        t2 = time.perf_counter()

        is_inst = np.asarray(graph.node_type) == schema.INSTRUCTION
        inst_text = stmt_emb[node_stmt[is_inst]]                    # (N_inst, C)

        def pooled(text_sum, text_n, node_sum, node_n) -> np.ndarray:
            return np.concatenate([text_sum / max(text_n, 1), node_sum / max(node_n, 1)]
                                  ).astype(np.float32)

        # functions: one pass of segment sums (a mask per function is O(F x N))
        func = np.asarray(graph.node_function)
        F = len(graph.function_names)
        t_sum, t_n = segment_sums(inst_text, func[is_inst], F)
        z_sum, z_n = segment_sums(z, func, F)
        offs = graph.arrays["node_full_text_offsets"]
        has_statement = is_inst & (np.diff(offs) > 0)               # declarations have none
        defined = np.bincount(func[has_statement & (func >= 0)], minlength=F) > 0
        functions = {name: pooled(t_sum[f], t_n[f], z_sum[f], z_n[f])
                     for f, name in enumerate(graph.function_names) if defined[f]}
        # loops: each loop's own instructions, then add every loop into its
        # parent, innermost first, so a loop covers the loops nested in it
        node_loop = np.asarray(graph.node_loop)[is_inst]
        L = graph.num_loops
        lt_sum, lt_n = segment_sums(inst_text, node_loop, L)
        lz_sum, lz_n = segment_sums(z[is_inst], node_loop, L)
        parent = graph.arrays["loop_parent"]
        for j in np.argsort(-np.asarray(graph.arrays["loop_depth"]), kind="stable").tolist():
            p = int(parent[j])
            if p >= 0:
                lt_sum[p] += lt_sum[j]
                lt_n[p] += lt_n[j]
                lz_sum[p] += lz_sum[j]
                lz_n[p] += lz_n[j]
        loops = {lid: pooled(lt_sum[i], lt_n[i], lz_sum[i], lz_n[i])
                 for i, lid in enumerate(graph.loop_ids)}
        module = pooled(inst_text.sum(0, dtype=np.float64), len(inst_text),
                        z.sum(0, dtype=np.float64), len(z))
        stats = {"nodes": int(len(texts)), "statements": int(is_inst.sum()),
                 "distinct_texts": len(index), "cached_texts": hits,
                 "statement_seconds": round(t1 - t0, 4), "graph_seconds": round(t2 - t1, 4)}
        return Embeddings(module, functions, loops, stats)

    def embed_functions(self, graph, names=None, digests: dict | None = None
                        ) -> dict[str, np.ndarray]:
        """Each defined function's own vector (``names``: only those): the
        encoder run on the function's part of the program graph alone (its
        nodes, the constants and globals they use, the edges among them), so
        that the vector depends on the function's code and not on the rest
        of the module; pooled as :meth:`embed_graph` pools a function.  With
        ``digests`` (name -> code digest, :func:`mirecc.ir.text.function_digests`)
        vectors are cached by digest: a rebuild, another TU with the same
        function, or a second decision on it pays nothing."""
        # lazy: as in embed_graph
        from mirecc.encoder.data import node_texts
        from mirecc.encoder.stmtcache import CacheError
        from mirecc.graph import schema

        func = np.asarray(graph.node_function)
        ntype = np.asarray(graph.node_type)
        offs = graph.arrays["node_full_text_offsets"]
        has_statement = (ntype == schema.INSTRUCTION) & (np.diff(offs) > 0)
        defined = {graph.function_names[f] for f in np.unique(func[has_statement & (func >= 0)])}
        wanted = [n for n in (names if names is not None else graph.function_names)
                  if n in defined]
        out: dict[str, np.ndarray] = {}
        digests = digests or {}
        keyed = {n: digests[n] for n in wanted if n in digests}
        if keyed and self.cache is not None:
            try:
                hit = self.cache.get_many(sorted(set(keyed.values())), "function_embedding",
                                          self.dim_statement + self.dim_node)
                out.update({n: hit[d] for n, d in keyed.items() if d in hit})
            except CacheError as exc:
                self._drop_cache(exc)
        todo = [n for n in wanted if n not in out]
        if not todo:
            return out
        flow, src, dst = graph.edge_flow, graph.edge_source, graph.edge_target
        shared = (func == schema.NONE) & (ntype != schema.INSTRUCTION)
        data = flow == schema.DATA
        number = {n: f for f, n in enumerate(graph.function_names)}
        parts = {}
        for name in todo:
            own = func == number[name]
            uses = np.zeros_like(own)
            uses[src[data & shared[src] & own[dst]]] = True
            uses[dst[data & shared[dst] & own[src]]] = True
            parts[name] = (np.flatnonzero(own | uses), own)
        # only the statements of the functions asked for are embedded
        texts = node_texts(graph)
        index: dict[str, int] = {}
        node_stmt = np.full(len(func), -1, dtype=np.int64)
        for i in np.unique(np.concatenate([nodes for nodes, _ in parts.values()])).tolist():
            node_stmt[i] = index.setdefault(texts[i], len(index))
        stmt_emb, _ = self.embed_statements(list(index))
        for name, (nodes, own) in parts.items():
            remap = np.full(len(func), -1, dtype=np.int64)
            remap[nodes] = np.arange(nodes.size)
            inside = (remap[src] >= 0) & (remap[dst] >= 0)
            feeds = {"stmt_emb": stmt_emb, "node_stmt": node_stmt[nodes],
                     "node_type": ntype[nodes].astype(np.int64)}
            for f, feed in enumerate(("edges_control", "edges_data", "edges_call")):
                keep = inside & (flow == f)
                feeds[feed] = np.stack([remap[src[keep]], remap[dst[keep]]]).astype(np.int64)
            z = self.graph.run(None, feeds)[0].mean(0)
            mine = own[nodes]
            inst = mine & (ntype[nodes] == schema.INSTRUCTION)
            text = stmt_emb[node_stmt[nodes][inst]]
            out[name] = np.concatenate([text.mean(0) if len(text) else
                                        np.zeros(self.dim_statement, np.float32),
                                        z[mine].mean(0)]).astype(np.float32)
        fresh = [n for n in todo if n in keyed]
        if fresh and self.cache is not None:
            try:
                self.cache.put_many([keyed[n] for n in fresh], np.stack([out[n] for n in fresh]),
                                    "function_embedding")
            except CacheError as exc:
                self._drop_cache(exc)
        return out

    # ------------------------------------------------------------------ files

    def embed_file(self, path: str | Path, clang: str | None = None,
                   flags: list[str] | None = None, cwd: str | None = None) -> Embeddings:
        """Embeddings of ``.ll``/``.bc`` IR, or of a source file compiled to
        IR as the driver sees it (``-O2 -Xclang -disable-llvm-passes``, plus
        ``flags``) with ``clang`` (default: the clang matching the native
        graph builder, else the newest on PATH), run in ``cwd`` (relative
        paths in ``flags`` are relative to it)."""
        from mirecc.graph import GraphBuildError, build_graph  # lazy: as in embed_graph
        path = Path(path)
        if not path.is_file():
            raise EmbedError(f"{path}: no such file")
        t0 = time.perf_counter()
        if path.suffix in IR_SUFFIXES:
            try:
                graph = build_graph(path)
            except GraphBuildError as exc:
                raise EmbedError(str(exc)) from None
            emb = self.embed_graph(graph)
        elif path.suffix in SOURCE_SUFFIXES:
            with tempfile.TemporaryDirectory(prefix="mire-embed-") as tmp:
                bc = Path(tmp) / (path.stem + ".bc")
                compile_to_ir(path, bc, clang or default_clang(), flags or [], cwd)
                try:
                    graph = build_graph(bc)
                except GraphBuildError as exc:
                    raise EmbedError(f"{path}: {exc}") from None
                emb = self.embed_graph(graph)
        else:
            raise EmbedError(f"{path}: not LLVM IR (.ll, .bc) or a C/C++/OpenCL/CUDA source")
        emb.stats["total_seconds"] = round(time.perf_counter() - t0, 4)
        return emb


def segment_sums(x: np.ndarray, seg: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-segment row sums (num, C) in float64 and row counts (num,) of
    x (n, C) by segment id seg (n,); ids < 0 are ignored."""
    keep = seg >= 0
    seg, x = seg[keep], x[keep]
    sums = np.zeros((num, x.shape[1]), dtype=np.float64)
    counts = np.bincount(seg, minlength=num)[:num] if len(seg) else np.zeros(num, np.int64)
    if len(seg):
        order = np.argsort(seg, kind="stable")
        seg, x = seg[order], x[order].astype(np.float64)
        starts = np.r_[0, np.flatnonzero(np.diff(seg)) + 1]
        sums[seg[starts]] = np.add.reduceat(x, starts, axis=0)
    return sums, counts


def default_clang() -> str:
    """The clang whose LLVM major has a native graph builder (its IR is what
    the encoder was pretrained on), else the newest clang on PATH."""
    # lazy: the graph package and the compiler finder, only to pick a clang
    from mirecc.frontend.compiler import newest_clang_on_path
    from mirecc.graph.native import BuilderNotFound, find_builders
    try:
        builders = find_builders()
    except BuilderNotFound:
        builders = []
    for b in builders:
        major = b.rsplit("-", 1)[-1]
        found = shutil.which(f"clang-{major}")
        if found:
            return found
    clang = newest_clang_on_path(cxx=False)
    if not clang:
        raise EmbedError("no clang on PATH to compile the source to LLVM IR")
    return clang


def compile_to_ir(source: Path, out: Path, clang: str, flags: list[str],
                  cwd: str | None = None) -> None:
    """``source``'s IR before any LLVM pass, at the optimisation level of
    ``flags`` (-O2 when they name none: the level the encoder was trained on)."""
    level = [] if any(f.startswith("-O") for f in flags) else ["-O2"]
    cmd = [clang, *level, *flags, "-Xclang", "-disable-llvm-passes", "-c", "-emit-llvm",
           "-w", "-o", str(out), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()
        raise EmbedError(f"{source}: clang could not compile it to LLVM IR: "
                         + (msg[0] if msg else f"exit {proc.returncode}"))


def embed_file(path: str | Path, model_dir: str | Path | None = None, **kw) -> Embeddings:
    """One-call API: load the (shipped) model and embed ``path``."""
    return Encoder(model_dir).embed_file(path, **kw)
