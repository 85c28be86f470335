"""The cuda-block head's apply gate, calibrated leave one program out
(:mod:`mirecc.learn.gates`, ``mire bench cuda``'s ``gate_sweep``): on small
synthetic labels whose answer is known, the threshold that lets a held-out
program fall below the floor is not shipped (or, with none admissible,
forcing is refused); the shipped head's spec carries the threshold its
metrics' sweep chose; and mirecc-nvcc records, never applies, the shapes of
a head that refuses forcing."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from nvcc_helpers import MARKED, drop_in, launches

from mirecc.frontend.launches import scan_source
from mirecc.frontend import nvcc as nvcc_front
from mirecc.learn.gates import FLOOR, calibrate, installed_gates
from mirecc.tasks.cuda_block import features as F
from mirecc.tasks.cuda_block import head as H
from mirecc.tasks.cuda_block.offline import bench as B
from mirecc.tasks.cuda_block.offline import cuda_labels as cl

SHIPPED = Path(__file__).resolve().parents[3] / "heads" / "cuda-block"
GOOD, MODEST, TRAP = (8, 8), (16, 16), (16, 16)


def _cases(trap_gain: float, a_gains=(0.6, 0.6, 0.6)) -> list:
    """Programs of two sizes each, every paper shape timed.  Cluster A (few
    loads): 8x8 gains ``a_gains`` (log) in A0, A1, A2.  Cluster B (many
    loads): 16x16 gains log 0.1 in B3, B4, B5 and ``trap_gain`` in the trap,
    so held out the trap looks like a modest sure win.  Every other shape
    loses log 0.5."""
    spec = [("A", g) for g in a_gains] + [("B", 0.1)] * 3 + [("B", trap_gain)]
    cases = []
    for p, (cluster, gain) in enumerate(spec):
        program = "trap" if p == len(spec) - 1 else f"{cluster}{p}"
        for size, row in (("S", 10.0), ("L", 11.0)):
            speed = {s: math.exp(-0.5) for s in cl.paper_shapes()}
            speed[GOOD if cluster == "A" else MODEST] = math.exp(gain)
            case = B.Case(program, size, (32, 8), speed)
            case.feats = {f: 0.0 for f in F.SOURCE_FEATURES}
            case.feats.update(kernels=1.0, y_settable=1.0, log2_row=row,
                              loads_per_kernel=2.0 if cluster == "A" else 20.0)
            case.key = f"{program}.cu:k"
            cases.append(case)
    return cases


def _ranked(cases) -> dict:
    """The statistics forest's rankings, each program held out in turn."""
    ranked: dict = {}
    for program in sorted({c.program for c in cases}):
        ranked.update(B.rank_forest(cases, "statistics", {}, program))
    return ranked


def test_a_threshold_that_slows_a_held_out_program_is_not_shipped(tmp_path):
    pytest.importorskip("sklearn")
    cases = _cases(trap_gain=-0.4)
    ranked = _ranked(cases)
    thresholds = (0.0, 0.05, 0.2, 0.5, 1.0)
    rows, chosen, refusal = B.gate_sweep(cases, ranked, thresholds)
    by = {r.threshold: r for r in rows}
    # held out, the trap's forest promises B's modest gain: the low bars let
    # its 16x16 through and it runs at exp(-0.4), below the floor
    assert by[0.05].per_application["trap"] == pytest.approx(math.exp(-0.4), abs=1e-4)
    assert by[0.05].below >= 1 and math.exp(-0.4) < FLOOR
    # A's big sure wins pass a bar the trap's promise does not
    assert refusal is None and chosen is not None and chosen.threshold > 0.05
    assert chosen.below == 0 and chosen.applied >= 3
    assert chosen.per_application["trap"] == 1.0
    assert chosen.per_application["A0"] == pytest.approx(math.exp(0.6), abs=1e-4)
    assert by[1.0].applied == 0        # nothing promises that much: not admissible
    # the bench's table: the calibrated gate's guess has nothing below the floor
    gated = B.gated(cases, ranked, (rows, chosen, refusal))
    assert gated["below"] == 0 and gated["worst"] >= FLOOR

    # the head written with this gate: min_gain is the chosen threshold, the
    # sweep in metrics.json; the head loads
    B.write_head(cases, {}, {}, tmp_path / "cuda-block", (rows, chosen, refusal))
    spec = yaml.safe_load((tmp_path / "cuda-block" / "spec.yaml").read_text())
    gate = json.loads((tmp_path / "cuda-block" / "metrics.json").read_text())["gate"]
    assert spec["min_gain"] == gate["chosen"] == chosen.threshold
    assert "refuse_forcing" not in spec and gate["refuse_forcing"] is None
    assert gate["before"] == B.MIN_GAIN and gate["before_row"][f"below_{FLOOR}"] >= 1
    head = H.BlockHead(tmp_path / "cuda-block", spec)
    assert head.min_gain == chosen.threshold and head.refusal is None


def test_with_no_admissible_threshold_the_head_refuses_forcing(tmp_path):
    pytest.importorskip("sklearn")
    # A0 loses where A1 and A2 win big: held out, its forest promises their
    # gain, so every bar that lets anything through lets A0's loss through
    cases = _cases(trap_gain=-0.4, a_gains=(-0.6, 0.6, 0.6))
    rows, chosen, refusal = B.gate_sweep(cases, _ranked(cases), (0.0, 0.05, 0.2, 0.5, 1.0))
    assert chosen is None and "slows a program below 0.95x" in refusal
    assert all(r.below or not r.applied for r in rows)
    B.write_head(cases, {}, {}, tmp_path / "cuda-block", (rows, None, refusal))
    spec = yaml.safe_load((tmp_path / "cuda-block" / "spec.yaml").read_text())
    assert spec["refuse_forcing"] == refusal
    assert json.loads((tmp_path / "cuda-block" / "metrics.json").read_text())[
        "gate"]["refuse_forcing"] == refusal
    assert H.BlockHead(tmp_path / "cuda-block", spec).refusal == refusal


def test_a_wrong_output_held_out_counts_below_the_floor():
    cases = [B.Case("p", "S", (32, 8), {(8, 8): 1.5}, {(16, 16)}),
             B.Case("q", "S", (32, 8), {(8, 8): 1.2})]
    ranked = {0: [((16, 16), 0.3)], 1: [((8, 8), 0.1)]}
    rows, chosen, _ = B.gate_sweep(cases, ranked, (0.0, 0.2, 0.5))
    assert rows[0].per_application == {"p": B.WRONG, "q": 1.2} and rows[0].below == 1
    assert chosen is None     # 0.2 lets only p's wrong shape through; 0.5 nothing


def test_the_shipped_spec_carries_its_metrics_calibrated_gate():
    spec = yaml.safe_load((SHIPPED / "spec.yaml").read_text())
    gate = json.loads((SHIPPED / "metrics.json").read_text())["gate"]
    assert gate["unit"] == "program" and gate["floor"] == FLOOR and gate["sweep"]
    if gate["refuse_forcing"]:
        assert spec["refuse_forcing"] == gate["refuse_forcing"]
    else:
        assert "refuse_forcing" not in spec
        assert spec["min_gain"] == gate["chosen"] == gate["chosen_row"]["threshold"]
        row = gate["chosen_row"]
        assert row[f"below_{FLOOR}"] == 0 and row["applied"] > 0 and row["slowest"] >= FLOOR
    # the sweep's own rule picks what was shipped
    from mirecc.learn.gates import GateRow

    rows = [GateRow(r["threshold"], r["applications"], r["applied"], r["geomean"],
                    r["slowest"], r[f"below_{FLOOR}"]) for r in gate["sweep"]]
    best = calibrate(rows)
    assert (best.threshold if best else None) == gate["chosen"]
    assert installed_gates([str(SHIPPED.parent)])["cuda-block"] == gate


def test_a_head_that_refuses_forcing_records_its_shapes_and_applies_none(tmp_path):
    (tmp_path / "k.cu").write_text(MARKED)
    cmd = nvcc_front.parse(["-c", str(tmp_path / "k.cu")])
    scan = scan_source(str(tmp_path / "k.cu"), cmd)

    def rank(plan):
        return [((256, 4), 1.5, True)]
    plan = launches.plan_source(scan, cmd, rank=rank, apply_head=True)
    assert plan.decided and [d["applied"] for d in plan.decisions] == [True]
    why = "held out, every threshold that applies something slows a program below 0.95x"
    plan = launches.plan_source(scan, cmd, rank=rank, apply_head=True, refusal=why)
    assert not plan.decided and plan.decisions
    assert all(not d["applied"] and why in d["advisory"] and "recorded only" in d["reason"]
               for d in plan.decisions)
    assert all(b.shape == b.default for b in plan.blocks.values())
    assert any("its gate refuses forcing" in b.note for b in plan.blocks.values())


def test_a_refusal_must_say_why(tmp_path):
    spec = yaml.safe_load((SHIPPED / "spec.yaml").read_text())
    spec["refuse_forcing"] = ""
    with pytest.raises(H.HeadError, match="'refuse_forcing' must say why"):
        H.BlockHead(SHIPPED, spec)
