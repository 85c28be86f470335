"""A tool's identity by content: the GNU build ID where its parts have one
(as readelf reads it), else their bytes; another build, another identity."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from mirecc.util.elf import build_id
from mirecc.util.toolid import tool_identity

CLANG = "/usr/bin/clang-14"


@pytest.mark.skipif(not (os.access(CLANG, os.X_OK) and shutil.which("readelf")),
                    reason="needs clang-14 and readelf")
def test_the_build_id_is_the_one_readelf_reads():
    real = os.path.realpath(CLANG)
    notes = subprocess.run(["readelf", "-n", real], capture_output=True, text=True,
                           check=True).stdout
    assert build_id(real).hex() == re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)


def test_a_tool_without_a_build_id_is_named_by_its_bytes(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    ids = {}
    for name, flags in (("with", ["-Wl,--build-id=sha1"]), ("without", ["-Wl,--build-id=none"]),
                        ("other", ["-Wl,--build-id=none", "-O2", "-DX=1"])):
        out = tmp_path / name / "bin" / "tool"
        out.parent.mkdir(parents=True)
        subprocess.run([cc, *flags, str(tmp_path / "m.c"), "-o", str(out)], check=True)
        ids[name] = (build_id(str(out)), tool_identity(str(out), str(tmp_path / f"c-{name}")))
    assert ids["with"][0] is not None and ids["without"][0] is None
    assert all(i.startswith("tool|sha256:") for _, i in ids.values())
    assert len({i for _, i in ids.values()}) == 3
    # the same bytes elsewhere: the same identity (the name and content, not the path)
    copy = tmp_path / "copy" / "bin" / "tool"
    copy.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "without" / "bin" / "tool", copy)
    assert tool_identity(str(copy), str(tmp_path / "c-copy")) == ids["without"][1]
    assert build_id(str(tmp_path / "m.c")) is None      # not ELF
