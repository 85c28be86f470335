"""Content-addressed cache of per-TU pipeline results.

Key: sha256 of (bitcode hash, :func:`pipeline_key`, optimisation level).
Value: the TUResult as JSON, an entry of the stored kind
:data:`mirecc.store.kinds.RESULTS` (written with an atomic rename, so
concurrent ``make -j`` processes computing the same entry both succeed and
a reader never sees half a file; no size limit).  A damaged entry is a miss.
"""

from __future__ import annotations

import os

from mirecc import __version__
from mirecc.store.kinds import RESULTS
from mirecc.taskapi.records import PIPELINE_SCHEMA, TUResult
from mirecc.taskapi.registry import default_heads_dirs, heads_for_languages, tasks
from mirecc.util.fsutil import atomic_write_bytes, sha256

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # mirecc/
_ENCODER_MANIFEST = os.path.join(_PACKAGE, "data", "encoder", "manifest.json")


def _stamp(path: str, st, content_root: str | None) -> str:
    """One file's line in a stamp: its path, size and time; with
    ``content_root``, its name under that root and its content's digest
    (what another checkout or machine with the same files also says)."""
    if content_root is None:
        return f"{path}|{st.st_size}|{st.st_mtime_ns}\n"
    with open(path, "rb") as fh:
        digest = sha256(fh.read()).hexdigest()
    return f"{os.path.relpath(path, content_root)}|{digest}\n"


def _code_walk() -> tuple[list[str], list]:
    """(the package's folders, then ``(path, stat)`` of each module) in the
    order :func:`code_stamp` reads them."""
    folders, modules, stack = [], [], [_PACKAGE]
    while stack:
        directory = stack.pop()
        folders.append(directory)
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir() and entry.name not in ("__pycache__", "data"):
                    stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    modules.append((entry.path, entry.stat()))
    return folders, modules


def code_stamp(content: bool = False) -> str:
    """mirecc's version and code: the size and time of every module and of
    the shipped encoder's manifest (an edited checkout or an upgrade changes
    it); ``content``: their names and contents instead."""

    root = _PACKAGE if content else None
    h = sha256(__version__.encode())
    for path, st in _code_walk()[1]:
        h.update(_stamp(path, st, root).encode())
    try:
        h.update(b"model|" + _stamp(_ENCODER_MANIFEST, os.stat(_ENCODER_MANIFEST), root).encode())
    except OSError:
        h.update(b"no model")
    return h.hexdigest()


def pipeline_inputs(config, languages) -> list[str]:
    """The files and folders :func:`pipeline_key` reads (by size and time,
    or content), and the folders that would show one added: a key kept
    elsewhere (the compiled client's rules) is stale when any of them
    changed."""
    folders, modules = _code_walk()
    paths = folders + [path for path, _ in modules] + [_ENCODER_MANIFEST]
    if config.model:
        paths.append(os.path.join(config.model, "manifest.json"))
    for spec in heads_for_languages(default_heads_dirs(config), languages):
        paths.append(spec.directory)
        with os.scandir(spec.directory) as entries:
            paths += sorted(e.path for e in entries if e.is_file())
    return paths


def pipeline_key(config, languages, content: bool = False) -> str:
    """What a TU's result depends on besides its bitcode, computed without
    loading anything: the result schema; mirecc's code (:func:`code_stamp`);
    the encoder model (manifest); the installed heads that apply to
    ``languages`` (every file's name, size and time, as code_stamp: hashing
    a 1.5 MB head.onnx would cost ~5 ms on every compile; heads are
    installed by replacing their directory); every task's settings; whether
    the build records or reads a profile (which heads run).  ``content``:
    files by name and content (:func:`travelling_pipeline_key`)."""

    h = sha256(f"schema{PIPELINE_SCHEMA}|{code_stamp(content)}".encode())
    if config.model:   # the shipped model is part of code_stamp
        try:
            with open(os.path.join(config.model, "manifest.json"), "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(b"no model")
    for spec in heads_for_languages(default_heads_dirs(config), languages):
        with os.scandir(spec.directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_file():
                    h.update(_stamp(entry.path, entry.stat(),
                                    os.path.dirname(spec.directory) if content else None)
                             .encode())
    for task in tasks().values():
        for setting in task.settings:
            h.update(f"{setting.key}={getattr(config, setting.key)!r}\n".encode())
    # a build that records or reads a decisions profile runs every head, one
    # that does neither only those it applies (mirecc.tu.pipeline)
    h.update(f"every-head={bool(config.record or config.profile)}\n".encode())
    return h.hexdigest()


def travelling_pipeline_key(config, languages, local_key: str) -> str:
    """:func:`pipeline_key` by content (the same code, heads and settings in
    another checkout or on another machine give the same key), remembered
    per user under ``<cache>/tools/`` by the local key (``local_key``, which
    names the files by path, size and time): hashing every module costs a
    compile ~20 ms, once per install."""
    memo = os.path.join(config.cache_root(), "tools", f"pipeline-{local_key[:40]}")
    try:
        with open(memo, encoding="utf-8") as fh:
            key = fh.read().strip()
        if len(key) == 64:
            return key
    except OSError:
        pass
    key = pipeline_key(config, languages, content=True)
    try:
        atomic_write_bytes(memo, key.encode(), durable=False)
    except OSError:
        pass            # only the memo is lost
    return key


class CacheError(Exception):
    """The cache directory cannot be used (the message names it)."""

class ResultCache:
    """The pipeline results in ``<root>/results/v1``
    (:data:`mirecc.store.kinds.RESULTS`: no size limit)."""

    def __init__(self, root):
        self.folder = RESULTS.folder(root)
        self.root = self.folder.root

    @staticmethod
    def key(bitcode_sha256: str, pipeline_version: str, opt_level: str) -> str:
        material = "\0".join((bitcode_sha256, pipeline_version, opt_level))
        return sha256(material.encode()).hexdigest()

    def get(self, key: str) -> TUResult | None:
        import json   # here: a direct-mode hit never reads this cache

        try:
            data = self.folder.read(key)
            return None if data is None else TUResult.from_dict(json.loads(data))
        except Exception:  # noqa: BLE001
            # Damaged or foreign entry (not JSON, not a mapping, fields of the
            # wrong type, ...): a miss, recomputed and overwritten.
            return None

    def put(self, key: str, result: TUResult) -> None:
        import json  # lazy: json, a cache write only (a hit reads without it)

        data = json.dumps(result.to_dict(), sort_keys=True).encode()
        try:
            self.folder.write(key, data)
        except OSError as exc:
            raise CacheError(f"{self.root}: cache directory is not writable: "
                             f"{exc.strerror or exc}") from None
