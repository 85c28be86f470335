"""Statistics of a call site, its caller and its callee, for the inlining
policy for size, from the module's IR as clang emits it (the per-TU
context's text; the call sites numbered as the pass plugin numbers them,
:func:`mirecc.ir.text.call_sites`).

In the spirit of MLGO's inliner features (LLVM's
``InlineModelFeatureMaps.h``: the callee's and caller's blocks and users,
the site's constant arguments), computed from the text alone: no pass runs.

Standard library only: the driver may call it on a compile.
"""
from __future__ import annotations

import math
import re

from mirecc.ir.text import NAME, direct_call, functions

#: the features, in the order of a row
NAMES = (
    "callee_instructions", "callee_blocks", "callee_calls", "callee_sites",
    "callee_internal", "callee_single_site", "callee_inlinehint", "callee_noinline",
    "callee_alwaysinline", "callee_args", "callee_returns_void", "callee_loads_stores",
    "callee_branches", "caller_instructions", "caller_blocks", "caller_sites",
    "site_args", "site_constant_args", "site_result_used", "site_position",
    "site_in_loop_block",
)

_DEFINE = re.compile(r"^define\s+(.*?)@(" + NAME + r")\((.*)\)\s*(.*)$")
_GROUP = re.compile(r"^attributes #(\d+) = \{(.*)\}")
_LABEL = re.compile(r"^([-\w.$]+):")
_BRANCH_TO = re.compile(r"label %([-\w.$]+)")


def _split_args(text: str) -> list[str]:
    """The top-level comma-separated arguments of a call, up to its ")"."""
    depth, start, out = 0, 0, []
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                if text[start:i].strip():
                    out.append(text[start:i].strip())
                return out
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return out


def _is_constant(arg: str) -> bool:
    value = arg.split()[-1] if arg.split() else ""
    return bool(re.fullmatch(r"-?\d+|true|false|null|undef|poison|zeroinitializer|"
                             r"@[-\w.$\"]+|0x[0-9A-Fa-f]+|-?\d+\.\d+(e[-+]?\d+)?", value))


def site_features(ir_text: str) -> dict[str, list[float]]:
    """Site id (``<caller>:call<k>``) -> its feature row (:data:`NAMES`), for
    each site whose callee the module defines."""
    groups = {}
    for line in ir_text.splitlines():
        m = _GROUP.match(line)
        if m:
            groups[m.group(1)] = m.group(2)
    info, bodies = {}, {}
    for name, header, body in functions(ir_text):
        m = _DEFINE.match(header)
        prefix, params, tail = (m.group(1), m.group(3), m.group(4)) if m else ("", "", "")
        attrs = " ".join(groups.get(g, "") for g in re.findall(r"#(\d+)", tail))
        instructions = [ln for ln in body if ln.startswith("  ") and ln.strip()
                        and not ln.strip().startswith(";")]
        labels = [_LABEL.match(ln).group(1) for ln in body if _LABEL.match(ln)]
        info[name] = {
            "instructions": len(instructions),
            "blocks": len(labels) + 1,
            "internal": float(any(w in prefix.split() for w in ("internal", "private"))),
            "inlinehint": float("inlinehint" in attrs.split()),
            "noinline": float("noinline" in attrs.split()),
            "alwaysinline": float("alwaysinline" in attrs.split()),
            "args": len(_split_args(params + ")")),
            "void": float(prefix.split()[-1:] == ["void"]),
            "memory": sum(1 for ln in instructions if re.search(r"\b(load|store)\b", ln)),
            "branches": sum(1 for ln in instructions if ln.strip().startswith(("br ", "switch "))),
        }
        bodies[name] = body
    # each function's direct calls (as mirecc.ir.text.call_sites counts them)
    sites: dict[str, list[tuple[str, str, str, bool]]] = {}
    for name, body in bodies.items():
        out = []
        # blocks reached again by a branch from a later block: loop blocks
        order, label = {}, "entry"
        for ln in body:
            lm = _LABEL.match(ln)
            if lm:
                label = lm.group(1)
                order[label] = len(order) + 1
        order.setdefault("entry", 0)
        back_targets, label = set(), "entry"
        for ln in body:
            lm = _LABEL.match(ln)
            if lm:
                label = lm.group(1)
                continue
            for target in _BRANCH_TO.findall(ln):
                if order.get(target, 1 << 30) <= order.get(label, 0):
                    back_targets.add(target)
        label = "entry"
        for ln in body:
            lm = _LABEL.match(ln)
            if lm:
                label = lm.group(1)
                continue
            call = direct_call(ln)
            if call:
                out.append((*call, ln, label in back_targets))
        sites[name] = out
    uses: dict[str, int] = {}
    for calls in sites.values():
        for callee, *_ in calls:
            uses[callee] = uses.get(callee, 0) + 1
    rows = {}
    for caller, calls in sites.items():
        c = info[caller]
        for k, (callee, args, line, in_loop) in enumerate(calls):
            if callee not in info:
                continue
            g = info[callee]
            arg_list = _split_args(args)
            rows[f"{caller}:call{k}"] = [
                math.log1p(g["instructions"]), math.log1p(g["blocks"]),
                math.log1p(len(sites.get(callee, ()))), math.log1p(uses.get(callee, 0)),
                g["internal"], float(g["internal"] and uses.get(callee, 0) == 1),
                g["inlinehint"], g["noinline"], g["alwaysinline"], float(g["args"]),
                g["void"], math.log1p(g["memory"]), math.log1p(g["branches"]),
                math.log1p(c["instructions"]), math.log1p(c["blocks"]),
                math.log1p(len(calls)), float(len(arg_list)),
                float(sum(_is_constant(a) for a in arg_list)),
                float(bool(re.match(r"\s*%[-\w.$]+\s*=", line))),
                k / max(1, len(calls)), float(in_loop),
            ]
    return rows
