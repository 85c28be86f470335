"""Find and run the native graph builder ``mirecc-graph-<LLVM major>``.

Where it is looked for, in order:

1. ``$MIRECC_GRAPH_BUILDER`` (a path to the executable);
2. the repository's CMake builds: ``build/passes/graph/`` and
   ``build/*/passes/graph/`` (``build/native`` is the suggested directory,
   ``build/llvm19`` for ``-DMIRECC_LLVM_VERSION=19``; ``build`` itself is
   left to the README's toolchain-file example);
3. a per-user build: ``$XDG_CACHE_HOME/mirecc/build[/*]/passes/graph/``.

Several builds (one per LLVM major) may exist: the lowest major is tried
first, and a newer one only when the older LLVM cannot parse the input
(IR from a newer clang).

Beside each tool the build makes ``libmirecc-graph-<major>.so``, the same
builder as a library.  A long-lived process (mirecc's per-user server) asks
for it with ``in_process=True``: it is loaded once (ctypes) and each graph
costs no process start and no libLLVM load (~20 ms a TU).  Only the first
builder is loaded so (two libLLVMs are never mixed in one process); the
others, and every call where the library is missing, run the tool.  A
process that must not die with LLVM (the compiler driver) runs the tool.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import subprocess
import tempfile
from typing import List, Optional

from mirecc.util.paths import default_cache_dir

from .format import ProgramGraph, loads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NAME = re.compile(r"mirecc-graph-(\d+)$")


class GraphBuildError(RuntimeError):
    """The input could not be turned into a graph (message names the file)."""


class BuilderNotFound(GraphBuildError):
    """No native graph builder is built."""


def _cache_dir() -> str:
    return default_cache_dir()


def build_command() -> str:
    """The commands that build the native builder in this checkout."""
    return (f"cmake -S {REPO} -B {REPO}/build/native && "
            f"cmake --build {REPO}/build/native --target mirecc-graph mirecc-graph-lib")


def find_builders() -> List[str]:
    """Every usable builder, in the order they are tried."""
    env = os.environ.get("MIRECC_GRAPH_BUILDER")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise BuilderNotFound(f"MIRECC_GRAPH_BUILDER={env}: not an executable file")
        return [env]
    found = []
    for root in (os.path.join(REPO, "build"), os.path.join(_cache_dir(), "build")):
        for pattern in ("passes/graph/mirecc-graph-*", "*/passes/graph/mirecc-graph-*"):
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                m = _NAME.search(path)
                if m and os.access(path, os.X_OK) and path not in [p for _, p in found]:
                    found.append((int(m.group(1)), path))
    found.sort(key=lambda mp: mp[0])
    return [p for _, p in found]


def find_builder() -> str:
    builders = find_builders()
    if not builders:
        raise BuilderNotFound(
            "the native graph builder mirecc-graph is not built (needs llvm-14-dev and "
            f"cmake); build it with: {build_command()}  "
            "(or set MIRECC_GRAPH_BUILDER to its path)")
    return builders[0]


def run_builder(builder: str, path: str, timeout: Optional[float] = None) -> ProgramGraph:
    """Run one builder on ``path`` and load its output."""
    with tempfile.TemporaryDirectory(prefix="mirecc-graph-") as tmp:
        out = os.path.join(tmp, "graph.mgraph")
        try:
            proc = subprocess.run([builder, "-o", out, path], capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GraphBuildError(f"{path}: graph builder timed out after {timeout} s") from None
        except OSError as exc:
            raise GraphBuildError(f"{path}: cannot run the graph builder {builder}: {exc}") from None
        if proc.returncode != 0:
            msg = proc.stderr.decode("utf-8", "replace").strip()
            msg = msg.removeprefix("mirecc-graph: error: ") or f"{builder} exited {proc.returncode}"
            raise GraphBuildError(msg)
        with open(out, "rb") as f:
            return loads(f.read(), out)


# library path -> ctypes function, or None where it cannot be loaded
_LIBRARIES: dict = {}


def _library_function(builder: str):
    """``mirecc_graph_build`` of the library beside ``builder``, or None."""
    directory, name = os.path.split(builder)
    library = os.path.join(directory, f"lib{name}.so")
    if library not in _LIBRARIES:
        function = None
        if os.path.isfile(library):
            try:
                function = ctypes.CDLL(library).mirecc_graph_build
                function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_size_t]
                function.restype = ctypes.c_int
            except (OSError, AttributeError):
                function = None
        _LIBRARIES[library] = function
    return _LIBRARIES[library]


def run_library(function, path: str) -> ProgramGraph:
    """Build ``path``'s graph with the loaded library ``function``."""
    with tempfile.TemporaryDirectory(prefix="mirecc-graph-") as tmp:
        out = os.path.join(tmp, "graph.mgraph")
        message = ctypes.create_string_buffer(4096)
        status = function(os.fsencode(path), os.fsencode(out), message, len(message))
        if status != 0:
            raise GraphBuildError(message.value.decode("utf-8", "replace")
                                  or f"the graph library failed ({status})")
        with open(out, "rb") as f:
            return loads(f.read(), out)


def build_graph_native(path: str | os.PathLike, timeout: Optional[float] = None,
                       in_process: bool = False) -> ProgramGraph:
    """Build the graph of an LLVM module (``.ll`` or ``.bc``) with the native
    builder; ``in_process``: with its library where there is one (see the
    module's doc; ``timeout`` then does not apply)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise GraphBuildError(f"{path}: no such file")
    builders = find_builders() or [find_builder()]
    error = None
    for number, builder in enumerate(builders):
        function = _library_function(builder) if in_process and number == 0 else None
        try:
            if function is not None:
                return run_library(function, path)
            return run_builder(builder, path, timeout)
        except GraphBuildError as exc:
            # Only a parse failure is worth another LLVM (newer IR syntax).
            if error is None:
                error = exc
            if "invalid LLVM IR" not in str(exc):
                break
    raise error
