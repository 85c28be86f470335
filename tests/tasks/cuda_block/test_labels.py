"""mirecc/tasks/cuda_block/offline/cuda_labels.py, the GPU label collector for PolyBench-ACC's
thread-block shapes: what can be checked without a GPU (the shape list,
the define rewriting and instrumentation on the real sources, the parsing
of the programs' output, the summary; with nvcc, that the instrumented
program's device code is the original's)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[3]
POLYBENCH = ROOT.parent / "shared" / "datasets" / "polybench-acc" / "CUDA"

from mirecc.frontend.launches import scan_source  # noqa: E402
from mirecc.tasks.cuda_block.offline import cuda_labels as cl  # noqa: E402
from mirecc.tasks.cuda_block.offline import cuda_own_labels as own  # noqa: E402

needs_polybench = pytest.mark.skipif(not POLYBENCH.is_dir(),
                                     reason=f"needs PolyBench-ACC at {POLYBENCH}")


def _read(rel: str) -> str:
    return (POLYBENCH / rel).read_text(encoding="utf-8", errors="replace")


def _header(program: str) -> str:
    rel = cl.TUNABLE[program][0]
    return _read(rel[:-3] + ".cuh")


def test_paper_shapes():
    shapes = cl.paper_shapes()
    assert len(shapes) == 20
    assert shapes[:5] == [(8, 8), (16, 16), (24, 24), (32, 32), (64, 1)]
    assert shapes[-1] == (1024, 1)
    assert [x for x, y in shapes[4:]] == list(range(64, 1025, 64))
    assert all(x * y <= 1024 for x, y in shapes)


def test_scripts_import_only_the_standard_library():
    """They run by path on a lent GPU machine, where mirecc is not installed."""
    for script in ("cuda_labels.py", "cuda_own_labels.py"):
        text = (Path(cl.__file__).parent / script).read_text()
        imported = set(re.findall(r"^\s*(?:import|from) (\w+)", text, re.M))
        assert not imported & {"mirecc", "numpy", "torch"}, script
        for name in imported - {"__future__"}:
            assert name in sys.stdlib_module_names or name == "cuda_labels", (script, name)
    # and by path they run: the sibling import, the kernels, the launch header
    proc = subprocess.run([sys.executable, str(Path(own.__file__)), "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "--deadline-s" in proc.stdout, proc.stderr
    assert all((Path(own.KERNEL_DIR) / f"{k}.cu").is_file() for k in own.KERNELS)
    assert (Path(own.INCLUDE) / "mirecc" / "launch.h").is_file()


# ------------------------------------------------------------------ output parsing

def _formats() -> list[str]:
    """The printf formats of the programs' timing and compare lines, from
    the real sources where present."""
    fallback = ['GPU Time in seconds:\\n', 'CPU Time in seconds:\\n',
                'Non-Matching CPU-GPU Outputs Beyond Error Threshold of %4.2f Percent: %d\\n',
                'Number of misses: %d\\n']
    if not POLYBENCH.is_dir():
        return fallback
    found = set()
    for cu in POLYBENCH.rglob("*.cu"):
        for fmt in re.findall(r'printf\s*\(\s*"([^"]*)"', cu.read_text(errors="replace")):
            if re.search(r"Time in seconds|Non-Matching|misses", fmt):
                found.add(fmt)
    return sorted(found)


def _c(fmt: str, *values) -> str:
    return (fmt.replace("\\n", "\n") % values) if values else fmt.replace("\\n", "\n")


@pytest.mark.parametrize("fmt", [f for f in _formats() if "%" in f])
def test_parse_compare_lines_from_the_sources(fmt):
    values = (0.05, 17) if fmt.count("%") == 2 else (17,)
    timer = "%0.6f\n"          # polybench_timer_print (utilities/polybench.c)
    text = ("setting device 0 with name NVIDIA H100 80GB HBM3\n"
            + _c("GPU Time in seconds:\\n") + timer % 0.001234
            + _c("CPU Time in seconds:\\n") + timer % 0.5 + _c(fmt, *values))
    got = cl.parse_run_output(text)
    assert got == {"gpu_seconds": 0.001234, "cpu_seconds": 0.5, "mismatches": 17}


def test_formats_found_in_the_sources():
    formats = _formats()
    assert "GPU Time in seconds:\\n" in formats
    assert any("Non-Matching" in f for f in formats)
    assert any("misses" in f for f in formats)
    if POLYBENCH.is_dir():
        timer = (POLYBENCH / "utilities" / "polybench.c").read_text(errors="replace")
        assert 'printf ("%0.6f\\n", polybench_t_end - polybench_t_start);' in timer


def test_parse_timing_run_and_other_formats():
    assert cl.parse_run_output("GPU Time in seconds:\n0.000008\n") == \
        {"gpu_seconds": 8e-06, "cpu_seconds": None, "mismatches": None}
    got = cl.parse_run_output("GPU Runtime: 0.002500s\nCPU Runtime: 1.5s\n"
                              "Non-Matching CPU-GPU Outputs Beyond Error Threshold of "
                              "1.05 Percent: 0\n")
    assert got == {"gpu_seconds": 0.0025, "cpu_seconds": 1.5, "mismatches": 0}
    assert cl.parse_run_output("") == {"gpu_seconds": None, "cpu_seconds": None,
                                       "mismatches": None}


def test_run_stream_splits_runs():
    out = ("keepalive noise\n@@MIRECC-BEGIN 4\nsetting device 0 with name X\n"
           "GPU Time in seconds:\n0.000123\n\n"
           "@@MIRECC-END 4 0 cudaSuccess cudaSuccess 0 0.012000\n"
           "@@MIRECC-BEGIN 5\nGPU Time in seconds:\n0.000001\nCPU Time in seconds:\n0.2\n"
           "Number of misses: 3\n"
           "@@MIRECC-END 5 0 cudaSuccess cudaErrorInvalidConfiguration 0 0.5\n"
           "@@MIRECC-BEGIN 6\nGPU Time in seconds:\n")
    stream = cl.RunStream()
    runs = [r for line in out.splitlines(keepends=True) if (r := stream.feed(line))]
    assert [r["id"] for r in runs] == [4, 5]
    assert runs[0]["gpu_seconds"] == 0.000123 and runs[0]["wall_s"] == 0.012
    assert runs[0]["last_error"] == "cudaSuccess" and not runs[0]["sticky"]
    assert runs[1]["mismatches"] == 3 and runs[1]["cpu_seconds"] == 0.2
    assert runs[1]["last_error"] == "cudaErrorInvalidConfiguration"
    assert stream.current == 6           # begun, not ended: a crash or a timeout


# ------------------------------------------------------------------ sources

@needs_polybench
def test_rewrite_defines_on_gemm():
    text = _header("gemm")
    assert cl.block_defines(text) == {"DIM_THREAD_BLOCK_X": 32, "DIM_THREAD_BLOCK_Y": 8}
    new = cl.rewrite_block_defines(text, {"DIM_THREAD_BLOCK_X": "1024",
                                          "DIM_THREAD_BLOCK_Y": "1"})
    assert cl.block_defines(new) == {"DIM_THREAD_BLOCK_X": 1024, "DIM_THREAD_BLOCK_Y": 1}
    assert new.count("\n") == text.count("\n")
    changed = [(a, b) for a, b in zip(text.split("\n"), new.split("\n")) if a != b]
    assert changed == [("#define DIM_THREAD_BLOCK_X 32", "#define DIM_THREAD_BLOCK_X 1024"),
                       ("#define DIM_THREAD_BLOCK_Y 8", "#define DIM_THREAD_BLOCK_Y 1")]
    runtime = cl.rewrite_block_defines(text, {"DIM_THREAD_BLOCK_X": "(mirecc_dim[0])"})
    assert "#define DIM_THREAD_BLOCK_X (mirecc_dim[0])" in runtime
    assert "#define DIM_THREAD_BLOCK_Y 8" in runtime
    with pytest.raises(ValueError):
        cl.rewrite_block_defines(text, {"DIM_THREAD_BLOCK_KERNEL_1_X": "8"})


@needs_polybench
def test_every_program_is_found_and_instrumented():
    assert len(cl.TUNABLE) == 21
    for program, (rel, tunable) in cl.TUNABLE.items():
        values = cl.block_defines(_read(rel[:-3] + ".cuh"))
        assert set(tunable) <= set(values), program
        assert all(isinstance(v, int) for v in values.values()), program
        assert not cl.block_defines(_read(rel)), program   # all in the header
        text = cl.instrument_program(_read(rel))
        assert text.count("mirecc_program_main(") == 2, program     # definition, call
        assert not re.search(r"#\s*ifdef\s+RUN_ON_CPU", text), program
        assert "\tif (mirecc_run_cpu) {" in text and "\t} else {" in text, program
        assert re.search(r"^int main\(int argc, char \*\*argv\)$", text, re.M), program
        assert text.count("\n") == (_read(rel).count("\n") + cl.PRELUDE.count("\n") + 1
                                     + cl.DRIVER.count("\n")), program
        # the macros are used in the launches' dim3 lines only (host code)
        uses = [ln for ln in _read(rel).split("\n") if "DIM_THREAD_BLOCK" in ln]
        assert uses and all("dim3" in ln for ln in uses), program


@needs_polybench
def test_tunable_agrees_with_mirecc_nvcc():
    nvcc = pytest.importorskip("mirecc.frontend.nvcc")
    from mirecc.tasks.cuda_block import launches
    for program, (rel, tunable) in cl.TUNABLE.items():
        src = str(POLYBENCH / rel)
        cmd = nvcc.parse(["-O3", "-I", str(POLYBENCH / "utilities"), src])
        scan = scan_source(src, cmd)
        settable = sorted(m for m, why in launches._settable(scan).items() if why is None)
        assert settable == sorted(tunable), program


@needs_polybench
def test_custom_sizes_go_before_the_size_guard():
    for (program, size), macros in cl.CUSTOM_SIZES.items():
        assert size in cl.SIZES[program]
        text = _header(program)
        new = cl.set_custom_size(text, cl.size_defines(program, size))
        guard = re.search(r"^# if !defined\((?!\w*_DATASET)\w+\)(?: && !defined\(\w+\))*",
                          text, re.M)
        assert guard, program
        guarded = set(re.findall(r"!defined\((\w+)\)", guard[0]))
        assert guarded == {d.split("=")[0] for d in macros.split()}, program
        before = new[:new.index(guard[0])]
        for d in macros.split():
            name, value = d.split("=")
            assert f"#define {name} {value} " in before, program
    for program in cl.TUNABLE:
        for size in cl.SIZES[program]:
            assert cl.size_defines(program, size)
    with pytest.raises(ValueError):
        cl.size_defines("gemm", "N768")


def test_plan_shapes():
    two_d = cl.plan_shapes({"DIM_THREAD_BLOCK_X": 32, "DIM_THREAD_BLOCK_Y": 8},
                           ["DIM_THREAD_BLOCK_X", "DIM_THREAD_BLOCK_Y"])
    assert len(two_d) == 21 and two_d[0].is_source and two_d[0].label == "32x8"
    assert [s.label for s in two_d[1:]] == [f"{x}x{y}" for x, y in cl.paper_shapes()]
    assert two_d[-1].applied == {"DIM_THREAD_BLOCK_X": 1024, "DIM_THREAD_BLOCK_Y": 1}
    assert not any(s.skip for s in two_d)
    # bicg: y fixed at 1; (256, 1) is the source's own; the squares' y is not applied
    one_d = cl.plan_shapes({"DIM_THREAD_BLOCK_X": 256, "DIM_THREAD_BLOCK_Y": 1},
                           ["DIM_THREAD_BLOCK_X"])
    assert len(one_d) == 20 and sum(s.is_source for s in one_d) == 1
    assert "256x1" not in [s.label for s in one_d[1:]]
    assert one_d[1].label == "8x8" and one_d[1].block() == "8x1"
    # atax: y fixed at 8: blocks past 1024 threads are planned as skipped
    atax = cl.plan_shapes({"DIM_THREAD_BLOCK_X": 32, "DIM_THREAD_BLOCK_Y": 8},
                          ["DIM_THREAD_BLOCK_X"])
    run = [s.block() for s in atax if not s.skip]
    assert run == ["32x8", "8x8", "16x8", "24x8", "64x8", "128x8"]
    assert all("threads" in s.skip for s in atax if s.skip)
    # per-kernel macros each take the shape; fixed axes keep the source's value
    corr = cl.plan_shapes({"DIM_THREAD_BLOCK_KERNEL_1_X": 256, "DIM_THREAD_BLOCK_KERNEL_1_Y": 1,
                           "DIM_THREAD_BLOCK_KERNEL_3_X": 32, "DIM_THREAD_BLOCK_KERNEL_3_Y": 8},
                          ["DIM_THREAD_BLOCK_KERNEL_1_X", "DIM_THREAD_BLOCK_KERNEL_3_X",
                           "DIM_THREAD_BLOCK_KERNEL_3_Y"])
    assert corr[0].label == "source" and corr[0].block() == "1:256x1 3:32x8"
    assert corr[1].block() == "1:8x1 3:8x8"
    # nothing settable: the source shape only
    assert len(cl.plan_shapes({"DIM_THREAD_BLOCK_X": 256, "DIM_THREAD_BLOCK_Y": 1}, [], [])) == 1


def test_summary_best_and_wrong():
    def rec(shape, phase, t=None, mism=None, err=None, source=False, status="ok"):
        return {"program": "gemm", "size": "MINI", "shape": shape, "is_source_shape": source,
                "phase": phase, "gpu_seconds": t, "mismatches": mism, "cuda_error": err,
                "status": "cuda_error" if err else status}
    records = [rec("32x8", "time", t, source=True) for t in (0.010, 0.011, 0.012)]
    records += [rec("8x8", "time", t) for t in (0.004, 0.005, 0.006)]       # wrong output
    records += [rec("16x16", "time", t) for t in (0.007, 0.008, 0.009)]
    records += [rec("24x24", "time", 0.001, err="cudaErrorLaunchOutOfResources")]
    records += [rec("32x8", "check", 0.1, 0, source=True), rec("8x8", "check", 0.1, 5),
                rec("16x16", "check", 0.1, 0), rec("24x24", "check", 0.1, 0)]
    text = cl.summarize(records, ["gemm"], lambda p: ["MINI"])
    row = text.strip().split("\n")[-1].split()
    assert row[:3] == ["gemm", "MINI", "16x16"]
    assert float(row[3]) == pytest.approx(0.008) and row[4] == "32x8"
    assert float(row[5]) == pytest.approx(0.011)
    assert float(row[6]) == pytest.approx(0.011 / 0.008, abs=1e-3)
    assert row[7:10] == ["4", "2", "0"]       # timed, wrong (8x8, 24x24), unchecked


# ------------------------------------------------------------------ with nvcc

def _nvcc():
    try:
        from mirecc.frontend.nvcc import find_nvcc
        return find_nvcc()
    except ImportError:
        return cl.find_nvcc()


@needs_polybench
@pytest.mark.skipif(not _nvcc() or not shutil.which("g++"), reason="needs nvcc and g++")
def test_instrumented_device_code_is_the_originals(tmp_path):
    """Run-time shapes change host code only: the PTX of the instrumented
    program equals the original's (gemm, two kernels' worth of checks in
    correlation's per-kernel macros)."""
    nvcc = _nvcc()
    for program in ("gemm", "correlation"):
        rel = cl.TUNABLE[program][0]
        build = tmp_path / program
        cu = cl.prepare_build(str(POLYBENCH), program, "MINI_DATASET", {}, str(build), "runtime")
        ptx = []
        for source, where in ((str(POLYBENCH / rel), str(POLYBENCH / os.path.dirname(rel))),
                              (cu, str(build))):
            out = tmp_path / f"{program}.{len(ptx)}.ptx"
            subprocess.run([nvcc, "-arch=sm_90", *cl.NVCC_FLAGS, "-DMINI_DATASET", "-ptx",
                            "-I", str(POLYBENCH / "utilities"), source, "-o", str(out)],
                           check=True, cwd=where, capture_output=True)
            ptx.append(out.read_text())
        assert ptx[0] == ptx[1], program


# ------------------------------------------------------------------ the runner

FAKE_DRIVER = """#!{python}
import os, signal, sys, time
for arg in sys.argv[1:]:
    jid, cpu, dims = arg.split(":")
    print("@@MIRECC-BEGIN", jid, flush=True)
    what = dims.split(",")[0]
    if what == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(60)
    print("GPU Time in seconds:\\n0.00%s" % jid)
    if cpu == "1":
        print("Number of misses: 0")
    sticky = what == "sticky"
    print("@@MIRECC-END %s 0 %s cudaSuccess %d 0.01" %
          (jid, "cudaErrorIllegalAddress" if sticky else "cudaSuccess", sticky), flush=True)
    if sticky:
        sys.exit(3)
"""


def _fake(tmp_path, behaviours, phase="time"):
    exe = tmp_path / "fake.py"
    exe.write_text(FAKE_DRIVER.format(python=sys.executable))
    exe.chmod(0o755)
    shape = cl.Shape("8x8", 8, 8, {"DIM_THREAD_BLOCK_X": 8, "DIM_THREAD_BLOCK_Y": 8})
    jobs = [cl.Job(i + 1, "gemm", "MINI", shape, phase, 0, phase == "check", [b])
            for i, b in enumerate(behaviours)]
    return str(exe), jobs, cl.Recorder(str(tmp_path))


def test_run_jobs_survives_crash_hang_and_sticky_errors(tmp_path):
    import time
    exe, jobs, rec = _fake(tmp_path, ["ok", "crash", "ok", "hang", "ok", "sticky", "ok"], "check")
    n = cl.run_jobs(exe, jobs, rec, call_timeout=2, hard_stop=time.monotonic() + 60,
                    env=dict(os.environ), cwd=str(tmp_path))
    rec.close()
    assert n == 7
    assert [r["status"] for r in rec.records] == ["ok", "crash", "ok", "timeout", "ok",
                                                  "cuda_error", "ok"]
    assert rec.records[0]["gpu_seconds"] == 0.001 and rec.records[0]["mismatches"] == 0
    assert rec.records[1]["returncode"] == -11
    assert rec.records[5]["cuda_error"] == "cudaErrorIllegalAddress"
    lines = (tmp_path / "cuda_labels.jsonl").read_text().splitlines()
    assert len(lines) == 7


def test_run_jobs_stops_at_the_deadline(tmp_path):
    import time
    exe, jobs, rec = _fake(tmp_path, ["ok", "hang", "ok"])
    t0 = time.monotonic()
    cl.run_jobs(exe, jobs, rec, call_timeout=30, hard_stop=t0 + 2,
                env=dict(os.environ), cwd=str(tmp_path))
    rec.close()
    assert time.monotonic() - t0 < 10
    assert [r["status"] for r in rec.records] == ["ok", "deadline"]


# ------------------------------------------------- baselines over the labels

def _baselines():
    from mirecc.tasks.cuda_block.offline import cuda_label_baselines
    return cuda_label_baselines


def _run(program, size, shape, t, source=False, phase="time", status="ok", mism=0):
    return {"program": program, "size": size, "shape": shape, "is_source_shape": source,
            "phase": phase, "status": status, "gpu_seconds": t, "mismatches": mism,
            "cuda_error": "cudaErrorInvalidValue" if status == "cuda_error" else None}


def test_fixed_shape_is_chosen_on_the_other_programs_and_wrong_shapes_fall_back():
    b = _baselines()
    recs = []
    # a and b: 8x8 is twice as fast as the source; c: 8x8 gives a wrong output
    for p in ("a", "b", "c"):
        recs += [_run(p, "S", "source", 2.0, source=True), _run(p, "S", "8x8", 1.0),
                 _run(p, "S", "64x1", 1.6),
                 _run(p, "S", "source", None, source=True, phase="check"),
                 _run(p, "S", "8x8", None, phase="check", mism=5 if p == "c" else 0),
                 _run(p, "S", "64x1", None, phase="check")]
    data = b.cases(recs)
    assert data[("a", "S")] == {"source": 1.0, "8x8": 2.0, "64x1": 1.25}
    assert "8x8" not in data[("c", "S")]
    loo = b.fixed_shape_loo(data)
    assert loo[("a", "S")] == ("8x8", 2.0)
    # chosen on a and b, 8x8 is wrong on c: the source shape stands there
    assert loo[("c", "S")] == ("8x8", 1.0)


def test_the_committed_labels_give_an_oracle_over_every_fixed_choice():
    import gzip
    import json
    b = _baselines()
    path = ROOT / "heads" / "cuda-block" / "labels" / "h100-polybench.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        data = b.cases([json.loads(line) for line in fh])
    assert len(data) >= 50     # 18 tunable programs x 3 sizes, less any failed case
    loo = b.fixed_shape_loo(data)
    for key, speeds in data.items():
        assert max(speeds.values()) >= loo[key][1] > 0


# ------------------------------------------------------------------ own kernels



def test_own_kernels_are_tunable_launches_as_mirecc_nvcc_sees_them():
    """Each of the task's own kernels (offline/kernels) is one launch marked with
    <mirecc/launch.h>: mirecc-nvcc's analysis finds the macros the labeller
    sets and the defaults it calls the source shape."""
    nvcc = pytest.importorskip("mirecc.frontend.nvcc")
    from mirecc.tasks.cuda_block import launches
    for kernel, (default, _sizes) in own.KERNELS.items():
        src = os.path.join(own.KERNEL_DIR, f"{kernel}.cu")
        cmd = nvcc.parse(["-O3", "-I", own.INCLUDE, "-c", src])
        scan = scan_source(src, cmd)
        block = launches._kernel_block(kernel, scan, launches._settable(scan))
        assert block.tunable == "header", (kernel, block.note)
        source = own.shapes_for(kernel)[0]
        assert source.is_source
        assert sorted(m for m in block.macros if m) == sorted(source.applied)
        assert [int(block.default[i]) for i in range(len(default))] == list(default)


def test_own_kernel_shapes_set_only_the_launch_axes():
    matvec = own.shapes_for("matvec")           # a 1-D launch: x only
    assert matvec[0].applied == {"MIRECC_BLOCK_matvec_X": 256}
    assert all(set(s.applied) == {"MIRECC_BLOCK_matvec_X"} for s in matvec)
    xs = [s.applied["MIRECC_BLOCK_matvec_X"] for s in matvec]
    assert len(xs) == len(set(xs)) == 20        # (256, 256) is the source's: not twice
    transpose = own.shapes_for("transpose")
    assert {s.label for s in transpose[1:]} == {f"{x}x{y}" for x, y in cl.paper_shapes()}
    assert not any(s.skip for s in transpose)   # the paper's shapes are at most 1024 threads


def test_own_output_is_split_per_size():
    text = ("size 64\nGPU Time in seconds:\n0.000100\nNumber of misses: 0\n"
            "size 128\nGPU Time in seconds:\n0.000400\nNumber of misses: 3\n")
    parts = own.split_sizes(text)
    assert sorted(parts) == [64, 128]
    assert cl.parse_run_output(parts[128])["gpu_seconds"] == 0.0004
    assert cl.parse_run_output(parts[128])["mismatches"] == 3


def test_committed_own_kernel_labels_cover_every_kernel_and_size_checked():
    import gzip
    import json
    path = ROOT / "heads" / "cuda-block" / "labels" / "h100-own-kernels.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        recs = [json.loads(line) for line in fh]
    for kernel, (_default, sizes) in own.KERNELS.items():
        for n in sizes:
            mine = [r for r in recs if r["program"] == kernel and r["size"] == own.size_label(n)]
            table, src = cl.classify(mine)
            assert src is not None and table[src]["checked"], (kernel, n)
            assert len(table) == len(own.shapes_for(kernel)), (kernel, n)
            assert all(s["rounds"] == 3 for s in table.values()), (kernel, n)
