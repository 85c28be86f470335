"""The block-shape head: its statistics, the shipped head through mirecc-nvcc
(shown, applied only with the setting, the object then nvcc's for the same
edit made by hand), its refusals, and the bench's replay arithmetic."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from nvcc_helpers import COMPAT, MIRECC_NVCC, NVCC, POLYBENCH, needs_nvcc, normalised, run

from mirecc.frontend.launches import scan_source
from mirecc.driver import nvcc as drop_in
from mirecc.frontend import nvcc as nvcc_front
from mirecc.learn.rankbench import judge
from mirecc.taskapi.config import load_config
from mirecc.tasks.cuda_block import features as F
from mirecc.tasks.cuda_block import head as H
from mirecc.tasks.cuda_block import launches
from mirecc.tasks.cuda_block.offline import bench as B

SHIPPED = Path(__file__).resolve().parents[3] / "heads" / "cuda-block"
needs_polybench = pytest.mark.skipif(not POLYBENCH.is_dir(),
                                     reason="needs ../shared/datasets/polybench-acc")

ROWS_AND_COLUMNS = """\
__global__ void by_rows(const float *a, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < n; j++) s += a[i * 4096 + j];
  y[i] = s;
}
__global__ void by_columns(const float *a, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < n; j++) s += a[j * 4096 + i];
  y[i] = s;
}
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    return {**env, "MIRECC_CACHE_DIR": extra.pop("cache"), **extra}


@needs_nvcc
def test_statistics_tell_a_strided_walk_from_a_coalesced_one(tmp_path):
    (tmp_path / "k.cu").write_text(ROWS_AND_COLUMNS)
    cmd = nvcc_front.parse(["-c", str(tmp_path / "k.cu")])
    text = drop_in.device_texts(cmd, NVCC, load_config())(str(tmp_path / "k.cu"))
    bodies = F.function_bodies(text)
    stats = {nvcc_front.source_name(k): F.kernel_statistics(v) for k, v in bodies.items()
             if "by_" in k}
    # consecutive threads a row apart: strided; a column walk: coalesced
    assert stats["by_rows"]["x_strided"] == 1 and stats["by_columns"]["x_strided"] == 0
    for s in stats.values():
        assert s["loops"] == 1 and s["loads"] == 1 and s["stores"] == 1 and s["flops"] == 1
        assert s["row"] == 4096 and s["uses_y"] == 0


def _atax(tmp_path) -> tuple[Path, list[str]]:
    shutil.copytree(POLYBENCH / "linear-algebra" / "kernels" / "atax", tmp_path / "atax")
    return tmp_path / "atax" / "atax.cu", ["-O3", COMPAT, f"-I{POLYBENCH / 'utilities'}", "-c"]


@needs_nvcc
@needs_polybench
def test_the_head_is_shown_and_changes_nothing_without_the_setting(tmp_path):
    source, flags = _atax(tmp_path)
    env = _env(cache=str(tmp_path / "cache"))
    proc = run([MIRECC_NVCC, "--explain", *flags, "atax/atax.cu", "-o", "ours.o"], tmp_path,
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert "head: 8x8 (the source's 32x8), predicted" in proc.stdout
    assert "not applied (set MIRECC_APPLY_CUDA_BLOCK=1)" in proc.stdout
    assert run([NVCC, *flags, "atax/atax.cu", "-o", "plain.o"], tmp_path).returncode == 0
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "plain.o")


@needs_nvcc
@needs_polybench
def test_with_the_setting_the_object_is_nvccs_with_the_define_set_by_hand(tmp_path):
    source, flags = _atax(tmp_path)
    env = _env(cache=str(tmp_path / "cache"), MIRECC_APPLY_CUDA_BLOCK="1")
    proc = run([MIRECC_NVCC, "--explain=json", *flags, "atax/atax.cu", "-o", "ours.o"],
               tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    unit = json.loads(proc.stdout[proc.stdout.index("{"):])["translation_units"][0]
    applied = {d["target"]: d["value"] for d in unit["decisions"] if d["applied"]}
    assert applied == {"atax_kernel1": "8x8", "atax_kernel2": "8x8"}
    assert all(d["reason"].startswith("head cuda-block: predicted") for d in unit["decisions"])
    header = tmp_path / "atax" / "atax.cuh"
    original = header.read_text()
    header.write_text(original.replace("#define DIM_THREAD_BLOCK_X 32",
                                       "#define DIM_THREAD_BLOCK_X 8"))
    assert run([NVCC, *flags, "atax/atax.cu", "-o", "hand.o"], tmp_path).returncode == 0
    header.write_text(original)
    assert normalised(tmp_path / "ours.o") == normalised(tmp_path / "hand.o")


@needs_nvcc
@needs_polybench
def test_a_shape_the_labels_saw_fail_is_never_a_candidate(tmp_path):
    source, flags = _atax(tmp_path)
    cmd = nvcc_front.parse([*flags, str(source)])
    text = drop_in.device_texts(cmd, NVCC, load_config())(str(source))
    heads = tmp_path / "heads" / "cuda-block"
    shutil.copytree(SHIPPED, heads, ignore=shutil.ignore_patterns("labels"))
    spec = yaml.safe_load((heads / "spec.yaml").read_text())
    key = H.program_key(str(source), ["atax_kernel1", "atax_kernel2"])
    plan = launches.plan_source(scan_source(str(source), cmd), cmd)
    first = H.rank_plan(plan, text, H.BlockHead(heads, spec))[0][0]
    spec["excluded"] = {key: [list(first)]}
    plan = launches.plan_source(scan_source(str(source), cmd), cmd)
    ranked = H.rank_plan(plan, text, H.BlockHead(heads, spec))
    assert ranked and first not in [s for s, _, _ in ranked]
    assert all(b.ranking[0][0] != "%dx%d" % H.kernel_value(b, first)
               for b in plan.blocks.values() if b.tunable)


def test_a_head_with_other_inputs_is_refused_naming_its_spec(tmp_path):
    spec = yaml.safe_load((SHIPPED / "spec.yaml").read_text())
    spec["features"] = spec["features"][:-1]
    with pytest.raises(H.HeadError, match=r"spec\.yaml: 'features' must be"):
        H.BlockHead(tmp_path, spec)
    spec = yaml.safe_load((SHIPPED / "spec.yaml").read_text())
    with pytest.raises(H.HeadError, match="head file named in .* is missing"):
        H.BlockHead(tmp_path, spec)


def test_kernel_values_keep_a_fixed_axis_and_refuse_big_blocks():
    block = launches.KernelBlock("k", "define", ["32", "8"], ["BX", None], ["32", "8"])
    assert H.kernel_value(block, (8, 8)) == (8, 8)
    assert H.kernel_value(block, (64, 1)) == (64, 8)      # y stays the source's 8
    assert H.kernel_value(block, (256, 1)) is None        # 2048 threads
    advisory = launches.KernelBlock("k", None, ["32", "8"], [None, None], ["32", "8"])
    assert H.kernel_value(advisory, (8, 8)) is None


def _case(program, speed, bad=(), source=(32, 8)):
    c = B.Case(program, "S", source, dict(speed), set(bad))
    c.feats = {"y_settable": 1.0, "log2_row": 10.0}
    return c


def test_replay_guesses_can_lose_verified_choices_cannot():
    cases = [_case("p", {(8, 8): 1.5, (16, 16): 0.5}), _case("q", {(8, 8): 0.8}, bad=[(16, 16)])]
    ranked = {0: [((16, 16), 0.3), ((8, 8), 0.2)], 1: [((16, 16), 0.3), ((8, 8), 0.1)]}
    guess = judge(cases, ranked, None, B.MIN_GAIN)
    assert guess["speeds"] == [0.5, 1.0] and guess["wrong"] == 1 and guess["below"] == 1
    k2 = judge(cases, ranked, 2, B.MIN_GAIN)
    assert k2["speeds"] == [1.5, 1.0] and k2["wrong"] == 0 and k2["worst"] == 1.0
    assert k2["share"] == pytest.approx(1.0)     # q's oracle is its own shape
    # no shape predicted to gain: the source's
    assert judge(cases, {0: [((8, 8), 0.01)], 1: [((8, 8), 0.01)]}, None,
                 B.MIN_GAIN)["speeds"] == [1.0, 1.0]


def test_labels_become_cases_with_wrong_shapes_set_apart():
    def rec(shape, x, y, t, src=False, mism=0, phase="time"):
        return {"program": "p", "size": "S", "shape": shape, "shape_x": x, "shape_y": y,
                "block": f"{x}x{y}" if x else "32x8", "is_source_shape": src,
                "status": "ok", "phase": phase, "gpu_seconds": t, "mismatches": mism,
                "cuda_error": None}
    runs = [rec("source", None, None, 2.0, src=True), rec("8x8", 8, 8, 1.0),
            rec("24x24", 24, 24, 0.5),
            rec("source", None, None, None, src=True, phase="check"),
            rec("8x8", 8, 8, None, phase="check"), rec("24x24", 24, 24, None, mism=7,
                                                          phase="check")]
    (case,) = B.cases_of({("p", "S"): runs})
    assert case.source == (32, 8) and case.speed == {(8, 8): 2.0} and case.bad == {(24, 24)}
