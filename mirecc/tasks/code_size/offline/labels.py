"""One module's code-size labels: for a pipeline, the IR instruction count
after ``opt -passes=<pipeline>`` and the object's ``.text`` bytes after
clang's back end (its IR passes off), as the driver's build step measures.

Release builds of LLVM have no ``-stats``, so instructions are counted in
the textual IR: inside a function body, every line that is not a label,
a comment or blank holds one instruction.
"""
from __future__ import annotations

import os

from mirecc.tasks.code_size.build import opt_beside, run_step, text_bytes


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


def measure(bitcode: str, compiler: str, pipeline: str, codegen_flags: list[str],
            workdir: str) -> dict:
    """``{"ir_instructions", "text_bytes"}`` of the module at ``bitcode``
    (front-end bitcode, passes not yet run) through ``pipeline``;
    ``codegen_flags``: the compile's level and target flags (``-Oz``, ...)."""
    optimised = os.path.join(workdir, "labels.bc")
    obj = os.path.join(workdir, "labels.o")
    opt = opt_beside(compiler)
    run_step([opt, f"-passes={pipeline}", bitcode, "-o", optimised], pipeline)
    text = run_step([opt, "-S", optimised, "-o", "-"], pipeline).decode("utf-8", "replace")
    run_step([compiler, *codegen_flags, "-c", "-x", "ir", optimised, "-Xclang",
              "-disable-llvm-passes", "-o", obj], pipeline)
    return {"ir_instructions": count_ir_instructions(text), "text_bytes": text_bytes(obj)}
