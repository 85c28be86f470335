"""Candidate pass pipelines for the library search: the text of opt's
``-passes=`` as a tree, and the variations the search tries.

A pipeline text such as ``default<Oz>`` expands (``opt
-print-pipeline-passes``) to a nested list: ``name<params>(children),...``.
:func:`parse` reads it into :class:`Pass` trees and :func:`text` writes it
back; the search's variations of -Oz are built on that tree: -Oz without
every occurrence of one pass (``jump-threading``, the full unroll, the
inliner, ...), -Oz followed by cleanup passes, -Oz after or before another
level, size passes -Oz does not run (function merging, the IR outliner),
the attributor (interprocedural deduction that deletes dead code, arguments
and returns; not in any level of LLVM 14 or 19) and the inliner's threshold.
"""
from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass, field

from mirecc.tasks.code_size.build import candidate_text, parse_candidate


@dataclass
class Pass:
    name: str                       # with its <params>, e.g. "simplifycfg<keep-loops>"
    children: list["Pass"] = field(default_factory=list)
    nested: bool = False            # written with "(...)" even when empty

    @property
    def base(self) -> str:
        return self.name.split("<", 1)[0]


def parse(pipeline: str) -> list[Pass]:
    """The pass tree of a ``-passes=`` text; ValueError when brackets do
    not balance."""
    passes, pos = _parse_list(pipeline, 0)
    if pos != len(pipeline):
        raise ValueError(f"unbalanced ')' at {pos} in pipeline {pipeline[:60]!r}")
    return passes


def _parse_list(s: str, pos: int) -> tuple[list[Pass], int]:
    out: list[Pass] = []
    while pos < len(s) and s[pos] != ")":
        start, depth = pos, 0
        while pos < len(s) and (depth or s[pos] not in ",()"):
            depth += {"<": 1, ">": -1}.get(s[pos], 0)
            pos += 1
        item = Pass(s[start:pos])
        if pos < len(s) and s[pos] == "(":
            item.children, pos = _parse_list(s, pos + 1)
            if pos >= len(s):
                raise ValueError(f"unclosed '(' in pipeline {s[:60]!r}")
            item.nested, pos = True, pos + 1
        if item.name:
            out.append(item)
        if pos < len(s) and s[pos] == ",":
            pos += 1
    return out, pos


def text(passes: list[Pass]) -> str:
    return ",".join(p.name + (f"({text(p.children)})" if p.nested or p.children else "")
                    for p in passes)


def without(passes: list[Pass], base: str) -> list[Pass]:
    """``passes`` with every pass named ``base`` (any parameters) removed;
    adaptors left empty are dropped too."""
    out = []
    for p in passes:
        if p.base == base:
            continue
        if p.children:
            kids = without(p.children, base)
            if not kids:
                continue
            p = Pass(p.name, kids, True)
        out.append(p)
    return out


def bases(passes: list[Pass]) -> set[str]:
    """Every pass name in the tree (adaptors such as ``function`` included)."""
    found = set()
    for p in passes:
        found.add(p.base)
        found |= bases(p.children)
    return found


def expand(opt: str, pipeline: str, bitcode: str) -> str:
    """What ``opt`` runs for ``pipeline`` (``default<Oz>`` -> its passes),
    without the verifier and the bitcode writer opt adds."""
    out = subprocess.run([opt, f"-passes={pipeline}", "-print-pipeline-passes",
                          "-disable-output", bitcode], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    tree = [p for p in parse(out) if p.base not in ("verify", "BitcodeWriterPass",
                                                     "PrintModulePass")]
    return text(tree)


LEVELS = ("default<Oz>", "default<Os>", "default<O1>", "default<O2>")
# passes whose removal from -Oz can shrink code: they duplicate, inline,
# unroll, vectorise or hoist (sized by the printed -Oz pipeline of LLVM 14/19)
REMOVABLE = ("jump-threading", "inline", "loop-unroll-full", "loop-unroll", "loop-rotate",
             "licm", "simple-loop-unswitch", "loop-vectorize", "speculative-execution",
             "mldst-motion", "gvn", "loop-idiom", "indvars", "tailcallelim",
             "correlated-propagation", "loop-sink", "div-rem-pairs", "float2int",
             "loop-distribute", "loop-load-elim", "vector-combine", "memcpyopt",
             "elim-avail-extern", "called-value-propagation", "reassociate")
# module passes -Oz does not run that merge or outline code
SIZE_MODULE_PASSES = ("mergefunc", "iroutliner", "constmerge", "globaldce", "ipsccp",
                      "deadargelim", "globalopt", "function-attrs", "partial-inliner")
# interprocedural passes no level runs, tried after -Oz.  On LLVM 14 the
# CGSCC attributor's candidates changed most csmith outputs in size-check;
# the search tries it anyway (the check drops such candidates; size-search
# --exclude attributor-cgscc keeps them out of a library)
IPO_PASSES = ("attributor", "cgscc(attributor-cgscc)")
# the inliner's threshold for every caller (-Oz: 5 for minsize callers);
# in a sample of training modules 15 and up made code larger, -20 smaller
INLINE_THRESHOLDS = (-30, -20, -10, 0)
IPO_CLEANUP = "function(instcombine,simplifycfg,adce),globaldce,deadargelim"
CLEANUP_FUNCTION_PASSES = ("instcombine", "simplifycfg", "early-cse", "gvn", "dse", "adce",
                           "sccp", "bdce", "reassociate", "sroa", "instsimplify",
                           "aggressive-instcombine", "sink", "mldst-motion", "mergeicmps",
                           "loop-mssa(licm)", "loop(loop-deletion)", "loop-simplifycfg")


def seed_candidates(oz_expanded: str) -> dict[str, str]:
    """The systematic candidates (pipeline -> a name for people): the
    levels, two levels in a row, -Oz without one pass, -Oz with one size
    pass before or after."""
    tree = parse(oz_expanded)
    present = bases(tree)
    out = {level: level for level in LEVELS}
    out.update({f"{a},{b}": f"{a},{b}" for a in LEVELS for b in ("default<Oz>", "default<Os>")})
    out.update({text(without(tree, name)): f"Oz-without-{name}"
                for name in REMOVABLE if name in present})
    out.update({f"default<Oz>,{p}": f"default<Oz>,{p}" for p in SIZE_MODULE_PASSES})
    for p in ("mergefunc", "iroutliner"):
        out[f"{p},default<Oz>"] = f"{p},default<Oz>"
        out[f"default<Oz>,{p},default<Oz>"] = f"default<Oz>,{p},default<Oz>"
    for p in IPO_PASSES:
        for pipeline in (f"default<Oz>,{p}", f"default<Oz>,{p},default<Oz>",
                         f"{p},default<Oz>"):
            out[pipeline] = pipeline
    for sink in ("gvn-sink", "gvn-hoist"):
        pipeline = f"default<Oz>,function({sink},instcombine,simplifycfg)"
        out[pipeline] = pipeline
    for t in INLINE_THRESHOLDS:
        for pipeline in ("default<Oz>", "default<Oz>,cgscc(attributor-cgscc),default<Oz>"):
            candidate = candidate_text(pipeline, [f"inline-threshold={t}"])
            out[candidate] = candidate
    return out


def random_candidates(oz_expanded: str, count: int, seed: int) -> dict[str, str]:
    """``count`` random variations (pipeline -> a name for people): -Oz
    without 1-4 of the removable passes, then 0-3 cleanup function passes
    and 0-2 size module passes, sometimes another level before it."""
    rng = random.Random(seed)
    tree = parse(oz_expanded)
    removable = sorted(n for n in REMOVABLE if n in bases(tree))
    out: dict[str, str] = {}
    while len(out) < count:
        variant, dropped = tree, rng.sample(removable, rng.randint(1, 4))
        for name in dropped:
            variant = without(variant, name)
        parts, names = [text(variant)], ["Oz-without-" + "-".join(dropped)]
        if rng.random() < 0.25:
            parts.insert(0, rng.choice(LEVELS))
            names.insert(0, parts[0])
        cleanup = rng.sample(CLEANUP_FUNCTION_PASSES, rng.randint(0, 3))
        if cleanup:
            parts.append(f"function({','.join(cleanup)})")
            names.append(parts[-1])
        extra = rng.sample(SIZE_MODULE_PASSES, rng.randint(0, 2))
        parts += extra
        names += extra
        out.setdefault(",".join(parts), ",".join(names))
    return out


def random_ipo_candidates(oz_expanded: str, count: int, seed: int) -> dict[str, str]:
    """``count`` random variations (candidate -> a name for people): -Oz
    without 0-3 of the removable passes, then an interprocedural pass and
    -Oz or a cleanup after it, function merging or GVN sinking, some with
    another inliner threshold."""
    rng = random.Random(seed + 1)     # not random_candidates' draws
    tree = parse(oz_expanded)
    removable = sorted(n for n in REMOVABLE if n in bases(tree))
    out: dict[str, str] = {}
    while len(out) < count:
        variant, dropped = tree, rng.sample(removable, rng.randint(0, 3))
        for name in dropped:
            variant = without(variant, name)
        parts = [text(variant)]
        # the printed -Oz, not "default<Oz>": another text, so another name
        names = ["Oz-without-" + "-".join(dropped) if dropped else "Oz-expanded"]
        if rng.random() < 0.7:
            parts.append(rng.choice(IPO_PASSES))
            parts.append(rng.choice(("default<Oz>", IPO_CLEANUP)))
            names += parts[-2:]
        if rng.random() < 0.3:
            parts.append(rng.choice(("mergefunc", "function(gvn-sink,instcombine)")))
            names.append(parts[-1])
        options = ([f"inline-threshold={rng.choice(INLINE_THRESHOLDS)}"]
                   if rng.random() < 0.5 else [])
        out.setdefault(candidate_text(",".join(parts), options),
                       candidate_text(",".join(names), options))
    return out


def excluding(candidates: dict[str, str], passes) -> dict[str, str]:
    """``candidates`` (candidate -> name) without those that run any pass
    named in ``passes`` (adaptors' parameters ignored: ``attributor-cgscc``
    matches inside ``cgscc(...)``)."""
    unwanted = set(passes)
    return {c: n for c, n in candidates.items()
            if not unwanted & bases(parse(parse_candidate(c).passes))}
