"""mire pretrain: metrics, schedule, packing, and a real (tiny) training run
that is stopped and resumed."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (encoder training extra)")

from mirecc.encoder import data, train  # noqa: E402

from tests.encoder_corpus import CLANG, SOURCES, write_corpus, write_manifest  # noqa: E402

MORE_SOURCES = {**SOURCES,
                "d.c": "void scale(float *x, float a, int n) { for (int i = 0; i < n; i++) x[i] *= a; }\n"
                       "float first(float *x) { scale(x, 2.0f, 4); return x[0]; }\n"}


def test_roc_auc_matches_definition():
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1, 1, 50), rng.normal(0, 1, 40)
    pos[:5] = neg[:5]                                     # some ties
    want = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert train.roc_auc(pos, neg) == pytest.approx(want)
    assert train.roc_auc([2, 3], [0, 1]) == 1.0
    assert train.roc_auc([0, 1], [2, 3]) == 0.0
    assert np.isnan(train.roc_auc([], [1.0]))


def test_learning_rate_warmup_then_cosine():
    lrs = [train.learning_rate(s, 1e-3, 10, 100) for s in range(101)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))     # decays monotonically
    assert lrs[100] == pytest.approx(1e-4)                      # to floor * peak


def test_pack_batches_statement_cap():
    sizes = {f"{i:02x}": (100, 40) for i in range(10)}
    batches, skipped = data.pack_batches(sizes, max_nodes=1000, max_statements=100)
    assert not skipped and sorted(s for b in batches for s in b) == sorted(sizes)
    assert all(len(b) <= 2 for b in batches)                    # 2 x 40 <= 100 < 3 x 40
    _, skipped = data.pack_batches({"aa": (10, 500)}, max_statements=100)
    assert skipped == ["aa"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    root = tmp_path_factory.mktemp("corpus")
    write_manifest(root, write_corpus(root, MORE_SOURCES,
                                      lambda name: {"kind": "test", "graph_nodes": 100}))
    return root


def pretrain(corpus, out, *extra):
    args = train.build_parser().parse_args(
        ["--corpus", str(corpus), "--out", str(out), "--max-steps", "4", "--max-modules", "2",
         "--mlm-per-batch", "16", "--warmup", "2", "--jobs", "1", "--no-progress",
         "--log-every", "1", "--checkpoint-every", "100", *extra])
    assert train.run(args) == 0


def test_pretrain_stop_and_resume_gives_the_same_model(corpus, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    pretrain(corpus, straight)
    pretrain(corpus, resumed, "--stop-at", "2")
    assert not (resumed / "model.pt").exists()                # stopped: not finished
    assert torch.load(resumed / "checkpoint.pt", weights_only=True)["step"] == 2
    pretrain(corpus, resumed)                                  # resumes at step 2
    a = torch.load(straight / "model.pt", weights_only=True)
    b = torch.load(resumed / "model.pt", weights_only=True)
    assert a["step"] == b["step"] == 4
    # atol: the attention key biases get gradients that are zero up to rounding
    # (softmax ignores them), which Adam scales up to ~1e-6 steps of either sign
    for k in a["model"]:
        torch.testing.assert_close(a["model"][k], b["model"][k], rtol=1e-5, atol=1e-5,
                                   msg=lambda m, k=k: f"{k}: {m}")
    # training moved the weights
    init = train.CONFIGS["small"]()
    torch.manual_seed(0)
    fresh = train.MIREncoder(init).state_dict()
    assert not torch.equal(fresh["statements.tok_emb.weight"], a["model"]["statements.tok_emb.weight"])
    lines = [json.loads(x) for x in (straight / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in lines if r["kind"] == "train"]
    assert steps == [1, 2, 3, 4]
    assert all(np.isfinite(r["loss_loss"]) for r in lines if r["kind"] == "train")


def test_pretrain_refuses_a_checkpoint_of_another_config(corpus, tmp_path):
    pretrain(corpus, tmp_path, "--stop-at", "1")
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    ckpt["config"]["n_layer"] += 1
    torch.save(ckpt, tmp_path / "checkpoint.pt")
    with pytest.raises(SystemExit, match="another config"):
        pretrain(corpus, tmp_path)


def test_evaluate_reports_each_metric_with_its_chance_level(corpus):
    from mirecc.ir.tokenizer import load
    from mirecc.encoder.model import EncoderConfig, MIREncoder
    index = data.CorpusIndex(corpus)
    mods = [m for _, m in data.iter_encoded(index, list(index.records), load(),
                                            cache_dir=corpus / "enc")]
    batch = data.collate(mods, 32, torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = MIREncoder(EncoderConfig(n_layer=1, n_head=2, n_embd=16, gcn_dim=16, match_hidden=16))
    m1, m2 = train.evaluate(model, [batch]), train.evaluate(model, [batch])
    assert m1 == m2                                            # fixed draws: comparable over time
    for key in ("mlm_accuracy", "auc_control", "auc_data", "auc_call", "match_accuracy"):
        assert 0.0 <= m1[key] <= 1.0, key
    assert m1["auc_chance"] == m1["match_chance"] == 0.5
    assert 0 < m1["mlm_chance_majority"] < 1 and m1["masked_tokens"] > 0
    assert m1["edges_call"] > 0 and m1["match_pairs"] == len(mods)


def test_mire_pretrain_help_lists_the_arguments():
    out = subprocess.run([sys.executable, "-m", "mirecc.cli.mire", "pretrain", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "--time-budget" in out.stdout and "--stop-at" in out.stdout


def test_torchrun_two_processes(corpus, tmp_path):
    """Distributed data parallel on CPU (gloo): two ranks, rank 0 writes."""
    torchrun = shutil.which("torchrun", path=str(__import__("pathlib").Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun not installed")
    out = tmp_path / "ddp"
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "mirecc.encoder.train",
         "--corpus", str(corpus), "--out", str(out), "--max-steps", "2", "--max-modules", "1",
         "--mlm-per-batch", "8", "--jobs", "1", "--no-progress", "--log-every", "1",
         "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = torch.load(out / "model.pt", weights_only=True)
    assert state["step"] == 2
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2]   # rank 0 only
    # the split depends on the bitcode's sha256 (which holds the temp path): 3 or 4 train
    n_train = int(re.search(r"(\d) training modules in (\d) batches per epoch", proc.stdout)[1])
    assert f"{n_train} training modules in {n_train // 2} batches per epoch (per rank)" in proc.stdout
