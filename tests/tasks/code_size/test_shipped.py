"""What the link adds for an object, counted in a candidate's size: an
object whose calls to exported functions are not inlined gets PLT entries
in a shared library (libogg's bitwise.c at -Oz: five of them, +138 loadable
bytes in libogg.so for a smaller object); its estimate is measured against
real links with clang-14."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CLANG = "/usr/bin/clang-14"
LLVM = "/usr/lib/llvm-14/bin"

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# exported accessors (libogg's oggpack_* kind) that -Oz inlines into their callers
SOURCE = """
typedef struct { unsigned char *buf, *ptr; long endbyte; int endbit; long storage; } pb;
long pb_bytes(pb *b) { return b->endbyte + (b->endbit + 7) / 8; }
long pb_bits(pb *b) { return b->endbyte * 8 + b->endbit; }
unsigned char *pb_buffer(pb *b) { return b->buf; }
int pb_check(pb *b) { return !b->ptr || !b->storage ? -1 : 0; }
void pb_init(pb *b, unsigned char *buf, int n) { b->buf = b->ptr = buf; b->storage = n;
                                                 b->endbyte = 0; b->endbit = 0; }
long use1(pb *b) { return pb_bytes(b) + pb_bits(b) * 3; }
long use2(pb *b, unsigned char *x) { pb_init(b, x, 10); return pb_check(b) ? 0 : pb_bytes(b); }
long use3(pb *b) { return pb_buffer(b)[pb_bits(b) & 7] + pb_check(b); }
long use4(pb *b) { return pb_check(b) + pb_bytes(b) * pb_bits(b) + (long)pb_buffer(b); }
"""


def _loadable(path: Path) -> int:
    from mirecc.util.elf import object_sizes
    return object_sizes(str(path))[0]


def _objects(tmp_path: Path, pic: str) -> tuple[Path, Path]:
    """clang's -Oz object (the accessors inlined) and one built without
    inlining (opt's -Oz pipeline with the inliner's threshold far below
    zero; llc): the same code, calls through the PLT where ``pic``."""
    (tmp_path / "b.c").write_text(SOURCE)
    own, other = tmp_path / "own.o", tmp_path / "other.o"
    subprocess.run([CLANG, "-Oz", pic, "-c", "b.c", "-o", str(own)], cwd=tmp_path, check=True)
    subprocess.run([CLANG, "-Oz", pic, "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    "b.c", "-o", "b.bc"], cwd=tmp_path, check=True)
    subprocess.run([f"{LLVM}/opt", "-passes=default<Oz>", "-inline-threshold=-1000", "b.bc",
                    "-o", "n.bc"], cwd=tmp_path, check=True)
    subprocess.run([f"{LLVM}/llc", "-O2", "-filetype=obj",
                    "-relocation-model=" + ("pic" if pic == "-fPIC" else "static"), "n.bc",
                    "-o", str(other)], cwd=tmp_path, check=True)
    return own, other


def test_calls_through_the_plt_are_counted_as_the_shared_library_link_makes_them(tmp_path):
    from mirecc.tasks.code_size.build import PLT_BYTES, link_bytes

    own, other = _objects(tmp_path, "-fPIC")
    calls = subprocess.run(["readelf", "-rW", str(other)], capture_output=True, text=True,
                           check=True).stdout.count("R_X86_64_PLT32")
    assert calls >= 5 and "R_X86_64_PLT32" not in subprocess.run(
        ["readelf", "-rW", str(own)], capture_output=True, text=True).stdout
    estimate = link_bytes(other.read_bytes(), True) - link_bytes(own.read_bytes(), True)
    assert estimate == 5 * PLT_BYTES        # five functions called, each one entry
    shipped = {}
    for obj in (own, other):
        lib = tmp_path / f"lib{obj.stem}.so"
        subprocess.run([CLANG, "-shared", str(obj), "-o", str(lib)], check=True)
        shipped[obj.stem] = _loadable(lib)
    real = (shipped["other"] - shipped["own"]) - (_loadable(other) - _loadable(own))
    # what the link really added beyond the objects' own difference: the
    # entries, and once per library the PLT's header and its dynamic tags
    assert estimate <= real <= estimate + 128, (estimate, real, shipped)


def test_code_for_executables_pays_no_plt_and_the_flags_say_which(tmp_path):
    from mirecc.tasks.code_size.build import builds_shared_code, link_bytes

    own, other = _objects(tmp_path, "-fno-pic")
    # the same functions: one unwind record each, so nothing more to count
    assert link_bytes(other.read_bytes(), False) == link_bytes(own.read_bytes(), False) > 0
    assert builds_shared_code(["-O2", "-fPIC"]) and builds_shared_code(["-fpie", "-fpic"])
    assert not builds_shared_code(["-fPIC", "-fno-pic"])
    assert not builds_shared_code(["-fPIE"]) and not builds_shared_code([])


def test_each_unwind_record_costs_its_eh_frame_hdr_entry(tmp_path):
    from mirecc.tasks.code_size.build import FDE_HDR_BYTES, link_bytes

    (tmp_path / "f.c").write_text("".join(f"int f{i}(int x) {{ return x * {i} + 1; }}\n"
                                          for i in range(7)))
    subprocess.run([CLANG, "-Oz", "-c", "f.c", "-o", "f.o"], cwd=tmp_path, check=True)
    subprocess.run([CLANG, "-Oz", "-fno-asynchronous-unwind-tables", "-c", "f.c", "-o", "g.o"],
                   cwd=tmp_path, check=True)
    assert link_bytes((tmp_path / "f.o").read_bytes(), False) == 7 * FDE_HDR_BYTES
    assert link_bytes((tmp_path / "g.o").read_bytes(), False) == 0
    assert link_bytes(b"not an object", True) == 0


def test_a_linked_output_has_nothing_more_to_add(tmp_path):
    from mirecc.tasks.code_size.build import link_bytes

    own, _ = _objects(tmp_path, "-fPIC")
    subprocess.run([CLANG, "-shared", str(own), "-o", str(tmp_path / "l.so")], check=True)
    assert link_bytes(own.read_bytes(), True) > 0
    assert link_bytes((tmp_path / "l.so").read_bytes(), True) == 0
