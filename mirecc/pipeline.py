"""The decision pipeline: one translation unit's IR in, decisions out.

The interface is built to cross a process boundary: a ``TURequest`` and a
``TUResult`` are plain JSON, so the same ``Pipeline.run`` can later sit in a
per-user background server that keeps the model loaded (as sccache's daemon
does), while the driver falls back to calling it in-process when no server
answers.

Task heads plug in through ``TASKS``: a head directory holds ``spec.yaml``
with at least ``task: <name>``; the pipeline loads the head registered for
that task.  A head class is built as ``cls(directory, spec_dict, config)``
and has ``name``, ``version`` (part of the cache key), ``applies_to``,
``why_not`` and ``decide(request, summary) -> list[Decision]``; ``decide``
may raise :class:`NoDecision` to say why it decided nothing.  With no head
installed the pipeline decides nothing, and says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirecc.irinfo import ModuleInfo
from mirecc.registry import HeadSpec, applies_to_any, default_heads_dirs, find_head_specs
from mirecc.model import NO_MODEL_VERSION, ModelInfo

# Bumped when TUResult's meaning changes, so cached results are not reused.
# 2: Decision.advisory (a recorded prediction that changes nothing in the compile).
PIPELINE_SCHEMA = 2

# task name -> head class, or "module:Class" imported when a head of that task
# is loaded (so that nothing of a task is imported before a head needs it).
TASKS: dict[str, type | str] = {
    "opencl-device-mapping": "mirecc.tasks.opencl:DeviceMappingHead",
    "opencl-thread-coarsening": "mirecc.tasks.opencl:ThreadCoarseningHead",
    "loop-vectorize": "mirecc.vectorize.head:LoopVectorizeHead",
}


class HeadError(Exception):
    """A head directory is unusable (the message names the file)."""


class NoDecision(Exception):
    """Raised by a head's ``decide`` when it has nothing to decide for this
    TU; ``str()`` is the one-line reason --explain shows."""


@dataclass(frozen=True)
class Decision:
    task: str                 # e.g. "loop-vectorize"
    target: str               # what it applies to: a loop id, function, kernel
    value: dict               # e.g. {"vectorize.width": 8}
    default: dict | None      # what the compiler would do on its own, if known
    confidence: float         # head's confidence in [0, 1]
    reason: str               # one line for --explain
    applied: bool             # False when confidence was too low to act
    advisory: bool = False    # a prediction recorded for the user; nothing to apply


@dataclass(frozen=True)
class TURequest:
    """Everything a pipeline needs about one translation unit."""

    source: str
    language: str
    opt_level: str
    flags: tuple[str, ...]
    bitcode_path: str
    bitcode_sha256: str
    compiler: str = ""        # the clang that emitted the bitcode (and compiles the TU)


@dataclass
class TUResult:
    summary: ModuleInfo | None
    decisions: list[Decision] = field(default_factory=list)
    no_decision_reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "schema": PIPELINE_SCHEMA,
            "summary": self.summary.to_dict() if self.summary else None,
            "decisions": [asdict(d) for d in self.decisions],
            "no_decision_reasons": list(self.no_decision_reasons),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "TUResult":
        if d.get("schema") != PIPELINE_SCHEMA:
            raise ValueError("cached result has another schema")
        summary = ModuleInfo.from_dict(d["summary"]) if d.get("summary") else None
        return cls(summary, [Decision(**x) for x in d["decisions"]],
                   list(d["no_decision_reasons"]))


def task_class(task: str) -> type:
    """The head class registered for ``task`` (imported on first use)."""
    entry = TASKS[task]
    if isinstance(entry, str):
        import importlib

        module, _, attr = entry.partition(":")
        entry = TASKS[task] = getattr(importlib.import_module(module), attr)
    return entry


def load_head(spec: HeadSpec, config=None):
    import yaml

    path = Path(spec.directory) / "spec.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())  # PyYAML's messages span lines
        raise HeadError(f"{path}: cannot read head spec: {detail}") from None
    task = data.get("task") if isinstance(data, dict) else None
    if not isinstance(task, str):
        raise HeadError(f"{path}: head spec has no 'task' key")
    if task not in TASKS:
        known = ", ".join(sorted(TASKS)) or "none yet"
        raise HeadError(f"{path}: unknown task '{task}' (tasks this mirecc knows: {known})")
    return task_class(task)(Path(spec.directory), data, config)


class Pipeline:
    """Runs the installed heads over one translation unit at a time."""

    def __init__(self, heads: list, model: ModelInfo | None, searched: list[str],
                 other_languages: list[str] | None = None):
        self.heads = heads
        self.model = model
        self.searched = searched
        # installed heads left unloaded because they apply to other languages
        self.other_languages = other_languages or []

    @classmethod
    def load(cls, config, languages=None) -> "Pipeline":
        """Load the installed heads; with ``languages`` (clang language names),
        only those that apply to one of them (see ``registry.spec_languages``),
        so that a head for another language, even a broken one or one of a
        task this mirecc does not know, costs and breaks nothing here."""
        from mirecc.model import load_model

        dirs = default_heads_dirs(config)
        specs = find_head_specs(dirs)
        others = []
        if languages is not None:
            others = [s.name for s in specs if not applies_to_any(s, languages)]
            specs = [s for s in specs if applies_to_any(s, languages)]
        heads = [load_head(spec, config) for spec in specs]
        model = load_model(config.model) if config.model else None
        return cls(heads, model, dirs, others)

    @property
    def version(self) -> str:
        """Model and heads identity, part of every cache key."""
        model = self.model.cache_version if self.model else NO_MODEL_VERSION
        heads = ",".join(sorted(getattr(h, "version", type(h).__name__) for h in self.heads))
        return f"schema{PIPELINE_SCHEMA}|model={model}|heads={heads or 'none'}"

    def run(self, request: TURequest, summary: ModuleInfo | None) -> TUResult:
        result = TUResult(summary)
        if not self.heads:
            where = ", ".join(str(d) for d in self.searched)
            other = (f"; heads for other languages: {', '.join(self.other_languages)}"
                     if self.other_languages else "")
            result.no_decision_reasons.append(
                f"no task heads are installed for {request.language} "
                f"(searched: {where}{other})")
            return result
        for head in self.heads:
            if not head.applies_to(request):
                result.no_decision_reasons.append(f"{head.name}: {head.why_not(request)}")
                continue
            try:
                result.decisions.extend(head.decide(request, summary))
            except NoDecision as exc:
                result.no_decision_reasons.append(f"{head.name}: {exc}")
        return result
