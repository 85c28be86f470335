"""mirecc.encoder.feedback: per-function outcome vectors from real clang-14
compiles of a small C file, the remarks reader, and the resumable corpus
labeller (no duplicate lines, a partial last line cut off)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mirecc.encoder import feedback
from mirecc.encoder.feedback import OUTCOMES, FeedbackError, function_outcomes

from tests.encoder_corpus import CLANG, SOURCES, write_corpus, write_manifest

SOURCE = """
int ext(int);
static int helper(int x) { return x * 3 + 1; }
void saxpy(int n, float a, const float *restrict x, float *restrict y) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
int noloop(int a, int b) { return helper(a) + b + ext(b); }
void matmul(float A[64][64], float B[64][64], float C[64][64]) {
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      C[i][j] = 0;
      for (int k = 0; k < 64; k++) C[i][j] += A[i][k] * B[k][j];
    }
}
"""


def col(name):
    return OUTCOMES.index(name)


@pytest.fixture(scope="module")
def vecs(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    tmp = tmp_path_factory.mktemp("fb")
    (tmp / "t.c").write_text(SOURCE)
    subprocess.run([CLANG, "-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(tmp / "t.c"), "-o", str(tmp / "t.bc")], check=True)
    return function_outcomes(tmp / "t.bc", clang=CLANG, tmpdir=tmp)


def test_outcomes_are_fixed_and_unique():
    assert len(set(OUTCOMES)) == len(OUTCOMES)
    assert OUTCOMES[:5] == ("size_O1", "size_O2", "size_O3", "size_Os", "size_Oz")
    assert OUTCOMES[-1] == "instructions_O0"


def test_defined_functions_only(vecs):
    assert set(vecs) == {"helper", "saxpy", "noloop", "matmul"}     # no `ext`
    for v in vecs.values():
        assert v.dtype == np.float32 and v.shape == (len(OUTCOMES),)
        assert (v >= 0).all() and v[col("instructions_O0")] > 0


def test_vectorize_remarks(vecs):
    assert vecs["saxpy"][col("loop_vectorized")] > 0
    assert vecs["noloop"][col("loop_vectorized")] == 0
    assert vecs["noloop"][col("loop_vectorize_missed")] == 0
    assert vecs["noloop"][col("inlined_into")] > 0           # helper went into it


def test_polly_counts_each_scop_once(vecs):
    assert vecs["matmul"][col("polly_scops")] == 1.0         # log2(1 + 1)
    assert vecs["saxpy"][col("polly_scops")] == 0            # one loop: unprofitable
    assert vecs["noloop"][col("polly_scops")] == 0


def test_sizes(vecs):
    sizes = [col(f"size_{lvl[1:]}") for lvl in feedback.LEVELS]
    assert (vecs["helper"][sizes] == 0).all()                 # inlined away at every level
    for name in ("saxpy", "noloop", "matmul"):
        assert (vecs[name][sizes] > 0).all()
    # the vectorized body is bigger than the -O1 one
    assert vecs["saxpy"][col("size_O3")] > vecs["saxpy"][col("size_O1")]


def test_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.ll"
    bad.write_text("define i32 @f() {\n  ret i64 0\n}\n")
    with pytest.raises(FeedbackError, match="bad.ll") as info:
        function_outcomes(bad, clang=CLANG)
    assert isinstance(info.value, ValueError)
    good = tmp_path / "good.ll"
    good.write_text("define i32 @f() {\n  ret i32 0\n}\n")
    assert set(function_outcomes(good, clang=CLANG)) == {"f"}
    with pytest.raises(FeedbackError, match="ran over"):
        function_outcomes(good, clang=CLANG, timeout=1e-4)


def test_remarks_reader(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "--- !Passed\nPass:            inline\nName:            Inlined\n"
        "DebugLoc:        { File: a.c, Line: 2, Column: 3 }\nFunction:        'odd$name'\n"
        "Args:\n  - Callee:          g\n  - String:          ' inlined into '\n...\n"
        "--- !Analysis\nPass:            polly-scops\nName:            ScopEnd\n"
        "Function:        f\nArgs:\n  - String:          SCoP ends here but was dismissed.\n...\n")
    assert feedback._read_remarks(path) == [
        ("Passed", "inline", "Inlined", "odd$name", " inlined into "),
        ("Analysis", "polly-scops", "ScopEnd", "f", "SCoP ends here but was dismissed.")]
    assert feedback._read_remarks(tmp_path / "none.yaml") == []


@pytest.fixture
def corpus(tmp_path):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    root = tmp_path / "corpus"
    root.mkdir()
    lines = write_corpus(root, SOURCES)
    junk = root / "ir" / "ee" / ("ee" * 32 + ".bc")
    junk.parent.mkdir(parents=True, exist_ok=True)
    junk.write_bytes(b"not bitcode")
    lines.append({"sha256": "ee" * 32, "ir": str(junk.relative_to(root))})
    write_manifest(root, lines)
    return root


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_labeller_resumes_without_duplicates(corpus, tmp_path):
    out = tmp_path / "labels.jsonl"
    args = ["--corpus", str(corpus), "--out", str(out), "--clang", CLANG]
    r = subprocess.run([sys.executable, "-m", "mirecc.encoder.feedback", *args,
                        "--jobs", "2", "--limit", "2"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 0, r.stderr
    first = _lines(out)
    assert first[0]["meta"]["outcomes"] == list(OUTCOMES)
    assert "clang version 14" in first[0]["meta"]["clang"]
    assert len(first) == 3
    with open(out, "a") as fh:                      # a kill mid-write
        fh.write('{"sha": "half')
    assert feedback.main([*args, "--jobs", "1", "--limit", "1"]) == 0
    assert feedback.main([*args, "--jobs", "2"]) == 0
    assert feedback.main([*args, "--jobs", "2"]) == 0   # nothing left: no new lines
    recs = _lines(out)
    assert recs[:3] == first and len(recs) == 1 + 4
    shas = [r["sha"] for r in recs[1:]]
    assert len(set(shas)) == 4
    errors = [r for r in recs[1:] if "error" in r]
    assert [r["sha"] for r in errors] == ["ee" * 32] and "ee" * 32 in errors[0]["error"]
    outcomes, labels = feedback.load_labels(out)
    assert outcomes == OUTCOMES and len(labels) == 3
    assert {"sq", "sum", "dot", "twice", "len"} == {f for m in labels.values() for f in m}


def test_labeller_refuses_other_columns(corpus, tmp_path):
    out = tmp_path / "labels.jsonl"
    out.write_text(json.dumps({"meta": {"outcomes": ["other"], "version": 1}}) + "\n")
    with pytest.raises(SystemExit, match="another outcomes"):
        feedback.main(["--corpus", str(corpus), "--out", str(out), "--clang", CLANG])
