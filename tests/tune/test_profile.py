"""Decisions profiles (mirecc/taskapi/profile.py): a measured loop decision in
MIRECC_PROFILE reaches the real vectorizer through the plugin, stays with
its function when code elsewhere changes, is dropped (and counted) when its
function changes, and a malformed profile names its file and line and
falls back to the plain compile."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.taskapi.profile import ProfileError, format_entry, function_digests, read_profile

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

KERNEL = """\
void scale(int *restrict y, const int *restrict x, int n) {
  for (int i = 0; i < n; i++)
    y[i] = 3 * x[i] + y[i];
}
int other(int a) { return a * %d; }
"""


@pytest.fixture
def project(tmp_path, llvm_plugin):
    _, _, plugin = llvm_plugin(14)
    (tmp_path / "k.c").write_text(KERNEL % 2)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_PLUGIN=str(plugin),
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"),
                       MIRECC_CAPTURE_DIR=str(tmp_path / "captured"))
    return tmp_path, env


def compile_(cwd: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([MIRECC, "-O2", "-c", "k.c", "-o", "k.o",
                           "-Rpass=mirecc-loophints", *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def captured_ir(cwd: Path) -> str:
    """The IR mirecc read for the last compile (its capture store)."""
    from mirecc.ir.text import disassemble

    newest = max((cwd / "captured").rglob("*.bc"), key=lambda p: p.stat().st_mtime_ns)
    return disassemble(newest.read_bytes(), str(newest))


def loop_id(ir_path: Path) -> str:
    from mirecc.graph import build_graph_any
    [lid] = [i for i in build_graph_any(ir_path).loop_ids if i.startswith("scale:")]
    return lid


def test_a_profiled_decision_reaches_the_vectorizer_and_stays_with_its_function(project):
    cwd, env = project
    assert compile_(cwd, env).returncode == 0
    bc = max((cwd / "captured").rglob("*.bc"), key=lambda p: p.stat().st_mtime_ns)
    digest = function_digests(captured_ir(cwd))["scale"]
    lid = loop_id(bc)
    profile = cwd / "mirecc.profile"
    profile.write_text("# mirecc decisions profile 1\n" + format_entry(
        "loop-vectorize", "k.c", lid, digest, {"vectorize.width": 8, "interleave.count": 1},
        "1.20x in 5 runs") + "\n")
    env["MIRECC_PROFILE"] = str(profile)
    proc = compile_(cwd, env)
    assert proc.returncode == 0 and "mirecc:" not in proc.stderr, proc.stderr
    assert f"loop {lid}: vectorize.width=8 interleave.count=1" in proc.stderr
    explained = json.loads(compile_(cwd, env, "--explain=json").stdout)
    [d] = [d for d in explained["translation_units"][0]["decisions"]
           if d["task"] == "loop-vectorize"]
    assert d["applied"] and d["target"] == lid and "mirecc.profile:2 (1.20x" in d["reason"]
    # an edit elsewhere: the decision stays
    (cwd / "k.c").write_text(KERNEL % 5)
    assert f"loop {lid}: vectorize.width=8" in compile_(cwd, env).stderr
    # the function itself changes: the entry is stale, ignored and counted
    (cwd / "k.c").write_text(KERNEL.replace("3 * x[i]", "4 * x[i]") % 5)
    proc = compile_(cwd, env)
    assert proc.returncode == 0 and "vectorize.width=8" not in proc.stderr
    explained = json.loads(compile_(cwd, env, "--explain=json").stdout)
    reasons = " ".join(explained["translation_units"][0]["no_decision_reasons"])
    assert "1 entry for this source ignored: the function changed" in reasons


def test_a_malformed_profile_names_its_line_and_the_build_goes_on(project, tmp_path):
    cwd, env = project
    bad = cwd / "bad.profile"
    bad.write_text("# mirecc decisions profile 1\nloop-vectorize k.c scale:1 nothex w=8\n")
    with pytest.raises(ProfileError, match=r"bad.profile:2: expected a 16-hex-digit function "
                                           r"digest, found 'nothex'"):
        read_profile(str(bad))
    bad.write_text("# mirecc decisions profile 1\nloop-vectorize k.c scale 0123456789abcdef w=8\n")
    with pytest.raises(ProfileError, match=r"bad.profile:2: target 'scale': expected a loop id"):
        read_profile(str(bad))
    bad.write_text("openmp k.c f:0 0123456789abcdef threads=0,schedule=static\n")
    with pytest.raises(ProfileError, match=r"bad.profile:1: value .*: expected threads=N"):
        read_profile(str(bad))
    bad.write_text("cuda-block k.cu gemm 0123456789abcdef 64x64\n")
    with pytest.raises(ProfileError, match=r"4096 threads per block"):
        read_profile(str(bad))
    bad.write_text("# mirecc decisions profile 1\nloop-vectorize k.c scale:1 nothex w=8\n")
    env["MIRECC_PROFILE"] = str(bad)
    proc = compile_(cwd, env)
    assert proc.returncode == 0 and (cwd / "k.o").is_file()
    assert "bad.profile:2" in proc.stderr and "warning" in proc.stderr
    bad.write_text("numa k.c main:0 0123456789abcdef threads=2\n")
    with pytest.raises(ProfileError, match="cannot take profile entries"):
        read_profile(str(bad))


def test_digests_ignore_numbering_that_shifts_with_other_code():
    a = ('define void @f(i32* %p) {\n  store i32 1, i32* %p, !tbaa !12\n  '
         'call void @g(i8* @.str.3) #4\n  ret void, !dbg !40\n}\n')
    b = a.replace("!12", "!7").replace("@.str.3", "@.str.9").replace("#4", "#2").replace(
        "!40", "!41")
    assert function_digests(a) == function_digests(b)
    # debug information (-g, -Rpass) is not code
    plain = a.replace(", !tbaa !12", "").replace(", !dbg !40", "")
    with_debug = plain.replace("ret void", "call void @llvm.dbg.value(metadata i32* %p)\n  ret void")
    assert function_digests(plain.replace("ret void", "ret void, !dbg !3")) == \
        function_digests(with_debug) == function_digests(plain)
    assert function_digests(a) != function_digests(a.replace("i32 1", "i32 2"))


def test_cuda_block_entries_read_and_write(tmp_path):
    """mirecc-nvcc's entries (tests/driver/test_nvcc.py applies them): a kernel,
    optionally with an input-size class, and a block shape XxY."""
    digest = "0123456789abcdef"
    profile = tmp_path / "p.profile"
    profile.write_text("# mirecc decisions profile 1\n" + "\n".join([
        format_entry("cuda-block", "src/gemm.cu", "gemm_kernel", digest, {"x": 32, "y": 8}),
        format_entry("cuda-block", "src/gemm.cu", "gemm_kernel@LARGE_DATASET", digest,
                     {"x": 64, "y": 4}, "1.10x")]) + "\n")
    plain, large = read_profile(str(profile))
    assert (plain.task, plain.function, plain.size_class, plain.value) == (
        "cuda-block", "gemm_kernel", None, {"x": 32, "y": 8})
    assert (large.function, large.size_class, large.value, large.comment) == (
        "gemm_kernel", "LARGE_DATASET", {"x": 64, "y": 4}, "1.10x")
    assert large.source == str(tmp_path / "src" / "gemm.cu")
    for line, message in ((f"cuda-block g.cu k {digest} 32by8", "expected a thread-block shape"),
                          (f"cuda-block g.cu k {digest} 64x32", "2048 threads per block"),
                          (f"cuda-block g.cu k:1 {digest} 32x8", "expected a kernel name"),
                          ("cuda-block g.cu k 0123 32x8", "16-hex-digit")):
        profile.write_text(f"# mirecc decisions profile 1\n\n{line}\n")
        with pytest.raises(ProfileError, match=rf"p.profile:3: .*{message}"):
            read_profile(str(profile))


def test_openmp_entries_read_and_write(tmp_path):
    """A region's team size, schedule and optional chunk; anything else is
    an error naming the line."""
    from mirecc.tasks.openmp.profile import region_digest

    digest = "0123456789abcdef"
    profile = tmp_path / "p.profile"
    profile.write_text("# mirecc decisions profile 1\n" + "\n".join([
        format_entry("openmp", "cov.c", "kernel_covariance:0", digest,
                     {"threads": 2, "schedule": "static", "chunk": 8}, "1.71x"),
        format_entry("openmp", "cov.c", "kernel_covariance:1", digest,
                     {"threads": 1, "schedule": "guided"})]) + "\n")
    chunked, plain = read_profile(str(profile))
    assert (chunked.task, chunked.function, chunked.value, chunked.comment) == (
        "openmp", "kernel_covariance", {"threads": 2, "schedule": "static", "chunk": 8}, "1.71x")
    assert plain.value == {"threads": 1, "schedule": "guided"}
    for value in ("threads=0,schedule=static", "threads=2,schedule=auto",
                  "threads=2,schedule=static,chunk=0", "threads=2", "threads=2,schedule=static,x=1"):
        profile.write_text(f"# mirecc decisions profile 1\nopenmp c.c f:0 {digest} {value}\n")
        with pytest.raises(ProfileError, match=r"p.profile:2: .*expected threads=N"):
            read_profile(str(profile))
    # a region's digest covers its outlined function: either edit drops the entry
    digests = {"f": "1" * 16, ".omp_outlined.": "2" * 16}
    both = region_digest(digests, "f", ".omp_outlined.")
    assert both not in (None, digests["f"])
    assert region_digest({**digests, ".omp_outlined.": "3" * 16}, "f", ".omp_outlined.") != both
    assert region_digest(digests, "f", None) == digests["f"]
    assert region_digest(digests, "f", ".omp_outlined..1") is None
