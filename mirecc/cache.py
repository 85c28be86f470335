"""Content-addressed cache of per-TU pipeline results.

Key: sha256 of (bitcode hash, pipeline version = model + heads, optimisation
level).  Value: the TUResult as JSON.  Entries are written with an atomic
rename, so concurrent ``make -j`` processes computing the same entry both
succeed and a reader never sees half a file.  A damaged entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from mirecc.fsutil import atomic_write_bytes
from mirecc.pipeline import TUResult


class CacheError(Exception):
    """The cache directory cannot be used (the message names it)."""


class ResultCache:
    def __init__(self, root: Path):
        self.root = root / "results" / "v1"

    @staticmethod
    def key(bitcode_sha256: str, pipeline_version: str, opt_level: str) -> str:
        material = "\0".join((bitcode_sha256, pipeline_version, opt_level))
        return hashlib.sha256(material.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> TUResult | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return TUResult.from_dict(data)
        except FileNotFoundError:
            return None
        except Exception:  # noqa: BLE001
            # Damaged or foreign entry (not JSON, not a mapping, fields of the
            # wrong type, ...): a miss, recomputed and overwritten.
            return None

    def put(self, key: str, result: TUResult) -> None:
        data = json.dumps(result.to_dict(), sort_keys=True).encode()
        try:
            atomic_write_bytes(self._path(key), data)
        except OSError as exc:
            raise CacheError(f"{self.root}: cache directory is not writable: "
                             f"{exc.strerror or exc}") from None
