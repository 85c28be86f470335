"""Find or build ``libmirecc-adapt.a``, the adaptive OpenMP runtime.

One C file (``runtime/adapt/mirecc_adapt.c``; an installed mirecc carries it
as package data, ``mirecc/runtimesrc``), compiled position-independent so
that it links into programs and shared libraries alike, into the per-user
cache ``<cache>/runtime/`` (set-up builds it; a link builds it on first use
when it is missing or older than its source).  Concurrent links (``make
-j``) wait on a lock and build it once; the archive appears atomically.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from mirecc.util.paths import default_cache_dir

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "runtime" / "adapt" / "mirecc_adapt.c"
if not SOURCE.is_file():
    SOURCE = Path(__file__).resolve().parents[1] / "runtimesrc" / "mirecc_adapt.c"
ARCHIVE = "libmirecc-adapt.a"
#: the runtime's entries; the link names one so the archive's member is taken
ENTRY = "__mirecc_adapt_begin"


class RuntimeBuildError(RuntimeError):
    """The runtime cannot be built (the message says why)."""


def runtime_dir(cache: str | os.PathLike | None = None) -> Path:
    return Path(cache or os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()) / "runtime"


def _fresh(path: Path) -> bool:
    try:
        return path.stat().st_mtime >= SOURCE.stat().st_mtime
    except OSError:
        return False


def ensure_runtime(compiler: str = "cc", cache: str | os.PathLike | None = None) -> Path:
    """The archive, built with ``compiler`` when missing or stale."""
    out = runtime_dir(cache)
    target = out / ARCHIVE
    if _fresh(target):
        return target
    if not SOURCE.is_file():
        raise RuntimeBuildError(f"the adaptive runtime's source {SOURCE} is missing")
    ar = shutil.which("ar") or shutil.which("llvm-ar")
    if not ar:
        raise RuntimeBuildError("no ar on PATH to build the adaptive runtime's archive")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / f".{ARCHIVE}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _fresh(target):
                return target
            with tempfile.TemporaryDirectory(prefix=".build-", dir=out) as tmp:
                obj, lib = Path(tmp) / "mirecc_adapt.o", Path(tmp) / ARCHIVE
                for cmd in ([compiler, "-O2", "-fPIC", "-c", str(SOURCE), "-o", str(obj)],
                            [ar, "rcs", str(lib), str(obj)]):
                    proc = subprocess.run(cmd, capture_output=True, text=True)
                    if proc.returncode != 0:
                        first = (proc.stderr.strip().splitlines() or
                                 [f"exit status {proc.returncode}"])[0]
                        raise RuntimeBuildError(f"building the adaptive runtime failed: "
                                                f"{' '.join(cmd[:2])}...: {first}")
                os.replace(lib, target)
    except OSError as exc:
        raise RuntimeBuildError(f"cannot build the adaptive runtime in {out}: "
                                f"{exc.strerror or exc}") from None
    return target


def link_arguments(compiler: str, cache: str | os.PathLike | None = None) -> list[str]:
    """What a link adds so the program carries the runtime: the archive, its
    entry named undefined (the objects' references are weak, so that an
    object linked without the runtime runs the program's own configuration)."""
    return [f"-Wl,-u,{ENTRY}", str(ensure_runtime(compiler, cache))]
