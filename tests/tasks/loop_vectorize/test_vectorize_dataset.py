"""The loop-vectorization dataset harness: kernel generator and (VF, IF) runner."""

from __future__ import annotations

import json
import os
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mirecc.tasks.loop_vectorize.offline import dataset, kernels

CC = "clang-14"
pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason="needs clang-14")


def _kernel(family: str, name: str | None = None, pred=None) -> kernels.Kernel:
    fseed = kernels._family_seed(0, family)
    ks = kernels.FAMILIES[family](random.Random(fseed), fseed)
    for k in ks:
        if (name is None or k.name == name) and (pred is None or pred(k)):
            return k
    raise LookupError(name)


def _build_run(k: kernels.Kernel, tmp: Path, tag: str, flags: list[str]) -> tuple[dict, dict]:
    src = tmp / f"{k.name}.c"
    src.write_text(k.source)
    exe = tmp / f"{k.name}.{tag}"
    b = dataset.compile_one(CC, src, exe, flags, k.target_line)
    assert b["ok"], b.get("error")
    r = dataset.run_binary(exe, k.args, None, {"MIRECC_REPS": 1})
    assert r["ok"], r.get("error")
    return b, r


def test_generator_is_deterministic(tmp_path):
    a = kernels.write_kernels(tmp_path / "a", seed=3, per_family=2)
    b = kernels.write_kernels(tmp_path / "b", seed=3, per_family=2)
    assert a == b
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    index = json.loads((tmp_path / "a" / "index.json").read_text())
    assert {r["family"] for r in index["kernels"]} == set(kernels.FAMILIES)
    assert len(index["kernels"]) == 2 * len(kernels.FAMILIES)
    c = kernels.generate(seed=4, per_family=2)
    assert [k.source for k in c] != [k.source for k in kernels.generate(seed=3, per_family=2)]
    default = kernels.generate()
    assert 250 <= len(default) <= 320
    for k in default:
        assert k.name.startswith(k.family + "-")
        lines = k.source.splitlines()
        assert lines[k.target_line - 2].strip() == "MIRECC_LOOP_HINT"
        assert lines[k.target_line - 1].lstrip().startswith("for (")
    assert any(k.needs_reassoc for k in default)


def test_every_family_compiles_runs_and_matches_scalar(tmp_path):
    ks = kernels.generate(seed=0, per_family=1)

    def one(k):
        _, scalar = _build_run(k, tmp_path, "scalar", dataset.SCALAR_FLAGS)
        _, default = _build_run(k, tmp_path, "default", [])
        return k, scalar, default
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(one, ks))
    for k, scalar, default in results:
        assert scalar["reps"] == 1
        # also for float reductions: plain -O3 does not reassociate them
        assert scalar["checksum"] == default["checksum"], k.name


def test_hint_forces_width_and_scalar(tmp_path):
    k = _kernel("elementwise", pred=lambda k: k.params["type"] == "f32")
    b, r42 = _build_run(k, tmp_path, "vf4", [dataset.hint_define(4, 2)])
    assert (b["remark"]["vf"], b["remark"]["if"]) == (4, 2)
    b, r16 = _build_run(k, tmp_path, "vf16", [dataset.hint_define(16, 1)])
    assert (b["remark"]["vf"], b["remark"]["if"]) == (16, 1)
    b, r11 = _build_run(k, tmp_path, "vf1", [dataset.hint_define(1, 1)])
    assert (b["remark"]["vf"], b["remark"]["if"]) == (1, 1)
    assert b["remark"]["msg"] is None or "vectorized loop" not in b["remark"]["msg"]
    assert r42["checksum"] == r16["checksum"] == r11["checksum"]


def test_dependence_stays_correct(tmp_path):
    k = _kernel("dependence", pred=lambda k: k.params["kind"] == "prefix" and k.params["type"] == "i32")
    _, ref = _build_run(k, tmp_path, "scalar", dataset.SCALAR_FLAGS)
    for vf, ic in [(4, 1), (8, 4)]:
        b, r = _build_run(k, tmp_path, f"vf{vf}", [dataset.hint_define(vf, ic)])
        assert b["remark"]["vf"] == 1
        assert r["checksum"] == ref["checksum"]


def test_float_reduction_forced_width_changes_output(tmp_path):
    k = _kernel("reduce_float", pred=lambda k: k.params["op"] == "sum" and k.params["type"] == "f32"
                and k.params["size"] == "l2")
    src = tmp_path / f"{k.name}.c"
    src.write_text(k.source)
    rec = k.record()
    common = dict(cc=CC, cc_ver="x", target_flags=[], repeats=1, configs=[(4, 1), (1, 1)],
                  target_ns=2e5, jobs=2, cpu=None)
    row = dataset.measure_row(rec, src, fast_math=False, **common)
    by = {(c["vf"], c["if"]): c for c in row["configs"]}
    assert by[(4, 1)]["remark_vf"] == 4
    assert by[(4, 1)]["output_changed"] and not by[(4, 1)]["exact_output"]
    assert 0 < by[(4, 1)]["rel_err"] < 1e-3
    assert not by[(1, 1)]["output_changed"]
    assert row["best"]["vf"] == 1
    fm = dataset.measure_row(rec, src, fast_math=True, **common)
    assert fm["row"].endswith("+fastmath") and "-ffast-math" in fm["flags"]
    assert not any(c["output_changed"] for c in fm["configs"])


def test_runner_labels_and_resume(tmp_path):
    out = tmp_path / "ds"
    kw = dict(families=["elementwise", "mac"], per_family=1, configs=[(1, 1), (4, 1)],
              repeats=1, target_ns=2e5, cc=CC, progress=False)
    labels = dataset.run_dataset(out, **kw)
    rows = [json.loads(ln) for ln in labels.read_text().splitlines()]
    assert len(rows) == 2
    assert (out / "kernels" / "index.json").exists()
    m = json.loads((out / "machine.json").read_text())
    assert m["cc_version"].startswith("Debian clang version 14") or "clang" in m["cc_version"]
    for r in rows:
        for key in ("name", "family", "params", "source_sha256", "cc", "cc_version", "flags",
                    "target_flags", "configs", "default", "scalar", "scalar_ref_ns", "best",
                    "speedup_best_over_default"):
            assert key in r, key
        assert [(c["vf"], c["if"]) for c in r["configs"]] == [(1, 1), (4, 1)]
        for c in r["configs"] + [r["default"]]:
            assert c["ok"] and not c["output_changed"]
            assert c["min_ns"] > 0 and c["median_ns"] >= c["min_ns"] and len(c["samples"]) == 1
        assert r["best"] is not None and r["speedup_best_over_default"] > 0

    # resume: nothing new to do
    first = labels.read_text().splitlines()
    dataset.run_dataset(out, **kw)
    assert labels.read_text().splitlines() == first

    # a half-written last line is dropped and that row redone
    labels.write_text(first[0] + "\n" + first[1][: len(first[1]) // 2])
    dataset.run_dataset(out, **kw)
    again = labels.read_text().splitlines()
    assert len(again) == 2 and again[0] == first[0]
    assert json.loads(again[1])["row"] == json.loads(first[1])["row"]


def test_cli_summary(tmp_path, capsys):
    import argparse

    from mirecc.tasks.loop_vectorize.offline import cli
    out = tmp_path / "ds"
    dataset.run_dataset(out, families=["cond"], per_family=1, configs=[(2, 1)], repeats=1,
                        target_ns=2e5, cc=CC, progress=False)
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    assert cli.run(p.parse_args(["--out", str(out), "--summary-only"])) == 0
    text = capsys.readouterr().out
    assert "rows: 1" in text and "cond" in text
