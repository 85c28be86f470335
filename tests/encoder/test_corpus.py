"""The corpus builder (mirecc/corpus): generated kernels compile through
capture mode, resuming skips finished work, modules are deduplicated, manifest
lines are well formed, and copies of evaluation kernels are dropped.  Small
local fixtures only: no network, no Debian packages."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from mirecc.corpus import compile as corpus_compile
from mirecc.corpus.debian import build as debian_build
from mirecc.corpus.evalfilter import EvalFilter, function_hashes, normalise_header
from mirecc.corpus.irtext import module_stats
from mirecc.corpus.kernels import FAMILIES, build_kernels, generate
from mirecc.corpus.report import build_report, format_table
from mirecc.graph import build_graph
from mirecc.corpus.store import MANIFEST_KEYS, Corpus


@pytest.fixture
def env(monkeypatch, tmp_path, toolchain):
    for key in ("MIRECC_CAPTURE_DIR", "MIRECC_CONFIG", "MIRECC_DISABLE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("MIRECC_CORPUS_CC", toolchain.cc)
    monkeypatch.setenv("MIRECC_CORPUS_CXX", toolchain.cxx)
    return toolchain


def _bitcode(cc: str, c_text: str, tmp: Path, name: str = "m") -> bytes:
    src = tmp / f"{name}.c"
    src.write_text(c_text)
    out = tmp / f"{name}.bc"
    subprocess.run([cc, "-O2", "-c", "-emit-llvm", str(src), "-o", str(out)], check=True)
    return out.read_bytes()


def _manifest(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]


def test_generator_is_deterministic_and_covers_families():
    assert generate(3, 5) == generate(3, 5)
    assert generate(3, 5) != generate(4, 5)
    assert {generate(1, i)[0] for i in range(len(FAMILIES))} == set(FAMILIES)


def test_every_family_compiles_through_capture(env, tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    totals = build_kernels(corpus, len(FAMILIES) * 2, seed=11, jobs=2)
    assert totals["compile_failed"] == 0
    assert totals["added"] + totals["duplicate"] == len(FAMILIES) * 2
    records = _manifest(corpus.root)
    assert {r["origin"] for r in records} == set(FAMILIES)
    assert all(r["kind"] == "kernels" and r["functions"] >= 1 and r["statements"] > 0
               for r in records)


def test_manifest_lines_are_well_formed(env, tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    build_kernels(corpus, 4, seed=2, jobs=2)
    records = _manifest(corpus.root)
    assert records
    for rec in records:
        assert set(MANIFEST_KEYS) <= set(rec)
        assert re.fullmatch(r"[0-9a-f]{64}", rec["sha256"])
        assert rec["ir"] == f"ir/{rec['sha256'][:2]}/{rec['sha256']}.bc"
        data = (corpus.root / rec["ir"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == rec["sha256"]
        assert rec["flags"] == ["-O2"] and rec["language"] == "c"
        assert "clang version 14" in rec["compiler_version"]
        assert rec["unique_statements"] <= rec["statements"]


def test_resume_skips_done_work(env, tmp_path, monkeypatch):
    corpus = Corpus(tmp_path / "corpus")
    build_kernels(corpus, 3, seed=5, jobs=2)
    compiled = []
    real = corpus_compile.compile_captured

    def counting(sources, *a, **kw):
        compiled.extend(Path(s).name for s in sources)
        return real(sources, *a, **kw)

    monkeypatch.setattr(corpus_compile, "compile_captured", counting)
    build_kernels(corpus, 5, seed=5, jobs=2)          # two more programs
    assert sorted(compiled) == sorted(f"{generate(5, i)[0]}-5-{i}.c" for i in (3, 4))
    compiled.clear()
    build_kernels(Corpus(corpus.root), 5, seed=5, jobs=2)  # a fresh process: nothing to do
    assert compiled == []
    state = json.loads((corpus.root / "state" / "kernels.json").read_text())
    assert len(state["done"]) == 5


def test_state_merges_writers_and_forgets(tmp_path):
    from mirecc.corpus.store import State
    a, b = State(tmp_path, "debian"), State(tmp_path, "debian")   # two processes
    a.mark_done("zlib", {"status": "ok"})
    b.mark_done("bzip2", {"status": "ok"})
    fresh = State(tmp_path, "debian")
    assert fresh.is_done("zlib") and fresh.is_done("bzip2")
    fresh.forget("zlib")
    assert not State(tmp_path, "debian").is_done("zlib")
    assert State(tmp_path, "debian").is_done("bzip2")
    redo = State(tmp_path, "debian")
    redo.mark_done("zlib", {"status": "ok", "again": True})
    a.mark_done("lz4", {"status": "ok"})       # a's stale view of zlib does not win
    assert State(tmp_path, "debian").data["done"]["zlib"].get("again")


def test_dedup_by_content(env, tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    bc = _bitcode(env.cc, "int f(int x) { return x * 3; }\n", tmp_path)
    rec = {"kind": "test", "origin": "fixture", "path": "m.c"}
    assert corpus.add(bc, rec) == "added"
    assert corpus.add(bc, {**rec, "path": "copy.c"}) == "duplicate"
    assert Corpus(corpus.root).add(bc, rec) == "duplicate"
    assert len(_manifest(corpus.root)) == 1
    report = build_report(corpus.root)
    assert report["total"]["modules"] == 1 and report["total"]["functions"] == 1
    assert 1 <= report["total"]["unique_normalised_statements"] \
        <= report["total"]["unique_statements"]
    # graph sizes are the module's real ProGraML graph (mirecc.graph), kept
    # beside the module so the next report does not rebuild it
    sha = next(iter(json.loads(line)["sha256"]
                    for line in (corpus.root / "manifest.jsonl").read_text().splitlines()))
    graph = build_graph(corpus.root / "ir" / sha[:2] / f"{sha}.bc")
    assert report["graph_build_errors"] == 0
    assert (report["total"]["graph_nodes"], report["total"]["graph_edges"]) \
        == (graph.num_nodes, graph.num_edges)
    assert (corpus.root / "graphs" / sha[:2] / f"{sha}.json").is_file()
    assert "TOTAL" in format_table(report)


def test_interrupted_add_is_redone_and_counted_once(env, tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    bc = _bitcode(env.cc, "int g(int x) { return x + 1; }\n", tmp_path)
    rec = {"kind": "test", "origin": "fixture", "path": "m.c"}
    assert corpus.add(bc, rec) == "added"
    corpus.ir_path(hashlib.sha256(bc).hexdigest()).unlink()   # killed before the bitcode landed
    assert corpus.add(bc, rec) == "added"
    assert len(_manifest(corpus.root)) == 2
    assert build_report(corpus.root)["total"]["modules"] == 1


KERNEL = """
void saxpy(float *restrict y, const float *restrict x, float a, int n) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
"""


def _as_old_llvm(text: str) -> str:
    """The same IR as an LLVM 9 dump would spell it: other value and function
    names, unnamed parameters, other attribute groups and metadata numbers."""
    out = []
    for line in text.splitlines():
        if line.startswith("define "):
            line = re.sub(r" %\d+([,)])", r"\1", line).replace("@saxpy", "@A")
            line = line.replace("noundef ", "").replace("#0", "#3")
        line = re.sub(r"%(\d+)", lambda m: f"%{int(m.group(1)) + 100}", line)
        line = re.sub(r"!(\d+)", lambda m: f"!{int(m.group(1)) + 7}", line)
        out.append(line)
    return "\n".join(out) + "\n"


def test_eval_filter_drops_a_planted_duplicate(env, tmp_path):
    bc = _bitcode(env.cc, KERNEL, tmp_path, "saxpy")
    text = subprocess.run(["llvm-dis-14", "-o", "-", str(tmp_path / "saxpy.bc")],
                          capture_output=True, text=True, check=True).stdout
    eval_dir = tmp_path / "eval"
    eval_dir.mkdir()
    (eval_dir / "kernel.ll").write_text(_as_old_llvm(text))
    ev = EvalFilter([eval_dir, tmp_path / "missing"])
    assert ev.files == 1
    corpus = Corpus(tmp_path / "corpus", ev)
    rec = {"kind": "test", "origin": "fixture", "path": "saxpy.c"}
    assert corpus.add(bc, rec) == "eval_dropped"
    other = _bitcode(env.cc, KERNEL.replace("a * x[i]", "a - x[i]"), tmp_path, "other")
    assert corpus.add(other, {**rec, "path": "other.c"}) == "added"
    assert Corpus(corpus.root, ev).add(bc, rec) == "eval_dropped"   # remembered
    report = build_report(corpus.root)
    assert report["eval_duplicates_dropped"] == 1 and report["total"]["modules"] == 1


def test_refilter_drops_stored_copies(env, tmp_path):
    bc = _bitcode(env.cc, KERNEL, tmp_path, "saxpy")
    corpus = Corpus(tmp_path / "corpus")                 # stored before the filter knew it
    assert corpus.add(bc, {"kind": "test", "origin": "fixture", "path": "saxpy.c"}) == "added"
    text = subprocess.run(["llvm-dis-14", "-o", "-", str(tmp_path / "saxpy.bc")],
                          capture_output=True, text=True, check=True).stdout
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "k.ll").write_text(_as_old_llvm(text))
    assert Corpus(corpus.root, EvalFilter([tmp_path / "eval"])).refilter() == 1
    report = build_report(corpus.root)
    assert report["total"]["modules"] == 0 and report["eval_duplicates_dropped"] == 1


def test_normalisation_ignores_names_and_llvm9_unnamed_parameters():
    new = "define dso_local void @f(float* noundef %0, i32 noundef %1) local_unnamed_addr #0 {"
    old = "define void @kernel(float*, i32) local_unnamed_addr #4 !kernel_arg_type !9 {"
    assert normalise_header(new) == normalise_header(old)
    a = "define void @f(i32 %0) {\n  %2 = add i32 %0, 1, !dbg !5\n  ret void\n}\n"
    b = "define void @g(i32) {\n  %x = add i32 %0, 1\n  ret void\n}\n"
    assert function_hashes(a) == function_hashes(b)


def test_module_stats_counts():
    text = ("define i32 @f(i32 %0) {\n  call void @g()\n  call void @g()\n"
            "  ret i32 %0\n}\n\ndeclare void @g()\n")
    st = module_stats(text)
    assert (st.functions, st.statements, len(st.statement_hashes)) == (1, 3, 2)


def test_debian_style_make_build_is_captured(env, tmp_path):
    """The package build path on a tiny local Makefile project: TUs captured,
    a configure-style probe (conftest.c) left out."""
    tree = tmp_path / "pkg"
    tree.mkdir()
    (tree / "a.c").write_text("int a(int *p, int n) { int s = 0; for (int i = 0; i < n; i++) s += p[i]; return s; }\n")
    (tree / "conftest.c").write_text("int main(void) { return 0; }\n")
    (tree / "Makefile").write_text("all: a.o conftest.o\n%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n")
    capture = tmp_path / "capture"
    rc, stage = debian_build("fixture", {"build": "make"}, tree, capture, tmp_path / "log",
                             jobs=2, deadline=__import__("time").monotonic() + 60)
    assert (rc, stage) == (0, "make"), (tmp_path / "log").read_text()
    corpus = Corpus(tmp_path / "corpus")
    counts = corpus.merge_capture(capture, "debian", "fixture", base=tree)
    assert counts["added"] == 1 and counts["config_test"] == 1
    (rec,) = _manifest(corpus.root)
    assert rec["path"] == "a.c" and rec["origin"] == "fixture" and rec["flags"] == ["-O2"]


def test_mire_corpus_cli_parses():
    from mirecc.cli.mire import build_parser
    args = build_parser().parse_args(["corpus", "build", "--out", "x", "--sources",
                                      "kernels", "--jobs", "1"])
    assert args.sources == "kernels" and args.jobs == 1
    assert build_parser().parse_args(["bench"]).command == "bench"


def test_opencl_kernel_compiles_with_inferred_defines(env, tmp_path):
    from mirecc.corpus.opencl import CL_FLAGS, add_cl_files
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "plain.cl").write_text(
        "__kernel void k(__global float *a) { a[get_global_id(0)] *= 2.0f; }\n")
    (tree / "templ.cl").write_text(
        "__kernel void t(__global T *a) { a[get_global_id(0)] *= SCALE; }\n")
    (tree / "broken.cl").write_text("__kernel void b( {\n")
    corpus = Corpus(tmp_path / "corpus")
    counts = add_cl_files(corpus, sorted(tree.glob("*.cl")), "fixture", tree, jobs=2)
    assert (counts["added"], counts["compile_failed"], counts["with_inferred_defines"]) == (2, 1, 1)
    assert "broken.cl" in counts["failures"]
    recs = {r["path"]: r for r in _manifest(corpus.root)}
    assert recs["plain.cl"]["flags"] == CL_FLAGS and recs["plain.cl"]["kind"] == "opencl"
    assert recs["templ.cl"]["flags"][-2:] == ["-DT=float", "-DSCALE=1"]


def test_patched_autotools_inputs_trigger_autoreconf(tmp_path):
    import os
    from mirecc.corpus.debian import _patched_after_configure
    (tmp_path / "configure").write_text("")
    (tmp_path / "configure.ac").write_text("")
    os.utime(tmp_path / "configure.ac", (1000, 1000))
    assert not _patched_after_configure(tmp_path)
    (tmp_path / "Makefile.am").write_text("")          # a Debian patch, newer than configure
    os.utime(tmp_path / "configure", (1000, 1000))
    assert _patched_after_configure(tmp_path)


def test_package_built_by_another_process_is_skipped(tmp_path):
    from mirecc.corpus.debian import _try_lock, build_packages
    from mirecc.corpus.store import State
    corpus = Corpus(tmp_path / "corpus")
    held = _try_lock(corpus.root / "_work" / "debian" / "zlib.lock")
    assert held is not None
    try:
        assert build_packages(corpus, ["zlib"]) == {}      # no fetch, no build
        assert not State(corpus.root, "debian").is_done("zlib")
    finally:
        held.close()
    State(corpus.root, "debian").mark_done("zlib", {"status": "ok"})   # done elsewhere
    assert build_packages(corpus, ["zlib"]) == {}
