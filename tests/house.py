"""The house's rules, read from the source tree (docs/layout.md).

Every module under ``mirecc/`` is parsed (never imported) and its
dependencies collected: ``import`` and ``from ... import`` statements at any
depth (inside functions too), relative ones resolved, ``importlib``'s
``import_module("...")`` with a constant, and every string constant that
names a mirecc module, with or without ``:attribute`` (the task hooks,
``Command`` modules, ``python -m`` lines).  Then:

- a dependency on a mirecc module that does not exist is an error;
- the modules have no import circle;
- a module imports only its own package's layer or a lower one
  (:data:`LAYERS`), and a task folder no other task folder;
- the one exception: :data:`REGISTRY`'s :data:`TASK_MODULES` list names the
  task folders (it loads their declarations), and those names are exactly
  the folders under ``mirecc/tasks/``.
"""
from __future__ import annotations

import ast
from pathlib import Path

#: the layers, lowest first: a package may import its own and those before it
LAYERS = ("util", "store", "ir", "frontend", "graph", "encoder", "taskapi", "learn", "plugin",
          "runtime", "corpus", "tasks", "tu", "driver", "cli")
#: the module that names the task folders
REGISTRY = "mirecc.taskapi.registry"
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
    return problems
