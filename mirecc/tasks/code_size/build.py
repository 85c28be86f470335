"""One candidate of the code-size task: the TU's front-end bitcode through
``opt -passes=<pipeline>``, then clang's back end on the result (its IR
passes off, so only the pipeline optimises), and the object's size.

A candidate is written as one text: the pipeline, then the named back-end
options it adds, each after `` @`` (``default<Oz> @machine-outliner``).
Labels, the winner cache and the correctness check key candidates by that
text; the spec lists the options under ``codegen:``.

``.text`` bytes are read from the ELF section headers (every section that
holds executable code: ``.text``, ``.text.<name>`` with
``-ffunction-sections``, ...), with the standard library only.
"""
from __future__ import annotations

import os
import struct
import subprocess

SHT_PROGBITS = 1
SHF_EXECINSTR = 0x4
# a candidate step that runs longer is given up (the user's object stands)
STEP_TIMEOUT_S = 600
# back-end options a candidate may add, by name: clang's code generator
# options that shrink code and that -Oz leaves off.  The machine outliner
# (off by default on x86-64) replaces repeated instruction sequences by calls;
# functions that use the red zone are not outlined from.
CODEGEN_OPTIONS = {"machine-outliner": ("-mllvm", "-enable-machine-outliner")}
CODEGEN_MARK = " @"


class CandidateError(Exception):
    """A candidate could not be built or measured (the message says why)."""


def candidate_text(passes: str, codegen=()) -> str:
    """The text of a candidate: its pipeline and its back-end options' names."""
    return passes + "".join(CODEGEN_MARK + name for name in codegen)


def parse_candidate(candidate: str) -> tuple[str, list[str]]:
    """(pipeline, back-end flags) of a candidate text; ValueError naming an
    unknown option."""
    passes, *names = candidate.split(CODEGEN_MARK)
    flags: list[str] = []
    for name in names:
        if name not in CODEGEN_OPTIONS:
            raise ValueError(f"unknown back-end option {name!r} in candidate "
                             f"(known: {', '.join(CODEGEN_OPTIONS)})")
        flags += CODEGEN_OPTIONS[name]
    return passes, flags


def opt_beside(compiler: str) -> str:
    """The ``opt`` of the clang ``compiler`` (same LLVM): beside its real
    path, as Debian installs ``/usr/lib/llvm-<N>/bin``; a bare name
    (``clang-19``) is looked up on PATH first."""
    import shutil

    if os.sep not in compiler:
        compiler = shutil.which(compiler) or compiler
    path = os.path.join(os.path.dirname(os.path.realpath(compiler)), "opt")
    if not os.access(path, os.X_OK):
        raise CandidateError(f"no opt beside {compiler} ({path})")
    return path


def text_bytes(path: str) -> int:
    """Bytes of executable code in the ELF object at ``path``."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise CandidateError(f"{path}: not an ELF object")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            (shoff,) = struct.unpack_from(order + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
        else:
            (shoff,) = struct.unpack_from(order + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
        total = 0
        for i in range(shnum):
            base = shoff + i * shentsize
            if wide:
                sh_type, sh_flags = struct.unpack_from(order + "IQ", data, base + 4)
                (size,) = struct.unpack_from(order + "Q", data, base + 0x20)
            else:
                sh_type, sh_flags = struct.unpack_from(order + "II", data, base + 4)
                (size,) = struct.unpack_from(order + "I", data, base + 0x14)
            if sh_type == SHT_PROGBITS and sh_flags & SHF_EXECINSTR:
                total += size
    except struct.error:
        raise CandidateError(f"{path}: truncated ELF section table") from None
    return total


def run_step(cmd: list[str], what: str, timeout: float = STEP_TIMEOUT_S) -> bytes:
    """Run one tool of a candidate's build; its stdout.  CandidateError
    (naming the tool, ``what`` and its first line of stderr) when it cannot
    run, fails or runs over ``timeout`` seconds."""
    tool = os.path.basename(cmd[0])
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
    except OSError as exc:
        raise CandidateError(f"cannot run {cmd[0]}: {exc}") from None
    except subprocess.TimeoutExpired:
        raise CandidateError(f"{tool} ran over {timeout:g} s on {what}") from None
    if proc.returncode != 0:
        first = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
        raise CandidateError(f"{tool} failed on {what}: {first}")
    return proc.stdout


def build_candidate(split, candidate: str, extra: list[str], workdir: str, name: str) -> str:
    """The object of ``split``'s TU through ``candidate`` (an opt
    ``-passes=`` string and its back-end options), into ``workdir``; its
    path.  ``extra``: the decision flags of the other tasks, as in the
    user's object."""
    try:
        pipeline, codegen = parse_candidate(candidate)
    except ValueError as exc:
        raise CandidateError(str(exc)) from None
    optimised = os.path.join(workdir, f"{name}.bc")
    obj = os.path.join(workdir, f"{name}.o")
    run_step([opt_beside(split.compiler), f"-passes={pipeline}", split.bitcode_path,
              "-o", optimised], candidate)
    run_step(split.backend_command([*extra, *codegen, "-Xclang", "-disable-llvm-passes"],
                                   output=obj, bitcode=optimised), candidate)
    return obj
