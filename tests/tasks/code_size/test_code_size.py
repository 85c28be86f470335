"""The code-size task: with -Oz/-Os and size_search K, the object is the
smallest of the user's own and K candidate pipelines, each really built and
measured; never larger than clang's, the same program output, the same bytes
for the same input, and a candidate that fails is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from size_helpers import OUTLINER_MISCOMPILES, SOURCE   # over 1024 bytes of .text: searched

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")


def heads_with(tmp_path: Path, pipelines: list[str]) -> Path:
    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    listed = ", ".join(f'"{p}"' for p in pipelines)
    (root / "code-size" / "spec.yaml").write_text(
        f"task: code-size\nlanguages: [c, c++]\npipelines:\n  14: [{listed}]\n")
    return root


def env_for(tmp_path: Path, heads: Path, k: int, budget: float | None = None) -> dict:
    """K candidates (the test specs' entries have no cost: 1 each, so a
    budget of K lets all K be built unless ``budget`` says otherwise)."""
    return isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(heads),
                        MIRECC_CACHE_DIR=str(tmp_path / "cache"), MIRECC_SIZE_SEARCH=str(k),
                        MIRECC_SIZE_BUDGET=str(k if budget is None else budget))


def compile_both(tmp_path: Path, env: dict, level: str) -> tuple[Path, Path, str]:
    (tmp_path / "p.c").write_text(SOURCE)
    plain = subprocess.run([CLANG, level, "-c", "p.c", "-o", "plain.o"], cwd=tmp_path)
    ours = subprocess.run([MIRECC, level, "-c", "p.c", "-o", "ours.o"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and ours.returncode == 0, ours.stderr
    return tmp_path / "plain.o", tmp_path / "ours.o", ours.stderr


def run_program(tmp_path: Path, obj: Path) -> str:
    exe = tmp_path / (obj.stem + ".exe")
    subprocess.run([CLANG, str(obj), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def stats(env: dict) -> dict:
    from mirecc.tu import stats as counters
    from mirecc.taskapi.config import Config
    return counters.read(Config(cache_dir=env["MIRECC_CACHE_DIR"]))


def test_text_bytes_matches_llvm_size(tmp_path):
    from mirecc.tasks.code_size.build import text_bytes

    (tmp_path / "p.c").write_text(SOURCE)
    obj = tmp_path / "p.o"
    subprocess.run([CLANG, "-Os", "-ffunction-sections", "-c", str(tmp_path / "p.c"),
                    "-o", str(obj)], check=True)
    listing = subprocess.run(["/usr/lib/llvm-14/bin/llvm-size", "-A", str(obj)],
                             capture_output=True, text=True, check=True).stdout
    expected = sum(int(line.split()[1]) for line in listing.splitlines()
                   if line.startswith(".text"))
    assert text_bytes(str(obj)) == expected > 0
    from mirecc.tasks.code_size.build import link_bytes, object_sizes
    from mirecc.util.elf import object_sizes as loadable_sizes
    sections = subprocess.run(["/usr/lib/llvm-14/bin/llvm-readelf", "-S", "-W", str(obj)],
                              capture_output=True, text=True, check=True).stdout
    allocated = 0
    for line in sections.splitlines():
        fields = line.split("]", 1)[1].split() if line.strip().startswith("[") else []
        if len(fields) >= 7 and fields[0] and "A" in fields[6]:
            allocated += int(fields[4], 16)
    assert loadable_sizes(str(obj)) == (allocated, expected) and allocated > expected
    # the task's measure: those bytes and what the link adds for them
    assert object_sizes(str(obj)) == (allocated + link_bytes(obj.read_bytes(), False), expected)


@pytest.fixture
def other_file_system(tmp_path):
    """A TMPDIR on another file system than tmp_path where there is one
    (/dev/shm), so the candidates are built away from the output."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)
            and shm.stat().st_dev != tmp_path.stat().st_dev):
        yield None
        return
    work = tempfile.mkdtemp(prefix="mirecc-test-", dir=shm)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def test_a_smaller_candidate_replaces_the_object_and_the_output_is_the_same(
        tmp_path, other_file_system):
    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>"]), k=1)
    if other_file_system:
        env["TMPDIR"] = other_file_system
    from mirecc.tasks.code_size.build import object_sizes

    plain, ours, stderr = compile_both(tmp_path, env, "-Os")
    assert stderr == ""
    assert object_sizes(str(ours))[0] < object_sizes(str(plain))[0]
    assert run_program(tmp_path, ours) == run_program(tmp_path, plain)
    counts = stats(env)
    assert counts["verified.code-size"] == 1 and counts["verified.code-size.improved"] == 1
    assert counts.get("verified.code-size.from-cache", 0) == 0
    # the same input gives the same object, with the winner cache's record
    # and without it
    first = ours.read_bytes()
    for cache in ("on", "off"):
        ours.unlink()
        subprocess.run([MIRECC, "-Os", "-c", "p.c", "-o", "ours.o"], cwd=tmp_path,
                       env={**env, "MIRECC_CACHE": "1" if cache == "on" else "0"}, check=True)
        assert ours.read_bytes() == first, cache
    assert stats(env)["verified.code-size.from-cache"] == 1


def explain_json(tmp_path: Path, env: dict, level: str) -> dict:
    import json

    (tmp_path / "p.c").write_text(SOURCE)
    proc = subprocess.run([MIRECC, "--explain=json", level, "-c", "p.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=True)
    return json.loads(proc.stdout)["verified"]["code-size"]


def test_a_rebuild_builds_only_the_winner_and_explain_lists_the_sizes(tmp_path):
    """The first compile builds every candidate; the rebuild builds only the
    remembered winner (none when the user's level won); --explain lists each
    candidate's .text bytes and marks the one kept."""
    from mirecc.tasks.code_size.build import object_sizes

    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>", "default<O3>"]), k=2)
    first = explain_json(tmp_path, env, "-Os")
    assert first["built"] == 2 and not first["from_cache"]
    assert set(first["sizes"]) == {"-Os", "default<Oz>", "default<O3>"}
    assert first["winner"] == min(first["sizes"], key=first["sizes"].get) == "default<Oz>"
    assert object_sizes(str(tmp_path / "ours.o")) == (first["sizes"]["default<Oz>"],
                                                      first["text"]["default<Oz>"])
    again = explain_json(tmp_path, env, "-Os")
    assert again == {**first, "built": 1, "from_cache": True}
    # the user's level won at -Oz: the rebuild builds nothing
    assert explain_json(tmp_path, env, "-Oz")["winner"] == "-Oz"
    assert explain_json(tmp_path, env, "-Oz")["built"] == 0
    text = subprocess.run([MIRECC, "--explain", "-Os", "-c", "p.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=True).stdout
    kept = next(line for line in text.splitlines() if line.startswith("   * "))
    assert "default<Oz>" in kept and f"{first['sizes']['default<Oz>']:,}" in kept


def test_a_damaged_winner_record_is_a_miss(tmp_path):
    from mirecc.tasks.code_size.winners import WinnerCache

    cache = WinnerCache(str(tmp_path))
    cache.put("ab" * 32, "default<Oz>", {"-Oz": 10, "default<Oz>": 8}, {})
    assert cache.get("ab" * 32)["winner"] == "default<Oz>"
    for damaged in (b"{not json", b'{"winner": "x", "sizes": {"-Oz": 1}}', b"[]"):
        Path(cache.folder.path("ab" * 32)).write_bytes(damaged)
        assert cache.get("ab" * 32) is None


def test_never_larger_a_failing_candidate_is_skipped(tmp_path):
    """A pipeline opt rejects and one that makes a larger object: the
    user's own object stays, byte for byte clang's."""
    env = env_for(tmp_path, heads_with(tmp_path, ["no-such-pass", "default<O3>"]), k=2)
    plain, ours, stderr = compile_both(tmp_path, env, "-Os")    # searched: over 1024 bytes
    assert stderr == ""
    assert ours.read_bytes() == plain.read_bytes()
    counts = stats(env)
    assert counts["verified.code-size"] == 1 and counts["verified.code-size.improved"] == 0
    assert counts.get("verified.code-size.not-searched", 0) == 0


def test_off_at_zero_and_only_for_size_levels(tmp_path):
    """K = 0, or a level other than -Os/-Oz: clang's object, and at -O2 the
    IR is not even read (the task's opt_levels): the call passes through."""
    heads = heads_with(tmp_path, ["default<Oz>"])
    for k, level in ((0, "-Os"), (1, "-O2")):
        env = env_for(tmp_path, heads, k)
        plain, ours, _ = compile_both(tmp_path, env, level)
        assert ours.read_bytes() == plain.read_bytes()
    counts = stats(env)
    assert "verified.code-size" not in counts
    assert counts["passthrough.no-use"] == 2


def test_a_bad_library_is_a_clear_error(tmp_path):
    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.head import CodeSizeHead

    with pytest.raises(HeadError, match="'pipelines' must map LLVM majors"):
        CodeSizeHead(tmp_path, {"task": "code-size", "pipelines": ["default<Oz>"]})


def test_labels_count_instructions_and_text(tmp_path):
    """The offline labels of a module: IR instructions after the pipeline
    (a multiply, an add and a return) and the object's .text bytes."""
    from mirecc.tasks.code_size.build import text_bytes
    from mirecc.tasks.code_size.offline.labels import count_ir_instructions, measure

    (tmp_path / "f.c").write_text("int f(int a, int b) { return a * b + 1; }\n")
    bitcode = tmp_path / "f.bc"
    subprocess.run([CLANG, "-Oz", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(tmp_path / "f.c"), "-o", str(bitcode)], check=True)
    labels = measure(str(bitcode), CLANG, "default<Oz>", ["-Oz"], str(tmp_path))
    subprocess.run([CLANG, "-Oz", "-c", str(tmp_path / "f.c"), "-o", str(tmp_path / "f.o")],
                   check=True)
    assert labels.pop("seconds") > 0
    assert labels == {"ir_instructions": 3, "text_bytes": text_bytes(str(tmp_path / "f.o"))}
    # labels and comments are not instructions; declarations have no body
    text = ("declare i32 @g(i32)\ndefine i32 @h(i32 %0) {\n  %2 = call i32 @g(i32 %0)"
            " ; call\n  br label %3\n\n3:                                 ; preds = %1\n"
            "  ret i32 %2\n}\n")
    assert count_ir_instructions(text) == 3


def test_a_ranker_puts_its_best_predicted_pipeline_first(tmp_path):
    """A ranker (a forest on instruction counts, exported as the shipped one
    is) that predicts the second library pipeline smaller: with K = 1 the
    driver builds that one, and --explain says the order is the forest's."""
    import json

    import numpy as np

    from mirecc.tasks.code_size.features import NAMES
    from mirecc.learn.forest import ForestConfig, fit_forest, onnx_bytes

    heads = heads_with(tmp_path, ["default<O3>", "default<Oz>"])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, len(NAMES))).astype(np.float32)
    Y = np.tile([-0.2, 0.05], (30, 1)) + rng.normal(scale=0.01, size=(30, 2))
    forest = fit_forest(X, Y, ForestConfig(trees=5))
    (heads / "code-size" / "ranker.onnx").write_bytes(onnx_bytes(forest, len(NAMES)))
    with open(heads / "code-size" / "spec.yaml", "a") as fh:
        fh.write("ranker:\n  llvm: 14\n  features: counts\n  head: ranker.onnx\n")
    env = env_for(tmp_path, heads, k=1)
    (tmp_path / "p.c").write_text(SOURCE)
    proc = subprocess.run([MIRECC, "--explain=json", "-Os", "-c", "p.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=True)
    data = json.loads(proc.stdout)
    [decision] = data["translation_units"][0]["decisions"]
    assert decision["value"] == {"verify": ["default<Oz>"]}
    assert "ranked by the forest on counts" in decision["reason"]
    assert set(data["verified"]["code-size"]["sizes"]) == {"-Os", "default<Oz>"}


def test_a_ranker_for_another_library_is_a_clear_error(tmp_path):
    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.head import CodeSizeHead

    spec = {"task": "code-size", "pipelines": {14: ["default<Oz>"]},
            "ranker": {"llvm": 19, "features": "counts", "head": "ranker.onnx"}}
    with pytest.raises(HeadError, match="'ranker' must name an 'llvm' of the library"):
        CodeSizeHead(tmp_path, spec)
    spec["ranker"]["llvm"] = 14
    with pytest.raises(HeadError, match="ranker.onnx: ranker file named in"):
        CodeSizeHead(tmp_path, spec)


def test_named_pipelines_are_decided_and_shown_by_name(tmp_path):
    """A library entry {name, passes}: the decision and --explain name it,
    the build step builds its passes; names must be unique."""
    import json

    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.head import CodeSizeHead

    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    (root / "code-size" / "spec.yaml").write_text(
        "task: code-size\nlanguages: [c]\npipelines:\n"
        "  14:\n  - {name: small, passes: 'default<Oz>'}\n  - 'default<O3>'\n")
    env = env_for(tmp_path, root, k=2)
    (tmp_path / "p.c").write_text(SOURCE)
    data = json.loads(subprocess.run(
        [MIRECC, "--explain=json", "-Os", "-c", "p.c", "-o", "ours.o"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300, check=True).stdout)
    assert data["translation_units"][0]["decisions"][0]["value"] == {
        "verify": ["small", "default<O3>"]}
    assert data["verified"]["code-size"]["winner"] == "small"
    with pytest.raises(HeadError, match="names unique"):
        CodeSizeHead(tmp_path, {"pipelines": {14: [{"name": "a", "passes": "default<Oz>"},
                                                   {"name": "a", "passes": "default<Os>"}]}})


# four setters that differ in one instruction: the machine outliner (off at
# -Oz on x86-64) moves their common sequence into shared functions
# over 1024 bytes of .text at -Oz: searched (verify.MIN_TEXT_BYTES)
OUTLINABLE = """\
#include <stdio.h>
struct s { int a, b, c, d, e, f; };
#define SETTER(n) void set##n(struct s *p, int x) { \\
  p->a = x; p->b = x + 1; p->c = x * 3; p->d = 7; p->e = 9; p->f = x ^ n; }
SETTER(1) SETTER(2) SETTER(3) SETTER(4) SETTER(5) SETTER(6) SETTER(7) SETTER(8)
SETTER(9) SETTER(10) SETTER(11) SETTER(12) SETTER(13) SETTER(14) SETTER(15) SETTER(16)
SETTER(17) SETTER(18) SETTER(19) SETTER(20) SETTER(21) SETTER(22) SETTER(23) SETTER(24)
SETTER(25) SETTER(26) SETTER(27) SETTER(28) SETTER(29) SETTER(30) SETTER(31) SETTER(32)
int main(void) {
  struct s v[4];
  set1(&v[0], 1); set2(&v[1], 2); set3(&v[2], 3); set4(&v[3], 4);
  printf("%d %d %d %d\\n", v[0].c + v[1].f, v[2].b, v[3].f, v[1].a + v[3].c);
  return 0;
}
"""


def _with_the_outliner(tmp_path: Path, source: str) -> dict:
    """``source`` as p.c, compiled by clang -Oz into plain.o and by mirecc
    into ours.o with one candidate, -Oz with the machine outliner
    ("outlined"); what --explain=json says code size did."""
    import json

    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    (root / "code-size" / "spec.yaml").write_text(
        "task: code-size\nlanguages: [c]\npipelines:\n  14:\n"
        "  - {name: outlined, passes: 'default<Oz>', options: [machine-outliner]}\n")
    (tmp_path / "p.c").write_text(source)
    subprocess.run([CLANG, "-Oz", "-c", "p.c", "-o", "plain.o"], cwd=tmp_path, check=True)
    return json.loads(subprocess.run(
        [MIRECC, "--explain=json", "-Oz", "-c", "p.c", "-o", "ours.o"], cwd=tmp_path,
        env=env_for(tmp_path, root, k=1), capture_output=True, text=True, timeout=300,
        check=True).stdout)["verified"]["code-size"]


def test_a_candidate_with_the_machine_outliner_is_built_with_it(tmp_path):
    """A library entry's ``options: [machine-outliner]`` reaches clang's back
    end: the winning object has outlined functions, is smaller than -Oz's
    and the program prints the same."""
    from mirecc.tasks.code_size.build import text_bytes

    assert _with_the_outliner(tmp_path, OUTLINABLE)["winner"] == "outlined"
    symbols = subprocess.run(["/usr/lib/llvm-14/bin/llvm-nm", str(tmp_path / "ours.o")],
                             capture_output=True, text=True, check=True).stdout
    assert "OUTLINED_FUNCTION_0" in symbols
    assert text_bytes(str(tmp_path / "ours.o")) < text_bytes(str(tmp_path / "plain.o"))
    assert run_program(tmp_path, tmp_path / "ours.o") == \
        run_program(tmp_path, tmp_path / "plain.o")


def test_outlined_functions_must_end_in_a_return_or_a_jump(tmp_path):
    """The outliner's own functions end in ret or jmp; LLVM 14's bug ends
    them in a conditional jump (the program then gives wrong answers), and
    the check names them; a stripped file cannot be checked."""
    from mirecc.tasks.code_size.build import CandidateError, check_outlined, outlined_run_off

    (tmp_path / "good.c").write_text(OUTLINABLE)
    (tmp_path / "bad.c").write_text(OUTLINER_MISCOMPILES)
    for name in ("good", "bad"):
        subprocess.run([CLANG, "-Oz", "-mllvm", "-enable-machine-outliner", f"{name}.c",
                        "-o", name], cwd=tmp_path, check=True)
        subprocess.run([CLANG, "-Oz", "-mllvm", "-enable-machine-outliner", "-c", f"{name}.c",
                        "-o", f"{name}.o"], cwd=tmp_path, check=True)
    good, bad = ((tmp_path / n).read_bytes() for n in ("good.o", "bad.o"))
    assert b"OUTLINED_FUNCTION_0" in good and outlined_run_off(good) == []
    assert sorted(outlined_run_off(bad)) == ["OUTLINED_FUNCTION_0", "OUTLINED_FUNCTION_1"]
    # the same in the linked programs, whose jumps are resolved
    assert outlined_run_off((tmp_path / "good").read_bytes()) == []
    assert len(outlined_run_off((tmp_path / "bad").read_bytes())) == 2
    assert subprocess.run([str(tmp_path / "bad")], capture_output=True, text=True,
                          check=True).stdout != "0 wrong\n"
    # ELF32: x32 has the bug too, i386 outlines without it
    for target, flagged in (("-mx32", 2), ("-m32", 0)):
        subprocess.run([CLANG, target, "-Oz", "-mllvm", "-enable-machine-outliner", "-c",
                        "bad.c", "-o", "elf32.o"], cwd=tmp_path, check=True)
        elf32 = (tmp_path / "elf32.o").read_bytes()
        assert b"OUTLINED_FUNCTION_0" in elf32 and len(outlined_run_off(elf32)) == flagged
    with pytest.raises(CandidateError, match="miscompiled: the machine outliner ended "
                                             "OUTLINED_FUNCTION_"):
        check_outlined(str(tmp_path / "bad.o"))
    check_outlined(str(tmp_path / "good.o"))
    subprocess.run(["/usr/lib/llvm-14/bin/llvm-strip", "good", "-o", "stripped"], cwd=tmp_path,
                   check=True)
    assert outlined_run_off((tmp_path / "stripped").read_bytes()) is None
    with pytest.raises(CandidateError, match="no symbol table"):
        check_outlined(str(tmp_path / "stripped"))


def test_a_candidate_the_outliner_miscompiles_is_not_kept(tmp_path):
    """The outliner's candidate is smaller but miscompiled: it is not kept,
    the object is clang's and the program's answers are right."""
    verified = _with_the_outliner(tmp_path, OUTLINER_MISCOMPILES)
    assert verified["winner"] == "-Oz" and "outlined" not in verified["sizes"]
    assert "miscompiled: the machine outliner ended OUTLINED_FUNCTION_" in \
        verified["skipped"]["outlined"]
    assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    assert run_program(tmp_path, tmp_path / "ours.o") == "0 wrong\n"


def test_candidate_texts_name_their_options(tmp_path):
    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.build import candidate_text, parse_candidate
    from mirecc.tasks.code_size.head import CodeSizeHead

    text = candidate_text("default<Oz>", ["machine-outliner"])
    assert text == "default<Oz> @machine-outliner"
    assert parse_candidate(text) == ("default<Oz>", [], ["-mllvm", "-enable-machine-outliner"])
    assert parse_candidate("default<Oz>") == ("default<Oz>", [], [])
    both = candidate_text("default<Oz>", ["inline-threshold=-20", "machine-outliner"])
    assert parse_candidate(both) == ("default<Oz>", ["-inline-threshold=-20"],
                                     ["-mllvm", "-enable-machine-outliner"])
    with pytest.raises(ValueError, match="unknown option 'fast'"):
        parse_candidate("default<Oz> @fast")
    with pytest.raises(ValueError, match="inline-threshold takes an integer"):
        parse_candidate("default<Oz> @inline-threshold=high")
    head = CodeSizeHead(tmp_path, {"pipelines": {14: [
        {"name": "o", "passes": "default<Oz>", "options": ["machine-outliner"]},
        {"name": "old", "passes": "default<Os>", "codegen": ["machine-outliner"]}]}})
    assert head.library == {14: [("o", text), ("old", "default<Os> @machine-outliner")]}
    with pytest.raises(HeadError, match="unknown option 'fast'"):
        CodeSizeHead(tmp_path, {"pipelines": {14: [
            {"name": "o", "passes": "default<Oz>", "options": ["fast"]}]}})


INLINABLE = r"""
int table[64];
static int mix(int a, int b) {
  int s = 0;
  for (int i = 0; i < a; i++) s += table[(i * b) & 63] ^ (s >> 3);
  return s * b + a;
}
int f(int x) { return mix(x, 3) + mix(x + 1, 5); }
int g(int x) { return mix(x, 7); }
"""


def test_an_inline_threshold_option_reaches_opt(tmp_path):
    """``@inline-threshold=N`` is opt's threshold: a generous one inlines
    ``mix`` into its three calls (more instructions than -Oz's one copy)."""
    from mirecc.tasks.code_size.offline.labels import measure

    (tmp_path / "m.c").write_text(INLINABLE)
    subprocess.run([CLANG, "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    "m.c", "-o", "m.bc"], cwd=tmp_path, check=True)
    bitcode = str(tmp_path / "m.bc")
    plain = measure(bitcode, CLANG, "default<Oz>", ["-Oz"], str(tmp_path))
    generous = measure(bitcode, CLANG, "default<Oz> @inline-threshold=1000", ["-Oz"],
                       str(tmp_path))
    assert generous["ir_instructions"] > plain["ir_instructions"]
    assert "@mix(" not in (tmp_path / "labels.ll").read_text()     # the generous one's IR


def test_opt_beside_takes_a_bare_compiler_name_from_path(tmp_path, monkeypatch):
    from mirecc.tasks.code_size.build import CandidateError, opt_beside

    monkeypatch.chdir(tmp_path)                     # a bare name is not a path in the cwd
    assert opt_beside("clang-14") == "/usr/lib/llvm-14/bin/opt"
    with pytest.raises(CandidateError, match="no opt beside"):
        opt_beside(str(tmp_path / "clang"))


def test_code_size_benchmark_takes_the_compiler_pair_it_is_told(tmp_path):
    """benchmarks/code_size.py --cc clang-N: clang++-N beside it by default;
    a compiler that is not there, or a --cc that is not a clang name without
    --cxx, is a clear error."""
    from benchmark_module import load_benchmark

    code_size = load_benchmark("code_size")
    for name in ("clang-77", "clang++-77", "gcc-77"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    cc, cxx = code_size.chosen_compilers(str(tmp_path / "clang-77"), None)
    assert (cc, cxx) == (str(tmp_path / "clang-77"), str(tmp_path / "clang++-77"))
    with pytest.raises(code_size.BenchError, match="clang-78: not found"):
        code_size.chosen_compilers(str(tmp_path / "clang-78"), None)
    with pytest.raises(code_size.BenchError, match="give --cxx"):
        code_size.chosen_compilers(str(tmp_path / "gcc-77"), None)
    assert code_size.chosen_compilers(str(tmp_path / "gcc-77"), str(tmp_path / "clang++-77")) \
        == (str(tmp_path / "gcc-77"), str(tmp_path / "clang++-77"))


# a warning (-Wall: an unused variable) and several functions to search over
SHIPPED_SOURCE = SOURCE.replace("int main(void) {", """\
static int table[64];
int lookup(int k) { int unused; return table[k & 63] * 3 + k; }
void fill(void) { for (int i = 0; i < 64; i++) table[i] = i * i - 7; }
int main(void) {
  fill();
  printf("%d\\n", lookup(5) + lookup(70));""")


def test_the_shipped_library_end_to_end(tmp_path, compilers):
    """The shipped code-size head and library at the default K, as a user
    meets them (-Oz, -MD, -Wall): the same warning and dependency file as
    clang, never more loadable bytes, the same program output; with -Werror
    the same failure."""
    from mirecc.tasks.code_size.build import object_sizes

    env = isolated_env(tmp_path, MIRECC_CC=compilers.cc, MIRECC_CACHE_DIR=str(tmp_path / "cache"))
    del env["MIRECC_HEADS_DIR"]                        # the shipped heads
    results = {}
    for driver in (compilers.cc, MIRECC):
        work = tmp_path / ("mirecc" if driver == MIRECC else "clang")
        work.mkdir()
        (work / "p.c").write_text(SHIPPED_SOURCE)
        proc = subprocess.run([driver, "-Oz", "-Wall", "-MD", "-c", "p.c", "-o", "p.o"],
                              cwd=work, env=env, capture_output=True, text=True, timeout=600)
        failed = subprocess.run([driver, "-Oz", "-Wall", "-Werror", "-c", "p.c", "-o", "q.o"],
                                cwd=work, env=env, capture_output=True, text=True, timeout=600)
        subprocess.run([compilers.cc, "p.o", "-o", "p"], cwd=work, check=True)
        output = subprocess.run(["./p"], cwd=work, capture_output=True, text=True).stdout
        results[driver] = (proc, failed, (work / "p.d").read_text(), output,
                           object_sizes(str(work / "p.o")), (work / "q.o").exists())
    (proc, failed, deps, output, sizes, q), (ref, ref_failed, ref_deps, ref_output,
                                             ref_sizes, ref_q) = results[MIRECC], results[compilers.cc]
    assert proc.returncode == ref.returncode == 0
    assert proc.stderr == ref.stderr and "unused variable" in ref.stderr
    assert deps == ref_deps and output == ref_output
    assert sizes[0] <= ref_sizes[0]                   # loadable bytes, never more
    assert failed.returncode == ref_failed.returncode == 1 and failed.stderr == ref_failed.stderr
    assert not q and not ref_q
    counts = stats(env)
    assert counts["verified.code-size"] == 1          # the library really was searched


def _aged(*paths: Path) -> None:
    """Files older than a second: direct mode trusts no file written while
    the front end may have read it."""
    import time
    for p in paths:
        os.utime(p, (time.time() - 60, time.time() - 60))


def test_an_unchanged_tu_gets_its_kept_object_and_nothing_is_compiled(tmp_path):
    """A rebuild of an unchanged TU copies the object the candidates chose
    (ccache's rule); a changed header is a miss; a command that writes a
    dependency file gets it back with the object."""
    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>", "default<O3>"]), k=2)
    (tmp_path / "p.h").write_text("#define SCALE 3.0f\n")
    (tmp_path / "p.c").write_text('#include "p.h"\n' + SOURCE.replace("3.0f", "SCALE"))
    _aged(tmp_path / "p.h", tmp_path / "p.c")
    cmd = [MIRECC, "-Os", "-c", "p.c", "-o", "ours.o"]

    def build() -> bytes:
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True, timeout=300)
        return (tmp_path / "ours.o").read_bytes()
    first = build()
    assert stats(env).get("tus.object", 0) == 0
    (tmp_path / "ours.o").write_bytes(b"stale")
    assert build() == first
    counted = stats(env)
    assert counted["tus.object"] == 1 and counted["tus.direct"] == 1
    # the kept object is the candidates' choice, not the user's level
    plain = subprocess.run([CLANG, "-Os", "-c", "p.c", "-o", "plain.o"], cwd=tmp_path)
    assert plain.returncode == 0 and (tmp_path / "plain.o").read_bytes() != first
    # a header changes: a miss, and the object is the new source's
    (tmp_path / "p.h").write_text("#define SCALE 5.0f\n")
    _aged(tmp_path / "p.h")
    changed = build()
    assert changed != first and stats(env)["tus.object"] == 1
    assert run_program(tmp_path, tmp_path / "ours.o") != run_program(tmp_path,
                                                                     tmp_path / "plain.o")
    # -MD and -MMD write a second file: it is kept with the object, and a
    # hit writes both, the dependency file byte for byte the compile's
    for flag in ("-MD", "-MMD"):
        md = [MIRECC, "-Os", flag, "-MF", f"md{flag}.d", "-c", "p.c", "-o", f"md{flag}.o"]
        subprocess.run(md, cwd=tmp_path, env=env, check=True, timeout=300)
        dep, obj = tmp_path / f"md{flag}.d", tmp_path / f"md{flag}.o"
        first_dep, first_obj = dep.read_bytes(), obj.read_bytes()
        assert b"p.h" in first_dep and (flag == "-MMD") != (b"stdio" in first_dep or
                                                             b"/usr/" in first_dep)
        dep.unlink()
        obj.unlink()
        before = stats(env)["tus.object"]
        subprocess.run(md, cwd=tmp_path, env=env, check=True, timeout=300)
        assert stats(env)["tus.object"] == before + 1
        assert (dep.read_bytes(), obj.read_bytes()) == (first_dep, first_obj)


def test_kept_objects_stay_under_their_bound_least_recently_used_first(tmp_path):
    """Each of the 256 subfolders holds at most a 256th of the bound (1 MiB:
    4 KiB); a write trims its own subfolder, least recently used first."""
    import time

    from mirecc.tu.objcache import ObjectCache

    cache = ObjectCache(str(tmp_path / "cache"), max_mb=1)
    other = "bb" * 32
    src = tmp_path / "other.o"
    src.write_bytes(b"\7" * 4000)
    digests = {other: cache.put(other, str(src))}
    keys = ["aa" + c * 62 for c in "012"]
    for n, key in enumerate(keys):
        src = tmp_path / f"{n}.o"
        src.write_bytes(bytes([n + 1]) * 1500)
        digests[key] = cache.put(key, str(src))
        os.utime(cache.folder.path(key), (time.time() - 100 + n, time.time() - 100 + n))
        if n == 1:
            assert cache.get(keys[0], digests[keys[0]]) is not None   # used: now the newest
    # three objects of 1500 B over a subfolder's 4096: the least recently used went
    assert cache.get(keys[1], digests[keys[1]]) is None
    assert cache.get(keys[0], digests[keys[0]]) == bytes([1]) * 1500
    assert cache.get(keys[2], digests[keys[2]]) == bytes([3]) * 1500
    assert cache.get(other, digests[other]) == b"\7" * 4000    # another subfolder: untouched
    assert cache.get("dd" * 32, digests[other]) is None


def test_a_damaged_kept_object_is_a_miss(tmp_path):
    """Objects are written without fsync: a read checks the digest put gave."""
    from mirecc.util.fsutil import sha256
    from mirecc.tu.objcache import ObjectCache

    cache = ObjectCache(str(tmp_path / "cache"))
    src = tmp_path / "a.o"
    src.write_bytes(b"\x7fELF" + bytes(200))
    key = "ab" * 32
    digest = cache.put(key, str(src))
    assert digest == sha256(src.read_bytes()).hexdigest()
    assert cache.get(key, digest) == src.read_bytes()
    assert cache.get(key, None) is None                 # a manifest without a digest
    Path(cache.folder.path(key)).write_bytes(b"\x7fELF" + bytes(100))   # a crash cut it short
    assert cache.get(key, digest) is None


def test_a_tu_too_small_to_gain_is_not_searched(tmp_path):
    """Under MIN_TEXT_BYTES of .text (configure's probes), no candidate is
    built: the object is clang's, counted as not searched."""
    from mirecc.tasks.code_size.verify import MIN_TEXT_BYTES

    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>", "default<O3>"]), k=2)
    (tmp_path / "probe.c").write_text("int main(void) { return 0; }\n")
    ours = subprocess.run([MIRECC, "-Oz", "-c", "probe.c", "-o", "ours.o"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    plain = subprocess.run([CLANG, "-Oz", "-c", "probe.c", "-o", "plain.o"], cwd=tmp_path)
    assert ours.returncode == 0 and plain.returncode == 0, ours.stderr
    from mirecc.tasks.code_size.build import object_sizes
    assert object_sizes(str(tmp_path / "plain.o"))[1] < MIN_TEXT_BYTES
    assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    counted = stats(env)
    assert counted["verified.code-size"] == 1 == counted["verified.code-size.not-searched"]
    assert "tus.seen" not in counted        # the gate answered: no IR was read
    assert not list(Path(tmp_path / "cache").rglob("code-size/v2/*/*.json"))   # no winner kept
    text = subprocess.run([MIRECC, "--explain", "-Oz", "-c", "probe.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert f"under {MIN_TEXT_BYTES} (too small to gain)" in text and "failed" not in text


def test_a_probe_imports_no_regular_expressions_inside_make_or_out(tmp_path):
    """configure's probe compiles pay every import: a probe too small to
    gain loads neither re (with enum, ~17 ms) nor subprocess, outside make
    and under a serial make, where the front end and the first candidate
    start beside it and are stopped."""
    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>"]), k=1)
    (tmp_path / "probe.c").write_text("int main(void) { return 0; }\n")
    # the head's spec already read once (the YAML parser imports re), as
    # after a build's first searched TU
    from mirecc.taskapi.config import Config
    from mirecc.tasks.code_size.head import installed
    installed(Config(heads_dir=env["MIRECC_HEADS_DIR"], cache_dir=env["MIRECC_CACHE_DIR"]))
    for makeflags in (None, "", " -j2 --jobserver-auth=987,988"):
        run_env = {k: v for k, v in env.items() if k != "MAKEFLAGS"}
        if makeflags is not None:
            run_env["MAKEFLAGS"] = makeflags
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mirecc", "-Oz", "-c",
                               "probe.c", "-o", "ours.o"], cwd=tmp_path, env=run_env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "mirecc.driver.clang" in imported
        assert not imported & {"re", "enum", "shlex", "subprocess"}, (makeflags, imported)
    assert stats(env)["verified.code-size.too-small"] == 3
    # whether a probe's early step is planned depends on which compile ends
    # first; planned alone, it imports none of them either
    code = ("from mirecc.taskapi.config import Config\n"
            "from mirecc.tasks.code_size.early import first_candidate\n"
            "class Split:\n"
            f"    compiler, bitcode_path = {CLANG!r}, 'probe.bc'\n"
            "    def backend_command(self, extra, output, bitcode):\n"
            "        return ['clang', *extra, '-o', output, bitcode]\n"
            f"config = Config(heads_dir={env['MIRECC_HEADS_DIR']!r}, "
            f"cache_dir={env['MIRECC_CACHE_DIR']!r})\n"
            "print(first_candidate(Split(), config, '.')[0])\n")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "default<Oz>"
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & {"re", "enum", "shlex", "subprocess", "shutil", "json"}, imported


def _gate_spec(tmp_path: Path, intercepts: dict[str, float], threshold: float = 0.5) -> Path:
    """A test head whose object gate gives each named pipeline a fixed chance
    (its intercept; the coefficients 0)."""
    import yaml

    from mirecc.tasks.code_size.build import GATE_FEATURES

    n = len(GATE_FEATURES)
    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    (root / "code-size" / "spec.yaml").write_text(yaml.safe_dump({
        "task": "code-size", "languages": ["c", "c++"],
        "pipelines": {14: list(intercepts)},
        "object_gate": {14: {"threshold": threshold, "mean": [0.0] * n, "scale": [1.0] * n,
                             "pipelines": {p: [b] + [0.0] * n
                                           for p, b in intercepts.items()}}}}))
    return root


def test_object_features_read_a_real_object(tmp_path):
    """The gate's statistics of a clang object: one per name, the code size
    as the section table gives it; an object of another machine has none."""
    import math

    from mirecc.tasks.code_size.build import GATE_FEATURES, object_features, object_sizes

    (tmp_path / "p.c").write_text(SOURCE)
    subprocess.run([CLANG, "-Oz", "-c", "p.c", "-o", "p.o"], cwd=tmp_path, check=True)
    data = (tmp_path / "p.o").read_bytes()
    features = object_features(data)
    assert len(features) == len(GATE_FEATURES)
    assert round(math.exp(features[0])) == object_sizes(str(tmp_path / "p.o"))[1]
    assert features[5] + features[6] > 0            # it has functions
    assert 0 < features[13] < 1                     # code compresses
    other = bytearray(data)
    other[0x12:0x14] = (183).to_bytes(2, "little")   # EM_AARCH64
    assert object_features(bytes(other)) is None
    assert object_features(data[:200]) is None       # truncated: no gate, no error


def test_the_object_gate_keeps_only_candidates_likely_to_gain(tmp_path):
    from mirecc.tasks.code_size.build import GATE_FEATURES, gate_keeps

    (tmp_path / "p.c").write_text(SOURCE)
    subprocess.run([CLANG, "-Oz", "-c", "p.c", "-o", "p.o"], cwd=tmp_path, check=True)
    data = (tmp_path / "p.o").read_bytes()
    n = len(GATE_FEATURES)
    model = {"threshold": 0.5, "mean": [0.0] * n, "scale": [1.0] * n,
             "pipelines": {"likely": [5.0] + [0.0] * n, "unlikely": [-5.0] + [0.0] * n}}
    kept, chances = gate_keeps(model, data, ["unlikely", "unknown", "likely"])
    assert kept == ["unknown", "likely"]             # order kept; unknown names are built
    assert chances["unlikely"] < 0.01 < 0.99 < chances["likely"]
    assert gate_keeps(None, data, ["likely"]) is None


def test_a_bad_object_gate_is_a_clear_error(tmp_path):
    import yaml

    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.head import CodeSizeHead

    spec = yaml.safe_load((_gate_spec(tmp_path, {"default<Oz>": 1.0}) / "code-size"
                           / "spec.yaml").read_text())
    CodeSizeHead(tmp_path, spec)                     # well formed
    model = spec["object_gate"][14]
    model["pipelines"]["default<O3>"] = model["pipelines"].pop("default<Oz>")
    with pytest.raises(HeadError, match="'object_gate' must map LLVM majors of the library"):
        CodeSizeHead(tmp_path, spec)                 # a pipeline the library lacks
    model["pipelines"] = {"default<Oz>": [1.0]}
    with pytest.raises(HeadError, match="'object_gate'"):
        CodeSizeHead(tmp_path, spec)                 # too few coefficients


def test_a_tu_the_object_gate_rejects_is_clangs_and_reads_no_ir(tmp_path):
    """With no candidate likely to gain, the object is clang's byte for byte,
    counted as predicted no gain, and no IR is read; a likely one is built."""
    env = env_for(tmp_path, _gate_spec(tmp_path, {"default<Oz>": -8.0, "default<O1>": -8.0}),
                  k=2)
    plain, ours, _ = compile_both(tmp_path, env, "-Os")
    assert ours.read_bytes() == plain.read_bytes()
    counted = stats(env)
    assert counted["verified.code-size.predicted-no-gain"] == 1
    assert counted["verified.code-size.not-searched"] == 1
    assert "tus.seen" not in counted                 # the gate answered before the IR
    # its object is kept (a source older than the compile): a rebuild of the
    # unchanged TU copies it and compiles nothing
    _aged(tmp_path / "p.c")
    compile_again = [MIRECC, "-Os", "-c", "p.c", "-o", "ours.o"]
    subprocess.run(compile_again, cwd=tmp_path, env=env, check=True)
    ours.unlink()
    subprocess.run(compile_again, cwd=tmp_path, env=env, check=True)
    assert ours.read_bytes() == plain.read_bytes()
    counted = stats(env)
    assert counted["tus.object"] == 1 and counted["verified.code-size.predicted-no-gain"] == 2
    # with -MD the user's dependency file lists every header: it is the
    # manifest's list and is kept with the object; -MMD's is not (no system
    # headers): compiled again
    for flag, kept in (("-MD", True), ("-MMD", False)):
        md = [MIRECC, "-Os", flag, "-c", "p.c", "-o", f"g{flag}.o"]
        subprocess.run(md, cwd=tmp_path, env=env, check=True)
        first = (tmp_path / f"g{flag}.d").read_bytes()
        (tmp_path / f"g{flag}.d").unlink()
        (tmp_path / f"g{flag}.o").unlink()
        before = stats(env)["tus.object"]
        subprocess.run(md, cwd=tmp_path, env=env, check=True)
        assert stats(env)["tus.object"] == before + kept
        assert (tmp_path / f"g{flag}.d").read_bytes() == first
        assert (tmp_path / f"g{flag}.o").read_bytes() == plain.read_bytes()
    # a changed source is compiled and asked again
    asked = stats(env)["verified.code-size.predicted-no-gain"]
    (tmp_path / "p.c").write_text(SOURCE + "\n/* changed */\n")
    _aged(tmp_path / "p.c")
    subprocess.run(compile_again, cwd=tmp_path, env=env, check=True)
    assert stats(env)["verified.code-size.predicted-no-gain"] == asked + 1
    text = subprocess.run([MIRECC, "--explain", "-Os", "-c", "p.c", "-o", "ours.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert "the object gate predicts that no candidate" in text
    assert text.count("not built") == 2 and "failed" not in text

    keep = tmp_path / "keep"
    keep.mkdir()
    env = env_for(keep, _gate_spec(keep, {"default<Oz>": -8.0, "default<O1>": 8.0}), k=2)
    compile_both(keep, env, "-Os")
    verified = explain_json(keep, env, "-Os")
    assert set(verified["sizes"]) == {"-Os", "default<O1>"}      # only the likely one built
    assert "default<Oz>" in verified["skipped"]

    off = tmp_path / "off"
    off.mkdir()
    env = {**env_for(off, _gate_spec(off, {"default<Oz>": -8.0, "default<O1>": -8.0}), k=2),
           "MIRECC_SIZE_GATE": "0"}
    compile_both(off, env, "-Os")
    assert set(explain_json(off, env, "-Os")["sizes"]) == {"-Os", "default<Oz>", "default<O1>"}


def test_a_compile_and_link_reads_no_ir_for_code_size_alone(tmp_path):
    """``cc -Oz conftest.c -o conftest`` (configure's link probes) cannot be
    split, so the build step could not build a candidate: no IR is read,
    clang runs once, as asked."""
    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>"]), k=1)
    (tmp_path / "p.c").write_text(SOURCE)
    proc = subprocess.run([MIRECC, "-Oz", "p.c", "-o", "p"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    counted = stats(env)
    assert counted["passthrough.no-use"] == 1 and "tus.seen" not in counted
    subprocess.run([CLANG, "-Oz", "p.c", "-o", "q"], cwd=tmp_path, check=True)
    assert subprocess.run(["./p"], cwd=tmp_path, capture_output=True).stdout \
        == subprocess.run(["./q"], cwd=tmp_path, capture_output=True).stdout


def test_the_shared_copy_of_a_source_takes_the_static_copys_verdict(tmp_path):
    """A source compiled twice, as the static copy and with -fPIC -DPIC for a
    shared library, is searched once: the second compile's IR differs only
    in what position independence changes, so it builds the first one's
    winner alone (nothing when the user's level won), still measured
    against its own object.  Other code is searched in full."""
    from mirecc.tasks.code_size.build import object_sizes

    env = env_for(tmp_path, heads_with(tmp_path, ["default<Oz>", "default<O3>"]), k=2)
    (tmp_path / "p.c").write_text(SOURCE)

    def explain(*flags: str, source: str = "p.c", out: str = "ours.o") -> dict:
        import json
        proc = subprocess.run([MIRECC, "--explain=json", *flags, "-c", source, "-o", out],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=True)
        return json.loads(proc.stdout)["verified"]["code-size"]

    static = explain("-Os", out="static.o")
    assert static["built"] == 2 and static["winner"] == "default<Oz>"
    shared = explain("-Os", "-fPIC", "-DPIC", out="shared.o")
    assert shared["from_twin"] and shared["from_cache"] and shared["built"] == 1
    assert shared["winner"] == "default<Oz>" and set(shared["sizes"]) == {"-Os", "default<Oz>"}
    assert "same code" in shared["skipped"]["default<O3>"]
    subprocess.run([CLANG, "-Os", "-fPIC", "-DPIC", "-c", "p.c", "-o", "plain.o"],
                   cwd=tmp_path, check=True)
    assert object_sizes(str(tmp_path / "shared.o"), True)[0] == shared["sizes"]["default<Oz>"] \
        < object_sizes(str(tmp_path / "plain.o"), True)[0]
    assert run_program(tmp_path, tmp_path / "shared.o") == \
        run_program(tmp_path, tmp_path / "plain.o")
    # a define the code reads makes other code: searched in full
    (tmp_path / "q.c").write_text(SOURCE + "#ifdef PIC\nint pic_only(int x) { return x * 7; }"
                                           "\n#endif\n")
    # (without PIC defined it is p.c's code, whatever the file: a twin)
    assert explain("-Os", source="q.c", out="q.o")["from_twin"]
    other = explain("-Os", "-fPIC", "-DPIC", source="q.c", out="q-shared.o")
    assert not other["from_twin"] and other["built"] == 2
    # where the user's level won (default<O3> is larger at -Os), the shared
    # copy builds nothing and is clang's
    env = env_for(tmp_path, heads_with(tmp_path / "o3", ["default<O3>"]), k=1)
    assert explain("-Os", out="static-3.o")["winner"] == "-Os"
    twin = explain("-Os", "-fPIC", out="shared-3.o")
    assert twin["from_twin"] and twin["built"] == 0 and twin["winner"] == "-Os"
    subprocess.run([CLANG, "-Os", "-fPIC", "-c", "p.c", "-o", "plain-3.o"], cwd=tmp_path,
                   check=True)
    assert (tmp_path / "shared-3.o").read_bytes() == (tmp_path / "plain-3.o").read_bytes()
    counts = stats(env)
    assert counts["verified.code-size.from-twin"] == 3


def test_the_code_digest_ignores_position_independence_and_metadata_only(tmp_path):
    from mirecc.tasks.code_size.winners import code_digest

    (tmp_path / "p.c").write_text(SOURCE)
    texts = {}
    for name, flags in (("pie", []), ("pic", ["-fPIC"]), ("nopic", ["-fno-pic"]),
                        ("other", ["-DN=3"]), ("pie-g", ["-g"]), ("pic-g", ["-fPIC", "-g"])):
        subprocess.run([CLANG, "-Oz", *flags, "-S", "-emit-llvm", "-Xclang",
                        "-disable-llvm-passes", "p.c", "-o", f"{name}.ll"], cwd=tmp_path,
                       check=True)
        texts[name] = (tmp_path / f"{name}.ll").read_bytes()
    assert texts["pie"] != texts["pic"]
    assert code_digest(texts["pie"]) == code_digest(texts["pic"]) == code_digest(texts["nopic"]) \
        == code_digest(texts["other"])      # a define the code never reads
    # debug information renumbers every metadata node: the same code still
    assert texts["pie-g"] != texts["pic-g"]
    assert code_digest(texts["pie-g"]) == code_digest(texts["pic-g"])
    changed = texts["pie"].replace(b"i32 100", b"i32 101", 1)
    assert changed != texts["pie"] and code_digest(changed) != code_digest(texts["pie"])


def test_under_a_serial_make_the_first_candidate_is_built_beside_the_users_compile(tmp_path):
    """A serial make leaves a core idle: the IR is read and the first
    candidate built there while the user's own compile runs, and the build
    step takes that object: the same objects as without make; a TU the
    gate answers, or whose early candidate fails, is clang's."""
    (tmp_path / "p.c").write_text(SOURCE)
    subprocess.run([CLANG, "-Os", "-c", "p.c", "-o", "plain.o"], cwd=tmp_path, check=True)
    plain = (tmp_path / "plain.o").read_bytes()
    cases = {"searched": heads_with(tmp_path / "searched", ["default<Oz>", "default<O1>"]),
             "gated": _gate_spec(tmp_path / "gated", {"default<Oz>": -8.0}),
             "failing": heads_with(tmp_path / "failing", ["no-such-pass"])}
    for case, heads in cases.items():
        objects = {}
        for make in (None, ""):
            where = tmp_path / case / ("shell" if make is None else "make")
            where.mkdir(parents=True)
            env = env_for(where, heads, k=2, budget=1)
            env.pop("MAKEFLAGS", None)
            if make is not None:
                env["MAKEFLAGS"] = make            # make -j1: one job at a time
            out = f"{case}-{'make' if make is not None else 'shell'}.o"
            proc = subprocess.run([MIRECC, "-Os", "-c", "p.c", "-o", out], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0 and proc.stderr == "", (case, proc.stderr)
            objects[make] = (tmp_path / out).read_bytes()
            early = stats(env).get("verified.code-size.early", 0)
            assert early == (case == "searched" and make is not None), (case, make)
        assert objects[None] == objects[""], case
        assert (objects[""] != plain) if case == "searched" else (objects[""] == plain), case
    assert not [p.name for p in tmp_path.iterdir() if ".mirecc-" in p.name]


PER_FUNCTION_SOURCE = """\
static int table[64];
static int square(int x) { int s = 0; for (int i = 0; i < x; i++) s += x; return s; }
int sum(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * 3; return s; }
int pick(int k) {
  switch (k) { case 0: return 11; case 1: return 29; case 2: return 37; case 3: return 41;
               case 4: return 53; default: return square(k) + table[k & 63]; }
}
void both(int *a, int *b, int n, int c) {
  for (int i = 0; i < n; i++) { if (c) a[i] = b[i] + 1; else a[i] = b[i] - 1; }
}
"""


def test_per_function_pipelines_linked_back_keep_each_winner(tmp_path):
    """benchmarks/size_per_function.py: after -Oz's prefix, each function
    through the pipeline it won gives, in the linked-back object, the
    machine code that pipeline gave it alone; the functions masked while
    another pipeline ran get their size attributes back."""
    from benchmark_module import load_benchmark

    pf = load_benchmark("size_per_function")
    src = tmp_path / "m.c"
    src.write_text(PER_FUNCTION_SOURCE)
    bc = tmp_path / "m.bc"
    subprocess.run([CLANG, "-Oz", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    opt, nm = CLANG.replace("clang", "opt"), CLANG.replace("clang", "llvm-nm")
    prefix, oz, tail = pf.oz_parts(opt)
    assert prefix.startswith("annotation2metadata") and oz.startswith("function<eager-inv>(")
    pipes = pf.function_pipelines(oz, prefix)
    assert pipes["-Oz"] == oz[oz.index("(") + 1:-1] and pipes["nothing"] == ""
    prefix_ll = tmp_path / "prefix.ll"
    subprocess.run([opt, f"-passes={prefix}", "-S", str(bc), "-o", str(prefix_ll)], check=True)

    def sizes(ll):
        obj = tmp_path / "x.o"
        subprocess.run([CLANG, "-Oz", "-c", "-x", "ir", str(ll), "-Xclang",
                        "-disable-llvm-passes", "-o", str(obj)], check=True)
        return pf.function_sizes(nm, str(obj))

    alone = {}
    for name in ("-Oz", "no switch tables", "no LICM, no loop sink"):
        ll = tmp_path / "alone.ll"
        subprocess.run([opt, f"-passes=function({pipes[name]}),{tail}", "-S", str(prefix_ll),
                        "-o", str(ll)], check=True)
        alone[name] = sizes(ll)
    assert set(alone["-Oz"]) == {"sum", "pick", "both"}   # square inlined by the prefix
    # the pipelines differ on these functions, so the test can tell them apart
    assert alone["no switch tables"]["pick"] != alone["-Oz"]["pick"]
    assert alone["no LICM, no loop sink"]["both"] != alone["-Oz"]["both"]
    winners = {"pick": "no switch tables", "both": "no LICM, no loop sink", "sum": "-Oz"}
    linked = pf.link_back(opt, prefix_ll, winners, pipes, tail, tmp_path)
    got = sizes(linked)
    assert got == {f: alone[w][f] for f, w in winners.items()}
    text = linked.read_text()
    assert "optnone" not in text and "minsize" in text


def test_the_code_size_ranking_is_judged_as_trials_saved():
    """mire bench encoder's code-size cases: a pipeline's "speedup" is -Oz's
    bytes over its bytes, a failed build is never kept; held out by package,
    the statistics' forest learns which pipeline suits which module where the
    library's fixed order cannot."""
    import numpy as np

    from mirecc.learn.judge import Judged, judge
    from mirecc.tasks.code_size.offline.judge import cases_of, evaluate
    from mirecc.tasks.code_size.offline.rank import Table

    class M:
        def __init__(self, origin, sha):
            self.origin, self.sha256 = origin, sha

    rng = np.random.default_rng(0)
    n = 60
    stats = rng.uniform(0, 100, size=(n, 3))
    big = stats[:, 0] > 50
    table = Table.__new__(Table)
    table.modules = [M(f"pkg{i % 6}", f"m{i}") for i in range(n)]
    table.library, table.objective = ["a", "b", "c"], "text"
    # pipeline a: 10% smaller on small modules, 10% larger on big ones; b the other way
    table.text = np.stack([np.where(big, -0.1, 0.1), np.where(big, 0.1, -0.1),
                           np.full(n, -np.inf)], axis=1)
    cases = cases_of(table)
    assert cases[0].program == "pkg0" and cases[0].bad == {2}
    assert abs(cases[0].speed[0] * (1 - table.text[0, 0]) - 1) < 1e-9
    assert all(abs(c.oracle - 1 / 0.9) < 1e-9 for c in cases)
    rankings = evaluate(table, cases, stats, {}, ["statistics"])
    assert set(rankings) == {"library order", "most frequent winners", "statistics"}
    j = Judged("code-size ranking", cases, rankings, 0.0, 3)
    results = judge(j, 200)
    assert results["statistics"]["share"] > 0.5
    assert results["library order"]["share"] < 0.2
