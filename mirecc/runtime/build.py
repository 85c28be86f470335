"""Find or build the runtimes: ``libmirecc-adapt.a``, the adaptive OpenMP
runtime, and ``libmirecc-opencl.so``, the OpenCL interposer.

Each is one C file beside the engine they share (``runtime/adapt``,
``runtime/opencl``, ``runtime/common``; an installed mirecc carries them as
package data, ``mirecc/runtimesrc``), compiled position-independent into the
per-user cache ``<cache>/runtime/`` (set-up builds them; their first use
builds one that is missing or older than its sources).  Concurrent builds
(``make -j``) wait on a lock and build once; the file appears atomically.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from mirecc.util.fsutil import build_once
from mirecc.util.paths import default_cache_dir

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "runtime"
if not (SOURCES / "common").is_dir():
    SOURCES = Path(__file__).resolve().parents[1] / "runtimesrc"
SOURCE = SOURCES / "adapt" / "mirecc_adapt.c"
ENGINE = SOURCES / "common" / "mirecc_engine.h"
INTERPOSER_SOURCE = SOURCES / "opencl" / "mirecc_opencl.c"
ARCHIVE = "libmirecc-adapt.a"
INTERPOSER = "libmirecc-opencl.so"
#: the runtime's entries; the link names one so the archive's member is taken
ENTRY = "__mirecc_adapt_begin"


class RuntimeBuildError(RuntimeError):
    """The runtime cannot be built (the message says why)."""

def runtime_dir(cache: str | os.PathLike | None = None) -> Path:
    return Path(cache or os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()) / "runtime"


def _fresh(path: Path, source: Path = SOURCE) -> bool:
    try:
        return path.stat().st_mtime >= max(source.stat().st_mtime, ENGINE.stat().st_mtime)
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


def ensure_interposer(compiler: str = "cc", cache: str | os.PathLike | None = None) -> Path:
    """``libmirecc-opencl.so`` (LD_PRELOAD by ``mire run --opencl``), built
    with ``compiler`` when missing or stale."""
    target = runtime_dir(cache) / INTERPOSER
    if _fresh(target, INTERPOSER_SOURCE):
        return target
    if not INTERPOSER_SOURCE.is_file():
        raise RuntimeBuildError(f"the OpenCL interposer's source {INTERPOSER_SOURCE} is missing")

    def steps(tmp):
        return ([compiler, "-x", "c", "-O2", "-fPIC", "-shared", str(INTERPOSER_SOURCE),
                 "-o", str(Path(tmp) / INTERPOSER), "-ldl"],)

    def failed(cmd, message):
        return RuntimeBuildError(f"building the OpenCL interposer failed: "
                                 f"{' '.join(cmd[:2])}...: {message}")

    try:
        return build_once(target, lambda: _fresh(target, INTERPOSER_SOURCE), steps,
                          INTERPOSER, failed)
    except FileNotFoundError as exc:
        raise RuntimeBuildError(f"cannot build the OpenCL interposer: {exc.filename} is "
                                f"not installed") from None
    except OSError as exc:
        raise RuntimeBuildError(f"cannot build the OpenCL interposer in {target.parent}: "
                                f"{exc.strerror or exc}") from None
