"""The one registry of tasks, and where their heads are installed.

Tasks: :data:`TASK_MODULES` names each task folder (one line per folder);
its ``__init__.py`` has ``TASKS``, a tuple of :class:`mirecc.taskapi.api.Task`
declarations.  Declarations are plain data (standard library only), so the
driver can read every task's name, languages and settings on each compile.

Heads: found with directory listings and line scans only, because the driver
asks "is a head installed for this language, with a use in this build?" on
every optimised compile, and must answer it without importing anything
heavy (no PyYAML, no numpy).

The language check: a head's ``spec.yaml`` may name the source languages it
applies to with a ``languages:`` key at the top level, as a flow list on one
line (``languages: [cl]``) or as a block list (``languages:`` followed by
``- cl`` lines).  :func:`spec_languages` finds it with a line scan, not a YAML
parser; a spec without that key (or one the scan cannot read) applies to
every language, so an unreadable spec still reaches the pipeline, which
reports it.  Language names are clang's (``c``, ``c++``, ``cl``); the
preprocessed forms (``cpp-output``, ``c++-cpp-output``) count as ``c`` and
``c++``.  Installing OpenCL-only heads therefore does not make a C or C++
compile run the ML side run.
"""

from __future__ import annotations

import importlib
import os

from mirecc.taskapi.api import HeadError

#: the task folders, one line each (their ``TASKS`` declarations)
TASK_MODULES = (
    "mirecc.tasks.loop_vectorize",
    "mirecc.tasks.opencl",
    "mirecc.tasks.code_size",
    "mirecc.tasks.openmp",
    "mirecc.tasks.numa",
    "mirecc.tasks.cuda_block",
    "mirecc.tasks.loop_nests",
)

_TASKS: dict | None = None


def tasks() -> dict:
    """task name -> :class:`mirecc.taskapi.api.Task`, every registered task."""
    global _TASKS
    if _TASKS is None:
        found = {}
        for module in TASK_MODULES:
            for task in importlib.import_module(module).TASKS:
                if task.name in found:
                    raise RuntimeError(f"task {task.name} is declared twice ({module})")
                found[task.name] = task
        _TASKS = found
    return _TASKS


def task(name: str):
    """The declaration of task ``name``, or None for a task this mirecc does not know."""
    return tasks().get(name)


class HeadSpec:
    """A head directory: ``<dir>/<name>/spec.yaml``, not yet read."""

    __slots__ = ("name", "directory")

    @property
    def spec_path(self) -> str:
        return os.path.join(self.directory, "spec.yaml")

    def __init__(self, name: str, directory: str):
        self.name = name
        self.directory = directory

    def __repr__(self) -> str:
        return f"HeadSpec({self.name!r}, {self.directory!r})"


def default_heads_dirs(config) -> list[str]:
    """The configured directory, which replaces the shipped heads (a user's
    own device-mapping head must not decide beside the shipped one; copy a
    shipped head into it to keep that one too); else the package's own
    ``heads``."""
    if config.heads_dir:
        return [config.heads_dir]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mirecc/
    installed = os.path.join(package, "heads")  # pip install: heads/ is package data
    source_tree = os.path.join(os.path.dirname(package), "heads")  # editable / checkout
    return [installed if os.path.isdir(installed) else source_tree]


def find_head_specs(dirs: list[str]) -> list[HeadSpec]:
    specs = []
    for directory in dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isfile(os.path.join(path, "spec.yaml")):
                specs.append(HeadSpec(name, path))
    return specs


# clang language -> the name heads use for it
_SPEC_LANGUAGE = {"cpp-output": "c", "c++-cpp-output": "c++"}


def spec_language(language: str) -> str:
    """The language name a head's ``languages:`` list uses for a clang language."""
    return _SPEC_LANGUAGE.get(language, language)


def _unquote(item: str) -> str:
    item = item.strip()
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        item = item[1:-1]
    return item.strip()


def spec_languages(path: str) -> frozenset | None:
    """The languages a ``spec.yaml`` names in its top-level ``languages:`` key,
    found with a line scan; ``None`` (every language) when there is no such
    key or the scan cannot read it."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read(65536).splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for i, line in enumerate(lines):
        if not line.startswith("languages:"):
            continue
        value = line[len("languages:"):].split(" #", 1)[0].strip()
        if value.startswith("[") and value.endswith("]"):
            items = [_unquote(x) for x in value[1:-1].split(",")]
            return frozenset(x for x in items if x)
        if value:
            return None  # a scalar or something the scan does not read
        items = []
        for nxt in lines[i + 1:]:
            stripped = nxt.split(" #", 1)[0].strip()
            if not stripped or stripped.startswith("#"):
                continue
            if not nxt[:1].isspace() and not stripped.startswith("-"):
                break  # the next top-level key
            if not stripped.startswith("-"):
                return None
            items.append(_unquote(stripped[1:]))
        return frozenset(x for x in items if x) or None
    return None


def applies_to_any(spec: HeadSpec, languages) -> bool:
    """Does the head apply to one of the clang ``languages``?"""
    names = spec_languages(spec.spec_path)
    return names is None or bool(names & {spec_language(lang) for lang in languages})


def spec_task(path: str) -> str | None:
    """The top-level ``task:`` of a ``spec.yaml``, found with a line scan."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh.read(65536).splitlines():
                if line.startswith("task:"):
                    return _unquote(line[len("task:"):].split(" #", 1)[0]) or None
    except (OSError, UnicodeDecodeError):
        pass
    return None


_UNREAD = object()


def has_use(spec: HeadSpec, config, opt_level: str | None = None, declared=_UNREAD) -> bool:
    """Would running the head change or record anything in this build (at
    ``opt_level``, ``"0"`` for none; None: any)?  A head of a task whose
    decisions are off (or advisory) is only recorded; none decides at a
    level its task does not name; a head of an unknown task or an
    unreadable spec reaches the pipeline, which reports it.  ``declared``:
    the head's task when the caller has read its spec already."""
    if declared is _UNREAD:
        declared = task(spec_task(spec.spec_path) or "")
    if declared is None:
        return True
    if opt_level is not None and declared.opt_levels is not None \
            and opt_level not in declared.opt_levels:
        return False
    return declared.applies(config) or bool(config.record)


def heads_for_languages(dirs: list[str], languages) -> list[HeadSpec]:
    """The installed heads that apply to any of the clang ``languages``."""
    return [spec for spec in find_head_specs(dirs) if applies_to_any(spec, languages)]


def load_head(spec: HeadSpec, config=None):
    # lazy: pathlib and PyYAML (~40 ms): only a run of the heads loads one, never a probe
    from pathlib import Path
    import yaml

    path = Path(spec.directory) / "spec.yaml"
    # libyaml's loader where PyYAML has it: ~20x faster on the code-size
    # spec (50 KB of pipelines), which an in-process compile reads each time
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())  # PyYAML's messages span lines
        raise HeadError(f"{path}: cannot read head spec: {detail}") from None
    name = data.get("task") if isinstance(data, dict) else None
    if not isinstance(name, str):
        raise HeadError(f"{path}: head spec has no 'task' key")
    declared = task(name)
    if declared is None:
        known = ", ".join(sorted(tasks())) or "none yet"
        raise HeadError(f"{path}: unknown task '{name}' (tasks this mirecc knows: {known})")
    head = declared.head_class()
    if head is None:
        raise HeadError(f"{path}: task '{name}' takes no head in this mirecc (its decisions "
                        f"come from decisions profiles)")
    return head(Path(spec.directory), data, config)
