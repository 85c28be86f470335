"""The records a task's head and the per-TU path exchange: a head's
candidates and rankings, its decisions, one TU's request and result.

They cross a process boundary (the per-user server): each is plain JSON
through ``to_dict``/``from_dict``.  Standard library only.
"""

from __future__ import annotations

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
            from mirecc.graph.irinfo import ModuleInfo  # lazy: numpy, only with a summary
            summary = ModuleInfo.from_dict(d["summary"])
        decisions = [Decision(**{**x, "candidates": tuple(tuple(c) for c in x["candidates"])})
                     for x in d["decisions"]]
        reasons, codes = list(d["no_decision_reasons"]), list(d["reason_codes"])
        if len(reasons) != len(codes):
            raise ValueError("cached result has a reason without a code")
        return cls(summary, decisions, reasons, codes)


def candidates_of(ranking: Ranking | None) -> tuple:
    """A ranking's best candidates as stored in a Decision."""
    if ranking is None:
        return ()
    return tuple((c.value, round(float(c.score), 6))
                 for c in ranking.candidates[:KEEP_CANDIDATES])
