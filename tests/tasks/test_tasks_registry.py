"""The task interface and its one registry: every task declares its name,
languages, settings, when it applies and how it injects; the configuration,
``--mirecc-help`` and the cache key are generated from the declarations; the
generic ML step imports no task by name; ``mire stats`` counts what happened
with stable reason codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

REPO = Path(__file__).resolve().parents[2]
CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
MIRE = str(Path(sys.executable).with_name("mire"))
needs_clang = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")


def test_every_registered_task_is_declared_whole():
    from mirecc.taskapi.api import Task
    from mirecc.taskapi.registry import TASK_MODULES, tasks

    found = tasks()
    assert set(found) == {"loop-vectorize", "opencl-device-mapping",
                          "opencl-thread-coarsening", "code-size", "openmp", "numa",
                          "cuda-block", "loop-nests"}
    hooks = ("injection", "plugin_entry", "explain", "compile_step", "link_step",
             "profile_kind")
    for name, task in found.items():
        assert isinstance(task, Task) and task.name == name and task.languages
        # no head yet: only a task whose decisions a profile can give
        assert callable(task.head_class()) if task.has("head_class") \
            else task.has("profile_kind"), name
        assert any(task.has(h) for h in hooks) or task.applied_when is None, name
        if task.has("injection"):
            injection = task.injection()
            # one function, or several (the plugin's and flags of its own)
            assert callable(injection) or (
                isinstance(injection, tuple) and injection and all(map(callable, injection))), name
        # a task that can be forced says what forcing it measured
        assert not task.applied_when or len(task.measured) > 40, name
        if task.has("profile_kind"):
            kind = task.profile_kind()
            assert kind.front_end in ("mirecc", "mirecc-nvcc") and kind.noun, name
        # its steps are the interface's kinds: a compile step, a link step
        if task.has("compile_step"):
            from mirecc.taskapi.api import CompileStep

            assert isinstance(task.compile_step(), CompileStep), name
        if task.has("link_step"):
            from mirecc.taskapi.api import LinkStep

            assert isinstance(task.link_step(), LinkStep), name
        # a part of mire run is the launcher's kind; a suite loads when it runs
        if task.has("run_part"):
            from mirecc.launch.part import RunPart

            assert isinstance(task.run_part(), RunPart), name
        assert all(callable(s.load) and s.summary for s in task.bench), name
        # an early step needs the gate
        if task.has("compile_step"):
            step = task.compile_step()
            assert not step.has("early") or step.has("gate"), name
        # each of its reason codes is declared once, with its words
        assert all(code and words for code, words in task.reasons.items()), name
    # a hook the base does not know is a typo, not a hook
    for task in found.values():
        own = {n for n in vars(type(task)) if not n.startswith("_")}
        assert own <= set(vars(Task)), (task.name, own - set(vars(Task)))
    # one folder per task module, with an offline part
    for module in TASK_MODULES:
        folder = REPO / module.replace(".", "/")
        assert (folder / "__init__.py").is_file() and (folder / "offline").is_dir()


def test_task_declarations_import_nothing_heavy():
    """The driver reads declarations on every compile: a fresh interpreter
    importing the registry loads no numpy, yaml, onnxruntime or llvmlite."""
    code = ("import sys; from mirecc.taskapi.registry import tasks; tasks(); "
            "print(sorted(m for m in ('numpy', 'yaml', 'onnxruntime', 'llvmlite') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_task_settings_reach_the_configuration(tmp_path):
    from mirecc.taskapi.config import ConfigError, load_config

    (tmp_path / ".mirecc.yaml").write_text("apply_loop_decisions: true\nopencl_gpu: Tahiti\n")
    config = load_config(str(tmp_path), environ={"MIRECC_OPENCL_WGSIZE": "64"})
    assert (config.apply_loop_decisions, config.opencl_gpu, config.opencl_wgsize) == \
        (True, "Tahiti", 64)
    (tmp_path / ".mirecc.yaml").write_text("apply_loop_decision: true\n")
    with pytest.raises(ConfigError, match="unknown key 'apply_loop_decision'"):
        load_config(str(tmp_path), environ={})


def test_mirecc_help_lists_every_setting_and_task():
    from mirecc.taskapi.config import all_settings
    from mirecc.taskapi.registry import tasks

    out = subprocess.run([MIRECC, "--mirecc-help"], capture_output=True, text=True,
                         check=True).stdout
    for setting in all_settings():
        assert setting.key in out and (setting.env is None or setting.env in out)
    for name in tasks():
        assert f"Task {name}" in out
    # mirecc-nvcc's task: its head applied only with its setting
    assert "Task cuda-block (cuda; applied when apply_cuda_block is true)" in out
    # which heads read the encoder, from their spec.yaml's features
    blocks = {b.split(" ", 1)[0]: b for b in out.split("\nTask ")[1:]}
    assert "encoder: read by its head (coarsening:" in blocks["opencl-thread-coarsening"]
    assert "encoder: not read" in blocks["loop-nests"]


def test_cache_key_follows_the_task_settings():
    from mirecc.tu.cache import pipeline_key
    from mirecc.taskapi.config import Config

    assert pipeline_key(Config(), {"c"}) == pipeline_key(Config(), {"c"})
    assert pipeline_key(Config(), {"c"}) != pipeline_key(Config(apply_loop_decisions=True),
                                                         {"c"})
    # a record runs every head (below): its results are kept apart
    assert pipeline_key(Config(), {"c"}) != pipeline_key(Config(record="r.jsonl"), {"c"})


def test_only_heads_with_a_use_run(tmp_path):
    """A head whose task this build neither applies nor records nor explains,
    and that no decisions profile reads, is not run: its decisions would
    change nothing (an unused loop-vectorize head once cost an encoder run
    per TU when only another task was on)."""
    from types import SimpleNamespace

    from mirecc.taskapi.config import Config
    from mirecc.tu.pipeline import Pipeline
    from mirecc.taskapi.registry import HeadSpec

    ran = []

    class Head:
        name = "probe"

        def applies_to(self, request):
            return True

        def rank(self, ctx):
            ran.append(ctx.want_summary)
            return []

        def decide(self, ctx, rankings):
            return []

    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "spec.yaml").write_text("task: loop-vectorize\nlanguages: [c]\n")
    pipeline = Pipeline([Head()], None, [str(tmp_path)], specs=[
        HeadSpec("probe", str(tmp_path / "probe"))])
    request = SimpleNamespace(opt_level="3", language="c")

    def run(config, explain=False):
        pipeline.run(SimpleNamespace(request=request, config=config, want_summary=explain,
                                     summary=None))
    run(Config())
    assert ran == []
    run(Config(), explain=True)
    run(Config(record=str(tmp_path / "r.jsonl")))
    run(Config(profile=str(tmp_path / "p.profile")))
    run(Config(apply_loop_decisions=True))
    assert ran == [True, False, False, False]


@needs_clang
def test_a_data_only_tu_gives_no_warning(tmp_path):
    """A TU of tables and no functions (bzip2's crctable.c) with the shipped
    loop head in use: no warning, clang's object, the reason counted."""
    (tmp_path / "table.c").write_text("const unsigned crc[4] = {1u, 2u, 3u, 4u};\n")
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_APPLY_LOOPS="1",
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    del env["MIRECC_HEADS_DIR"]         # the shipped heads
    proc = subprocess.run([MIRECC, "-O2", "-c", "table.c", "-o", "ours.o"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    subprocess.run([CLANG, "-O2", "-c", "table.c", "-o", "ref.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "ref.o").read_bytes()
    data = json.loads(subprocess.run([MIRE, "stats", "--json"], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, check=True).stdout)
    assert data["skip.no-functions"] == 1 and data["tus.seen"] == 1


@needs_clang
def test_stats_count_calls_tus_and_reasons(tmp_path):
    (tmp_path / "a.c").write_text("int g(const int *a, int n) { int s = 0; "
                                  "for (int i = 0; i < n; i++) s += a[i]; return s; }\n")
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CACHE_DIR=str(tmp_path / "cache"))

    def mirecc(*args):
        subprocess.run([MIRECC, *args], cwd=tmp_path, env=env, capture_output=True,
                       check=True, timeout=120)

    mirecc("-O0", "-c", "a.c")                       # not optimised
    mirecc("-O2", "-c", "a.c")                       # nothing reads the IR (no heads)
    mirecc("--explain", "-O2", "-c", "a.c")          # seen: no heads, computed
    mirecc("--explain", "-O2", "-c", "a.c")          # seen again: from the cache
    mirecc("--version")
    data = json.loads(subprocess.run([MIRE, "stats", "--json"], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, check=True).stdout)
    assert data == {"calls": 5, "passthrough.not-optimised": 1, "passthrough.no-use": 1,
                    "passthrough.not-compile": 1, "tus.seen": 2, "tus.cached": 1,
                    "tus.in-process": 1, "tus.split": 2, "skip.no-heads": 2}
    text = subprocess.run([MIRE, "stats"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=True).stdout
    assert "translation units whose IR was read" in text and "no-heads" in text
    assert [ln.split()[-1] for ln in text.splitlines()
            if ln.strip().startswith(("translation units", "without a decision"))] == ["2", "2"]
    subprocess.run([MIRE, "stats", "--zero"], cwd=tmp_path, env=env, check=True)
    assert json.loads(subprocess.run([MIRE, "stats", "--json"], cwd=tmp_path, env=env,
                                     capture_output=True, text=True).stdout) == {}


def test_explain_prints_reason_codes(tmp_path):
    from mirecc.tu.explain import render_text

    data = {"mirecc_version": "x", "compiler": "clang", "compiler_chosen": "configured",
            "fallback": None, "reason": "", "skipped": [],
            "translation_units": [{"source": "a.c", "language": "c", "opt_level": "2",
                                   "ir": {"bytes": 1, "sha256": "0" * 64}, "cache": "miss",
                                   "captured": None, "seen": None, "decisions": [],
                                   "no_decision_reasons": ["loop-vectorize: no loops"],
                                   "reason_codes": ["no-loops"]}]}
    text = render_text(data)
    assert "why: [no-loops] loop-vectorize: no loops" in text
    assert "compiler chosen: configured" in text


def test_a_task_has_the_hooks_it_overrides_and_only_those():
    """``Task.has`` answers from the class: the generic path asks it before
    calling a hook (a build step, a gate), so a task without one is never
    treated as having it."""
    from mirecc.taskapi.records import Decision, TUResult
    from mirecc.taskapi.registry import tasks
    from mirecc.tu.mlpath import TUReport, verifies

    from mirecc.taskapi.api import CompileStep, LinkStep

    found = tasks()
    size, loops = found["code-size"], found["loop-vectorize"]
    assert all(size.has(h) for h in ("compile_step", "link_step", "head_class"))
    # loop-vectorize and loop-nests link the adaptive runtime (adapt_loops, for
    # their functions' versions): one step they share, its setting declared once
    nests = found["loop-nests"]
    assert loops.has("link_step") and not loops.has("compile_step")
    assert nests.has("link_step") and not nests.has("compile_step")
    assert nests.link_step() is loops.link_step()
    from mirecc.taskapi.config import all_settings

    assert [s.key for s in all_settings()].count("adapt_loops") == 1
    assert loops.has("injection") and loops.has("explain") and not size.has("injection")
    assert all(size.compile_step().has(m) for m in ("verify", "gate", "early"))
    # a task's steps answer only what they override: the CUDA planner is no build step
    cuda = found["cuda-block"].compile_step()
    assert not any(cuda.has(m) for m in ("verify", "gate", "early"))
    # the defaults are the base's: nothing applied, nothing changed
    assert CompileStep().gate("x.o", None, "clang") is None
    assert CompileStep().early(None, None, ".") is None
    assert LinkStep().arguments(["-fopenmp"], None, "clang") == []
    assert not LinkStep().wants(["-flto"], None)
    assert found["opencl-device-mapping"].injection() is None

    def report(task):
        decision = Decision(task=task, target="f:1", value={"x": 1}, default=None,
                            confidence=1.0, reason="", applied=True)
        return TUReport("a.c", "c", "3", "0" * 64, 1, TUResult(None, [decision]), "miss")

    # a direct-mode manifest waits for a build step only where one was applied
    assert verifies(report("code-size")) and not verifies(report("loop-vectorize"))
