"""What ships, side by side: every linked ELF file (shared libraries,
programs; libtool's ``.libs`` copies included) that a code-size bench run
left under ``<work>/code-size/results/<project>/{clang,mirecc}``, with its
loadable bytes (every allocated section) and its PLT entries (the size of
``.rela.plt`` over 24 bytes).

    .venv/bin/python benchmarks/shipped.py [--work .work] libogg libyaml
        [--md FILE]

Prints a Markdown table; a file larger on mirecc's side is marked.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from code_size import object_text  # noqa: E402

from mirecc.util.elf import elf_sections  # noqa: E402


def plt_entries(data: bytes) -> int:
    """JUMP_SLOT relocations of a linked x86-64 ELF64 file (one per PLT entry)."""
    names = elf_sections(data)
    shstr = names[int.from_bytes(data[0x3E:0x40], "little")][4]
    for name, _, _, _, _, size, _, _, _, _ in names:
        if data.startswith(b".rela.plt\0", shstr + name):
            return size // 24
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("projects", nargs="+")
    p.add_argument("--work", type=Path, default=Path(__file__).resolve().parent.parent / ".work")
    p.add_argument("--md", type=Path, default=None)
    args = p.parse_args(argv)
    lines = ["| project | linked file | clang loadable | mirecc loadable | change | "
             "PLT entries clang / mirecc |", "|---|---|---:|---:|---:|---|"]
    larger = total = 0
    for project in args.projects:
        root = args.work / "code-size" / "results" / project
        clang, ours = object_text(root / "clang")[1], object_text(root / "mirecc")[1]
        for rel in sorted(set(clang) & set(ours)):
            c, m = clang[rel], ours[rel]
            pc, pm = (plt_entries((root / side / rel).read_bytes()) for side in ("clang", "mirecc"))
            total += 1
            larger += m > c
            lines.append(f"| {project} | {rel} | {c} | {m} | {100 * (m - c) / c:+.2f}%"
                         f"{' **LARGER**' if m > c else ''} | {pc} / {pm} |")
    lines += ["", f"{total} linked files; larger on mirecc's side: {larger}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    return 1 if larger else 0


if __name__ == "__main__":
    sys.exit(main())
