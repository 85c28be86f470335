"""One candidate of the code-size task: the TU's front-end bitcode through
``opt -passes=<pipeline>``, then clang's back end on the result (its IR
passes off, so only the pipeline optimises), and the object's size.

A candidate is written as one text: the pipeline, then the named options
it adds, each after `` @`` (``default<Oz> @machine-outliner``,
``default<Oz> @inline-threshold=-20``).  An option goes to opt or to the back
end (:data:`CANDIDATE_OPTIONS`).  Labels, the winner cache and the
correctness check key candidates by that text; the spec lists the options
under ``options:`` (``codegen:`` in older specs).

``.text`` bytes are read from the ELF section headers
(:mod:`mirecc.util.elf`), with the standard library only.
"""
from __future__ import annotations

import os
import struct

from mirecc.frontend.compiler import tool_beside as _tool_beside

from mirecc.util.elf import (SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_PROGBITS, ElfError,
                             elf_sections, sizes_of)

# a candidate step that runs longer is given up (the user's object stands)
STEP_TIMEOUT_S = 600
# options a candidate may add, by name: (the tool they go to, its flags).
# The machine outliner (clang's back end; off by default on x86-64) replaces
# repeated instruction sequences by calls; functions that use the red zone
# are not outlined from.
CANDIDATE_OPTIONS = {"machine-outliner": ("backend", ("-mllvm", "-enable-machine-outliner"))}
# options with an integer value, ``name=N``: opt's inliner threshold for every
# caller (-Oz's own is 5 for minsize functions; below 0 inlines less than -Oz)
VALUED_OPTIONS = {"inline-threshold": ("opt", "-inline-threshold={}")}
OPTION_MARK = " @"


#: the inlining policy's candidate (:mod:`.inline_policy`): the TU's bitcode
#: through the user's own level, the policy's call-site decisions marked by
#: the pass plugin first
POLICY = "inline-policy"

#: below this many .text bytes in the user's own object, no candidate is
#: built (why: :mod:`.verify`)
MIN_TEXT_BYTES = 1024


class CandidateError(Exception):
    """A candidate could not be built or measured (the message says why)."""


class Candidate(tuple):
    """(passes, opt_flags, backend_flags): opt's -passes= text (or OWN:
    clang's own level) and lists of flags.  (A plain tuple class: typing's
    NamedTuple and collections' namedtuple cost 4-5 ms to import, on the
    gate's path of every -Os/-Oz compile.)"""
    __slots__ = ()

    def __new__(cls, passes, opt_flags, backend_flags):
        return tuple.__new__(cls, (passes, opt_flags, backend_flags))

    passes = property(lambda self: self[0])
    opt_flags = property(lambda self: self[1])
    backend_flags = property(lambda self: self[2])


def option_flags(name: str) -> tuple[str, list[str]]:
    """(tool, flags) of a named option: tool ``opt`` or ``backend``;
    ValueError naming an unknown or malformed option."""
    if name in CANDIDATE_OPTIONS:
        tool, flags = CANDIDATE_OPTIONS[name]
        return tool, list(flags)
    key, sep, value = name.partition("=")
    if sep and key in VALUED_OPTIONS:
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"option {name!r}: {key} takes an integer") from None
        tool, flag = VALUED_OPTIONS[key]
        return tool, [flag.format(number)]
    known = [*CANDIDATE_OPTIONS, *(f"{k}=N" for k in VALUED_OPTIONS)]
    raise ValueError(f"unknown option {name!r} in candidate (known: {', '.join(known)})")


def candidate_text(passes: str, options=()) -> str:
    """The text of a candidate: its pipeline and its options' names."""
    return passes + "".join(OPTION_MARK + name for name in options)


def parse_candidate(candidate: str) -> Candidate:
    """The pipeline, opt flags and back-end flags of a candidate text;
    ValueError naming an unknown option."""
    passes, *names = candidate.split(OPTION_MARK)
    flags: dict[str, list[str]] = {"opt": [], "backend": []}
    for name in names:
        tool, extra = option_flags(name)
        flags[tool] += extra
    return Candidate(passes, flags["opt"], flags["backend"])


def opt_beside(compiler: str) -> str:
    """The ``opt`` of the clang ``compiler`` (same LLVM)."""
    return tool_beside(compiler, "opt")


def tool_beside(compiler: str, tool: str) -> str:
    """An LLVM ``tool`` of the clang ``compiler`` (same LLVM,
    :func:`mirecc.frontend.compiler.tool_beside`); CandidateError when there
    is none."""
    path = _tool_beside(compiler, tool)
    if path is None:
        raise CandidateError(f"no {tool} beside {compiler}")
    return path


def object_sizes(path: str, pic: bool = False) -> tuple[int, int]:
    """(shipped bytes, .text bytes) of the ELF object at ``path``: its
    loadable bytes (:func:`mirecc.util.elf.object_sizes`) plus what the link
    adds for it (:func:`link_bytes`; ``pic``: the object goes into a shared
    library); CandidateError when it is no ELF object."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        loadable, text = sizes_of(data, path)
    except ElfError as exc:
        raise CandidateError(str(exc)) from None
    return loadable + link_bytes(data, pic), text


def builds_shared_code(args) -> bool:
    """Whether a compile with ``args`` makes position-independent code for a
    shared library (the last of -fPIC/-fpic and their negations and the
    executable forms, -fPIE/-fpie, is -fPIC or -fpic)."""
    last = None
    for arg in args:
        if arg in ("-fPIC", "-fpic", "-fno-PIC", "-fno-pic", "-fPIE", "-fpie", "-fno-PIE",
                   "-fno-pie"):
            last = arg
    return last in ("-fPIC", "-fpic")


# What a link makes of an object's references (x86-64 ELF, GNU ld and lld
# with the compiler driver's defaults): a call to an interposable function
# through the PLT in a shared library: a PLT entry (16 bytes), a .got.plt
# slot (8) and a JUMP_SLOT relocation (24); a GOT reference: a slot (8) and
# a GLOB_DAT relocation (24); a symbol from another module: a .dynsym entry
# (24), its name in .dynstr, .gnu.version (2) and .gnu.hash (4); and every
# function's unwind record (FDE): an 8-byte entry in .eh_frame_hdr's table.
PLT_BYTES, GOT_BYTES, DYNSYM_BYTES, FDE_HDR_BYTES = 16 + 8 + 24, 8 + 24, 24 + 2 + 4, 8
R_X86_64_PLT32, R_X86_64_GOT_TYPES = 4, (3, 9, 41, 42)   # GOT32, GOTPCREL(X), REX_GOTPCRELX
STV_DEFAULT, SHN_UNDEF, ET_REL = 0, 0, 1


def link_bytes(data: bytes, pic: bool) -> int:
    """The bytes a link adds for an object's bytes ``data``, beyond its
    sections: its FDEs' ``.eh_frame_hdr`` entries and, for code that goes
    into a shared library (``pic``), a PLT entry for each interposable
    function it calls (a global function of default visibility, defined here
    or not: a call the user's object inlined becomes one), a GOT slot for
    each such symbol it reaches through the GOT, and the dynamic symbol of
    each undefined one.  An upper bound per object (another object may
    already call the same function through the PLT); 0 for linked outputs
    and for objects other than x86-64 ELF64 (nothing is known of their
    link)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 \
                or struct.unpack_from("<HH", data, 0x10) != (ET_REL, EM_X86_64):
            return 0        # (a linked output: the link has made them already)
        return _x86_64_link_bytes(data, pic)
    except (struct.error, IndexError, ValueError):
        return 0            # truncated: nothing added (its sizes already say what it is)


def _x86_64_link_bytes(data: bytes, pic: bool) -> int:
    sections = elf_sections(data)
    names = sections[struct.unpack_from("<H", data, 0x3E)[0]][4]   # .shstrtab's offset
    total = 0
    symbols: list[tuple] = []
    for name, sh_type, flags, _, offset, size, link, _, _, _ in sections:
        if sh_type == SHT_X86_64_UNWIND or data.startswith(b".eh_frame\0", names + name):
            total += FDE_HDR_BYTES * _fdes(data, offset, size)
        elif sh_type == SHT_SYMTAB and pic:
            strtab = sections[link][4]
            symbols = [(strtab + st_name, st_info, st_other, st_shndx)
                       for st_name, st_info, st_other, st_shndx, _, _ in
                       (struct.unpack_from("<IBBHQQ", data, at)
                        for at in range(offset, offset + size - 23, 24))]
    if not pic or not symbols:
        return total
    plt, got, undefined = set(), set(), set()
    shnum = len(sections)
    for _, sh_type, _, _, offset, size, _, info, _, _ in sections:
        if sh_type != SHT_RELA or info >= shnum or not sections[info][2] & SHF_EXECINSTR:
            continue
        for at in range(offset, offset + size - 23, 24):
            r_info = struct.unpack_from("<Q", data, at + 8)[0]
            index, kind = r_info >> 32, r_info & 0xFFFFFFFF
            if not 0 < index < len(symbols):
                continue
            name_at, st_info, st_other, st_shndx = symbols[index]
            if st_info >> 4 not in (1, 2) or st_other & 3 != STV_DEFAULT:
                continue            # local, or hidden/protected: bound at the link
            if kind == R_X86_64_PLT32:
                plt.add(index)
            elif kind in R_X86_64_GOT_TYPES:
                got.add(index)
            else:
                continue
            if st_shndx == SHN_UNDEF:
                undefined.add(name_at)
    dynstr = sum(data.index(b"\0", at) - at + 1 for at in undefined)
    return total + PLT_BYTES * len(plt) + GOT_BYTES * len(got) \
        + DYNSYM_BYTES * len(undefined) + dynstr


def _fdes(data: bytes, offset: int, size: int) -> int:
    """The FDEs (records whose CIE pointer is not 0) in an .eh_frame
    section's bytes."""
    count, at, end = 0, offset, offset + size
    while at + 8 <= end:
        length = struct.unpack_from("<I", data, at)[0]
        if length == 0:
            break                   # the terminator
        if length == 0xFFFFFFFF:    # 64-bit length
            length = struct.unpack_from("<Q", data, at + 4)[0]
            cie_pointer = struct.unpack_from("<Q", data, at + 12)[0]
            at += 12 + length
        else:
            cie_pointer = struct.unpack_from("<I", data, at + 4)[0]
            at += 4 + length
        count += cie_pointer != 0
    return count


# The object gate: from the user's own object alone (no IR is read), the
# chance that each candidate makes it smaller, by a logistic regression per
# candidate over these statistics of the object (mire size-gate fits them).
# ELF64 little-endian x86-64 objects only; the relocation types are x86-64's.
GATE_FEATURES = ("log text", "log loadable", "rodata/text", "data/text", "eh_frame/text",
                 "log local functions", "log global functions", "local share of functions",
                 "log text per function", "PLT32 relocations per 100 B",
                 "PC32 relocations per 100 B", "GOT relocations per 100 B",
                 "E8 bytes per 100 B", "zlib ratio of text", "largest function/text",
                 "log undefined symbols")
EM_X86_64, EM_386 = 62, 3
SHT_SYMTAB, SHT_RELA, SHT_X86_64_UNWIND = 2, 4, 0x70000001


def object_features(data: bytes) -> list[float] | None:
    """:data:`GATE_FEATURES` of an ELF object's bytes; None unless it is a
    whole ELF64 little-endian x86-64 object (the gate's models know no
    other)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 \
                or struct.unpack_from("<H", data, 0x12)[0] != EM_X86_64:
            return None
        return _x86_64_features(data)
    except (struct.error, IndexError):
        return None         # truncated


def _x86_64_features(data: bytes) -> list[float]:
    # lazy: math, zlib: the gate's features only; an -Oz compile's start-up has neither
    import math
    import zlib

    sections = elf_sections(data)
    shnum = len(sections)
    n = _Counts()
    texts, largest = [], 0
    for _, sh_type, flags, _, offset, size, _, info, _, _ in sections:
        if flags & SHF_ALLOC:
            n["loadable"] += size
            if sh_type == SHT_PROGBITS and flags & SHF_EXECINSTR:
                texts.append(data[offset:offset + size])
            elif sh_type == SHT_X86_64_UNWIND:
                n["eh_frame"] += size
            elif sh_type == SHT_PROGBITS:
                n["data" if flags & SHF_WRITE else "rodata"] += size
        if sh_type == SHT_SYMTAB:
            for at in range(offset, offset + size - 23, 24):
                _, st_info, _, st_shndx, _, st_size = struct.unpack_from("<IBBHQQ", data, at)
                kind, bind = st_info & 0xF, st_info >> 4
                if kind == 2:       # STT_FUNC
                    n["global" if bind else "local"] += 1
                    largest = max(largest, st_size)
                elif kind == 0 and bind and st_shndx == 0:
                    n["undefined"] += 1
        elif sh_type == SHT_RELA and info < shnum and sections[info][2] & SHF_EXECINSTR:
            for at in range(offset + 8, offset + size - 15, 24):
                kind = struct.unpack_from("<I", data, at)[0]
                n[{4: "plt", 2: "pc", 9: "got", 41: "got", 42: "got"}.get(kind, "other")] += 1
    text = b"".join(texts)
    size = max(len(text), 1)
    functions = max(n["local"] + n["global"], 1)
    per100 = 100.0 / size
    return [math.log(size), math.log1p(n["loadable"]), n["rodata"] / size, n["data"] / size,
            n["eh_frame"] / size, math.log1p(n["local"]), math.log1p(n["global"]),
            n["local"] / functions, math.log(size / functions), n["plt"] * per100,
            n["pc"] * per100, n["got"] * per100, text.count(b"\xe8") * per100,
            len(zlib.compress(text, 1)) / size, largest / size, math.log1p(n["undefined"])]


#: the machine outliner's functions are named so (LLVM's MachineOutliner)
OUTLINED_PREFIX = b"OUTLINED_FUNCTION_"


def outlined_run_off(data: bytes) -> list[str] | None:
    """The machine outliner's functions in an x86 ELF file (x86-64, i386 or
    x32; an object or a linked output) whose last instruction is not a return or an
    unconditional jump, so that control can run off their end; None when
    the file has no symbol table to find them in ([] for other machines:
    their outliners are not checked).

    LLVM 14's x86 outliner can end an outlined function with a conditional
    tail call (``cmp $27, %edi; jne callee``): where the branch is not
    taken, control runs into whatever follows.  A function that the
    outliner finished itself ends in ``ret``; one that ends a tail call,
    in ``jmp``."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] != 1 \
            or struct.unpack_from("<H", data, 0x12)[0] not in (EM_X86_64, EM_386):
        return []
    wide = data[4] == 2         # ELF64 (x86-64), else ELF32 (i386, x32)
    sections = elf_sections(data)
    shnum = len(sections)
    symtabs = [s for s in sections if s[1] == SHT_SYMTAB]
    if not symtabs:
        return None
    if OUTLINED_PREFIX not in data:
        return []           # (most objects: no symbol to read)
    bad = []
    entry = 24 if wide else 16
    for _, _, _, _, offset, size, link, _, _, _ in symtabs:
        strtab = sections[link][4]
        for at in range(offset, offset + size - entry + 1, entry):
            if wide:
                st_name, st_info, _, st_shndx, st_value, st_size = \
                    struct.unpack_from("<IBBHQQ", data, at)
            else:
                st_name, st_value, st_size, st_info, _, st_shndx = \
                    struct.unpack_from("<IIIBBH", data, at)
            if st_info & 0xF != 2 or not st_size or not 0 < st_shndx < shnum \
                    or not data.startswith(OUTLINED_PREFIX, strtab + st_name):
                continue
            _, _, _, addr, sec_offset, _, _, _, _, _ = sections[st_shndx]
            end = sec_offset + st_value - addr + st_size
            if not _ends_in_a_jump(data[max(end - 6, end - st_size):end]):
                bad.append(data[strtab + st_name:data.index(b"\0", strtab + st_name)]
                           .decode(errors="replace"))
    return bad


def _ends_in_a_jump(code: bytes) -> bool:
    """Do the last bytes of a function's x86-64 code end in ``ret``, ``ud2``
    or an unconditional ``jmp`` (rel8, rel32, a register, ``*x(%rip)``)?  A
    conditional jump (``0f 8x rel32``, ``7x rel8``) does not."""
    return (code[-1:] == b"\xc3" or code[-2:] == b"\x0f\x0b"
            or code[-5:-4] == b"\xe9" or code[-2:-1] == b"\xeb"
            or (code[-2:-1] == b"\xff" and 0xE0 <= code[-1] <= 0xE7)
            or code[-6:-4] == b"\xff\x25")


def check_outlined(path: str) -> None:
    """CandidateError when the ELF file at ``path`` has a machine-outlined
    function that control can run off (:func:`outlined_run_off`), or no
    symbol table to check them in."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        bad = outlined_run_off(data)
    except (struct.error, IndexError, ValueError):
        raise CandidateError(f"{path}: cannot read its symbol table") from None
    if bad is None:
        raise CandidateError("no symbol table to check its outlined functions in")
    if bad:
        raise CandidateError(
            f"miscompiled: the machine outliner ended {', '.join(bad[:3])}"
            f"{' and more' if len(bad) > 3 else ''} with a conditional jump, so that "
            f"control runs off its end (a bug of LLVM's x86 outliner); not kept")


class _Counts(dict):
    """A dict whose missing counts are 0 (collections.Counter without
    collections' import)."""

    def __missing__(self, key):
        return 0


def gate_chances(model: dict, features: list[float]) -> dict[str, float]:
    """candidate name -> the model's chance that it makes the object smaller."""
    import math  # lazy: as in _x86_64_features

    z = [(x - m) / s for x, m, s in zip(features, model["mean"], model["scale"])]
    out = {}
    for name, (intercept, *coefficients) in model["pipelines"].items():
        t = intercept + sum(c * x for c, x in zip(coefficients, z))
        out[name] = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, t))))
    return out


def gate_keeps(model: dict | None, data: bytes, names: list[str]):
    """(the names the object gate keeps, in order; their chances) for an
    object's bytes, or None where no gate applies (no model, an object it
    does not know): every name is built then.  A name the model does not
    know is kept."""
    if not model:
        return None
    features = object_features(data)
    if features is None:
        return None
    chances = gate_chances(model, features)
    kept = [name for name in names if chances.get(name, 1.0) >= model["threshold"]]
    return kept, chances


def text_bytes(path: str) -> int:
    """Bytes of executable code in the ELF object at ``path``."""
    return object_sizes(path)[1]


def run_step(cmd: list[str], what: str, timeout: float = STEP_TIMEOUT_S) -> bytes:
    """Run one tool of a candidate's build; its stdout.  CandidateError
    (naming the tool, ``what`` and its first line of stderr) when it cannot
    run, fails or runs over ``timeout`` seconds."""
    import subprocess   # here: a TU the gate answers builds nothing

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


def candidate_steps(split, candidate: str, extra: list[str], workdir: str,
                    name: str) -> tuple[list[list[str]], str]:
    """The commands that build ``split``'s TU through ``candidate`` (an opt
    ``-passes=`` string and its back-end options) into ``workdir``: opt,
    then clang's back end; and the object's path.  ``extra``: the decision
    flags of the other tasks, as in the user's object."""
    try:
        parsed = parse_candidate(candidate)
    except ValueError as exc:
        raise CandidateError(str(exc)) from None
    optimised = os.path.join(workdir, f"{name}.bc")
    obj = os.path.join(workdir, f"{name}.o")
    return ([[opt_beside(split.compiler), f"-passes={parsed.passes}", *parsed.opt_flags,
              split.bitcode_path, "-o", optimised],
             split.backend_command([*extra, *parsed.backend_flags, "-Xclang",
                                    "-disable-llvm-passes"], output=obj, bitcode=optimised)],
            obj)


def build_candidate(split, candidate: str, extra: list[str], workdir: str, name: str) -> str:
    """The object of ``split``'s TU through ``candidate`` (:func:`candidate_steps`),
    into ``workdir``; its path.  The object the early step built
    (:func:`first_candidate`) when it is this one.  CandidateError when it
    cannot be built, or when the machine outliner miscompiled it
    (:func:`check_outlined`)."""
    early = getattr(split, "early", None)
    built = early.take(candidate, 2 * STEP_TIMEOUT_S) \
        if early is not None and not extra else None
    if built is None:
        steps, built = candidate_steps(split, candidate, extra, workdir, name)
        for cmd in steps:
            run_step(cmd, candidate)
    check_outlined(built)
    return built


def build_policy(split, flags: list[str], workdir: str, name: str) -> str:
    """The object of ``split``'s TU through the user's own level with
    ``flags`` (the other tasks' decision flags and the plugin's, which
    carry the inlining policy's call-site decisions: :data:`POLICY`), into
    ``workdir``; its path.  CandidateError when it cannot be built."""
    obj = os.path.join(workdir, f"{name}.o")
    run_step(split.backend_command(flags, output=obj, bitcode=split.bitcode_path), POLICY)
    return obj
