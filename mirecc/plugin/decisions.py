"""From applied plugin decisions to the flags of the final compile.

The mirecc's pass plugin applies the decisions of every task that
declares :func:`inject` (loop-vectorize factors: a module entry's ``loops``;
OpenMP region configurations: its ``openmp``; NUMA records: its
``record``); each task contributes its keys of a module entry through its
``plugin_entry``, and the driver calls :func:`inject` once with the
decisions of all, so that one plugin and one decisions file serve the
compile. The decisions go into a JSON file (format: passes/plugin/FORMAT.md) that
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

from mirecc.plugin.build import PluginError, clang_major, ensure_plugin, plugin_args
from mirecc.taskapi.registry import task
from mirecc.util.fsutil import atomic_write_bytes

DECISIONS_VERSION = 1
#: a function's versions, LLVM's own among them (the plugin's and the runtime's bound)
MAX_VERSIONS = 8


class InjectError(Exception):
    """The decisions cannot reach the compile; ``str()`` is the one-line reason."""


def write_decisions(document: dict, directory: str | os.PathLike) -> Path:
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


def _flags(document: dict, compiler: str, cache_dir, plugin: str | None) -> list[str]:
    if not document["modules"]:
        return []
    try:
        major = clang_major(compiler)
        plugin = plugin or ensure_plugin(major)
    except PluginError as exc:
        raise InjectError(str(exc)) from None
    return plugin_args(major, plugin, write_decisions(document, cache_dir))


def merge_versions(first: dict, second: dict) -> dict:
    """One function's versions offered by two tasks (a ``versions`` entry
    each, FORMAT.md "Function versions"): all of them, the first task's
    first (tasks in name order), up to the plugin's 7; the key, a digest of
    both keys (the runtime's verdicts are for this set)."""
    names = {v["name"] for v in first["versions"]}
    versions = first["versions"] + [v for v in second["versions"] if v["name"] not in names]
    key = hashlib.sha256(f"{first['key']} {second['key']}".encode()).hexdigest()[:16]
    return {**first, "key": key, "versions": versions[:MAX_VERSIONS - 1]}


def module_entries(decisions_by_source: dict[str, list]) -> dict[str, dict]:
    """source -> its module entry, merged from what each task whose
    decisions are there contributes (``Task.plugin_entry``:
    ``function(source, decisions) -> {key: value}`` for its keys of the
    entry: ``loops``, ``openmp``, ``record``, ``versions``); a function
    two tasks offer versions gets both's (:func:`merge_versions`)."""
    out: dict[str, dict] = {}
    for src, decisions in decisions_by_source.items():
        entry: dict = {}
        for name in sorted({d.task for d in decisions}):
            declared = task(name)
            if declared is None or not declared.has("plugin_entry"):
                continue
            part = declared.plugin_entry(
                src, [d for d in decisions if d.task == name])
            for key, value in (part or {}).items():
                if not value:
                    continue
                merged = entry.setdefault(key, {})
                for target, what in value.items():
                    if key == "versions" and target in merged:
                        what = merge_versions(merged[target], what)
                    merged[target] = what
        if entry:
            out[src] = {key: dict(sorted(value.items())) for key, value in entry.items()}
    return out


def inject(decisions_by_source: dict[str, list], compiler: str, config) -> list[str]:
    """The injection of every task applied through the plugin
    (:meth:`mirecc.taskapi.api.Task.injection`): applied decisions per
    source -> the compile flags (one plugin, one decisions file).
    ``plugin`` in the configuration names the plugin to load instead of
    the found or built one."""
    document = {"version": DECISIONS_VERSION,
                "modules": dict(sorted(module_entries(decisions_by_source).items()))}
    return _flags(document, compiler, config.resolved_cache_dir(), config.plugin)


def with_calls(flags: list[str], calls: dict[str, str], compiler: str, config) -> list[str]:
    """A compile's decision ``flags`` with call-site decisions (FORMAT.md,
    "Call sites": site id -> ``inline`` or ``noinline``) for every module
    (``"*"``; a module's own entry wins per site): added to the decisions
    file the flags name, as a new file, or the plugin's flags and a file of
    their own.  InjectError when the plugin or the file cannot be had."""
    option = "-mirecc-loop-decisions="
    cache_dir = config.resolved_cache_dir()
    for i, flag in enumerate(flags):
        if flag.startswith(option):
            try:
                with open(flag[len(option):], encoding="utf-8") as fh:
                    document = json.load(fh)
            except (OSError, ValueError) as exc:
                raise InjectError(f"cannot read the decisions file {flag[len(option):]}: "
                                  f"{exc}") from None
            star = document.setdefault("modules", {}).setdefault("*", {})
            star["calls"] = dict(sorted({**calls, **star.get("calls", {})}.items()))
            return [*flags[:i], option + os.fspath(write_decisions(document, cache_dir)),
                    *flags[i + 1:]]
    document = {"version": DECISIONS_VERSION,
                "modules": {"*": {"calls": dict(sorted(calls.items()))}}}
    return [*flags, *_flags(document, compiler, cache_dir, config.plugin)]
