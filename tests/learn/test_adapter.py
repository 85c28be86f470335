"""The adapter (mirecc.learn.adapter): a small network over the whole frozen
vector, the alternative to the forests over its first principal components."""
from __future__ import annotations

import numpy as np

from mirecc.learn import judge as J
from mirecc.learn.adapter import embedding_block, fit_adapter, split_kind
from mirecc.learn.embeddings import embedding_of

from tests.learn.test_judge import _cases


def test_kinds_name_the_learner_and_the_representation():
    assert split_kind("adapter:statistics+contrastive") == (True, "statistics+contrastive")
    assert split_kind("statistics+contrastive") == (False, "statistics+contrastive")
    assert embedding_of("adapter:statistics+contrastive") == "contrastive"
    assert embedding_of("adapter:statistics") is None
    assert embedding_of("adapter:ir2vec") == "ir2vec"


def test_the_adapter_fits_a_function_and_its_members_spread():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    Y = np.stack([X[:, 0] - 2 * X[:, 1], X[:, 2] ** 2], axis=1)
    model = fit_adapter(X[:250], Y[:250], members=3)
    P = model.predictions(X[250:])
    assert P.shape == (50, 3, 2)
    mean = P.mean(axis=1)
    # held out: far better than predicting the mean
    for k in range(2):
        err = np.mean((mean[:, k] - Y[250:, k]) ** 2)
        assert err < 0.2 * np.var(Y[250:, k]), (k, err)
    assert np.ptp(P[:, :, 0], axis=1).mean() > 0     # members differ


def test_embedding_block_keeps_the_whole_vector_for_the_adapter():
    E = np.random.default_rng(1).normal(size=(20, 8)) * 3 + 1
    train, test = list(range(15)), list(range(15, 20))
    whole = embedding_block(E, train, test, 3, True)
    assert whole.shape == (20, 8)
    assert np.allclose(whole[train].mean(0), 0) and np.allclose(whole[train].std(0), 1)
    assert embedding_block(E, train, test, 3, False).shape == (20, 3)


def test_a_signal_outside_the_first_components_reaches_the_adapter_not_the_forest():
    """The best candidate is written, faintly, in 4 of 24 dimensions; the
    other 20 are loud noise, so the first principal components hold none of
    it: the forest over them ranks at chance, the adapter reads it."""
    cases = _cases(n_programs=24, seed=5)
    rng = np.random.default_rng(6)
    best = [int(max(c.speed, key=c.speed.get)) for c in cases]
    faint = np.eye(4)[best] * 0.05 + rng.normal(size=(len(cases), 4)) * 0.005
    emb = {"vec": np.hstack([rng.normal(size=(len(cases), 20)) * 10, faint])}
    ranked = J.forest_rankings(cases, ["vec", "adapter:vec"], emb, lambda c: list(c.speed),
                               lambda b: list(np.eye(4)[b]), trees=30, leaf=1, pca_k=3,
                               folds=4)
    r = J.judge(J.Judged("t", cases, ranked, 0.0, 4), draws=100)
    assert r["adapter:vec"]["share"] > 0.6, r["adapter:vec"]["share"]
    assert r["vec"]["share"] < 0.4, r["vec"]["share"]
