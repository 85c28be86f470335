"""mire tune with CUDA kernels as sites: mirecc-nvcc records each tunable
kernel's block shape (its digest from the device IR), the tune tries the
fallback shapes through real nvcc builds, and the kept entry reaches the
object.  No GPU: only the benchmark is staged (the run reads the block
shape the object was built with and sleeps less for 8x8), so the outcome is
deterministic; the builds, the records, the profile and its application
are the real ones."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.taskapi.profile import read_profile
from nvcc_helpers import HEADER, MARKED, MIRECC_NVCC, NVCC, needs_nvcc, normalised, run

MIRE = str(Path(sys.executable).with_name("mire"))

# saxpy's shape is marked tunable; scale's is written as numbers (no site).
# The shape is also a tag in the host object ("SHAPE008x008"): what the
# staged run reads.
# nvcc_helpers' marked kernels (its main left out), and a run entry point
KERNEL = MARKED[:MARKED.index("int main() {")] + """\
#define DIGIT(v, p) (char)('0' + (v) / (p) % 10)
extern "C" const char block_shape_tag[] = {
    'S', 'H', 'A', 'P', 'E', DIGIT(BX, 100), DIGIT(BX, 10), DIGIT(BX, 1),
    'x', DIGIT(BY, 100), DIGIT(BY, 10), DIGIT(BY, 1), '\\0'};
void run(int n, const float *x, float *y) {
  dim3 block(BX, BY);
  dim3 grid((n + block.x * block.y - 1) / (block.x * block.y));
  saxpy<<<grid, block>>>(n, 2.0f, x, y);
  scale<<<4, 256>>>(n, y);
}
"""
# a shell script: its own start-up time is small beside the sleeps
RUN = """\
#!/bin/sh
if grep -q -a SHAPE008x008 k.o; then sleep 0.1; else sleep 0.3; fi
echo done
"""
BUILD = f"{MIRECC_NVCC} -O3 -c k.cu -o k.o"


def _tune(tmp_path, kernel: str, run_script: str, *more: str):
    """``mire tune`` of k.cu built by mirecc-nvcc, the staged run.sh timed;
    no heads: a kernel's candidates are the kind's fallback shapes.  Budget
    13: the baseline (1 build + 2 runs), then two candidates (1 build + 2 x 2
    alternated runs each); the re-check's runs are beyond it."""
    (tmp_path / "k.cu").write_text(kernel)
    (tmp_path / "run.sh").write_text(run_script)
    (tmp_path / "run.sh").chmod(0o755)
    env = isolated_env(tmp_path, MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([MIRE, "tune", "--build", BUILD, "--run", "./run.sh",
                           "--artifact", "k.o", "--budget", "13", "--repeats", "2", *more],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return proc, env


@needs_nvcc
def test_tune_tries_a_kernels_block_shapes_and_the_profile_applies_the_winner(tmp_path):
    proc, env = _tune(tmp_path, KERNEL, RUN, "--time-profile", "auto")
    assert proc.returncode == 0, proc.stderr
    assert "1 cuda-block site(s) to try; shares by kernels of equal weight" in proc.stderr \
        and "8 candidate(s), 0 predicted to gain more than 2%" in proc.stderr, proc.stderr
    assert "sampling" not in proc.stderr, proc.stderr      # perf cannot weigh a kernel
    assert "saxpy 32x8: median" in proc.stderr and "saxpy 8x8: kept (" in proc.stderr, \
        proc.stderr
    assert "1 decision(s) kept" in proc.stdout and "13 of the budget of 13" in proc.stdout, \
        proc.stdout
    state = json.loads((tmp_path / ".mirecc-tune" / "state.json").read_text())
    [site] = state["sites"]
    assert (site["task"], site["target"], site["source"]) == (
        "cuda-block", "saxpy", str(tmp_path / "k.cu"))
    # the fallback in its order, the source's own 128x1 left out
    assert [f"{c['x']}x{c['y']}" for c in site["candidates"]] == [
        "32x8", "8x8", "16x16", "32x32", "64x1", "256x1", "32x4", "16x8"]

    [entry] = read_profile(str(tmp_path / "mirecc.profile"))
    assert (entry.task, entry.target, entry.value) == ("cuda-block", "saxpy", {"x": 8, "y": 8})
    assert entry.source == str(tmp_path / "k.cu") and "x the baseline's median" in entry.comment
    assert re.search(r"^cuda-block  k\.cu  saxpy  [0-9a-f]{16}  8x8  # ",
                     (tmp_path / "mirecc.profile").read_text(), re.M)

    # a build with the profile is nvcc's with the shape defined by hand
    tuned = run([MIRECC_NVCC, "-O3", "-c", "k.cu", "-o", "tuned.o"], tmp_path,
                env={**env, "MIRECC_PROFILE": str(tmp_path / "mirecc.profile")})
    assert tuned.returncode == 0 and tuned.stderr == "", tuned.stderr
    by_hand = ["-isystem", HEADER, "-DMIRECC_BLOCK_saxpy_X=8", "-DMIRECC_BLOCK_saxpy_Y=8"]
    assert run([NVCC, "-O3", *by_hand, "-c", "k.cu", "-o", "hand.o"], tmp_path).returncode == 0
    baseline = next((tmp_path / ".mirecc-tune" / "baseline").iterdir())
    assert b"SHAPE128x001" in baseline.read_bytes()      # what the staged run reads
    assert normalised(tmp_path / "tuned.o") == normalised(tmp_path / "hand.o") \
        != normalised(baseline)
    assert b"SHAPE008x008" in (tmp_path / "tuned.o").read_bytes()


# ordinary CUDA code: the block is an unconditional macro the grid follows
# (a knob mirecc-nvcc rewrites in a copy); the tag is file-local, so the knob
# sets nothing other translation units read
KNOB_KERNEL = """\
#define THREADS 128
__global__ void add(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}
#define DIGIT(v, p) (char)('0' + (v) / (p) % 10)
__attribute__((used)) static const char block_shape_tag[] = {
    'S', 'H', 'A', 'P', 'E', DIGIT(THREADS, 1000), DIGIT(THREADS, 100), DIGIT(THREADS, 10),
    DIGIT(THREADS, 1), '\\0'};
void run(int n, float *a) {
  add<<<(n + THREADS - 1) / THREADS, THREADS>>>(a, n);
}
"""
KNOB_RUN = """\
#!/bin/sh
if grep -q -a SHAPE0064 k.o; then sleep 0.1; else sleep 0.3; fi
echo done
"""


@needs_nvcc
def test_tune_sets_an_ordinary_macro_knob_through_the_rewritten_copy(tmp_path):
    proc, env = _tune(tmp_path, KNOB_KERNEL, KNOB_RUN)
    assert proc.returncode == 0, proc.stderr
    state = json.loads((tmp_path / ".mirecc-tune" / "state.json").read_text())
    [site] = state["sites"]
    assert (site["task"], site["target"]) == ("cuda-block", "add")
    # only the shapes the 1-D knob may take (32..1024, powers of two), the
    # fallback's first, never the source's 128
    assert [f"{c['x']}x{c['y']}" for c in site["candidates"]] == [
        "64x1", "256x1", "32x1", "512x1", "1024x1"]
    [entry] = read_profile(str(tmp_path / "mirecc.profile"))
    assert (entry.target, entry.value) == ("add", {"x": 64, "y": 1})
    env["MIRECC_PROFILE"] = str(tmp_path / "mirecc.profile")
    tuned = run([MIRECC_NVCC, "-O3", "-c", "k.cu", "-o", "tuned.o"], tmp_path, env=env)
    assert tuned.returncode == 0 and tuned.stderr == "", tuned.stderr
    assert b"SHAPE0064" in (tmp_path / "tuned.o").read_bytes()
    baseline = next((tmp_path / ".mirecc-tune" / "baseline").iterdir())
    assert b"SHAPE0128" in baseline.read_bytes()
    text = run([MIRECC_NVCC, "--explain", "-O3", "-c", "k.cu", "-o", "e.o"], tmp_path,
               env=env).stdout
    assert "block 64x1 (add" in text and "from the decisions profile" in text and \
        "THREADS rewritten in a copy" in text, text


@needs_nvcc
def test_mirecc_nvcc_records_tunable_kernels_and_a_record_it_cannot_write_is_one_warning(
        tmp_path):
    """One line per CUDA source: the tunable kernel with the digest
    --explain gives it, the untunable one left out; an unwritable record
    file is one warning and nvcc's object."""
    from nvcc_helpers import explained

    (tmp_path / "k.cu").write_text(KERNEL)
    env = isolated_env(tmp_path, MIRECC_RECORD=str(tmp_path / "r.jsonl"))
    assert run([MIRECC_NVCC, "-O3", "-c", "k.cu", "-o", "k.o"], tmp_path, env=env).returncode == 0
    [line] = [json.loads(t) for t in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert (line["cwd"], line["source"], line["front_end"]) == (str(tmp_path), "k.cu",
                                                                "mirecc-nvcc")
    [saxpy] = line["decisions"]
    digests = {k["source_name"]: k["digest"] for k in explained(
        tmp_path, "-O3", "-c", "k.cu", "-o", "e.o", env=isolated_env(tmp_path))["kernels"]}
    assert {k: saxpy[k] for k in ("task", "target", "digest", "default", "fixed", "candidates")} \
        == {"task": "cuda-block", "target": "saxpy", "digest": digests["saxpy"],
            "default": {"x": 128, "y": 1}, "fixed": [], "candidates": []}
    (tmp_path / "r.jsonl").unlink()
    (tmp_path / "r.jsonl").mkdir()           # cannot be appended to
    proc = run([MIRECC_NVCC, "-O3", "-c", "k.cu", "-o", "k2.o"], tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr.count("warning") == 1, proc.stderr
    assert "the record file has no line for this compile" in proc.stderr
    assert normalised(tmp_path / "k2.o") == normalised(tmp_path / "k.o")


def _record(source: str, *decisions: dict) -> dict:
    return {"cwd": "/p", "source": source, "front_end": "mirecc-nvcc", "language": "cuda",
            "decisions": list(decisions)}


def _kernel(name: str, default=(128, 1), fixed=(), ranking=()) -> dict:
    return {"task": "cuda-block", "target": name, "digest": "0123456789abcdef",
            "default": {"x": default[0], "y": default[1]}, "fixed": list(fixed),
            "candidates": [[{"x": x, "y": y}, s] for (x, y), s in ranking],
            "value": {"x": default[0], "y": default[1]}, "applied": False}


def test_kernels_weigh_equally_their_candidates_go_by_predicted_gain_and_keep_fixed_axes():
    """Sites from mirecc-nvcc's records (no IR): the head's ranking without
    the source's own shape, the fallback where it ranked none (no gain
    predicted), only shapes on the axes the launch lets a decision set.
    The kernels weigh 1/n of the run each and are never dropped for a
    missing share; the candidates of all sites go by the share of the run
    each is predicted to save, those with no gain predicted after them."""
    from mirecc.cli.tune import order_candidates, order_sites, sites_of

    records = [
        _record("b.cu", _kernel("zeta"), _kernel("alpha"),
                # only x is marked: y stays the source's 1
                _kernel("rows", default=(256, 1), fixed=("y",))),
        _record("a.cu", _kernel("mid", ranking=[((128, 1), 1.0), ((16, 16), 1.4),
                                                ((8, 8), 1.2)])),
        _record("d.cu", _kernel("other", ranking=[((32, 8), 1.3), ((64, 1), 0.9)])),
        _record("c.cu")]
    sites = sites_of(records, Path("/nowhere"))
    assert [(Path(s["source"]).name, s["target"]) for s in sites] == [
        ("a.cu", "mid"), ("d.cu", "other"), ("b.cu", "alpha"), ("b.cu", "rows"),
        ("b.cu", "zeta")]
    shapes = {s["target"]: [f"{c['x']}x{c['y']}" for c in s["candidates"]] for s in sites}
    assert shapes["mid"] == ["16x16", "8x8"] and sites[0]["score"] == 1.4
    assert sites[0]["gains"] == pytest.approx([math.log(1.4), math.log(1.2)])
    assert shapes["alpha"] == ["32x8", "8x8", "16x16", "32x32", "64x1", "256x1", "32x4",
                               "16x8"]
    assert sites[2]["gains"] == [0.0] * 8
    assert shapes["rows"] == ["64x1", "128x1"]
    assert all(s["digest"] == "0123456789abcdef" and not s["sampled"] for s in sites)
    # with perf's shares of the host: a cold loop dropped, the kernels kept,
    # 1/5 of the run each
    loops = [{"task": "loop-vectorize", "function": f, "target": f"{f}:1", "depth": 1,
              "score": 0.05, "source": "/p/m.c", "candidates": [{"vectorize.width": 4}],
              "gains": [0.05]} for f in ("hot", "cold")]
    ordered, dropped = order_sites(sites + loops, {"hot": 0.9, "cold": 0.001}, 0.01)
    assert [s["target"] for s in ordered] == ["hot:1", "mid", "other", "alpha", "rows", "zeta"]
    assert dropped == 1 and [s["share"] for s in ordered[1:]] == [0.2] * 5
    tried = [(ordered[i]["target"], ordered[i]["candidates"][j])
             for i, j in order_candidates(ordered)]
    # mid's 16x16 saves 0.2 x (1 - 1/1.4) = 5.7% of the run, other's 32x8
    # 4.6%, the hot loop's 0.9 x (1 - 1/e**0.05) = 4.4%, mid's 8x8 3.3%
    assert tried[:4] == [("mid", {"x": 16, "y": 16}), ("other", {"x": 32, "y": 8}),
                         ("hot:1", {"vectorize.width": 4}), ("mid", {"x": 8, "y": 8})]
    # then the others site by site: other's predicted loss, the fallbacks
    assert tried[4] == ("other", {"x": 64, "y": 1})
    assert [k for k, _ in tried[5:]] == ["alpha"] * 8 + ["rows"] * 2 + ["zeta"] * 8


@pytest.mark.parametrize("shape", ["?", "BS"])
def test_a_kernel_whose_fixed_axis_is_not_a_number_makes_no_site(shape):
    from mirecc.cli.tune import sites_of

    kernel = _kernel("k", fixed=("y",))
    kernel["default"]["y"] = shape
    assert sites_of([_record("k.cu", kernel)], Path("/nowhere")) == []
