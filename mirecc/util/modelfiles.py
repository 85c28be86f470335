"""Locate and verify an encoder model directory.

A model directory holds ``manifest.json``::

    {"name": "mirencoder-small", "version": "2026-11-21.1",
     "files": {"statements.onnx": "<sha256>", "tokenizer.json": "<sha256>"}}

Every listed file is checked against its sha256 before use; a missing or
changed file makes the model unusable (and the driver falls back to the
plain compile).  No model ships yet: the encoder arrives with its own issue.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

MANIFEST_NAME = "manifest.json"
NO_MODEL_VERSION = "none"


class ModelError(Exception):
    """The model is missing or corrupt; the message names the file."""


@dataclass(frozen=True)
class ModelInfo:
    directory: Path
    name: str
    version: str
    files: dict[str, str]  # relative path -> sha256

    @property
    def cache_version(self) -> str:
        """Identifies the model in cache keys: name, version and file hashes."""
        return f"{self.name}@{self.version}#{files_digest(self.files)}"


def files_digest(files: dict[str, str]) -> str:
    """16 hex digits identifying a manifest's ``files`` table (the weights):
    two exports of the same weights under other names share it."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def manifest_digest(directory: str | Path) -> str:
    """:func:`files_digest` of a model directory's manifest, without
    re-hashing the files (for cache file names, not for trust)."""
    manifest = json.loads((Path(directory) / MANIFEST_NAME).read_text(encoding="utf-8"))
    return files_digest(manifest["files"])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_model(directory: str | Path) -> ModelInfo:
    """Read and verify a model directory; raises ModelError naming the problem."""
    root = Path(directory)
    if not root.is_dir():
        raise ModelError(f"{root}: model directory not found")
    manifest_path = root / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{manifest_path}: model manifest missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{manifest_path}: corrupt model manifest: {exc}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict) \
            or not manifest["files"]:
        raise ModelError(f"{manifest_path}: corrupt model manifest: no 'files' table")
    for key in ("name", "version"):
        if not isinstance(manifest.get(key), str):
            raise ModelError(f"{manifest_path}: corrupt model manifest: '{key}' missing")
    files: dict[str, str] = {}
    for rel, expected in manifest["files"].items():
        path = root / rel
        if not path.is_file():
            raise ModelError(f"{path}: model file listed in the manifest is missing")
        actual = sha256_file(path)
        if actual != expected:
            raise ModelError(f"{path}: model file is corrupt or was modified "
                             f"(sha256 {actual[:12]}..., manifest says {str(expected)[:12]}...)")
        files[rel] = actual
    return ModelInfo(root, manifest["name"], manifest["version"], files)
