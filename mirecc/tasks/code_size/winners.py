"""The code-size task's winner cache: which candidate was smallest for a TU,
so that a rebuild of the same TU builds only that one.

A record is keyed by everything that decides the sizes: the front end's
bitcode (its SHA-256), the back-end command (compiler and the user's code
generation flags, the other tasks' flags), the compiler's and opt's files
(size and modification time: a reinstalled LLVM is a miss) and the
candidate list.  It holds the winner and every candidate's loadable and
``.text`` bytes, as ``<cache>/code-size/v4/<aa>/<key>.json`` (the stored
kind :data:`mirecc.store.kinds.WINNERS`: written atomically, safe under
``make -j``; no size limit).  A damaged record is a miss, and rebuilt.
The team store shares them by :func:`shared_key` (:data:`TEAM_KIND`).

The same record is also kept under a looser key, the TU's *twin key*
(:func:`twin_key`): the code of the module (:func:`code_digest`), the
tools and the candidates.  Builds compile many sources twice, once for a
static and once for a shared library (bzip2's ``.o`` and ``-fPIC``
``.sho``, libtool's ``-fPIC -DPIC`` copies, CMake's ``-fPIC
-D<target>_EXPORTS`` ones): the two modules differ only in what position
independence changes in the IR, and the second compile takes the first
one's verdict: it builds the winner alone, or nothing when the user's level
won, and the winner is still measured against this compile's own object.
"""
from __future__ import annotations

import hashlib
import json
import re

from mirecc.store.kinds import TEAM_WINNERS, WINNERS
from mirecc.util.paths import Checkout
from mirecc.util.toolid import tool_identity

VERSION = "4"   # 2: sizes are loadable bytes, .text beside; 3: tools by content;
#                 4: sizes are shipped bytes (loadable and what the link adds)
#: the records' kind in the team store
TEAM_KIND = TEAM_WINNERS.name


def tools(compiler: str, opt: str, cache_dir: str | None = None) -> dict:
    """The tools a record depends on, by content (:mod:`mirecc.util.toolid`)."""
    return {"compiler": tool_identity(compiler, cache_dir), "opt": tool_identity(opt, cache_dir)}


def winner_key(bitcode_sha256: str, backend_command: list[str], opt: str,
               candidates: list[str], cache_dir: str | None = None) -> str:
    """The record's key; ``backend_command`` without its output and input
    paths (they differ between builds of the same TU)."""
    ids = tools(backend_command[0], opt, cache_dir)
    material = "\0".join((VERSION, bitcode_sha256, ids["compiler"], ids["opt"],
                          "\1".join(backend_command[1:]), "\1".join(candidates)))
    return hashlib.sha256(material.encode()).hexdigest()


def twin_key(code: str, opt: str, compiler: str, candidates: list[str],
             cache_dir: str | None = None) -> str:
    """The record's twin key: ``code`` (:func:`code_digest`), the tools
    and the candidates, without the back-end command (a static and a
    shared compile of one source differ in it)."""
    ids = tools(compiler, opt, cache_dir)
    material = "\0".join((VERSION, "twin", code, ids["compiler"], ids["opt"],
                          "\1".join(candidates)))
    return hashlib.sha256(material.encode()).hexdigest()


# flags of the front end alone (the bitcode holds their effect): not part of
# a key that travels; (flag, takes the next argument)
_FRONT_END_WITH_ARG = ("-I", "-D", "-U", "-include", "-imacros", "-isystem", "-iquote",
                       "-idirafter", "-iprefix", "-iwithprefix", "-isysroot", "--sysroot")
_FRONT_END_PREFIXES = ("-W", "-std=", "-pedantic", "-fcolor-diagnostics", "-fdiagnostics",
                       "--sysroot=", "-ferror-limit")


def travelling_flags(backend_command: list[str]) -> list[str]:
    """The back-end command's code-generation flags as a key that travels:
    no compiler path, no front-end flags (include paths, defines,
    warnings), and the checkout's directories written relative to the
    working directory (:class:`mirecc.util.paths.Checkout`: a prefix map
    names them)."""

    checkout = Checkout(backend_command, "")
    out, args, i = [], backend_command[1:], 0
    while i < len(args):
        a = args[i]
        if a in _FRONT_END_WITH_ARG:
            i += 2
            continue
        i += 1
        if a.startswith(_FRONT_END_PREFIXES) or \
                any(a.startswith(f) and len(a) > len(f) for f in _FRONT_END_WITH_ARG[:9]):
            continue
        out.append(checkout.portable(a))
    return out


def shared_key(code: str, ids: dict, flags: list[str], candidates: list[str]) -> str:
    """The team store's key of a record: the module's code
    (:func:`code_digest`, no paths), the tools by content (:func:`tools`),
    the code-generation flags (:func:`travelling_flags`) and the
    candidates.  (The entry names its tools too: one copied under another
    key is rejected, :mod:`mirecc.store.team`.)"""
    material = "\0".join((VERSION, "shared", code, ids["compiler"], ids["opt"],
                          "\1".join(flags), "\1".join(candidates)))
    return hashlib.sha256(material.encode()).hexdigest()


# what the digest leaves out of the IR text: comments (``; ModuleID``), metadata
# (numbered in order, so one more module flag renumbers every debug location),
# source_filename, and dso_local (what -fPIC takes from a definition)
_NOT_CODE = re.compile(rb"^(?:[;!]|source_filename ).*\n", re.MULTILINE)
_METADATA_REF = re.compile(rb"!\d+")


def code_digest(ir_text: bytes) -> str:
    """SHA-256 of the module's code: its IR text (``llvm-dis``) without
    comments, metadata, ``source_filename`` and ``dso_local``.  Two compiles
    of one source with and without ``-fPIC`` (and defines the code never
    reads) give the same digest; any change to a type, global, function or
    instruction, or to the target, gives another."""
    code = _METADATA_REF.sub(b"!", _NOT_CODE.sub(b"", ir_text).replace(b" dso_local", b""))
    return hashlib.sha256(code).hexdigest()


class WinnerCache:
    """The records under ``<cache>/code-size/v4``
    (:data:`mirecc.store.kinds.WINNERS`: no size limit)."""

    def __init__(self, cache_dir: str):
        self.folder = WINNERS.folder(cache_dir)
        self.root = self.folder.root

    def get(self, key: str) -> dict | None:
        """``{"winner": name, "sizes": {name: loadable bytes}, "text": {name:
        .text bytes}, "skipped": {name: why}}``
        or None (no record, or a damaged one)."""
        try:
            data = self.folder.read(key)
            record = json.loads(data) if data is not None else None
        except (OSError, ValueError):
            return None
        if isinstance(record, dict) and isinstance(record.get("winner"), str) \
                and isinstance(record.get("sizes"), dict) and record["winner"] in record["sizes"] \
                and all(isinstance(v, int) for v in record["sizes"].values()) \
                and isinstance(record.get("skipped", {}), dict):
            return record
        return None

    def put(self, key: str, winner: str, sizes: dict, skipped: dict,
            text: dict | None = None) -> None:
        data = json.dumps({"winner": winner, "sizes": sizes, "skipped": skipped,
                           "text": text or {}},
                          sort_keys=True).encode()
        try:
            self.folder.write(key, data)
        except OSError:
            pass        # only the reuse is lost; the object is right
