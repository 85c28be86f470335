"""The native graph builder (passes/graph) and mirecc.graph: file format,
loops, call edges, errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mirecc import graph as mg
from mirecc.graph import schema

CLANG = "/usr/bin/clang-14"
EMIT = ["-S", "-emit-llvm", "-O1", "-Xclang", "-disable-llvm-passes"]


@pytest.fixture
def use_builder(builder, monkeypatch) -> str:
    monkeypatch.setenv("MIRECC_GRAPH_BUILDER", builder)
    return builder


def compile_c(tmp_path: Path, source: str, name: str = "t.c", extra=()) -> Path:
    if not os.access(CLANG, os.X_OK):
        pytest.skip("needs clang-14")
    src = tmp_path / name
    src.write_text(source)
    out = tmp_path / (src.stem + ".ll")
    subprocess.run([CLANG, *EMIT, *extra, str(src), "-o", str(out)], check=True)
    return out


NESTED = r"""
int nest(int n, int *a) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    s += a[i];
    for (int j = 0; j < i; j++)
      s += a[j] * i;
  }
  while (s > 100) s /= 2;
  return s;
}
int flat(int x) { return x + 1; }
"""

CALLS = r"""
extern int ext(int);
int leaf(int x) { return x * 2; }
int mid(int x) { if (x > 3) return leaf(x); return leaf(x + 1) + ext(x); }
int rec(int n) { return n <= 0 ? 0 : rec(n - 1) + mid(n); }
"""


def test_round_trip_is_byte_identical(use_builder, tmp_path):
    ll = compile_c(tmp_path, NESTED)
    out = tmp_path / "g.mgraph"
    subprocess.run([use_builder, "-o", str(out), str(ll)], check=True)
    raw = out.read_bytes()
    g = mg.loads(raw)
    assert mg.dumps(g) == raw
    mg.dump(g, tmp_path / "again.mgraph")
    g2 = mg.load(tmp_path / "again.mgraph")
    assert g2.meta == g.meta
    for name, arr in g.arrays.items():
        assert np.array_equal(arr, g2.arrays[name]), name
        assert arr.dtype == g2.arrays[name].dtype


def test_format_arrays_are_views_and_consistent(use_builder, tmp_path):
    g = mg.build_graph(compile_c(tmp_path, NESTED))
    assert g.meta["format"] == "mirecc-graph" and g.meta["llvm_major"] >= 14
    assert g.num_nodes == g.meta["num_nodes"] and g.num_edges == g.meta["num_edges"]
    assert g.node_texts()[0] == schema.EXTERNAL_TEXT
    assert g.edge_source.max() < g.num_nodes and g.edge_target.max() < g.num_nodes
    assert g.edge_index.shape == (2, g.num_edges)
    # Every instruction's statement is LLVM's own text, numbered per module.
    stmts = g.statements()
    assert any(s.startswith("%") and " = load i32, i32* " in s for s in stmts)
    assert all(not s.startswith(" ") for s in stmts)
    names = g.function_names
    defined = [n for n, d in zip(names, g.arrays["function_is_declaration"].tolist()) if not d]
    assert defined == ["nest", "flat"]
    assert all(n.startswith("llvm.lifetime.") for n in names if n not in defined)


def test_truncated_or_foreign_file(tmp_path):
    with pytest.raises(mg.GraphFormatError, match="bad magic"):
        mg.loads(b"not a graph at all", "x.mgraph")
    with pytest.raises(mg.GraphFormatError):
        mg.loads(b"MIRGRAPH" + (1).to_bytes(4, "little") + (10).to_bytes(4, "little") + b"{", "y")


def test_loop_ids_nested(use_builder, tmp_path):
    ll = compile_c(tmp_path, NESTED)
    g = mg.build_graph(ll)
    ids = g.loop_ids
    assert len(ids) == 3
    assert all(i.startswith("nest:") for i in ids)
    depth = g.arrays["loop_depth"].tolist()
    parent = g.arrays["loop_parent"].tolist()
    assert sorted(depth) == [1, 1, 2]
    inner = depth.index(2)
    assert parent[inner] >= 0 and depth[parent[inner]] == 1
    # Instructions of the inner loop point at it; flat() has no loop.
    insts = g.node_type == schema.INSTRUCTION
    loops = g.node_loop
    assert (loops[~insts] == -1).all()
    assert (loops[insts] == inner).any()
    flat = g.function_names.index("flat")
    assert (loops[(g.node_function == flat)] == -1).all()
    # The multiply of the inner body is in the inner loop.
    texts = g.full_texts()
    mul = [n for n in range(g.num_nodes) if " = mul nsw i32" in texts[n]]
    assert mul and all(loops[n] == inner for n in mul)
    # Same IR, same ids; the header index is a block index of the function.
    assert mg.build_graph(ll).loop_ids == ids
    assert all(int(i.split(":")[1]) > 0 for i in ids)


def test_call_edges(use_builder, tmp_path):
    g = mg.build_graph(compile_c(tmp_path, CALLS))
    names = g.function_names
    texts, full = g.node_texts(), g.full_texts()
    entry = dict(zip(names, g.arrays["function_entry"].tolist()))
    call = g.edge_flow == schema.CALL
    edges = set(zip(g.edge_source[call].tolist(), g.edge_target[call].tolist()))
    # [external] calls every function, and every function returns to it.
    for name in names:
        assert (0, entry[name]) in edges
    # ext is a declaration: one "; undefined function" node, entry and exit.
    assert texts[entry["ext"]] == schema.UNDEFINED_FUNCTION_TEXT
    assert (entry["ext"], 0) in edges
    rets = {n for n in range(g.num_nodes) if texts[n] == "ret"}

    def calls_to(callee):
        return [n for n in range(g.num_nodes)
                if texts[n] == "call" and f"@{callee}(" in full[n]]

    for callee, count in (("leaf", 2), ("ext", 1), ("mid", 1), ("rec", 1)):
        sites = calls_to(callee)
        assert len(sites) == count, callee
        for site in sites:
            assert (site, entry[callee]) in edges
            exits = [s for s, t in edges if t == site]
            assert exits, callee
            if callee != "ext":
                assert all(e in rets and g.node_function[e] == names.index(callee) for e in exits)
    # Call edges: root <-> each function (entry + exits), and each call site.
    n_ret = {name: sum(1 for r in rets if g.node_function[r] == names.index(name)) for name in names}
    expected = sum(1 + max(n_ret[n], 1 if n == "ext" else 0) for n in names)
    expected += sum((1 + max(n_ret[c], 1 if c == "ext" else 0)) * k
                    for c, k in (("leaf", 2), ("ext", 1), ("mid", 1), ("rec", 1)))
    assert int(call.sum()) == expected


def test_data_edges_positions(use_builder, tmp_path):
    g = mg.build_graph(compile_c(tmp_path, "int f(int a, int b) { return a - b; }"))
    full = g.full_texts()
    sub = next(n for n in range(g.num_nodes) if " = sub nsw i32 " in full[n])
    data = g.edge_flow == schema.DATA
    into = sorted((int(p), int(s)) for s, t, p in zip(g.edge_source[data], g.edge_target[data],
                                                       g.edge_position[data]) if t == sub)
    assert [p for p, _ in into] == [0, 1]
    for _, var in into:
        assert g.node_type[var] == schema.VARIABLE
        # producer (a load) -> variable, position 0
        assert any(t == var and g.edge_flow[i] == schema.DATA and g.edge_position[i] == 0
                   for i, t in enumerate(g.edge_target.tolist()))


def test_bitcode_input_same_graph(use_builder, tmp_path):
    ll = compile_c(tmp_path, CALLS)
    bc = tmp_path / "t.bc"
    subprocess.run(["llvm-as-14" if os.path.exists("/usr/bin/llvm-as-14") else "/usr/lib/llvm-14/bin/llvm-as",
                    str(ll), "-o", str(bc)], check=True)
    a, b = mg.build_graph(ll), mg.build_graph(bc)
    for name in ("node_type", "edge_flow", "edge_source", "edge_target", "edge_position"):
        assert np.array_equal(a.arrays[name], b.arrays[name])
    assert a.full_texts() == b.full_texts()


@pytest.mark.parametrize("name, content, problem", [
    ("malformed.ll", b"define i32 @f() {\n  ret i32 %nope\n}\n", "invalid LLVM IR"),
    ("empty.ll", b"", "empty module"),
    ("decls.ll", b"declare i32 @g(i32)\n@x = global i32 1\n", "empty module"),
    ("latin1.ll", b"; caf\xe9\ndefine void @f() {\n  ret void\n}\n", "not valid UTF-8"),
    ("garbage.bc", b"BC\xc0\xde\x01\x02\x03", "invalid LLVM IR"),
])
def test_errors_name_file_and_problem(use_builder, tmp_path, name, content, problem):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(mg.GraphBuildError) as exc:
        mg.build_graph(path)
    assert str(path) in str(exc.value) and problem in str(exc.value)
    # The tool itself: one line on stderr, exit 1, no output file left.
    out = tmp_path / "out.mgraph"
    proc = subprocess.run([use_builder, "-o", str(out), str(path)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"mirecc-graph: error: {path}: ")
    assert not out.exists()


def test_non_utf8_reports_line(use_builder, tmp_path):
    path = tmp_path / "bad.ll"
    path.write_bytes(b"; ok\n; ok\n; \xff\xfe\n")
    with pytest.raises(mg.GraphBuildError, match="line 3"):
        mg.build_graph(path)


def test_missing_file(use_builder, tmp_path):
    missing = tmp_path / "nope.ll"
    with pytest.raises(mg.GraphBuildError, match=f"{missing}: no such file"):
        mg.build_graph(missing)
    proc = subprocess.run([use_builder, "-o", str(tmp_path / "o"), str(missing)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and str(missing) in proc.stderr and "cannot read" in proc.stderr


def test_builder_not_found_says_how_to_build(monkeypatch, tmp_path):
    from mirecc.graph import native
    monkeypatch.delenv("MIRECC_GRAPH_BUILDER", raising=False)
    monkeypatch.setattr(native, "REPO", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(mg.BuilderNotFound, match="cmake -S .* --target mirecc-graph"):
        native.find_builder()
    monkeypatch.setenv("MIRECC_GRAPH_BUILDER", str(tmp_path / "absent"))
    with pytest.raises(mg.BuilderNotFound, match="MIRECC_GRAPH_BUILDER"):
        native.find_builder()


def _builder_for(major: int):
    from mirecc.graph import native
    try:
        return next((b for b in native.find_builders() if b.endswith(f"-{major}")), None)
    except mg.BuilderNotFound:
        return None


def test_clang19_ir_goes_to_the_llvm19_builder(tmp_path, monkeypatch):
    """IR from clang-19 needs LLVM 19: build_graph falls back from the LLVM 14
    builder to the LLVM 19 one; on clang-14 IR both give the same graph shape."""
    monkeypatch.delenv("MIRECC_GRAPH_BUILDER", raising=False)
    b14, b19 = _builder_for(14), _builder_for(19)
    if not (b14 and b19):
        pytest.skip("needs mirecc-graph-14 and mirecc-graph-19 built "
                    "(cmake -S . -B build/llvm19 -DMIRECC_LLVM_VERSION=19, needs llvm-19-dev)")
    if not os.access("/usr/bin/clang-19", os.X_OK):
        pytest.skip("needs clang-19")
    src = tmp_path / "t.c"
    src.write_text(NESTED + CALLS)
    ll19 = tmp_path / "t19.ll"
    subprocess.run(["/usr/bin/clang-19", *EMIT, str(src), "-o", str(ll19)], check=True)
    g = mg.build_graph(ll19)
    assert g.meta["llvm_major"] == 19
    assert any(" = load i32, ptr " in s for s in g.statements())
    assert len(g.loop_ids) == 3
    ll14 = compile_c(tmp_path, NESTED + CALLS, name="t14.c")
    a = native_run(b14, ll14)
    b = native_run(b19, ll14)
    # (LLVM 19 upgrades typed-pointer intrinsics, which moves declarations:
    # compare shapes, not orders.)
    assert a.node_counts() == b.node_counts() and a.edge_counts() == b.edge_counts()
    assert a.loop_ids == b.loop_ids
    pos = lambda g: sorted(zip(g.edge_flow.tolist(), g.edge_position.tolist()))  # noqa: E731
    assert pos(a) == pos(b)


def native_run(builder, path):
    from mirecc.graph import native
    return native.run_builder(builder, str(path))


def test_library_in_process_builds_the_tools_graph(use_builder, tmp_path):
    """libmirecc-graph-<major>.so (what the server loads) gives the tool's
    graph, byte for byte, and the tool's errors."""
    from mirecc.graph import native

    if native._library_function(use_builder) is None:
        pytest.skip("the builder's library is not built")
    ll = compile_c(tmp_path, NESTED)
    assert mg.dumps(mg.build_graph(ll, in_process=True)) == mg.dumps(mg.build_graph(ll))
    bad = tmp_path / "garbage.bc"
    bad.write_bytes(b"BC\xc0\xde\x01\x02\x03")
    with pytest.raises(mg.GraphBuildError) as exc:
        mg.build_graph(bad, in_process=True)
    assert str(exc.value).startswith(f"{bad}: ") and "invalid LLVM IR" in str(exc.value)
    data = tmp_path / "data.ll"
    data.write_text("@table = global [2 x i32] [i32 1, i32 2]\n")
    with pytest.raises(mg.GraphBuildError, match="no function definitions"):
        mg.build_graph(data, in_process=True)
