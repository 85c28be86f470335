"""The NUMA/prefetcher dataset's region names mapped to outlined functions
(issue 16, part 1), on a dataset tree this test writes and real clang."""
from __future__ import annotations

import json
import math
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


def write_times(root: Path, size_file: str, regions: dict[str, dict[str, float]]) -> None:
    """A labels CSV as published: ';'-separated, a trailing empty field."""
    configs = sorted({c for times in regions.values() for c in times})
    (root / "labels" / "values").mkdir(parents=True, exist_ok=True)
    lines = [";".join(["regions", *configs])]
    lines += [";".join([name, *(str(times.get(c, "")) for c in configs)]) + ";"
              for name, times in regions.items()]
    (root / "labels" / "values" / size_file).write_text("\n".join(lines) + "\n")


def test_labels_are_read_and_decisions_restrict_the_columns(tmp_path):
    from mirecc.tasks.numa.offline.labels import DEFAULT, decision_columns, read_times
    from mirecc.tasks.numa.offline.regions import RegionsError

    times = {DEFAULT: 10.0, "-O3_16_2_2_compact_0_0_loc": 8.0,
             "-O3_32_2_2_compact_0_5_loc": 9.0, "-O3_16_1_1_scatter_1_3_bal": 7.0}
    write_times(tmp_path, "conf1_time_med.csv", {"__cere__a_f_1": times,
                                                  "__cere__b_g_2": {DEFAULT: 4.0}})
    configs, rows = read_times(tmp_path, "small")
    assert rows["__cere__a_f_1"][configs.index("-O3_16_2_2_compact_0_0_loc")] == 8.0
    assert math.isnan(rows["__cere__b_g_2"][configs.index("-O3_16_2_2_compact_0_0_loc")])
    names = lambda d: sorted(configs[i] for i in decision_columns(configs, d))   # noqa: E731
    assert names("threads") == sorted([DEFAULT, "-O3_16_2_2_compact_0_0_loc"])
    assert names("prefetcher") == sorted([DEFAULT, "-O3_32_2_2_compact_0_5_loc"])
    assert len(names("all")) == 4
    (tmp_path / "labels" / "values" / "conf2_time_med.csv").write_text(
        "regions;-O3_32_fast\n__cere__a_f_1;1.0\n")
    with pytest.raises(RegionsError, match="conf2_time_med.csv: not a configuration name"):
        read_times(tmp_path, "large")


def test_a_forest_on_features_that_tell_the_best_configuration_finds_it():
    """Regions of two kinds, told apart by a feature, want different
    configurations: held out, the forest reaches most of the oracle's gain,
    the best single configuration only half of it, the default none."""
    import numpy as np

    from mirecc.tasks.numa.offline.bench import judge

    rng = np.random.default_rng(0)
    n = 40
    kind = np.arange(n) % 2
    T = np.full((n, 3), 10.0)               # column 0: the default
    T[kind == 0, 1] = 5.0                   # kind 0 wants column 1
    T[kind == 1, 2] = 5.0                   # kind 1 wants column 2
    T[kind == 0, 2] = 12.0
    T[kind == 1, 1] = 12.0
    G = np.log(T[:, :1] / T)
    X = {"statistics": np.column_stack([kind + rng.normal(0, 0.05, n), rng.normal(size=n)])}
    programs = [f"p{i // 2}" for i in range(n)]
    r = judge(G, T, X, programs, ["default", "best single", "forest: statistics",
                                  "gated forest: statistics", "oracle"], "program", repeats=1)
    assert r["oracle"]["oracle_share"] == pytest.approx(1.0)
    assert r["default"]["oracle_share"] == 0.0
    assert r["forest: statistics"]["oracle_share"] > 0.9
    assert r["forest: statistics"]["error"] < 0.05
    assert r["best single"]["oracle_share"] < 0.5
    # the trees agree on these regions: the gate lets the forest act
    assert r["gated forest: statistics"]["oracle_share"] > 0.9


def test_the_gate_keeps_the_default_where_the_trees_disagree():
    """Noise features: the forest's guesses lose on some regions; the
    gated forest keeps the default there and never makes a region slower."""
    import numpy as np

    from mirecc.tasks.numa.offline.bench import judge

    rng = np.random.default_rng(1)
    n = 40
    T = 10.0 * np.exp(rng.normal(0, 0.3, (n, 4)))
    T[:, 0] = 10.0
    G = np.log(T[:, :1] / T)
    X = {"statistics": rng.normal(size=(n, 3))}
    programs = [f"p{i // 2}" for i in range(n)]
    r = judge(G, T, X, programs, ["forest: statistics", "gated forest: statistics"],
              "program", repeats=1)
    assert r["forest: statistics"]["slower_0_95"] > 0
    assert r["gated forest: statistics"]["slower_0_95"] <= \
        r["forest: statistics"]["slower_0_95"] / 2
