"""Statistics of a call site, its caller and its callee, for the inlining
policy for size, from the module's IR as clang emits it (the per-TU
context's text; the call sites numbered as the pass plugin numbers them,
:func:`mirecc.ir.text.call_sites`).

In the spirit of MLGO's inliner features (LLVM's
``InlineModelFeatureMaps.h``: the callee's and caller's blocks and users,
the site's constant arguments), computed from the text alone: no pass runs.

And LLVM's own view of each site (:func:`llvm_costs`): the inline cost,
threshold and cost features LLVM's inliner computes at -Oz, printed by the
pass plugin's ``mirecc-call-cost`` after a light simplification of the
module (one ``opt`` run).

Standard library only: the driver may call it on a compile.
"""
from __future__ import annotations

import math
import os
import re

from mirecc.ir.text import NAME, call_sites, direct_call, functions
from mirecc.ir.calls import call_costs

#: the features, in the order of a row
NAMES = (
    "callee_instructions", "callee_blocks", "callee_calls", "callee_sites",
    "callee_internal", "callee_single_site", "callee_inlinehint", "callee_noinline",
    "callee_alwaysinline", "callee_args", "callee_returns_void", "callee_loads_stores",
    "callee_branches", "caller_instructions", "caller_blocks", "caller_sites",
    "site_args", "site_constant_args", "site_result_used", "site_position",
    "site_in_loop_block", "caller_sites_in", "caller_internal", "caller_inlinehint",
    "caller_alwaysinline",
)

#: LLVM's view of a site (:func:`llvm_costs`): known, always/never inlined,
#: cost, threshold, their difference, then InlineModelFeatureMaps.h's cost
#: features in LLVM's order (the last, threshold, is LLVM's too)
COST_FEATURES = (
    "sroa_savings", "sroa_losses", "load_elimination", "call_penalty",
    "call_argument_setup", "load_relative_intrinsic", "lowered_call_arg_setup",
    "indirect_call_penalty", "jump_table_penalty", "case_cluster_penalty",
    "switch_penalty", "unsimplified_common_instructions", "num_loops", "dead_blocks",
    "simplified_instructions", "constant_args", "constant_offset_ptr_args",
    "callsite_cost", "cold_cc_penalty", "last_call_to_static_bonus", "is_multiple_blocks",
    "nested_inlines", "nested_inline_cost_estimate", "features_threshold")
COST_NAMES = ("llvm_known", "llvm_always", "llvm_never", "llvm_cost", "llvm_threshold",
              "llvm_margin", *COST_FEATURES)
#: what LLVM's costs say of the site's neighbours (:func:`neighbour_rows`):
#: of the sites that call the caller, and of those that call the callee, how
#: many LLVM would inline (a site inlined into a caller that is itself
#: inlined N times is copied N times)
NEIGHBOUR_NAMES = ("caller_in_inlined", "caller_in_kept", "callee_in_inlined",
                   "callee_in_kept")
#: a statistics row: the IR's, LLVM's costs, the neighbours'
ALL_NAMES = NAMES + COST_NAMES + NEIGHBOUR_NAMES

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
                math.log1p(uses.get(caller, 0)), c["internal"], c["inlinehint"],
                c["alwaysinline"],
            ]
    return rows


def _signed_log(v: float) -> float:
    return math.copysign(math.log1p(abs(v)), v)


def llvm_costs(bitcode: str | os.PathLike, opt: str, plugin: str | os.PathLike,
               timeout: float = 60) -> dict[str, list[float]]:
    """Site id -> its row of :data:`COST_NAMES` for each site of the module
    ``bitcode`` (as clang emits it) whose callee it defines
    (:func:`mirecc.ir.calls.call_costs`, rows by :func:`cost_rows`).  A
    site simplified away has no row (:func:`cost_row` gives its unknown
    row).  OSError, subprocess.SubprocessError or ValueError when opt fails."""
    return cost_rows(call_costs(bitcode, opt, plugin, timeout))


def cost_rows(records: dict[str, dict]) -> dict[str, list[float]]:
    """Site id -> its row of :data:`COST_NAMES`, from the plugin's records
    (:func:`mirecc.ir.calls.call_costs`)."""
    rows = {}
    for site, r in records.items():
        features = [_signed_log(v) for v in r.get("features", [])][:len(COST_FEATURES)]
        features += [0.0] * (len(COST_FEATURES) - len(features))
        cost, threshold = r.get("cost", 0), r.get("threshold", 0)
        rows[site] = [1.0, float(r.get("decision") == "always"),
                      float(r.get("decision") == "never"), _signed_log(cost),
                      _signed_log(threshold), _signed_log(threshold - cost), *features]
    return rows


def statistics(ir_text: str, costs: dict[str, list[float]]) -> dict[str, list[float]]:
    """Site id -> the whole statistics row (:data:`ALL_NAMES`) of each site
    whose callee the module defines: the IR's own (:func:`site_features`),
    LLVM's costs (``costs``: :func:`cost_rows`) and the neighbours'
    (:func:`neighbour_rows`)."""
    around = neighbour_rows(ir_text, costs)
    return {site: row + cost_row(costs, site) + around[site]
            for site, row in site_features(ir_text).items()}


def neighbour_rows(ir_text: str, costs: dict[str, list[float]]) -> dict[str, list[float]]:
    """Site id -> its row of :data:`NEIGHBOUR_NAMES`, for every site of the
    module (``costs``: :func:`llvm_costs`'s rows of its sites)."""
    sites = call_sites(ir_text)
    inlined: dict[str, int] = {}
    kept: dict[str, int] = {}
    for caller, callees in sites.items():
        for k, callee in enumerate(callees):
            row = costs.get(f"{caller}:call{k}")
            if row is None:
                continue
            # always inlined, or a cost under the threshold (LLVM inlines at
            # cost < threshold: margin > 0)
            would = row[1] or (not row[2] and row[5] > 0)
            target = inlined if would else kept
            target[callee] = target.get(callee, 0) + 1
    return {f"{caller}:call{k}": [math.log1p(inlined.get(caller, 0)),
                                  math.log1p(kept.get(caller, 0)),
                                  math.log1p(inlined.get(callee, 0)),
                                  math.log1p(kept.get(callee, 0))]
            for caller, callees in sites.items() for k, callee in enumerate(callees)}


def cost_row(costs: dict[str, list[float]], site: str) -> list[float]:
    """The site's row of :func:`llvm_costs`, or the row of a site LLVM's
    costs do not know (all zero: ``llvm_known`` 0)."""
    return costs.get(site) or [0.0] * len(COST_NAMES)
