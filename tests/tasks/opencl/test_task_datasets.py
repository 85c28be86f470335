"""Downstream-task datasets: loaders and IR2Vec's protocols, on the real
data in ../shared/datasets (read in place) and on small hand-made samples."""

import statistics
from collections import Counter
from pathlib import Path

import pytest

from mirecc.tasks.opencl.offline import datasets as D

SHARED = D.default_root()
#: the test folds of the first 12 rows under StratifiedKFold(10, shuffle, 104)
#: over all.txt order (scikit-learn 1.x)
PINNED_AMD_FOLDS = [5, 7, 9, 4, 2, 4, 6, 3, 0, 9, 5, 4]
needs_data = pytest.mark.skipif(not (SHARED / "devmap" / "all.txt").is_file(),
                                reason=f"datasets not found at {SHARED} (set MIRECC_DATASETS)")


@needs_data
@pytest.mark.parametrize("platform, cpu, gpu, mean, geomean",
                         [("amd", 395, 274, 3.63, 1.67), ("nvidia", 286, 383, 1.53, 1.34)])
def test_devmap_matches_the_published_counts_and_oracle(platform, cpu, gpu, mean, geomean):
    rows = D.load_devmap(SHARED, platform)
    assert Counter(r["oracle"] for r in rows) == {"CPU": cpu, "GPU": gpu}
    # all.txt order, one distinct IR file per row
    listed = [line.split()[1][2:] for line in
              (SHARED / "devmap" / "all.txt").read_text().splitlines()[1:]]
    assert [r["name"] for r in rows] == listed
    # the README's oracle speedups over static mapping
    sp = [D.devmap_speedup(r, r["oracle"], platform) for r in rows]
    assert statistics.mean(sp) == pytest.approx(mean, abs=0.005)
    assert statistics.geometric_mean(sp) == pytest.approx(geomean, abs=0.006)   # README rounds
    assert all(D.devmap_speedup(r, D.STATIC_DEVICE[platform], platform) == 1.0 for r in rows)


@needs_data
def test_devmap_folds_are_ir2vecs_stratified_split():
    pytest.importorskip("sklearn")
    rows = D.load_devmap(SHARED, "amd")
    folds = D.devmap_folds(rows)
    assert folds == D.devmap_folds(rows)                       # fixed seed
    sizes = Counter(folds)
    assert sorted(sizes) == list(range(10)) and set(sizes.values()) <= {66, 67}
    for k in range(10):                                        # stratified: 395/274 per fold
        gpu = sum(r["oracle"] == "GPU" for r, f in zip(rows, folds) if f == k)
        assert gpu in (27, 28), (k, gpu)
    # pinned: random_state=104 over all.txt order (a change of order or seed moves these)
    assert folds[:12] == PINNED_AMD_FOLDS
    assert D.devmap_folds(rows, seed=105) != folds


@needs_data
def test_coarsening_oracle_matches_the_published_figures():
    rows = D.load_coarsening(SHARED)
    assert len(rows) == 68 and len({r["kernel"] for r in rows}) == 17
    oracle = {g: statistics.mean(D.coarsening_speedup(r, r["oracle_cf"]) for r in rows
                                 if r["gpu"] == g) for g in D.GPUS}
    assert oracle == pytest.approx({"Cypress": 1.498, "Tahiti": 1.404, "Fermi": 1.339,
                                    "Kepler": 1.184}, abs=0.0005)
    assert statistics.mean(oracle.values()) == pytest.approx(1.356, abs=0.001)
    nbody = {r["gpu"]: r for r in rows if r["kernel"] == "nbody"}
    assert 16 not in nbody["Fermi"]["runtimes"] and 16 in nbody["Tahiti"]["runtimes"]


# ------------------------------------------------------------ hand-made samples

HEADER = ("idx,benchmark,dataset,comp,rational,mem,localmem,coalesced,atomic,transfer,wgsize,"
          "oracle,runtime_cpu,runtime_gpu,src,seq\n")


def make_devmap(root: Path, rows: list[tuple], listed: list[str]) -> Path:
    d = root / "devmap"
    (d / "kernels_ir").mkdir(parents=True)
    lines = [HEADER]
    for i, (bench, ds, transfer, oracle, cpu, gpu) in enumerate(rows):
        lines.append(f'{i},{bench},{ds},1,1,1,1,1,0,{transfer},64,{oracle},{cpu},{gpu},"k()",x\n')
    (d / "cgo17-amd.csv").write_text("".join(lines))
    (d / "all.txt").write_text("FileNum     ProgramName\n" + "".join(
        f"{i + 1}      ./{name}\n" for i, name in enumerate(listed)))
    for name in listed:
        (d / "kernels_ir" / name).write_text("; same IR\n" if name.startswith("b_") else f"; {name}\n")
    return d


def test_devmap_sample_order_names_and_speedups(tmp_path):
    make_devmap(tmp_path, [("a", "default", 10, "GPU", 4.0, 1.0),
                           ("b", "small", 20, "CPU", 1.0, 2.0),
                           ("b", "large", 30, "GPU", 8.0, 2.0)],
                ["b_large.ll", "a.ll", "b_small.ll"])
    rows = D.load_devmap(tmp_path, "amd")
    assert [r["name"] for r in rows] == ["b_large.ll", "a.ll", "b_small.ll"]   # all.txt order
    assert [r["transfer"] for r in rows] == [30, 10, 20]
    # AMD's static mapping is the CPU: speedup = runtime_cpu / runtime(device)
    assert [D.devmap_speedup(r, "GPU", "amd") for r in rows] == [4.0, 4.0, 0.5]
    assert rows[0]["ir_sha256"] == rows[2]["ir_sha256"] != rows[1]["ir_sha256"]


def test_devmap_sample_errors_name_the_file(tmp_path):
    d = make_devmap(tmp_path, [("a", "default", 10, "GPU", 4.0, 1.0)], ["a.ll", "z.ll"])
    with pytest.raises(D.DatasetError, match=r"all.txt: z.ll has no row in .*cgo17-amd.csv"):
        D.load_devmap(tmp_path, "amd")
    (d / "all.txt").write_text("FileNum     ProgramName\n1      ./a.ll\n")
    (d / "kernels_ir" / "a.ll").unlink()
    with pytest.raises(D.DatasetError, match=r"kernels_ir/a.ll: IR file listed in all.txt is missing"):
        D.load_devmap(tmp_path, "amd")
    with pytest.raises(D.DatasetError, match=r"cgo17-nvidia.csv: cannot read"):
        D.load_devmap(tmp_path, "nvidia")


def test_coarsening_speedup_caps_the_factor_by_hand():
    row = {"runtimes": {1: 100.0, 2: 50.0, 4: 40.0, 8: 80.0}}
    assert D.coarsening_speedup(row, 1) == 1.0
    assert D.coarsening_speedup(row, 4) == 2.5
    assert D.coarsening_speedup(row, 32) == 1.25        # capped at the largest measured, 8
    assert D.coarsening_speedup(row, 3) == 2.0          # between measured ones: 2
