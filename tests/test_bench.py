"""``mire bench`` (the README's main job) on a small program directory:
it compiles with clang and mirecc (with the shipped heads), runs both, and
reports the outputs (identical) and objects (identical unless a decision was
applied) in bench.md / bench.json."""

import json
import subprocess
import sys
from pathlib import Path

MIRE = Path(sys.executable).parent / "mire"
PROGRAM = r"""
#include <stdio.h>
int main(void) {
    long s = 0;
    for (int i = 0; i < 1000000; i++) s += i % 7;
    printf("tiny checksum %ld\n", s);
    return 0;
}
"""


def test_mire_bench_reports_identical_objects_and_outputs(tmp_path):
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "tiny.c").write_text(PROGRAM)
    out = tmp_path / "out"
    proc = subprocess.run([str(MIRE), "bench", "--programs", str(programs), "--out", str(out),
                           "--compile-repeats", "1", "--run-repeats", "2",
                           "--cc", "/usr/bin/clang-14"],
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "MIRECC_CC": "/usr/bin/clang-14",
                               "XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "MIRECC_SERVER": "0"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "bench.json").read_text())
    (row,) = data["programs"]
    # with the shipped heads: the same output, and the same object unless the
    # loop-vectorize head applied a decision (then it is counted)
    assert row["program"] == "tiny" and row["same_output"]
    assert row["same_object"] or row["applied"] > 0
    assert row["text_clang"] > 0 and row["text_mirecc"] > 0
    # the same binary is not timed: 1.0x by construction
    runs = 0 if row["same_object"] else 2
    assert len(row["run_clang_s"]) == len(row["run_mirecc_s"]) == runs
    assert row["speedup"] == 1.0 or not row["same_object"]
    assert "| tiny |" in (out / "bench.md").read_text()
    assert "Debian clang version 14" in data["machine"]["compiler"]


def test_mire_bench_without_programs_is_a_clear_error(tmp_path):
    proc = subprocess.run([str(MIRE), "bench", "--programs", str(tmp_path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"no .c programs in {tmp_path}" in proc.stderr
