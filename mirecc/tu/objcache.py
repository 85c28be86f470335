"""Kept objects of TUs whose object a task's build step chose (code size:
the smallest of the candidates), or whose task gates said before any IR was
read that the step could not pay (the user's own object), so that a rebuild
of an unchanged TU copies the object and runs nothing else: ccache's rule,
the same inputs give the same object.

A kept object is found through direct mode (:mod:`mirecc.tu.direct`): the
TU's manifest lists the files its front end read with their content, and its
key covers everything else a build step's object depends on, as it does for
decisions:

- the compiler (its real path, size and modification time) and every
  argument of the command (the -O level, -D, -I, target and code generation
  flags, the output's name), the working directory and the environment
  variables clang reads (:data:`mirecc.tu.direct.CLANG_ENVIRONMENT`);
- mirecc's pipeline key: its version, the installed heads' files and the
  settings the tasks read (for code size: the candidate library and K);
- the front end's bitcode (its SHA-256, recorded in the manifest); for a
  TU the gates answered, which has none, the object's own SHA-256 (its
  manifest lists the files the user's compile read, from a dependency
  file that compile writes beside it);
- the LLVM tools beside the compiler that build candidates (``opt``,
  ``llc``: real path, size and modification time).

The manifest also records the kept object's SHA-256, and a hit copies the
object only when its bytes still have it: objects are written without
waiting for the disk (as ccache writes its own), and a file a crash left
damaged is a miss.

The object key (:func:`object_key`) is made of the manifest key, the
bitcode's hash and those tools.  An object is kept for a split compile
(:func:`mirecc.frontend.clang.why_not`: one source, ``-c`` into a file, no flag
that writes another file but a dependency file), after every build step of
the TU succeeded.  A command that writes a dependency file (``-MD``,
``-MMD``) gets it kept beside the object (``<key>.d``, the bytes the user's
compile wrote: its target and names come from the command and the working
directory, both in the key), and a hit writes both; a TU the gates
answered is kept only with ``-MD``, whose file lists every header its
manifest must check (``-MMD`` leaves out the system headers).  Objects are
the stored kind :data:`mirecc.store.kinds.OBJECTS`:
``<cache dir>/objects/v1/<aa>/<key>.o``, written atomically (safe under
``make -j``); a hit refreshes the file's time, and the folder is kept under
``object_cache_mb`` (default 1024) as ccache keeps its own: each of the 256
subfolders under a 256th of it, by removing its least recently used objects
after a write into it (a write scans one subfolder, not the whole cache;
:class:`mirecc.store.local.Folder`).
"""
from __future__ import annotations

import os

from mirecc.store.kinds import OBJECTS
from mirecc.util.fsutil import file_identity, sha256

SCHEMA = 1
#: the tools beside the compiler that build a task's candidates
TOOLS = ("opt", "llc")


def object_key(manifest_key: str, bitcode_sha256: str, compiler: str) -> str:
    """The key of a TU's kept object (module docstring)."""
    folder = os.path.dirname(os.path.realpath(compiler))
    tools = [file_identity(os.path.join(folder, t)) for t in TOOLS
             if os.path.exists(os.path.join(folder, t))]
    material = [f"objects{SCHEMA}", manifest_key, bitcode_sha256, *tools]
    return sha256("\0".join(material).encode("utf-8", "surrogateescape")).hexdigest()


class ObjectCache:
    """The kept objects under ``<cache dir>/objects/v1``
    (:data:`mirecc.store.kinds.OBJECTS`), under ``max_mb``."""

    def __init__(self, cache_dir: str, max_mb: int = 1024):
        self.folder = OBJECTS.folder(cache_dir, max_mb * 1024 * 1024)
        self.root, self.max_bytes = self.folder.root, self.folder.max_bytes

    def get(self, key: str, digest: str | None) -> bytes | None:
        """The object's bytes when they have the digest :meth:`put` gave,
        else None (none kept, removed meanwhile, damaged)."""
        try:
            data = self.folder.read(key)
        except OSError:
            return None
        if not data or digest is None or sha256(data).hexdigest() != digest.split(":")[0]:
            return None
        self.folder.touch(key)          # recently used: trimmed last
        return data

    def dependency_file(self, key: str, digest: str | None) -> bytes | None:
        """The dependency file kept with the object (:meth:`put`'s
        ``dep_path``) when it has its digest, else None."""
        if not digest or ":" not in digest:
            return None
        try:
            data = self.folder.read(key, ".d")
        except OSError:
            return None
        return data if data is not None and sha256(data).hexdigest() == digest.split(":")[1] \
            else None

    def put(self, key: str, source_path: str, dep_path: str | None = None) -> str | None:
        """Keep the object at ``source_path`` (and the dependency file at
        ``dep_path``); their digest for :meth:`get` (the object's SHA-256,
        then ``:`` and the dependency file's), or None when they cannot be
        kept.  Then the least recently used objects of its subfolder go
        while it is over its share of the bound."""
        try:
            with open(source_path, "rb") as fh:
                data = fh.read()
            if not data:
                return None
            digest = sha256(data).hexdigest()
            if dep_path is not None:
                with open(dep_path, "rb") as fh:
                    dep = fh.read()
                self.folder.write(key, dep, suffix=".d")
                digest += ":" + sha256(dep).hexdigest()
            self.folder.write(key, data, trim=False)
        except OSError:
            return None
        self.trim(key[:2])
        return digest

    def trim(self, folder: str) -> int:
        """Remove the least recently used objects of the subfolder
        ``folder`` while it is over its share of the bound; the bytes
        removed (:meth:`mirecc.store.local.Folder.trim`)."""
        return self.folder.trim(folder)
