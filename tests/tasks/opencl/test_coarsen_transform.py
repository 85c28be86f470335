"""The plugin's OpenCL thread-coarsening pass (passes/plugin/mirecc_coarsen.cpp)
on real opt and clang 14 and 19: every form it accepts, run with the work-item
emulator of :mod:`mirecc.tasks.opencl.offline.coarsen_check`, writes the same
bytes as factor 1; the kernels it must refuse are refused with their reason;
and the check itself sees a wrong launch."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mirecc.learn.datasets import default_root
from mirecc.tasks.opencl.offline import coarsen_check as cc

DATASET = default_root() / "thread_coarsening"
# dataset kernels for CI: a grid-stride loop, local ids along the coarsened
# dimension, 2-D with vectors, local memory (refused)
SOME = ("blackscholes", "mriQ", "sobel", "dwtHaar1D")


def _opt(major):
    if not (shutil.which(f"opt-{major}") or Path(f"/usr/lib/llvm-{major}/bin/opt").exists()):
        pytest.skip(f"opt-{major} is not installed")


@pytest.mark.parametrize("major", [14, 19])
def test_accepted_forms_equal_factor_one(llvm_plugin, tmp_path, major):
    _clang, _major, plugin = llvm_plugin(major)
    _opt(major)
    rows = []
    for name, src in cc.OWN_KERNELS.items():
        kernel = cc.read_kernel(cc.own_kernel_ir(name, src, major, tmp_path), name)
        rows.append(cc.check_kernel(kernel, major, plugin, tmp_path, factors=(2, 8)))
    if (DATASET / "kernels_ir").is_dir():
        for stem in SOME:
            kernel = cc.read_kernel(DATASET / "kernels_ir" / f"{stem}.ll", stem)
            rows.append(cc.check_kernel(kernel, major, plugin, tmp_path, factors=(4,)))
    cells = {(r.source, key): c for r in rows for key, c in r.cells.items()}
    assert not [k for k, c in cells.items() if c != "equal" and not c.startswith("refused")], \
        cc.table_markdown(rows)
    # what must be refused, and why
    assert cells[("withbarrier", "2/consecutive")].startswith("refused: calls _Z7barrierj")
    assert "strided" in cells[("tiles", "2/strided")]
    assert cells[("tiles", "8/consecutive")] == "equal"     # local ids, consecutive
    for key in ("2/consecutive", "8/strided"):
        assert cells[("saxpy", key)] == "equal" and cells[("stencil2d", key)] == "equal"
        assert cells[("gridstride", key)] == "equal"
    if (DATASET / "kernels_ir").is_dir():
        assert cells[("dwtHaar1D", "4/consecutive")] == \
            "refused: takes local memory (a __local argument)"
        assert cells[("mriQ", "4/consecutive")] == "equal"
        assert cells[("mriQ", "4/strided")].startswith("refused")
        assert cells[("blackscholes", "4/strided")] == "equal"


def test_the_check_sees_a_wrong_launch(llvm_plugin, tmp_path):
    """The coarsened stencil launched with the whole global size (the host
    side of the transform left out) writes other bytes: the comparison can
    fail."""
    _clang, _major, plugin = llvm_plugin(14)
    _opt(14)
    kernel = cc.read_kernel(cc.own_kernel_ir("stencil2d", cc.OWN_KERNELS["stencil2d"], 14,
                                             tmp_path), "stencil2d")
    g, loc = (256, 16, 1), (32, 4, 1)
    base = cc._build_run(kernel.ir, kernel, 14, tmp_path, "k1", (g, loc))
    out = tmp_path / "s2.ll"
    ok, line = cc.coarsen(kernel.ir, kernel.name, 2, "consecutive", 14, plugin, out)
    assert ok and line == "mirecc-coarsen: stencil2d: factor 2 dim 0 consecutive"
    right = cc._build_run(out, kernel, 14, tmp_path, "k2", ((128, 16, 1), (16, 4, 1)))
    wrong = cc._build_run(out, kernel, 14, tmp_path, "k2w", (g, loc))
    assert right == base and wrong != base


def test_bad_options_and_unknown_kernel(llvm_plugin, tmp_path):
    _clang, _major, plugin = llvm_plugin(19)
    _opt(19)
    ir = cc.own_kernel_ir("saxpy", cc.OWN_KERNELS["saxpy"], 19, tmp_path)
    ok, line = cc.coarsen(ir, "nosuch", 2, "consecutive", 19, plugin, tmp_path / "o.ll")
    assert not ok and line == "mirecc-coarsen: nosuch: refused: no such kernel in the module"
    import subprocess
    proc = subprocess.run([cc._tool("opt", 19), "-load-pass-plugin", str(plugin),
                           "-passes=mirecc-coarsen<kernel=saxpy;factor=99>", str(ir),
                           "-disable-output"], capture_output=True, text=True)
    assert proc.returncode != 0 and "mirecc-coarsen: factor: 1..64" in proc.stderr


REQD = r"""
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void scale(__global float *y, float a) { y[get_global_id(0)] *= a; }
void helper(__global float *y) { y[1] = 2.0f; }
"""


@pytest.mark.parametrize("major", [14, 19])
def test_kernel_metadata_kept_and_required_size_divided(llvm_plugin, tmp_path, major):
    """The coarsened kernel keeps its kernel_arg_* metadata, its required
    work-group size is divided by the factor (the host divides the local
    size), a factor that does not divide it is refused, and a function that
    is no kernel is refused."""
    _clang, _major, plugin = llvm_plugin(major)
    _opt(major)
    ir = cc.own_kernel_ir("scale", REQD, major, tmp_path)
    out = tmp_path / "scale4.ll"
    ok, line = cc.coarsen(ir, "scale", 4, "consecutive", major, plugin, out)
    assert ok, line
    text = out.read_text()
    define = next(ln for ln in text.splitlines() if ln.startswith("define") and "@scale(" in ln)
    assert "!kernel_arg_type" in define and "!reqd_work_group_size" in define
    ref = define.split("!reqd_work_group_size ")[1].split()[0]
    node = next(ln for ln in text.splitlines() if ln.startswith(ref + " = "))
    assert "i32 8, i32 1, i32 1" in node
    ok, line = cc.coarsen(ir, "scale", 3, "consecutive", major, plugin, tmp_path / "s3.ll")
    assert not ok and "reqd_work_group_size 32 is not a multiple of 3" in line
    ok, line = cc.coarsen(ir, "helper", 2, "consecutive", major, plugin, tmp_path / "h.ll")
    assert not ok and "not an OpenCL kernel" in line
