"""Modules too large for a batch -> per-function subgraphs that fit.

    pieces = split_module(mod, max_nodes=6000, max_statements=768)

A module within both caps stays whole: one piece, the module itself (its
``[external]`` root included), so whole-module training and evaluation are
unchanged.  A larger module is cut along its functions: whole functions are
packed into a piece in function order while it stays within the caps; a
function alone over the caps is cut into windows of consecutive nodes
(halved until each fits).  A piece holds its own nodes plus the constants
and globals (``node_function`` -1) its nodes have data edges with, and every
edge with both ends in the piece.  What is lost at a cut: call edges to
functions in other pieces, the ``[external]`` root, and control/data edges
that cross a window boundary.  Why cut and not skip: the 1,495 modules over
6,000 nodes hold 81% of the corpus's nodes, and skipping them (the first
shipped model) trains on a fifth of the corpus.

A node whose own neighbourhood is over the caps (e.g. one instruction with
thousands of constant operands) cannot be placed and is dropped; the second
return value counts such nodes.
"""

from __future__ import annotations

import numpy as np

from mirecc.encoder.data import EncodedModule
from mirecc.graph import schema


def subgraph(mod: EncodedModule, nodes: np.ndarray) -> EncodedModule:
    """The sub-module on ``nodes`` (sorted, unique node indices): edges with
    both ends inside, statements renumbered to the ones used, ``stmt_ids``
    trimmed to the longest of them."""
    nodes = np.asarray(nodes, dtype=np.int64)
    remap = np.full(mod.num_nodes, -1, dtype=np.int64)
    remap[nodes] = np.arange(nodes.size)
    edges = []
    for e in mod.edges:
        src, dst = remap[e[0]], remap[e[1]]
        keep = (src >= 0) & (dst >= 0)
        edges.append(np.stack([src[keep], dst[keep]]).astype(np.int32))
    used, node_stmt = np.unique(mod.node_stmt[nodes], return_inverse=True)
    rows = mod.stmt_ids[used]
    nonpad = np.flatnonzero((rows != 0).any(axis=0))
    length = int(nonpad[-1]) + 1 if nonpad.size else 1
    fn = None if mod.node_function is None else mod.node_function[nodes]
    return EncodedModule(np.ascontiguousarray(rows[:, :length]),
                         node_stmt.astype(np.int32).reshape(-1),
                         mod.node_type[nodes], tuple(edges), fn)


class _Neighbourhood:
    """Which shared nodes (constants, globals) each owned node uses."""

    def __init__(self, mod: EncodedModule):
        fn = mod.node_function
        shared = (fn == schema.NONE) & (mod.node_type != schema.INSTRUCTION)
        src, dst = mod.edges[schema.DATA]
        owner = np.concatenate([dst[shared[src] & (fn[dst] >= 0)], src[shared[dst] & (fn[src] >= 0)]])
        used = np.concatenate([src[shared[src] & (fn[dst] >= 0)], dst[shared[dst] & (fn[src] >= 0)]])
        order = np.argsort(owner, kind="stable")
        self.owner, self.used = owner[order], used[order]

    def of(self, nodes: np.ndarray) -> np.ndarray:
        """The shared nodes that any of ``nodes`` (sorted) has a data edge with."""
        lo = np.searchsorted(self.owner, nodes, side="left")
        hi = np.searchsorted(self.owner, nodes, side="right")
        counts = hi - lo
        if not counts.any():
            return np.empty(0, dtype=np.int64)
        starts = np.repeat(lo, counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.unique(self.used[starts + within])


def split_module(mod: EncodedModule, max_nodes: int, max_statements: int
                 ) -> tuple[list[EncodedModule], int]:
    """``mod`` whole if it fits both caps, else its per-function pieces (see
    the module docstring). Returns (pieces, nodes dropped)."""
    if mod.num_nodes <= max_nodes and mod.stmt_ids.shape[0] <= max_statements:
        return [mod], 0
    if mod.node_function is None:
        raise ValueError("module has no node_function (encoded before ENCODING_VERSION 2)")
    near = _Neighbourhood(mod)

    def closure(owned: np.ndarray) -> tuple[np.ndarray, int]:
        nodes = np.union1d(owned, near.of(owned))
        return nodes, int(np.unique(mod.node_stmt[nodes]).size)

    def fits(owned: np.ndarray) -> bool:
        nodes, stmts = closure(owned)
        return nodes.size <= max_nodes and stmts <= max_statements

    # units: each function's nodes, or windows of them where a function is over the caps
    fn = mod.node_function
    order = np.argsort(fn, kind="stable")
    functions, starts = np.unique(fn[order], return_index=True)
    bounds = list(starts) + [order.size]
    units: list[np.ndarray] = []
    dropped = 0
    for f, lo, hi in zip(functions.tolist(), bounds[:-1], bounds[1:]):
        if f < 0:
            continue   # shared nodes join the pieces that use them; [external] is left out
        pending = [np.sort(order[lo:hi])]
        while pending:
            owned = pending.pop(0)
            if fits(owned):
                units.append(owned)
            elif owned.size > 1:
                half = owned.size // 2
                pending[:0] = [owned[:half], owned[half:]]
            else:
                dropped += 1

    # greedy packing of consecutive units into pieces within the caps
    pieces: list[EncodedModule] = []
    current: np.ndarray | None = None
    for owned in units:
        if current is not None:
            merged = np.union1d(current, owned)
            if fits(merged):
                current = merged
                continue
            pieces.append(subgraph(mod, closure(current)[0]))
        current = owned
    if current is not None:
        pieces.append(subgraph(mod, closure(current)[0]))
    return pieces, dropped
