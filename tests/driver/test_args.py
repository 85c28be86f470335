"""Behavioural tests: mirecc behaves exactly as clang-14 on the same command line.

Each row is one command line.  It runs twice in the *same* directory path
(so -g, -v and -### output, which embed the working directory, compare as
they are): first ``clang-14 ARGS`` in a fresh copy of a small project, whose
result is then moved aside, then ``mirecc ARGS`` in another fresh copy.
Compared: exit code, stdout, stderr, and every file left in the directory,
byte for byte (objects, executables, .d files, preprocessed output,
assembly, bitcode).  Rows marked ``run`` also run the program built.

The -O2 rows run again with ``--explain`` and some with MIRECC_CAPTURE_DIR,
so that mirecc's ML side path (the IR emission run) really runs: the user's
outputs must still be identical.  --explain prints the explanation before
the compile, on stdout (on stderr when the output goes to stdout), so for
those rows the stream must be the explanation followed by exactly clang's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HELLO_C = r"""#include <stdio.h>
#include "util.h"

#ifndef GREETING
#define GREETING "hello"
#endif

int main(void) {
    int data[64];
    for (int i = 0; i < 64; i++)
        data[i] = i * 3;
    printf("%s %d\n", GREETING, util_sum(data, 64));
    return 0;
}
"""
UTIL_H = r"""#ifndef UTIL_H
#define UTIL_H
#ifdef __cplusplus
extern "C" {
#endif
int util_sum(const int *v, int n);
#ifdef __cplusplus
}
#endif
#endif
"""
UTIL_C = r"""#include "util.h"

int util_sum(const int *v, int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}
"""
HELLO_CPP = r"""#include <cstdio>
#include <vector>
#include "util.h"

template <typename T> static T square(T x) { return x * x; }

int main() {
    std::vector<int> v;
    for (int i = 0; i < 10; i++)
        v.push_back(square(i));
    std::printf("cpp %d\n", util_sum(v.data(), (int)v.size()));
    return 0;
}
"""
LIB_C = r"""int lib_scale(int *v, int n, int k) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        v[i] *= k;
        s += v[i];
    }
    return s;
}
"""
OMP_C = r"""#include <stdio.h>
#include <omp.h>

int main(void) {
    long s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < 100000; i++)
        s += i % 7;
    printf("sum %ld, threads>0: %d\n", s, omp_get_max_threads() > 0);
    return 0;
}
"""
WARN_C = "int as_int(int *p) { return p; }  /* -Wint-conversion, on by default */\n"
ERROR_C = "int main(void) { return undeclared_name; }\n"

PROJECT = {
    "hello.c": HELLO_C, "util.h": UTIL_H, "util.c": UTIL_C, "hello.cpp": HELLO_CPP,
    "lib.c": LIB_C, "omp.c": OMP_C, "warn.c": WARN_C, "error.c": ERROR_C,
    "upper.I": UTIL_C,  # clang: unknown suffix, a linker input
    "pre.h": "#define PRE_INCLUDED 1\n",
    "inc/extra.h": "#define EXTRA_H 1\n",
    "sys/sys_extra.h": "#define SYS_EXTRA_H 1\n",
    "args.rsp": '-c hello.c -o "rsp out.o" "-DGREETING=\\"hi there\\"" @more.rsp\n',
    "more.rsp": "-DEXTRA=1\n-Wall\n",
}
# Built once with clang-14 for the link-only rows, then part of every copy.
PREBUILT = {"main.o": ["-O2", "-c", "hello.c", "-o", "main.o"],
            "util.o": ["-O2", "-c", "util.c", "-o", "util.o"]}

EXPLAIN_HEADER = re.compile(rb"^mirecc \S+ --explain \(compiler: /usr/bin/clang(\+\+)?-14\)\n")
TU_LINE = re.compile(rb"^\S.* \((c|c\+\+|cpp-output|c\+\+-cpp-output), -O\w+\): \d+ decisions?, \d+ applied$", re.M)
# clang's own temporary files (compile + link, -###, -v) have random names.
CLANG_TEMP = re.compile(rb"(/[\w.+-]+)-[0-9a-f]{6}(\.\w+)")


@dataclass(frozen=True)
class Row:
    id: str
    args: tuple[str, ...]
    cxx: bool = False            # mirecc++ against clang++-14
    stdin: bytes | None = None   # piped to both
    run: str | None = None       # program to run afterwards, output compared
    explain: str | None = None   # "text" or "json": mirecc gets --explain[=json]
    # where the explanation goes: stdout, or stderr where clang writes its
    # own result on stdout (-o -, and queries without -o: -E, -M, --version)
    explain_stream: str = "stdout"
    capture: bool = False        # mirecc runs with MIRECC_CAPTURE_DIR
    tus: int | None = None       # TUs the ML path must see (explain/capture rows)
    marks: tuple = field(default_factory=tuple)


def variants(id: str, *args: str, explain: bool = True, capture: bool = False,
             tus: int | None = None, **kw) -> list[Row]:
    """The row at -O0 and -O2; at -O2 also with --explain (and capture)."""
    rows = [Row(f"O0-{id}", ("-O0", *args), **kw), Row(f"O2-{id}", ("-O2", *args), **kw)]
    if explain:
        rows.append(Row(f"O2-explain-{id}", ("-O2", *args), explain="text", tus=tus, **kw))
    if capture:
        rows.append(Row(f"O2-capture-{id}", ("-O2", *args), capture=True, tus=tus, **kw))
    return rows


def single(id: str, *args: str, **kw) -> list[Row]:
    return [Row(id, tuple(args), **kw)]


ROWS: list[Row] = [
    # --- phases and output forms ---------------------------------------------
    *variants("c", "-c", "hello.c", tus=1, capture=True),
    *variants("c-o", "-c", "hello.c", "-o", "out.o", tus=1),
    *variants("c-o-glued", "-c", "hello.c", "-oout.o", tus=1),
    *variants("c-output-eq", "-c", "hello.c", "--output=out.o", tus=1),
    *variants("S", "-S", "hello.c", tus=1),
    *variants("S-o", "-S", "hello.c", "-o", "hello.asm", tus=1),
    *variants("S-o-stdout", "-S", "hello.c", "-o", "-", tus=1, explain_stream="stderr"),
    *variants("E", "-E", "hello.c", tus=0, explain_stream="stderr"),
    *variants("E-o", "-E", "hello.c", "-o", "hello.i", tus=0),
    *variants("emit-llvm-c", "-c", "-emit-llvm", "hello.c", "-o", "hello.bc", tus=1),
    *variants("emit-llvm-S", "-S", "-emit-llvm", "hello.c", "-o", "hello.ll", tus=1),
    *variants("fsyntax-only", "-fsyntax-only", "hello.c", tus=0, explain_stream="stderr"),
    *variants("Xclang-fsyntax-only", "-c", "hello.c", "-Xclang", "-fsyntax-only", tus=0,
              explain_stream="stderr"),
    *variants("save-temps", "-save-temps", "-c", "hello.c", tus=1),
    *variants("MJ", "-c", "hello.c", "-MJ", "cdb.json", tus=1),
    *variants("pch-header", "-c", "util.h", tus=0),
    # --- -x forms ------------------------------------------------------------
    *variants("x-cxx", "-x", "c++", "-c", "hello.c", "-o", "hx.o", tus=1),
    *variants("x-glued", "-xc++", "-c", "hello.c", "-o", "hx.o", tus=1),
    *variants("x-none", "-x", "c++", "-c", "hello.c", "-x", "none", "util.c", tus=2),
    # --- dependency files --------------------------------------------------
    *variants("M", "-M", "hello.c", tus=0, explain_stream="stderr"),
    *variants("MM", "-MM", "hello.c", tus=0, explain_stream="stderr"),
    *variants("MD", "-c", "-MD", "hello.c", tus=1, capture=True),
    *variants("MMD-MF-MT", "-c", "-MMD", "-MF", "hello.dep", "-MT", "custom_target",
              "hello.c", "-o", "h.o", tus=1),
    *variants("MD-MQ-MP", "-c", "-MD", "-MQ", "$(OBJ)", "-MP", "hello.c", tus=1),
    *variants("MF-MT-glued", "-c", "-MD", "-MFh.d", "-MTtgt", "hello.c", tus=1),
    *variants("Wp-MD", "-c", "-Wp,-MD,h.d", "hello.c", tus=1),
    *variants("Wp-MMD", "-c", "-Wp,-MMD,.h.o.d", "hello.c", "-o", "h.o", tus=1),
    # --- several inputs, compile and link, link only -----------------------
    *variants("c-several", "-c", "hello.c", "util.c", "lib.c", tus=3, capture=True),
    *variants("c-several-one-o", "-c", "hello.c", "util.c", "-o", "x.o", tus=2),
    *variants("compile-link", "hello.c", "util.c", "-o", "prog", run="./prog", tus=2,
              capture=True),
    *variants("compile-link-object", "hello.c", "util.o", "-o", "prog", run="./prog", tus=1),
    *variants("link-only", "main.o", "util.o", "-o", "prog", run="./prog", tus=0),
    *variants("link-flags-Werror", "-Werror", "hello.c", "util.c", "-o", "prog", "-lm",
              "-L.", "-Wl,--as-needed", "-rdynamic", run="./prog", tus=2),
    *variants("rpath", "hello.c", "util.c", "-rpath", "/opt/nowhere", "-o", "prog",
              run="./prog", tus=2),
    # --- response file, stdin ----------------------------------------------
    *variants("rsp", "@args.rsp", tus=1, capture=True),
    *variants("rsp-missing", "-c", "@missing.rsp", "hello.c", tus=None),
    *variants("stdin", "-x", "c", "-", "-c", "-o", "stdin.o", stdin=HELLO_C.encode(), tus=1,
              capture=True),
    *variants("stdin-E", "-E", "-x", "c", "-", stdin=HELLO_C.encode(), tus=0,
              explain_stream="stderr"),
    *variants("stdin-without-x", "-c", "-", stdin=HELLO_C.encode()),
    *variants("stdin-S-to-stdout", "-x", "c", "-", "-S", "-o", "-", stdin=HELLO_C.encode(),
              tus=1, explain_stream="stderr"),
    *variants("stdin-link", "-x", "c", "-", "-x", "none", "util.c", "-o", "prog",
              stdin=HELLO_C.encode(), run="./prog", tus=2),
    # --- separate-operand flags --------------------------------------------
    *variants("sep-I-isystem-include-D", "-c", "hello.c", "-I", "inc", "-isystem", "sys",
              "-include", "pre.h", "-D", "EXTRA=2", "-U", "EXTRA", "-o", "sep.o", tus=1),
    *variants("sep-Xclang-mllvm-target", "-c", "hello.c", "-Xclang", "-fno-pch-timestamp",
              "-mllvm", "-inline-threshold=100", "-target", "x86_64-pc-linux-gnu",
              "-o", "sep.o", tus=1),
    # --- assorted flags ------------------------------------------------------
    *variants("fopenmp", "-fopenmp", "omp.c", "-o", "omp", run="./omp", tus=1, capture=True),
    *variants("shared-fPIC", "-shared", "-fPIC", "lib.c", "-o", "libx.so", tus=1),
    *variants("fPIC-c", "-fPIC", "-c", "lib.c", tus=1),
    *variants("g", "-g", "-c", "hello.c", "-o", "g.o", tus=1),
    *variants("v-compile", "-v", "-c", "hello.c", "-o", "v.o", tus=1),
    *variants("hash3-compile", "-###", "-c", "hello.c", "-o", "h.o", tus=0),
    *variants("hash3-link", "-###", "hello.c", "util.c", "-o", "prog", tus=0),
    *variants("upper-I-suffix", "-c", "upper.I", tus=0),
    # --- diagnostics ---------------------------------------------------------
    *variants("error", "-c", "error.c"),
    *variants("warning", "-c", "warn.c", tus=1),
    *variants("Werror", "-Werror", "-c", "warn.c"),
    *variants("missing-input", "-c", "missing.c"),
    *variants("unknown-flag", "-fbogus-flag", "-c", "hello.c"),
    *variants("error-link", "error.c", "util.c", "-o", "prog"),
    # A flag only the C++ TU uses, with -Werror: the side IR run, one per TU,
    # must not fail on -stdlib= being unused for the C TU (it did, and mirecc
    # warned where clang says nothing; fixed in mlpath by 70f00d2).
    *variants("cxx-only-flag-Werror", "-Werror", "-stdlib=libstdc++", "-c", "util.c",
              "hello.cpp", tus=2, capture=True),
    # --- JSON explanation ----------------------------------------------------
    Row("O2-explain-json-c-several", ("-O2", "-c", "hello.c", "util.c"), explain="json",
        tus=2),
    Row("O2-explain-json-stdin", ("-O2", "-x", "c", "-", "-c", "-o", "stdin.o"),
        stdin=HELLO_C.encode(), explain="json", tus=1),
    # --- optimisation levels -------------------------------------------------
    *[r for opts, name in [(("-O2", "-O0"), "O2-then-O0"), (("-O0", "-O3"), "O0-then-O3"),
                           (("-Os",), "Os"), (("-Oz",), "Oz"), (("-Ofast",), "Ofast"),
                           (("-O",), "O-bare"), (("-O1",), "O1"), (("-Og",), "Og")]
      for r in (Row(name, (*opts, "-c", "hello.c", "-o", "o.o")),
                Row(f"explain-{name}", (*opts, "-c", "hello.c", "-o", "o.o"),
                    explain="text", tus=0 if name == "O2-then-O0" else 1))],
    # --- questions -------------------------------------------------------------
    *single("version", "--version"),
    *single("explain-version", "--version", explain="text", tus=0, explain_stream="stderr"),
    *single("v", "-v"),
    *single("hash3", "-###"),
    *single("print-resource-dir", "-print-resource-dir"),
    *single("print-prog-name-ld", "-print-prog-name=ld"),
    *single("print-file-name", "-print-file-name=libc.so"),
    *single("print-search-dirs", "-print-search-dirs"),
    *single("dumpversion", "-dumpversion"),
    *single("dumpmachine", "-dumpmachine"),
    *single("no-input", ),
    *single("explain-no-input", explain="text", tus=0),
    # --- mirecc++ against clang++ ----------------------------------------------
    *variants("cxx-c", "-c", "hello.cpp", cxx=True, tus=1, capture=True),
    *variants("cxx-link", "hello.cpp", "util.c", "-o", "prog", cxx=True, run="./prog",
              tus=2),
    *variants("cxx-c-file-as-cxx", "-c", "util.c", cxx=True, tus=1),
    *variants("cxx-x-c", "-x", "c", "-c", "util.c", cxx=True, tus=1),
    *variants("cxx-S", "-S", "hello.cpp", cxx=True, tus=1),
    *variants("cxx-std-MMD", "-std=c++17", "-c", "-MMD", "hello.cpp", cxx=True, tus=1),
    *variants("cxx-E", "-E", "hello.cpp", "-o", "hello.ii", cxx=True, tus=0),
    *variants("cxx-stdin", "-x", "c++", "-", "-c", "-o", "cxxstdin.o", cxx=True,
              stdin=HELLO_CPP.encode(), tus=1),
    *variants("cxx-error", "-c", "error.c", cxx=True),
    *single("cxx-version", "--version", cxx=True),
]


@pytest.fixture(scope="session")
def project(tmp_path_factory, toolchain) -> Path:
    """The small project every row starts from (never modified by a row)."""
    root = tmp_path_factory.mktemp("project")
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for out, args in PREBUILT.items():
        subprocess.run([toolchain.cc, *args], cwd=root, check=True, capture_output=True)
    return root


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def normalise(text: bytes, work: Path) -> bytes:
    return CLANG_TEMP.sub(rb"\1-XXXXXX\2", text.replace(str(work).encode(), b"<work>"))


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes
    files: dict[str, bytes]
    ran: tuple[int, bytes, bytes] | None
    leftovers: list[str]


def run_in(work: Path, argv: list[str], env: dict, row: Row) -> Result:
    proc = subprocess.run(argv, cwd=work, env=env, input=row.stdin or b"",
                          capture_output=True, timeout=120)
    ran = None
    if row.run and proc.returncode == 0:
        prog = subprocess.run([row.run], cwd=work, env={**env, "OMP_NUM_THREADS": "2"},
                              capture_output=True, timeout=60)
        ran = (prog.returncode, prog.stdout, prog.stderr)
    tmpdir = Path(env["TMPDIR"])
    leftovers = sorted(p.name for p in tmpdir.iterdir())
    for p in tmpdir.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return Result(proc.returncode, normalise(proc.stdout, work), normalise(proc.stderr, work),
                  snapshot(work), ran, leftovers)


def split_explanation(mirecc_stream: bytes, clang_stream: bytes, where: str) -> bytes:
    """mirecc's stream must be an explanation followed by clang's stream."""
    assert mirecc_stream.endswith(clang_stream), (
        f"mirecc's {where} does not end with clang's:\n"
        f"{mirecc_stream.decode(errors='replace')}\n--- clang:\n"
        f"{clang_stream.decode(errors='replace')}")
    return mirecc_stream[:len(mirecc_stream) - len(clang_stream)]


def check_explanation(text: bytes, row: Row) -> None:
    if row.explain == "json":
        data = json.loads(text)  # the whole prefix, nothing else
        assert data["compiler"].startswith("/usr/bin/clang")
        if row.tus is not None:
            assert len(data["translation_units"]) == row.tus, data
            if row.tus:
                assert data["fallback"] is None, data
        return
    assert EXPLAIN_HEADER.match(text), text
    if row.tus is not None:
        assert len(TU_LINE.findall(text)) == row.tus, text.decode()
        assert text.count(b"\n  IR: ") == row.tus, text.decode()
        if row.tus:
            assert b"ML path failed" not in text, text.decode()


def describe_file_differences(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            out.append(f"{name}: only after clang")
        elif name not in a:
            out.append(f"{name}: only after mirecc")
        elif a[name] != b[name]:
            out.append(f"{name}: differs ({len(a[name])} vs {len(b[name])} bytes)")
    return out


def params(rows: list[Row]):
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)), "duplicate row ids"
    return [pytest.param(r, id=r.id, marks=r.marks) for r in rows]


@pytest.mark.parametrize("row", params(ROWS))
def test_same_as_clang(row: Row, project: Path, tmp_path: Path, toolchain, mirecc_env):
    work = tmp_path / "w"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**mirecc_env, "TMPDIR": str(tmpdir)}
    capture_dir = tmp_path / "capture"
    mirecc_env_row = {**env, "MIRECC_CAPTURE_DIR": str(capture_dir)} if row.capture else env
    own = [f"--explain={row.explain}"] if row.explain == "json" else \
        ["--explain"] if row.explain else []

    results = {}
    for who, argv, run_env in (
            ("clang", [toolchain.cxx if row.cxx else toolchain.cc, *row.args], env),
            ("mirecc", [toolchain.mireccxx if row.cxx else toolchain.mirecc, *own, *row.args],
             mirecc_env_row)):
        shutil.copytree(project, work)
        results[who] = run_in(work, argv, run_env, row)
        work.rename(tmp_path / who)
    clang, mirecc = results["clang"], results["mirecc"]

    assert mirecc.rc == clang.rc, mirecc.stderr.decode(errors="replace")
    streams = {"stdout": (mirecc.stdout, clang.stdout), "stderr": (mirecc.stderr, clang.stderr)}
    if row.explain:
        where = row.explain_stream
        m, c = streams[where]
        explanation = split_explanation(m, c, where)
        check_explanation(explanation, row)
        streams[where] = (c, c)
    for name, (m, c) in streams.items():
        assert m.decode(errors="replace") == c.decode(errors="replace"), name
    assert describe_file_differences(clang.files, mirecc.files) == []
    assert mirecc.ran == clang.ran
    assert mirecc.leftovers == clang.leftovers == []

    if row.capture:
        manifest = capture_dir / "manifest.jsonl"
        records = manifest.read_text().splitlines() if manifest.exists() else []
        assert len(records) == row.tus
        for record in map(json.loads, records):
            assert (capture_dir / record["ir"]).is_file()
