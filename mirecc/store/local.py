"""Entries in a directory, named by their keys: the one implementation of
layout, atomic writes, size limit and eviction under every stored kind
that lives in files (:mod:`mirecc.store.kinds`), in this user's cache and
in a shared directory (:mod:`mirecc.store.shared`).

An entry of key ``k`` is the file ``<root>/<k[:2]>/<k><suffix>``, written
to a temporary name beside it and renamed
(:func:`mirecc.util.fsutil.atomic_write_bytes`: a reader sees the old entry
or the whole new one, two writers of the same entry both succeed); it may
have *companions*, files of the same key with another suffix (a kept
object's dependency file), written and removed with it.  A folder with a
size limit keeps each of its 256 subfolders under a 256th of it (as ccache
keeps its own): after a write into a subfolder, its least recently used
entries (file times: a read refreshes them) are removed down to
:data:`TRIM_TO` of that share, so a write scans one subfolder, not the
whole folder.  A folder without a limit says so (``max_bytes`` None) and
grows until it is pruned or removed.

Only ``os`` and :mod:`mirecc.util.fsutil` are imported: this runs on every
compile that reads a cache.
"""
from __future__ import annotations

import os

from mirecc.util.fsutil import atomic_write_bytes

#: once over its limit, a subfolder is trimmed down to this share of it
TRIM_TO = 0.9
#: subfolders, by the key's first two hex digits; each holds a share of the limit
FOLDERS = 256


class Unavailable(Exception):
    """A team store that cannot be reached now (the message says why)."""


class Usage:
    """What a kind holds: ``entries`` and their ``bytes`` on disk (companions
    included); ``where``: the file or folder measured."""

    __slots__ = ("entries", "bytes", "where")

    def __init__(self, entries: int = 0, size: int = 0, where: str = ""):
        self.entries, self.bytes, self.where = entries, size, where

    def __repr__(self) -> str:
        return f"Usage({self.entries} entries, {self.bytes} bytes, {self.where!r})"


class Folder:
    """The entries under ``root`` (module docstring): ``suffix`` names an
    entry's file, ``companions`` the suffixes of files kept with it;
    ``durable``: wait for the disk before the rename (an entry whose reader
    checks its content need not); ``max_bytes``: the size limit, None for
    none."""

    def __init__(self, root: str, suffix: str = "", companions: tuple[str, ...] = (),
                 durable: bool = True, max_bytes: int | None = None):
        self.root, self.suffix, self.companions = root, suffix, companions
        self.durable, self.max_bytes = durable, max_bytes

    def path(self, key: str, suffix: str | None = None) -> str:
        """The file of ``key``'s entry (or of its companion ``suffix``)."""
        return os.path.join(self.root, key[:2], key + (self.suffix if suffix is None else suffix))

    def read(self, key: str, suffix: str | None = None) -> bytes | None:
        """The entry's bytes (or its companion's); None when there is none.
        Raises OSError when the folder cannot be read."""
        try:
            with open(self.path(key, suffix), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def write(self, key: str, data: bytes, suffix: str | None = None, trim: bool = True) -> None:
        """Write the entry (or its companion) atomically; with a limit, then
        trim its subfolder (``trim`` False: the caller writes more first and
        calls :meth:`trim`).  Raises OSError."""
        atomic_write_bytes(self.path(key, suffix), data, durable=self.durable)
        if trim and suffix is None:
            self.trim(key[:2])

    def touch(self, key: str) -> None:
        """Mark the entry recently used: trimmed last."""
        try:
            os.utime(self.path(key))
        except OSError:
            pass

    def delete(self, key: str) -> None:
        """Remove the entry and its companions (those there are).  Raises
        OSError but for a file already gone."""
        for suffix in (self.suffix, *self.companions):
            try:
                os.unlink(self.path(key, suffix))
            except FileNotFoundError:
                pass

    def keys(self):
        """Every entry's key, in order (written ones only: no temporary
        file, no companion).  Raises OSError when the folder cannot be read;
        a folder not made yet has none."""
        try:
            subs = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return
        for sub in subs:
            folder = os.path.join(self.root, sub)
            if not os.path.isdir(folder):
                continue
            for name in sorted(os.listdir(folder)):
                if not name.startswith(".") and name.endswith(self.suffix):
                    yield name[:len(name) - len(self.suffix)] if self.suffix else name

    def _files(self, sub: str):
        """(mtime, size, path) of each entry of subfolder ``sub``, and the
        companions' bytes there."""
        entries, extra = [], 0
        for f in os.scandir(os.path.join(self.root, sub)):
            if f.name.startswith("."):
                continue
            if f.name.endswith(self.suffix):
                st = f.stat()
                entries.append((st.st_mtime_ns, st.st_size, f.path))
            elif f.name.endswith(self.companions or ("\0",)):
                extra += f.stat().st_size
        return entries, extra

    def usage(self) -> Usage:
        """The entries and bytes the folder holds now (a walk of it)."""
        out = Usage(where=self.root)
        try:
            subs = [e.name for e in os.scandir(self.root) if e.is_dir()]
        except OSError:
            return out
        for sub in subs:
            try:
                entries, extra = self._files(sub)
            except OSError:
                continue
            out.entries += len(entries)
            out.bytes += extra + sum(size for _, size, _ in entries)
        return out

    def trim(self, sub: str) -> int:
        """Remove the least recently used entries of subfolder ``sub`` (and
        their companions) while it is over its share of the limit, down to
        :data:`TRIM_TO` of it; the entries' bytes removed.  Nothing without
        a limit."""
        if self.max_bytes is None:
            return 0
        bound = self.max_bytes / FOLDERS
        try:
            entries, _ = self._files(sub)
        except OSError:
            return 0
        total = sum(size for _, size, _ in entries)
        if total <= bound:
            return 0
        removed = 0
        for _, size, path in sorted(entries):
            if total - removed <= bound * TRIM_TO:
                break
            try:
                os.unlink(path)
                removed += size
            except OSError:
                pass            # another build removed it first
            for suffix in self.companions:
                try:
                    os.unlink(path[:len(path) - len(self.suffix)] + suffix)
                except OSError:
                    pass        # none kept with it
        return removed


def file_usage(paths, count) -> Usage:
    """The usage of a kind kept in whole files (``paths``): their bytes, and
    ``count(path)`` entries in each (0 for one it cannot read)."""
    out = Usage()
    for path in paths:
        try:
            out.bytes += os.stat(path).st_size
            out.entries += count(path)
        except (OSError, ValueError):
            continue
    return out
