"""The decision pipeline: one translation unit's IR in, decisions out.

The interface is built to cross a process boundary: a ``TURequest`` and a
``TUResult`` are plain JSON, so the same ``Pipeline.run`` can later sit in a
per-user background server that keeps the model loaded (as sccache's daemon
does), while the driver falls back to calling it in-process when no server
answers.

Task heads plug in through ``TASKS``: a head directory holds ``spec.yaml``
with at least ``task: <name>``; the pipeline loads the head registered for
that task.  No task is implemented yet, so with the heads shipped today the
pipeline decides nothing, and says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirecc.irinfo import ModuleInfo
from mirecc.registry import HeadSpec, default_heads_dirs, find_head_specs
from mirecc.model import NO_MODEL_VERSION, ModelInfo

# Bumped when TUResult's meaning changes, so cached results are not reused.
PIPELINE_SCHEMA = 1

# task name -> head class; filled by the issues that bring each task.
TASKS: dict[str, type] = {}


class HeadError(Exception):
    """A head directory is unusable (the message names the file)."""


@dataclass(frozen=True)
class Decision:
    task: str                 # e.g. "loop-vectorize"
    target: str               # what it applies to: a loop id, function, kernel
    value: dict               # e.g. {"vectorize.width": 8}
    default: dict | None      # what the compiler would do on its own, if known
    confidence: float         # head's confidence in [0, 1]
    reason: str               # one line for --explain
    applied: bool             # False when confidence was too low to act


@dataclass(frozen=True)
class TURequest:
    """Everything a pipeline needs about one translation unit."""

    source: str
    language: str
    opt_level: str
    flags: tuple[str, ...]
    bitcode_path: str
    bitcode_sha256: str


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


def load_head(spec: HeadSpec):
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
    return TASKS[task](Path(spec.directory), data)


class Pipeline:
    """Runs the installed heads over one translation unit at a time."""

    def __init__(self, heads: list, model: ModelInfo | None, searched: list[str]):
        self.heads = heads
        self.model = model
        self.searched = searched

    @classmethod
    def load(cls, config) -> "Pipeline":
        from mirecc.model import load_model

        dirs = default_heads_dirs(config)
        heads = [load_head(spec) for spec in find_head_specs(dirs)]
        model = load_model(config.model) if config.model else None
        return cls(heads, model, dirs)

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
            result.no_decision_reasons.append(
                f"no task heads are installed (searched: {where})")
            return result
        for head in self.heads:
            if not head.applies_to(request):
                result.no_decision_reasons.append(f"{head.name}: {head.why_not(request)}")
                continue
            result.decisions.extend(head.decide(request, summary))
        return result
