"""Per-function pieces of large modules (mirecc.encoder.pieces), the corpus
pack (mirecc.encoder.pack, ``mire corpus pack``) and training on it."""

import json
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from mirecc.encoder import data
from mirecc.encoder.pack import PackedCorpus, PackWriter, build_pack
from mirecc.encoder.pieces import split_module
from mirecc.graph import schema

from tests.encoder_corpus import CLANG, SOURCES, write_corpus, write_manifest

# many functions sharing globals and constants, one of them long: a module
# far over the small caps these tests use
BIG = "".join(
    f"static int g{i}[64];\n"
    f"int f{i}(int *a, int n) {{ int s = {i}; for (int j = 0; j < n; j++) "
    f"{{ s += a[j] * {i + 3} + g{i}[j & 63]; if (s > {1000 + i}) s -= {i + 7}; }} return s; }}\n"
    for i in range(12)) + (
    "int longest(int *a, int n) { int s = 0;\n"
    + "".join(f"  s += a[{k}] * {k + 1}; if (s & {k + 1}) s ^= {3 * k + 1};\n" for k in range(60))
    + "  return s + f0(a, n) + f11(a, n); }\n")
CAPS = dict(max_nodes=160, max_statements=60)


@pytest.fixture(scope="module")
def tok():
    from mirecc.ir.tokenizer import load
    return load()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    root = tmp_path_factory.mktemp("corpus")
    write_manifest(root, write_corpus(root, {**SOURCES, "big.c": BIG}))
    return root


@pytest.fixture(scope="module")
def big(corpus, tok):
    index = data.CorpusIndex(corpus)
    sha = next(s for s, r in index.records.items() if r["origin"] == "big.c")
    return data.encode_module(index.ir_path(sha), tok)


def rows(mod, nodes=None):
    """Each node's statement as a tuple of token ids (padding stripped)."""
    nodes = range(mod.num_nodes) if nodes is None else nodes
    return [tuple(int(t) for t in mod.stmt_ids[mod.node_stmt[n]] if t) for n in nodes]


def test_a_module_within_the_caps_stays_whole(big):
    pieces, dropped = split_module(big, max_nodes=10**6, max_statements=10**6)
    assert pieces == [big] and dropped == 0


def test_pieces_fit_the_caps_and_keep_every_instruction(big):
    pieces, dropped = split_module(big, **CAPS)
    assert big.num_nodes > CAPS["max_nodes"] and len(pieces) > 3 and dropped == 0
    for p in pieces:
        assert p.num_nodes <= CAPS["max_nodes"] and p.stmt_ids.shape[0] <= CAPS["max_statements"]
        for e in p.edges:
            assert e.shape[0] == 2 and (e.size == 0 or (0 <= e.min() and e.max() < p.num_nodes))
        # statement rows are trimmed to the piece's own longest statement
        assert (p.stmt_ids[:, -1] != 0).any()
    # every instruction of every function is in exactly one piece, with its
    # statement; only the [external] root is left out
    inst = [n for n in range(big.num_nodes)
            if big.node_type[n] == schema.INSTRUCTION and big.node_function[n] >= 0]
    want = Counter(rows(big, inst))
    got = Counter(r for p in pieces for r, f, t in zip(rows(p), p.node_function, p.node_type)
                  if t == schema.INSTRUCTION and f >= 0)
    assert got == want
    # the long function alone is over the caps, so it was cut into windows
    fn_of_pieces = [set(p.node_function[p.node_function >= 0].tolist()) for p in pieces]
    assert sum(1 for fs in fn_of_pieces if len(fs) == 1 and fs == fn_of_pieces[-1]) >= 2
    # a piece keeps its functions' data edges: most of the module's survive
    kept = sum(p.edges[schema.DATA].shape[1] for p in pieces)
    assert kept >= 0.8 * big.edges[schema.DATA].shape[1]


def test_constants_and_globals_follow_the_instructions_that_use_them(big):
    pieces, _ = split_module(big, **CAPS)
    for p in pieces:
        shared = np.flatnonzero(p.node_function == schema.NONE)
        assert shared.size and (p.node_type[shared] != schema.INSTRUCTION).all()
        # each shared node has a data edge with an instruction or variable of the piece
        src, dst = p.edges[schema.DATA]
        touched = set(src.tolist()) | set(dst.tolist())
        assert set(shared.tolist()) <= touched


def test_split_needs_function_membership(big):
    old = data.EncodedModule(big.stmt_ids, big.node_stmt, big.node_type, big.edges)
    with pytest.raises(ValueError, match="node_function"):
        split_module(old, **CAPS)


def test_pack_round_trip(corpus, tok, tmp_path):
    out = tmp_path / "corpus.pack.npz"
    summary = build_pack(data.CorpusIndex(corpus), tok, out, jobs=2, progress=False, **CAPS)
    assert summary["modules"] == 4 and summary["modules_cut"] == 1
    assert summary["modules_whole"] == 3 and summary["bytes"] == out.stat().st_size
    packed = PackedCorpus(out)
    assert packed.meta["max_nodes"] == CAPS["max_nodes"]
    assert len(packed) == summary["pieces"] and sorted(packed.train + packed.heldout) == \
        list(range(len(packed)))
    index = data.CorpusIndex(corpus)
    for i in range(len(packed)):
        sha = packed.shas[packed.piece_module[i]]
        assert (i in packed.heldout) == data.is_heldout(sha)
        original = data.encode_module(index.ir_path(sha), tok)
        assert packed.module_nodes[packed.piece_module[i]] == original.num_nodes
        want = split_module(original, **CAPS)[0][packed.piece_index[i]]
        got = packed.module(i)
        assert rows(got) == rows(want)
        assert (got.node_type == want.node_type).all()
        for f in range(3):
            assert sorted(map(tuple, got.edges[f].T.tolist())) == \
                sorted(map(tuple, want.edges[f].T.tolist()))
        assert packed.sizes([i])[i] == (want.num_nodes, want.stmt_ids.shape[0])
    # pieces collate into one training batch like corpus modules do
    torch = pytest.importorskip("torch")
    batch = data.collate([packed.module(i) for i in range(len(packed))], 8,
                         torch.Generator().manual_seed(0), max_nodes=10**6)
    assert batch["num_graphs"] == len(packed)


def test_pack_is_smaller_than_its_arrays(corpus, tok, tmp_path):
    writer = PackWriter()
    index = data.CorpusIndex(corpus)
    for sha in sorted(index.records):
        mod = data.encode_module(index.ir_path(sha), tok)
        writer.add(sha, split_module(mod, **CAPS)[0], whole=False)
    raw = sum(a.nbytes for a in writer.arrays({}).values())
    assert writer.write(tmp_path / "p.npz", {"max_nodes": 1, "max_statements": 1}) < raw / 2


def test_a_bad_pack_is_refused_naming_the_file(tmp_path):
    bad = tmp_path / "bad.pack.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.pack.npz.*not a mirecc corpus pack"):
        PackedCorpus(bad)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="other.npz.*no meta"):
        PackedCorpus(tmp_path / "other.npz")


def test_pretrain_on_a_pack(corpus, tmp_path):
    pytest.importorskip("torch")
    pack = tmp_path / "c.pack.npz"
    subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "corpus", "pack", "--corpus", str(corpus),
                    "--out", str(pack), "--max-nodes", "160", "--max-statements", "60",
                    "--jobs", "1"], check=True, capture_output=True)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "mirecc.encoder.train", "--pack", str(pack),
                        "--out", str(out), "--max-steps", "3", "--max-nodes", "4000",
                        "--max-statements", "2000", "--mlm-per-batch", "16", "--threads", "1",
                        "--no-progress", "--eval-modules", "4"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "cut) in" in r.stdout and (out / "model.pt").is_file()
    # --eval-only: the saved model's held-out metrics, the same as the run's last evaluation
    r = subprocess.run([sys.executable, "-m", "mirecc.encoder.train", "--pack", str(pack),
                        "--out", str(tmp_path / "eval"), "--max-nodes", "4000",
                        "--max-statements", "2000", "--mlm-per-batch", "16", "--threads", "1",
                        "--no-progress", "--eval-modules", "4",
                        "--eval-only", str(out / "model.pt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    metrics = json.loads(r.stdout.strip().splitlines()[-1])
    last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [m for m in last if m["kind"] == "heldout"][-1]
    assert metrics["step"] == 3 and not (tmp_path / "eval" / "checkpoint.pt").exists()
    # (the fixture's held-out split depends on its modules' hashes: it may be
    # empty, and an AUC of a flow with no held-out edges is NaN in both)
    assert metrics["masked_tokens"] == last["masked_tokens"]
    for key in ("mlm_accuracy", "match_accuracy", "auc_data", "auc_control", "loss_mlm"):
        assert metrics.get(key) == pytest.approx(last.get(key), abs=1e-6, nan_ok=True), key
    # a pack cut for bigger batches than the run allows is refused
    r = subprocess.run([sys.executable, "-m", "mirecc.encoder.train", "--pack", str(pack),
                        "--out", str(tmp_path / "run2"), "--max-nodes", "100", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "over --max-nodes" in r.stderr
