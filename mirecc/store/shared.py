"""The team store in a shared directory (NFS-style): each kind a
:class:`~mirecc.store.local.Folder` of ``<root>/<kind>/<key[:2]>/<key>``
files, written to a temporary name and renamed (readers see the old entry
or the whole new one, also over NFS).  No size limit: ``mire store prune``
removes what no build can use.
"""
from __future__ import annotations

import os

from mirecc.store.local import Folder, Unavailable, Usage


class SharedDir:
    """A team store backend (:mod:`mirecc.store.backends`) over a directory."""

    def __init__(self, root: str):
        self.root = root
        self.url = root

    def folder(self, kind: str) -> Folder:
        return Folder(os.path.join(self.root, kind))

    def _failed(self, exc: OSError) -> Unavailable:
        return Unavailable(f"{self.root}: {exc.strerror or exc}")

    def get(self, kind: str, key: str) -> bytes | None:
        try:
            return self.folder(kind).read(key)
        except OSError as exc:
            raise self._failed(exc) from None

    def put(self, kind: str, key: str, data: bytes) -> None:
        try:
            self.folder(kind).write(key, data)
        except OSError as exc:
            raise self._failed(exc) from None

    def delete(self, kind: str, key: str) -> None:
        try:
            self.folder(kind).delete(key)
        except OSError as exc:
            raise self._failed(exc) from None

    def keys(self, kind: str):
        if not os.path.isdir(self.root):
            raise Unavailable(f"{self.root}: no such directory")
        try:
            yield from self.folder(kind).keys()
        except OSError as exc:
            raise self._failed(exc) from None

    def usage(self, kind: str) -> Usage:
        self.describe()
        return self.folder(kind).usage()

    def describe(self) -> str:
        if not os.path.isdir(self.root):
            raise Unavailable(f"{self.root}: no such directory")
        return f"directory {self.root}"
