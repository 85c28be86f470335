"""From applied plugin decisions to the flags of the final compile.

The ``mirecc-loophints`` plugin applies two tasks' decisions: loop-vectorize
factors (a module entry's ``loops``) and OpenMP region configurations (its
``openmp``); both tasks declare :func:`inject`, and the driver calls it once
with the decisions of both, so that one plugin and one decisions file serve
the compile. The decisions go into a JSON file (format: passes/loophints/FORMAT.md) that
the pass plugin reads.  Its name is the digest of its content, under the
cache directory: the same decisions give the same file and the same command
line (so ccache-style launchers, which hash the command line, never reuse
an object built with other decisions), it is written once, atomically, and
concurrent compiles under ``make -j`` never see half of one.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

DECISIONS_VERSION = 1


class InjectError(Exception):
    """The decisions cannot reach the compile; ``str()`` is the one-line reason."""


def decisions_document(loops_by_source: dict[str, dict[str, dict]],
                       openmp_by_source: dict[str, dict] | None = None,
                       records_by_source: dict[str, dict[str, str]] | None = None) -> dict:
    """{source path as on the command line: {loop id: {vectorize.width,
    interleave.count}}}, {source: its ``openmp`` entry} and {source: {record
    name: text}} (lines the plugin writes into the object's
    ``.mirecc.<name>`` section) -> the file's document."""
    modules: dict[str, dict] = {}
    for src, loops in loops_by_source.items():
        if loops:
            modules.setdefault(src, {})["loops"] = dict(sorted(loops.items()))
    for src, entry in (openmp_by_source or {}).items():
        if entry:
            modules.setdefault(src, {})["openmp"] = entry
    for src, records in (records_by_source or {}).items():
        if records:
            modules.setdefault(src, {})["record"] = dict(sorted(records.items()))
    return {"version": DECISIONS_VERSION, "modules": dict(sorted(modules.items()))}


def write_decisions(document: dict, directory: str | os.PathLike) -> Path:
    from mirecc.fsutil import atomic_write_bytes

    data = (json.dumps(document, sort_keys=True, indent=1) + "\n").encode()
    path = Path(directory) / "loop-decisions" / f"{hashlib.sha256(data).hexdigest()[:24]}.json"
    if not path.is_file():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise InjectError(f"cannot write the loop decisions file {path}: "
                              f"{exc.strerror or exc}") from None
    return path


def compile_args(compiler: str, loops_by_source: dict[str, dict[str, dict]],
                 cache_dir: str | os.PathLike, plugin: str | None = None,
                 openmp_by_source: dict[str, dict] | None = None,
                 records_by_source: dict[str, dict[str, str]] | None = None) -> list[str]:
    """The flags that make ``compiler`` apply the decisions (none when there
    are none); the plugin for its LLVM is ``plugin``, else found, else built
    on first use."""
    from mirecc.tasks.loop_vectorize.plugin import PluginError, clang_major, ensure_plugin, plugin_args

    document = decisions_document(loops_by_source, openmp_by_source, records_by_source)
    if not document["modules"]:
        return []
    try:
        major = clang_major(compiler)
        plugin = plugin or ensure_plugin(major)
    except PluginError as exc:
        raise InjectError(str(exc)) from None
    return plugin_args(major, plugin, write_decisions(document, cache_dir))


def inject(decisions_by_source: dict[str, list], compiler: str, config) -> list[str]:
    """The injection of the loop-vectorize, openmp and numa tasks
    (:class:`mirecc.tasks.api.Task`): applied decisions per source -> the
    compile flags.  ``plugin`` in the configuration names the plugin to load
    instead of the found or built one."""
    from mirecc.tasks.numa.head import RECORD, numa_record
    from mirecc.tasks.openmp.head import openmp_plugin_entry

    loops = {src: {d.target: d.value for d in decisions if d.task == "loop-vectorize"}
             for src, decisions in decisions_by_source.items()}
    openmp = {src: openmp_plugin_entry([d for d in decisions if d.task == "openmp"])
              for src, decisions in decisions_by_source.items()}
    records = {}
    for src, decisions in decisions_by_source.items():
        line = numa_record(src, [d for d in decisions if d.task == "numa"])
        if line:
            records[src] = {RECORD: line}
    return compile_args(compiler, loops, config.resolved_cache_dir(), plugin=config.plugin,
                        openmp_by_source=openmp, records_by_source=records)
