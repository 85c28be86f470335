"""The evaluation protocols of ``mire bench devmap|coarsening``: which rows
train and test each model, and the metrics on hand-checkable cases.  The
models here are spies that record what they were given."""

import math

import numpy as np
import pytest

from mirecc.tasks.opencl.offline import datasets as D
from mirecc.tasks.opencl.offline import protocol as P

SHARED = D.default_root()
needs_data = pytest.mark.skipif(not (SHARED / "devmap" / "all.txt").is_file(),
                                reason=f"datasets not found at {SHARED} (set MIRECC_DATASETS)")


class Spy:
    """fit_predict that remembers (train rows, test rows) by a row-id column
    and predicts the majority training label."""

    def __init__(self):
        self.calls = []

    def __call__(self, Xtr, ytr, Xte):
        self.calls.append((set(Xtr[:, 0].astype(int)), set(Xte[:, 0].astype(int))))
        labels, counts = np.unique(ytr, return_counts=True)
        return np.full(len(Xte), labels[counts.argmax()], dtype=ytr.dtype)


def _ids(n):
    return np.arange(n, dtype=np.float32)[:, None]


@needs_data
def test_cross_validation_uses_ir2vecs_folds_exactly():
    pytest.importorskip("sklearn")
    from sklearn.model_selection import StratifiedKFold
    rows = D.load_devmap(SHARED, "nvidia")
    y = np.asarray([r["oracle"] for r in rows])
    folds = np.asarray(D.devmap_folds(rows))
    spy = Spy()
    P.cross_validate(_ids(len(rows)), y, folds, spy)
    # the stated split, computed independently: StratifiedKFold(10, shuffle, 104)
    # over the rows in all.txt order
    expected = list(StratifiedKFold(10, shuffle=True, random_state=104).split(
        np.zeros(len(y)), y))
    assert len(spy.calls) == 10
    for (train, test), (exp_train, exp_test) in zip(spy.calls, expected):
        assert test == set(exp_test.tolist()) and train == set(exp_train.tolist())


def test_every_row_is_predicted_once_by_a_model_that_never_saw_it():
    y = np.asarray(["CPU", "GPU"] * 15)
    folds = np.arange(30) % 5
    spy = Spy()
    pred = P.cross_validate(_ids(30), y, folds, spy)
    assert len(pred) == 30
    tested = [i for _, test in spy.calls for i in test]
    assert sorted(tested) == list(range(30))
    assert all(not (train & test) for train, test in spy.calls)


def test_label_efficiency_subsamples_only_the_training_fold():
    y = np.asarray(["CPU"] * 60 + ["GPU"] * 40)
    folds = np.arange(100) % 10
    spy = Spy()
    P.cross_validate(_ids(100), y, folds, spy, fraction=0.25, seed=3)
    for (train, test), k in zip(spy.calls, range(10)):
        assert len(test) == 10                                  # the test fold is whole
        assert all(folds[i] != k for i in train)
        labels = y[sorted(train)]
        assert (labels == "CPU").sum() == round(0.25 * 54) and (labels == "GPU").sum() == 9
    # a tiny fraction keeps one row per class; a fixed seed gives the same rows
    small = P.subsample(np.arange(100), y, 0.001, seed=1)
    assert sorted(set(y[small])) == ["CPU", "GPU"] and len(small) == 2
    assert list(small) == list(P.subsample(np.arange(100), y, 0.001, seed=1))


def test_devmap_leave_kernel_out_never_splits_a_benchmark():
    benchmarks = [f"b{i % 23}" for i in range(200)]
    folds = P.group_kfold(benchmarks, 10)
    spy = Spy()
    P.cross_validate(_ids(200), np.asarray(["CPU", "GPU"] * 100), folds, spy)
    for train, test in spy.calls:
        assert not ({benchmarks[i] for i in train} & {benchmarks[i] for i in test})


def _coarsening_rows(kernels=5):
    rows = []
    for k in range(kernels):
        for g in D.GPUS:
            rt = {1: 1.0, 2: 0.5 + 0.1 * k, 4: 0.9, 8: 2.0}
            rows.append({"kernel": f"k{k}", "gpu": g, "runtimes": rt,
                         "oracle_cf": min(rt, key=rt.get)})
    return rows


def test_coarsening_leave_one_kernel_out_holds_out_all_gpus_of_a_kernel():
    rows = _coarsening_rows()
    folds = P.coarsening_folds(rows, "kernel")
    spy = Spy()
    P.cross_validate(_ids(len(rows)), np.asarray([r["oracle_cf"] for r in rows]), folds, spy)
    assert len(spy.calls) == 5
    for train, test in spy.calls:
        held = {rows[i]["kernel"] for i in test}
        assert len(held) == 1 and len(test) == len(D.GPUS)      # one kernel, every GPU
        assert not held & {rows[i]["kernel"] for i in train}
    # leave-one-row-out: one row out, the kernel's other GPUs stay in training
    spy = Spy()
    P.cross_validate(_ids(len(rows)), np.asarray([r["oracle_cf"] for r in rows]),
                     P.coarsening_folds(rows, "row"), spy)
    assert len(spy.calls) == len(rows) and all(len(t) == 1 for _, t in spy.calls)


def test_devmap_metrics_on_a_hand_checked_case():
    rows = [  # runtimes (cpu, gpu) and the oracle (faster device)
        {"oracle": "GPU", "runtime_cpu": 4.0, "runtime_gpu": 1.0},
        {"oracle": "CPU", "runtime_cpu": 1.0, "runtime_gpu": 2.0},
        {"oracle": "GPU", "runtime_cpu": 3.0, "runtime_gpu": 1.5},
        {"oracle": "CPU", "runtime_cpu": 1.0, "runtime_gpu": 4.0},
    ]
    pred = ["GPU", "GPU", "CPU", "CPU"]          # right, wrong, wrong, right
    m = P.devmap_metrics(rows, pred, np.asarray([0, 0, 1, 1]), "amd")
    assert m["accuracy"] == 0.5
    assert m["fold_accuracy_min"] == m["fold_accuracy_max"] == 0.5
    # GPU: tp 1, fp 1, fn 1 -> F1 0.5; CPU the same
    assert m["f1_macro"] == pytest.approx(0.5)
    # AMD's static mapping is the CPU: speedups 4, 0.5, 1, 1
    assert m["speedup_geomean"] == pytest.approx(math.pow(4 * 0.5 * 1 * 1, 1 / 4))
    assert m["speedup_mean"] == pytest.approx(6.5 / 4)
    # NVIDIA's static mapping is the GPU: speedups 1, 1, 0.5, 4
    assert P.devmap_metrics(rows, pred, np.zeros(4, int), "nvidia")["speedup_mean"] == \
        pytest.approx(6.5 / 4)
    assert P.devmap_oracle(rows, "amd")["speedup_mean"] == pytest.approx((4 + 1 + 2 + 1) / 4)


def test_coarsening_metrics_on_a_hand_checked_case():
    rows = [{"kernel": "a", "gpu": "Tahiti", "runtimes": {1: 2.0, 2: 1.0, 4: 4.0},
             "oracle_cf": 2},
            {"kernel": "b", "gpu": "Tahiti", "runtimes": {1: 1.0, 2: 0.8}, "oracle_cf": 2}]
    # a: factor 4 -> 2/4 = 0.5; b: factor 32 is capped at 2 -> 1/0.8 = 1.25
    m = P.coarsening_metrics(rows, [4, 32])
    assert m["speedup"] == {"Tahiti": pytest.approx((0.5 + 1.25) / 2)}
    assert m["speedup_spread"]["Tahiti"]["min"] == 0.5 and m["speedup_spread"]["Tahiti"]["max"] == 1.25
    assert m["speedup_average"] == pytest.approx(0.875)
    assert m["best_factor_rate"] == 0.5
    assert P.coarsening_oracle(rows)["speedup"]["Tahiti"] == pytest.approx((2 + 1.25) / 2)


def test_f1_macro_is_symmetric_and_perfect_on_perfect_predictions():
    y = np.asarray(["CPU", "GPU", "GPU", "CPU", "GPU"])
    assert P.f1_macro(y, y) == 1.0
    flipped = np.where(y == "CPU", "GPU", "CPU")
    assert P.f1_macro(y, flipped) == 0.0
