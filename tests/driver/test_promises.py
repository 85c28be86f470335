"""mirecc's two first promises, checked with the shipped heads installed and
on TUs that show the failure modes:

- nothing changes unless a decision is applied: a compile whose IR a head
  reads and where nothing applies gives clang's object byte for byte, also
  where compiling from bitcode would renumber LLVM's private globals
  (``printf("...\\n")`` turned into ``puts``, string switch tables);
- nothing is applied or recorded without the user's setting: no
  ``.mirecc.numa`` section unless ``record_numa`` (and never for another
  machine without ``numa_any_machine``), ``--explain`` never changes the
  object, and a decision whose compile equals clang's object counts as the
  compiler's own choice, not as applied.

Every test checks that the ML path really ran (its counters), so none can
pass by mirecc only handing the call to clang.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

MIRECC = str(Path(sys.executable).with_name("mirecc"))
MIRECCXX = str(Path(sys.executable).with_name("mirecc++"))
MIRE = str(Path(sys.executable).with_name("mire"))

# Many .str globals made by the front end, then puts() strings made by LLVM:
# compiled from bitcode, those are numbered .str.1... instead of after them.
RENUMBERING_C = r"""
#include <stdio.h>
const char *names[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
int pick(int k) {
    switch (k) { case 0: return 11; case 1: return 22; case 2: return 37; case 3: return 41;
                 case 4: return 53; case 5: return 68; default: return 0; }
}
const char *pickname(int k) {
    switch (k) { case 0: return "zero"; case 1: return "one"; case 2: return "two";
                 case 3: return "three"; case 4: return "four"; default: return "many"; }
}
void report(int n, float *a, const float *b) {
    printf("start\n");
    if (n > 1) printf("more than one\n");
    if (n > 2) printf("more than two %d\n", n);
    if (n > 3) printf("more than three\n");
    for (int i = 0; i < n; i++) a[i] = 2.0f * b[i] + 1.0f;
    for (int i = 0; i < n; i++) printf("item\n");
    printf("done\n");
}
"""
RENUMBERING_CXX = RENUMBERING_C.replace("#include <stdio.h>", "#include <cstdio>") + r"""
#include <string>
std::string label(int k) { return k > 2 ? std::string("big") : std::string(pickname(k)); }
"""
OPENMP_C = r"""
#include <stdio.h>
void heavy(double *a, int n) {
    #pragma omp parallel for
    for (int i = 0; i < n; i++) { double s = 0; for (int j = 0; j < i; j++) s += j * 0.5; a[i] = s; }
    printf("done\n");
}
"""
# one loop of 4 iterations: LLVM vectorizes it fully on its own
FOUR_C = r"""
void four(float *restrict a, const float *restrict b) {
    for (int i = 0; i < 4; i++) a[i] = b[i] * 2.0f + 1.0f;
}
"""


def _env(tmp_path: Path, compilers, **extra) -> dict:
    """The shipped heads (MIRECC_HEADS_DIR unset), a private cache."""
    env = isolated_env(tmp_path, MIRECC_CC=compilers.cc, MIRECC_CXX=compilers.cxx,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"), **extra)
    del env["MIRECC_HEADS_DIR"]
    return env


def _stats(env: dict) -> dict:
    out = subprocess.run([MIRE, "stats", "--json"], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return json.loads(out)


def _both(tmp_path: Path, compilers, env: dict, name: str, source: str, args: list[str],
          own: tuple = ()):
    """(clang's object, mirecc's object, mirecc's process) for ``source``."""
    (tmp_path / name).write_text(source)
    cxx = name.endswith(".cc")
    subprocess.run([compilers.cxx if cxx else compilers.cc, *args, "-c", name, "-o", "ref.o"],
                   cwd=tmp_path, check=True, timeout=300)
    proc = subprocess.run([MIRECCXX if cxx else MIRECC, *own, *args, "-c", name, "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return ((tmp_path / "ref.o").read_bytes(), (tmp_path / "ours.o").read_bytes(), proc)


def test_renumbering_is_real(tmp_path, compilers):
    """The reason for the rule: the same TU compiled from its bitcode is
    another object (so the identity tests below can fail)."""
    (tmp_path / "r.c").write_text(RENUMBERING_C)
    cc = compilers.cc
    subprocess.run([cc, "-O2", "-c", "r.c", "-o", "a.o"], cwd=tmp_path, check=True)
    subprocess.run([cc, "-O2", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes", "r.c",
                    "-o", "r.bc"], cwd=tmp_path, check=True)
    subprocess.run([cc, "-O2", "-c", "-x", "ir", "r.bc", "-o", "b.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "a.o").read_bytes() != (tmp_path / "b.o").read_bytes()


@pytest.mark.parametrize("name, source", [("r.c", RENUMBERING_C), ("r.cc", RENUMBERING_CXX)],
                         ids=["c", "c++"])
@pytest.mark.parametrize("level", ["-O2", "-O3", "-Os"])
def test_nothing_applied_gives_clangs_object(tmp_path, compilers, name, source, level):
    """A head reads the IR (the loop head at -O2/-O3 with its decisions on;
    at -Os --explain with the size search off) and applies nothing."""
    env = _env(tmp_path, compilers, MIRECC_APPLY_LOOPS="1", MIRECC_SIZE_SEARCH="0")
    own = ("--explain",) if level == "-Os" else ()
    ref, ours, proc = _both(tmp_path, compilers, env, name, source, [level, "-Wall"], own)
    stats = _stats(env)
    assert stats.get("tus.seen") == 1, (stats, proc.stderr)       # the ML path ran
    assert stats.get("tus.applied", 0) == 0 and "mirecc: warning" not in proc.stderr
    assert ours == ref


def test_a_cache_hit_and_a_direct_hit_give_clangs_object(tmp_path, compilers):
    env = _env(tmp_path, compilers, MIRECC_APPLY_LOOPS="1")
    for _ in range(3):      # computed, then a result-cache or direct-mode hit
        ref, ours, _proc = _both(tmp_path, compilers, env, "r.c", RENUMBERING_C,
                                 ["-O3", "-MD"])
        assert ours == ref
    stats = _stats(env)
    assert stats["tus.seen"] == 3 and stats.get("tus.cached", 0) >= 1


def test_capture_and_record_give_clangs_object(tmp_path, compilers):
    record = tmp_path / "record.jsonl"
    env = _env(tmp_path, compilers, MIRECC_CAPTURE_DIR=str(tmp_path / "capture"),
               MIRECC_RECORD=str(record))
    ref, ours, _proc = _both(tmp_path, compilers, env, "r.c", RENUMBERING_C, ["-O2"])
    assert ours == ref and _stats(env)["tus.seen"] == 1
    assert len(record.read_text().splitlines()) == 1
    assert list((tmp_path / "capture").rglob("*.bc"))


def _sections(obj: Path) -> set[str]:
    out = subprocess.run(["llvm-readelf-14" if shutil.which("llvm-readelf-14") else "readelf",
                          "-S", "-W", str(obj)], capture_output=True, text=True, check=True).stdout
    return {ln.split("]", 1)[1].split()[0] for ln in out.splitlines()
            if ln.strip().startswith("[") and "]" in ln and ln.split("]", 1)[1].split()}


def test_no_numa_record_without_its_setting(tmp_path, compilers):
    """MIRECC_APPLY_OPENMP alone: the NUMA head's decisions are not
    recorded (no section), and --explain adds nothing to the object."""
    env = _env(tmp_path, compilers, MIRECC_APPLY_OPENMP="1")
    ref, ours, _proc = _both(tmp_path, compilers, env, "o.c", OPENMP_C, ["-O2", "-fopenmp"])
    assert _stats(env)["tus.seen"] == 1
    assert ".mirecc.numa" not in _sections(tmp_path / "ours.o")
    plain = ours
    _ref, explained, proc = _both(tmp_path, compilers, _env(tmp_path, compilers), "o.c",
                                  OPENMP_C, ["-O2", "-fopenmp"], ("--explain",))
    assert explained == ref == plain
    assert "numa" in proc.stdout


def test_numa_decisions_of_another_machine_are_not_recorded(tmp_path, compilers):
    """The shipped NUMA head's labels describe a 2-socket Intel Xeon: on
    another machine record_numa records nothing unless asked, and --explain
    says why."""
    from mirecc.tasks.numa.launch import probe

    here = probe()
    if here.vendor == "intel" and here.sockets == 2 and len(here.cpus) == 64:
        pytest.skip("this is the labels' machine")
    env = _env(tmp_path, compilers, MIRECC_RECORD_NUMA="1")
    ref, ours, proc = _both(tmp_path, compilers, env, "o.c", OPENMP_C, ["-O2", "-fopenmp"],
                            ("--explain",))
    assert ours == ref
    assert "[other-machine] numa: its labels describe another machine" in proc.stdout
    assert ".mirecc.numa" not in _sections(tmp_path / "ours.o")
    env = _env(tmp_path, compilers, MIRECC_RECORD_NUMA="1", MIRECC_NUMA_ANY_MACHINE="1")
    _ref, _ours, proc = _both(tmp_path, compilers, env, "o.c", OPENMP_C, ["-O2", "-fopenmp"],
                              ("--explain",))
    assert "other-machine" not in proc.stdout


@pytest.fixture(scope="module")
def heads_8x4(tmp_path_factory) -> Path:
    from vectorize_heads import make_head
    return make_head(tmp_path_factory.mktemp("heads"), "8x4")


def test_a_decision_that_changes_nothing_is_not_applied(tmp_path, toolchain, heads_8x4,
                                                         llvm_plugin):
    """VF 8 x IF 4 forced on a loop of 4 iterations: the object is clang's,
    so the decision is the compiler's own choice: not counted, not recorded
    as applied, and --explain says so."""
    _clang, _major, plugin = llvm_plugin(14)
    record = tmp_path / "record.jsonl"
    env = isolated_env(tmp_path, MIRECC_CC=toolchain.cc, MIRECC_HEADS_DIR=str(heads_8x4),
                       MIRECC_APPLY_LOOPS="1", MIRECC_PLUGIN=plugin,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"), MIRECC_RECORD=str(record))
    ref, ours, proc = _both(tmp_path, toolchain, env, "four.c", FOUR_C, ["-O3"], ("--explain",))
    assert ours == ref
    assert "same as the compiler's choice" in proc.stdout and ", 0 applied" in proc.stdout
    stats = _stats(env)
    assert stats["tus.decided"] == 1 and stats["tus.unchanged"] == 1
    assert stats.get("tus.applied", 0) == 0
    (decision,) = json.loads(record.read_text())["decisions"]
    assert decision["value"] == {"vectorize.width": 8, "interleave.count": 4}
    assert not decision["applied"] and decision["same_as_compiler"]


def test_a_decision_that_changes_the_object_is_applied(tmp_path, toolchain, heads_8x4,
                                                       llvm_plugin):
    _clang, _major, plugin = llvm_plugin(14)
    source = FOUR_C.replace("i < 4", "i < n").replace("const float *restrict b)",
                                                      "const float *restrict b, int n)")
    env = isolated_env(tmp_path, MIRECC_CC=toolchain.cc, MIRECC_HEADS_DIR=str(heads_8x4),
                       MIRECC_APPLY_LOOPS="1", MIRECC_PLUGIN=plugin,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    ref, ours, proc = _both(tmp_path, toolchain, env, "many.c", source, ["-O3"])
    assert ours != ref and proc.stderr == ""
    stats = _stats(env)
    assert stats["tus.applied"] == 1 and stats.get("tus.unchanged", 0) == 0


def test_a_failing_decided_compile_leaves_clangs_object(tmp_path, toolchain, heads_8x4):
    """The plugin cannot be loaded: the compile with the decisions fails, the
    user's own object stands, with one warning."""
    bad = tmp_path / "not-a-plugin.so"
    bad.write_bytes(b"\x7fELF but not really")
    source = FOUR_C.replace("i < 4", "i < n").replace("const float *restrict b)",
                                                      "const float *restrict b, int n)")
    env = isolated_env(tmp_path, MIRECC_CC=toolchain.cc, MIRECC_HEADS_DIR=str(heads_8x4),
                       MIRECC_APPLY_LOOPS="1", MIRECC_PLUGIN=str(bad),
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    ref, ours, proc = _both(tmp_path, toolchain, env, "many.c", source, ["-O3"])
    assert ours == ref
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("mirecc: warning")]
    assert len(warnings) == 1 and "decisions failed" in warnings[0]
    stats = _stats(env)
    assert stats["fallback.decided-failed"] == 1 and stats.get("tus.applied", 0) == 0


def test_applied_counts_only_the_decisions_that_changed_the_build(tmp_path, toolchain,
                                                                  heads_8x4, llvm_plugin):
    """Two loops in one TU, 8 x 4 forced on both: the object changes (the
    loop of n iterations), but the loop of 4 iterations is treated as
    LLVM treats it on its own: one decision applied, one the compiler's."""
    _clang, _major, plugin = llvm_plugin(14)
    record = tmp_path / "record.jsonl"
    source = FOUR_C + r"""
void many(float *restrict a, const float *restrict b, int n) {
    for (int i = 0; i < n; i++) a[i] = b[i] * 3.0f - 1.0f;
}
"""
    env = isolated_env(tmp_path, MIRECC_CC=toolchain.cc, MIRECC_HEADS_DIR=str(heads_8x4),
                       MIRECC_APPLY_LOOPS="1", MIRECC_PLUGIN=plugin,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"), MIRECC_RECORD=str(record))
    ref, ours, proc = _both(tmp_path, toolchain, env, "two.c", source, ["-O3"])
    assert ours != ref and proc.stderr == ""
    decisions = {d["target"]: d for d in json.loads(record.read_text())["decisions"]}
    assert len(decisions) == 2, decisions
    by_function = {t.split(":")[0]: d for t, d in decisions.items()}
    assert by_function["many"]["applied"] and not by_function["many"]["same_as_compiler"]
    assert not by_function["four"]["applied"] and by_function["four"]["same_as_compiler"]
    stats = _stats(env)
    assert stats["tus.applied"] == 1
    assert stats["decisions.applied"] == 1 and stats["decisions.same"] == 1


def test_a_head_whose_gate_was_not_calibrated_applies_nothing(tmp_path, toolchain,
                                                              llvm_plugin):
    """A head shipped with ``refuse_forcing`` (its training found no gate
    threshold that kept every held-out application at 0.95x or better)
    records its decisions but applies none, even with its setting on, and
    --explain says why."""
    import yaml
    from vectorize_heads import make_head

    _clang, _major, plugin = llvm_plugin(14)
    heads = tmp_path / "heads"
    make_head(heads, "8x4")
    spec_path = heads / "loop-vectorize" / "spec.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["refuse_forcing"] = "held out, every threshold slows a kernel below 0.95x"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    source = FOUR_C.replace("i < 4", "i < n").replace("const float *restrict b)",
                                                      "const float *restrict b, int n)")
    env = isolated_env(tmp_path, MIRECC_CC=toolchain.cc, MIRECC_HEADS_DIR=str(heads),
                       MIRECC_APPLY_LOOPS="1", MIRECC_PLUGIN=plugin,
                       MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    ref, ours, proc = _both(tmp_path, toolchain, env, "many.c", source, ["-O3"],
                            ("--explain",))
    assert ours == ref
    assert "recorded only: held out, every threshold slows" in proc.stdout
    stats = _stats(env)
    assert stats["tus.decided"] == 1 and stats.get("tus.applied", 0) == 0
