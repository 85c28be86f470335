"""One module's code-size labels: for a pipeline, the IR instruction count
after ``opt -passes=<pipeline>`` and the object's ``.text`` bytes after
clang's back end (its IR passes off), as the driver's build step measures.

Release builds of LLVM have no ``-stats``, so instructions are counted in
the textual IR: inside a function body, every line that is not a label,
a comment or blank holds one instruction.
"""
from __future__ import annotations

import os
import subprocess

from mirecc.tasks.code_size.build import CandidateError, opt_beside, text_bytes


def count_ir_instructions(text: str) -> int:
    """Instructions in the function bodies of textual LLVM IR."""
    count, inside = 0, False
    for line in text.splitlines():
        if not inside:
            inside = line.startswith("define ") and line.rstrip().endswith("{")
            continue
        if line.startswith("}"):
            inside = False
            continue
        code = line.split(";", 1)[0].strip()
        if code and not code.endswith(":"):     # "3:" / "for.body:" are block labels
            count += 1
    return count


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CandidateError(f"{cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        first = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
        raise CandidateError(f"{os.path.basename(cmd[0])}: {first}")
    return proc


def measure(bitcode: str, compiler: str, pipeline: str, codegen_flags: list[str],
            workdir: str) -> dict:
    """``{"ir_instructions", "text_bytes"}`` of the module at ``bitcode``
    (front-end bitcode, passes not yet run) through ``pipeline``;
    ``codegen_flags``: the compile's level and target flags (``-Oz``, ...)."""
    optimised = os.path.join(workdir, "labels.bc")
    obj = os.path.join(workdir, "labels.o")
    _run([opt_beside(compiler), f"-passes={pipeline}", bitcode, "-o", optimised])
    text = _run([opt_beside(compiler), "-S", optimised, "-o", "-"]).stdout.decode(
        "utf-8", "replace")
    _run([compiler, *codegen_flags, "-c", "-x", "ir", optimised, "-Xclang",
          "-disable-llvm-passes", "-o", obj])
    return {"ir_instructions": count_ir_instructions(text), "text_bytes": text_bytes(obj)}
