"""The house's rules, read from the source tree (docs/layout.md).

Every module under ``mirecc/`` is parsed (never imported) and its
dependencies collected: ``import`` and ``from ... import`` statements at any
depth (inside functions too), relative ones resolved, ``importlib``'s
``import_module("...")`` with a constant, and every string constant that
names a mirecc module, with or without ``:attribute`` (``Command``
modules, ``python -m`` lines).  Then:

- a dependency on a mirecc module that does not exist is an error;
- the modules have no import circle;
- a module imports only its own package's layer or a lower one
  (:data:`LAYERS`), and a task folder no other task folder;
- the one exception: :data:`REGISTRY`'s :data:`TASK_MODULES` list names the
  task folders (it loads their declarations), and those names are exactly
  the folders under ``mirecc/tasks/``;
- a compiler call's state is one type (:data:`CONTEXT`): no other class of
  the compile path's layers is a context, an outcome, a guard or a
  ``Compile`` (:func:`context_types`);
- an import inside a function says, in a comment, why it is not at the top
  (:func:`unexplained_imports`).

:func:`trace_compile` runs one compile of a tree in process and counts
how often it crosses between the driver and the per-TU path.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

#: the layers, lowest first: a package may import its own and those before it
LAYERS = ("util", "store", "ir", "frontend", "graph", "encoder", "taskapi", "learn", "plugin",
          "runtime", "corpus", "launch", "tasks", "tu", "driver", "cli")
#: the module that names the task folders
REGISTRY = "mirecc.taskapi.registry"
#: the one type that holds a compiler call's state, and its module
CONTEXT = ("CompileContext", "mirecc.tu.context")
#: modules outside every layer: the package's version, ``python -m mirecc``
ROOT_MODULES = {"mirecc": -1, "mirecc.__main__": len(LAYERS)}


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for every module under ``root/mirecc``."""
    out = {}
    for path in sorted((root / "mirecc").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        out[".".join(parts)] = (path, package)
    return out


def _named_module(text: str) -> str | None:
    """The mirecc module a string names (``a.b``, ``a.b:attr``), or None."""
    name = text.split(":", 1)[0]
    if not name.startswith("mirecc.") or not name.replace(".", "").replace("_", "").isalnum():
        return None
    return name


def dependencies(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the mirecc modules it depends on, errors)."""
    known = modules(root)
    edges: dict[str, set[str]] = {}
    errors: list[str] = []
    for name, (path, package) in known.items():
        tree = ast.parse(path.read_text(), str(path))
        here = name if package else name.rpartition(".")[0]
        wanted: set[tuple[str, int]] = set()

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted |= {(a.name, node.lineno) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here
                    for _ in range(node.level - 1):
                        parent = parent.rpartition(".")[0]
                    base = f"{parent}.{base}" if base else parent
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    wanted.add((full if full in known else base, node.lineno))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = _named_module(node.value)
                # a hook ("module:attribute") must name a module; a bare
                # dotted string may be a file name ("mirecc.profile")
                if named and (named in known or ":" in node.value):
                    wanted.add((named, node.lineno))
        deps = set()
        for target, line in wanted:
            if target != "mirecc" and not target.startswith("mirecc."):
                continue
            if target not in known:
                errors.append(f"{path.relative_to(root)}:{line}: names {target}, "
                              f"which is no module")
                continue
            if target != name:
                deps.add(target)
        edges[name] = deps
    return edges, errors


def task_modules(root: Path) -> tuple[str, ...]:
    """The registry's list of task folders, read from its source."""
    tree = ast.parse((root / (REGISTRY.replace(".", "/") + ".py")).read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (node.targets[0] if isinstance(
            node, ast.Assign) else None)
        if getattr(target, "id", None) == "TASK_MODULES":
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("the registry has no TASK_MODULES")


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected sets of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> tuple[int, str]:
    """(rank, package) of a module: its layer's place in :data:`LAYERS`."""
    if module in ROOT_MODULES:
        return ROOT_MODULES[module], module
    package = module.split(".")[1]
    if package not in LAYERS:
        raise AssertionError(f"{module}: mirecc.{package} is in no layer of the house")
    return LAYERS.index(package), package


def task_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "tasks" else None


def violations(root: Path) -> list[str]:
    """Every broken rule of the house in the tree at ``root``, one line each."""
    edges, errors = dependencies(root)
    problems = list(errors)
    listed = task_modules(root)
    folders = {f"mirecc.tasks.{p.name}" for p in (root / "mirecc" / "tasks").iterdir()
               if (p / "__init__.py").is_file()}
    if set(listed) != folders:
        problems.append(f"TASK_MODULES {sorted(listed)} is not the task folders {sorted(folders)}")
    # the registry loads the declarations it lists: not an import of a layer
    edges[REGISTRY] = {d for d in edges.get(REGISTRY, ()) if d not in listed}
    for group in circles(edges):
        problems.append("import circle: " + " <-> ".join(group))
    for module, deps in sorted(edges.items()):
        rank, package = layer_of(module)
        for dep in sorted(deps):
            dep_rank, dep_package = layer_of(dep)
            if dep_rank > rank or (dep_rank == rank and dep_package != package):
                problems.append(f"{module} imports {dep}: mirecc.{dep_package} is above "
                                f"mirecc.{package}")
            elif task_of(module) and task_of(dep) and task_of(module) != task_of(dep):
                problems.append(f"{module} imports {dep}: a task imports another task")
    for module, line, text in unexplained_imports(root):
        problems.append(f"{module}:{line}: '{text}' inside a function without a comment "
                        f"saying why it is not at the top")
    for name, where in sorted(context_types(root).items()):
        for module in where:
            if (name, module) != CONTEXT:
                problems.append(f"{module} defines {name}: a call's state is one "
                                f"{CONTEXT[0]} ({CONTEXT[1]})")
    return problems


#: the traced compile (:func:`trace_compile`): the profile hook sees every
#: Python call made inside ``main`` after the driver is imported, and the
#: sequence of driver/TU layers is read off the calls' modules
TRACER = r'''
import json, sys
from mirecc.driver.clang import main
calls = []
def profile(frame, event, arg):
    if event == "call":
        calls.append(frame.f_globals.get("__name__", ""))
sys.setprofile(profile)
rc = main(sys.argv[2:], cxx=False)
sys.setprofile(None)
with open(sys.argv[1], "w") as out:
    json.dump({"rc": rc, "calls": [c for c in calls if c.startswith("mirecc")]}, out)
'''


def trace_compile(root: Path, args: list[str], cwd: Path, env: dict) -> dict:
    """Run the driver of the tree at ``root`` in process on ``args`` (a
    compile it returns from: a split compile, not one it hands to exec) and
    trace it: ``rc``, the mirecc ``modules`` whose code ran, the ``path``
    of layers (``driver``/``tu``) in call order with repeats folded, and
    its ``switches`` between the two."""
    import subprocess
    import sys

    out = cwd / "trace.json"
    proc = subprocess.run([sys.executable, "-c", TRACER, str(out), *args], cwd=cwd,
                          env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    if proc.returncode != 0 or not out.is_file():
        raise AssertionError(f"the traced compile failed: {proc.stderr}")
    traced = json.loads(out.read_text())
    path: list[str] = []
    for module in traced["calls"]:
        layer = module.split(".")[1] if module.count(".") else ""
        if layer in ("driver", "tu") and (not path or path[-1] != layer):
            path.append(layer)
    return {"rc": traced["rc"], "modules": sorted(set(traced["calls"])), "path": path,
            "switches": max(len(path) - 1, 0)}


def context_types(root: Path) -> dict[str, list[str]]:
    """Class name -> the modules of the compile path (``driver``, ``tu``,
    ``frontend``) that define it, for the names a call's state could hide
    behind: a ``Context``, a ``Compile``, an ``Outcome`` or a guard."""
    found: dict[str, list[str]] = {}
    for name, (path, _) in modules(root).items():
        if name.split(".")[1:2] not in (["driver"], ["tu"], ["frontend"]):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (
                    node.name in ("Compile", "Outcome") or node.name.endswith(("Context",
                                                                             "Guard"))):
                found.setdefault(node.name, []).append(name)
    return found


def unexplained_imports(root: Path) -> list[tuple[str, int, str]]:
    """(module, line, text) of each import inside a function that no comment
    explains: a comment on its line, on a line of its group of consecutive
    import lines, or on the line just before the group (the house keeps
    imports at the top of modules; one kept lazy for start-up says why)."""
    found = []
    for name, (path, _) in modules(root).items():
        lines = path.read_text().split("\n")
        tree = ast.parse("\n".join(lines), str(path))

        def is_import(text: str) -> bool:
            return text.strip().startswith(("from ", "import "))

        def walk(node, inside: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                    lo, hi = child.lineno - 1, (child.end_lineno or child.lineno) - 1
                    while lo > 0 and is_import(lines[lo - 1]):
                        lo -= 1
                    while hi + 1 < len(lines) and is_import(lines[hi + 1]):
                        hi += 1
                    if not any("#" in ln for ln in lines[lo:hi + 1]) \
                            and not (lo > 0 and lines[lo - 1].strip().startswith("#")):
                        found.append((name, child.lineno, lines[child.lineno - 1].strip()))
                walk(child, inside or isinstance(child, (ast.FunctionDef,
                                                         ast.AsyncFunctionDef)))

        walk(tree, False)
    return found
