"""mirecc as a drop-in compiler for real builds (CI-sized: a few minutes on
2 cores).

* the repository's CMake sample builds through ``mirecc --print-toolchain-file``
  and its ctest passes;
* a small Makefile project (static library + test program, ``-MMD -MP``,
  ``make -j2``) built with CC=clang and with CC=mirecc gives the same
  objects, the same dependency files and the same program output;
* zlib (Debian's source package, when ``apt-get source zlib`` works here)
  built both ways: identical objects, ``make test`` passes.

mirecc is the one installed next to the Python running the tests
(``sys.executable``'s bin directory), i.e. the venv under test.  Both builds
of a project run in the same directory (the first one is moved aside), so
paths in debug info match; see benchmarks/real_projects.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import real_projects as rp  # noqa: E402

BIN = Path(sys.executable).parent
MIRECC = BIN / "mirecc"

pytestmark = pytest.mark.skipif(not (MIRECC.is_file() and (BIN / "mirecc++").is_file()),
                                reason=f"mirecc is not installed next to {sys.executable}")


def _need(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


@pytest.fixture(scope="module")
def clang() -> str:
    """The real clang mirecc drives, as mirecc reports it."""
    return rp.real_compiler(MIRECC)


def _explain(result: rp.ProjectResult) -> str:
    return rp.report([result], {"cpu": "-", "cores": "-", "clang": "-"})


# --------------------------------------------------------------------------
# (a) the CMake sample through the toolchain file

def test_cmake_sample_through_toolchain_file(tmp_path):
    _need("cmake", "ctest", "make")
    result = rp.run_cmake_sample(tmp_path, MIRECC, compare_with_clang=True)
    info = _explain(result)
    assert result.error is None, info
    mirecc_side = next(s for s in result.sides if s.side == "mirecc")
    assert mirecc_side.build_ok and mirecc_side.tests_ok, info
    assert "0 tests failed" in mirecc_side.tests, info
    assert result.checks["cache_c_compiler"] == str(MIRECC), info
    assert result.checks["cache_cxx_compiler"] == str(BIN / "mirecc++"), info
    assert result.checks["cache_names_mirecc"] is True, info
    assert result.checks["identified_as_clang"] is True, info
    # and the same objects as a plain clang build in the same directory
    assert result.objects["total"] >= 8 and rp.all_identical(result.objects), info
    assert result.ok, info


# --------------------------------------------------------------------------
# (b) a small Makefile project

MAKEFILE = """\
CC ?= cc
CFLAGS ?= -O2 -g
CPPFLAGS += -Iinclude -DMINI_SCALE=3
LIB_SRCS := lib/vec.c lib/text.c lib/hash.c lib/sort.c
LIB_OBJS := $(LIB_SRCS:.c=.o)
DEPS := $(LIB_OBJS:.o=.d) test/main.d

all: test/main

lib/libmini.a: $(LIB_OBJS)
\trm -f $@
\t$(AR) rcsD $@ $^

test/main: test/main.o lib/libmini.a
\t$(CC) $(CFLAGS) -o $@ test/main.o lib/libmini.a -lm

# one unoptimised file: mirecc passes it straight through
lib/text.o: CFLAGS += -O0

%.o: %.c
\t$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

clean:
\trm -f $(LIB_OBJS) test/main.o $(DEPS) lib/libmini.a test/main

.PHONY: all clean
-include $(DEPS)
"""

SOURCES = {
    "include/mini.h": """\
#ifndef MINI_H
#define MINI_H
#include <stddef.h>
#include <stdint.h>
double vec_dot(const double *a, const double *b, size_t n);
void vec_axpy(double a, const double *x, double *y, size_t n);
size_t text_words(const char *s);
void text_upper(char *s);
uint32_t hash_fnv1a(const void *data, size_t n);
void sort_ints(int *v, size_t n);
const char *mini_where(void);
#endif
""",
    "include/config.h": """\
#ifndef MINI_CONFIG_H
#define MINI_CONFIG_H
#define MINI_UNROLL 4
#define MINI_SEED 0x9e3779b9u
#endif
""",
    "lib/vec.c": """\
#include "mini.h"
#include "config.h"
double vec_dot(const double *a, const double *b, size_t n) {
    double s[MINI_UNROLL] = {0};
    size_t i = 0;
    for (; i + MINI_UNROLL <= n; i += MINI_UNROLL)
        for (int k = 0; k < MINI_UNROLL; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return s[0] + s[1] + s[2] + s[3];
}
void vec_axpy(double a, const double *x, double *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i] * MINI_SCALE;
}
const char *mini_where(void) { return __FILE__; }
""",
    "lib/text.c": """\
#include <ctype.h>
#include "mini.h"
size_t text_words(const char *s) {
    size_t n = 0;
    int in_word = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) in_word = 0;
        else if (!in_word) { in_word = 1; n++; }
    }
    return n;
}
void text_upper(char *s) { for (; *s; s++) *s = (char)toupper((unsigned char)*s); }
""",
    "lib/hash.c": """\
#include "mini.h"
#include "config.h"
uint32_t hash_fnv1a(const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t h = 2166136261u ^ MINI_SEED;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 16777619u; }
    return h;
}
""",
    "lib/sort.c": """\
#include "mini.h"
static void sift(int *v, size_t start, size_t end) {
    size_t root = start;
    while (2 * root + 1 <= end) {
        size_t child = 2 * root + 1, swap = root;
        if (v[swap] < v[child]) swap = child;
        if (child + 1 <= end && v[swap] < v[child + 1]) swap = child + 1;
        if (swap == root) return;
        int t = v[root]; v[root] = v[swap]; v[swap] = t;
        root = swap;
    }
}
void sort_ints(int *v, size_t n) {
    if (n < 2) return;
    for (size_t s = (n - 2) / 2 + 1; s-- > 0;) sift(v, s, n - 1);
    for (size_t end = n - 1; end > 0; end--) {
        int t = v[0]; v[0] = v[end]; v[end] = t;
        sift(v, 0, end - 1);
    }
}
""",
    "test/main.c": """\
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "mini.h"
int main(void) {
    double a[1000], b[1000];
    for (int i = 0; i < 1000; i++) { a[i] = sin(i * 0.01); b[i] = cos(i * 0.02); }
    vec_axpy(0.5, a, b, 1000);
    printf("dot %.9f\\n", vec_dot(a, b, 1000));
    char text[] = "the quick brown  fox\\tjumps over the lazy dog";
    printf("words %zu\\n", text_words(text));
    text_upper(text);
    printf("upper %s hash %08x\\n", text, (unsigned)hash_fnv1a(text, strlen(text)));
    int v[500];
    unsigned x = 12345;
    for (int i = 0; i < 500; i++) { x = x * 1103515245u + 12345u; v[i] = (int)(x >> 8) % 10000; }
    sort_ints(v, 500);
    for (int i = 1; i < 500; i++) if (v[i - 1] > v[i]) { puts("NOT SORTED"); return 1; }
    printf("sorted min %d median %d max %d\\n", v[0], v[250], v[499]);
    printf("where %s\\n", mini_where());
    return 0;
}
""",
}


def _write_project(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Makefile").write_text(MAKEFILE)
    for rel, text in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _make(args: list[str], cwd: Path, cc: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args, f"CC={cc}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _build_small_project(tmp_path: Path, pristine: Path, name: str, cc: str,
                         env: dict) -> dict:
    """Build a fresh copy at tmp_path/build with make -j2, run its program,
    check its dependency files, then move it aside to tmp_path/build-<name>."""
    build = tmp_path / "build"
    if build.exists():
        shutil.rmtree(build)
    shutil.copytree(pristine, build)
    made = _make(["-j2"], build, cc, env)
    assert made.returncode == 0, f"[{name}] make -j2 failed:\n{made.stdout}{made.stderr}"
    assert "mirecc:" not in made.stderr, f"[{name}] mirecc complained:\n{made.stderr}"
    run = subprocess.run([str(build / "test" / "main")], capture_output=True, text=True)
    assert run.returncode == 0, f"[{name}] test program failed: {run.stdout}{run.stderr}"
    # the dependency files work: up to date now, out of date after a header changes
    assert _make(["-q"], build, cc, env).returncode == 0, f"[{name}] not up to date after make"
    files = sorted(str(p.relative_to(build)) for p in build.rglob("*") if p.is_file())
    dep_files = {str(p.relative_to(build)): p.read_bytes() for p in build.rglob("*.d")}
    inv = rp.inventory(build)
    config_h = build / "include" / "config.h"
    later = config_h.stat().st_mtime + 10
    os.utime(config_h, (later, later))
    assert _make(["-q"], build, cc, env).returncode == 1, \
        f"[{name}] touching include/config.h did not make the build out of date"
    build.rename(tmp_path / f"build-{name}")
    return {"out": run.stdout, "deps": dep_files, "inv": inv, "files": files}


@pytest.mark.parametrize("mode", ["default", "capture"])
def test_makefile_project_same_objects_deps_and_output(tmp_path, clang, mode):
    """Default mode (mirecc execs clang) and capture mode (a side clang run
    emits each optimised TU's IR first): the build's own outputs must not
    change in either."""
    _need("make", "ar")
    pristine = tmp_path / "pristine"
    _write_project(pristine)
    env = rp.build_env()
    ref = _build_small_project(tmp_path, pristine, "clang", clang, env)
    capture_dir = tmp_path / "capture"
    if mode == "capture":
        env = rp.build_env(MIRECC_CAPTURE_DIR=str(capture_dir),
                           MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    got = _build_small_project(tmp_path, pristine, "mirecc", str(MIRECC), env)

    assert got["out"] == ref["out"]
    assert "where lib/vec.c" in ref["out"]
    assert got["files"] == ref["files"], "mirecc left other files in the build tree"
    # .d files: same names, byte for byte (5: four library files + main)
    assert sorted(ref["deps"]) == sorted(got["deps"]) and len(ref["deps"]) == 5
    for rel in ref["deps"]:
        assert got["deps"][rel] == ref["deps"][rel], f"{rel} differs"
    assert b"include/config.h" in ref["deps"]["lib/vec.d"]
    assert b"include/config.h:" in ref["deps"]["lib/hash.d"]  # -MP phony target
    # objects: 5 .o files + 4 archive members, all identical
    objects = rp.compare(ref["inv"]["objects"], got["inv"]["objects"])
    assert objects["total"] == 9, objects
    assert rp.all_identical(objects), objects
    linked = rp.compare(ref["inv"]["linked"], got["inv"]["linked"])
    assert linked["total"] == 1 and rp.all_identical(linked), linked
    if mode == "capture":
        # vec.c, hash.c, sort.c and main.c are optimised; text.c is -O0
        manifest = (capture_dir / "manifest.jsonl").read_text().splitlines()
        sources = sorted(Path(json.loads(line)["source"]).name for line in manifest)
        assert sources == ["hash.c", "main.c", "sort.c", "vec.c"], sources
    else:
        assert not capture_dir.exists()


# --------------------------------------------------------------------------
# (c) zlib, Debian's source package

def test_zlib_builds_identically_and_passes_make_test(tmp_path):
    _need("make")
    try:
        # Never touches apt's configuration from a test: without a deb-src
        # entry this skips (benchmarks/real_projects.py adds one as root).
        src = rp.fetch_source("zlib", rp.DEFAULT_WORK / "src", configure_apt=False,
                              logs=tmp_path / "fetch-logs")
    except rp.FetchError as exc:
        pytest.skip(f"apt-get source zlib does not work here: {str(exc).splitlines()[0]}")
    result = rp.run_source_project("zlib", tmp_path, MIRECC, src=src)
    info = _explain(result)
    assert result.error is None, info
    for side in result.sides:
        assert side.build_ok, info
        assert side.tests_ok and "zlib test OK" in side.tests, info
    assert result.checks["test_output_same"] is True, info
    assert result.objects["total"] >= 40, info   # 15 .o + 15 .lo + libz.a members
    assert rp.all_identical(result.objects), info
    assert rp.all_identical(result.linked), info
    assert result.ok, info
