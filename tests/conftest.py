"""Shared fixtures: the real compilers, mirecc's own scripts, and a controlled
environment to run them in (no MIRECC_* of the caller leaks in, a private
cache directory)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# Test files live in folders that mirror the package (tests/driver,
# tests/tasks/numa, ...); pytest puts only a test file's own folder on
# sys.path, so the shared helpers here (envs, vectorize_heads, graph_build,
# ...) are importable by their plain names from every folder.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

CLANG = "/usr/bin/clang-14"
CLANGXX = "/usr/bin/clang++-14"
_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def toolchain() -> SimpleNamespace:
    """Paths of clang-14, clang++-14 and the mirecc / mirecc++ under test."""
    if not (os.access(CLANG, os.X_OK) and os.access(CLANGXX, os.X_OK)):
        pytest.skip("needs clang-14 and clang++-14")
    return SimpleNamespace(cc=CLANG, cxx=CLANGXX, mirecc=str(_BIN / "mirecc"),
                           mireccxx=str(_BIN / "mirecc++"))


@pytest.fixture(params=[14, 19], ids=["clang-14", "clang-19"])
def compilers(request) -> SimpleNamespace:
    """Each clang setup installs (14 always; 19 with ``--test``): ``cc``,
    ``cxx``, ``major``."""
    cc, cxx = f"/usr/bin/clang-{request.param}", f"/usr/bin/clang++-{request.param}"
    if not (os.access(cc, os.X_OK) and os.access(cxx, os.X_OK)):
        pytest.skip(f"needs clang-{request.param} (scripts/setup.sh --test installs it)")
    return SimpleNamespace(cc=cc, cxx=cxx, major=request.param)


@pytest.fixture
def mirecc_env(tmp_path: Path, toolchain) -> dict:
    """Environment for running mirecc (and clang, to compare) in a test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    # no task heads: these tests compare the driver itself with clang
    no_heads = tmp_path / "no-heads"
    no_heads.mkdir(exist_ok=True)
    env.update({
        "MIRECC_CC": toolchain.cc,
        "MIRECC_CXX": toolchain.cxx,
        "MIRECC_HEADS_DIR": str(no_heads),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "LC_ALL": "C",
        # the pipeline in process: a per-user server would outlive the test
        "MIRECC_SERVER": "0",
    })
    return env


@pytest.fixture(scope="session")
def builder(tmp_path_factory) -> str:
    """The native graph builder for LLVM 14 (built once if the checkout has none)."""
    from graph_build import ensure_builder
    path, why = ensure_builder(str(tmp_path_factory.mktemp("graph-builder")))
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def llvm_plugin(tmp_path_factory):
    """``get(major) -> (clang, major, plugin path)``: mirecc's pass
    plugin of this checkout built once per session and LLVM major into a
    temporary cache (so the tests check this source); skips when that clang,
    its LLVM CMake package or cmake is missing."""
    import os
    import shutil

    from mirecc.plugin import build as lp

    cache = tmp_path_factory.mktemp("plugin-cache")
    built: dict = {}

    def get(major: int):
        clang = shutil.which(f"clang-{major}")
        if not clang:
            pytest.skip(f"clang-{major} is not installed")
        if major not in built:
            if not (lp.llvm_cmake_dir(major) / "LLVMConfig.cmake").is_file():
                built[major] = f"no LLVM {major} CMake package (llvm-{major}-dev)"
            elif not shutil.which("cmake"):
                built[major] = "cmake is not installed"
            else:
                old = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")
                os.environ["CMAKE_BUILD_PARALLEL_LEVEL"] = str(os.cpu_count() or 2)
                try:
                    built[major] = lp.build_plugin(major, cache=cache)
                finally:
                    if old is None:
                        del os.environ["CMAKE_BUILD_PARALLEL_LEVEL"]
                    else:
                        os.environ["CMAKE_BUILD_PARALLEL_LEVEL"] = old
        if isinstance(built[major], str):
            pytest.skip(built[major])
        return clang, major, built[major]
    return get
