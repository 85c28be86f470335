"""The shipped encoder (mirecc/data/encoder): verified files, recorded
training figures, and sane embeddings through onnxruntime alone."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from mirecc.encoder.runtime import DEFAULT_MODEL_DIR, Encoder
from mirecc.util.modelfiles import load_model

CLANG = "/usr/bin/clang-14"


def manifest():
    return json.loads((DEFAULT_MODEL_DIR / "manifest.json").read_text())


def test_shipped_model_verifies_and_records_its_training():
    info = load_model(DEFAULT_MODEL_DIR)                 # raises on a changed file
    assert set(info.files) == {"statements.onnx", "graph.onnx", "tokenizer.json"}
    m = manifest()
    assert m["config"]["n_embd"] == 128 and m["embedding"]["module"] == 256
    final, random = m["training"]["heldout_final"], m["training"]["heldout_random_init"]
    assert final["step"] == m["training"]["steps"] > 0 and random["step"] == 0
    # each held-out metric beside its chance level, and above the untrained encoder
    assert final["mlm_accuracy"] > 3 * final["mlm_chance_majority"]
    assert final["match_accuracy"] > final["match_chance"] + 0.1
    for flow in ("control", "data", "call"):
        assert final[f"auc_{flow}"] > max(final["auc_chance"], random[f"auc_{flow}"])
    assert m["training"]["command"].startswith("mire pretrain ")
    assert m["corpus"]["by_kind"]["debian"]["modules"] > 1000
    for diff in m["onnx"]["parity_max_abs_diff"].values():
        assert diff < 1e-4
    # the tokenizer shipped with the model is the package's
    assert (DEFAULT_MODEL_DIR / "tokenizer.json").read_bytes() == \
        (DEFAULT_MODEL_DIR.parent / "tokenizer.json").read_bytes()


def test_shipped_model_embeds(tmp_path):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    src = tmp_path / "k.c"
    src.write_text("void axpy(float *y, const float *x, float a, int n) {\n"
                   "  for (int i = 0; i < n; i++) y[i] += a * x[i]; }\n"
                   "int count(const char *s) { int n = 0; while (*s++ == ' ') n++; return n; }\n")
    bc = tmp_path / "k.bc"
    subprocess.run([CLANG, "-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(src), "-o", str(bc)], check=True)
    enc = Encoder(cache=tmp_path / "c.sqlite")
    a, b = enc.embed_file(bc), Encoder(cache=False).embed_file(bc)
    assert a.module.shape == (256,) and np.isfinite(a.module).all()
    np.testing.assert_allclose(a.module, b.module, atol=1e-5)    # cache or not, same vector
    f1, f2 = a.functions["axpy"], a.functions["count"]
    cos = f1 @ f2 / np.linalg.norm(f1) / np.linalg.norm(f2)
    assert cos < 0.999                                           # different code, different vectors
    assert len(a.loops) == 2
