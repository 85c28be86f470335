"""The decision pipeline: one translation unit's IR in, decisions out.

The interface crosses a process boundary: a ``TURequest`` and a ``TUResult``
are plain JSON, so the same ``Pipeline.run`` runs in the per-user server
(:mod:`mirecc.tu.server`, which keeps the encoder, the heads and their ONNX
sessions loaded) and, when no server answers, in the driver's process.

Task heads plug in through the task registry (:mod:`mirecc.taskapi.registry`):
a head directory holds ``spec.yaml`` with at least ``task: <name>``, and the
pipeline loads the head class the task declares (:mod:`mirecc.taskapi.api`
says what a head does).  Every head of a TU shares one
:class:`mirecc.taskapi.context.TUContext`: one graph, one embedding, one loop table.
This module imports no task by name.
"""

from __future__ import annotations

from mirecc.taskapi.api import HeadError, NoDecision
from mirecc.taskapi.context import TUContext
from mirecc.util.caches import process_cache
from mirecc.util.modelfiles import load_model
from mirecc.taskapi.records import Candidate, Decision, Ranking, TURequest, TUResult
from mirecc.taskapi.registry import (applies_to_any, default_heads_dirs, find_head_specs,
                                     has_use, load_head, task)

__all__ = ["Candidate", "Decision", "HeadError", "NoDecision", "Pipeline", "Ranking",
           "TURequest", "TUResult", "load_head"]

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
        """Decisions for the TU of ``ctx`` (a :class:`mirecc.taskapi.context.TUContext`)."""
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
            # a head whose decisions are versions the runtime tries (adapt)
            # forces nothing: its gate's refusal is a refusal to force
            refusal = None if getattr(head, "adapt", False) else getattr(head, "refusal", None)
            result.decisions.extend(_with_consent(decisions, ctx.config, refusal))
        return result


def _with_consent(decisions, config, refusal: str | None = None) -> list:
    """Nothing is applied without the user's setting: a decision of a task
    whose ``applied_when`` setting is off is recorded, never applied,
    whatever its head says.  A head whose gate could not be calibrated
    (``refusal``, :mod:`mirecc.learn.gates`) applies nothing even then, and says why."""
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


_PIPELINES = process_cache("pipelines")


def run_in_process(request: TURequest, config, explain: bool, version: str,
                   where: str = "in process"):
    """The pipeline over one TU in this process (the server calls this too):
    heads loaded once per process, pipeline key and language."""
    key = (version, request.language)
    pipeline = _PIPELINES.get(key)
    if pipeline is None:
        pipeline = _PIPELINES[key] = Pipeline.load(config, {request.language})
    return pipeline.run(TUContext(request, config, want_summary=explain, where=where))
