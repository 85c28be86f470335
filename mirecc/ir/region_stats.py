"""Static features of a parallel region, from the IR the plugin sees.

A region's code is its outlined function and every function it reaches
through direct calls that the module defines (the runtime's ``__kmpc_*``
and other declarations are not code of the region, but calls of them are
counted). The counts are taken in the IR as clang emits it before any
optimisation (``-disable-llvm-passes``), the same IR the sites and the
plugin's call ids come from, so the driver and the dataset compute the same
row from the same compile.

:data:`NAMES` is the row, in order; a head's ``spec.yaml`` repeats it, so a
head trained on other statistics is refused rather than misread.
"""
from __future__ import annotations

import math
import re

from mirecc.ir.regions import Site, function_bodies

NAMES = [
    "log_instructions",      # log2(1 + instructions of the region's code)
    "share_load", "share_store", "share_float", "share_int", "share_call", "share_branch",
    "loops",                 # loop headers (targets of back edges) in the region's code
    "worksharing_loops",     # static worksharing loops the plugin may reschedule
    "explicit_loops",        # worksharing loops with a schedule clause
    "reductions",            # __kmpc_reduce calls
    "synchronisation",       # critical sections, atomics, barriers
    "nested",                # the region runs inside another region
    "contains_regions",      # the region forks regions of its own
    "threads_fixed",         # num_threads clause or omp_set_num_threads
    "log_max_constant",      # log2(1 + the largest integer constant compared: a bound)
]

_OPCODE = re.compile(r"^\s*(?:%[-\w.$]+ = )?(\w+)")
_CALLEE = re.compile(r"\bcall\b[^@]*@(\"[^\"]+\"|[-\w.$]+)\(")
_LABEL = re.compile(r"^([-\w.$]+|\"[^\"]+\"):")
_BRANCH_TARGET = re.compile(r"label %([-\w.$]+|\"[^\"]+\")")
_ICMP_CONST = re.compile(r"\bicmp \w+ i\d+ [^,]+, (-?\d+)\b")
_FLOAT = {"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fcmp", "fptosi", "sitofp",
          "fptoui", "uitofp", "fpext", "fptrunc"}
_INT = {"add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr", "ashr",
        "and", "or", "xor", "icmp"}
_SYNC = ("__kmpc_critical", "__kmpc_barrier", "__kmpc_atomic", "__kmpc_single",
         "__kmpc_master")


def _callees(body: list[str]) -> list[str]:
    return [m.group(1).strip('"') for line in body for m in _CALLEE.finditer(line)]


def region_code(bodies: dict[str, list[str]], outlined: str) -> list[str]:
    """The functions of a region: ``outlined`` and what it reaches through
    direct calls of defined functions, breadth first."""
    seen, queue = [], [outlined]
    while queue:
        fn = queue.pop(0)
        if fn in seen or fn not in bodies:
            continue
        seen.append(fn)
        queue.extend(_callees(bodies[fn]))
    return seen


def region_statistics(ir_text: str, sites: list[Site]) -> dict[str, list[float]]:
    """Region site id -> its row of :data:`NAMES`, for every parallel site
    whose outlined function the module defines."""
    bodies = function_bodies(ir_text)
    regions = [s for s in sites if s.kind == "parallel"]
    rows = {}
    for region in regions:
        code = region_code(bodies, region.outlined or "")
        if not code:
            continue
        counts = {"load": 0, "store": 0, "float": 0, "int": 0, "call": 0, "branch": 0}
        instructions = loops = reductions = sync = 0
        max_constant = 0
        for fn in code:
            # release clang discards block names: a loop is a branch back to
            # a block defined above it (clang lays blocks out in source order)
            defined, headers = set(), set()
            for line in bodies[fn]:
                label = _LABEL.match(line)
                if label:
                    defined.add(label.group(1))
                    continue
                if " br " in line or line.lstrip().startswith("br "):
                    headers.update(t for t in _BRANCH_TARGET.findall(line) if t in defined)
                m = _OPCODE.match(line)
                if not m or not line.startswith((" ", "\t")):
                    continue
                op = m.group(1)
                instructions += 1
                if op in ("load", "store"):
                    counts[op] += 1
                elif op in _FLOAT:
                    counts["float"] += 1
                elif op in _INT:
                    counts["int"] += 1
                elif op in ("call", "invoke"):
                    counts["call"] += 1
                    callee = (_callees([line]) or [""])[0]
                    reductions += callee.startswith("__kmpc_reduce")
                    sync += callee.startswith(_SYNC)
                elif op in ("br", "switch"):
                    counts["branch"] += 1
                elif op in ("atomicrmw", "cmpxchg"):
                    sync += 1
                c = _ICMP_CONST.search(line)
                if c:
                    max_constant = max(max_constant, abs(int(c.group(1))))
            loops += len(headers)
        loops_here = [s for s in sites if s.kind == "loop" and s.function in code]
        share = {k: v / max(instructions, 1) for k, v in counts.items()}
        rows[region.id] = [
            math.log2(1 + instructions),
            share["load"], share["store"], share["float"], share["int"], share["call"],
            share["branch"],
            float(loops),
            float(sum(not s.explicit for s in loops_here)),
            float(sum(s.explicit for s in loops_here)),
            float(reductions), float(sync),
            float(region.region is not None),
            float(any(s.kind == "parallel" and s.function in code for s in sites)),
            float(region.explicit),
            math.log2(1 + max_constant),
        ]
    return rows


def region_loops(sites: list[Site], region_id: str) -> list[Site]:
    """The worksharing loops that run in region ``region_id``."""
    return [s for s in sites if s.kind == "loop" and s.region == region_id]
