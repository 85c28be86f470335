"""The OpenMP head in a real build: ``mirecc -O2 -fopenmp`` with a head made
here (trained to always answer one configuration), the real pass plugin
rewriting the runtime calls, the program run against plain clang-14's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
LIBOMP = "/usr/lib/llvm-14/lib"

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# region 1 (line 8): no clauses, the head decides both; region 2 (line 17):
# the source fixes team size and schedule, nothing may change
PROGRAM = """\
#include <omp.h>
#include <stdio.h>

int main(void) {
  static long a[20000];
  long sum = 0;
  int team1 = 0, team2 = 0;
#pragma omp parallel
  {
    if (omp_get_thread_num() == 0) team1 = omp_get_num_threads();
#pragma omp for reduction(+:sum)
    for (int i = 0; i < 20000; i++) {
      a[i] = (long)i * i % 1009;
      sum += a[i];
    }
  }
#pragma omp parallel for num_threads(2) schedule(static)
  for (int i = 0; i < 20000; i++) {
    if (i == 0) team2 = omp_get_num_threads();
    a[i] += 1;
  }
  long check = 0;
  for (int i = 0; i < 20000; i++) check += a[i];
  printf("%ld %ld\\n", sum, check);
  fprintf(stderr, "teams %d %d\\n", team1, team2);
  return 0;
}
"""
CLASSES = ["t1-static-default", "t1-dynamic-8", "t2-guided-default"]


def make_head(root: Path, answer: str, cores: int | None = None, min_gain: float = 0.0) -> Path:
    """An OpenMP head whose every tree predicts a gain of 0.5 (log) for
    ``answer`` and a loss for the other configurations ('default': a loss
    for all)."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    pytest.importorskip("onnx")
    import yaml
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.util.modelfiles import load_model
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes
    from mirecc.ir.region_stats import NAMES

    directory = root / "openmp"
    directory.mkdir(parents=True)
    X = np.random.default_rng(0).normal(size=(8, len(NAMES))).astype(np.float32)
    Y = np.full((8, len(CLASSES)), -0.5)
    if answer != "default":
        Y[:, CLASSES.index(answer)] = 0.5
    (directory / "head.onnx").write_bytes(onnx_bytes(fit_forest(X, Y, ForestConfig(trees=5)),
                                                     len(NAMES)))
    spec = {"task": "openmp", "languages": ["c", "c++"], "head": "head.onnx",
            "encoder": load_model(SHIPPED_MODEL_DIR).cache_version, "features": ["region_statistics"], "region_statistics": NAMES,
            "classes": CLASSES, "cores": cores or os.cpu_count(),
            "quantile": 0.3, "min_gain": min_gain}
    (directory / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def heads_t1_dynamic(tmp_path_factory) -> Path:
    return make_head(tmp_path_factory.mktemp("heads"), "t1-dynamic-8")


@pytest.fixture
def program(tmp_path, llvm_plugin) -> Path:
    _, _, plugin = llvm_plugin(14)
    (tmp_path / "p.c").write_text(PROGRAM)
    (tmp_path / "plugin").write_text(str(plugin))
    return tmp_path


def env_for(tmp_path: Path, heads_dir: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
                                     "MIRECC_HEADS_DIR": str(heads_dir),
                                     "MIRECC_PLUGIN": (tmp_path / "plugin").read_text(),
                                     "MIRECC_SERVER": "0",
                                     "MIRECC_APPLY_OPENMP": "1", **extra})


def run(cmd, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def build_and_run(cwd: Path, compiler: list[str], env: dict, name: str,
                  run_env: dict | None = None) -> tuple[str, str, str]:
    """(program stdout, its stderr, the object's undefined symbols)."""
    compile_ = run([*compiler, "-O2", "-fopenmp", "-c", "p.c", "-o", f"{name}.o",
                    "-Rpass=mirecc-loophints"], cwd, env)
    assert compile_.returncode == 0, compile_.stderr
    assert "mirecc:" not in compile_.stderr, compile_.stderr
    build_and_run.remarks = compile_.stderr
    link = run([CLANG, "-fopenmp", f"{name}.o", "-o", name, f"-L{LIBOMP}",
                f"-Wl,-rpath,{LIBOMP}"], cwd, env)
    assert link.returncode == 0, link.stderr
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_"))}
    proc = subprocess.run([str(cwd / name)], capture_output=True, text=True, timeout=60,
                          env={**clean, **(run_env or {})})
    assert proc.returncode == 0, proc.stderr
    symbols = subprocess.run(["nm", "-u", str(cwd / f"{name}.o")], capture_output=True,
                             text=True, check=True).stdout
    return proc.stdout, proc.stderr, symbols


def test_region_decision_reaches_the_binary_and_the_output_stays(program, heads_t1_dynamic):
    plain_out, plain_err, plain_syms = build_and_run(program, [CLANG], os.environ.copy(), "plain")
    env = env_for(program, heads_t1_dynamic)
    out, err, syms = build_and_run(program, [MIRECC], env, "ours")
    assert out == plain_out                                 # same results
    cores = os.cpu_count()
    assert plain_err.strip() == f"teams {cores} 2"
    # region 1 runs one thread; region 2's num_threads(2) clause wins
    assert err.strip() == "teams 1 2"
    # the static loop became a dispatch loop (dynamic, chunk 8); plain clang has none
    assert "__kmpc_dispatch_init_4" in syms and "__kmpc_dispatch_init_4" not in plain_syms
    assert "__kmpc_push_num_threads" in syms
    # the plugin changed region 1 and its loop only: region 2's loop keeps its
    # schedule(static), which compiles as no clause (the head read the pragma)
    remarks = [ln for ln in build_and_run.remarks.splitlines() if "[-Rpass=mirecc-loophints]" in ln]
    assert len(remarks) == 2, remarks
    assert any("parallel main:0: threads=1" in r for r in remarks)
    assert any("worksharing .omp_outlined.:0: schedule=dynamic" in r for r in remarks)


def test_omp_num_threads_at_run_time_wins(program, heads_t1_dynamic):
    env = env_for(program, heads_t1_dynamic)
    out, err, _ = build_and_run(program, [MIRECC], env, "ours", run_env={"OMP_NUM_THREADS": "3"})
    assert err.strip() == "teams 3 2"


def test_explain_lists_each_region_with_line_default_and_confidence(program, heads_t1_dynamic):
    env = env_for(program, heads_t1_dynamic)
    proc = run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o"],
               program, env)
    assert proc.returncode == 0, proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    regions = {d["target"]: d for d in tu["decisions"] if d["task"] == "openmp"}
    # region 2 has team size and schedule fixed by the source: nothing to decide
    assert set(regions) == {"main:0"}, regions
    d = regions["main:0"]
    assert d["reason"].startswith("p.c:8: parallel region main:0: 1 thread, dynamic chunk 8")
    assert d["value"]["threads"] == 1 and d["value"]["schedule"] == "dynamic"
    assert d["value"]["chunk"] == 8 and len(d["value"]["loops"]) == 1
    assert d["default"] == {"threads": os.cpu_count(), "schedule": "static", "chunk": None}
    assert d["applied"] and d["confidence"] == 1.0
    text = run([MIRECC, "--explain", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o"],
               program, env).stdout
    assert "p.c:8:" in text and "openmp" in text


def test_decisions_are_only_recorded_unless_applying_is_on(program, heads_t1_dynamic):
    env = env_for(program, heads_t1_dynamic, MIRECC_APPLY_OPENMP="0")
    out, err, syms = build_and_run(program, [MIRECC], env, "ours")
    assert err.strip() == f"teams {os.cpu_count()} 2"
    assert "__kmpc_dispatch_init_4" not in syms
    proc = run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o"],
               program, env)
    [d] = [d for d in json.loads(proc.stdout)["translation_units"][0]["decisions"]
           if d["task"] == "openmp"]
    assert not d["applied"] and d["advisory"] and "MIRECC_APPLY_OPENMP=1" in d["reason"]


def test_no_gain_leaves_the_runtime_default(program, tmp_path_factory):
    heads = make_head(tmp_path_factory.mktemp("heads"), "default", min_gain=0.05)
    env = env_for(program, heads)
    _, err, syms = build_and_run(program, [MIRECC], env, "ours")
    assert err.strip() == f"teams {os.cpu_count()} 2" and "__kmpc_dispatch_init_4" not in syms
    proc = run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o"],
               program, env)
    [d] = [d for d in json.loads(proc.stdout)["translation_units"][0]["decisions"]
           if d["task"] == "openmp"]
    assert d["value"] == {} and not d["applied"] and "default stays" in d["reason"]


def test_a_head_timed_on_another_machine_or_a_tu_without_openmp_decides_nothing(
        program, tmp_path_factory):
    heads = make_head(tmp_path_factory.mktemp("heads"), "t1-dynamic-8",
                      cores=os.cpu_count() + 1)
    env = env_for(program, heads)
    proc = run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o"],
               program, env)
    [tu] = json.loads(proc.stdout)["translation_units"]
    assert not [d for d in tu["decisions"] if d["task"] == "openmp"]
    assert f"trained on a {os.cpu_count() + 1}-core machine" in json.dumps(tu)
    proc = run([MIRECC, "--explain=json", "-O2", "-c", "p.c", "-o", "p.o",
                "-Wno-unknown-pragmas"], program, env_for(program, heads))
    assert proc.returncode == 0
    assert "applies to TUs built with -fopenmp" in proc.stdout


def test_adaptive_sites_carry_the_heads_order_machine_relative(program, tmp_path_factory):
    """adapt_openmp: a head timed on another machine still ranks (its
    configurations as shares of the cores), the first K candidates go into
    the object in its order, the site keyed by the region's digest; the
    region whose team size and schedule the source fixes is no site."""
    cores = os.cpu_count() + 2
    heads = make_head(tmp_path_factory.mktemp("heads"), "t1-dynamic-8", cores=cores)
    env = env_for(program, heads, MIRECC_APPLY_OPENMP="0", MIRECC_ADAPT_OPENMP="1",
                  MIRECC_ADAPT_CANDIDATES="2")
    proc = run([MIRECC, "--explain=json", "-O2", "-fopenmp", "-c", "p.c", "-o", "p.o",
                "-Rpass=mirecc-loophints"], program, env)
    assert proc.returncode == 0, proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    [d] = [d for d in tu["decisions"] if d["task"] == "openmp"]
    assert d["target"] == "main:0" and d["applied"] and not d["advisory"]
    v = d["value"]
    # the trees promise t1-dynamic-8 most: one thread (its schedules are one
    # configuration), then the others by their (equal) scores
    assert v["adapt"][0] == "one-static-default" and len(v["adapt"]) == 2
    assert "all-static-default" not in v["adapt"]     # the program's own: always there
    assert len(v["key"]) == 16 and v["name"] == "p.c main:0" and len(v["loops"]) == 1
    assert "adaptive site" in d["reason"]
    nm = subprocess.run(["nm", str(program / "p.o")], capture_output=True, text=True).stdout
    assert " w __mirecc_adapt_begin" in nm and " w __mirecc_adapt_end" in nm
    # the same region digest as a decisions profile's (mire tune can seed the store)
    from mirecc.ir.text import disassemble, function_digests
    from mirecc.tasks.openmp.profile import region_digest
    bc = subprocess.run([CLANG, "-O2", "-fopenmp", "-Rpass=mirecc-loophints", "-c",
                         "-emit-llvm", "-Xclang", "-disable-llvm-passes", "p.c", "-o", "-"],
                        cwd=program,
                        capture_output=True, check=True).stdout
    digests = function_digests(disassemble(bc, "p.c"))
    outlined = v["loops"][0].rsplit(":", 1)[0]
    assert v["key"] == region_digest(digests, "main", outlined)


def test_region_statistics_of_a_known_program(tmp_path):
    from mirecc.ir.region_stats import NAMES, region_statistics
    from mirecc.ir.regions import emit_ir, program_sites

    (tmp_path / "p.c").write_text(PROGRAM)
    text = emit_ir(tmp_path / "p.c", CLANG, ["-O2", "-fopenmp"])
    # the sites with the source's clauses marked, as the head and the trainer take them
    stats = region_statistics(text, program_sites(tmp_path / "p.c", CLANG, ["-O2", "-fopenmp"]))
    assert set(stats) == {"main:0", "main:1"}
    first, second = (dict(zip(NAMES, stats[r])) for r in ("main:0", "main:1"))
    assert first["worksharing_loops"] == 1 and first["explicit_loops"] == 0
    assert first["reductions"] >= 1 and first["threads_fixed"] == 0
    assert second["explicit_loops"] == 1 and second["threads_fixed"] == 1
    assert first["loops"] >= 1 and first["log_max_constant"] > 10    # the 20000 bound
    assert all(0 <= first[k] <= 1 for k in NAMES if k.startswith("share_"))


def test_loop_and_openmp_decisions_share_one_decisions_file():
    from mirecc.taskapi.records import Decision
    from mirecc.plugin.decisions import module_entries
    from mirecc.tasks.openmp.head import openmp_plugin_entry

    region = Decision(task="openmp", target="main:0", value={
        "threads": 1, "schedule": "dynamic", "chunk": 8, "loops": [".omp_outlined.:0"],
        "threads_fixed": False}, default=None, confidence=1.0, reason="", applied=True)
    fixed = Decision(task="openmp", target="main:1", value={
        "threads": 1, "schedule": "guided", "chunk": None, "loops": ["f:0"],
        "threads_fixed": True}, default=None, confidence=1.0, reason="", applied=True)
    entry = openmp_plugin_entry([region, fixed])
    assert entry == {"parallel": {"main:0": {"threads": 1}},
                     "worksharing": {".omp_outlined.:0": {"schedule": "dynamic", "chunk": 8},
                                     "f:0": {"schedule": "guided"}}}
    # each task gives its part of the source's entry (Task.plugin_entry)
    loop = Decision(task="loop-vectorize", target="f:3", value={"vectorize.width": 4},
                    default=None, confidence=1.0, reason="", applied=True)
    modules = module_entries({"a.c": [loop, region, fixed], "b.c": []})
    assert modules == {"a.c": {"loops": {"f:3": {"vectorize.width": 4}}, "openmp": entry}}


# the staged timing of the tune: an object other than the baseline's runs faster
TUNE_RUN = """#!/bin/sh
[ -f baseline.o ] || cp p.o baseline.o
./prog
if cmp -s p.o baseline.o; then sleep 0.4; else sleep 0.1; fi
"""


def test_mire_tune_keeps_a_region_configuration_and_the_profile_applies_it(program,
                                                                        heads_t1_dynamic):
    """mire tune tries the OpenMP head's ranked configurations for the one
    region the source leaves open (only the run's timing is staged); the
    profile it writes makes a later build apply the kept configuration
    without MIRECC_APPLY_OPENMP, and an edit of the region's body drops it."""
    from mirecc.taskapi.profile import read_profile

    mire = str(Path(MIRECC).with_name("mire"))
    (program / "run.sh").write_text(TUNE_RUN)
    (program / "run.sh").chmod(0o755)
    env = env_for(program, heads_t1_dynamic, MIRECC_APPLY_OPENMP="0")
    # the flags of build_and_run's compile: -Rpass adds line tables, with which
    # clang outlines a region differently (a .omp_outlined._debug__ function)
    build = (f"{MIRECC} -O2 -fopenmp -c p.c -o p.o -Rpass=mirecc-loophints && "
             f"{CLANG} -fopenmp p.o -o prog "
             f"-L{LIBOMP} -Wl,-rpath,{LIBOMP}")
    proc = run([mire, "tune", "--build", build, "--run", "./run.sh", "--budget", "6",
                "--repeats", "2", "--time-profile", "none"], program, env)
    assert proc.returncode == 0, proc.stderr
    assert "1 openmp site(s) to try" in proc.stderr and "loop-vectorize site" not in proc.stderr
    assert "1 decision(s) kept" in proc.stdout
    [entry] = read_profile(str(program / "mirecc.profile"))
    assert (entry.task, entry.target) == ("openmp", "main:0")
    assert entry.value == {"threads": 1, "schedule": "dynamic", "chunk": 8}  # the head's first

    with_profile = {**env, "MIRECC_PROFILE": str(program / "mirecc.profile")}
    out, err, syms = build_and_run(program, [MIRECC], with_profile, "profiled")
    assert "parallel main:0: threads=1" in build_and_run.remarks
    assert "__kmpc_dispatch_init_4" in syms
    plain_out, _, _ = build_and_run(program, [CLANG], os.environ.copy(), "plain")
    assert out == plain_out and err.strip() == "teams 1 2"

    # the region's body changes: its outlined function's digest with it
    (program / "p.c").write_text(PROGRAM.replace("% 1009", "% 1013"))
    _, err, _ = build_and_run(program, [MIRECC], with_profile, "edited")
    assert err.strip() == f"teams {os.cpu_count()} 2"
    assert "parallel main:0" not in build_and_run.remarks
