"""The code-size head: ranks the candidate library of the head's
``spec.yaml`` for a TU compiled with -Oz or -Os, and decides to verify the
top ``size_search`` (K) of them by building each (:mod:`.verify`).

The ranking is, for now, the library's own order (the shipped library lists
the pipelines most often smallest first); a learned ranker over the TU's
embedding replaces it when the labelled dataset exists.  The decision is
never a guess: the compile keeps a candidate only when its object is
smaller than the user's own.
"""
from __future__ import annotations

from pathlib import Path

from mirecc.pipeline import Candidate, Decision, HeadError, NoDecision, Ranking, candidates_of

TASK = "code-size"
OPT_LEVELS = ("s", "z")


class CodeSizeHead:
    name = TASK

    def __init__(self, directory: Path, spec: dict, config=None):
        self.directory = Path(directory)
        self.config = config
        self.k = int(getattr(config, "size_search", 0) or 0)
        library = spec.get("pipelines")
        if not isinstance(library, dict) or not library or not all(
                isinstance(major, int) and isinstance(p, list) and p
                and all(isinstance(x, str) and x.strip() for x in p)
                for major, p in library.items()):
            raise HeadError(f"{self.directory / 'spec.yaml'}: 'pipelines' must map LLVM "
                            f"majors to non-empty lists of opt -passes= strings")
        self.library = library

    def applies_to(self, request) -> bool:
        return request.language in ("c", "c++") and request.opt_level in OPT_LEVELS

    def why_not(self, request) -> str:
        if request.language not in ("c", "c++"):
            return f"applies to C and C++, not {request.language}"
        return f"applies with -Oz or -Os, not -O{request.opt_level}"

    def rank(self, ctx) -> list[Ranking]:
        from mirecc.compiler import clang_major

        major = clang_major(ctx.request.compiler) if ctx.request.compiler else 0
        pipelines = self.library.get(major)
        if not pipelines:
            known = ", ".join(str(m) for m in sorted(self.library))
            raise NoDecision(f"no candidate pipelines for LLVM {major or '?'} "
                             f"(the library has {known})", code="no-candidates")
        n = len(pipelines)
        # the user's own level first at equal size; candidates in library order
        candidates = [Candidate({}, 1.0)] + [
            Candidate({"pipeline": p}, round(1.0 - (i + 1) / (n + 1), 6))
            for i, p in enumerate(pipelines)]
        return [Ranking("module", tuple(candidates))]

    def decide(self, ctx, rankings: list[Ranking]) -> list[Decision]:
        [ranking] = rankings
        chosen = [c.value["pipeline"] for c in ranking.candidates if c.value][:self.k]
        if not chosen:
            raise NoDecision("size_search is 0: nothing to verify", code="size-search-off")
        return [Decision(
            task=TASK, target="module", value={"verify": chosen}, default={},
            confidence=1.0, applied=True, candidates=candidates_of(ranking),
            reason=(f"build {len(chosen)} candidate pipeline(s) besides -O"
                    f"{ctx.request.opt_level} and keep the smallest object (ties: -O"
                    f"{ctx.request.opt_level})"))]
