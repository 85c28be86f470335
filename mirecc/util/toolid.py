"""A tool's identity by its content (ccache's ``compiler_check=content``):
what a key names a compiler or ``opt`` by, so that the same tools in
another checkout, under another user or on another machine give the same
key, and a reinstalled or upgraded LLVM another.

The identity is ``<name>|sha256:<digest>``: the digest of the tool's file
and of the LLVM and Clang shared libraries beside it (Debian's
``/usr/lib/llvm-N/bin/clang`` is a small program over
``../lib/libclang-cpp.so.N`` and ``../lib/libLLVM-N.so``: a point release
changes the libraries, not the program).  A part's digest is that of its
GNU build ID where it has one (the linker's digest of the file it wrote:
another build, another ID; read in microseconds), else of its bytes
(hashing Debian's clang that way takes ~0.7 s).  Each file's digest is
remembered per user under
``<cache>/tools/``, keyed by its real path, size and time
(:func:`mirecc.util.fsutil.file_identity`): a compile reads a small file per
part, and the LLVM library that clang and ``opt`` share is read once.
"""
from __future__ import annotations

import os

from mirecc.util.fsutil import atomic_write_bytes, file_identity, sha256
from mirecc.util.paths import default_cache_dir

#: the shared libraries beside a tool that are part of it
_LIBRARY_PREFIXES = ("libLLVM", "libclang-cpp")

_memo: dict[str, str] = {}


def _parts(path: str) -> list[str]:
    """The tool's file and the LLVM libraries in ``../lib`` of its real path."""
    real = os.path.realpath(path)
    parts = [real]
    lib = os.path.join(os.path.dirname(os.path.dirname(real)), "lib")
    try:
        names = sorted(os.listdir(lib))
    except OSError:
        names = []
    for name in names:
        if not name.startswith(_LIBRARY_PREFIXES) or ".so" not in name:
            continue        # Debian's lib/ holds ~700 files: resolve only these
        full = os.path.realpath(os.path.join(lib, name))
        if full not in parts and os.path.isfile(full):
            parts.append(full)
    return parts


def _file_digest(path: str, cache_dir: str) -> str | None:
    """SHA-256 of one file's build ID or content, remembered under ``<cache>/tools/``
    by its real path, size and time (a library shared by clang and ``opt``
    is read once); None when it cannot be read."""
    stamp = file_identity(path)
    if stamp in _memo:
        return _memo[stamp]
    memo_path = os.path.join(cache_dir, "tools", sha256(stamp.encode()).hexdigest()[:40])
    try:
        with open(memo_path, encoding="utf-8") as fh:
            digest = fh.read().strip()
        if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            _memo[stamp] = digest
            return digest
    except OSError:
        pass
    from mirecc.util.elf import build_id  # lazy: struct; a memo hit reads no ELF

    found = build_id(path)
    if found is not None:
        # the linker's digest of the file: microseconds, not a read of ~150 MB
        h = sha256(b"gnu-build-id\0" + found)
    else:
        h = sha256()
        try:
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            return None
    digest = _memo[stamp] = h.hexdigest()
    try:
        atomic_write_bytes(memo_path, digest.encode(), durable=False)
    except OSError:
        pass        # only the memo is lost
    return digest


def tool_identity(path: str, cache_dir: str | None = None) -> str:
    """``name|sha256:<digest>`` of the tool at ``path`` (found on PATH when
    it has no slash): the digest of its parts' names and digests; the real
    path alone when a part cannot be read (then the key does not travel,
    and nothing is wrong)."""
    if os.sep not in path:
        import shutil  # lazy: shutil (~10 ms), only for a bare tool name

        path = shutil.which(path) or path
    if cache_dir is None:
        cache_dir = default_cache_dir()
    parts = _parts(path)
    h = sha256()
    for p in parts:
        digest = _file_digest(p, cache_dir)
        if digest is None:
            return os.path.realpath(path)
        h.update(f"{os.path.basename(p)}\0{digest}\n".encode())
    return f"{os.path.basename(parts[0])}|sha256:{h.hexdigest()}"
