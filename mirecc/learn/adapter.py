"""A small adapter on the frozen encoder: the alternative to the forests.

The forests read an embedding through its first few principal components
(:func:`mirecc.learn.rankbench.pca`): trees split on single numbers and do
badly with many weak, correlated ones.  An adapter is the other usual way
to put a task on a frozen encoder: a small network trained on the task's
labels over the whole vector.  Here it is a one-hidden-layer perceptron
(``HIDDEN`` ReLU units, L2 penalty ``ALPHA``, fitted by L-BFGS for at most
``ITERATIONS`` steps) over the standardised rows,
an ensemble of ``MEMBERS`` seeds whose spread stands where the trees'
spread stands in the rankings (their ``quantile`` over members).

A representation ``adapter:<kind>`` (``adapter:statistics+contrastive``)
reads what ``<kind>`` reads, the embedding whole, and ranks with the
adapter; :func:`split_kind` tells the benches which.
"""
from __future__ import annotations

import warnings

import numpy as np

from mirecc.learn.rankbench import pca

PREFIX = "adapter:"
HIDDEN = 32
ALPHA = 1e-2
MEMBERS = 3
ITERATIONS = 200   # L-BFGS, full batch: the tables are small


def split_kind(kind: str) -> tuple[bool, str]:
    """(whether ``kind`` ranks with the adapter, the representation it reads)."""
    return (True, kind[len(PREFIX):]) if kind.startswith(PREFIX) else (False, kind)


def embedding_block(E: np.ndarray, train_idx, test_idx, pca_k: int, whole: bool) -> np.ndarray:
    """Rows of the embedding ``E`` for a fold: the first ``pca_k`` principal
    components fitted on the training rows (the forests), or ``whole``: the
    vector standardised on the training rows (the adapter)."""
    if whole:
        mu, sd = E[train_idx].mean(0), E[train_idx].std(0) + 1e-9
        return (E - mu) / sd
    tr, te = pca(E[train_idx], E[test_idx], pca_k)
    out = np.zeros((len(E), tr.shape[1]))
    out[train_idx], out[test_idx] = tr, te
    return out


class Adapter:
    """``MEMBERS`` perceptrons of standardised X -> standardised Y."""

    def __init__(self, members, x_mu, x_sd, y_mu, y_sd):
        self.members, self.x_mu, self.x_sd = members, x_mu, x_sd
        self.y_mu, self.y_sd = y_mu, y_sd

    def predictions(self, X: np.ndarray) -> np.ndarray:
        """(N, members, outputs), as :func:`mirecc.learn.forest.tree_predictions`."""
        Z = (np.asarray(X, float) - self.x_mu) / self.x_sd
        out = [np.asarray(m.predict(Z)).reshape(len(Z), -1) * self.y_sd + self.y_mu
               for m in self.members]
        return np.stack(out, axis=1)


def fit_adapter(X: np.ndarray, Y: np.ndarray, seed: int = 0, members: int = MEMBERS,
                hidden: int = HIDDEN, alpha: float = ALPHA) -> Adapter:
    """The adapter of X (n, d) -> Y (n,) or (n, outputs)."""
    # lazy: scikit-learn costs ~1.5 s to import; only fit_adapter() needs it
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor
    from threadpoolctl import threadpool_limits

    X = np.asarray(X, float)
    Y = np.asarray(Y, float).reshape(len(X), -1)
    x_mu, x_sd = X.mean(0), X.std(0) + 1e-9
    y_mu, y_sd = Y.mean(0), Y.std(0) + 1e-9
    Z, T = (X - x_mu) / x_sd, (Y - y_mu) / y_sd
    fitted = []
    for m in range(members):
        net = MLPRegressor(hidden_layer_sizes=(hidden,), alpha=alpha, solver="lbfgs",
                           max_iter=ITERATIONS, random_state=seed * 1000 + m)
        # one BLAS thread: the benches run a task per core, and these
        # matrices are too small to gain from more
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore", ConvergenceWarning)
            fitted.append(net.fit(Z, T if T.shape[1] > 1 else T[:, 0]))
    return Adapter(fitted, x_mu, x_sd, y_mu, y_sd)
