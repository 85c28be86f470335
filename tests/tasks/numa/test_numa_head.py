"""The NUMA head in a real build: ``mirecc -O2 -fopenmp`` with
``MIRECC_RECORD_NUMA=1`` records each region's configuration in the
binary's ``.mirecc.numa`` section (through the real pass plugin), the
program's output stays plain clang's, and ``mire run --dry-run`` reads the
plan back; the shipped head loads and decides."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
LIBOMP = "/usr/lib/llvm-14/lib"
ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

PROGRAM = """\
#include <stdio.h>

int main(void) {
  static double a[100000];
  double sum = 0;
#pragma omp parallel for reduction(+:sum)
  for (int i = 0; i < 100000; i++) {
    a[i] = i * 0.5;
    sum += a[i];
  }
#pragma omp parallel for
  for (int i = 0; i < 100000; i++) a[i] += 1;
  printf("%.1f %.1f\\n", sum, a[99999]);
  return 0;
}
"""
DEFAULT = "-O3_32_2_2_compact_0_0_loc"
WANTED = "-O3_16_2_2_scatter_1_5_bal"
CLASSES = [f"small:{DEFAULT}", f"small:{WANTED}", f"large:{DEFAULT}", "large:-O3_64_2_2_compact_1_0_ori"]


def make_head(root: Path, gain: float) -> Path:
    """A NUMA head whose trees all predict ``gain`` (log) for small:WANTED
    and losses elsewhere."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    pytest.importorskip("onnx")
    import yaml
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.util.modelfiles import load_model
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes
    from mirecc.tasks.numa.offline.train import MACHINE
    from mirecc.ir.region_stats import NAMES

    directory = root / "numa"
    directory.mkdir(parents=True)
    X = np.random.default_rng(0).normal(size=(8, len(NAMES))).astype(np.float32)
    small = np.tile([0.0, gain], (8, 1))
    large = np.tile([0.0, -0.5], (8, 1))
    forests = [fit_forest(X, Y, ForestConfig(trees=5)) for Y in (small, large)]
    (directory / "head.onnx").write_bytes(onnx_bytes(forests, len(NAMES)))
    spec = {"task": "numa", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version,
            "features": ["region_statistics"], "region_statistics": NAMES,
            "classes": CLASSES, "default": DEFAULT, "machine": MACHINE,
            "quantile": 0.3, "min_gain": 0.05}
    (directory / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


@pytest.fixture
def program(tmp_path, llvm_plugin) -> Path:
    _, _, plugin = llvm_plugin(14)
    (tmp_path / "p.c").write_text(PROGRAM)
    (tmp_path / "plugin").write_text(str(plugin))
    return tmp_path


def env_for(tmp_path: Path, heads_dir: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
                                     "MIRECC_HEADS_DIR": str(heads_dir),
                                     "MIRECC_PLUGIN": (tmp_path / "plugin").read_text(),
                                     "MIRECC_SERVER": "0",
                                     "MIRECC_RECORD_NUMA": "1",
                                     # the shipped labels' machine is a 2-socket Xeon
                                     "MIRECC_NUMA_ANY_MACHINE": "1", **extra})


def build(cwd: Path, compiler: str, env: dict, name: str) -> tuple[Path, str]:
    """The linked program (compiled and linked by ``compiler``) and its output."""
    for cmd in ([compiler, "-O2", "-fopenmp", "-c", "p.c", "-o", f"{name}.o"],
                [compiler, "-fopenmp", f"{name}.o", "-o", name, f"-L{LIBOMP}",
                 f"-Wl,-rpath,{LIBOMP}"]):
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        assert "mirecc:" not in proc.stderr, proc.stderr
    out = subprocess.run([str(cwd / name)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return cwd / name, out


def test_decisions_recorded_in_the_binary_and_read_back_by_mire_run(program, tmp_path_factory):
    from mirecc.tasks.numa.launch import read_records

    heads = make_head(tmp_path_factory.mktemp("heads"), gain=0.5)
    _, plain_out = build(program, CLANG, os.environ.copy(), "plain")
    exe, out = build(program, MIRECC, env_for(program, heads), "ours")
    assert out == plain_out
    [record] = read_records(exe)
    assert record["source"] == "p.c" and record["default"] == DEFAULT
    assert set(record["regions"]) == {"main:0", "main:1"}
    for value in record["regions"].values():
        assert value["small"] == WANTED and "large" not in value
        assert value["outlined"].startswith(".omp_outlined.")
    dry = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", "--dry-run",
                          "--input-size", "small", "--", str(exe)],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f"2 of 2 region(s) chose {WANTED}" in dry.stdout
    assert "OMP_PROC_BIND=spread" in dry.stdout
    dry = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "run", "--dry-run",
                          "--", str(exe)], capture_output=True, text=True, timeout=60)
    assert f"2 of 2 region(s) chose {DEFAULT}" in dry.stdout     # large: the default


def test_nothing_recorded_when_off_or_when_no_region_gains(program, tmp_path_factory):
    from mirecc.tasks.numa.launch import read_records

    heads = make_head(tmp_path_factory.mktemp("heads"), gain=0.5)
    exe, _ = build(program, MIRECC, env_for(program, heads, MIRECC_RECORD_NUMA="0"), "off")
    assert read_records(exe) == []
    quiet = make_head(tmp_path_factory.mktemp("heads"), gain=0.01)   # below min_gain
    exe, _ = build(program, MIRECC, env_for(program, quiet), "quiet")
    assert read_records(exe) == []


def test_the_shipped_head_loads_and_explains_each_region(program):
    env = env_for(program, ROOT / "heads")
    proc = subprocess.run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o",
                           "p.o"], cwd=program, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    regions = {d["target"]: d for d in tu["decisions"] if d["task"] == "numa"}
    assert set(regions) == {"main:0", "main:1"}, tu
    for d in regions.values():
        assert "small input:" in d["reason"] and "large input:" in d["reason"]
        assert d["default"]["config"] == DEFAULT
        assert "2-socket Intel Xeon" in d["default"]["machine"]["description"]
