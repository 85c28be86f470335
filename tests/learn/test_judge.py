"""The representation judge (mirecc.learn.judge): shares, candidates to reach
90% of the oracle, resampled intervals and the generic forest ranking."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from mirecc.learn import judge as J


@dataclass
class Case:
    program: str
    speed: dict
    bad: set = field(default_factory=set)
    stats: list = field(default_factory=list)
    task: list = field(default_factory=list)

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])


def _cases(n_programs=12, seed=0):
    rng = np.random.default_rng(seed)
    cases = []
    for p in range(n_programs):
        for size in range(2):
            best = int(rng.integers(0, 4))
            speed = {c: (2.0 if c == best else float(rng.uniform(0.5, 1.1))) for c in range(4)}
            cases.append(Case(f"p{p}", speed, stats=[float(best), float(size)], task=[]))
    return cases


def _ranked(cases, key):
    return {i: sorted(((b, key(c, b)) for b in c.speed), key=lambda t: -t[1])
            for i, c in enumerate(cases)}


def test_perfect_and_reversed_rankings_are_told_apart():
    cases = _cases()
    perfect = _ranked(cases, lambda c, b: math.log(c.speed[b]))
    reversed_ = _ranked(cases, lambda c, b: -math.log(c.speed[b]))
    j = J.Judged("t", cases, {"statistics": reversed_, "perfect": perfect}, 0.0, 4)
    r = J.judge(j, draws=300)
    assert r["perfect"]["share"] == pytest.approx(1.0)
    assert r["perfect"]["k90"] == 1 and r["perfect"]["trials"] == pytest.approx(1.0)
    assert r["statistics"]["share"] < 0         # the worst candidate applied
    assert r["statistics"]["k90"] == 4 and r["statistics"]["trials"] == pytest.approx(4.0)
    lo, hi = r["perfect"]["share_diff_ci"]
    assert lo > 0 and lo <= r["perfect"]["share_diff"] <= hi
    assert J.beats(r["perfect"], r["statistics"]).startswith("guess +")
    assert r["statistics"]["below"] == len(cases)


def test_the_same_ranking_differs_by_nothing_on_every_draw():
    cases = _cases()
    ranked = _ranked(cases, lambda c, b: -b)
    j = J.Judged("t", cases, {"statistics": ranked, "copy": dict(ranked)}, 0.0, 4)
    r = J.judge(j, draws=200)
    assert r["copy"]["share_diff"] == 0 and r["copy"]["share_diff_ci"] == (0.0, 0.0)
    assert r["copy"]["trials_diff_ci"] == (0.0, 0.0)
    assert J.beats(r["copy"], r["statistics"]) is None
    assert "| copy |" in J.markdown(j, r)


def test_a_guess_below_min_gain_keeps_the_baseline():
    cases = _cases()
    ranked = _ranked(cases, lambda c, b: 0.01 * math.log(c.speed[b]))
    j = J.Judged("t", cases, {"statistics": ranked}, 0.5, 4)
    r = J.judge(j, draws=50)["statistics"]
    assert r["share"] == 0 and r["geomean"] == pytest.approx(1.0) and r["below"] == 0
    assert r["k90"] == 1          # verifying the first candidate still reaches the oracle


def test_forest_rankings_learn_from_statistics_held_out():
    cases = _cases(n_programs=16, seed=1)
    emb = {"noise": np.random.default_rng(2).normal(size=(len(cases), 8))}
    ranked = J.forest_rankings(cases, ["statistics", "noise"], emb, lambda c: list(c.speed),
                               lambda b: [float(b)], trees=30, leaf=1, pca_k=3)
    j = J.Judged("t", cases, ranked, 0.0, 4)
    r = J.judge(j, draws=200)
    assert r["statistics"]["share"] > 0.8
    assert r["noise"]["share"] < r["statistics"]["share"]
    # each case was ranked by a forest that never saw its program: every
    # candidate is there, once
    assert all(sorted(b for b, _ in ranked["statistics"][i]) == [0, 1, 2, 3]
               for i in range(len(cases)))


def test_label_efficiency_trains_on_a_share_of_the_programs():
    programs = [f"p{i}" for i in range(20)]
    kept = J.training_programs(programs, "p3", 0.25, seed=1)
    assert len(kept) == 5 and "p3" not in kept
    assert kept == J.training_programs(programs, "p3", 0.25, seed=1)      # reproducible
    assert J.training_programs(programs, {"p3", "p4"}, 1.0, 0) == set(programs) - {"p3", "p4"}
    cases = _cases(n_programs=16, seed=3)

    def refit(kinds, fraction, draw):
        return J.forest_rankings(cases, kinds, {}, lambda c: list(c.speed),
                                 lambda b: [float(b)], trees=20, leaf=1,
                                 fraction=fraction, draw=draw)

    j = J.Judged("t", cases, refit(["statistics"], 1.0, 0), 0.0, 4, refit=refit)
    eff = J.efficiency(j, ["statistics"], [0.1, 1.0], seeds=2)
    full = J.judge(j, draws=10)
    assert eff["statistics"][1.0]["share"] == pytest.approx(full["statistics"]["share"])
    assert eff["statistics"][0.1]["share"] < eff["statistics"][1.0]["share"]
    assert "10% of the programs" in J.efficiency_markdown(eff, full)


def test_mire_bench_encoder_writes_its_page(tmp_path):
    """The command end to end on the published coarsening runtimes, with the
    statistics alone (no encoder to run)."""
    import json
    import subprocess
    import sys

    from mirecc.learn.datasets import default_root

    if not (default_root() / "thread_coarsening").is_dir():
        pytest.skip("the shared datasets are not here")
    md = tmp_path / "judge.md"
    subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "bench", "encoder",
                    "--judge-tasks", "opencl-thread-coarsening", "--judge-kinds", "statistics",
                    "--judge-fractions", "0.5", "--judge-efficiency-kinds", "statistics",
                    "--judge-draws", "50", "--out", str(tmp_path), "--judge-md", str(md)],
                   check=True, capture_output=True, text=True)
    text = md.read_text()
    assert "## OpenCL thread coarsening" in text and "| statistics |" in text
    assert "50% of the programs" in text
    data = json.loads(md.with_suffix(".json").read_text())
    # this machine's pocl labels, where docs/results holds them, join as a fifth device
    from mirecc.tasks.opencl.offline.judge import here_labels

    here, measured = here_labels()
    mine = sum(1 for f in measured.values() if f.get(1))
    name = "OpenCL thread coarsening (published GPUs" + (f" and {here})" if mine else ")")
    r = data[name]["results"]["statistics"]
    assert r["cases"] == 68 + mine and 1 <= r["trials"] <= 6
    if mine:
        alone = data[f"OpenCL thread coarsening ({here}, this machine)"]["results"]
        assert alone["statistics"]["cases"] == mine
    with pytest.raises(subprocess.CalledProcessError) as err:
        subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "bench", "encoder",
                        "--judge-tasks", "numa", "--out", str(tmp_path)],
                       check=True, capture_output=True, text=True)
    assert "no rankings declared by numa" in err.value.stderr
    assert "code-size" in err.value.stderr and "Traceback" not in err.value.stderr


def test_code_size_judge_without_a_corpus_says_how_to_build_one(tmp_path, monkeypatch):
    """A fresh clone has no size corpus: the judge stops with the file and the
    command that builds it, not a traceback."""
    from mirecc.tasks.code_size.offline import judge as size_judge

    monkeypatch.setattr(size_judge, "CORPUS", tmp_path / "size-corpus")
    with pytest.raises(SystemExit) as err:
        size_judge.judged(["statistics"], tmp_path / "out", {})
    msg = str(err.value)
    assert str(tmp_path / "size-corpus" / "manifest.jsonl") in msg
    assert "mire corpus build" in msg
