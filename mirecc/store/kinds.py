"""Every kind of thing mirecc stores, named by what it holds: where it
lives, its layout and its size limit, declared once (as ``mirecc.tu.stats``
declares the counters).  Its owner reads and writes it through the kind;
``mire stats`` and ``mire store status`` list every kind with its size.

In this user's cache directory (``cache_dir``):

==============  ================================  ========================
kind            layout                            limit
==============  ================================  ========================
``results``     ``results/v1/<aa>/<key>.json``    none
``objects``     ``objects/v1/<aa>/<key>.o``       ``object_cache_mb``,
                (and ``<key>.d``)                 least recently used first
``manifests``   ``direct/v2/<aa>/<key>.txt``      none
``winners``     ``code-size/v4/<aa>/<key>.json``  none
``verdicts``    ``adapt/<machine>.txt``           none (a line per site)
``embeddings``  ``embeddings.sqlite``             none
==============  ================================  ========================

Those in folders are :class:`~mirecc.store.local.Folder` s (one atomic write,
size limit and eviction); the verdicts are text files the runtimes and
``mire`` rewrite under ``<file>.lock``
(:class:`mirecc.util.fsutil.FileLock`); the embeddings a SQLite database,
locked by SQLite.  A kind
without a limit grows until it is removed (``rm -r`` of its folder: the
next builds compute again what it held).

In the team store (``store``; :mod:`mirecc.store.backends`: a shared
directory or Redis), each entry an envelope :mod:`mirecc.store.team`
checks: ``winner`` (search winners), ``manifest`` (travelling entries: TUs
that need nothing), ``verdict`` (run-time verdicts), ``profile``
(decisions profile entries).  No limit: ``mire store prune`` removes what
no build can use.

Only ``os`` is imported at the top: the compile path reads these.
"""
from __future__ import annotations

import os

from mirecc.store.local import Folder, Usage, file_usage

#: limits in words, for the listings
NO_LIMIT = "no limit"


class Kind:
    """One kind of stored thing: its ``name``, what it ``holds`` (words) and
    ``limit``: None (no limit, said so) or the setting that bounds it, in
    megabytes."""

    def __init__(self, name: str, holds: str, limit: str | None = None):
        self.name, self.holds, self.limit = name, holds, limit

    def max_bytes(self, config) -> int | None:
        """The bound ``config`` (any object with the setting) sets, or None."""
        if self.limit is None:
            return None
        return int(getattr(config, self.limit)) * 1024 * 1024

    def limit_words(self, config=None) -> str:
        """``no limit``, the bound ``config`` sets (``1024 MB``), or the setting's name."""
        if self.limit is None:
            return NO_LIMIT
        return self.limit if config is None else f"{getattr(config, self.limit)} MB"


class FolderKind(Kind):
    """Entries in a :class:`~mirecc.store.local.Folder` under ``path``
    (relative to the cache directory)."""

    def __init__(self, name: str, holds: str, path: str, suffix: str,
                 companions: tuple[str, ...] = (), durable: bool = True,
                 limit: str | None = None):
        super().__init__(name, holds, limit)
        self.path, self.suffix, self.companions, self.durable = path, suffix, companions, durable

    def folder(self, cache_dir: str, max_bytes: int | None = None) -> Folder:
        """The kind's folder in ``cache_dir``; ``max_bytes``: its bound (a
        kind without a limit takes none)."""
        return Folder(os.path.join(os.fspath(cache_dir), self.path), self.suffix,
                      self.companions, self.durable,
                      max_bytes if self.limit is not None else None)

    def usage(self, cache_dir: str) -> Usage:
        return self.folder(cache_dir).usage()


def _lines_after_header(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return sum(1 for line in fh if line.strip() and not line.startswith("#"))


class FilesKind(Kind):
    """Whole text files ``<path>/*<suffix>``, an entry per line (a header
    line starts with ``#``)."""

    def __init__(self, name: str, holds: str, path: str, suffix: str):
        super().__init__(name, holds)
        self.path, self.suffix = path, suffix

    def directory(self, cache_dir: str) -> str:
        return os.path.join(os.fspath(cache_dir), self.path)

    def usage(self, cache_dir: str) -> Usage:
        folder = self.directory(cache_dir)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(self.suffix))
        except OSError:
            names = []
        out = file_usage([os.path.join(folder, n) for n in names], _lines_after_header)
        out.where = folder
        return out


class SQLiteKind(Kind):
    """A SQLite database ``path``, an entry per row of its ``tables``."""

    def __init__(self, name: str, holds: str, path: str, tables: tuple[str, ...]):
        super().__init__(name, holds)
        self.path, self.tables = path, tables

    def file(self, cache_dir: str) -> str:
        return os.path.join(os.fspath(cache_dir), self.path)

    def _rows(self, path: str) -> int:
        import sqlite3  # lazy: sqlite3, for the embeddings' listing only

        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return sum(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                       for t in self.tables)
        except sqlite3.Error:
            return 0
        finally:
            db.close()

    def usage(self, cache_dir: str) -> Usage:
        path = self.file(cache_dir)
        out = file_usage([path] if os.path.exists(path) else [], self._rows)
        for extra in ("-wal", "-shm"):          # SQLite's journal beside it
            try:
                out.bytes += os.stat(path + extra).st_size
            except OSError:
                pass
        out.where = path
        return out


class TeamKind(Kind):
    """Entries of the team store named ``name`` there (its Redis keys
    ``mirecc:<name>:<key>``, its folder ``<root>/<name>``)."""

    def usage(self, backend) -> Usage:
        """Raises :class:`~mirecc.store.local.Unavailable`."""
        return backend.usage(self.name)


RESULTS = FolderKind("results", "pipeline results of TUs", "results/v1", ".json")
OBJECTS = FolderKind("objects", "objects kept for rebuilds", "objects/v1", ".o",
                     companions=(".d",), durable=False, limit="object_cache_mb")
MANIFESTS = FolderKind("manifests", "direct-mode manifests", "direct/v2", ".txt",
                       durable=False)
WINNERS = FolderKind("winners", "code-size search winners", "code-size/v4", ".json")
VERDICTS = FilesKind("verdicts", "run-time verdicts, per machine", "adapt", ".txt")
EMBEDDINGS = SQLiteKind("embeddings", "statement and function embeddings",
                        "embeddings.sqlite", ("statement_embedding", "function_embedding"))
#: the kinds in this user's cache directory
LOCAL = (RESULTS, OBJECTS, MANIFESTS, WINNERS, VERDICTS, EMBEDDINGS)

TEAM_WINNERS = TeamKind("winner", "code-size search winners")
TRAVELLING = TeamKind("manifest", "travelling entries: TUs that need nothing")
TEAM_VERDICTS = TeamKind("verdict", "run-time verdicts, per kind of machine")
PROFILES = TeamKind("profile", "decisions profile entries, per kind of machine")
#: the kinds in the team store
TEAM = (TEAM_WINNERS, TRAVELLING, TEAM_VERDICTS, PROFILES)


def size_words(n: int) -> str:
    """Bytes as a person reads them: ``812 B``, ``4.1 kB``, ``1.2 MB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def local_table(cache_dir: str, config=None) -> list[str]:
    """One line per kind of the cache directory: its name, entries, bytes,
    limit and what it holds (``config``: the settings' values)."""
    lines = []
    for kind in LOCAL:
        use = kind.usage(cache_dir)
        setting = f" ({kind.limit})" if kind.limit else ""
        lines.append(f"    {kind.name:<11}{use.entries:>8} entries {size_words(use.bytes):>9}"
                     f"  {kind.limit_words(config):<9} {kind.holds}{setting}")
    return lines
