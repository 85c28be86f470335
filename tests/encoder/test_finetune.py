"""Training the encoder on compiler feedback (mire pretrain-feedback): a
short run on a tiny corpus from a tiny exported encoder, each objective, the
result an encoder directory the runtime loads."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (encoder training extra)")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")

from tests.encoder_corpus import CLANG, SOURCES, write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    from mirecc.encoder import export, feedback
    from mirecc.encoder.model import EncoderConfig, MIREncoder

    root = tmp_path_factory.mktemp("ft")
    corpus = root / "corpus"
    corpus.mkdir()
    lines = write_corpus(corpus, SOURCES)
    (corpus / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    labels = root / "labels.jsonl"
    assert feedback.main(["--corpus", str(corpus), "--out", str(labels), "--clang", CLANG,
                          "--jobs", "1"]) == 0
    torch.manual_seed(0)
    model = MIREncoder(EncoderConfig(n_layer=1, n_head=2, n_embd=16, gcn_dim=8,
                                     match_hidden=8)).eval()
    torch.save({"model": model.state_dict(), "config": model.cfg.to_dict(), "args": {}},
               root / "model.pt")
    export.write_model_dir(root / "model.pt", root / "init", "tiny", None)
    return root, corpus, labels


@pytest.mark.parametrize("objective", ["regression", "contrastive"])
def test_a_short_run_trains_and_exports_an_encoder(setup, objective, tmp_path):
    from mirecc.encoder import finetune
    from mirecc.encoder.runtime import Encoder

    root, corpus, labels = setup
    out = tmp_path / "run"
    assert finetune.main(["--corpus", str(corpus), "--labels", str(labels), "--out", str(out),
                          "--init", str(root / "init"), "--objective", objective,
                          "--max-steps", "3", "--lr", "1e-2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["objective"] == objective
    losses = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in losses if r["kind"] == "heldout"] == [0, 3]
    before = Encoder(root / "init", cache=False).embed_file(corpus / "b.c", clang=CLANG)
    after = Encoder(out / "model", cache=False).embed_file(corpus / "b.c", clang=CLANG)
    assert set(after.functions) == {"dot", "twice"}
    assert not np.allclose(before.functions["dot"], after.functions["dot"], atol=1e-4)
    manifest = json.loads((out / "model" / "manifest.json").read_text())
    assert manifest["name"] == f"mirencoder-feedback-{objective}"
