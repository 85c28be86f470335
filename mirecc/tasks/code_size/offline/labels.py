"""One module's code-size labels: for a pipeline, the IR instruction count
after ``opt -passes=<pipeline>`` and the object's ``.text`` bytes after
clang's back end (its IR passes off), as the driver's build step measures.
The user's own level (``OWN``) is clang's: ``clang -Oz`` on the front-end
bitcode, then the same back end.

Release builds of LLVM have no ``-stats``, so instructions are counted in
the textual IR: inside a function body, every line that is not a label,
a comment or blank holds one instruction.
"""
from __future__ import annotations

import os
import time

from mirecc.tasks.code_size.build import (STEP_TIMEOUT_S, CandidateError, opt_beside,
                                          parse_candidate, run_step, text_bytes)

OWN = "-Oz"     # the label name of clang's own -Oz


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
            workdir: str, timeout: float = STEP_TIMEOUT_S) -> dict:
    """``{"ir_instructions", "text_bytes", "seconds"}`` of the module at ``bitcode``
    (front-end bitcode, passes not yet run) through ``pipeline`` (a
    candidate: an opt ``-passes=`` text, or ``OWN``: clang's own level, and
    its back-end options); ``codegen_flags``: the compile's level and target
    flags (``-Oz``, ``-fPIC``, ...)."""
    try:
        passes, opt_flags, backend = parse_candidate(pipeline)
    except ValueError as exc:
        raise CandidateError(str(exc)) from None
    optimised = os.path.join(workdir, "labels.ll")
    obj = os.path.join(workdir, "labels.o")
    started = time.monotonic()
    if passes == OWN:
        run_step([compiler, *codegen_flags, "-S", "-emit-llvm", "-x", "ir", bitcode,
                  "-o", optimised], pipeline, timeout)
    else:
        run_step([opt_beside(compiler), f"-passes={passes}", *opt_flags, "-S", bitcode,
                  "-o", optimised], pipeline, timeout)
    counting = time.monotonic()
    with open(optimised, encoding="utf-8", errors="replace") as fh:
        instructions = count_ir_instructions(fh.read())
    counting = time.monotonic() - counting
    run_step([compiler, *codegen_flags, *backend, "-c", "-x", "ir", optimised, "-Xclang",
              "-disable-llvm-passes", "-o", obj], pipeline, timeout)
    # seconds: opt and the back end (counting excluded), the candidate's
    # compile-time price
    return {"ir_instructions": instructions, "text_bytes": text_bytes(obj),
            "seconds": round(time.monotonic() - started - counting, 4)}


# the flags of a module's compile that change its code generation
_CODEGEN_PREFIXES = ("-fPIC", "-fpic", "-fPIE", "-fpie", "-fno-PIC", "-fno-pic", "-fno-PIE",
                     "-fno-pie", "-m", "-ffunction-sections", "-fdata-sections",
                     "-fomit-frame-pointer", "-fno-omit-frame-pointer")


def codegen_flags(flags: list[str], level: str = OWN) -> list[str]:
    """``level`` and the code-generation flags among a module's recorded
    compile flags (``-fPIC``, ``-march=...``)."""
    return [level] + [f for f in flags if f.startswith(_CODEGEN_PREFIXES) and f != "-mllvm"]
