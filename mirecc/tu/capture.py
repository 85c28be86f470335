"""Capture mode: keep every translation unit's IR for building corpora.

With ``MIRECC_CAPTURE_DIR=DIR`` each TU's bitcode is stored once under
``DIR/ir/<aa>/<sha256>.bc`` and a line is appended to ``DIR/manifest.jsonl``
telling where it came from: source path, working directory, language,
flags, compiler and its version.  Writes are atomic and the manifest is
appended under a lock, so a ``make -j`` build can capture into one directory.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mirecc.frontend.compiler import compiler_version
from mirecc.util.fsutil import append_line_locked, atomic_write_bytes


class CaptureError(Exception):
    pass


def capture(directory: str, bitcode: bytes, sha256: str, *, source: str, language: str,
            opt_level: str, flags: list[str], compiler: str) -> Path:
    root = Path(directory).expanduser().absolute()
    ir_path = root / "ir" / sha256[:2] / f"{sha256}.bc"
    try:
        if not ir_path.is_file():
            atomic_write_bytes(ir_path, bitcode)
        record = {
            "sha256": sha256,
            "ir": str(ir_path.relative_to(root)),
            "source": source if source == "-" else os.path.abspath(source),
            "cwd": os.getcwd(),
            "language": language,
            "opt_level": opt_level,
            "flags": flags,
            "compiler": compiler,
            "compiler_version": compiler_version(compiler),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        append_line_locked(root / "manifest.jsonl", json.dumps(record, sort_keys=True))
    except OSError as exc:
        raise CaptureError(f"{root}: cannot write to the capture directory: "
                           f"{exc.strerror or exc}") from None
    return ir_path
