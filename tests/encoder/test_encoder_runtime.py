"""The frozen encoder: ONNX export parity, the onnxruntime Encoder against
torch end to end, tamper refusal, the statement cache and ``mire embed``."""

import json
import multiprocessing
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (encoder training extra)")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")

from mirecc.encoder import export  # noqa: E402
from mirecc.encoder.model import EncoderConfig, MIREncoder  # noqa: E402
from mirecc.encoder.runtime import Encoder, EmbedError  # noqa: E402
from mirecc.tu.server import socket_name  # noqa: E402
from mirecc.encoder.stmtcache import StatementCache  # noqa: E402
from mirecc.util.modelfiles import ModelError  # noqa: E402

CLANG = "/usr/bin/clang-14"
SOURCE = """
float dot(const float *x, const float *y, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}
void mm(int n, float *a, float *b, float *c) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) c[i * n + j] = dot(a + i * n, b + j * n, n);
}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny encoder with the real vocabulary, trained for nothing, exported."""
    root = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    model = MIREncoder(EncoderConfig(n_layer=1, n_head=2, n_embd=16, gcn_dim=8,
                                     match_hidden=8)).eval()
    torch.save({"model": model.state_dict(), "config": model.cfg.to_dict(), "args": {}},
               root / "model.pt")
    manifest = export.write_model_dir(root / "model.pt", root / "onnx", "tiny", None)
    return model, root / "onnx", manifest


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    if not shutil.which(CLANG):
        pytest.skip(f"{CLANG} not installed")
    path = tmp_path_factory.mktemp("src") / "mm.c"
    path.write_text(SOURCE)
    return path


def test_export_writes_a_verified_manifest_within_parity(tiny):
    _, model_dir, manifest = tiny
    assert set(manifest["files"]) == {"statements.onnx", "graph.onnx", "tokenizer.json"}
    for diff in manifest["onnx"]["parity_max_abs_diff"].values():
        assert diff < export.PARITY_TOLERANCE
    assert manifest["onnx"]["opset"] == 18
    assert manifest["embedding"] == {"statement": 16, "node": 8, "module": 24}


def test_onnx_matches_torch_on_new_shapes_and_empty_subgraphs(tiny):
    model, model_dir, _ = tiny
    (ids,), graph_args = export.example_inputs(model, S=11, L=33, N=57, E=0, seed=7)
    graph_args = graph_args[:3] + (graph_args[3], graph_args[4], torch.zeros(2, 0, dtype=torch.long))
    assert export.check_parity(export.StatementGraph(model), (ids,),
                               model_dir / "statements.onnx") < 1e-4
    assert export.check_parity(export.NodeGraph(model), graph_args, model_dir / "graph.onnx",
                               threads=1) < 1e-4


def torch_node_embeddings(model, graph, nodes=None):
    """Per node: its statement embedding and its node embedding, computed in
    torch with statements padded to 64 tokens (no buckets, no cache); with
    ``nodes``, on the subgraph of those nodes alone (rows in their order)."""
    from mirecc.encoder.data import node_texts
    from mirecc.ir.tokenizer import load
    nodes = np.arange(graph.num_nodes) if nodes is None else np.asarray(nodes)
    texts = [node_texts(graph)[i] for i in nodes]
    uniq = list(dict.fromkeys(texts))
    ids, _ = load().encode_batch(uniq)
    node_stmt = torch.tensor([uniq.index(t) for t in texts])
    remap = np.full(graph.num_nodes, -1)
    remap[nodes] = np.arange(len(nodes))
    src, dst = remap[graph.edge_source], remap[graph.edge_target]
    inside = (src >= 0) & (dst >= 0)
    with torch.no_grad():
        stmt = model.statements(torch.tensor(ids))[1]
        ei = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
        z = export.NodeGraph(model)(stmt, node_stmt,
                                    torch.from_numpy(graph.node_type[nodes].astype(np.int64)),
                                    *(ei[:, torch.from_numpy(inside & (graph.edge_flow == f))]
                                      for f in range(3))).mean(0)
    return stmt[node_stmt].numpy(), z.numpy()


def pooled(stmt, z, graph, nodes):
    """The runtime's definition, by masks: mean statement embedding of the
    instructions among ``nodes``, then mean node embedding of ``nodes``."""
    inst = nodes & (graph.node_type == 0)
    return np.concatenate([stmt[inst].mean(0), z[nodes].mean(0)])


def test_runtime_matches_torch_end_to_end(tiny, source, tmp_path):
    from mirecc.graph import build_graph
    from mirecc.encoder.runtime import compile_to_ir
    model, model_dir, _ = tiny
    bc = tmp_path / "mm.bc"
    compile_to_ir(source, bc, CLANG, [])
    enc = Encoder(model_dir, cache=tmp_path / "cache.sqlite")
    emb = enc.embed_file(bc)
    graph = build_graph(bc)
    stmt, z = torch_node_embeddings(model, graph)
    everything = np.ones(graph.num_nodes, dtype=bool)
    np.testing.assert_allclose(emb.module, pooled(stmt, z, graph, everything), atol=1e-4)
    assert set(emb.functions) == {"dot", "mm"}                 # definitions only
    names = graph.function_names
    for name in ("dot", "mm"):
        want = pooled(stmt, z, graph, graph.node_function == names.index(name))
        np.testing.assert_allclose(emb.functions[name], want, atol=1e-4, err_msg=name)
    assert sorted(emb.loops) == sorted(graph.loop_ids) and len(emb.loops) == 3
    parent = graph.arrays["loop_parent"].tolist()
    for i, lid in enumerate(graph.loop_ids):                   # a loop covers its nested loops
        members = [i] + [j for j in range(len(parent)) if parent[j] == i]
        want = pooled(stmt, z, graph, np.isin(graph.node_loop, members))
        np.testing.assert_allclose(emb.loops[lid], want, atol=1e-4, err_msg=lid)
    assert any(p >= 0 for p in parent)                         # mm's loops are nested
    assert emb.stats["cached_texts"] == 0 and emb.stats["distinct_texts"] > 10
    again = enc.embed_file(bc)                                 # warm: every text cached
    assert again.stats["cached_texts"] == again.stats["distinct_texts"]
    np.testing.assert_allclose(again.module, emb.module, atol=1e-6)
    # the source path compiles as the driver does and gives the same module
    np.testing.assert_allclose(enc.embed_file(source, clang=CLANG).module, emb.module, atol=1e-6)


def test_tampered_model_is_refused(tiny, tmp_path):
    _, model_dir, _ = tiny
    bad = tmp_path / "bad"
    shutil.copytree(model_dir, bad)
    blob = bytearray((bad / "graph.onnx").read_bytes())
    blob[-10] ^= 0xFF
    (bad / "graph.onnx").write_bytes(bytes(blob))
    with pytest.raises(ModelError, match="graph.onnx: model file is corrupt or was modified"):
        Encoder(bad, cache=False)


def test_bad_inputs_name_the_file(tiny, tmp_path):
    _, model_dir, _ = tiny
    enc = Encoder(model_dir, cache=False)
    with pytest.raises(EmbedError, match="nope.ll: no such file"):
        enc.embed_file(tmp_path / "nope.ll")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(EmbedError, match="x.txt: not LLVM IR"):
        enc.embed_file(tmp_path / "x.txt")
    (tmp_path / "broken.c").write_text("int f( {")
    with pytest.raises(EmbedError, match="broken.c: clang could not compile it"):
        enc.embed_file(tmp_path / "broken.c", clang=CLANG)


def _fill(args):
    path, worker = args
    cache = StatementCache(path, "m", 4)
    texts = [f"stmt {i}" for i in range(300)]                  # all workers write the same keys
    for _ in range(5):
        cache.put_many(texts, np.full((300, 4), worker, dtype=np.float32))
        got = cache.get_many(texts)
        assert len(got) == 300
    return len(cache)


def test_statement_cache_is_safe_for_concurrent_processes(tmp_path):
    path = tmp_path / "c.sqlite"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        counts = pool.map(_fill, [(path, w) for w in range(4)])
    assert counts == [300] * 4
    cache = StatementCache(path, "m", 4)
    vecs = cache.get_many(["stmt 0", "stmt 299", "missing"])
    assert set(vecs) == {"stmt 0", "stmt 299"}                 # first writer wins, whole rows
    assert len(set(vecs["stmt 0"].tolist())) == 1
    assert StatementCache(path, "another model", 4).get_many(["stmt 0"]) == {}


def _open_and_close(path):
    StatementCache(path, "m", 4).close()


def test_statement_cache_opens_when_many_processes_create_it_at_once(tmp_path):
    # switching a new database to WAL from several processes at once made
    # SQLite answer "database is locked" without waiting (about 5% of opens)
    with multiprocessing.get_context("fork").Pool(8) as pool:
        for i in range(30):
            pool.map(_open_and_close, [tmp_path / f"c{i}.sqlite"] * 8)
    assert all(len(StatementCache(tmp_path / f"c{i}.sqlite", "m", 4)) == 0 for i in range(30))


def test_mire_embed_cli(tiny, source, tmp_path):
    _, model_dir, _ = tiny
    cmd = [sys.executable, "-m", "mirecc.cli.mire", "embed", "--model", str(model_dir),
           "--cache", str(tmp_path / "c.sqlite"), "--clang", CLANG]
    out = subprocess.run(cmd + ["--granularity", "all", str(source)], capture_output=True,
                         text=True, check=True)
    doc = json.loads(out.stdout)
    entry = doc["files"][str(source)]
    assert len(entry["module"]) == 24 and set(entry["functions"]) == {"dot", "mm"}
    assert len(entry["loops"]) == 3
    npz = tmp_path / "e.npz"
    subprocess.run(cmd + ["--granularity", "function", "-o", str(npz), str(source)], check=True)
    with np.load(npz) as z:
        assert sorted(z.files) == [f"function/{source}/dot", f"function/{source}/mm"]
        np.testing.assert_allclose(z[f"function/{source}/dot"], entry["functions"]["dot"], atol=1e-6)
    bad = subprocess.run(cmd + [str(tmp_path / "missing.c")], capture_output=True, text=True)
    assert bad.returncode == 1 and "missing.c: no such file" in bad.stderr


def test_embedding_server_round_trip(tiny, source, tmp_path):
    """mire embed --server starts a per-user server, answers from it with the
    same vectors as in-process, reports bad input, and serves another model too."""
    from tests.envs import isolated_env
    _, model_dir, _ = tiny
    env = isolated_env(tmp_path, XDG_RUNTIME_DIR=str(tmp_path / "run"))
    base = [sys.executable, "-m", "mirecc.cli.mire"]
    embed = base + ["embed", "--model", str(model_dir), "--clang", CLANG, "--granularity", "all"]
    local = json.loads(subprocess.run(embed + [str(source)], env=env, capture_output=True,
                                      text=True, check=True).stdout)
    try:
        served = subprocess.run(embed + ["--server", str(source)], env=env, capture_output=True,
                                text=True, check=True)
        assert served.stderr == ""                             # no fallback warning
        sock = tmp_path / "run" / "mirecc" / socket_name()
        assert sock.exists() and (sock.parent.stat().st_mode & 0o777) == 0o700
        a, b = local["files"][str(source)], json.loads(served.stdout)["files"][str(source)]
        np.testing.assert_allclose(a["module"], b["module"], atol=1e-6)
        assert a["loops"].keys() == b["loops"].keys()
        bad = subprocess.run(embed + ["--server", str(tmp_path / "none.c")], env=env,
                             capture_output=True, text=True)
        assert bad.returncode == 1 and "none.c: no such file" in bad.stderr
        # a request for another model (a copy): the server loads that one too
        other = tmp_path / "other"
        shutil.copytree(model_dir, other)
        second = subprocess.run(base + ["embed", "--model", str(other), "--clang", CLANG,
                                        "--server", str(source)],
                                env=env, capture_output=True, text=True, check=True)
        assert second.stderr == ""
        np.testing.assert_allclose(json.loads(second.stdout)["files"][str(source)]["module"],
                                   a["module"], atol=1e-6)
    finally:
        subprocess.run(base + ["serve", "--stop"], env=env, capture_output=True)
    for _ in range(100):                                       # it removes its socket on exit
        if not sock.exists():
            break
        __import__("time").sleep(0.05)
    assert not sock.exists()


def test_a_broken_statement_cache_is_dropped_with_one_warning(tiny, source, tmp_path, capsys):
    _, model_dir, _ = tiny
    path = tmp_path / "c.sqlite"
    enc = Encoder(model_dir, cache=path)
    want = Encoder(model_dir, cache=False).embed_file(source, clang=CLANG).module
    enc.cache.db.close()            # any SQLite error from now on (as a disk I/O error would)
    got = enc.embed_file(source, clang=CLANG).module
    np.testing.assert_allclose(got, want, atol=1e-6)
    err = capsys.readouterr().err
    assert err.count("embedding without the statement cache") == 1 and "c.sqlite" in err
    assert enc.cache is None


def test_compile_to_ir_keeps_the_callers_optimisation_level(tmp_path):
    """Re-emitting a TU for the encoder keeps the build's -O level (-O3 and
    -O2 differ in the front end's IR: attributes, loop metadata)."""
    from mirecc.encoder.runtime import compile_to_ir
    src = tmp_path / "f.c"
    src.write_text("int f(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) "
                   "s += a[i]; return s; }\n")
    for flags, level in ((["-O3"], "-O3"), ([], "-O2"), (["-Os"], "-Os")):
        out = tmp_path / f"f{level}.bc"
        compile_to_ir(src, out, CLANG, flags)
        ref = tmp_path / f"ref{level}.bc"
        subprocess.run([CLANG, level, "-Xclang", "-disable-llvm-passes", "-c", "-emit-llvm",
                        "-w", "-o", str(ref), str(src)], check=True)
        assert out.read_bytes() == ref.read_bytes(), flags


OTHER = """
float dot(const float *x, const float *y, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}
int twice(int v) { return 2 * v; }
"""


def test_a_functions_own_vector_depends_on_its_code_alone(tiny, source, tmp_path):
    """embed_functions runs the encoder on the function's part of the graph:
    ``dot`` gets the same vector in a module with other neighbours, and the
    vector is torch's on that subgraph; a digest that is cached is read,
    not computed."""
    from mirecc.encoder.runtime import compile_to_ir
    from mirecc.graph import build_graph
    from mirecc.ir.text import function_digests

    model, model_dir, _ = tiny
    other = tmp_path / "other.c"
    other.write_text(OTHER)
    vectors, digests = [], []
    for n, src in enumerate((source, other)):
        ll = tmp_path / f"m{n}.ll"
        compile_to_ir(src, ll, CLANG, ["-S"])
        graph = build_graph(ll)
        enc = Encoder(model_dir, cache=tmp_path / "cache.sqlite")
        d = function_digests(ll.read_text())
        vectors.append(enc.embed_functions(graph, digests=d))
        digests.append(d)
        if n == 0:   # torch on dot's nodes and the constants they use, nothing else
            names = graph.function_names
            own = graph.node_function == names.index("dot")
            data = graph.edge_flow == 1
            uses = np.zeros_like(own)
            shared = graph.node_function == -1
            uses[graph.edge_source[data & shared[graph.edge_source] & own[graph.edge_target]]] = 1
            uses[graph.edge_target[data & shared[graph.edge_target] & own[graph.edge_source]]] = 1
            sub = np.flatnonzero(own | uses)
            stmt, z = torch_node_embeddings(model, graph, nodes=sub)
            want = np.concatenate([stmt[own[sub] & (graph.node_type[sub] == 0)].mean(0),
                                   z[own[sub]].mean(0)])
            np.testing.assert_allclose(vectors[0]["dot"], want, atol=1e-4)
    assert set(vectors[0]) == {"dot", "mm"} and set(vectors[1]) == {"dot", "twice"}
    assert digests[0]["dot"] == digests[1]["dot"]
    np.testing.assert_allclose(vectors[0]["dot"], vectors[1]["dot"], atol=1e-6)
    # the cache is keyed by the code digest
    enc = Encoder(model_dir, cache=tmp_path / "cache.sqlite")
    marker = np.full_like(vectors[0]["mm"], 7.0)
    enc.cache.put_many(["feedbeef"], marker[None], "function_embedding")
    graph = build_graph(tmp_path / "m0.ll")
    got = enc.embed_functions(graph, ["mm"], digests={"mm": "feedbeef"})
    np.testing.assert_array_equal(got["mm"], marker)


def test_the_torch_model_is_read_back_from_its_onnx_files(tiny):
    model, model_dir, _ = tiny
    back = export.model_from_onnx(model_dir)
    want, got = model.state_dict(), back.state_dict()
    for key in want:
        if key.startswith(("statements.", "graph.")) and "mlm" not in key:
            torch.testing.assert_close(got[key], want[key], msg=key)


def test_the_tu_context_gives_each_functions_own_vector(source, tmp_path, monkeypatch):
    """A head reads a function's own vector through the per-TU context (one
    graph, the digests of the TU's own IR), the same as the encoder's."""
    import hashlib

    from mirecc.encoder.runtime import compile_to_ir
    from mirecc.taskapi.config import load_config
    from mirecc.taskapi.context import TUContext
    from mirecc.taskapi.records import TURequest

    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path / "cache"))
    bc = tmp_path / "mm.bc"
    compile_to_ir(source, bc, CLANG, [])
    request = TURequest(source=str(source), language="c", opt_level="2", flags=(),
                        bitcode_path=str(bc),
                        bitcode_sha256=hashlib.sha256(bc.read_bytes()).hexdigest())
    ctx = TUContext(request, load_config(environ={"MIRECC_CACHE_DIR": str(tmp_path / "c")}))
    got = ctx.function_embeddings()
    assert set(got) == {"dot", "mm"}
    want = Encoder(cache=False).embed_functions(ctx.graph, ["mm"])
    np.testing.assert_allclose(got["mm"], want["mm"], atol=1e-5)
    assert set(ctx.function_embeddings(["dot"])) == {"dot"}
