"""The loop-vectorize labels as committed: exported from a dataset, read
back from gzip, their kernels regenerated and checked by hash."""
from __future__ import annotations

import json

import pytest

from mirecc.learn.labels import read_rows
from mirecc.tasks.loop_vectorize.offline import dataset
from mirecc.tasks.loop_vectorize.offline.kernels import write_kernels


def _dataset(tmp_path):
    data = tmp_path / "data"
    records = write_kernels(data / "kernels", seed=3, per_family=1, families=["saxpy", "triad"])
    rows = [{"row": r["name"], "name": r["name"], "family": r["family"],
             "source_sha256": r["source_sha256"]} for r in records]
    (data / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (data / "machine.json").write_text(json.dumps({"seed": 3, "per_family": 1}))
    return data, rows


def test_export_reads_back_and_regenerates_the_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data, rows = _dataset(tmp_path)
    out = tmp_path / "committed"
    written = dataset.export(data, out)
    assert sorted(p.name for p in written) == ["labels.jsonl.gz", "machine.json"]
    assert not (out / "labels.jsonl").exists() and read_rows(out / "labels.jsonl") == rows
    # the same bytes twice: a re-export of the same labels changes nothing in git
    first = (out / "labels.jsonl.gz").read_bytes()
    dataset.export(data, out)
    assert (out / "labels.jsonl.gz").read_bytes() == first
    for row in rows:
        own, regenerated = dataset.kernel_source(data, row), dataset.kernel_source(out, row)
        assert own.parent == data / "kernels"
        assert str(regenerated).startswith(str(tmp_path / "cache"))
        assert regenerated.read_bytes() == own.read_bytes()


def test_a_kernel_the_generator_no_longer_makes_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data, rows = _dataset(tmp_path)
    out = tmp_path / "committed"
    dataset.export(data, out)
    changed = dict(rows[0], source_sha256="0" * 64)
    with pytest.raises(ValueError, match=rows[0]["name"]):
        dataset.kernel_source(out, changed)
    (out / "machine.json").write_text("{}")
    with pytest.raises(ValueError, match="machine.json"):
        dataset.kernels_dir(out)
    with pytest.raises(ValueError, match="no labels"):
        dataset.export(tmp_path / "nothing", out)


def test_a_retrained_head_keeps_its_committed_labels(tmp_path):
    """mire vectorize-train replaces the head's folder whole: the labels it
    was trained on, committed in it, stay."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    from mirecc.learn.forest import ForestConfig, fit_forest
    from mirecc.tasks.loop_vectorize.offline.train import CLASSES, write_head

    head = tmp_path / "loop-vectorize"
    (head / "labels").mkdir(parents=True)
    (head / "labels" / "labels.jsonl.gz").write_bytes(b"labels")
    (head / "stale.txt").write_text("from the head before")
    X = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    forest = fit_forest(X, np.zeros((6, len(CLASSES))), ForestConfig(trees=2))
    chosen = {"features": ["reassociation"], "quantile": 0.1, "min_gain": 0.02}
    write_head(head, forest, 3, chosen, "enc", {"gate": {"refuse_forcing": None},
                                                "trained_on": {"kernels": 6}})
    assert (head / "labels" / "labels.jsonl.gz").read_bytes() == b"labels"
    assert not (head / "stale.txt").exists() and (head / "head.onnx").is_file()


def test_the_committed_labels_find_every_kernel_they_timed(tmp_path, monkeypatch):
    """The shipped head's labels and today's generator agree on every
    kernel's source (a generator change that alters one fails here, not in
    the next retraining)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from mirecc.tasks.loop_vectorize.offline.train import read_labels

    rows = read_labels(dataset.COMMITTED)
    assert len(rows) >= 250 and {r["family"] for r in rows} >= {"divmod", "triad", "saxpy"}
    for row in rows:
        assert dataset.kernel_source(dataset.COMMITTED, row).is_file()
