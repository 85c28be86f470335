"""On-disk statement-embedding cache (SQLite), shared by concurrent builds.

A project's translation units repeat most of their normalised statements
(sqlite3's 302k statements are 12k distinct), so an embedding computed
once is looked up by every later compile. The key is (model id, statement
text): a different model never reads another's vectors.

Safe under ``make -j``: WAL journal (readers never wait for a writer), a
busy timeout for concurrent writers, and ``INSERT OR IGNORE`` so two
processes that embed the same statement both succeed. Opening (the switch
to WAL and the schema) holds an exclusive lock on a ``.lock`` file beside
the database: SQLite answers "database is locked" at once, without its
busy timeout, when several processes make that switch together. Any SQLite error is
raised as :class:`CacheError`; callers treat the cache as optional.  The
stored kind :data:`mirecc.store.kinds.EMBEDDINGS`: no size limit (a model
of its own writes its own rows; removing the file loses only time).
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np

from mirecc.store.kinds import EMBEDDINGS
from mirecc.util.fsutil import FileLock
from mirecc.util.paths import default_cache_dir

#: SQLite's default limit on host parameters per statement is 32766 (>= 3.32);
#: lookups go in chunks below it
_CHUNK = 900
_SCHEMA = ("CREATE TABLE IF NOT EXISTS statement_embedding ("
           " model TEXT NOT NULL, text TEXT NOT NULL, embedding BLOB NOT NULL,"
           " PRIMARY KEY (model, text)) WITHOUT ROWID")
#: a function's own vector (:meth:`mirecc.encoder.runtime.Encoder.embed_functions`),
#: keyed by the function's code digest
_FUNCTION_SCHEMA = ("CREATE TABLE IF NOT EXISTS function_embedding ("
                    " model TEXT NOT NULL, digest TEXT NOT NULL, embedding BLOB NOT NULL,"
                    " PRIMARY KEY (model, digest)) WITHOUT ROWID")


class CacheError(Exception):
    """The cache file cannot be opened, read or written."""

def default_path() -> Path:
    """``$MIRECC_CACHE_DIR``, else ``$XDG_CACHE_HOME/mirecc``, else ``~/.cache/mirecc``;
    the file is ``embeddings.sqlite`` there (:data:`mirecc.store.kinds.EMBEDDINGS`)."""
    return Path(EMBEDDINGS.file(os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()))


class StatementCache:
    """Statement text -> float32 vector of ``dim`` values, for one model."""

    def __init__(self, path: str | Path, model_id: str, dim: int, timeout: float = 30.0):
        self.path, self.model_id, self.dim = Path(path), model_id, dim
        try:
            with FileLock(f"{self.path}.lock"):
                self.db = sqlite3.connect(str(self.path), timeout=timeout,
                                          isolation_level=None)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.execute(_SCHEMA)
                self.db.execute(_FUNCTION_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"{self.path}: cannot open the statement cache: {exc}") from None

    def get_many(self, texts: list[str], table: str = "statement_embedding",
                 dim: int | None = None) -> dict[str, np.ndarray]:
        """The cached vectors of those texts (or, with ``table``
        ``function_embedding``, function digests) that are in the cache."""
        found: dict[str, np.ndarray] = {}
        column = "text" if table == "statement_embedding" else "digest"
        try:
            for i in range(0, len(texts), _CHUNK):
                chunk = texts[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self.db.execute(
                    f"SELECT {column}, embedding FROM {table} WHERE model = ? "
                    f"AND {column} IN ({marks})", [self.model_id, *chunk])
                for text, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape[0] == (dim or self.dim):  # else a damaged row: recompute it
                        found[text] = vec
        except sqlite3.Error as exc:
            raise CacheError(f"{self.path}: cannot read the statement cache: {exc}") from None
        return found

    def put_many(self, texts: list[str], vectors: np.ndarray,
                 table: str = "statement_embedding") -> None:
        """Store vectors (len(texts), dim) in one transaction."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(self.model_id, t, vectors[i].tobytes()) for i, t in enumerate(texts)]
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?, ?, ?)", rows)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise CacheError(f"{self.path}: cannot write the statement cache: {exc}") from None

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM statement_embedding WHERE model = ?",
                               [self.model_id]).fetchone()[0]

    def close(self) -> None:
        self.db.close()
