"""The decision pipeline: one translation unit's IR in, decisions out.

The interface crosses a process boundary: a ``TURequest`` and a ``TUResult``
are plain JSON, so the same ``Pipeline.run`` runs in the per-user server
(:mod:`mirecc.server`, which keeps the encoder, the heads and their ONNX
sessions loaded) and, when no server answers, in the driver's process.

Task heads plug in through the task registry (:mod:`mirecc.tasks.registry`):
a head directory holds ``spec.yaml`` with at least ``task: <name>``, and the
pipeline loads the head class the task declares (:mod:`mirecc.tasks.api`
says what a head does).  Every head of a TU shares one
:class:`mirecc.context.TUContext`: one graph, one embedding, one loop table.
This module imports no task by name.
"""

from __future__ import annotations

from mirecc.tasks.api import HeadError, NoDecision, load_attribute
from mirecc.tasks.registry import (HeadSpec, applies_to_any, default_heads_dirs,
                                   find_head_specs, has_use)

__all__ = ["Candidate", "Decision", "HeadError", "NoDecision", "Pipeline", "Ranking",
           "TURequest", "TUResult", "load_head"]

# Bumped when TUResult's meaning changes, so cached results are not reused.
# 2: Decision.advisory (a recorded prediction that changes nothing in the compile).
# 3: reason codes, Decision.candidates, loop ids "<function>:<header>" in summaries.
PIPELINE_SCHEMA = 3
#: candidates kept per decision in results (the head's ranking, best first)
KEEP_CANDIDATES = 5


class Record:
    """A plain value object: fields in ``FIELDS`` (name -> default, or
    ``REQUIRED``), keyword construction, equality, ``to_dict`` and
    ``replace``.  Not a dataclass: a cache hit in the driver reads these,
    and importing ``dataclasses`` costs more than the rest of that path."""

    FIELDS: dict = {}
    __slots__ = ()

    def __init__(self, *args, **kwargs):
        names = list(self.FIELDS)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in self.FIELDS or name in values:
                raise TypeError(f"{type(self).__name__}: bad or repeated field {name!r}")
            values[name] = value
        for name, default in self.FIELDS.items():
            if name not in values:
                if default is REQUIRED:
                    raise TypeError(f"{type(self).__name__}: missing field {name!r}")
                values[name] = default() if callable(default) else default
            object.__setattr__(self, name, values[name])

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}

    def replace(self, **changes):
        return type(self)(**{**self.to_dict(), **changes})

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"{type(self).__name__}({body})"


REQUIRED = object()


class Frozen(Record):
    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __hash__(self):
        return hash(repr(self))


class Candidate(Frozen):
    """One decision a head scored: ``value`` (e.g. {"vectorize.width": 8};
    {} is the compiler's own choice) and ``score`` (higher is better; per
    task, see its head)."""

    FIELDS = {"value": REQUIRED, "score": REQUIRED}
    __slots__ = tuple(FIELDS)


class Ranking(Frozen):
    """A head's candidates for one target, best first."""

    FIELDS = {"target": REQUIRED, "candidates": REQUIRED}
    __slots__ = tuple(FIELDS)


class Decision(Frozen):
    FIELDS = {
        "task": REQUIRED,        # e.g. "loop-vectorize"
        "target": REQUIRED,      # what it applies to: a loop id, function, kernel
        "value": REQUIRED,       # e.g. {"vectorize.width": 8}
        "default": REQUIRED,     # what the compiler would do on its own, if known
        "confidence": REQUIRED,  # a model's confidence in [0, 1]; None: no model scored it
        "reason": REQUIRED,      # one line for --explain
        "applied": REQUIRED,     # False when confidence was too low to act
        "advisory": False,       # a prediction recorded for the user; nothing to apply
        # applied, and the object came out the same as without it: the
        # compiler's own choice (counted as not applied)
        "same_as_compiler": False,
        # the head's best candidates for the target, best first: ((value, score), ...)
        "candidates": (),
    }
    __slots__ = tuple(FIELDS)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["candidates"] = [list(c) for c in self.candidates]
        return d


class TURequest(Frozen):
    """Everything a pipeline needs about one translation unit."""

    FIELDS = {
        "source": REQUIRED,
        "language": REQUIRED,
        "opt_level": REQUIRED,
        "flags": REQUIRED,          # tuple of the flags the IR was emitted with
        "bitcode_path": REQUIRED,
        "bitcode_sha256": REQUIRED,
        "compiler": "",             # the clang that emitted the bitcode (and compiles the TU)
        "cwd": "",                  # where the compile runs (relative paths in flags)
    }
    __slots__ = tuple(FIELDS)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "flags": list(self.flags)}

    @classmethod
    def from_dict(cls, d: dict) -> "TURequest":
        return cls(**{**d, "flags": tuple(d["flags"])})


class TUResult(Record):
    FIELDS = {"summary": REQUIRED,             # irinfo.ModuleInfo or None
              "decisions": list,
              "no_decision_reasons": list,
              "reason_codes": list}            # one per reason
    __slots__ = tuple(FIELDS)

    @property
    def decided(self) -> bool:
        """A decision other than the compiler's own choice (as mire bench counts)."""
        return any(d.value for d in self.decisions)

    @property
    def applied(self) -> bool:
        """A decision applied to the compile."""
        return any(d.applied for d in self.decisions)

    def add_reason(self, code: str, text: str) -> None:
        self.reason_codes.append(code)
        self.no_decision_reasons.append(text)

    def to_dict(self) -> dict:
        return {
            "schema": PIPELINE_SCHEMA,
            "summary": self.summary.to_dict() if self.summary else None,
            "decisions": [d.to_dict() for d in self.decisions],
            "no_decision_reasons": list(self.no_decision_reasons),
            "reason_codes": list(self.reason_codes),
        }

    def replace(self, **changes):
        values = {name: getattr(self, name) for name in self.FIELDS}
        return TUResult(**{**values, **changes})

    @classmethod
    def from_dict(cls, d: dict) -> "TUResult":
        if d.get("schema") != PIPELINE_SCHEMA:
            raise ValueError("cached result has another schema")
        summary = None
        if d.get("summary"):
            from mirecc.irinfo import ModuleInfo
            summary = ModuleInfo.from_dict(d["summary"])
        decisions = [Decision(**{**x, "candidates": tuple(tuple(c) for c in x["candidates"])})
                     for x in d["decisions"]]
        reasons, codes = list(d["no_decision_reasons"]), list(d["reason_codes"])
        if len(reasons) != len(codes):
            raise ValueError("cached result has a reason without a code")
        return cls(summary, decisions, reasons, codes)


def load_head(spec: HeadSpec, config=None):
    from pathlib import Path

    import yaml

    from mirecc.tasks.registry import task, tasks

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
    if declared.head is None:
        raise HeadError(f"{path}: task '{name}' takes no head in this mirecc (its decisions "
                        f"come from decisions profiles)")
    return load_attribute(declared.head)(Path(spec.directory), data, config)


def candidates_of(ranking: Ranking | None) -> tuple:
    """A ranking's best candidates as stored in a Decision."""
    if ranking is None:
        return ()
    return tuple((c.value, round(float(c.score), 6))
                 for c in ranking.candidates[:KEEP_CANDIDATES])


class Pipeline:
    """Runs the installed heads over one translation unit at a time."""

    def __init__(self, heads: list, model, searched: list[str],
                 other_languages: list[str] | None = None, specs: list | None = None):
        self.heads = heads
        # each head's HeadSpec (None: run it whatever the build's settings)
        self.specs = specs or [None] * len(heads)
        self.model = model          # a configured encoder, verified on load (else None)
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
        return cls(heads, model, dirs, others, specs)

    def run(self, ctx) -> TUResult:
        """Decisions for the TU of ``ctx`` (a :class:`mirecc.context.TUContext`)."""
        request = ctx.request
        result = TUResult(ctx.summary if ctx.want_summary else None)
        if not self.heads:
            where = ", ".join(str(d) for d in self.searched)
            other = (f"; heads for other languages: {', '.join(self.other_languages)}"
                     if self.other_languages else "")
            result.add_reason("no-heads", f"no task heads are installed for "
                              f"{request.language} (searched: {where}{other})")
            return result
        for head, spec in zip(self.heads, self.specs):
            # a head whose decisions this build neither applies nor records
            # nor explains, and no decisions profile reads, is not run
            # (registry.has_use; the result cache's key tells these apart)
            if spec is not None and not ctx.want_summary and ctx.config is not None \
                    and not ctx.config.profile \
                    and not has_use(spec, ctx.config, request.opt_level):
                continue
            if not head.applies_to(request):
                result.add_reason("not-applicable", f"{head.name}: {head.why_not(request)}")
                continue
            try:
                rankings = head.rank(ctx)
                decisions = head.decide(ctx, rankings)
            except NoDecision as exc:
                result.add_reason(exc.code, f"{head.name}: {exc}")
                continue
            result.decisions.extend(_with_consent(decisions, ctx.config,
                                                  getattr(head, "refusal", None)))
        return result


def _with_consent(decisions, config, refusal: str | None = None) -> list:
    """Nothing is applied without the user's setting: a decision of a task
    whose ``applied_when`` setting is off is recorded, never applied,
    whatever its head says.  A head whose gate could not be calibrated
    (``refusal``, :mod:`mirecc.gates`) applies nothing even then, and says why."""
    from mirecc.tasks.registry import task

    out = []
    for d in decisions:
        declared = task(d.task)
        if d.applied and (declared is None or config is None or not declared.applies(config)):
            d = d.replace(applied=False)
        elif d.applied and refusal:
            d = d.replace(applied=False, advisory=True,
                          reason=f"{d.reason} (recorded only: {refusal})")
        out.append(d)
    return out
