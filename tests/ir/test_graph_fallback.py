"""The pure-Python graph builder on llvmlite (mirecc/graph/fallback.py)
against the native mirecc-graph, array by array, and on its own."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mirecc import graph as mg
from mirecc.graph import native, schema
from mirecc.graph.fallback import build_graph_llvmlite

DATA = Path(__file__).parent / "data" / "graph"
EMIT = ["-S", "-emit-llvm"]
O1 = ["-O1", "-Xclang", "-disable-llvm-passes"]

C_SRC = r"""
#include <stdarg.h>
struct P { int x, y; };
int g = 3;
static int tab[4] = {1, 2, 3, 4};
static const char *names[] = {"a", "b"};
extern int ext(int);
int sum(int n, ...) {
  va_list ap; va_start(ap, n); int s = 0;
  for (int i = 0; i < n; i++) s += va_arg(ap, int);
  va_end(ap); return s;
}
int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int sw(int x) {
  switch (x) { case 1: return 4; case 2: case 5: return 7; case 9: return g;
               case -3: return ext(x); default: return tab[x & 3]; }
}
double mat(int n, double *a, struct P *p) {
  double s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) { s += a[i * n + j] * p[j].x; if (s > 100) break; }
  while (n-- > 0) s *= 0.5;
  return s;
}
int pick(int a, int b) { return (a && b) ? a : b; }
int dead(int x) { return x; goto skip; skip: return x + 1; }
int main(int argc, char **argv) {
  return sum(3, 1, 2, argc) + fib(argc) + sw(argc) + (int)mat(argc, 0, 0) + *names[0];
}
"""

CXX_SRC = r"""
#include <stdexcept>
struct Shape { virtual ~Shape() {} virtual double area() const = 0; };
struct Sq : Shape { double s; explicit Sq(double s) : s(s) {} double area() const override { return s * s; } };
template <typename T> T twice(T x) { return x + x; }
template <typename T, int N> struct Acc { T v[N]; T total() const { T t = 0; for (int i = 0; i < N; i++) t += v[i]; return t; } };
double risky(double x) { if (x < 0) throw std::runtime_error("neg"); return x; }
double run(double x) {
  Sq q(x); Acc<int, 4> a = {{1, 2, 3, 4}};
  try { return risky(q.area()) + twice(a.total()) + twice(1.5f); }
  catch (const std::exception &) { return -1; }
}
"""


def _clang(major: int, cxx: bool = False) -> str:
    path = f"/usr/bin/clang{'++' if cxx else ''}-{major}"
    if not os.access(path, os.X_OK):
        pytest.skip(f"needs {os.path.basename(path)}")
    return path


def compile_ir(tmp_path: Path, major: int, lang: str, flags=(), name: str = "t") -> Path:
    """IR of one fixture compiled by clang-<major>."""
    if lang == "c":
        src, clang, extra = tmp_path / f"{name}.c", _clang(major), []
        src.write_text(C_SRC)
    elif lang == "cxx":
        src, clang, extra = tmp_path / f"{name}.cpp", _clang(major, cxx=True), []
        src.write_text(CXX_SRC)
    elif lang == "cxx-classes":
        src, clang, extra = DATA / "cxx_classes.cpp", _clang(major, cxx=True), []
    elif lang == "c-mixed":
        src, clang, extra = DATA / "c_mixed.c", _clang(major), []
    elif lang == "opencl":
        src, clang, extra = DATA / "opencl_kernel.cl", _clang(major), ["-x", "cl",
                                                                      "-cl-std=CL1.2"]
    else:
        raise ValueError(lang)
    out = tmp_path / f"{name}-{lang}-{major}.ll"
    bitcode = "-c" in flags
    cmd = [clang, *(["-emit-llvm"] if bitcode else EMIT), *extra, *flags, str(src),
           "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def builder_for(major: int) -> str | None:
    try:
        return next((b for b in native.find_builders() if b.endswith(f"-{major}")), None)
    except mg.BuilderNotFound:
        return None


def need_builder(major: int) -> str:
    b = builder_for(major)
    if b is None:
        pytest.skip(f"mirecc-graph-{major} is not built (native comparison skipped; "
                    f"build: cmake -S . -B build/llvm{major} -DMIRECC_LLVM_VERSION={major} && "
                    f"cmake --build build/llvm{major} --target mirecc-graph)")
    return b


STRUCTURE = ["node_type", "node_function", "node_block", "node_loop", "edge_flow",
             "edge_source", "edge_target", "edge_position", "function_is_declaration",
             "function_entry", "loop_function", "loop_header", "loop_depth", "loop_parent"]


def assert_same_structure(a: mg.ProgramGraph, b: mg.ProgramGraph) -> None:
    assert a.node_counts() == b.node_counts()
    assert a.edge_counts() == b.edge_counts()
    pos = lambda g: Counter(zip(g.edge_flow.tolist(), g.edge_position.tolist()))  # noqa: E731
    assert pos(a) == pos(b)
    for name in STRUCTURE:
        x, y = a.arrays[name], b.arrays[name]
        assert x.shape == y.shape, name
        bad = np.nonzero(x != y)[0]
        assert bad.size == 0, f"{name} differs first at {bad[0]}: {x[bad[0]]} vs {y[bad[0]]}"
    assert a.function_names == b.function_names
    assert a.loop_ids == b.loop_ids


def assert_same_graph(a: mg.ProgramGraph, b: mg.ProgramGraph) -> None:
    assert_same_structure(a, b)
    ta, tb = a.node_texts(), b.node_texts()
    fa, fb = a.full_texts(), b.full_texts()
    for i in range(a.num_nodes):
        assert (ta[i], fa[i]) == (tb[i], fb[i]), f"node {i}"


# clang-19 IR: the same graph as mirecc-graph-19, texts included.
CASES19 = [("c", ["-O0"]), ("c", O1), ("c", ["-O2"]), ("c", ["-g", *O1]), ("cxx", O1),
           ("cxx", ["-O2"]), ("cxx", ["-g", "-O0"]),
           ("cxx-classes", O1), ("c-mixed", O1), ("opencl", O1), ("opencl", ["-O2"])]


@pytest.mark.parametrize("lang,flags", CASES19, ids=["".join([l, *f[:2]]) for l, f in CASES19])
def test_clang19_same_graph_as_native(tmp_path, lang, flags):
    b = need_builder(19)
    ll = compile_ir(tmp_path, 19, lang, flags)
    assert_same_graph(native.run_builder(b, str(ll)), build_graph_llvmlite(ll))


# clang-14 IR: typed pointers. LLVM 22 reads them as opaque "ptr", so
# - the ProGraML type texts of pointer values differ ("i32*", "struct*" ->
#   "ptr");
# - constants that only typed pointers tell apart merge ("double* null" and
#   "%struct.P* null" are one "ptr null"), and zero-index constant GEPs fold
#   to their global: the fallback can have fewer constant nodes.
# Everything else -- instruction and variable nodes, control, call and data
# edges with their positions, loops, functions, instruction texts -- is the
# same, in the same order.
CASES14 = [("c", ["-O0"]), ("c", O1), ("c", ["-O2"]), ("cxx", O1), ("cxx-classes", O1),
           ("c-mixed", O1), ("opencl", O1)]


@pytest.mark.parametrize("lang,flags", CASES14, ids=[f"{l}{f[0]}" for l, f in CASES14])
def test_clang14_same_structure_as_native(tmp_path, lang, flags):
    b = need_builder(14)
    ll = compile_ir(tmp_path, 14, lang, flags)
    a, f = native.run_builder(b, str(ll)), build_graph_llvmlite(ll)
    ca, cf = (int(np.argmax(g.node_type == schema.CONSTANT)) for g in (a, f))
    assert ca == cf and a.num_nodes - ca >= f.num_nodes - cf
    for name in ["node_type", "node_function", "node_block", "node_loop"]:
        assert np.array_equal(a.arrays[name][:ca], f.arrays[name][:cf]), name
    for name in ["function_is_declaration", "function_entry", "loop_function", "loop_header",
                 "loop_depth", "loop_parent"]:
        assert np.array_equal(a.arrays[name], f.arrays[name]), name
    assert a.function_names == f.function_names and a.loop_ids == f.loop_ids
    # Edges out of instructions and variables: same, in the same order.
    ea, ef = a.edge_source < ca, f.edge_source < cf
    for name in ["edge_flow", "edge_source", "edge_target", "edge_position"]:
        assert np.array_equal(a.arrays[name][ea], f.arrays[name][ef]), name
    # Edges out of constants: the same consumers and operand positions, but
    # a function cast to another pointer type as an argument
    # ("i8* bitcast (@dtor ...)" for __cxa_throw) is a constant in LLVM 14
    # and the function itself -- not data -- in LLVM 22.
    uses = lambda g, m: Counter(zip(g.edge_target[~m].tolist(), g.edge_position[~m].tolist()))  # noqa: E731
    missing = uses(a, ea) - uses(f, ef)
    assert not (uses(f, ef) - uses(a, ea))
    full = a.full_texts()
    for target, _ in missing:
        assert " bitcast (" in full[target], full[target]
    ta, tf = a.node_texts(), f.node_texts()
    fa, ff = a.full_texts(), f.full_texts()
    for i in range(ca):
        if a.node_type[i] == schema.INSTRUCTION:
            assert (ta[i], fa[i]) == (tf[i], ff[i]), f"instruction node {i}"
        elif "*" not in ta[i]:
            assert ta[i] == tf[i], f"node {i}"
        else:
            assert tf[i] == "ptr", f"node {i}"


@pytest.mark.parametrize("flags", [["-O0"], O1, ["-g", *O1]], ids=["O0", "O1", "g-O1"])
def test_clang19_bitcode_same_graph_as_native(tmp_path, flags):
    """Bitcode carries no source text to read statements from: LLVM 22's
    upgrade of llvm.lifetime.* (size operand dropped, re-declared at the
    module's end) is undone from the alloca's size and first use, so the
    structure is the same; only those calls' statements differ ("(i64 24,
    ptr %3) #5" in LLVM 19, "(ptr %3)" in LLVM 22)."""
    b = need_builder(19)
    bc = compile_ir(tmp_path, 19, "c", [*flags, "-c"])
    a, f = native.run_builder(b, str(bc)), build_graph_llvmlite(bc)
    assert_same_structure(a, f)
    assert a.node_texts() == f.node_texts()
    for x, y in zip(a.full_texts(), f.full_texts()):
        if x != y:
            assert x.startswith("call void @llvm.lifetime.") and y.startswith(x.split("(")[0])


# -- the fallback on its own (no native builder needed)

def test_fallback_alone_counts_loops_calls(tmp_path):
    ll = compile_ir(tmp_path, 14, "c", O1)
    g = build_graph_llvmlite(ll)
    counts = g.node_counts()
    assert counts["instruction"] > 100 and counts["variable"] > 80 and counts["constant"] > 10
    assert g.node_texts()[0] == schema.EXTERNAL_TEXT
    assert g.num_edges == len(g.edge_source) == len(g.edge_target)
    assert int(g.edge_source.max()) < g.num_nodes and int(g.edge_target.max()) < g.num_nodes
    # Loops: sum's for, mat's two nested fors and its while.
    assert g.loop_ids == ["sum:1", "mat:1", "mat:4", "mat:11"] or len(g.loop_ids) == 4
    depth = dict(zip(g.loop_ids, g.arrays["loop_depth"].tolist()))
    parents = g.arrays["loop_parent"].tolist()
    mat = [i for i, lid in enumerate(g.loop_ids) if lid.startswith("mat:")]
    assert sorted(depth[g.loop_ids[i]] for i in mat) == [1, 1, 2]
    inner = next(i for i in mat if depth[g.loop_ids[i]] == 2)
    assert parents[inner] in mat and depth[g.loop_ids[parents[inner]]] == 1
    loops_used = set(g.node_loop[g.node_loop >= 0].tolist())
    assert loops_used == set(range(g.num_loops))
    # Call edges: fib calls itself (recursion), main calls sum/fib/sw/mat.
    names = g.function_names
    fn = g.node_function.tolist()
    calls = Counter()
    for s, d, fl in zip(g.edge_source.tolist(), g.edge_target.tolist(), g.edge_flow.tolist()):
        if fl == schema.CALL and fn[s] >= 0 and fn[d] >= 0 and g.node_texts()[s] == "call":
            calls[(names[fn[s]], names[fn[d]])] += 1
    assert calls[("fib", "fib")] == 2
    for callee in ("sum", "fib", "sw", "mat"):
        assert calls[("main", callee)] == 1
    assert calls[("sw", "ext")] == 1
    # Every function is called from [external].
    ext = set(g.edge_target[(g.edge_source == 0) & (g.edge_flow == schema.CALL)].tolist())
    assert ext == set(g.arrays["function_entry"].tolist())


def test_fallback_switch_case_values_are_constants(tmp_path):
    """LLVM 22 keeps switch case values out of the operand list; the graph
    still has them as operands 2, 4, 6, ... as LLVM 14/19 do."""
    ll = compile_ir(tmp_path, 19, "c", ["-O0"])
    g = build_graph_llvmlite(ll)
    texts = g.node_texts()
    sw = [i for i, t in enumerate(texts) if t == "switch"]
    assert sw
    into = [(int(s), int(p)) for s, d, p, fl in zip(g.edge_source, g.edge_target, g.edge_position,
                                                    g.edge_flow)
            if d == sw[0] and fl == schema.DATA]
    assert sorted(p for _, p in into) == [0, 2, 4, 6, 8, 10]
    assert {g.full_text(s) for s, p in into if p} == {"i32 1", "i32 2", "i32 5", "i32 9",
                                                       "i32 -3"}


def test_build_graph_builder_choice(tmp_path, monkeypatch):
    ll = compile_ir(tmp_path, 14, "c", O1)
    g = mg.build_graph(ll, builder="llvmlite")
    assert g.meta["producer"].startswith("mirecc.graph.fallback")
    monkeypatch.setenv("MIRECC_GRAPH_BUILDER", str(tmp_path / "nope"))
    with pytest.raises(mg.BuilderNotFound):
        mg.build_graph(ll, builder="native")
    # An explicit MIRECC_GRAPH_BUILDER that names nothing is an error, also
    # for "auto": the user asked for that tool.
    with pytest.raises(mg.BuilderNotFound):
        mg.build_graph(ll)
    # With no tool configured and none built, "auto" uses the fallback.
    monkeypatch.delenv("MIRECC_GRAPH_BUILDER")
    monkeypatch.setattr(native, "find_builders", lambda: [])
    assert mg.build_graph(ll).meta["producer"].startswith("mirecc.graph.fallback")
    with pytest.raises(ValueError):
        mg.build_graph(ll, builder="programl")


def test_fallback_round_trips_through_the_file_format(tmp_path):
    ll = compile_ir(tmp_path, 19, "cxx", O1)
    g = build_graph_llvmlite(ll)
    h = mg.loads(mg.dumps(g))
    for name in g.arrays:
        assert np.array_equal(g.arrays[name], h.arrays[name]), name
    assert h.num_nodes == g.num_nodes and h.meta["llvm_major"] >= 14


@pytest.mark.parametrize("name,content,problem", [
    ("bad.ll", b"define i32 @f( {\n", "invalid LLVM IR"),
    ("empty.ll", b"  \n\n", "empty module"),
    ("decl.ll", b"declare i32 @f(i32)\n", "empty module (no function definitions)"),
    ("latin1.ll", b"; caf\xe9\ndefine void @f() {\n  ret void\n}\n", "not valid UTF-8"),
    ("bad.bc", b"BC\xc0\xde\x00\x01garbage", "invalid LLVM IR"),
])
def test_fallback_errors_name_file(tmp_path, name, content, problem):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(mg.GraphBuildError) as err:
        build_graph_llvmlite(p)
    assert str(err.value).startswith(f"{p}: ") and problem in str(err.value)


def test_fallback_malformed_ir_gives_line(tmp_path):
    p = tmp_path / "bad.ll"
    p.write_text("define i32 @f() {\n  %1 = add i32 1\n  ret i32 %1\n}\n")
    with pytest.raises(mg.GraphBuildError, match=r"bad\.ll: line \d+:\d+: invalid LLVM IR: expected ','"):
        build_graph_llvmlite(p)


def test_fallback_missing_file(tmp_path):
    p = tmp_path / "nope.ll"
    with pytest.raises(mg.GraphBuildError, match=f"{p}: no such file"):
        build_graph_llvmlite(p)


HANDWRITTEN = r"""
@0 = private constant [3 x i8] c"hi\00"
@g = global i32 5
@al = alias i32, ptr @g
declare i32 @puts(ptr)
define i32 @"weird name"(i32 %x, i32) {
entry:
  %c = icmp sgt i32 %x, 0
  br i1 %c, label %a, label %b
a:
  %p = phi i32 [ 0, %entry ], [ %n, %a ]
  %n = add i32 %p, 1
  %v = load i32, ptr @al
  %d = icmp slt i32 %n, %v
  br i1 %d, label %a, label %b
b:
  %r = phi i32 [ 1, %entry ], [ %n, %a ]
  %q = call i32 @puts(ptr @0)
  indirectbr ptr blockaddress(@"weird name", %a), [label %a, label %b]
dead:
  ret i32 %0
}
"""


def test_handwritten_ir_same_graph_as_native(tmp_path):
    """Not printer output (no '; ModuleID'): statements come from LLVM 22's
    printer. Quoted names, unnamed globals and arguments, an alias, a
    blockaddress, indirectbr and an unreachable block."""
    b = need_builder(19)
    ll = tmp_path / "hand.ll"
    ll.write_text(HANDWRITTEN)
    assert_same_graph(native.run_builder(b, str(ll)), build_graph_llvmlite(ll))
