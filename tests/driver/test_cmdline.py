"""Table-driven tests of mirecc.frontend.cmdline: ``classify()`` and response files.

One row per command line: what kind of call it is, which sources (language,
and whether -x named it), the optimisation level, the output, and the flags
kept for the side IR run (outputs, phases, dependency files, link-step flags
and side effects dropped; -D/-I/-O and friends kept with their operands).
Where a row records clang's own reading of an unusual form, it was checked
with ``clang-14 -###``.
"""

from __future__ import annotations

import os
import shlex

import pytest

from mirecc.frontend.cmdline import (ResponseFileError, classify, expand_response_files,
                            language_of, tokenize_gnu)

UNSET = object()


def S(path: str, lang: str, x: bool = False) -> tuple:
    """An expected source: path, language, language named by -x."""
    return (path, lang, x)


def row(id: str, cmd: str | list[str], *, cxx: bool = False, kind: str | None = "compile",
        src: list | None = None, other: list | None = None, opt=UNSET,
        ir: str | list[str] | None = None, out=UNSET, obj_only: bool | None = None,
        reason: str | None = None):
    """A table row; only the fields given are checked."""
    expect: dict = {}
    if kind is not None:
        expect["kind"] = kind
    if src is not None:
        expect["sources"] = [tuple(s) for s in src]
    if other is not None:
        expect["other_inputs"] = list(other)
    if opt is not UNSET:
        expect["opt_level"] = opt
    if ir is not None:
        expect["ir_flags"] = shlex.split(ir) if isinstance(ir, str) else list(ir)
    if out is not UNSET:
        expect["output"] = out
    if obj_only is not None:
        expect["emits_object_only"] = obj_only
    if reason is not None:
        expect["reason~"] = reason
    args = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
    return pytest.param(args, cxx, expect, id=id)


def observed(inv) -> dict:
    return {
        "kind": inv.kind,
        "sources": [(s.path, s.language, s.explicit_language) for s in inv.sources],
        "other_inputs": list(inv.other_inputs),
        "opt_level": inv.opt_level,
        "ir_flags": list(inv.ir_flags),
        "output": inv.output,
        "emits_object_only": inv.emits_object_only,
    }


C = [S("a.c", "c")]

CLASSIFY_ROWS = [
    # --- phases -------------------------------------------------------------
    row("c", "-c a.c", src=C, opt=None, ir="", out=None, obj_only=True),
    row("c-O2-o", "-O2 -c a.c -o a.o", src=C, opt="2", ir="-O2", out="a.o", obj_only=True),
    row("S", "-S -O2 a.c", src=C, opt="2", ir="-O2", obj_only=True),
    row("compile-long", "--compile -O2 a.c", src=C, ir="-O2", obj_only=True),
    row("assemble-long", "--assemble -O2 a.c", src=C, ir="-O2", obj_only=True),
    row("emit-llvm-c", "-O2 -c -emit-llvm a.c -o a.bc", src=C, ir="-O2", out="a.bc",
        obj_only=True),
    row("emit-llvm-S", "-O2 -S -emit-llvm a.c -o a.ll", src=C, ir="-O2", obj_only=True),
    row("no-phase-links", "-O2 a.c", src=C, obj_only=False),
    row("E", "-E a.c", kind="query", src=C, reason="-E"),
    row("E-O2-o", "-O2 -E a.c -o a.i", kind="query", opt="2", out="a.i"),
    row("E-beats-c", "-c -E a.c", kind="query"),
    row("preprocess-long", "-O2 --preprocess a.c", kind="query"),
    row("fsyntax-only", "-O2 -fsyntax-only a.c", kind="query", src=C, reason="-fsyntax-only"),
    row("analyze", "-O2 --analyze a.c", kind="query"),
    row("emit-ast", "-O2 -emit-ast a.c", kind="query"),
    row("Xclang-fsyntax-only", "-O2 -c a.c -Xclang -fsyntax-only", kind="query",
        reason="-Xclang -fsyntax-only"),
    row("Xclang-ast-dump-json", "-O2 -c a.c -Xclang -ast-dump=json", kind="query"),
    row("Xclang-emit-pch", "-O2 -c a.h -Xclang -emit-pch", kind="query"),
    row("Xclang-codegen-flag-compiles", "-O2 -c a.c -Xclang -fno-pch-timestamp",
        ir="-O2 -Xclang -fno-pch-timestamp"),
    # --- -o forms -----------------------------------------------------------
    row("o-separate", "-c a.c -o out.o", out="out.o", ir=""),
    row("o-glued", "-c a.c -oout.o", out="out.o", ir=""),
    row("o-output-eq", "-c a.c --output=out.o", out="out.o", ir=""),
    row("o-output-separate", "-c a.c --output out.o", src=C, out="out.o", ir=""),
    row("o-stdout", "-O2 -S a.c -o -", src=C, out="-", ir="-O2"),
    row("o-before-input", "-o prog -O2 a.c", src=C, out="prog", obj_only=False),
    row("o-last-wins", "-c a.c -o x.o -o y.o", out="y.o"),
    row("o-dir-path", "-c a.c -o build/obj/a.o", out="build/obj/a.o"),
    row("objcmt-not-output", "-c a.c -objcmt-migrate-literals", out=None,
        ir="-objcmt-migrate-literals"),
    # --- -x forms -----------------------------------------------------------
    row("x-separate", "-x c++ -c a.c", src=[S("a.c", "c++", True)], ir=""),
    row("x-glued", "-xc++ -c a.c", src=[S("a.c", "c++", True)], ir=""),
    row("x-glued-c", "-xc -c a.cpp", src=[S("a.cpp", "c", True)]),
    row("x-language-eq", "--language=c++ -c a.c", src=[S("a.c", "c++", True)], ir=""),
    row("x-language-separate", "--language c++ -c a.c", src=[S("a.c", "c++", True)], ir=""),
    row("x-none-resets", "-x c++ a.c -x none b.c c.cpp -c",
        src=[S("a.c", "c++", True), S("b.c", "c"), S("c.cpp", "c++")], ir=""),
    row("x-applies-to-following-only", "-c a.c -x c++ b.c",
        src=[S("a.c", "c"), S("b.c", "c++", True)]),
    row("x-after-last-input", "-c a.c -x c++", src=C, ir=""),
    row("x-makes-object-a-source", "-x c -c weird.o", src=[S("weird.o", "c", True)], other=[]),
    row("x-non-tu-language", "-x assembler-with-cpp -c a.S",
        src=[S("a.S", "assembler-with-cpp", True)]),
    row("x-last-value-wins", "-x c -x c++ -c a.c", src=[S("a.c", "c++", True)]),
    # --- dependency output: -M/-MM are queries, -MD & co. are dropped --------
    row("M", "-M a.c", kind="query", reason="-M"),
    row("MM", "-MM a.c", kind="query", reason="-MM"),
    row("M-MF", "-M -MF a.d a.c", kind="query", src=C),
    row("dependencies-long", "--dependencies a.c", kind="query"),
    row("user-dependencies-long", "--user-dependencies a.c", kind="query"),
    row("MD", "-O2 -c a.c -MD", src=C, ir="-O2"),
    row("MMD", "-O2 -c a.c -MMD", src=C, ir="-O2"),
    row("MD-MF-MT-MQ-MP", "-O2 -c a.c -MD -MF dep/a.d -MT a.o -MQ '$(OBJ)' -MP -MG -MV",
        src=C, ir="-O2", other=[]),
    row("MF-MT-MQ-glued", "-O2 -c a.c -MMD -MFa.d -MTa.o -MQ'$(X)'", src=C, ir="-O2"),
    row("MF-operand-not-input", "-O2 -c a.c -MD -MF x.c", src=C, ir="-O2", other=[]),
    row("MT-operand-not-input", "-O2 -c a.c -MD -MT x.o", src=C, ir="-O2", other=[]),
    row("MJ", "-O2 -c a.c -MJ cdb.json", src=C, ir="-O2"),
    row("MJ-glued", "-O2 -c a.c -MJcdb.json", src=C, ir="-O2"),
    row("Wp-MD", "-O2 -c a.c -Wp,-MD,.a.o.d", src=C, ir="-O2"),
    row("Wp-MMD", "-O2 -c a.c -Wp,-MMD,.a.o.d", src=C, ir="-O2"),
    row("Wp-other-kept", "-O2 -c a.c -Wp,-DFOO=1", src=C, ir="-O2 -Wp,-DFOO=1"),
    row("write-dependencies-long", "-O2 -c a.c --write-dependencies --write-user-dependencies",
        src=C, ir="-O2"),
    row("dependency-file", "-O2 -c a.c -dependency-file a.d", src=C, ir="-O2", other=[]),
    row("dependency-dot", "-O2 -c a.c -dependency-dot deps.dot", src=C, ir="-O2"),
    # --- several inputs, compile and link -----------------------------------
    row("several-sources", "-O2 -c a.c b.cpp c.cc d.cxx e.C",
        src=[S("a.c", "c"), S("b.cpp", "c++"), S("c.cc", "c++"), S("d.cxx", "c++"),
             S("e.C", "c++")], other=[], ir="-O2"),
    row("compile-and-link", "-O2 a.c b.c -o prog",
        src=[S("a.c", "c"), S("b.c", "c")], other=[], out="prog", obj_only=False, ir="-O2"),
    row("compile-and-link-mixed", "-O2 a.c b.o libz.a libq.so -o prog",
        src=C, other=["b.o", "libz.a", "libq.so"], out="prog", obj_only=False),
    row("link-only", "-O2 a.o b.o -o prog", kind="link", src=[], other=["a.o", "b.o"],
        out="prog", opt="2"),
    row("link-only-libs", "a.o -lm -L/opt/lib -o prog", kind="link", other=["a.o"], ir=""),
    row("assembler-sources", "-O2 -c a.c b.s c.S",
        src=[S("a.c", "c"), S("b.s", "assembler"), S("c.S", "assembler-with-cpp")]),
    row("ir-source", "-O2 -c x.ll y.bc", src=[S("x.ll", "ir"), S("y.bc", "ir")]),
    row("preprocessed-sources", "-O2 -c a.i b.ii",
        src=[S("a.i", "cpp-output"), S("b.ii", "c++-cpp-output")]),
    row("double-dash-inputs", "-O2 -c -- a.c -odd.c",
        src=[S("a.c", "c"), S("-odd.c", "c")], out=None),
    row("empty", "", kind="empty", reason="no input files"),
    row("empty-flags-only", "-O2 -Wall", kind="empty", opt="2"),
    # --- standard input -----------------------------------------------------
    row("stdin-x-c", "-x c -c - -o out.o", src=[S("-", "c", True)], out="out.o", ir=""),
    row("stdin-x-cxx-O2", "-O2 -x c++ - -c", src=[S("-", "c++", True)], opt="2"),
    row("stdin-without-x", "-O2 -c -", src=[S("-", "c")]),
    row("stdin-without-x-cxx-driver", "-O2 -c -", cxx=True, src=[S("-", "c++")]),
    row("stdin-E", "-E -x c -", kind="query", src=[S("-", "c", True)]),
    # --- assorted flags -----------------------------------------------------
    row("fopenmp", "-fopenmp -O2 -c a.c", src=C, ir="-fopenmp -O2"),
    row("fopenmp-link", "-fopenmp -O2 a.c -o prog", src=C, ir="-fopenmp -O2"),
    row("shared-fPIC", "-shared -fPIC -O2 a.c -o liba.so", src=C, ir="-fPIC -O2",
        out="liba.so", obj_only=False),
    row("fPIC-c", "-fPIC -c a.c", src=C, ir="-fPIC", obj_only=True),
    row("std-W-g-kept", "-std=c11 -Wall -Wextra -Werror -g -O2 -c a.c", src=C,
        ir="-std=c11 -Wall -Wextra -Werror -g -O2"),
    row("D-I-glued-kept", "-DX=1 -UY -Iinc -O2 -c a.c", src=C, ir="-DX=1 -UY -Iinc -O2"),
    row("side-effects-dropped",
        "-O2 -c a.c -save-temps -save-temps=obj -ftime-trace -ftime-trace=t.json "
        "-ftime-report -serialize-diagnostics a.dia --serialize-diagnostics=b.dia "
        "-save-stats=cwd -foptimization-record-file=r.yaml",
        src=C, ir="-O2", other=[]),
    row("link-flags-dropped",
        "-O2 -Werror a.c -o prog -lm -l pthread -L/opt/lib -L /usr/lib -Wl,--as-needed "
        "-Xlinker -z -Xlinker now -z relro -rpath /opt/lib -shared -rdynamic -no-pie -pie "
        "-static-libgcc -fuse-ld=lld -s -T script.ld -u sym -e entry",
        src=C, other=[], ir="-O2 -Werror", out="prog"),
    row("darwin-link-flags-dropped",
        "-O2 a.c -framework Foo -sectcreate seg sect data.bin -segaddr seg 0x1000 "
        "-install_name lib.dylib", src=C, other=[], ir="-O2"),
    row("static-kept", "-O2 -static a.c -o prog", src=C, ir="-O2 -static"),
    row("pthread-kept", "-O2 -pthread a.c -o prog", src=C, ir="-O2 -pthread"),
    # --- questions: compile nothing -----------------------------------------
    row("version", "--version", kind="query", reason="--version"),
    row("version-with-input", "-O2 --version a.c", kind="query"),
    row("v-alone", "-v", kind="empty", reason="-v without inputs"),
    row("v-compile", "-v -O2 -c a.c", src=C, ir="-O2"),
    row("verbose-long", "--verbose -O2 -c a.c", src=C, ir="-O2"),
    row("hash-hash-hash", "-### -O2 -c a.c", kind="query", reason="-###"),
    row("print-resource-dir", "-print-resource-dir", kind="query"),
    row("print-prog-name", "-print-prog-name=ld", kind="query", src=[], other=[]),
    row("print-file-name", "-print-file-name=libc.so", kind="query"),
    row("print-long-form", "--print-prog-name=ld", kind="query"),
    row("print-search-dirs", "-print-search-dirs", kind="query"),
    row("print-libgcc", "-print-libgcc-file-name", kind="query"),
    row("print-target-triple", "-print-target-triple", kind="query"),
    row("dumpversion", "-dumpversion", kind="query"),
    row("dumpmachine", "-dumpmachine", kind="query"),
    row("help", "--help", kind="query"),
    row("ccc-print-phases", "-ccc-print-phases -O2 a.c", kind="query"),
    # --- optimisation levels ------------------------------------------------
    row("O-none", "-c a.c", opt=None),
    row("O0", "-O0 -c a.c", opt=None, ir="-O0"),
    row("O00", "-O00 -c a.c", opt=None),
    row("O1", "-O1 -c a.c", opt="1"),
    row("O2", "-O2 -c a.c", opt="2"),
    row("O3", "-O3 -c a.c", opt="3"),
    row("O4", "-O4 -c a.c", opt="4"),
    row("Os", "-Os -c a.c", opt="s", ir="-Os"),
    row("Oz", "-Oz -c a.c", opt="z"),
    row("Ofast", "-Ofast -c a.c", opt="fast", ir="-Ofast"),
    row("Og", "-Og -c a.c", opt="g"),
    row("O-bare", "-O -c a.c", opt="1", ir="-O"),
    row("optimize-long", "--optimize -c a.c", opt="1"),
    row("optimize-long-eq", "--optimize=3 -c a.c", opt="3"),
    row("O2-then-O0", "-O2 -O0 -c a.c", opt=None, ir="-O2 -O0"),
    row("O0-then-O3", "-O0 -O3 -c a.c", opt="3", ir="-O0 -O3"),
    row("O3-then-Os", "-O3 -c a.c -Os", opt="s"),
    row("Ofast-then-O1", "-Ofast -O1 -c a.c", opt="1"),
    row("O-unknown-ignored", "-O2 -Ofoo -c a.c", opt="2", ir="-O2 -Ofoo"),
    # --- clang++ driver -----------------------------------------------------
    row("cxx-driver-c-is-cxx", "-O2 -c a.c", cxx=True, src=[S("a.c", "c++")]),
    row("cxx-driver-i-is-cxx", "-O2 -c a.i", cxx=True, src=[S("a.i", "c++-cpp-output")]),
    row("cxx-driver-h-is-cxx-header", "-c a.h", cxx=True, src=[S("a.h", "c++-header")]),
    row("cxx-driver-x-c", "-O2 -x c -c a.c", cxx=True, src=[S("a.c", "c", True)]),
    row("cxx-driver-cpp", "-O2 -c a.cpp", cxx=True, src=[S("a.cpp", "c++")]),
    row("c-driver-cpp-is-cxx", "-O2 -c a.cpp", src=[S("a.cpp", "c++")]),
    # --- flags with a separate operand: the operand is no input -------------
    *[row(f"sep{flag}", f"-O2 -c a.c {flag} op.c", src=C, other=[],
          ir=f"-O2 {flag} op.c")
      for flag in ("-Xclang", "-mllvm", "-target", "-isystem", "-include", "-I", "-D", "-U",
                   "-iquote", "-idirafter", "-imacros", "-iprefix", "-iwithprefix",
                   "-iwithprefixbefore", "-isysroot", "-include-pch", "-cxx-isystem",
                   "-ivfsoverlay", "-Xpreprocessor", "-Xassembler", "-Xanalyzer", "-arch",
                   "--sysroot", "-resource-dir", "--param", "-B", "-F", "-iwithsysroot",
                   "-iframework", "-imultilib", "-Xarch_host", "-Xarch_device", "--config",
                   "-stdlib++-isystem", "-working-directory", "--include-directory",
                   "--define-macro", "--include", "--std")],
    *[row(f"sep-link{flag}", f"-O2 a.c {flag} op.c -o prog", src=C, other=[], ir="-O2")
      for flag in ("-Xlinker", "-z", "-rpath", "-T", "-u", "-e", "-l", "-L", "-b",
                   "--library-directory", "-framework", "-filelist", "-undefined",
                   "--force-link", "--assert", "--for-linker", "-Tbss")],
    row("sep-Xclang-operand-looks-like-flag", "-O2 -c a.c -Xclang -load -Xclang plugin.so",
        src=C, other=[], ir="-O2 -Xclang -load -Xclang plugin.so"),
    row("sep-Xclang-hides-o", "-O2 -c a.c -Xclang -o -Xclang x", out=None,
        ir="-O2 -Xclang -o -Xclang x"),
    row("sep-mllvm-hides-O", "-O2 -c a.c -mllvm -O0", opt="2", ir="-O2 -mllvm -O0"),
    row("sep-include-header", "-O2 -c -include pre.h a.c", src=C,
        ir="-O2 -include pre.h"),
    row("sep-operand-at-end", "-O2 -c a.c -I", src=C, ir="-O2 -I"),
    row("glued-forms-kept", "-O2 -c a.c -isystem/usr/x -include-pch=p.pch --sysroot=/s",
        ir="-O2 -isystem/usr/x -include-pch=p.pch --sysroot=/s"),
]


@pytest.mark.parametrize("args, cxx, expect", CLASSIFY_ROWS)
def test_classify(args, cxx, expect):
    inv = classify(args, cxx_driver=cxx)
    got = observed(inv)
    reason = expect.pop("reason~", None)
    assert {k: got[k] for k in expect} == expect, inv
    if reason is not None:
        assert reason in inv.reason
    assert inv.optimised == (inv.opt_level is not None)
    assert inv.reads_stdin == any(s[0] == "-" for s in got["sources"])


# --- languages by suffix, clang's case-sensitive table ----------------------

SUFFIX_ROWS = [
    ("a.c", "c", "c++"), ("a.i", "cpp-output", "c++-cpp-output"), ("a.h", "c-header",
                                                                     "c++-header"),
    ("a.cc", "c++", "c++"), ("a.cp", "c++", "c++"), ("a.cxx", "c++", "c++"),
    ("a.cpp", "c++", "c++"), ("a.c++", "c++", "c++"), ("a.C", "c++", "c++"),
    ("a.CC", "c++", "c++"), ("a.CXX", "c++", "c++"), ("a.CPP", "c++", "c++"),
    ("a.C++", "c++", "c++"), ("a.ii", "c++-cpp-output", "c++-cpp-output"),
    ("a.cppm", "c++", "c++"),
    ("a.hpp", "c++-header", "c++-header"), ("a.H", "c++-header", "c++-header"),
    ("a.m", "objective-c", "objective-c"), ("a.M", "objective-c++", "objective-c++"),
    ("a.mm", "objective-c++", "objective-c++"),
    ("a.s", "assembler", "assembler"), ("a.S", "assembler-with-cpp", "assembler-with-cpp"),
    ("a.ll", "ir", "ir"), ("a.bc", "ir", "ir"), ("a.cu", "cuda", "cuda"),
    # not sources: clang hands them to the linker
    ("a.o", "object", "object"), ("liba.a", "object", "object"),
    ("liba.so", "object", "object"), ("noext", "object", "object"),
    ("a.I", "object", "object"), ("a.Cpp", "object", "object"),
    ("a.Cc", "object", "object"), ("a.Hpp", "object", "object"),
    ("dir.d/a", "object", "object"), ("dir.c/a.c", "c", "c++"),
]


@pytest.mark.parametrize("path, c_lang, cxx_lang", SUFFIX_ROWS,
                         ids=[r[0] for r in SUFFIX_ROWS])
def test_language_of_suffix(path, c_lang, cxx_lang):
    assert language_of(path, None, cxx_driver=False) == c_lang
    assert language_of(path, None, cxx_driver=True) == cxx_lang
    assert language_of(path, "c", cxx_driver=True) == "c"  # -x wins


def test_non_tu_sources_other_inputs_split():
    inv = classify(["-O2", "a.I", "b.c", "c.o", "-o", "p"])
    assert [s.path for s in inv.sources] == ["b.c"]
    assert list(inv.other_inputs) == ["a.I", "c.o"]


# --- response files ---------------------------------------------------------

# (id, {file: content}, command line, expected expansion)
RSP_ROWS = [
    ("plain", {"a.rsp": "-O2 -c\na.c\n"}, "@a.rsp", "-O2 -c a.c"),
    ("keeps-order", {"a.rsp": "-DX=1 -DY=2"}, "-c @a.rsp b.c", "-c -DX=1 -DY=2 b.c"),
    ("double-quotes", {"a.rsp": '"-DMSG=hello world" -c'}, "@a.rsp",
     ["-DMSG=hello world", "-c"]),
    ("single-quotes", {"a.rsp": "'-DMSG=a \"b\"'"}, "@a.rsp", ['-DMSG=a "b"']),
    ("quotes-mid-token", {"a.rsp": '-DMSG="x y"z'}, "@a.rsp", ["-DMSG=x yz"]),
    ("escaped-quote-in-double", {"a.rsp": r'"-DS=\"s\""'}, "@a.rsp", ['-DS="s"']),
    # GNU tokenizer, not POSIX shell: a backslash escapes any character, also
    # inside quotes (clang-14 -E shows -DA=xy, -DB=pq), and "" is no token.
    ("backslash-in-double-quotes", {"a.rsp": r'-DA="x\y"'}, "@a.rsp", ["-DA=xy"]),
    ("backslash-in-single-quotes", {"a.rsp": r"-DB='p\q'"}, "@a.rsp", ["-DB=pq"]),
    ("backslash-space", {"a.rsp": r"my\ file.c"}, "@a.rsp", ["my file.c"]),
    ("empty-quotes-dropped", {"a.rsp": '-c "" a.c'}, "@a.rsp", ["-c", "a.c"]),
    ("unterminated-quote", {"a.rsp": '-c "a b'}, "@a.rsp", ["-c", "a b"]),
    ("tabs-crlf", {"a.rsp": "-O2\t-c\r\na.c\r\n"}, "@a.rsp", "-O2 -c a.c"),
    ("hash-is-no-comment", {"a.rsp": "-DX=#y a.c"}, "@a.rsp", ["-DX=#y", "a.c"]),
    ("utf8-bom", {"a.rsp": "\ufeff-O2 a.c"}, "@a.rsp", "-O2 a.c"),
    ("empty-file", {"a.rsp": ""}, "-c @a.rsp a.c", "-c a.c"),
    ("nested", {"a.rsp": "-O2 @b.rsp a.c", "b.rsp": "-DB=1 @c.rsp", "c.rsp": "-DC=1"},
     "@a.rsp", "-O2 -DB=1 -DC=1 a.c"),
    # clang-14 resolves a nested @file against the working directory, not
    # against the directory of the file that names it.
    ("nested-relative-to-cwd", {"sub/a.rsp": "@b.rsp", "sub/b.rsp": "-DWRONG",
                                "b.rsp": "-DRIGHT"}, "@sub/a.rsp", "-DRIGHT"),
    ("missing-stays-literal", {}, "-c @missing.rsp a.c", "-c @missing.rsp a.c"),
    ("nested-missing-stays-literal", {"a.rsp": "@nope.rsp -c"}, "@a.rsp", "@nope.rsp -c"),
    ("at-alone-stays", {}, "@ a.c", "@ a.c"),
    ("directory-stays-literal", {"sub/x": ""}, "@sub", "@sub"),
    ("same-file-twice", {"a.rsp": "-DX"}, "@a.rsp @a.rsp", "-DX -DX"),
]


@pytest.mark.parametrize("files, cmd, expected", [pytest.param(*r[1:], id=r[0])
                                                  for r in RSP_ROWS])
def test_expand_response_files(tmp_path, monkeypatch, files, cmd, expected):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    want = shlex.split(expected) if isinstance(expected, str) else expected
    assert expand_response_files(shlex.split(cmd)) == want


def test_response_file_recursion_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "loop.rsp").write_text("-c @loop.rsp")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ResponseFileError, match="nested"):
        expand_response_files(["@loop.rsp"])


def test_unreadable_response_file_is_an_error(tmp_path, monkeypatch):
    # a file no user can read, root included (reading /proc/self/mem at
    # offset 0 fails with EIO), rather than a chmod 0 file, which root reads
    (tmp_path / "secret.rsp").symlink_to("/proc/self/mem")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ResponseFileError, match="secret.rsp"):
        expand_response_files(["@secret.rsp"])


def test_response_file_then_classify(tmp_path, monkeypatch):
    (tmp_path / "args.rsp").write_text('-O3 -x c++ "my file.c" -o "out dir/x.o" -MD -c\n'
                                       "-I 'inc dir'\n")
    monkeypatch.chdir(tmp_path)
    inv = classify(expand_response_files(["@args.rsp", "-DLATE"]))
    assert observed(inv) == {
        "kind": "compile", "sources": [("my file.c", "c++", True)], "other_inputs": [],
        "opt_level": "3", "ir_flags": ["-O3", "-I", "inc dir", "-DLATE"],
        "output": "out dir/x.o", "emits_object_only": True,
    }


@pytest.mark.parametrize("text, tokens", [
    ("", []), ("   \n\t ", []), ("a", ["a"]), ("a b", ["a", "b"]),
    ("'a b' c", ["a b", "c"]), ('a"b c"d', ["ab cd"]), (r"a\\b", ["a\\b"]),
    ("a\\", ["a\\"]), ("'it''s'", ["its"]), ("\"'\"", ["'"]),
], ids=["empty", "blank", "one", "two", "single", "mid", "escaped-backslash",
        "trailing-backslash", "adjacent-quotes", "quote-in-quotes"])
def test_tokenize_gnu(text, tokens):
    assert tokenize_gnu(text) == tokens
