"""Encoder embeddings of the task datasets' kernels, one per distinct IR.

Two ways to get a kernel's IR (the issue asks for both):

- ``ir``: the dataset's shipped IR (Apple LLVM 9.1, ``-O3``), upgraded where
  LLVM 14's parser rejects LLVM 9 syntax (:func:`upgrade_legacy_ir`);
- ``src``: the OpenCL source of the ``src`` column compiled by mirecc's own
  clang exactly as the driver sees a ``.cl`` file (``-x cl -O2 -Xclang
  -disable-llvm-passes``), so that a head trained on it sees at training time
  what it sees in a build.  Some sources do not compile (the dataset's
  identifier renaming breaks helper calls); they get no embedding and the
  caller reports how many.

Embeddings are cached per model (the manifest's file hashes) and kernel
content, in one ``.npz`` per model and IR kind under the cache directory, so
a second run of ``mire bench devmap`` embeds nothing.
"""
from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mirecc.encoder import SHIPPED_MODEL_DIR, runtime  # runtime.Encoder: tests replace it
from mirecc.encoder.runtime import EmbedError, compile_to_ir, default_clang
from mirecc.graph import GraphBuildError, build_graph
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.modelfiles import manifest_digest
from mirecc.util.paths import default_cache_dir

IR_KINDS = ("ir", "src")

# LLVM 9 wrote ``%T* byval``; LLVM 14 wants the pointee type: ``byval(%T)``.
_UNTYPED_BYVAL = re.compile(r"((?:%[-\w.$]+|i\d+|float|double|half)(?:\*)+) byval(?!\()")


def upgrade_legacy_ir(text: str) -> str:
    """Rewrite the LLVM 9 syntax that LLVM 14 no longer parses (untyped
    ``byval`` parameters); everything else is left as it is."""
    return _UNTYPED_BYVAL.sub(lambda m: f"{m.group(1)} byval({m.group(1)[:-1]})", text)


def content_key(kind: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()


class EmbeddingTable:
    """``key -> vector`` for one encoder model, loaded from and saved to one
    ``.npz`` (atomically: concurrent runs each write a complete file)."""

    def __init__(self, path: Path):
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        self.failures: dict[str, str] = {}
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    keys, mat = list(z["keys"]), z["vectors"]
                    self.vectors = {str(k): mat[i] for i, k in enumerate(keys)}
                    self.failures = dict(zip((str(k) for k in z["failed_keys"]),
                                             (str(m) for m in z["failed_reasons"])))
            except (OSError, ValueError, KeyError):
                self.vectors, self.failures = {}, {}   # unreadable cache: rebuild it

    def missing(self, keys) -> list[str]:
        """Keys neither embedded nor known to fail."""
        return [k for k in keys if k not in self.vectors and k not in self.failures]

    def lookup(self, keys) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """(key -> vector, key -> why it failed) for ``keys``."""
        return ({k: self.vectors[k] for k in keys if k in self.vectors},
                {k: self.failures[k] for k in keys if k in self.failures})

    def save(self) -> None:
        keys = sorted(self.vectors)
        mat = (np.stack([self.vectors[k] for k in keys]) if keys
               else np.zeros((0, 0), np.float32))
        buf = io.BytesIO()
        np.savez(buf, keys=np.asarray(keys, dtype=str), vectors=mat,
                 failed_keys=np.asarray(list(self.failures), dtype=str),
                 failed_reasons=np.asarray(list(self.failures.values()), dtype=str))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, buf.getvalue())


def default_cache_root() -> Path:
    return Path(default_cache_dir()) / "task-embeddings"


def encoder_model_dirs(kinds, cache_root: Path) -> dict[str, Path]:
    """Feature-set name -> encoder model, for those of ``kinds`` that are
    encoders: ``encoder`` (the shipped model) and ``random-init`` (its shape,
    random weights, seed 0, exported under ``cache_root/models``)."""
    out: dict[str, Path] = {}
    if "encoder" in kinds:
        out["encoder"] = SHIPPED_MODEL_DIR
    if "random-init" in kinds:
        from mirecc.encoder.export import random_init_model_dir  # lazy: torch, random-init only
        out["random-init"] = random_init_model_dir(SHIPPED_MODEL_DIR, cache_root / "models",
                                                   seed=0)
    return out


def embed_graph_sets(graphs: dict, model_dirs: dict[str, Path]) -> dict[str, dict]:
    """Feature-set name -> unit -> embedding (``.module``, ``.functions``) of
    each program graph of ``graphs`` (unit -> graph) through each model."""
    out = {}
    for kind, model_dir in model_dirs.items():
        enc = runtime.Encoder(model_dir, cache=False)
        out[kind] = {u: enc.embed_graph(g) for u, g in
                     tqdm(graphs.items(), desc=f"embedding ({kind})", disable=None)}
    return out


def embed_kernels(kernels: dict[str, tuple[str, str]], model_dir: Path,
                  cache_root: Path | None = None, clang: str | None = None,
                  progress: str = "embedding") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Module embeddings of ``kernels`` (``key -> (kind, text)``: kind ``ir``
    for LLVM IR text, ``src`` for OpenCL source) with the encoder in
    ``model_dir``.  Returns (key -> vector, key -> why it failed)."""
    model_dir = Path(model_dir)
    table = EmbeddingTable((cache_root or default_cache_root()) / f"{manifest_digest(model_dir)}.npz")
    todo = table.missing(kernels)
    if todo:
        encoder = runtime.Encoder(model_dir, cache=False)
        clang = clang or default_clang()
        with tempfile.TemporaryDirectory(prefix="mire-tasks-") as tmp:
            for key in tqdm(todo, desc=progress, unit="kernel", file=sys.stderr,
                            disable=None, mininterval=2):
                kind, text = kernels[key]
                try:
                    if kind == "ir":
                        path = Path(tmp) / "kernel.ll"
                        path.write_text(upgrade_legacy_ir(text))
                    else:
                        cl = Path(tmp) / "kernel.cl"
                        cl.write_text(text)
                        path = Path(tmp) / "kernel.bc"
                        compile_to_ir(cl, path, clang, ["-x", "cl"])
                    table.vectors[key] = encoder.embed_file(path).module.astype(np.float32)
                except EmbedError as exc:
                    table.failures[key] = str(exc).replace(tmp + "/", "")
        table.save()
    return table.lookup(kernels)


def module_vectors(texts: list[str], kind: str, cache: Path) -> np.ndarray:
    """One row per IR text: its module vector of ``kind`` (``ir2vec``, or an
    encoder of :func:`encoder_model_dirs`: ``encoder``, ``random-init``),
    or a model directory), cached under ``cache``; zeros for a text that
    could not be embedded."""
    keyed = {content_key("ir", t): ("ir", t) for t in texts}
    if kind == "ir2vec":
        vectors, _ = embed_ir2vec(keyed, cache_root=cache)
    else:
        model = Path(kind) if (Path(kind) / "manifest.json").is_file() \
        else encoder_model_dirs([kind], cache)[kind]
        vectors, _ = embed_kernels(keyed, model, cache_root=cache, progress=kind)
    dim = len(next(iter(vectors.values())))
    return np.stack([vectors.get(content_key("ir", t), np.zeros(dim)) for t in texts])


def function_vectors(items: list[tuple[str, object]], kind: str, cache: Path) -> np.ndarray:
    """One row per ``(IR text, function name or names)``: the function's own
    vector (:meth:`mirecc.encoder.runtime.Encoder.embed_functions`; for
    several names, the mean of theirs: a launch shape every kernel of a
    source takes) from the encoder ``kind`` (``encoder``, ``random-init``,
    or a model directory), cached under ``cache`` like :func:`module_vectors`;
    zeros where the IR cannot be embedded or has none of those functions."""
    model = Path(kind) if (Path(kind) / "manifest.json").is_file() \
        else encoder_model_dirs([kind], cache)[kind]
    table = EmbeddingTable(cache / f"{manifest_digest(model)}-functions.npz")
    items = [(text, (name,) if isinstance(name, str) else tuple(name)) for text, name in items]
    keys = [content_key("function", "\0".join((*names, text))) for text, names in items]
    todo = {k: it for k, it in zip(keys, items) if table.missing([k])}
    if todo:
        encoder = runtime.Encoder(model, cache=False)
        with tempfile.TemporaryDirectory(prefix="mire-functions-") as tmp:
            path = Path(tmp) / "m.ll"
            for key, (text, names) in tqdm(todo.items(), desc=f"{Path(kind).name} (functions)",
                                           file=sys.stderr, disable=None, mininterval=2):
                try:
                    path.write_text(upgrade_legacy_ir(text))
                    vecs = encoder.embed_functions(build_graph(path), names)
                except (EmbedError, GraphBuildError) as exc:
                    table.failures[key] = str(exc).replace(tmp + "/", "")
                    continue
                if not vecs:
                    table.failures[key] = f"no defined function {', '.join(names)}"
                else:
                    table.vectors[key] = np.mean(list(vecs.values()), axis=0).astype(np.float32)
        table.save()
    found = [table.vectors.get(k) for k in keys]
    dim = next((len(v) for v in found if v is not None), 1)
    return np.stack([v if v is not None else np.zeros(dim, np.float32) for v in found])


def kernel_texts(rows: list[dict], kind: str) -> dict[str, tuple[str, str]]:
    """``content key -> (kind, text)`` of the rows' kernels; also sets
    ``row[kind + '_key']`` so rows can find their vector."""
    if kind not in IR_KINDS:
        raise ValueError(f"IR kind must be one of {IR_KINDS}, not {kind!r}")
    out: dict[str, tuple[str, str]] = {}
    read: dict[Path, str] = {}
    for row in rows:
        if kind == "ir":
            text = read.get(row["ir"])
            if text is None:
                text = read[row["ir"]] = Path(row["ir"]).read_text()
        else:
            text = row["src"]
        key = content_key(kind, text)
        row[f"{kind}_key"] = key
        out[key] = (kind, text)
    return out


# ------------------------------------------------------------------ IR2Vec

IR2VEC_VERSION = "2.1.1"
# The child embeds one file per input line and answers "index vector..."; a
# file IR2Vec cannot parse ends the child (the library exits the process),
# so the parent records that file as failed and starts a new child after it.
_IR2VEC_CHILD = r"""
import sys, ir2vec
for line in sys.stdin:
    i, path = line.rstrip("\n").split("\t", 1)
    v = ir2vec.initEmbedding(path, "fa", "p").getProgramVector()
    print(i, *("%.9g" % x for x in v), flush=True)
"""


def ir2vec_key() -> str:
    return f"ir2vec-{IR2VEC_VERSION}-fa-p"


def embed_ir2vec(kernels: dict[str, tuple[str, str]], cache_root: Path | None = None,
                 clang: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """IR2Vec flow-aware program vectors (PyPI ``ir2vec`` 2.1.1) of the same
    kernels as :func:`embed_kernels`, cached the same way.  OpenCL sources
    are compiled first as the driver sees them."""
    table = EmbeddingTable((cache_root or default_cache_root()) / f"{ir2vec_key()}.npz")
    todo = table.missing(kernels)
    if todo:
        clang = clang or default_clang()
        with tempfile.TemporaryDirectory(prefix="mire-ir2vec-") as tmp:
            paths = []
            for n, key in enumerate(todo):
                kind, text = kernels[key]
                path = Path(tmp) / f"k{n}.ll"
                if kind == "ir":
                    path.write_text(upgrade_legacy_ir(text))
                else:
                    cl = Path(tmp) / f"k{n}.cl"
                    cl.write_text(text)
                    try:
                        compile_to_ir(cl, path, clang, ["-x", "cl", "-S"])
                    except EmbedError as exc:
                        table.failures[key] = str(exc).replace(tmp + "/", "")
                        continue
                paths.append((key, path))
            start = 0
            while start < len(paths):
                batch = paths[start:]
                proc = subprocess.run(
                    [sys.executable, "-c", _IR2VEC_CHILD],
                    input="".join(f"{i}\t{p}\n" for i, (_, p) in enumerate(batch)),
                    capture_output=True, text=True)
                done = 0
                for line in proc.stdout.splitlines():
                    fields = line.split()
                    try:
                        index, vector = int(fields[0]), np.asarray(fields[1:], np.float32)
                    except (ValueError, IndexError):
                        continue     # IR2Vec's LLVM writes its parse errors to stdout
                    table.vectors[batch[index][0]] = vector
                    done = index + 1
                if done < len(batch):      # the child died on batch[done]
                    why = next((ln for ln in (proc.stderr + proc.stdout).splitlines()
                                if "error" in ln), f"ir2vec exited with {proc.returncode}")
                    table.failures[batch[done][0]] = why.replace(tmp + "/", "")
                    done += 1
                start += done
        table.save()
    return table.lookup(kernels)


# ------------------------------------------------------------ representations

#: how a ranking's representation is named in the tasks' benchmarks:
#: ``statistics`` (the task's own numbers), an embedding (``ir2vec``,
#: ``random-init``, ``encoder``, or ``NAME`` of ``models``), the embedding
#: ``@function`` (the decision's function alone, not the module), or
#: ``statistics+`` one of them
GRANULARITY = "@function"


def embedding_of(kind: str) -> str | None:
    """The embedding a representation reads (None: statistics alone);
    ``adapter:<kind>`` reads what ``<kind>`` reads (:mod:`mirecc.learn.adapter`)."""
    kind = kind.removeprefix("adapter:")
    if kind == "statistics":
        return None
    return kind.split("+", 1)[1] if kind.startswith("statistics+") else kind


def representation_vectors(kinds, texts: list[str], functions: list[str], cache: Path,
                           models: dict | None = None) -> dict[str, np.ndarray]:
    """Embedding name -> one row per case for the embeddings ``kinds`` read:
    module vectors of ``texts``, or with :data:`GRANULARITY` the vector of
    each case's function (``functions``, one per text) alone.  ``models``:
    more encoders by name (name -> model directory)."""
    models = models or {}
    out = {}
    for kind in kinds:
        emb = embedding_of(kind)
        if emb is None or emb in out:
            continue
        base = emb.removesuffix(GRANULARITY)
        model = str(models.get(base, base))
        if emb.endswith(GRANULARITY):
            out[emb] = function_vectors(list(zip(texts, functions)), model, cache)
        else:
            out[emb] = module_vectors(texts, model, cache)
    return out
