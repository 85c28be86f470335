"""The NUMA/prefetcher dataset's region names mapped to outlined functions
(issue 16, part 1), on a dataset tree this test writes and real clang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CC, CXX = "/usr/bin/clang-14", "/usr/bin/clang++-14"
MIRE = str(Path(sys.executable).with_name("mire"))
pytestmark = pytest.mark.skipif(not os.access(CC, os.X_OK), reason="needs clang-14")

KERNEL = """\
void scale(int n, double *a) {
#pragma omp parallel for
  for (int i = 0; i < n; i++) a[i] *= 2.0;
}

void shift(int n, double *a) {
#pragma omp parallel
  {
#pragma omp for
    for (int i = 0; i < n; i++) a[i] += 1.0;
  }
}
"""


def make_dataset(root: Path) -> Path:
    program = root / "sources" / "suite-1.0" / "toy"
    (program / "kernel").mkdir(parents=True)
    (program / "toy.c").write_text(KERNEL)
    (program / "kernel" / "work.c").write_text(KERNEL)
    (program / "broken.c").write_text("int f( {\n")
    (root / "labels").mkdir()
    (root / "labels" / "region").write_text("\n".join([
        "__cere__toy_scale_2",            # the stem
        "__cere____kernel_work_shift_7",  # the path from the program folder
        "__cere__toy_shift_9",            # a worksharing loop, not a region
        "__cere__other_main_5",           # no such source
        "__cere__broken_f_1",             # does not compile
    ]))
    return root


def test_regions_map_to_outlined_functions_or_say_why(tmp_path):
    from mirecc.tasks.numa.offline.regions import map_regions

    dataset = make_dataset(tmp_path / "numa-prefetch")
    regions = {r.name: r for r in map_regions(dataset, tmp_path / "out", CC, CXX)}
    scale, shift = regions["__cere__toy_scale_2"], regions["__cere____kernel_work_shift_7"]
    assert (scale.source, scale.function, scale.line) == ("suite-1.0/toy/toy.c", "scale", 2)
    assert (shift.source, shift.function) == ("suite-1.0/toy/kernel/work.c", "shift")
    # the outlined functions are the ones the fork calls at those lines pass
    ir = (tmp_path / "out" / scale.ir).read_text()
    assert scale.outlined != shift.outlined
    for region in (scale, shift):
        assert f"define internal void @{region.outlined}(" in \
            (tmp_path / "out" / region.ir).read_text()
    assert scale.site.startswith("scale:") and "__kmpc_fork_call" in ir
    assert "no parallel region at line 9" in regions["__cere__toy_shift_9"].why
    assert regions["__cere__other_main_5"].why == "no source file of that name in sources/"
    assert "did not compile" in regions["__cere__broken_f_1"].why
    assert sum(r.mapped for r in regions.values()) == 2


def test_mire_numa_regions_writes_the_report(tmp_path):
    dataset = make_dataset(tmp_path / "numa-prefetch")
    run = subprocess.run([MIRE, "numa-regions", "--dataset", str(dataset), "--out",
                          str(tmp_path / "out"), "--cc", CC, "--cxx", CXX],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "2 of 5 regions mapped" in run.stdout
    report = json.loads((tmp_path / "out" / "regions.json").read_text())
    assert [r["outlined"] is not None for r in report["regions"]] == \
        [True, True, False, False, False]


def test_a_dataset_without_region_names_is_a_clear_error(tmp_path):
    (tmp_path / "sources").mkdir()
    run = subprocess.run([MIRE, "numa-regions", "--dataset", str(tmp_path), "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert f"{tmp_path}/labels/region: cannot read" in run.stderr
