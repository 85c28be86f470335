"""OpenCL task heads (device mapping, thread coarsening) in a real build:
``mirecc`` on a ``.cl`` kernel with heads made here (a few random rows, the
real shipped encoder), compared with plain clang-14."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.taskapi.config import ConfigError, load_config
from mirecc.taskapi.records import Decision, PIPELINE_SCHEMA, TUResult
from mirecc.tu.server import socket_name
from mirecc.taskapi.registry import heads_for_languages, spec_languages

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

KERNEL = """\
__kernel void saxpy(__global float *y, __global const float *x, float a, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}
__kernel void scale(__global float *y, float a) {
    y[get_global_id(0)] *= a;
}
"""
C_SOURCE = "int twice(int x) { return 2 * x; }\n"
GPUS = ["Cypress", "Tahiti", "Fermi", "Kepler"]
FACTORS = [1, 2, 4, 8, 16, 32]


@pytest.fixture(scope="module")
def heads(tmp_path_factory) -> Path:
    """A heads directory with one head of each OpenCL task."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.util.modelfiles import load_model
    from mirecc.tasks.opencl.offline.mlp import HeadConfig, train_head, write_onnx

    encoder = load_model(SHIPPED_MODEL_DIR).cache_version
    root = tmp_path_factory.mktemp("heads")
    rng = np.random.default_rng(0)
    quick = HeadConfig(epochs=10)

    devmap = root / "devmap"
    devmap.mkdir()
    X = rng.normal(size=(12, 256 + 2)).astype(np.float32)
    write_onnx(train_head(X, ["CPU", "GPU"] * 6, quick, classes=["CPU", "GPU"]),
               devmap / "head.onnx")
    (devmap / "spec.yaml").write_text(f"""\
task: opencl-device-mapping
languages: [cl]
head: head.onnx
encoder: "{encoder}"
features: [embedding, log1p_transfer, log1p_wgsize]
classes: [CPU, GPU]
platform: "AMD Tahiti 7970 + Intel Core i7-3820"
assumed: {{transfer: 123456, wgsize: 256}}
metrics: metrics.json
""")
    (devmap / "metrics.json").write_text('{"accuracy": 0.5}\n')

    coarsen = root / "coarsen"
    coarsen.mkdir()
    X = rng.normal(size=(12, 256 + len(GPUS))).astype(np.float32)
    write_onnx(train_head(X, FACTORS * 2, quick, classes=FACTORS), coarsen / "head.onnx")
    (coarsen / "spec.yaml").write_text(f"""\
task: opencl-thread-coarsening
languages:            # block list: the driver's line scan reads both forms
  - cl
head: head.onnx
encoder: "{encoder}"
features: [embedding, gpu_onehot]
classes: [1, 2, 4, 8, 16, 32]
gpus: [{", ".join(GPUS)}]
metrics: metrics.json
""")
    return root


def env_for(tmp_path: Path, heads_dir: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
                                     "MIRECC_HEADS_DIR": str(heads_dir),
                                     "MIRECC_SERVER": "0", **extra})


def run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def clang_object(cwd: Path, source: str) -> bytes:
    subprocess.run([CLANG, "-O2", "-c", source, "-o", "ref.o"], cwd=cwd, check=True)
    return (cwd / "ref.o").read_bytes()


@pytest.fixture
def kernel(tmp_path) -> Path:
    (tmp_path / "k.cl").write_text(KERNEL)
    return tmp_path


def test_cl_compile_records_predictions_and_keeps_clangs_object(kernel, heads):
    record = kernel / "out" / "decisions.jsonl"
    env = env_for(kernel, heads, MIRECC_RECORD=str(record))
    proc = run([MIRECC, "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == "", proc.stderr
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")
    [line] = record.read_text().splitlines()
    entry = json.loads(line)
    assert entry["source"] == "k.cl" and entry["language"] == "cl"
    assert len(entry["ir_sha256"]) == 64 and entry["cwd"] == str(kernel)
    tasks = [d["task"] for d in entry["decisions"]]
    assert tasks.count("opencl-device-mapping") == 1
    assert tasks.count("opencl-thread-coarsening") == len(GPUS)
    for d in entry["decisions"]:
        assert d["target"] == "saxpy, scale"
        assert d["advisory"] is True and d["applied"] is False
        assert 0.0 < d["confidence"] <= 1.0
    # A second compile (a cache hit) appends a second line with the same decisions.
    proc = run([MIRECC, "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == ""
    first, second = (json.loads(x) for x in record.read_text().splitlines())
    assert second["cache"] == "hit" and second["decisions"] == first["decisions"]


def test_explain_text_lists_the_predictions_with_confidence(kernel, heads):
    env = env_for(kernel, heads, MIRECC_OPENCL_WGSIZE="64")
    proc = run([MIRECC, "--explain", "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout
    assert "k.cl (cl, -O2)" in out
    assert "k.cl (cl, -O2): 5 decisions, 0 applied" in out
    [devmap] = [ln for ln in out.splitlines() if "opencl-device-mapping saxpy, scale:" in ln]
    assert re.search(r": device (CPU|GPU), ", devmap) and re.search(r"; recorded, confidence [01]\.\d\d: ", devmap)
    assert "not applied" not in devmap
    assert "123456 bytes (assumed by the head" in devmap
    assert "work-group size 64 (configured: opencl_wgsize)" in devmap
    coarsening = [ln for ln in out.splitlines() if "opencl-thread-coarsening saxpy, scale:" in ln]
    assert len(coarsening) == len(GPUS)
    for gpu, ln in zip(GPUS, coarsening):
        assert f", gpu {gpu}; compiler's own: " in ln and "; recorded, confidence " in ln
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")


def test_explain_json_carries_the_predictions(kernel, heads):
    env = env_for(kernel, heads, MIRECC_OPENCL_GPU="Tahiti", MIRECC_OPENCL_TRANSFER="4096")
    proc = run([MIRECC, "--explain=json", "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    data = json.loads(proc.stdout)
    assert data["fallback"] is None and data["skipped"] == []
    [tu] = data["translation_units"]
    assert tu["language"] == "cl"
    by_task = {}
    for d in tu["decisions"]:
        by_task.setdefault(d["task"], []).append(d)
    [devmap] = by_task["opencl-device-mapping"]
    assert devmap["value"]["device"] in ("CPU", "GPU")
    assert "4096 bytes (configured: opencl_transfer)" in devmap["reason"]
    [coarsening] = by_task["opencl-thread-coarsening"]   # only the configured GPU
    assert coarsening["value"]["gpu"] == "Tahiti"
    assert coarsening["value"]["coarsening_factor"] in FACTORS
    for d in tu["decisions"]:
        assert 0.0 < d["confidence"] <= 1.0 and d["advisory"] and not d["applied"]
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")


def logging_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A compiler that logs each call's arguments, then runs clang-14: the
    side IR run shows up as a call with -emit-llvm."""
    log = tmp_path / "calls.log"
    script = tmp_path / "logcc"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec {CLANG} "$@"\n')
    script.chmod(0o755)
    return script, log


def test_c_compile_with_only_opencl_heads_runs_no_side_run(tmp_path, heads):
    (tmp_path / "a.c").write_text(C_SOURCE)
    cc, log = logging_compiler(tmp_path)
    record = tmp_path / "decisions.jsonl"
    env = env_for(tmp_path, heads, MIRECC_CC=str(cc), MIRECC_RECORD=str(record))
    proc = run([MIRECC, "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
    assert proc.returncode == 0 and proc.stderr == ""
    assert log.read_text().splitlines() == ["-O2 -c a.c -o a.o"]   # the final compile only
    assert not record.exists()
    assert (tmp_path / "a.o").read_bytes() == clang_object(tmp_path, "a.c")
    # --explain runs the side run, loads no OpenCL head and says why nothing was decided.
    proc = run([MIRECC, "--explain", "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
    assert proc.returncode == 0 and proc.stderr == ""
    assert "no task heads are installed for c" in proc.stdout
    assert "heads for other languages: coarsen, devmap" in proc.stdout


def test_the_language_check_is_what_keeps_the_side_run_off(tmp_path, heads):
    """The control: the same head declared for C as well makes the same C
    compile run the side run (it then finds no kernel and decides nothing)."""
    both = tmp_path / "heads"
    shutil.copytree(heads, both)
    spec = both / "devmap" / "spec.yaml"
    spec.write_text(spec.read_text().replace("languages: [cl]", "languages: [cl, c]"))
    (tmp_path / "a.c").write_text(C_SOURCE)
    cc, log = logging_compiler(tmp_path)
    record = tmp_path / "decisions.jsonl"
    env = env_for(tmp_path, both, MIRECC_CC=str(cc), MIRECC_RECORD=str(record))
    proc = run([MIRECC, "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    calls = log.read_text().splitlines()
    # one front end writing bitcode, and the user's own compile beside it
    calls.sort(key=lambda c: "-emit-llvm" not in c)
    assert len(calls) == 2 and "-emit-llvm" in calls[0] and "-x ir" not in calls[1]
    assert calls[1].startswith("-O2 -c ") and "-o .a.o.mirecc-" in calls[1]
    assert sorted(p.name for p in tmp_path.glob("*.o")) == ["a.o"]
    assert not list(tmp_path.glob(".*.tmp"))
    [line] = record.read_text().splitlines()
    entry = json.loads(line)
    assert entry["decisions"] == []
    assert entry["no_decision_reasons"] == [
        "devmap: no OpenCL kernel (spir_kernel function) in the module"]


def test_an_unknown_task_for_opencl_does_not_touch_c_compiles(tmp_path, heads):
    mixed = tmp_path / "heads"
    shutil.copytree(heads, mixed)
    (mixed / "future").mkdir()
    (mixed / "future" / "spec.yaml").write_text("task: some-future-task\nlanguages: [cl]\n")
    (tmp_path / "a.c").write_text(C_SOURCE)
    cc, log = logging_compiler(tmp_path)
    env = env_for(tmp_path, mixed, MIRECC_CC=str(cc))
    for explain in ([], ["--explain"]):
        proc = run([MIRECC, *explain, "-O2", "-c", "a.c", "-o", "a.o"], tmp_path, env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (tmp_path / "a.o").read_bytes() == clang_object(tmp_path, "a.c")


def broken_copy(tmp_path: Path, heads: Path) -> Path:
    copy = tmp_path / "heads"
    shutil.copytree(heads, copy)
    return copy


def test_corrupt_head_onnx_gives_one_warning_and_clangs_object(kernel, heads):
    copy = broken_copy(kernel, heads)
    (copy / "devmap" / "head.onnx").write_bytes(b"\x08\x01 this is not an onnx model")
    record = kernel / "decisions.jsonl"
    env = env_for(kernel, copy, MIRECC_RECORD=str(record))
    proc = run([MIRECC, "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stdout == ""
    [warning] = proc.stderr.splitlines()
    assert warning.startswith("mirecc: warning:") and "head.onnx" in warning
    assert warning.endswith("compiled without mirecc decisions")
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")
    assert not record.exists()


@pytest.mark.parametrize("breakage, words", [
    ("missing_head_file", ["head.onnx", "missing"]),
    ("other_encoder", ["encoder", "mirencoder-other@0"]),
    ("bad_spec", ["spec.yaml", "features"]),
    ("unknown_gpu", ["opencl_gpu", "Volta"]),
])
def test_broken_heads_fail_open(kernel, heads, breakage, words):
    copy = broken_copy(kernel, heads)
    extra = {}
    spec = copy / "coarsen" / "spec.yaml"
    if breakage == "missing_head_file":
        (copy / "coarsen" / "head.onnx").unlink()
    elif breakage == "other_encoder":
        text = spec.read_text().splitlines()
        text = [ln if not ln.startswith("encoder:") else 'encoder: "mirencoder-other@0#0"'
                for ln in text]
        spec.write_text("\n".join(text) + "\n")
    elif breakage == "bad_spec":
        spec.write_text(spec.read_text().replace("gpu_onehot", "gpu_name"))
    else:
        extra["MIRECC_OPENCL_GPU"] = "Volta"
    # advisory heads run only when their decisions are read (recorded here)
    env = env_for(kernel, copy, MIRECC_RECORD=str(kernel / "decisions.jsonl"), **extra)
    proc = run([MIRECC, "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0
    [warning] = proc.stderr.splitlines()
    for word in words:
        assert word in warning, warning
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")


def test_unwritable_record_warns_once_and_compiles(kernel, heads):
    blocker = kernel / "blocker"
    blocker.write_text("a file, not a directory")
    env = env_for(kernel, heads, MIRECC_RECORD=str(blocker / "decisions.jsonl"))
    proc = run([MIRECC, "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0
    [warning] = proc.stderr.splitlines()
    assert "record file" in warning and str(blocker) in warning
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")


def test_embedding_through_the_server(kernel, heads):
    """With the server allowed, the compile starts the per-user server (a
    private socket here), which runs the pipeline: the embedding is made there."""
    runtime = kernel / "run"
    runtime.mkdir(mode=0o700)
    env = env_for(kernel, heads, MIRECC_SERVER="1", XDG_RUNTIME_DIR=str(runtime))
    try:
        proc = run([MIRECC, "--explain=json", "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        [tu] = json.loads(proc.stdout)["translation_units"]
        assert tu["decisions"]
        assert all(d["reason"].endswith("module embedding server")
                   for d in tu["decisions"])
    finally:
        _stop_server(runtime / "mirecc" / socket_name())
    assert (kernel / "k.o").read_bytes() == clang_object(kernel, "k.cl")


def _stop_server(sock: Path) -> None:
    from mirecc.tu.server import ping
    reply = ping(sock)
    if reply is None:
        return
    os.kill(int(reply["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and ping(sock) is not None:
        time.sleep(0.1)


# ------------------------------------------------------------- unit level

def test_spec_languages_line_scan(tmp_path):
    cases = {
        "task: x\nlanguages: [cl]\n": {"cl"},
        "languages: [c, 'c++', \"cl\"]  # comment\ntask: x\n": {"c", "c++", "cl"},
        "task: x\nlanguages:\n  - cl\n  - c # trailing\nhead: h.onnx\n": {"cl", "c"},
        "languages:\n- cl\ntask: x\n": {"cl"},
        "task: x\n": None,                       # no key: every language
        "task: x\nlanguages: cl\n": None,        # not a list: every language
        "task: x\n  languages: [cl]\n": None,    # not top level
    }
    # what mirecc.tasks.opencl.offline.ship writes: a comment line, then yaml.safe_dump's block lists
    yaml = pytest.importorskip("yaml")
    dumped = "# Written by `mire bench devmap --write-heads DIR`; do not edit\n" + yaml.safe_dump(
        {"task": "opencl-device-mapping", "languages": ["cl"], "head": "head.onnx",
         "features": ["embedding", "log1p_transfer", "log1p_wgsize"],
         "trained_on": {"rows": 3}}, sort_keys=False)
    cases[dumped] = {"cl"}
    for text, expected in cases.items():
        path = tmp_path / "spec.yaml"
        path.write_text(text)
        got = spec_languages(str(path))
        assert (set(got) if got is not None else None) == expected, text


def test_heads_for_languages(tmp_path):
    for name, spec in {"ocl": "task: t\nlanguages: [cl]\n", "any": "task: t\n",
                       "cc": "task: t\nlanguages: [c, c++]\n"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "spec.yaml").write_text(spec)
    names = lambda langs: [s.name for s in heads_for_languages([str(tmp_path)], langs)]  # noqa: E731
    assert names({"cl"}) == ["any", "ocl"]
    assert names({"cpp-output"}) == ["any", "cc"]      # preprocessed C counts as C
    assert names({"c++-cpp-output"}) == ["any", "cc"]
    assert names({"c", "cl"}) == ["any", "cc", "ocl"]


def test_opencl_config_keys(tmp_path):
    (tmp_path / ".mirecc.yaml").write_text(
        "opencl_transfer: 1024\nopencl_wgsize: 64\nopencl_gpu: Fermi\n"
        "record: out/decisions.jsonl\nserver: false\n")
    config = load_config(str(tmp_path), environ={})
    assert (config.opencl_transfer, config.opencl_wgsize, config.opencl_gpu) == (1024, 64, "Fermi")
    assert config.record == str(tmp_path / "out" / "decisions.jsonl")
    assert config.server is False
    config = load_config(str(tmp_path), environ={"MIRECC_OPENCL_WGSIZE": "128",
                                                 "MIRECC_RECORD": "/r.jsonl",
                                                 "MIRECC_SERVER": "1"})
    assert (config.opencl_wgsize, config.record, config.server) == (128, "/r.jsonl", True)
    for bad in ("opencl_wgsize: 0\n", "opencl_transfer: -5\n", "opencl_wgsize: many\n",
                "opencl_transfer: true\n"):
        (tmp_path / ".mirecc.yaml").write_text(bad)
        with pytest.raises(ConfigError, match=bad.split(":")[0]):
            load_config(str(tmp_path), environ={})


def test_advisory_decisions_round_trip():
    decision = Decision(task="opencl-device-mapping", target="saxpy", value={"device": "GPU"},
                        default=None, confidence=0.75, reason="why", applied=False,
                        advisory=True)
    result = TUResult(None, [decision], ["other: reason"], ["not-applicable"])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == PIPELINE_SCHEMA == 3
    assert TUResult.from_dict(data) == result
    with pytest.raises(ValueError):
        TUResult.from_dict({**data, "schema": 1})


def _newer_clang() -> str | None:
    from mirecc.frontend.compiler import newest_clang_on_path
    newest = newest_clang_on_path(cxx=False)
    return newest if newest and os.path.realpath(newest) != os.path.realpath(CLANG) else None


@pytest.mark.skipif(_newer_clang() is None, reason="needs a clang other than clang-14")
def test_a_newer_driven_clang_gets_its_ir_re_emitted_for_the_encoder(kernel, heads):
    """The heads and the graph builder read clang-14 IR; a build driven by a
    newer clang (whose bitcode LLVM 14 cannot load) still gets predictions,
    from the TU emitted again by clang-14, and its own compiler's object."""
    newer = _newer_clang()
    env = env_for(kernel, heads, MIRECC_CC=newer)
    proc = run([MIRECC, "--explain", "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "5 decisions, 0 applied" in proc.stdout
    assert "IR re-emitted with clang-14 (the encoder's clang)" in proc.stdout
    subprocess.run([newer, "-O2", "-c", "k.cl", "-o", "ref.o"], cwd=kernel, check=True)
    assert (kernel / "k.o").read_bytes() == (kernel / "ref.o").read_bytes()


def test_the_shipped_heads_decide_for_a_kernel(kernel, tmp_path):
    """The heads in the repository's heads/ (made by mire bench --write-heads)
    load, match the shipped encoder and decide."""
    shipped = Path(__file__).resolve().parents[3] / "heads"
    if not (shipped / "devmap-amd" / "spec.yaml").is_file():
        pytest.skip("no shipped OpenCL heads")
    env = env_for(kernel, shipped)
    proc = run([MIRECC, "--explain=json", "-O2", "-c", "k.cl", "-o", "k.o"], kernel, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    platforms = sorted(d["value"]["platform"] for d in tu["decisions"]
                       if d["task"] == "opencl-device-mapping")
    assert [p.split()[0] for p in platforms] == ["AMD", "NVIDIA"]
    factors = [d["value"]["coarsening_factor"] for d in tu["decisions"]
               if d["task"] == "opencl-thread-coarsening"]
    assert len(factors) == len(GPUS) and set(factors) <= {1, 2, 4, 8, 16, 32}
