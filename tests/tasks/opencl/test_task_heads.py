"""Task heads (MLP -> ONNX), the kernel embeddings they read, and the
``mire bench devmap|coarsening`` pipeline end to end on small samples of the
real datasets (copied into a temporary folder, never into the repo)."""

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from mirecc.tasks.opencl.offline import datasets as D
from mirecc.learn import embeddings as F

SHARED = D.default_root()
needs_data = pytest.mark.skipif(not (SHARED / "devmap" / "all.txt").is_file(),
                                reason=f"datasets not found at {SHARED} (set MIRECC_DATASETS)")
torch = pytest.importorskip("torch")
from mirecc.taskapi.onnxhead import run_onnx  # noqa: E402
from mirecc.tasks.opencl.offline.mlp import (HeadConfig, fit_temperature, train_head,  # noqa: E402
                                             with_temperature, write_onnx)

FAST = HeadConfig(epochs=60)


def test_head_learns_and_its_onnx_matches(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)).astype(np.float32) * [1, 10, 100, 1, 1, 1]
    y = np.where(X[:, 0] + X[:, 1] / 10 > 0, "GPU", "CPU")
    head = train_head(X, y, HeadConfig(ensemble=3), classes=["CPU", "GPU"])
    assert (head.predict(X) == y).mean() > 0.95
    assert head.classes == ["CPU", "GPU"]
    write_onnx(head, tmp_path / "head.onnx")
    p = run_onnx(tmp_path / "head.onnx", X)
    assert p.shape == (200, 2) and np.allclose(p.sum(1), 1, atol=1e-5)
    assert np.abs(p - head.predict_proba(X)).max() < 1e-4
    # deterministic: the same config gives the same weights
    again = train_head(X, y, HeadConfig(ensemble=3), classes=["CPU", "GPU"])
    assert np.array_equal(again.predict_proba(X), head.predict_proba(X))


def test_temperature_makes_overconfident_probabilities_honest():
    rng = np.random.default_rng(2)
    y = rng.choice(["CPU", "GPU"], size=400)
    right = rng.random(400) < 0.8                       # a classifier right 80% of the time
    pred = np.where(right, y, np.where(y == "CPU", "GPU", "CPU"))
    proba = np.where((pred == "GPU")[:, None], [[0.01, 0.99]], [[0.99, 0.01]])  # says 99%
    cal = fit_temperature(proba, y, ["CPU", "GPU"])
    assert cal["temperature"] > 1 and cal["nll_after"] < cal["nll_before"]
    assert cal["ece_after"] < 0.05 < cal["ece_before"]
    X = rng.normal(size=(50, 3)).astype(np.float32)
    head = train_head(X, np.where(X[:, 0] > 0, "GPU", "CPU"), FAST)
    cooler = with_temperature(head, 3.0)
    assert np.array_equal(cooler.predict(X), head.predict(X))
    assert cooler.predict_proba(X).max(1).mean() < head.predict_proba(X).max(1).mean()


def test_head_keeps_classes_absent_from_training():
    X = np.random.default_rng(1).normal(size=(40, 3)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 2, 8)
    head = train_head(X, y, FAST, classes=[1, 2, 4, 8, 16, 32])
    assert head.predict_proba(X).shape == (40, 6)
    assert set(head.predict(X).tolist()) <= {2, 8}


def test_upgrade_legacy_ir_types_llvm9_byval():
    line = ("define spir_kernel void @k(%struct.par_str* byval nocapture readonly align 4, "
            "float* nocapture, i32* byval(i32) %x) {")
    up = F.upgrade_legacy_ir(line)
    assert "%struct.par_str* byval(%struct.par_str) nocapture" in up
    assert "i32* byval(i32) %x" in up and up.count("byval") == 2
    assert F.upgrade_legacy_ir(up) == up


def test_embedding_table_round_trip(tmp_path):
    t = F.EmbeddingTable(tmp_path / "m.npz")
    t.vectors["a"] = np.arange(4, dtype=np.float32)
    t.failures["b"] = "kernel.cl: error"
    t.save()
    again = F.EmbeddingTable(tmp_path / "m.npz")
    assert np.array_equal(again.vectors["a"], t.vectors["a"]) and again.failures == t.failures
    (tmp_path / "m.npz").write_bytes(b"not a zip")
    assert F.EmbeddingTable(tmp_path / "m.npz").vectors == {}        # rebuilt, not a crash


def _copy_filtered_csv(src: Path, dst: Path, keep) -> None:
    with open(src, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if keep(r)]
        fields = reader.fieldnames
    with open(dst, "w", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows(rows)


def _copy_sample(task: str, pick, root: Path) -> tuple[Path, Path, set]:
    """all.txt, IR files and prior_art of the IR files ``pick`` keeps from
    the listed ones; returns (source dir, copy dir, kept names)."""
    src, dst = SHARED / task, root / task
    (dst / "kernels_ir").mkdir(parents=True)
    names = [ln.split()[1][2:] for ln in (src / "all.txt").read_text().splitlines()[1:]]
    keep = pick(names)
    (dst / "all.txt").write_text("FileNum ProgramName\n" + "".join(
        f"{i} ./{n}\n" for i, n in enumerate(keep)))
    for n in keep:
        shutil.copy(src / "kernels_ir" / n, dst / "kernels_ir" / n)
    shutil.copytree(src / "prior_art", dst / "prior_art")
    return src, dst, set(keep)


def _sample_root(tmp_path: Path, devmap_rows: int = 0, kernels: int = 0) -> Path:
    """A copy of a few rows of the real datasets in the same layout."""
    root = tmp_path / "datasets"
    if devmap_rows:
        # evenly spaced rows: a spread of benchmarks and both labels
        src, dst, keep = _copy_sample(
            "devmap", lambda names: names[::max(1, len(names) // devmap_rows)][:devmap_rows], root)
        for plat in D.PLATFORMS:
            _copy_filtered_csv(src / f"cgo17-{plat}.csv", dst / f"cgo17-{plat}.csv",
                               lambda r: D.devmap_ir_name(r) in keep)
    if kernels:
        src, dst, keep = _copy_sample("thread_coarsening", lambda names: names[:kernels], root)
        _copy_filtered_csv(src / "pact-2014-runtimes.csv", dst / "pact-2014-runtimes.csv",
                           lambda r: r["kernel"] + ".ll" in keep)
    return root


@needs_data
def test_kernel_embeddings_are_cached_per_model(tmp_path, monkeypatch):
    from mirecc.encoder import SHIPPED_MODEL_DIR
    rows = D.load_coarsening(_sample_root(tmp_path, kernels=2))
    texts = F.kernel_texts(rows, "ir")
    assert len(texts) == 2 and all(r["ir_key"] in texts for r in rows)
    vec, failed = F.embed_kernels(texts, SHIPPED_MODEL_DIR, tmp_path / "cache")
    assert not failed and all(v.shape == (256,) for v in vec.values())
    import mirecc.encoder.runtime as runtime

    def no_encoder(*a, **k):
        raise AssertionError("cached kernels must not load the encoder")
    monkeypatch.setattr(runtime, "Encoder", no_encoder)
    again, _ = F.embed_kernels(texts, SHIPPED_MODEL_DIR, tmp_path / "cache")
    assert all(np.array_equal(again[k], vec[k]) for k in vec)


@needs_data
def test_coarsening_bench_end_to_end_on_a_sample(tmp_path):
    pytest.importorskip("xgboost")
    pytest.importorskip("ir2vec")
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.tasks.opencl.offline import benchmark as B
    from mirecc.tasks.opencl.offline import report
    from mirecc.tasks.opencl.offline.ship import write_task_heads
    root = _sample_root(tmp_path, kernels=4)
    # the shipped model stands in for the random-init one (its export needs ~10 s)
    models = {"trained": SHIPPED_MODEL_DIR, "random": SHIPPED_MODEL_DIR}
    res = B.run_coarsening(root, models, FAST, 1, tmp_path / "cache")
    assert res["rows"] == 16 and res["kernels"] == 4
    mirecc = res["results"]["mirecc"]
    assert mirecc["leave_one_row_out"]["rows"] == 16
    assert set(mirecc["leave_one_row_out"]["speedup"]) == set(D.GPUS)
    # the oracle bounds every prediction's speedup, GPU by GPU (on all rows;
    # the src: entries cover only the kernels whose source compiles)
    for entry in res["results"].values():
        if entry["leave_one_row_out"]["rows"] != res["rows"]:
            continue
        for g, s in entry["leave_one_row_out"]["speedup"].items():
            assert s <= res["oracle"]["speedup"][g] + 1e-9
    md = report.coarsening_markdown(res)
    assert "| mirecc |" in md and "oracle (best factor)" in md and "MIREncoder (paper)" in md
    assert report.plot(res, tmp_path / "c.png") is False or (tmp_path / "c.png").stat().st_size
    json.dumps(res)                                            # saved as JSON as it is
    [head_dir] = write_task_heads("coarsening", root, SHIPPED_MODEL_DIR, FAST, res,
                                  tmp_path / "heads", tmp_path / "cache")
    import yaml
    spec = yaml.safe_load((head_dir / "spec.yaml").read_text())
    assert spec["task"] == "opencl-thread-coarsening" and spec["classes"] == [1, 2, 4, 8, 16, 32]
    cal = json.loads((head_dir / "metrics.json").read_text())["calibration"]
    assert cal["rows"] == res["src_rows"] and cal["nll_after"] <= cal["nll_before"]
    p = run_onnx(head_dir / "head.onnx", np.zeros((1, 256 + len(D.GPUS)), np.float32))
    assert p.shape == (1, 6)
    # rerunning the command reproduces the shipped file byte for byte
    first = (head_dir / "head.onnx").read_bytes()
    write_task_heads("coarsening", root, SHIPPED_MODEL_DIR, FAST, res, tmp_path / "heads",
                     tmp_path / "cache")
    assert (head_dir / "head.onnx").read_bytes() == first
    assert sorted(p.name for p in (tmp_path / "heads").iterdir()) == ["coarsening"]


@needs_data
def test_devmap_bench_end_to_end_on_a_sample(tmp_path):
    pytest.importorskip("xgboost")
    pytest.importorskip("ir2vec")
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.tasks.opencl.offline import benchmark as B
    from mirecc.tasks.opencl.offline import report
    root = _sample_root(tmp_path, devmap_rows=60)
    models = {"trained": SHIPPED_MODEL_DIR, "random": SHIPPED_MODEL_DIR}
    res = B.run_devmap(root, models, FAST, 1, 2, tmp_path / "cache")
    for plat in D.PLATFORMS:
        d = res["platforms"][plat]
        assert d["rows"] == 60
        m = d["results"]["mirecc"]
        assert 0 <= m["ir2vec_folds"]["accuracy"] <= 1
        assert set(m["label_efficiency"]) == {"0.05", "0.1", "0.25", "0.5", "1.0"}
        assert m["label_efficiency"]["1.0"] == m["ir2vec_folds"]["accuracy"]
        assert "leave_kernel_out" in m and "other_seeds" in m
        assert d["prior_art"]["DeepTune"]["accuracy"] == pytest.approx(
            0.832 if plat == "amd" else 0.809, abs=0.001)
        assert d["oracle"]["speedup_geomean"] >= m["ir2vec_folds"]["speedup_geomean"]
    md = report.devmap_markdown(res)
    for plat in D.PLATFORMS:
        acc = res["platforms"][plat]["results"]["mirecc"]["ir2vec_folds"]["accuracy"]
        verdict = "met" if acc >= B.DEVMAP_TARGET else "NOT met"
        assert re.search(rf"{plat.upper()} [\d.]+% \(target [\d.]+: {verdict}\)", md), md
    assert "| mirecc |" in md and "Label efficiency" in md
