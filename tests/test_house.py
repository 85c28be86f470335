"""The house (docs/layout.md): the layers are packages, each imports only its
own layer and those below, no module imports another in a circle, no task
imports another, and a new task is its folder plus one registry line.

The rules are read from the source (:mod:`house`), every module under
``mirecc/`` included; the checks are shown to fail on planted imports in a
copy of the tree, and a toy task is added to a copy and run by the driver."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import house
from envs import isolated_env

REPO = Path(__file__).resolve().parents[1]
CLANG = "/usr/bin/clang-14"


def copy_tree(tmp_path: Path) -> Path:
    """A copy of the package (not its data files) to plant things in."""
    root = tmp_path / "tree"
    def skip(directory, names):
        return [n for n in names if n == "__pycache__"
                or (Path(directory).name == "data" and n == "encoder")]

    shutil.copytree(REPO / "mirecc", root / "mirecc", ignore=skip)
    return root


def plant(root: Path, module: str, line: str, inside_function: bool = True) -> None:
    path = root / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = root / module.replace(".", "/") / "__init__.py"
    body = f"\n\ndef _planted():\n    {line}\n" if inside_function else f"\n{line}\n"
    path.write_text(path.read_text() + body)


def test_the_tree_keeps_the_house():
    assert house.violations(REPO) == []


def test_every_module_is_seen_and_every_package_is_in_a_layer():
    known = house.modules(REPO)
    on_disk = list((REPO / "mirecc").rglob("*.py"))
    assert len(known) == len(on_disk) > 150
    packages = {name.split(".")[1] for name in known if name.count(".") >= 1
                and name not in house.ROOT_MODULES}
    assert packages == set(house.LAYERS)
    edges, errors = house.dependencies(REPO)
    assert not errors
    # relative imports, lazy imports and hook strings are dependencies too
    assert "mirecc.graph.irinfo" in edges["mirecc.graph.fallback"]          # from .irinfo
    assert "mirecc.tasks.code_size.early" in edges["mirecc.tasks.code_size"]  # in a method
    assert "mirecc.tu.server" in edges["mirecc.tu.mlpath"]                  # inside a function
    # a declaration's lazy relative imports: its mire run part, its bench suite
    lazy = {"mirecc.tasks.numa.run", "mirecc.tasks.numa.offline.bench"}
    assert lazy <= edges["mirecc.tasks.numa"]


def test_each_layer_says_what_it_may_import():
    for layer in house.LAYERS:
        doc = ast.get_docstring(ast.parse((REPO / "mirecc" / layer / "__init__.py").read_text()))
        assert doc and f"Layer {house.LAYERS.index(layer) + 1} " in doc, layer
        assert "may import" in doc or "nothing of mirecc" in doc, layer


def test_the_registry_lists_exactly_the_task_folders():
    from mirecc.taskapi.registry import TASK_MODULES

    assert house.task_modules(REPO) == TASK_MODULES
    assert {m.rsplit(".", 1)[1] for m in TASK_MODULES} == {
        p.name for p in (REPO / "mirecc" / "tasks").iterdir() if (p / "__init__.py").is_file()}


@pytest.mark.parametrize("module, line, expected", [
    # a low layer reaching up, inside a function
    ("mirecc.util.fsutil", "from mirecc.cli import bench", "mirecc.cli is above mirecc.util"),
    # a task reaching up into the per-TU path
    ("mirecc.tasks.numa.head", "from mirecc.tu import mlpath", "mirecc.tu is above mirecc.tasks"),
    # the launcher reaching into a task (it takes the tasks' parts from the registry)
    ("mirecc.launch.run", "from mirecc.tasks.numa import run",
     "mirecc.tasks is above mirecc.launch"),
    # a task importing another, relatively
    ("mirecc.tasks.numa.head", "from ...tasks.openmp import head",
     "a task imports another task"),
    # a circle inside one layer
    ("mirecc.ir.text", "import mirecc.ir.regions", "import circle: mirecc.ir.regions <-> "
                                                   "mirecc.ir.text"),
    # a hook string naming a module that is not there
    ("mirecc.tasks.numa", "HOOK = 'mirecc.tasks.numa.gone:run'", "names mirecc.tasks.numa.gone"),
    # an import inside a function that does not say why
    ("mirecc.tu.explain", "import json", "mirecc.tu.explain:"),
    # a second place for a call's state beside the one context
    ("mirecc.tu.mlpath", "class Outcome: pass", "mirecc.tu.mlpath defines Outcome"),
    ("mirecc.driver.clang", "class _Guard: pass", "mirecc.driver.clang defines _Guard"),
])
def test_a_planted_import_breaks_the_house(tmp_path, module, line, expected):
    root = copy_tree(tmp_path)
    assert house.violations(root) == []
    plant(root, module, line)
    found = house.violations(root)
    assert any(expected in problem for problem in found), found


def test_a_task_folder_missing_from_the_registry_breaks_the_house(tmp_path):
    root = copy_tree(tmp_path)
    (root / "mirecc" / "tasks" / "stray").mkdir()
    (root / "mirecc" / "tasks" / "stray" / "__init__.py").write_text("TASKS = ()\n")
    assert any("is not the task folders" in p for p in house.violations(root))


def test_outside_the_task_folders_no_module_names_a_task():
    """A task reaches the generic path through its declaration only: no module
    outside ``mirecc/tasks/`` imports a task or writes a task's name."""
    from mirecc.taskapi.registry import tasks

    edges, _ = house.dependencies(REPO)
    names = set(tasks())
    # `mire bench programs` still reads the code-size library's length (its
    # -Oz panel's best-of-the-library column): the one module above the tasks
    # that knows one
    known = {"mirecc.cli.bench": {"mirecc.tasks.code_size.head"}}
    # LLVM's own pass name in optimisation remarks (the feedback labels'
    # column), which the loop-vectorization task happens to share
    llvm_names = {"mirecc.encoder.feedback": {"loop-vectorize"}}
    for module, deps in sorted(edges.items()):
        if module.startswith("mirecc.tasks.") or module == house.REGISTRY:
            continue
        into_tasks = {d for d in deps if d.startswith("mirecc.tasks.")}
        assert into_tasks == known.get(module, set()), module
        path, _ = house.modules(REPO)[module]
        strings = {n.value for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.Constant) and n.value in names}
        assert strings <= llvm_names.get(module, set()), (module, strings)


TOY_DECLARATION = '''"""A toy task: counts a TU's loops (advisory)."""
from mirecc.taskapi.api import Task


class Toy(Task):
    name = "toy"
    summary = "counts the loops of a TU"
    languages = frozenset({"c"})
    measured = "nothing: a test's task"

    def head_class(self):
        from mirecc.tasks.toy.head import ToyHead  # lazy: declarations are read on every compile

        return ToyHead


TASKS = (Toy(),)
'''

TOY_HEAD = '''"""The toy head: one advisory decision per TU, the number of its loops."""
from mirecc.taskapi.records import Candidate, Decision, Ranking


class ToyHead:
    def __init__(self, directory, spec, config=None):
        self.name, self.version = directory.name, "toy-1"

    def applies_to(self, request):
        return True

    def why_not(self, request):
        return ""

    def rank(self, ctx):
        value = {"toy.loops": len(ctx.loops)}
        return [Ranking(target="module", candidates=(Candidate(value, 1.0),))]

    def decide(self, ctx, rankings):
        [ranking] = rankings
        value = ranking.candidates[0].value
        return [Decision(task="toy", target="module", value=value, default=None,
                         confidence=None, reason=f"{value['toy.loops']} loops seen",
                         applied=False, advisory=True)]
'''


def test_a_toy_task_is_its_folder_and_one_registry_line(tmp_path):
    """Adding a task touches no shared file but the registry's one line: the
    driver then runs its head, and --explain and --mirecc-help show it."""
    root = copy_tree(tmp_path)
    before = {p: p.read_bytes() for p in (root / "mirecc").rglob("*") if p.is_file()}
    folder = root / "mirecc" / "tasks" / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY_DECLARATION)
    (folder / "head.py").write_text(TOY_HEAD)
    registry = root / "mirecc" / "taskapi" / "registry.py"
    text = registry.read_text()
    line = '    "mirecc.tasks.loop_nests",\n'
    assert text.count(line) == 1
    registry.write_text(text.replace(line, line + '    "mirecc.tasks.toy",\n'))
    heads = tmp_path / "heads" / "toy"
    heads.mkdir(parents=True)
    (heads / "spec.yaml").write_text("task: toy\nlanguages: [c]\n")

    after = {p: p.read_bytes() for p in (root / "mirecc").rglob("*") if p.is_file()}
    added = sorted(str(p.relative_to(root)) for p in after.keys() - before.keys())
    changed = sorted(str(p.relative_to(root)) for p in before if after[p] != before[p])
    assert added == ["mirecc/tasks/toy/__init__.py", "mirecc/tasks/toy/head.py"]
    assert changed == ["mirecc/taskapi/registry.py"]
    assert house.violations(root) == []

    src = tmp_path / "loops.c"
    src.write_text("int f(int *a, int n) { int s = 0;\n"
                   "  for (int i = 0; i < n; i++) s += a[i];\n"
                   "  for (int i = 0; i < n; i++) s ^= a[i] * 3;\n  return s; }\n")
    env = isolated_env(tmp_path, MIRECC_HEADS_DIR=str(heads.parent), MIRECC_CC=CLANG,
                       PYTHONPATH=str(root))
    run = [sys.executable, "-m", "mirecc"]
    proc = subprocess.run(run + ["--explain=json", "-O2", "-c", str(src), "-o",
                                 str(tmp_path / "loops.o")],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    [unit] = report["translation_units"]
    [decision] = unit["decisions"]
    assert decision["task"] == "toy" and decision["value"] == {"toy.loops": 2}
    assert not decision["applied"]
    where = subprocess.run([sys.executable, "-c", "import mirecc; print(mirecc.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert where.startswith(str(root))
    helped = subprocess.run(run + ["--mirecc-help"], cwd=tmp_path, env=env, capture_output=True,
                            text=True)
    assert "toy" in helped.stdout and "counts the loops of a TU" in helped.stdout
    # the same object as clang's: an advisory task changes nothing
    subprocess.run([CLANG, "-O2", "-c", str(src), "-o", str(tmp_path / "plain.o")], check=True,
                   cwd=tmp_path, env={**os.environ, "LC_ALL": "C"})
    assert (tmp_path / "loops.o").read_bytes() == (tmp_path / "plain.o").read_bytes()


#: the driver calling the per-TU path back and forth (planted in a copy)
BACK_AND_FORTH = """    for _ in range(3):
        stats.searched({})
        _parse_own_options([])
"""


def _traced(root: Path, tmp_path: Path) -> dict:
    (tmp_path / "dot.c").write_text("int dot(const int *a, const int *b, int n) {\n"
                                    "  int s = 0;\n  for (int i = 0; i < n; i++) "
                                    "s += a[i] * b[i];\n  return s;\n}\n")
    # the shipped heads: the loop-vectorization head reads the IR at -O2
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(REPO / "heads"))
    return house.trace_compile(root, ["--explain", "-O2", "-c", "dot.c", "-o", "dot.o"],
                               tmp_path, env)


@pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")
def test_one_compile_crosses_between_driver_and_tu_at_most_four_times(tmp_path):
    """The driver classifies and hands the call to the per-TU path once: a
    traced ``--explain -O2 -c`` compile crosses between them at most 4
    times (14 before the one context); planted calls back and forth in a
    copy of the tree break it."""
    traced = _traced(REPO, tmp_path)
    assert traced["rc"] == 0
    assert {"mirecc.tu.compile", "mirecc.tu.mlpath", "mirecc.tu.pipeline"} <= set(
        traced["modules"])   # the IR was read and the pipeline ran
    assert traced["switches"] <= 4, traced["path"]

    root = copy_tree(tmp_path)
    driver = root / "mirecc" / "driver" / "clang.py"
    text = driver.read_text()
    anchor = "    from mirecc.tu.compile import compile_call"
    assert text.count(anchor) == 1
    driver.write_text(text.replace(anchor, "    from mirecc.tu import stats\n"
                                           + BACK_AND_FORTH + anchor))
    (tmp_path / "copy").mkdir()
    planted = _traced(root, tmp_path / "copy")
    assert planted["rc"] == 0
    assert planted["switches"] >= traced["switches"] + 6 > 4, planted["path"]


TOY_COMPILER = '''"""A toy compiler: a newer clang (19), found where Debian puts it."""
from mirecc.frontend.clang import Clang


class NewerClang(Clang):
    name = "toy"

    def find(self, config, cxx):
        return ("/usr/bin/clang++-19" if cxx else "/usr/bin/clang-19"), "the toy's own clang"


COMPILER = NewerClang()
'''

CLANG19 = "/usr/bin/clang-19"


@pytest.mark.skipif(not os.access(CLANG19, os.X_OK), reason="needs clang-19")
def test_a_toy_compiler_is_its_module_and_one_registry_line(tmp_path):
    """Adding a compiler touches no shared file but the registry's one line:
    the driver then runs it for the whole path (the IR read by it, the
    object its own, byte for byte)."""
    root = copy_tree(tmp_path)
    before = {p: p.read_bytes() for p in (root / "mirecc").rglob("*") if p.is_file()}
    (root / "mirecc" / "frontend" / "toy.py").write_text(TOY_COMPILER)
    registry = root / "mirecc" / "frontend" / "compilers.py"
    text = registry.read_text()
    line = '    "nvcc": "mirecc.frontend.nvcc",\n'
    assert text.count(line) == 1
    registry.write_text(text.replace(line, line + '    "toy": "mirecc.frontend.toy",\n'))
    after = {p: p.read_bytes() for p in (root / "mirecc").rglob("*") if p.is_file()}
    added = sorted(str(p.relative_to(root)) for p in after.keys() - before.keys())
    changed = sorted(str(p.relative_to(root)) for p in before if after[p] != before[p])
    assert added == ["mirecc/frontend/toy.py"]
    assert changed == ["mirecc/frontend/compilers.py"]
    assert house.violations(root) == []

    src = tmp_path / "loops.c"
    src.write_text("int f(int *a, int n) { int s = 0;\n"
                   "  for (int i = 0; i < n; i++) s += a[i] * 3;\n  return s; }\n")
    env = isolated_env(tmp_path, PYTHONPATH=str(root))
    driver = ("import sys; from mirecc.driver.clang import main; "
              "sys.exit(main(sys.argv[1:], cxx=False, kind='toy'))")
    proc = subprocess.run([sys.executable, "-c", driver, "--explain=json", "-O2", "-c",
                           str(src), "-o", str(tmp_path / "toy.o")],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["compiler"] == CLANG19 and report["compiler_chosen"] == "the toy's own clang"
    [unit] = report["translation_units"]
    assert unit["ir"]["bytes"] > 0 and unit["computed"] == "in process"
    subprocess.run([CLANG19, "-O2", "-c", str(src), "-o", str(tmp_path / "own.o")], check=True)
    assert (tmp_path / "toy.o").read_bytes() == (tmp_path / "own.o").read_bytes()
