"""Find, build and load the ``mirecc-plugin-<LLVM major>.so`` pass plugin.

The plugin (``passes/plugin``, file format in its FORMAT.md) sets loop
vectorize/interleave factors from a decisions file. A plugin works only with
the LLVM major it was built against, so everything here takes the major of
the clang that will load it (:func:`clang_major`).

Where a plugin is looked for (:func:`find_plugin`), in order:

1. the repository's CMake builds: ``build/passes/plugin/`` and
   ``build/*/passes/plugin/`` (``cmake -S . -B build/native`` for LLVM 14,
   ``-B build/llvm19 -DMIRECC_LLVM_VERSION=19`` for LLVM 19);
2. the per-user cache ``$XDG_CACHE_HOME/mirecc/plugins/`` (default
   ``~/.cache/mirecc/plugins/``), where :func:`build_plugin` puts it.

The decisions file is named on the clang command line (``-mllvm
-mirecc-loop-decisions=<path>``) so that launchers which hash the command
line (ccache) never reuse an object built with other decisions; a caller
that rewrites a decisions file in place must give it a new name instead.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from mirecc.frontend.compiler import clang_major as major_of
from mirecc.util.fsutil import build_once
from mirecc.util.paths import default_cache_dir

REPO = Path(__file__).resolve().parents[2]
# the plugin's source: passes/plugin in a checkout; an installed mirecc
# carries a copy as package data (mirecc/passplugin), to build on first use
SOURCE = REPO / "passes" / "plugin"
if not SOURCE.is_dir():
    SOURCE = Path(__file__).resolve().parents[1] / "passplugin"


class PluginError(RuntimeError):
    """No plugin for that LLVM major, and it cannot be built (message says how)."""


def plugin_name(major: int) -> str:
    return f"mirecc-plugin-{major}.so"


def llvm_cmake_dir(major: int) -> Path:
    return Path(f"/usr/lib/llvm-{major}/lib/cmake/llvm")


def cache_dir(base: str | os.PathLike | None = None) -> Path:
    """``<base>/plugins`` (default: mirecc's per-user cache directory)."""
    return Path(base or default_cache_dir()) / "plugins"


def clang_major(compiler: str) -> int:
    """The LLVM major of ``compiler``: from its name or where it links to
    (``clang-19``, ``/usr/lib/llvm-19/bin/clang``), else ``--version``."""
    major = major_of(compiler)
    if not major:
        raise PluginError(f"{compiler}: cannot tell its clang version (name, path or "
                          f"--version)")
    return major


def _source_mtime() -> float:
    try:
        return max(p.stat().st_mtime for p in SOURCE.iterdir() if p.is_file())
    except (OSError, ValueError):
        return 0.0


def find_plugin(major: int, cache: str | os.PathLike | None = None) -> Path | None:
    """A built plugin for LLVM ``major``, or None. A cached one older than
    the plugin's source in this checkout does not count (it is rebuilt)."""
    name = plugin_name(major)
    build = REPO / "build"
    for pattern in (f"passes/plugin/{name}", f"*/passes/plugin/{name}"):
        for path in sorted(glob.glob(str(build / pattern))):
            if os.path.isfile(path):
                return Path(path)
    return _cached(major, cache)


def _cached(major: int, cache: str | os.PathLike | None) -> Path | None:
    path = cache_dir(cache) / plugin_name(major)
    try:
        return path if path.stat().st_mtime >= _source_mtime() else None
    except OSError:
        return None


def manual_build_command(major: int) -> str:
    """The commands that build the plugin where find_plugin looks."""
    if not (REPO / "passes").is_dir():    # an installed mirecc: into the cache
        out = cache_dir() / f"build-{major}"
        return (f"cmake -S {SOURCE} -B {out} -DLLVM_DIR={llvm_cmake_dir(major)} && "
                f"cmake --build {out} && cp {out}/{plugin_name(major)} {cache_dir()}/")
    out = REPO / "build" / ("native" if major == 14 else f"llvm{major}")
    return (f"cmake -S {REPO} -B {out} -DMIRECC_LLVM_VERSION={major} && "
            f"cmake --build {out} --target mirecc-plugin")


def build_plugin(major: int, cache: str | os.PathLike | None = None) -> Path:
    """Build the plugin for LLVM ``major`` into the cache directory and return
    its path. Concurrent callers (``make -j``) wait on a lock and build it
    once; the .so appears atomically. Raises :class:`PluginError`."""
    how = f"build it by hand with: {manual_build_command(major)}"
    llvm_dir = llvm_cmake_dir(major)
    if not (llvm_dir / "LLVMConfig.cmake").is_file():
        raise PluginError(f"no LLVM {major} CMake package at {llvm_dir} (install "
                          f"llvm-{major}-dev) to build mirecc's pass plugin; "
                          f"then {how}")
    if not (SOURCE / "CMakeLists.txt").is_file():
        raise PluginError(f"the plugin's source {SOURCE} is missing; {how}")
    cmake = shutil.which("cmake")
    if not cmake:
        raise PluginError(f"cmake is not installed, needed for mirecc's pass plugin; {how}")
    target = cache_dir(cache) / plugin_name(major)

    def steps(tmp):
        return ([cmake, "-S", str(SOURCE), "-B", tmp, f"-DLLVM_DIR={llvm_dir}",
                 "-DCMAKE_BUILD_TYPE=Release"], [cmake, "--build", tmp])

    def failed(cmd, message):
        return PluginError(f"building mirecc's pass plugin for LLVM {major} failed "
                           f"({message}); {how}")

    # another process may have built it while this one waited
    return build_once(target, lambda: _cached(major, cache) is not None, steps,
                      plugin_name(major), failed)


def ensure_plugin(major: int, build: bool = True,
                  cache: str | os.PathLike | None = None) -> Path:
    """A plugin for LLVM ``major``: found, else built (``build=True``), else
    :class:`PluginError`."""
    found = find_plugin(major, cache)
    if found:
        return found
    if not build:
        raise PluginError(f"mirecc's pass plugin for LLVM {major} is not built; "
                          f"build it with: {manual_build_command(major)}")
    return build_plugin(major, cache)


def plugin_args(major: int, plugin: str | os.PathLike, decisions_path: str | os.PathLike) -> list[str]:
    """The clang flags that load ``plugin`` and give it the decisions file.

    ``-mllvm`` options are parsed before ``-fpass-plugin`` plugins are loaded
    up to clang 21 (checked: 14 and 19 reject the option), so those also
    load the plugin early with ``-Xclang -load``; clang 22 loads pass plugins
    first.
    """
    plugin = os.fspath(plugin)
    args = ["-Xclang", "-load", "-Xclang", plugin] if major < 22 else []
    return args + [f"-fpass-plugin={plugin}",
                   "-mllvm", f"-mirecc-loop-decisions={os.fspath(decisions_path)}"]
