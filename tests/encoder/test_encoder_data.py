"""mirecc.encoder.data: corpus index, per-module encoding and cache, collate."""

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (encoder training extra)")

from mirecc.encoder import data
from mirecc.graph import build_graph, schema

from tests.encoder_corpus import CLANG, SOURCES, write_corpus, write_manifest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    root = tmp_path_factory.mktemp("corpus")
    lines = write_corpus(root, SOURCES, lambda name: {"kind": "test" if name != "c.c" else "other"})
    lines.append(dict(lines[0]))                                   # duplicate line
    lines.append({"sha256": "ff" * 32, "ir": "ir/ff/missing.bc", "kind": "test"})  # no file
    write_manifest(root, lines)
    return root


@pytest.fixture(scope="module")
def tok():
    from mirecc.ir.tokenizer import load
    return load()


def test_index_split_deterministic_disjoint(corpus):
    a, b = data.CorpusIndex(corpus), data.CorpusIndex(corpus)
    assert len(a) == 3                                   # unique by sha, file must exist
    assert a.train == b.train and a.heldout == b.heldout
    assert not set(a.train) & set(a.heldout)
    assert sorted(a.train + a.heldout) == sorted(a.records)
    # the rule is per sha, so it is stable whatever else the corpus holds
    assert data.is_heldout("0000" + "0" * 60) and not data.is_heldout("ffff" + "0" * 60)
    every = data.CorpusIndex(corpus, heldout_fraction=1.0)
    assert every.train == [] and len(every.heldout) == 3
    assert len(data.CorpusIndex(corpus, kinds=["test"])) == 2


def test_encode_module_shapes(corpus, tok):
    index = data.CorpusIndex(corpus)
    for sha, rec in index.records.items():
        m = data.encode_module(index.ir_path(sha), tok)
        N, (S, L) = m.num_nodes, m.stmt_ids.shape
        assert 1 <= L <= 64 and (m.stmt_ids[:, 0] == 2).all()          # [CLS] first
        assert (m.stmt_ids != 0).sum(1).max() == L                       # trimmed to longest
        assert len({r.tobytes() for r in m.stmt_ids}) == S               # deduplicated
        assert m.node_stmt.shape == (N,) and m.node_stmt.min() >= 0 and m.node_stmt.max() < S
        assert set(np.unique(m.node_type)) <= {0, 1, 2}
        for e in m.edges:
            assert e.shape[0] == 2 and (e.size == 0 or (e.min() >= 0 and e.max() < N))
        assert m.edges[schema.CONTROL].shape[1] > 0 and m.edges[schema.DATA].shape[1] > 0
        if rec["origin"] in ("a.c", "b.c"):                               # a call: call edges
            assert m.edges[schema.CALL].shape[1] > 0
        # a pointer variable reads its normalised type text
        assert "ptr" in data.node_texts(build_graph(index.ir_path(sha)))


def test_cache_hit_and_tokenizer_miss(corpus, tok, tmp_path):
    index = data.CorpusIndex(corpus)
    sha = index.train[0] if index.train else index.heldout[0]
    path = index.ir_path(sha)
    m1 = data.encode_module(path, tok, cache_dir=tmp_path)
    cached = data.cache_path(tmp_path, path)
    assert cached.is_file()
    mtime = cached.stat().st_mtime_ns
    m2 = data.encode_module(path, tok, cache_dir=tmp_path)
    assert cached.stat().st_mtime_ns == mtime                            # not rewritten
    for k, v in m1.arrays().items():
        assert np.array_equal(v, m2.arrays()[k]) and v.dtype == m2.arrays()[k].dtype
    data.encode_module(path, tok, cache_dir=tmp_path, tok_sha="0" * 64)  # other tokenizer
    with np.load(cached) as z:
        assert str(z["tokenizer_sha256"]) == "0" * 64                   # missed, rebuilt


def test_collate_offsets_and_forward(corpus, tok):
    from mirecc.encoder.model import EncoderConfig, MIREncoder
    index = data.CorpusIndex(corpus)
    shas = sorted(index.records)
    mods = [m for _, m in data.iter_encoded(index, shas, tok, cache_dir=corpus / "encoded")]
    assert len(mods) == 3
    g = torch.Generator().manual_seed(0)
    b = data.collate(mods, mlm_per_batch=8, generator=g)
    n0, n1 = mods[0].num_nodes, mods[1].num_nodes
    N = sum(m.num_nodes for m in mods)
    assert b["node_stmt"].shape == (N,) and b["num_graphs"] == 3 and b["skipped"] == 0
    assert torch.equal(b["node_graph"], torch.sort(b["node_graph"]).values)
    # an edge of the second module points into its own node range, at the same node text
    e = b["edge_index"][schema.DATA]
    second = (e[0] >= n0) & (e[0] < n0 + n1)
    assert second.any() and ((e[1][second] >= n0) & (e[1][second] < n0 + n1)).all()
    src_local = int(mods[1].edges[schema.DATA][0, 0])
    assert torch.equal(b["stmt_ids"][b["node_stmt"][n0 + src_local]][:mods[1].stmt_ids.shape[1]],
                       torch.from_numpy(mods[1].stmt_ids[mods[1].node_stmt[src_local]]).long())
    assert int(e[0].min()) >= 0 and int(max(x.max() for x in b["edge_index"] if x.numel())) < N
    # deduplicated across the batch, trimmed to the longest statement
    S, L = b["stmt_ids"].shape
    assert S < sum(m.stmt_ids.shape[0] for m in mods)
    assert L == max(m.stmt_ids.shape[1] for m in mods)
    assert b["mlm_ids"].shape == (8, L)
    model = MIREncoder(EncoderConfig.small())
    _, losses = model(b, generator=torch.Generator().manual_seed(1))
    assert torch.isfinite(losses["loss"])
    # size rule: a module alone over max_nodes is skipped, not truncated
    small = data.collate(mods, 0, g, max_nodes=max(m.num_nodes for m in mods) - 1)
    assert small["skipped"] >= 1 and "mlm_ids" not in small
    with pytest.raises(ValueError):
        data.collate(mods, 0, g, max_nodes=1)


def test_pack_batches():
    sizes = {f"{i:064x}": n for i, n in enumerate([5, 7, 3, 11, 2, 9, 4])}
    batches, skipped = data.pack_batches(sizes, max_nodes=10, seed=3)
    assert skipped == [f"{3:064x}"]                                   # 11 > 10
    assert sorted(s for b in batches for s in b) == sorted(set(sizes) - set(skipped))
    assert all(sum(sizes[s] for s in b) <= 10 for b in batches)
    assert data.pack_batches(sizes, max_nodes=10, seed=3) == (batches, skipped)
    assert all(len(b) <= 2 for b in data.pack_batches(sizes, 10, max_modules=2)[0])


@pytest.mark.parametrize("jobs", [1, 2])
def test_encode_corpus_matches_encode_module(corpus, tok, tmp_path, jobs):
    index = data.CorpusIndex(corpus)
    shutil.rmtree(corpus / "encoded", ignore_errors=True)
    sizes = data.encode_corpus(index, tok, jobs=jobs, progress=False)
    assert set(sizes) == set(index.records)
    for sha, (nodes, stmts) in sizes.items():
        mod = data.encode_module(index.ir_path(sha), tok, cache_dir=tmp_path)  # no shared cache
        assert (nodes, stmts) == (mod.num_nodes, mod.stmt_ids.shape[0])
        cached = data.encode_module(index.ir_path(sha), tok, cache_dir=corpus / "encoded")
        np.testing.assert_array_equal(cached.stmt_ids, mod.stmt_ids)
