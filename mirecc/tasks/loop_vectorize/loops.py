"""The loops of a translation unit as the vectorize head and ``--explain`` see them.

The loop table itself (ids ``<function>:<header block index>``, depth,
innermost) is the TU context's (:attr:`mirecc.context.TUContext.loops`).

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


_VECTORIZED = re.compile(r":(\d+):\d+: remark: vectorized loop \(vectorization width: "
                         r"(?:vscale x )?(\d+), interleaved count: (\d+)\)")
_INTERLEAVED = re.compile(r":(\d+):\d+: remark: interleaved loop \(interleaved count: (\d+)\)")
_MISSED = re.compile(r":(\d+):\d+: remark: loop not vectorized")


def llvm_default_factors(compiler: str, flags: list[str], source: str) -> dict[int, dict]:
    """source line -> the loop vectorizer's own {vectorize.width,
    interleave.count} (1/1: not vectorized), from one compile with remarks.
    Lines with several loops are left out (which remark is whose is unknown)."""
    cmd = [compiler, *flags, "-c", "-o", "/dev/null", "-Rpass=loop-vectorize",
           "-Rpass-missed=loop-vectorize", source]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found: dict[int, list[dict]] = {}
    for text in proc.stderr.splitlines():
        if (m := _VECTORIZED.search(text)):
            found.setdefault(int(m.group(1)), []).append(
                {"vectorize.width": int(m.group(2)), "interleave.count": int(m.group(3))})
        elif (m := _INTERLEAVED.search(text)):
            found.setdefault(int(m.group(1)), []).append(
                {"vectorize.width": 1, "interleave.count": int(m.group(2))})
        elif (m := _MISSED.search(text)):
            found.setdefault(int(m.group(1)), []).append(
                {"vectorize.width": 1, "interleave.count": 1})
    return {line: v[0] for line, v in found.items() if len(v) == 1}
