"""Labels for CUDA programs of other suites (offline/suite_labels.py): the
shapes a program's knobs may take, and the labelling run's bookkeeping.

The run's GPU side (the programs and the CUPTI probe) is the edge a test
cannot reach here: stand-in programs write what the probe would (the
kernels' time, the digest of what they copied back), so that the rounds,
the output comparison and the rows the head's bench reads are checked."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from nvcc_helpers import drop_in, launches, needs_nvcc
from mirecc.frontend.launches import scan_source
from mirecc.frontend import nvcc as nvcc_front
from mirecc.tasks.cuda_block.offline import cuda_labels as cl
from mirecc.tasks.cuda_block.offline import suite_labels as sl

# Rodinia's gaussian, reduced: a 1-D knob (a -D chain) and a square one
TWO_KNOBS = """\
#ifdef RD_WG_SIZE_0_0
#define MAXBLOCKSIZE RD_WG_SIZE_0_0
#else
#define MAXBLOCKSIZE 512
#endif
#ifdef RD_WG_SIZE_1_0
#define BLOCK_SIZE_XY RD_WG_SIZE_1_0
#else
#define BLOCK_SIZE_XY 4
#endif
__global__ void fan1(float *m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) m[i] *= 0.5f;
}
__global__ void fan2(float *a, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < n && y < n) a[y * n + x] += 1.0f;
}
int main() {
  int n = 1000;
  int b1 = (n + MAXBLOCKSIZE - 1) / MAXBLOCKSIZE;
  fan1<<<b1, MAXBLOCKSIZE>>>(0, n);
  dim3 block(BLOCK_SIZE_XY, BLOCK_SIZE_XY);
  dim3 grid((n + BLOCK_SIZE_XY - 1) / BLOCK_SIZE_XY, (n + BLOCK_SIZE_XY - 1) / BLOCK_SIZE_XY);
  fan2<<<grid, block>>>(0, n);
  return 0;
}
"""


def test_a_programs_shapes_are_the_papers_through_each_knob(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(TWO_KNOBS)
    cmd = nvcc_front.parse(["-c", str(path)])
    plan = launches.plan_source(scan_source(str(path), cmd), cmd)
    # a shape goes to every tunable kernel or to none, as the head gives it:
    # fan1 takes 32..1024 on x, fan2 square sides 8..32: (32, 32) alone fits both
    assert sl.variants(plan, ["fan1", "fan2"]) == [((32, 32), {"fan1": (32, 1),
                                                              "fan2": (32, 32)})]
    # fan1 alone: x of each shape, the source's 512 and the shapes no knob takes
    # (24x24, 192x1, ...) left out, two shapes giving the same block once
    got = sl.variants(plan, ["fan1"])
    assert got == [((32, 32), {"fan1": (32, 1)}), ((64, 1), {"fan1": (64, 1)}),
                   ((128, 1), {"fan1": (128, 1)}), ((256, 1), {"fan1": (256, 1)}),
                   ((1024, 1), {"fan1": (1024, 1)})]
    assert all(s in cl.paper_shapes() for s, _ in got)


STAND_IN = """\
#!{python}
import json, os, sys
# a stand-in for a CUDA program built at one shape: its output, its kernels'
# time as the probe reports them, and what it "copied back"
label, seconds, result, errors = {label!r}, {seconds!r}, {result!r}, {errors!r}
out = sys.argv[1]
with open(out, "w") as fh:
    fh.write(result)
print("block size " + label)         # a line the program's drop removes
print("sum", result)
with open(os.environ["MIRECC_PROBE_OUT"], "w") as fh:
    json.dump({{"kernel_ns": int(seconds * 1e9), "d2h_bytes": 8, "d2h_fnv": "00ff",
               "api_errors": errors, "dropped": 0, "other_launches": 0,
               "kernels": [{{"name": "_Z3addPfi", "launches": 3, "ns": int(seconds * 1e9)}}]}}, fh)
sys.exit({code!r})
"""


def _bundle(tmp_path, stand_ins):
    bundle = tmp_path / "bundle"
    (bundle / "bin" / "toy").mkdir(parents=True)
    variants = []
    for label, seconds, result, code, *errors in stand_ins:
        exe = bundle / "bin" / "toy" / label
        exe.write_text(STAND_IN.format(python=sys.executable, label=label, seconds=seconds,
                                       result=result, code=code, errors=(errors or [1])[0]))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        source = label == "source"
        shape = None if source else [int(v) for v in label.split("x")]
        variants.append({"label": label, "shape": shape, "source": source,
                         "binary": f"bin/toy/{label}",
                         "blocks": {"add": "256x1" if source else f"{shape[0]}x1"}})
    plan = {"programs": {"toy": {"sizes": {"N1": ["{out}"]}, "drop": r"^block size",
                                 "tree": "toy-suite",
                                 "kernels": ["add"], "variants": variants}}}
    (bundle / "plan.json").write_text(json.dumps(plan))
    return bundle


def _run(tmp_path, bundle, repeats: int):
    """The labelling run over ``bundle``: its folder and rows."""
    probe = tmp_path / "probe.so"     # the stand-ins write the probe's file themselves
    probe.write_text("")
    out = tmp_path / "out"
    sl.main(["run", "--bundle", str(bundle), "--out", str(out), "--repeats", str(repeats),
             "--deadline-s", "120", "--probe", str(probe)])
    return out, [json.loads(line)
                 for line in (out / "cuda_labels.jsonl").read_text().splitlines()]


def test_the_run_times_each_shape_and_tells_a_changed_output(tmp_path):
    # the source's run has one runtime call failing (a benign query), as each shape's;
    # 128x1 has three: a launch the program did not check failed, its output the same
    bundle = _bundle(tmp_path, [("source", 0.004, "42", 0), ("64x1", 0.002, "42", 0),
                                ("128x1", 0.001, "42", 0, 3),
                                ("512x1", 0.001, "41", 0), ("1024x1", 0.001, "42", 3)])
    out, rows = _run(tmp_path, bundle, 3)
    timed = [r for r in rows if r["phase"] == "time"]
    assert len(timed) == 3 * 5
    # rounds rotate the order: each shape goes first once
    firsts = [timed[i * 5]["shape"] for i in range(3)]
    assert firsts == ["source", "64x1", "128x1"]
    checks = {r["shape"]: r for r in rows if r["phase"] == "check"}
    assert {k: c["mismatches"] for k, c in checks.items()} == {
        "source": 0, "64x1": 0, "128x1": 0, "512x1": 3, "1024x1": 0}
    assert checks["source"]["shape_x"] == 256 and checks["64x1"]["shape_x"] == 64
    assert timed[0]["block"] == "add:256x1" and timed[0]["suite"] == "toy-suite"
    table, src = cl.classify(rows)
    assert src == "source"
    assert table["64x1"]["median"] == pytest.approx(0.002) and not table["64x1"]["bad"]
    assert table["512x1"]["bad"]            # its output changed
    assert table["1024x1"]["bad"]           # it failed (exit status 3)
    assert table["128x1"]["bad"]            # more CUDA calls failed than in the source's run
    assert all(r["status"] == "cuda_error" for r in timed if r["shape"] == "128x1")
    assert timed[0]["kernels"] == {"_Z3addPfi": [3, int(timed[0]["gpu_seconds"] * 1e9)]}
    summary = (out / "cuda_summary.txt").read_text()
    # cuda_labels' summary: the fastest correct shape, 2.000x the source's
    assert re.search(r"^toy +N1 +64x1 +0\.002000 +source +0\.004000 +2\.000 ", summary, re.M), \
        summary
    # what mire bench cuda makes of them: one case, its candidates the shapes
    # the knobs took (paper order), each at the block the knob gave
    from mirecc.tasks.cuda_block.offline import bench
    (case,) = bench.cases_of({("toy", "N1"): rows})
    assert case.suite == "toy-suite" and case.source == (256, 1)
    assert case.speed == {(64, 1): pytest.approx(2.0)}
    assert case.bad == {(128, 1), (512, 1), (1024, 1)}
    assert bench.candidates(case) == [(64, 1), (128, 1), (512, 1), (1024, 1)]
    assert bench.applied(case, (512, 1)) == (512, 1)


def test_without_the_probes_data_the_runs_are_timed_whole(tmp_path):
    bundle = _bundle(tmp_path, [("source", 0.004, "42", 0), ("64x1", 0.002, "42", 0)])
    for exe in (bundle / "bin" / "toy").iterdir():   # a machine where CUPTI reports nothing
        exe.write_text(exe.read_text().replace('os.environ["MIRECC_PROBE_OUT"]',
                                                '"/dev/null"'))
    out, rows = _run(tmp_path, bundle, 2)
    timed = [r for r in rows if r["phase"] == "time"]
    assert len(timed) == 4 and all(r["measure"] == "wall" and r["status"] == "ok" and
                                   r["gpu_seconds"] == r["wall_s"] for r in timed)
    assert "timed whole" in (out / "cuda_log.txt").read_text()


def _cupti_found():
    root, inc, lib = sl._cuda_dirs()
    return root is not None and any(os.path.exists(os.path.join(d, "cupti.h")) for d in inc)


@pytest.mark.skipif(not _cupti_found() or not shutil.which("gcc"),
                    reason="no CUDA toolkit with CUPTI headers")
def test_the_probe_builds_against_the_machines_cupti(tmp_path):
    probe, env = sl.build_probe(str(tmp_path))
    symbols = subprocess.run(["nm", "-D", "--defined-only", probe], capture_output=True,
                             text=True, check=True).stdout
    assert " T InitializeInjection" in symbols
    assert env["LD_LIBRARY_PATH"]


def test_the_bench_reports_the_other_suites_programs_apart():
    from types import SimpleNamespace

    from mirecc.tasks.cuda_block.offline import bench
    cases = [bench.Case("gemm", "MINI", (32, 8), {(8, 8): 1.5}),
             bench.Case("toy", "N1", (256, 1), {(64, 1): 2.0, (128, 1): 1.2}, suite="rodinia"),
             bench.Case("toy", "N2", (256, 1), {(64, 1): 0.9, (128, 1): 1.1}, suite="rodinia"),
             bench.Case("sum", "N1", (128, 1), {(64, 1): 1.05}, bad={(512, 1)},
                        suite="hecbench")]
    # the forest's guesses with their predicted log gains
    ranked = {0: [((8, 8), 0.4)], 1: [((64, 1), 0.5), ((128, 1), 0.1)],
              2: [((64, 1), 0.3), ((128, 1), 0.2)], 3: [((512, 1), 0.25), ((64, 1), 0.01)]}
    gate = ([], SimpleNamespace(threshold=0.28), None)
    text = bench.suites_section(cases, {"statistics": ranked}, gate)
    assert "3 cases of 2 programs" in text
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()
            if line.startswith("| toy") or line.startswith("| sum")}
    # toy: the gate lets 64x1 through at both sizes (2.0x and 0.9x); sum: its
    # guess (a shape that failed) is under the gate's bar, so the source's
    assert rows["toy"].endswith("| rodinia | 2 | 1.483 | 1.342 | 0.900 |")
    assert rows["sum"].endswith("| hecbench | 1 | 1.050 | 1.000 | 1.000 |")
    assert bench.suites_section(cases[:1], {"statistics": {0: ranked[0]}}, gate) == ""


@needs_nvcc
def test_the_head_report_says_what_the_shipped_head_applies(tmp_path, capsys):
    # Rodinia's chain knob; the shipped head ranks it (8x8 over the source's
    # 16x16, mirecc-nvcc --explain in test_knobs) and its gate lets it through
    from test_knobs import CHAIN
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text(CHAIN)
    (tmp_path / "plan.json").write_text(json.dumps({"programs": {"tile": {
        "cu": "src/k.cu", "flags": ["-O3", "-Isrc"]}}}))
    sl.main(["head", "--bundle", str(tmp_path)])
    out = capsys.readouterr().out
    assert "tile: tile 8x8" in out and "1 of 1 programs get a shape from the head" in out
