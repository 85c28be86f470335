"""The CMake toolchain file, rendered with the absolute paths of this
installation's ``mirecc`` and ``mirecc++`` so that CMake finds them even when
the virtual environment is not on PATH."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from importlib import resources
from pathlib import Path

from mirecc.util.fsutil import atomic_write_bytes


def _script_dirs() -> list[Path]:
    """Where this installation's scripts are: beside the running mirecc, and
    the bin/ of the running Python (a venv)."""
    dirs = []
    invoked = Path(sys.argv[0])
    if invoked.name.startswith("mirecc"):
        dirs.append(invoked.absolute().parent)
    dirs.append(Path(sys.executable).parent)
    return dirs


def installed_driver(name: str = "mirecc") -> str:
    """Absolute path of this installation's ``mirecc`` or ``mirecc++``
    (else the one on PATH)."""
    for directory in _script_dirs():
        if (directory / name).is_file():
            return str(directory / name)
    found = shutil.which(name)
    if found:
        return os.path.abspath(found)
    raise FileNotFoundError(f"{name} not found next to {sys.executable} or on PATH "
                            f"(is the package installed with pip?)")


def _driver_paths() -> tuple[str, str]:
    """Absolute paths of mirecc and mirecc++ for the running installation,
    taken from one directory where both are."""
    for directory in _script_dirs():
        cc, cxx = directory / "mirecc", directory / "mirecc++"
        if cc.is_file() and cxx.is_file():
            return str(cc), str(cxx)
    cc, cxx = shutil.which("mirecc"), shutil.which("mirecc++")
    if cc and cxx:
        return os.path.abspath(cc), os.path.abspath(cxx)
    raise FileNotFoundError("cannot locate the mirecc and mirecc++ scripts of this "
                            "installation (is the package installed with pip?)")


def _cmake_escape(path: str) -> str:
    """Escape a path for a quoted CMake argument ("...")."""
    return path.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


def toolchain_file(cache_dir) -> str:
    """Write (if needed) and return the toolchain file for this installation,
    under ``cache_dir`` (the configured cache directory, a Path)."""
    template = resources.files("mirecc").joinpath("data/toolchain.cmake.in").read_text()
    cc, cxx = _driver_paths()
    text = template.replace("@MIRECCXX@", _cmake_escape(cxx)).replace(
        "@MIRECC@", _cmake_escape(cc))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    # One file per installation, under the user's cache directory.
    path = cache_dir / "toolchain" / digest / "mirecc-toolchain.cmake"
    if not path.is_file() or path.read_text() != text:
        atomic_write_bytes(path, text.encode())
    return str(path)
