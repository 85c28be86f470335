"""Find the real clang that mirecc drives.

Order: the config's ``cc``/``cxx`` (or ``MIRECC_CC``/``MIRECC_CXX``), else the
newest clang on PATH.  "Newest" is read from the name (``clang-19``) or from
where an unversioned ``clang`` link points (``/usr/lib/llvm-19/bin/clang``),
so no subprocess is spent on it.  mirecc itself is never picked, even when a
directory on PATH makes ``clang`` point at it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

_VERSIONED = re.compile(r"^clang(\+\+)?-(\d+)(?:\.\d+)*$")
_LLVM_DIR = re.compile(r"llvm-(\d+)")


class CompilerNotFound(Exception):
    pass


def _is_mirecc(path: Path) -> bool:
    """True for mirecc's own scripts, also behind symlinks."""
    try:
        resolved = path.resolve()
        if resolved.name.startswith("mirecc"):
            return True
        with open(resolved, "rb") as fh:
            head = fh.read(512)
        return b"mirecc.driver" in head
    except OSError:
        return False


def _version_of(path: Path) -> int:
    match = _VERSIONED.match(path.name)
    if match:
        return int(match.group(2))
    match = _LLVM_DIR.search(str(path.resolve()))
    return int(match.group(1)) if match else 0


def newest_clang_on_path(cxx: bool, path_env: str | None = None) -> Path | None:
    """The clang (or clang++) with the highest major version on PATH."""
    wanted = "clang++" if cxx else "clang"
    best: tuple[int, int, Path] | None = None
    dirs = (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep)
    for order, directory in enumerate(dirs):
        if not directory or not os.path.isdir(directory):
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if name != wanted and not (name.startswith(wanted + "-")
                                       and _VERSIONED.match(name)
                                       and (_VERSIONED.match(name).group(1) == "++") == cxx):
                continue
            candidate = Path(directory) / name
            if not os.access(candidate, os.X_OK) or _is_mirecc(candidate):
                continue
            # Higher version wins; among equals, the earlier PATH entry wins.
            key = (_version_of(candidate), -order, candidate)
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best else None


def _cxx_sibling(cc: str) -> str | None:
    """clang++ next to a chosen clang: clang-19 -> clang++-19."""
    path = Path(cc)
    name = path.name
    if name.startswith("clang++"):
        return cc
    if name.startswith("clang"):
        sibling = name.replace("clang", "clang++", 1)
        candidate = path.with_name(sibling) if path.parent != Path("") else Path(sibling)
        found = shutil.which(str(candidate))
        if found:
            return found
    return None


def find_compiler(config, cxx: bool) -> str:
    """Absolute path (or PATH name) of the compiler for this call."""
    configured = config.cxx if cxx else config.cc
    if configured:
        found = shutil.which(configured)
        if not found:
            var = "cxx / MIRECC_CXX" if cxx else "cc / MIRECC_CC"
            raise CompilerNotFound(f"the configured compiler '{configured}' ({var}, "
                                   f"from {config.source}) was not found")
        if _is_mirecc(Path(found)):
            raise CompilerNotFound(f"the configured compiler '{configured}' is mirecc "
                                   f"itself; point it at the real clang")
        return found
    if cxx and config.cc:
        sibling = _cxx_sibling(find_compiler(config, cxx=False))
        if sibling:
            return sibling
    found_path = newest_clang_on_path(cxx)
    if found_path is None:
        wanted = "clang++" if cxx else "clang"
        raise CompilerNotFound(
            f"no {wanted} found on PATH; install clang (e.g. apt-get install clang-14) "
            f"or set {'MIRECC_CXX' if cxx else 'MIRECC_CC'}")
    return str(found_path)


def program_name() -> str:
    return os.path.basename(sys.argv[0]) or "mirecc"
