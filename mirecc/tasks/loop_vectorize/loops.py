"""The loops of a translation unit as the vectorize head and ``--explain`` see them.

The loop table itself (ids ``<function>:<header block index>``, depth,
innermost) is the TU context's (:attr:`mirecc.taskapi.context.TUContext.loops`).

- :func:`match_loops`: the same loops in two IRs of one source (the build's
  clang and the encoder's clang-14), matched function by function in header
  order, only where both have the same number of loops;
- :func:`loop_lines`: the source line of each loop (its header's first
  located instruction), from the IR emitted again with line tables;
- :func:`llvm_default_factors`: what the loop vectorizer chooses on its own,
  per source line, read from its ``-Rpass`` remarks.

The last two cost one extra front-end run and one extra compile: only
``--explain`` asks for them.
"""
from __future__ import annotations

import re
import subprocess


def match_loops(build: list, encoder_ids: list[str]) -> dict[str, str]:
    """build loop id -> encoder loop id.  A function's loops are matched in
    header order when both IRs have the same number of loops in it; loops of
    a function where the counts differ are left out (no decision for them)."""
    def by_function(ids):
        groups: dict[str, list[tuple[int, str]]] = {}
        for loop_id in ids:
            fn, _, header = loop_id.rpartition(":")
            groups.setdefault(fn, []).append((int(header), loop_id))
        return {fn: [i for _, i in sorted(v)] for fn, v in groups.items()}

    ours, theirs = by_function([lp.id for lp in build]), by_function(encoder_ids)
    matched = {}
    for fn, ids in ours.items():
        other = theirs.get(fn, [])
        if len(other) == len(ids):
            matched.update(zip(ids, other))
    return matched


# ------------------------------------------------------------- --explain

_DEFINE = re.compile(r'^define\b.*?@("(?:[^"\\]|\\.)*"|[-\w$.]+)\(')
_DILOC = re.compile(r"^!(\d+) = !DILocation\(line: (\d+)")
_DBG = re.compile(r"!dbg !(\d+)")


def loop_lines(ir_text: str, loops: list) -> dict[str, int]:
    """loop id -> source line, from IR text with line tables: the line of
    the first instruction of the loop's header block that has a location.
    Blocks are counted in layout order, as the graph builder counts them."""
    lines = {m.group(1): int(m.group(2)) for m in map(_DILOC.match, ir_text.splitlines()) if m}
    wanted: dict[str, dict[int, str]] = {}
    for lp in loops:
        wanted.setdefault(lp.function, {})[lp.header] = lp.id
    out: dict[str, int] = {}
    fn, block, in_body = None, -1, False
    for line in ir_text.splitlines():
        m = _DEFINE.match(line)
        if m:
            fn, block, in_body = m.group(1).strip('"'), 0, True
            continue
        if not in_body:
            continue
        if line.startswith("}"):
            in_body = False
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(";"):
            continue
        if not line.startswith(" "):
            block += 1          # a label starts the next block (the entry has none)
            continue
        loop_id = wanted.get(fn, {}).get(block)
        if loop_id and loop_id not in out:
            dbg = _DBG.search(line)
            if dbg and dbg.group(1) in lines:
                out[loop_id] = lines[dbg.group(1)]
    return out


def emit_ir_text(compiler: str, flags: list[str], source: str) -> str:
    """``source``'s IR before any LLVM pass, with line tables (same blocks
    as without them)."""
    cmd = [compiler, *flags, "-gline-tables-only", "-S", "-emit-llvm", "-Xclang",
           "-disable-llvm-passes", "-w", "-o", "-", source]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{source}: cannot emit IR with line tables: "
                           + (proc.stderr.strip().splitlines() or ["?"])[0])
    return proc.stdout


_VECTORIZED = re.compile(r":(\d+):(\d+): remark: vectorized loop \(vectorization width: "
                         r"(?:vscale x )?(\d+), interleaved count: (\d+)\)")
_INTERLEAVED = re.compile(r":(\d+):(\d+): remark: interleaved loop \(interleaved count: "
                          r"(\d+)\)")
_MISSED = re.compile(r":(\d+):(\d+): remark: loop not vectorized")


#: the vectorizer's remarks, as -Rpass=loop-vectorize / -Rpass-missed print them
VECTORIZER_REMARKS = ["-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize"]


def vectorizer_factors(stderr: str, column: bool = False) -> dict:
    """source line (with ``column``: (line, column)) -> the loop vectorizer's
    {vectorize.width, interleave.count} (1/1: not vectorized), read from its
    remarks; places with several loops are left out (which remark is whose
    is unknown)."""
    found: dict = {}
    for text in stderr.splitlines():
        if (m := _VECTORIZED.search(text)):
            value = {"vectorize.width": int(m.group(3)), "interleave.count": int(m.group(4))}
        elif (m := _INTERLEAVED.search(text)):
            value = {"vectorize.width": 1, "interleave.count": int(m.group(3))}
        elif (m := _MISSED.search(text)):
            value = {"vectorize.width": 1, "interleave.count": 1}
        else:
            continue
        key = (int(m.group(1)), int(m.group(2))) if column else int(m.group(1))
        found.setdefault(key, []).append(value)
    return {key: v[0] for key, v in found.items() if len(v) == 1}


def llvm_default_factors(compiler: str, flags: list[str], source: str) -> dict[int, dict]:
    """source line -> the loop vectorizer's own factors (:func:`vectorizer_factors`),
    from one compile with remarks."""
    cmd = [compiler, *flags, "-c", "-o", "/dev/null", *VECTORIZER_REMARKS, source]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return vectorizer_factors(proc.stderr)


# the plugin's remarks (passes/plugin): a decision set on a loop, or left
_PLUGIN_SET = re.compile(r":(\d+):(\d+): remark: loop (.+?): (?:vectorize\.width|"
                         r"interleave\.count)=\S+(?: interleave\.count=\S+)? "
                         r"\[-Rpass=mirecc-loophints\]")
_PLUGIN_LEFT = re.compile(r"remark: (?:loop (.+?): (?:vectorize\.width|interleave\.count)="
                          r"\S+(?: interleave\.count=\S+)? not applied: (.*?)|loop (.+?): "
                          r"(not changed: .*?|no loop has that header block.*?)) "
                          r"\[-Rpass-missed=mirecc-loophints\]")
#: both passes' remarks (clang keeps the last -Rpass= only: one pattern each)
BOTH_REMARKS = ["-Rpass=loop-vectorize|mirecc-loophints",
                "-Rpass-missed=loop-vectorize|mirecc-loophints"]


def plugin_report(stderr: str) -> tuple[dict, dict]:
    """From a compile with the plugin's and the vectorizer's remarks
    (:data:`BOTH_REMARKS`): loop id -> the places ((line, column)) where the
    plugin set its factors, and loop id -> why the plugin left a decision."""
    placed: dict[str, list] = {}
    left: dict[str, str] = {}
    for text in stderr.splitlines():
        if (m := _PLUGIN_SET.search(text)):
            placed.setdefault(m.group(3), []).append((int(m.group(1)), int(m.group(2))))
        elif (m := _PLUGIN_LEFT.search(text)):
            left[m.group(1) or m.group(3)] = m.group(2) or m.group(4)
    return placed, left
