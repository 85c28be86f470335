"""Direct mode: a TU's decisions found from its source and headers, without
running clang's front end (ccache's "direct mode", for decisions).

The result cache (:mod:`mirecc.cache`) is keyed by the TU's bitcode, so a
hit there still pays a front end and a back end from bitcode.  After a TU's
result is known, mirecc also writes a *manifest*: keyed by what the bitcode
depends on besides the files it reads (the compiler and its identity, the
arguments, the working directory, the environment variables clang reads,
mirecc's pipeline key), it lists every file the front end read (the source
and each header, from the dependency file the front end wrote) with its
SHA-256, and holds the result.  On a later compile with the same key, when
every listed file still has that content, the result is the manifest's, and
the user's own command runs as is (plus the decisions' flags): one clang
run, as without mirecc.

What it cannot see, as in ccache: a new header that would now shadow a
listed one in an earlier include directory, and ``__DATE__``/``__TIME__``.
Only decisions come from a manifest, never an object: clang still compiles
every TU, so a stale decision can cost speed, not correctness.  A file
modified while the front end ran (mtime less than 1 s older than its start)
makes no manifest.  Damaged manifests are misses.
"""
from __future__ import annotations

import json
import os

from mirecc.fsutil import sha256

SCHEMA = 1
# A file whose mtime is this close to the front end's start may have changed
# while it was read (file times come from a coarse clock): no manifest (ccache
# leaves 1 s too)
TOO_NEW_NS = 1_000_000_000
# Variables clang's driver and front end read (include paths, configuration)
CLANG_ENVIRONMENT = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
                     "OBJCPLUS_INCLUDE_PATH", "CCC_OVERRIDE_OPTIONS", "SDKROOT",
                     "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_CTYPE")


def manifest_key(compiler: str, args: list[str], pipeline_version: str) -> str:
    """What a TU's bitcode and result depend on besides the files the front
    end reads."""
    real = os.path.realpath(compiler)
    try:
        st = os.stat(real)
        identity = f"{real}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        identity = real
    material = [f"direct{SCHEMA}", pipeline_version, identity, os.getcwd(),
                *(f"{v}={os.environ.get(v, '')}" for v in CLANG_ENVIRONMENT),
                "args", *args]
    return sha256("\0".join(material).encode("utf-8", "surrogateescape")).hexdigest()


def dependency_files(text: str) -> list[str]:
    """The prerequisites of the first rule of a Make dependency file as
    clang writes it (``\\`` line continuations; ``\\ ``, ``\\#`` and ``$$``
    escapes); ``-MP``'s later phony rules are ignored."""
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    rule = text.split("\n", 1)[0]
    # the target ends at the first ": " (clang escapes spaces in names, not colons)
    at = rule.find(": ")
    if at < 0:
        at = rule.find(":")
        if at < 0 or rule[at + 1:].strip():
            raise ValueError("not a dependency rule")
    body, files, name, i = rule[at + 1:], [], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] in " #\\":
            name.append(body[i + 1])
            i += 2
            continue
        if c == "$" and body[i + 1:i + 2] == "$":
            name.append("$")
            i += 2
            continue
        if c in " \t":
            if name:
                files.append("".join(name))
                name = []
        else:
            name.append(c)
        i += 1
    if name:
        files.append("".join(name))
    return files


def _file_sha(path: str) -> str:
    with open(path, "rb") as fh:
        return sha256(fh.read()).hexdigest()


class Manifests:
    """The manifests under ``<cache dir>/direct/v1``."""

    def __init__(self, cache_dir):
        self.root = os.path.join(str(cache_dir), "direct", f"v{SCHEMA}")

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".json")

    def lookup(self, key: str) -> dict | None:
        """The manifest's entry (``result``: a TUResult dict, ``bitcode_sha256``,
        ``bitcode_bytes``) when every file it lists has its recorded
        content; else None."""
        try:
            with open(self._path(key), "rb") as fh:
                entry = json.loads(fh.read())
            for path, digest in entry["files"]:
                if _file_sha(path) != digest:
                    return None
            entry["result"], entry["bitcode_sha256"], entry["bitcode_bytes"]
        except Exception:  # noqa: BLE001 - missing, damaged, a file gone: a miss
            return None
        return entry

    def record(self, key: str, dep_file: str, source: str, started_ns: int, result,
               bitcode_sha256: str, bitcode_bytes: int) -> bool:
        """Write the manifest of a TU whose front end started at
        ``started_ns`` and wrote ``dep_file``.  False (nothing written) when
        a file it read changed while it ran, or cannot be read."""
        from pathlib import Path

        from mirecc.fsutil import atomic_write_bytes

        try:
            with open(dep_file, encoding="utf-8", errors="surrogateescape") as fh:
                names = dependency_files(fh.read())
        except (OSError, ValueError):
            return False
        files, seen = [], set()
        for name in [source, *names]:
            path = os.path.abspath(name)
            if path in seen:
                continue
            seen.add(path)
            try:
                if os.stat(path).st_mtime_ns >= started_ns - TOO_NEW_NS:
                    return False        # changed while the front end read it
                files.append([path, _file_sha(path)])
            except OSError:
                return False
        data = json.dumps({"files": files, "result": result.to_dict(),
                           "bitcode_sha256": bitcode_sha256,
                           "bitcode_bytes": bitcode_bytes}, sort_keys=True).encode()
        try:
            atomic_write_bytes(Path(self._path(key)), data)
        except OSError:
            return False        # only the shortcut is lost
        return True
