"""Find the real clang that mirecc drives.

Order: the config's ``cc``/``cxx`` (or ``MIRECC_CC``/``MIRECC_CXX``), else the
newest clang on PATH.  "Newest" is read from the name (``clang-19``) or from
where an unversioned ``clang`` link points (``/usr/lib/llvm-19/bin/clang``),
so no subprocess is spent on it.  mirecc itself is never picked, even when a
directory on PATH makes ``clang`` point at it.

Runs on every call, so only ``os`` is imported (``re`` alone would cost
several milliseconds per compile).
"""

from __future__ import annotations

import os


class CompilerNotFound(Exception):
    pass


def _is_mirecc(path: str) -> bool:
    """True for mirecc's own scripts, also behind symlinks."""
    try:
        resolved = os.path.realpath(path)
        if os.path.basename(resolved).startswith("mirecc"):
            return True
        with open(resolved, "rb") as fh:
            head = fh.read(512)
        return b"mirecc.driver" in head
    except OSError:
        return False


def _versioned_name(name: str) -> tuple[bool, int] | None:
    """For 'clang-19' -> (False, 19), 'clang++-14.0' -> (True, 14); else None."""
    for cxx, stem in ((True, "clang++-"), (False, "clang-")):
        if name.startswith(stem):
            parts = name[len(stem):].split(".")
            if all(p.isdigit() for p in parts):
                return cxx, int(parts[0])
            return None
    return None


def _version_of(path: str) -> int:
    versioned = _versioned_name(os.path.basename(path))
    if versioned:
        return versioned[1]
    # An unversioned link such as /usr/bin/clang -> /usr/lib/llvm-19/bin/clang,
    # or one to a versioned file outside an llvm-N directory (/opt/bin/clang-19).
    resolved = os.path.realpath(path)
    versioned = _versioned_name(os.path.basename(resolved))
    if versioned:
        return versioned[1]
    for part in resolved.split(os.sep):
        if part.startswith("llvm-") and part[5:].isdigit():
            return int(part[5:])
    return 0


def _is_wanted_name(name: str, cxx: bool) -> bool:
    if not name.startswith("clang"):
        return False
    if name == ("clang++" if cxx else "clang"):
        return True
    versioned = _versioned_name(name)
    return versioned is not None and versioned[0] == cxx


def newest_clang_on_path(cxx: bool, path_env: str | None = None) -> str | None:
    """The clang (or clang++) with the highest major version on PATH."""
    best: tuple[int, int, str] | None = None
    dirs = (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep)
    for order, directory in enumerate(dirs):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            if not _is_wanted_name(name, cxx):
                continue
            # An empty PATH entry is the working directory; keep a "./" so
            # that exec runs this file and does not search PATH again.
            candidate = os.path.join(directory or ".", name)
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)) \
                    or _is_mirecc(candidate):
                continue
            # Higher version wins; among equals, the earlier PATH entry wins.
            key = (_version_of(candidate), -order, candidate)
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best else None


def which(program: str) -> str | None:
    """Like shutil.which, without importing shutil."""
    if os.sep in program:
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _cxx_sibling(cc: str) -> str | None:
    """clang++ next to a chosen clang: clang-19 -> clang++-19."""
    directory, name = os.path.split(cc)
    if name.startswith("clang++"):
        return cc
    if name.startswith("clang"):
        sibling = os.path.join(directory, name.replace("clang", "clang++", 1))
        return which(sibling)
    return None


def find_compiler(config, cxx: bool) -> str:
    """Path of the compiler for this call (as found: links are not resolved,
    so clang's diagnostics name it the way a direct call would)."""
    configured = config.cxx if cxx else config.cc
    if configured:
        found = which(configured)
        if not found:
            var = "cxx / MIRECC_CXX" if cxx else "cc / MIRECC_CC"
            raise CompilerNotFound(f"the configured compiler '{configured}' ({var}, "
                                   f"from {config.source}) was not found")
        if _is_mirecc(found):
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
    return found_path
