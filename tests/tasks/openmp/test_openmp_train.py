"""mire omp-train's judging on hand-made labels: applications held out one
at a time, the oracle, the best single configuration and the forest."""
import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from mirecc.tasks.openmp.offline.train import BAD, Table, judge, summarize, verify  # noqa: E402


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


def timed_row(program, config, times, default_times, changed=False):
    med = sorted(times)[len(times) // 2]
    dmed = sorted(default_times)[len(default_times) // 2]
    return {**row(program, config, dmed / med, changed=changed), "times_s": times,
            "median_s": med, "default": {"median_s": dmed, "times_s": default_times,
                                         "stable_output": True, "matches_sequential": True}}


def test_verify_keeps_only_what_beats_the_default_on_rounds_it_did_not_judge():
    d = [1.0, 1.0, 1.0]
    table = Table([
        timed_row("p", "t1-static-default", [0.5, 0.5, 0.5], d, changed=True),  # never kept
        timed_row("p", "t1-static-8", [0.8, 0.81, 0.79], d),       # 1.25x in every round
        timed_row("p", "t1-dynamic-1", [0.4, 1.3, 1.3], d),        # one lucky round
        timed_row("p", "t2-dynamic-64", [0.7, 0.7, 0.7], d)])      # faster still
    c = {key: n for n, key in enumerate(table.classes)}
    # unsafe: costs its try, never kept; the next one beats the default in every fold
    kept, speedup = verify(table, 0, [c["t1-static-default"], c["t1-static-8"]], 2, 0.02)
    assert kept == c["t1-static-8"] and speedup == pytest.approx(1.0 / 0.8)
    # K bounds the tries: the faster one is not reached with K=1
    assert verify(table, 0, [c["t1-static-8"], c["t2-dynamic-64"]], 1, 0.02)[0] \
        == c["t1-static-8"]
    kept, speedup = verify(table, 0, [c["t1-static-8"], c["t2-dynamic-64"]], 2, 0.02)
    assert kept == c["t2-dynamic-64"] and speedup == pytest.approx(1.0 / 0.7)
    # one lucky round no longer fools the tunes that measured it: their
    # slowest run (1.3) does not beat the default's median
    kept, speedup = verify(table, 0, [c["t1-dynamic-1"]], 1, 0.02)
    assert kept is None and speedup == 1.0
    # nothing timed (labels without rounds): the default
    assert verify(Table(labels()), 0, [0, 1], 2, 0.02) == (None, 1.0)


def test_judge_adds_the_verified_policies_and_never_tries_the_default():
    rows = []
    for name in ("a", "b", "c"):
        d = [1.0, 1.02, 0.98]
        rows += [timed_row(name, "t2-static-default", d, d),
                 timed_row(name, "t1-static-default", [0.5, 0.52, 0.49], d)]
    table = Table(rows)
    X = {"statistics": np.zeros((len(table.keys), 1))}
    result = judge(table, X, ["statistics"], quantile=0.3, min_gain=0.05, trees=5, seeds=1,
                   verify_k=1, default_key="t2-static-default")
    for policy in ("verified 1: forest: statistics", "verified 1: random order"):
        assert result[policy]["a"] == pytest.approx(2.0, rel=0.05)
    # the default as its own candidate would keep nothing
    result = judge(table, X, ["statistics"], quantile=0.3, min_gain=0.05, trees=5, seeds=1,
                   verify_k=1, default_key="t1-static-default")
    assert result["verified 1: random order"]["a"] == 1.0


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


def test_openmp_configurations_are_judged_as_trials_saved():
    """mire bench encoder's OpenMP cases: a configuration's speedup is the
    region's over the default, an unsafe one is never kept; held out by
    application, the statistics' forest learns which configuration suits
    which region, and a region without a vector keeps the default."""
    import numpy as np

    from mirecc.learn.judge import Judged, judge
    from mirecc.tasks.openmp.offline.judge import cases_of, evaluate

    rng = np.random.default_rng(1)
    n = 48
    stats = rng.uniform(0, 10, size=(n, 2))
    wide = stats[:, 0] > 5

    class T:
        classes = ["c0", "c1", "c2"]
        apps = np.asarray([f"app{i % 8}" for i in range(n)])
        Y = np.stack([np.where(wide, -0.6, 0.6), np.where(wide, 0.6, -0.6),
                      np.full(n, np.log(0.5))], axis=1)
        unsafe = np.zeros((n, 3), bool)

    T.unsafe[:, 2] = True
    cases = cases_of(T)
    assert cases[0].bad == {2} and abs(cases[0].speed[0] - np.exp(T.Y[0, 0])) < 1e-12
    stats[0] = np.nan                         # no statistics for this region
    rankings = evaluate(T, cases, stats, {}, ["statistics"])
    assert rankings["statistics"][0][0][1] == -np.inf     # no guess where nothing is known
    results = judge(Judged("OpenMP", cases, rankings, 0.05, 3), 200)
    assert results["statistics"]["share"] > 0.5
    assert results["statistics"]["share"] > results["best single configuration"]["share"] + 0.3
