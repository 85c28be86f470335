"""The code-size task's winner cache: which candidate was smallest for a TU,
so that a rebuild of the same TU builds only that one.

A record is keyed by everything that decides the sizes: the front end's
bitcode (its SHA-256), the back-end command (compiler and the user's code
generation flags, the other tasks' flags), the compiler's and opt's files
(size and modification time: a reinstalled LLVM is a miss) and the
candidate list.  It holds the winner and every candidate's loadable and
``.text`` bytes, as ``<cache>/code-size/v2/<aa>/<key>.json``, written atomically (safe
under ``make -j``).  A damaged record is a miss, and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from mirecc.fsutil import atomic_write_bytes, file_identity

VERSION = "2"   # 2: sizes are loadable bytes, .text beside


def winner_key(bitcode_sha256: str, backend_command: list[str], opt: str,
               candidates: list[str]) -> str:
    """The record's key; ``backend_command`` without its output and input
    paths (they differ between builds of the same TU)."""
    material = "\0".join((VERSION, bitcode_sha256, file_identity(backend_command[0]),
                          file_identity(opt), "\1".join(backend_command),
                          "\1".join(candidates)))
    return hashlib.sha256(material.encode()).hexdigest()


class WinnerCache:
    def __init__(self, cache_dir: str):
        self.root = os.path.join(cache_dir, "code-size", f"v{VERSION}")

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], f"{key}.json")

    def get(self, key: str) -> dict | None:
        """``{"winner": name, "sizes": {name: loadable bytes}, "text": {name:
        .text bytes}, "skipped": {name: why}}``
        or None (no record, or a damaged one)."""
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                record = json.load(fh)
            if isinstance(record.get("winner"), str) and isinstance(record.get("sizes"), dict) \
                    and record["winner"] in record["sizes"] \
                    and all(isinstance(v, int) for v in record["sizes"].values()) \
                    and isinstance(record.get("skipped", {}), dict):
                return record
        except (OSError, ValueError, AttributeError):
            pass
        return None

    def put(self, key: str, winner: str, sizes: dict, skipped: dict,
            text: dict | None = None) -> None:
        data = json.dumps({"winner": winner, "sizes": sizes, "skipped": skipped,
                           "text": text or {}},
                          sort_keys=True).encode()
        try:
            atomic_write_bytes(Path(self._path(key)), data)
        except OSError:
            pass        # only the reuse is lost; the object is right
