"""Test helper: a native graph builder for the graph tests.

Uses a builder that is already built (``mirecc.graph.native``'s search:
``$MIRECC_GRAPH_BUILDER``, ``build/passes/graph``, ...); otherwise builds
``passes/`` with CMake into a temporary directory once per session. Tests
skip with the reason when neither works (no cmake or no llvm-14-dev).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from mirecc.graph import native


_BUILT: tuple[str | None, str] | None = None  # one build per test session


def ensure_builder(tmp_dir: str) -> tuple[str | None, str]:
    """(path of a builder, "") or (None, why not)."""
    global _BUILT
    if _BUILT is None:
        _BUILT = _ensure_builder(tmp_dir)
    return _BUILT


def _ensure_builder(tmp_dir: str) -> tuple[str | None, str]:
    found = native.find_builders()
    if found:
        return found[0], ""
    if not shutil.which("cmake"):
        return None, "cmake is not installed, and mirecc-graph is not built"
    build = os.path.join(tmp_dir, "build")
    cfg = subprocess.run(["cmake", "-S", native.REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release"],
                         capture_output=True, text=True)
    if cfg.returncode != 0 or "native graph builder (mirecc-graph) is not built" in cfg.stdout:
        return None, "no LLVM dev package for CMake (llvm-14-dev): " + cfg.stdout[-300:]
    bld = subprocess.run(["cmake", "--build", build, "--target", "mirecc-graph",
                          "mirecc-graph-lib", "-j2"], capture_output=True, text=True)
    if bld.returncode != 0:
        raise RuntimeError("building mirecc-graph failed:\n" + bld.stdout[-3000:] + bld.stderr[-3000:])
    paths = glob.glob(os.path.join(build, "passes", "graph", "mirecc-graph-*"))
    return (paths[0], "") if paths else (None, "the CMake build made no mirecc-graph")
