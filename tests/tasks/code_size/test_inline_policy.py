"""The inlining policy in the build: with size_inline, the code-size head
reads each call site's statistics from the per-TU context (the IR's own and
LLVM's -Oz costs), runs the policy's forest, and builds its decisions as
the first candidate of the size search, kept only where its object is the
smallest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from size_helpers import SOURCE

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# SOURCE's call sites whose callee it defines: main's 12 calls of the AXPY
# functions (printf is declared only)
SITES = {f"main:call{k}" for k in range(12)}


def policy_heads(tmp_path: Path, saves: tuple[float, float], margin: float = 0.005,
                 gate: float | None = None) -> Path:
    """A code-size head of one library pipeline and an inlining policy whose
    forest (fitted and exported as ``mire size-inline-judge --write-policy``
    ships it) predicts that forcing a site inline and out of line save
    ``saves`` (log bytes), whatever the site; ``gate``: an object gate that
    gives the library pipeline that chance (a fixed intercept)."""
    import numpy as np

    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes
    from mirecc.tasks.code_size.inline_features import ALL_NAMES

    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, len(ALL_NAMES))).astype(np.float32)
    Y = np.tile(saves, (40, 1)) + rng.normal(scale=1e-3, size=(40, 2))
    forest = fit_forest(X, Y, ForestConfig(trees=5))
    (root / "code-size" / "policy.onnx").write_bytes(onnx_bytes(forest, len(ALL_NAMES)))
    (root / "code-size" / "spec.yaml").write_text(
        "task: code-size\nlanguages: [c, c++]\npipelines:\n  14: [\"default<Oz>\"]\n"
        f"inline_policy:\n  llvm: 14\n  head: policy.onnx\n  features: {len(ALL_NAMES)}\n"
        f"  margin: {margin}\n")
    if gate is not None:
        from mirecc.tasks.code_size.build import GATE_FEATURES

        n = len(GATE_FEATURES)
        with open(root / "code-size" / "spec.yaml", "a") as fh:
            fh.write(f"object_gate:\n  14:\n    threshold: 0.5\n    mean: {[0.0] * n}\n"
                     f"    scale: {[1.0] * n}\n    pipelines:\n"
                     f"      default<Oz>: {[gate] + [0.0] * n}\n")
    return root


def explain(tmp_path: Path, heads: Path, **settings) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(heads),
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"), MIRECC_SIZE_SEARCH="2",
                       MIRECC_SIZE_BUDGET="2", **settings)
    (tmp_path / "p.c").write_text(SOURCE)
    proc = subprocess.run([MIRECC, "--explain=json", "-Os", "-c", "p.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_policys_decisions_are_built_first_and_kept_only_when_smallest(tmp_path):
    """A policy that predicts every site smaller out of line: its candidate
    is built first, with all 12 sites of SOURCE marked noinline (-Os inlines
    all 12: another object, which shows the marks reached the inliner), and
    the object kept is the smallest of the three; --explain names the
    forced sites."""
    from mirecc.tasks.code_size.build import object_sizes

    data = explain(tmp_path, policy_heads(tmp_path, (-0.2, 0.1)), MIRECC_SIZE_INLINE="1")
    [decision] = data["translation_units"][0]["decisions"]
    assert decision["value"]["verify"] == ["inline-policy", "default<Oz>"]
    assert decision["value"]["calls"] == {site: "noinline" for site in SITES}
    assert "the inlining policy forces 12 of 13 call sites (main:call0 noinline" \
        in decision["reason"]
    verified = data["verified"]["code-size"]
    sizes = verified["sizes"]
    assert set(sizes) == {"-Os", "inline-policy", "default<Oz>"}
    assert verified["text"]["inline-policy"] != verified["text"]["-Os"]
    winner = verified["winner"]
    assert sizes[winner] == min(sizes.values())
    from mirecc.taskapi.config import Config
    from mirecc.tu import stats

    counts = stats.read(Config(cache_dir=str(tmp_path / "cache")))
    assert counts["verified.code-size.inline-policy"] == 1
    assert counts.get("verified.code-size.inline-policy-kept", 0) == int(winner == "inline-policy")
    # mire stats lists them as the task declares them
    shown = stats.render(counts, "stats")
    assert "the inlining policy's candidate built" in shown
    assert object_sizes(str(tmp_path / "ours.o"))[0] == sizes[winner]


def test_off_by_default_and_a_policy_that_forces_nothing_builds_nothing(tmp_path):
    heads = policy_heads(tmp_path, (-0.2, 0.1))
    [decision] = explain(tmp_path / "off", heads)["translation_units"][0]["decisions"]
    assert decision["value"] == {"verify": ["default<Oz>"]}
    # predicted savings under the margin: no site forced, no candidate of its own
    (tmp_path / "quiet").mkdir()
    quiet = policy_heads(tmp_path / "quiet", (0.001, 0.001))
    data = explain(tmp_path / "quiet", quiet, MIRECC_SIZE_INLINE="1")
    [decision] = data["translation_units"][0]["decisions"]
    assert decision["value"] == {"verify": ["default<Oz>"]}
    assert "the inlining policy forces none of 13 call sites" in decision["reason"]


def test_a_policy_for_other_statistics_is_said_and_the_library_still_built(tmp_path):
    heads = policy_heads(tmp_path, (-0.2, 0.1))
    spec = heads / "code-size" / "spec.yaml"
    spec.write_text(spec.read_text().replace("features: ", "features: 1"))
    data = explain(tmp_path, heads, MIRECC_SIZE_INLINE="1")
    [decision] = data["translation_units"][0]["decisions"]
    assert decision["value"] == {"verify": ["default<Oz>"]}
    assert "the inlining policy did not run" in decision["reason"]
    assert "ship it again: mire size-inline-judge --write-policy" in decision["reason"]


def test_call_site_decisions_join_the_decisions_file_other_tasks_wrote(tmp_path):
    from mirecc.plugin.decisions import with_calls, write_decisions
    from mirecc.taskapi.config import Config

    config = Config(cache_dir=str(tmp_path / "cache"))
    theirs = write_decisions({"version": 1, "modules": {"p.c": {"loops": {"f:1": {"vf": 4}}}}},
                             tmp_path / "cache")
    flags = ["-O2", f"-mirecc-loop-decisions={theirs}", "-fsomething"]
    joined = with_calls(flags, {"main:call0": "noinline"}, CLANG, config)
    assert joined[0] == "-O2" and joined[2] == "-fsomething" and joined[1] != flags[1]
    document = json.loads(Path(joined[1].split("=", 1)[1]).read_text())
    assert document["modules"] == {"p.c": {"loops": {"f:1": {"vf": 4}}},
                                   "*": {"calls": {"main:call0": "noinline"}}}


def test_the_object_gate_judges_the_library_not_the_policy(tmp_path):
    """An object gate that expects the library's pipeline not to gain:
    without the policy the TU's IR is not read and nothing is built; with
    it, the IR is read and the policy's candidate built, the library's
    still skipped by the gate."""
    from mirecc.taskapi.config import Config
    from mirecc.tu import stats

    heads = policy_heads(tmp_path, (-0.2, 0.1), gate=-8.0)
    (tmp_path / "p.c").write_text(SOURCE)
    for side, inline in (("off", "0"), ("on", "1")):
        env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(heads),
                           MIRECC_CACHE_DIR=str(tmp_path / side), MIRECC_SIZE_SEARCH="2",
                           MIRECC_SIZE_BUDGET="2", MIRECC_SIZE_INLINE=inline)
        subprocess.run([MIRECC, "-Os", "-c", "p.c", "-o", f"{side}.o"], cwd=tmp_path, env=env,
                       check=True, timeout=300)
        counts = stats.read(Config(cache_dir=str(tmp_path / side)))
        if side == "off":
            assert counts["verified.code-size.predicted-no-gain"] == 1
            assert "tus.seen" not in counts          # the gate answered before the IR
        else:
            assert counts.get("verified.code-size.predicted-no-gain", 0) == 0
            assert counts["tus.seen"] == 1 and counts["verified.code-size.inline-policy"] == 1
    data = explain(tmp_path / "explained", heads, MIRECC_SIZE_INLINE="1")
    verified = data["verified"]["code-size"]
    assert set(verified["sizes"]) == {"-Os", "inline-policy"}
    assert "object gate" in verified["skipped"]["default<Oz>"]
