"""``mire bench`` (the README's main job) on a small program directory: code
size at -Oz (loadable bytes, never larger, outputs compared), -O3 with the
defaults (objects byte for byte clang's) and an OpenMP program adapted at
run time, and one short ``mire tune``; tables in bench.md, data in
bench.json, the plot in bench.png."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

MIRE = Path(sys.executable).parent / "mire"
PROGRAM = r"""
#include <stdio.h>
static float a[4096], b[4096];
__attribute__((noinline)) static void saxpy(float k, int n) { for (int i = 0; i < n; i++) a[i] += k * b[i]; }
__attribute__((noinline)) static void scale(float k, int n) { for (int i = 0; i < n; i++) b[i] = k * b[i] + 1.0f; }
int main(void) {
    for (int i = 0; i < 4096; i++) { a[i] = i; b[i] = 4096 - i; }
    for (int r = 0; r < 200; r++) { saxpy(0.5f, 4096); scale(0.999f, 4096); }
    double s = 0;
    for (int i = 0; i < 4096; i++) s += a[i];
    printf("tiny checksum %.3f\n", s);
    return 0;
}
"""
OPENMP_PROGRAM = r"""
#include <stdio.h>
int main(void) {
    static unsigned row[2000];
#pragma omp parallel for
    for (int i = 0; i < 2000; i++) {
        unsigned s = 0;
        for (int j = 0; j <= i; j++) s += (unsigned)(i ^ j) * 2654435761u;
        row[i] = s;
    }
    unsigned long long c = 0;
    for (int i = 0; i < 2000; i++) c = c * 1000003u + row[i];
    printf("tri checksum %llu\n", c);
    return 0;
}
"""


def test_mire_bench_shows_size_defaults_openmp_and_a_tune(tmp_path):
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "tiny.c").write_text(PROGRAM)
    (programs / "tri.c").write_text(OPENMP_PROGRAM)
    out = tmp_path / "out"
    proc = subprocess.run([str(MIRE), "bench", "--programs", str(programs), "--out", str(out),
                           "--compile-repeats", "1", "--run-repeats", "2",
                           "--size-best-known", "2", "--tune-program", "tiny",
                           "--tune-budget", "4", "--cc", "/usr/bin/clang-14"],
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "MIRECC_CC": "/usr/bin/clang-14",
                               "XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "MIRECC_SERVER": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "bench.json").read_text())
    assert "Debian clang version 14" in data["machine"]["compiler"]

    # 1. code size at -Oz: mirecc's object never has more loadable bytes than
    # clang's, the outputs are the same, and the best known is no larger
    assert data["size_flags"] == ["-Oz"] and data["best_known_candidates"] == 2
    assert [r["program"] for r in data["size"]] == ["tiny", "tri"]
    for row in data["size"]:
        assert 0 < row["loadable_mirecc"] <= row["loadable_clang"], row
        assert row["text_clang"] > 0 and row["never_larger"] and row["same_output"]
        assert row["saved"] == row["loadable_clang"] - row["loadable_mirecc"]
        assert row["best_known"] is not None and row["best_known"] <= row["loadable_clang"]
        assert len(row["compile_clang_s"]) == len(row["compile_mirecc_s"]) == 1
        # the same object unless it is smaller: then it links to another binary
        assert row["same_object"] == (row["saved"] == 0)
        assert row["same_binary"] == row["same_object"]
    # tiny has less than 1024 bytes of .text: the code-size gate keeps clang's
    # object without reading the IR, at every K (a search would save 20 bytes
    # with clang-14)
    from mirecc.tasks.code_size.verify import MIN_TEXT_BYTES
    assert data["size"][0]["text_clang"] < MIN_TEXT_BYTES
    assert data["size"][0]["saved"] == 0 and data["size"][0]["same_object"]

    # the real library (zlib, when set-up fetched its source): what ships
    # (the shared library, the programs) never larger, its tests as clang's
    from mirecc.cli.bench import fetched_library
    md = (out / "bench.md").read_text()
    assert "### A real library: zlib at -Oz" in md
    if fetched_library() is None:
        assert data["library"] is None and "Not built: no zlib source here" in md
    else:
        library = data["library"]
        assert library is not None, md
        shipped = library["shipped"]
        assert any(name.startswith("libz.so") for name in shipped) and "minigzip" in shipped
        for name, (clang, ours, best) in shipped.items():
            assert 0 < ours <= clang and best is not None and best <= clang, (name, shipped)
        assert library["tests_clang"] == library["tests_mirecc"] == "3 of 3 'test OK'"
        assert library["searched"] > 0 and library["build_best_s"] > 0
        assert f"| {next(iter(shipped))} | " in md

    # 2. -O3 with the defaults: no task applies, every object is clang's, the
    # same binary is 1.000x and not timed; the OpenMP program also adapted
    assert data["defaults"].startswith("On by default at -O3: none.")
    levels = {(r["program"], r["setting"]): r for r in data["levels"]}
    adapted_key = ("tri", "MIRECC_ADAPT_OPENMP=1")
    loops_key = ("tiny", "MIRECC_ADAPT_LOOPS=1")
    assert set(levels) == {("tiny", "defaults"), ("tri", "defaults"), adapted_key, loops_key}
    for key in [("tiny", "defaults"), ("tri", "defaults")]:
        row = levels[key]
        assert row["same_object"] and row["same_output"] and row["applied"] == 0, row
        assert row["speedup"] == 1.0 and row["run_clang_s"] == row["run_mirecc_s"] == []
    # adapted: an adaptive site (the object differs), the runtime linked in,
    # every run's output the same, each run beside one of clang's
    from mirecc.cli.bench import ADAPTED_RUNS
    adapted = levels[adapted_key]
    assert adapted["same_output"] and adapted["adapted"] and not adapted["same_object"]
    assert adapted["applied"] > 0
    assert len(adapted["run_clang_s"]) == len(adapted["run_mirecc_s"]) == ADAPTED_RUNS
    assert adapted["verdicts"] and adapted["verdicts"][0].startswith("tri.c main:0: ")
    assert adapted["first"] > 0 and adapted["worst"] <= adapted["first"]
    # the other program's loops adapted: its functions in versions, chosen
    # in its runs, every output the same
    loops = levels[loops_key]
    assert loops["same_output"] and loops["adapted"] and not loops["same_object"]
    assert len(loops["run_clang_s"]) == len(loops["run_mirecc_s"]) == ADAPTED_RUNS
    assert any(v.startswith(("tiny.c saxpy: ", "tiny.c scale: ")) for v in loops["verdicts"])

    # 3. the tune: a budget of 4 leaves room for the baseline only
    tune = data["tune"]
    assert tune["program"] == "tiny" and tune["error"] == "" and tune["budget"] == 4
    assert tune["kept"] == [] and tune["tried"] == 0
    assert tune["same_binary"] and tune["speedup"] == 1.0
    assert any(line.startswith("baseline: median") for line in tune["log"])

    for words in ["## 1. Code size at -Oz", "| tiny |", "| **total** |",
                  "## 2. -O3 with the defaults", "On by default at -O3: none.",
                  "2 of 2 objects are clang's byte for byte",
                  "| tri | MIRECC_ADAPT_OPENMP=1 |",
                  "Adapted (MIRECC_ADAPT_OPENMP=1", "Adapted (MIRECC_ADAPT_LOOPS=1) on tiny",
                  "## 3. mire tune on tiny",
                  "Nothing kept: the budget left no room for a candidate"]:
        assert words in md, words
    assert md in proc.stdout
    pytest.importorskip("matplotlib")
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_larger_object_or_another_output_is_flagged():
    from mirecc.cli.bench import LevelRow, SizeRow, level_table, size_table

    larger = SizeRow("p", [0.1], [1.0], 100, 120, 80, 90, False, False, True, 100)
    lines = "\n".join(size_table([larger], ["-Oz"], 10, 20, 1))
    assert not larger.correct and "NO: LARGER" in lines and "LARGER for p" in lines
    changed = LevelRow("q", "defaults", [0.1], [0.1], same_object=False, same_output=True,
                       decisions={"loop-vectorize": [1, 0]})
    assert not changed.correct      # another object without an applied decision
    text = "\n".join(level_table([changed], ["-O3"], "", 1, 1, False))
    assert "| NO |" in text and "0 of 1 objects are clang's" in text


def test_defaults_at_each_level_come_from_the_task_registry():
    from mirecc.cli.bench import defaults_text, uses_openmp

    on, sentence = defaults_text(["-O3"])
    assert on == [] and "MIRECC_APPLY_LOOPS=1" in sentence and "MIRECC_APPLY_OPENMP=1" in sentence
    on, sentence = defaults_text(["-Oz"])
    assert on == ["code-size"] and sentence.startswith("On by default at -Oz: code-size.")
    assert uses_openmp(Path(__file__).parents[2] / "benchmarks" / "programs" / "tri_omp.c")
    assert not uses_openmp(Path(__file__).parents[2] / "benchmarks" / "programs" / "saxpy.c")


def test_mire_bench_without_programs_is_a_clear_error(tmp_path):
    proc = subprocess.run([str(MIRE), "bench", "--programs", str(tmp_path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"no .c programs in {tmp_path}" in proc.stderr


def test_a_larger_linked_file_or_failing_library_tests_are_flagged():
    from mirecc.cli.bench import ZLIB_TESTS_OK, LibraryRow, library_table

    ok = LibraryRow("zlib", 1.0, 2.0, {"libz.so": [100, 99, 98]}, ZLIB_TESTS_OK, ZLIB_TESTS_OK)
    assert ok.correct and "| libz.so | 100 | 99 | 1 (1.00%) | yes | 98 (2.00%) |" in \
        "\n".join(library_table(ok, ["-Oz"], 20))
    larger = LibraryRow("zlib", 1.0, 2.0, {"libz.so": [100, 101, None]}, ZLIB_TESTS_OK,
                        ZLIB_TESTS_OK)
    assert not larger.correct and "NO: LARGER" in "\n".join(library_table(larger, ["-Oz"], None))
    failing = LibraryRow("zlib", 1.0, 2.0, {"libz.so": [100, 99, None]}, ZLIB_TESTS_OK,
                         "2 of 3 'test OK'")
    assert not failing.correct
    assert library_table(None, ["-Oz"], 20, "no zlib source here")[-1] == \
        "Not built: no zlib source here"
