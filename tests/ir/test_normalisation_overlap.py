"""Normalisation makes clang-14 and clang-19 statements agree (loose floor).

Runs benchmarks/normalisation_overlap.py's measurement on the bundled
programs at mirecc's side-run flags.  Measured when written: before
normalisation jaccard ~0.03 / covered ~0.1, after ~0.99 / 1.0.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load_benchmark("normalisation_overlap")


@pytest.mark.skipif(not (shutil.which("clang-14") and shutil.which("clang-19")),
                    reason="needs clang-14 and clang-19 (apt-get install clang-19)")
def test_clang14_vs_clang19_overlap_after_normalisation():
    bench = _bench()
    sources = sorted((ROOT / "benchmarks" / "programs").glob("*.c"))
    res = bench.measure(sources, "clang-14", "clang-19",
                        {"O1": ["-O1", "-Xclang", "-disable-llvm-passes"]}, ["-g"])
    m = res["modes"]["O1"]
    assert m["files"] == len(sources)
    before, after = m["before"], m["after"]
    assert after["covered"] >= 0.9 and after["jaccard"] >= 0.8, m
    assert before["covered"] < 0.5 < after["covered"]
