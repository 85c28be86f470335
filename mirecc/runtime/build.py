"""Find or build ``libmirecc-adapt.a``, the adaptive OpenMP runtime.

One C file (``runtime/adapt/mirecc_adapt.c``; an installed mirecc carries it
as package data, ``mirecc/runtimesrc``), compiled position-independent so
that it links into programs and shared libraries alike, into the per-user
cache ``<cache>/runtime/`` (set-up builds it; a link builds it on first use
when it is missing or older than its source).  Concurrent links (``make
-j``) wait on a lock and build it once; the archive appears atomically.
"""
from __future__ import annotations

import os
import shutil
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
    from mirecc.util.fsutil import build_once

    def steps(tmp):
        obj, lib = Path(tmp) / "mirecc_adapt.o", Path(tmp) / ARCHIVE
        # -x c: clang++ (a C++ link) would read the file as C++
        return ([compiler, "-x", "c", "-O2", "-fPIC", "-c", str(SOURCE), "-o", str(obj)],
                [ar, "rcs", str(lib), str(obj)])

    def failed(cmd, message):
        return RuntimeBuildError(f"building the adaptive runtime failed: "
                                 f"{' '.join(cmd[:2])}...: {message}")

    try:
        return build_once(target, lambda: _fresh(target), steps, ARCHIVE, failed)
    except FileNotFoundError as exc:
        raise RuntimeBuildError(f"cannot build the adaptive runtime: {exc.filename} is "
                                f"not installed") from None
    except OSError as exc:
        raise RuntimeBuildError(f"cannot build the adaptive runtime in {out}: "
                                f"{exc.strerror or exc}") from None


def link_arguments(compiler: str, cache: str | os.PathLike | None = None) -> list[str]:
    """What a link adds so the program carries the runtime: the archive, its
    entry named undefined (the objects' references are weak, so that an
    object linked without the runtime runs the program's own configuration)."""
    # -x none: after a user's -x c, the archive would be read as a source
    return [f"-Wl,-u,{ENTRY}", "-x", "none", str(ensure_runtime(compiler, cache))]
