"""Apply gates calibrated by leave-one-application-out (mirecc.learn.gates), and
the tasks' sweeps that feed them.

* ``test_gates_*``: the shared module's rows, choice, refusal and document;
* ``test_numa_gate_*``: the NUMA head's sweep (``bench.gate_sweep``) and its
  calibration (``train.calibrate_gate``) on small synthetic labels whose
  answer is known.
"""
from __future__ import annotations

import math

import pytest

from mirecc.learn.gates import FLOOR, calibrate, gate_document, gate_row, refusal_reason


# ------------------------------------------------------------------ mirecc.learn.gates

def test_gates_row_counts_applied_and_below():
    row = gate_row(0.1, {"a": 1.2, "b": None, "c": 0.9})
    assert (row.applications, row.applied, row.below) == (3, 2, 1)
    assert row.slowest == pytest.approx(0.9)
    assert row.geomean == pytest.approx((1.2 * 1.0 * 0.9) ** (1 / 3))
    assert row.per_application == {"a": 1.2, "b": 1.0, "c": 0.9}
    assert row.record()[f"below_{FLOOR}"] == 1


def test_gates_calibrate_admissible_best_geomean_higher_threshold_on_tie():
    rows = [gate_row(0.0, {"a": 1.5, "b": 0.9}),      # best geomean, but slows b
            gate_row(0.1, {"a": 1.2, "b": None}),
            gate_row(0.2, {"a": 1.2, "b": None}),     # tie: the higher threshold
            gate_row(0.5, {"a": None, "b": None})]    # applies nothing
    assert calibrate(rows).threshold == 0.2
    assert calibrate([rows[0], rows[3]]) is None
    assert "0.900x" in refusal_reason([rows[0], rows[3]], "program")
    assert "no threshold applied" in refusal_reason([rows[3]], "program")


def test_gates_document_before_and_chosen():
    rows = [gate_row(0.0, {"a": 0.9}), gate_row(0.2, {"a": 1.1})]
    doc = gate_document("p", "program", 0.0, rows, rows[1])
    assert doc["before_row"]["threshold"] == 0.0 and doc["chosen"] == 0.2
    assert doc["refuse_forcing"] is None and len(doc["sweep"]) == 2
    assert gate_document("p", "program", 0.3, rows, None, "why")["before_row"] is None


# ------------------------------------------------------------------ the NUMA head

def _numa_labels(trap_gain: float, a_gains=(0.6, 0.6, 0.6)):
    """Programs of four regions each, three configurations (column 0 the
    default).  Cluster A (features near 0): config 1 gains ``a_gains`` (log)
    in its programs A0, A1, A2.  Cluster B (features near 10): config 2
    gains log 0.1 in B3, B4, B5 and ``trap_gain`` in the trap program, so
    held out the trap looks like a modest sure win.  Every other choice
    loses log 0.5."""
    import numpy as np

    rng = np.random.default_rng(0)
    programs, X, G = [], [], []
    spec = [("A", g) for g in a_gains] + [("B", 0.1)] * 3 + [("B", trap_gain)]
    for p, (cluster, g) in enumerate(spec):
        for _ in range(4):
            programs.append("trap" if p == len(spec) - 1 else f"{cluster}{p}")
            X.append([(0.0 if cluster == "A" else 10.0) + rng.normal(0, 0.01),
                      rng.normal(0, 0.01)])
            G.append([0.0, g if cluster == "A" else -0.5, g if cluster == "B" else -0.5])
    return np.asarray(G), {"statistics": np.asarray(X)}, programs


def test_numa_gate_sweep_finds_the_trap_and_calibrates_above_it():
    pytest.importorskip("sklearn")
    from mirecc.tasks.numa.offline.bench import gate_sweep
    from mirecc.tasks.numa.offline.train import calibrate_gate

    G, X, programs = _numa_labels(trap_gain=-0.4)
    thresholds = [0.0, 0.2, 0.5, 1.0]
    sweep = gate_sweep(G, X, programs, thresholds, repeats=2)
    assert set(sweep) == set(thresholds)
    # low threshold: the trap gets config 2 and runs at exp(-0.4) < FLOOR
    assert sweep[0.0]["trap"] == pytest.approx(math.exp(-0.4))
    # cluster A's programs win big at every threshold the trees' agreement passes
    assert sweep[0.2]["A0"] == pytest.approx(math.exp(0.6))
    assert sweep[0.2]["trap"] is None
    # nothing promises more than log 1.0
    assert all(s is None for s in sweep[1.0].values())
    rows, chosen, refusal, gate = calibrate_gate({"small": sweep, "large": sweep},
                                                 thresholds, before=0.0)
    assert rows[0].below == 2                   # the trap at both sizes
    assert refusal is None and chosen.threshold in (0.2, 0.5) and chosen.below == 0
    assert chosen.applied >= 4 and chosen.geomean > 1.1
    assert gate["before_row"]["below_0.95"] == 2 and gate["chosen"] == chosen.threshold
    assert "small:trap" in gate["chosen_row"]["per_application"]


def test_numa_gate_refuses_when_every_threshold_slows_something():
    pytest.importorskip("sklearn")
    from mirecc.tasks.numa.offline.bench import gate_sweep
    from mirecc.tasks.numa.offline.train import calibrate_gate

    # A0 loses where A1 and A2 win: held out, its forest promises A1's and
    # A2's log 0.6 with every tree agreeing, so no threshold below that
    # avoids it, and above it nothing applies
    G, X, programs = _numa_labels(trap_gain=-0.4, a_gains=(-0.6, 0.6, 0.6))
    sweep = gate_sweep(G, X, programs, [0.0, 0.2, 0.5, 1.0], repeats=2)
    assert sweep[0.5]["A0"] == pytest.approx(math.exp(-0.6))
    rows, chosen, refusal, gate = calibrate_gate({"small": sweep}, [0.0, 0.2, 0.5, 1.0],
                                                 before=0.0)
    assert chosen is None and gate["refuse_forcing"] == refusal
    assert "slows a program below 0.95x" in refusal


def test_numa_gate_unmeasured_choice_counts_as_a_loss_and_seeds_rule():
    pytest.importorskip("sklearn")
    import numpy as np

    from mirecc.tasks.numa.offline.bench import gate_sweep

    G, X, programs = _numa_labels(trap_gain=-0.4)
    G[programs.index("trap"), 2] = np.nan      # the trap's config 2 not measured there
    worst = gate_sweep(G, X, programs, [0.0], repeats=2)[0.0]["trap"]
    assert worst == pytest.approx(math.exp((-10.0 - 3 * 0.4) / 4))
    with pytest.raises(ValueError):
        gate_sweep(G, X, programs, [0.0], seeds="best")


# ------------------------------------------------------------------ the OpenMP head

def _omp_row(program, config, speedup, *, suite="polybench", group="g", held_out=False):
    row = {"program": program, "size": "STANDARD", "region": "k:0", "config_key": config,
           "suite": suite, "group": group, "region_location": f"{program}.c:9",
           "region_parent": None, "ok": True, "output_changed": False,
           "median_s": 1.0 / speedup,
           "default": {"median_s": 1.0, "stable_output": True, "matches_sequential": True}}
    return {**row, "held_out": True} if held_out else row


def _omp_table(trap_feature: float):
    """Four programs per kind, one feature each (the forest's leaves are
    pure groups): ``s`` (feature 0) gain 3x with one thread, ``b``
    (feature 1) 1.2x with two threads dynamic (one thread 0.5x), ``m``
    (feature 2) 1.1x with one thread; and two held-out generated programs
    of one family (``trap``, feature ``trap_feature``) that one thread
    slows to 0.8x (two: 1.0x). With the trap at feature 2 it looks like
    ``m`` held out: a modest sure win (log 1.1 = 0.095), so a gate below
    0.095 lets it through."""
    import numpy as np

    from mirecc.tasks.openmp.offline.train import Table

    t1, t2 = "t1-static-default", "t2-dynamic-64"
    rows, feature = [], {}
    for kind, f, g1, g2 in (("s", 0.0, 3.0, 1.0), ("b", 1.0, 0.5, 1.2), ("m", 2.0, 1.1, 1.0)):
        for n in range(4):
            rows += [_omp_row(f"{kind}{n}", t1, g1), _omp_row(f"{kind}{n}", t2, g2)]
            feature[f"{kind}{n}"] = f
    for name in ("trap-a", "trap-b"):
        rows += [_omp_row(name, c, g, suite="kernels", group="trap", held_out=True)
                 for c, g in ((t1, 0.8), (t2, 1.0))]
        feature[name] = trap_feature
    table = Table(rows)
    return table, np.asarray([[feature[p]] for p, _, _ in table.keys])


OMP_THRESHOLDS = [0.0, 0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3]


def test_openmp_gate_held_out_programs_are_applications_left_out_with_their_family():
    table, _ = _omp_table(2.0)
    apps = set(table.apps.tolist())
    assert {"trap-a (held out)", "trap-b (held out)", "s0", "m3"} <= apps
    test, train = table.split("trap-a (held out)")
    assert {table.keys[i][0] for i in test} == {"trap-a"}
    # its sibling is not trained on either; everything else is
    assert {table.keys[i][0] for i in train} == {f"{k}{n}" for k in "sbm" for n in range(4)}
    test, train = table.split("s0")
    assert {table.keys[i][0] for i in test} == {"s0"} and len(train) == len(table.keys) - 1
    assert "trap-a (held out)" in table.kernel_apps and "s0" not in table.kernel_apps


def test_openmp_gate_sweep_finds_the_trap_and_calibrates_above_it():
    pytest.importorskip("sklearn")
    from mirecc.tasks.openmp.offline.train import gate, gate_sweep, judge

    table, X = _omp_table(2.0)
    sweep = gate_sweep(table, X, 0.3, OMP_THRESHOLDS, trees=10, seeds=1)
    for t in (0.0, 0.02, 0.05, 0.08):       # the trap's promise (0.095) passes: 0.8x
        assert sweep[t]["trap-a (held out)"] == pytest.approx(0.8)
    for t in (0.1, 0.15, 0.2, 0.3):
        assert sweep[t]["trap-a (held out)"] is None
    assert sweep[0.15]["b0"] == pytest.approx(1.2) and sweep[0.2]["b0"] is None
    assert all(sweep[t]["s1"] == pytest.approx(3.0) for t in OMP_THRESHOLDS)
    # per application exactly what judge() computes at that min_gain (None: 1.0)
    for t in (0.05, 0.15):
        forest = judge(table, {"statistics": X}, ["statistics"], 0.3, t, 10, 1)[
            "forest: statistics"]
        assert forest == pytest.approx({a: 1.0 if s is None else s
                                        for a, s in sweep[t].items()})
    doc = gate(table, X, 0.3, OMP_THRESHOLDS, 0.05, trees=10, seeds=1)
    assert doc["before_row"][f"below_{FLOOR}"] == 2          # both trap programs
    # 0.1 and 0.15 apply s and b and not the trap: the tie goes to the higher
    assert doc["chosen"] == 0.15 and doc["refuse_forcing"] is None
    assert doc["chosen_row"]["slowest"] == pytest.approx(1.0)
    assert doc["chosen_row"]["applications"] == 14 and doc["unit"] == "application"


def test_openmp_gate_refuses_when_every_threshold_slows_a_held_out_program():
    pytest.importorskip("sklearn")
    from mirecc.tasks.openmp.offline.train import gate

    # the trap looks like ``s`` (a sure 3x): every threshold lets it through
    table, X = _omp_table(0.0)
    doc = gate(table, X, 0.3, OMP_THRESHOLDS, 0.05, trees=10, seeds=1)
    assert doc["chosen"] is None and doc["chosen_row"] is None
    assert all(r[f"below_{FLOOR}"] == 2 for r in doc["sweep"])
    assert "application below 0.95x" in doc["refuse_forcing"]
    assert "0.800x" in doc["refuse_forcing"]


def test_openmp_gate_written_into_the_spec_and_metrics(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("onnx")
    import argparse
    import json

    import yaml

    from mirecc.tasks.openmp.offline.train import gate, write_head

    head = tmp_path / "openmp"
    for folder in ("labels", "labels-heldout"):
        (head / folder).mkdir(parents=True)
        (head / folder / "labels.jsonl.gz").write_bytes(folder.encode())
    args = argparse.Namespace(trees=5, quantile=0.3, min_gain=0.05)
    for trap, min_gain, refusal in ((2.0, 0.15, None), (0.0, 0.05, "application below")):
        table, X = _omp_table(trap)
        doc = gate(table, X, 0.3, OMP_THRESHOLDS, 0.05, trees=10, seeds=1)
        write_head(table, X, "statistics", args, head, cv={"geomean": 1.0}, gate=doc,
                   trained_on=["a", "b"])
        spec = yaml.safe_load((head / "spec.yaml").read_text())
        metrics = json.loads((head / "metrics.json").read_text())
        assert spec["min_gain"] == min_gain
        assert metrics["gate"]["chosen"] == (None if refusal else min_gain)
        assert metrics["cv"] == {"geomean": 1.0} and metrics["rows"] == len(table.keys)
        if refusal:
            assert refusal in spec["refuse_forcing"]
            assert spec["refuse_forcing"] == metrics["gate"]["refuse_forcing"]
        else:
            assert "refuse_forcing" not in spec
        assert (head / "labels-heldout" / "labels.jsonl.gz").read_bytes() == b"labels-heldout"
        assert (head / "labels" / "labels.jsonl.gz").read_bytes() == b"labels"


def test_openmp_gate_held_out_labels_must_be_new_and_comparable(tmp_path):
    import json

    from mirecc.tasks.openmp.offline.train import load_labels

    def folder(name, programs, cores=2, repeats=3):
        d = tmp_path / name
        d.mkdir()
        (d / "labels.jsonl").write_text("".join(
            json.dumps({**_omp_row(p, "t1-static-default", 1.5), "row": f"{p}|1"}) + "\n"
            for p in programs))
        (d / "meta.json").write_text(json.dumps({"cores": cores, "cc_version": "clang 14",
                                                 "protocol": {"repeats": repeats}}))
        return d

    train = folder("train", ["a", "b"])
    rows = load_labels(train, [folder("held", ["c"])])
    assert [(r["program"], bool(r.get("held_out"))) for r in rows] == [
        ("a", False), ("b", False), ("c", True)]
    assert load_labels(train, [], sizes={"SMALL"}) == []
    with pytest.raises(ValueError, match="must be new"):
        load_labels(train, [folder("again", ["b"])])
    with pytest.raises(ValueError, match="repeats"):
        load_labels(train, [folder("other", ["d"], repeats=5)])
