"""What an ELF file holds, read from its section headers with the standard
library only: the sections, and the bytes a program made from an object
occupies (every allocated section) and its executable code (``.text``,
``.text.<name>`` with ``-ffunction-sections``, ...).  Objects and linked
outputs, ELF64 and ELF32, either byte order."""
from __future__ import annotations

import struct

SHT_PROGBITS = 1
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4


class ElfError(Exception):
    """Not an ELF file, or its section table is cut short (names the file)."""


def elf_sections(data: bytes) -> list[tuple]:
    """The section headers of an ELF file's bytes (ELF64 or ELF32, either
    byte order), each ``(name, type, flags, addr, offset, size, link,
    info, addralign, entsize)``; struct.error when the table is cut short."""
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    (shoff,) = struct.unpack_from(order + ("Q" if wide else "I"), data, 0x28 if wide else 0x20)
    shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A if wide else 0x2E)
    header = order + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
    return [struct.unpack_from(header, data, shoff + i * shentsize) for i in range(shnum)]


def object_sizes(path: str) -> tuple[int, int]:
    """(loadable bytes, .text bytes) of the ELF object at ``path``: the sizes
    of every allocated section (code, read-only data, data, bss, unwind
    tables ...: what a program made from it occupies in memory), and of the
    executable ones alone."""
    with open(path, "rb") as fh:
        return sizes_of(fh.read(), path)


def sizes_of(data: bytes, path: str) -> tuple[int, int]:
    """:func:`object_sizes` of an ELF file's bytes (``path`` names it in
    errors)."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ElfError(f"{path}: not an ELF object")
    try:
        sections = elf_sections(data)
    except struct.error:
        raise ElfError(f"{path}: truncated ELF section table") from None
    loadable = text = 0
    for _, sh_type, sh_flags, _, _, size, _, _, _, _ in sections:
        if sh_flags & SHF_ALLOC:
            loadable += size
        if sh_type == SHT_PROGBITS and sh_flags & SHF_EXECINSTR:
            text += size
    return loadable, text


PT_NOTE = 4
NT_GNU_BUILD_ID = 3


def build_id(path: str) -> bytes | None:
    """The GNU build ID of the ELF program or library at ``path`` (the
    linker's digest of what it wrote: another build of the same sources
    another ID), read from its note segments without reading the rest;
    None when it has none or is not ELF."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            (phoff,) = struct.unpack_from(order + ("Q" if wide else "I"), head,
                                          0x20 if wide else 0x1C)
            phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36 if wide else 0x2A)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for i in range(phnum):
                if wide:
                    p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
                        order + "IIQQQQ", table, i * phentsize)
                else:
                    p_type, p_offset, _, _, p_filesz = struct.unpack_from(
                        order + "IIIII", table, i * phentsize)
                if p_type != PT_NOTE or p_filesz > 1 << 16:
                    continue
                fh.seek(p_offset)
                notes, at = fh.read(p_filesz), 0
                while at + 12 <= len(notes):
                    namesz, descsz, n_type = struct.unpack_from(order + "III", notes, at)
                    name_at = at + 12
                    desc_at = name_at + (namesz + 3) // 4 * 4
                    if n_type == NT_GNU_BUILD_ID and notes[name_at:name_at + namesz] == b"GNU\0":
                        found = notes[desc_at:desc_at + descsz]
                        return found if len(found) == descsz and descsz >= 8 else None
                    at = desc_at + (descsz + 3) // 4 * 4
    except (OSError, struct.error):
        return None
    return None
