"""mire omp-train's judging on hand-made labels: applications held out one
at a time, the oracle, the best single configuration and the forest."""
import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from mirecc.tasks.openmp.offline.train import BAD, Table, judge, summarize  # noqa: E402


def row(program, config, speedup, suite="polybench", group="g", ok=True, changed=False):
    default = 1.0
    return {"program": program, "size": "SMALL", "region": "k:0", "config_key": config,
            "suite": suite, "group": group, "region_location": f"{program}.c:9",
            "region_parent": None, "ok": ok, "output_changed": changed,
            "median_s": default / speedup,
            "default": {"median_s": default, "stable_output": True, "matches_sequential": True}}


def labels():
    rows = []
    # "small" programs gain from one thread; "big" ones lose with it
    for name in ("s1", "s2", "s3", "s4"):
        rows += [row(name, "t1-static-default", 3.0), row(name, "t2-dynamic-64", 1.0)]
    for name in ("b1", "b2", "b3", "b5"):
        rows += [row(name, "t1-static-default", 0.5), row(name, "t2-dynamic-64", 1.2)]
    rows += [row("b4", "t1-static-default", 4.0, changed=True),   # never a candidate
             row("b4", "t2-dynamic-64", 1.2)]
    return rows


def test_table_targets_and_held_out_judging():
    table = Table(labels())
    assert table.classes == ["t1-static-default", "t2-dynamic-64"]
    i = table.keys.index(("b4", "SMALL", "k:0"))
    assert table.Y[i, 0] == BAD and math.isclose(table.Y[i, 1], math.log(1.2))
    # one feature that tells small from big programs
    X = {"statistics": np.asarray([[0.0] if k[0].startswith("s") else [1.0]
                                   for k in table.keys])}
    result = judge(table, X, ["statistics"], quantile=0.3, min_gain=0.05, trees=20, seeds=1)
    assert result["oracle"]["s1"] == pytest.approx(3.0)
    assert result["oracle"]["b1"] == pytest.approx(1.2)
    assert result["oracle"]["b4"] == pytest.approx(1.2)     # not 4.0: that changed the output
    assert result["default"]["s1"] == 1.0
    # one setting for all (chosen without the held-out one) loses on the other kind
    assert result["best single"]["b1"] == pytest.approx(0.5)
    # the forest learns which kind a held-out program is and acts only where it gains
    forest = result["forest: statistics"]
    assert forest["s1"] == pytest.approx(3.0) and forest["b1"] == pytest.approx(1.2)
    assert forest["b4"] == pytest.approx(1.2)
    assert result["unsafe"]["forest: statistics"] == 0
    # one thread for all (best on the others) is b4's configuration that changed the output
    assert result["unsafe"]["best single"] == 1 and result["unsafe"]["oracle"] == 0
    s = summarize(result, table)
    assert s["forest: statistics"]["slower_than_0.95"] == 0
    assert s["forest: statistics"]["at_0.9_oracle"] == 9 == s["oracle"]["applications"]
    assert s["best single"]["slower_than_0.95"] >= 3


def test_write_head_keeps_the_labels_in_the_head_folder(tmp_path):
    pytest.importorskip("onnx")
    import argparse
    import yaml

    from mirecc.tasks.openmp.offline.train import write_head

    head = tmp_path / "openmp"
    (head / "labels").mkdir(parents=True)
    (head / "labels" / "labels.jsonl.gz").write_bytes(b"kept")
    (head / "labels-full").mkdir()
    (head / "labels-full" / "meta.json").write_bytes(b"kept too")
    (head / "stale.onnx").write_bytes(b"old")
    table = Table(labels())
    X = np.asarray([[0.0] if k[0].startswith("s") else [1.0] for k in table.keys])
    args = argparse.Namespace(trees=5, quantile=0.3, min_gain=0.05)
    write_head(table, X, "statistics", args, head, cv={})
    assert (head / "labels" / "labels.jsonl.gz").read_bytes() == b"kept"
    assert (head / "labels-full" / "meta.json").read_bytes() == b"kept too"
    assert not (head / "stale.onnx").exists()
    spec = yaml.safe_load((head / "spec.yaml").read_text())
    assert spec["classes"] == table.classes and spec["features"] == ["region_statistics"]
    assert (head / "head.onnx").stat().st_size > 0
