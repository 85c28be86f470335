"""LLVM's own view of a module's call sites, read through the pass plugin:
for each site whose callee the module defines, the inline cost LLVM's
inliner computes at -Oz, its threshold and its cost features
(passes/plugin/FORMAT.md, "Call sites").

One ``opt`` run: ``mirecc-call-tag`` numbers the sites while the IR is as
clang emitted it (the ids of :func:`mirecc.ir.text.call_sites`),
:data:`SIMPLIFY` runs, ``mirecc-call-cost`` prints one JSON line per site.
The per-TU context reads it once for every head
(:meth:`mirecc.taskapi.context.TUContext.call_costs`); the offline
commands read a corpus module's the same way.
"""
from __future__ import annotations

import json
import os
import subprocess

#: the simplification before LLVM's costs are read: what the inliner's
#: callees have been through at least (SROA first: clang's allocas)
SIMPLIFY = "function(sroa,early-cse,simplifycfg,instcombine)"


def call_costs(bitcode: str | os.PathLike, opt: str, plugin: str | os.PathLike,
               timeout: float = 60) -> dict[str, dict]:
    """Site id -> the plugin's record of it (``decision``: ``always``,
    ``never`` or ``cost``; ``cost``, ``threshold``, ``features``) for each
    site of the module ``bitcode`` whose callee it defines; a site
    simplified away has none.  OSError, subprocess.SubprocessError or
    ValueError (a line that is not the plugin's JSON) when opt fails."""
    out = subprocess.run(
        [opt, "-load-pass-plugin", os.fspath(plugin),
         f"-passes=mirecc-call-tag,{SIMPLIFY},mirecc-call-cost", "-disable-output",
         os.fspath(bitcode)], capture_output=True, text=True, check=True, timeout=timeout,
        stdin=subprocess.DEVNULL)
    records = {}
    for line in out.stdout.splitlines():
        record = json.loads(line)
        if not isinstance(record, dict) or not isinstance(record.get("site"), str):
            raise ValueError(f"not a call-cost record: {line[:80]!r}")
        records[record["site"]] = record
    return records
