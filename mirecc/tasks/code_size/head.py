"""The code-size head: ranks the candidate library of the head's
``spec.yaml`` for a TU compiled with -Oz or -Os, and decides to verify the
top of them by building each (:mod:`.verify`): at most ``size_search`` (K),
and only as many as fit in ``size_budget`` (each entry's ``cost``, its
compile time over the user's own level's, ``mire size-order``; an entry
without one costs 1).

The ranking is the library's own order (``mire size-order`` lists the
pipelines greedily by bytes saved per unit of cost on the training
packages), unless the
spec has a ``ranker`` for the compiler's LLVM: a forest (``mire
size-train``) that predicts each pipeline's ``.text`` reduction from the
TU's features, and the TU's candidates are the K it predicts best::

    ranker:
      llvm: 14                 # the library it ranks: pipelines[14]
      features: counts         # counts (mirecc.tasks.code_size.features) or encoder
      encoder: <cache_version> # with features: encoder
      head: ranker.onnx        # features (N, d) -> tree_gains (N, trees, pipelines)

The decision is never a guess: the compile keeps a candidate only when its
object is smaller than the user's own.
"""
from __future__ import annotations

import marshal
import os

from mirecc.frontend.compiler import clang_major
from mirecc.taskapi.api import HeadError, NoDecision

from mirecc.taskapi.records import Candidate, Decision, Ranking, candidates_of
from mirecc.taskapi.registry import default_heads_dirs, find_head_specs, load_head, spec_task
from mirecc.taskapi.registry import task as declared_task
from mirecc.tasks.code_size.build import GATE_FEATURES, POLICY, candidate_text, option_flags
from mirecc.util.fsutil import atomic_write_bytes

TASK = "code-size"


def parse_library(spec: dict, where) -> dict[int, list[tuple[str, str]]]:
    """The spec's ``pipelines``: LLVM major -> [(name, candidate text)].  An
    entry is an opt ``-passes=`` text (its own name) or ``{name:, passes:,
    options: [named options]}`` (``codegen:`` in older specs; searched
    pipelines are kilobytes long; decisions and --explain name them); the
    candidate text joins the passes and the options
    (:func:`mirecc.tasks.code_size.build.candidate_text`)."""
    library = spec.get("pipelines")
    out: dict[int, list[tuple[str, str]]] = {}
    if isinstance(library, dict):
        for major, entries in library.items():
            pairs = []
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, str):
                    entry = {"name": entry, "passes": entry}
                options = (entry.get("options", entry.get("codegen", []))
                           if isinstance(entry, dict) else None)
                for name in options if isinstance(options, list) else ():
                    try:
                        option_flags(str(name))
                    except ValueError as exc:
                        raise HeadError(f"{where}: {exc}") from None
                if isinstance(entry, dict) and isinstance(entry.get("name"), str) \
                        and isinstance(entry.get("passes"), str) and entry["passes"].strip() \
                        and isinstance(options, list):
                    pairs.append((entry["name"], candidate_text(entry["passes"], options)))
                else:
                    pairs = []
                    break
            if isinstance(major, int) and pairs and len({n for n, _ in pairs}) == len(pairs):
                out[major] = pairs
    if not out or len(out) != len(library):
        raise HeadError(f"{where}: 'pipelines' must map LLVM majors to non-empty lists of "
                        f"opt -passes= strings or {{name, passes, options}} entries "
                        f"(names unique)")
    return out


def library_costs(spec: dict) -> dict[int, dict[str, float]]:
    """LLVM major -> entry name -> its ``cost`` (entries without one: 1)."""
    out: dict[int, dict[str, float]] = {}
    for major, entries in (spec.get("pipelines") or {}).items():
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                cost = entry.get("cost", 1.0)
                if isinstance(cost, bool) or not isinstance(cost, (int, float)) \
                        or not cost > 0:
                    raise HeadError(f"pipeline {entry['name']!r} (LLVM {major}): cost must "
                                    f"be a number > 0, not {cost!r}")
                out.setdefault(major, {})[entry["name"]] = float(cost)
    return out


def within_budget(names: list[str], costs: dict[str, float], k: int,
                  budget: float) -> list[str]:
    """The first of ``names`` (best first) that fit: at most ``k``, their
    costs summing to at most ``budget``."""
    chosen, spent = [], 0.0
    for name in names[:k]:
        spent += costs.get(name, 1.0)
        if spent > budget + 1e-9:
            break
        chosen.append(name)
    return chosen


def installed_library(config, major: int) -> dict[str, str]:
    """name -> passes of LLVM ``major``'s library in the installed code-size
    head (the build step resolves the decision's names with it)."""
    return installed(config)["library"].get(str(major), {})


def budget_names(spec: dict, major: int, k: int, budget: float) -> list[str]:
    """The names the budget builds in the library's order, from
    :func:`installed`'s ``spec``."""
    library = spec["library"].get(str(major), {})
    return within_budget(list(library), spec["costs"].get(str(major), {}), k, budget)


def installed(config) -> dict:
    """The installed code-size head's spec as the driver's build step and
    gate use it, per LLVM major (as text): ``library`` (name -> candidate
    text, in the library's order), ``costs``, ``gate`` (the object gate's
    model, :func:`parse_gate`) and ``ranker`` (majors a ranker orders).
    Kept in the cache directory (``marshal``: no module to import; json's
    would import re, ~17 ms of a probe), keyed by the spec's path, size and
    time: reading the YAML spec costs ~100 ms (the parser's import and
    kilobytes-long pipelines) on every searched TU, the kept copy ~1 ms."""
    for found in find_head_specs(default_heads_dirs(config)):
        if spec_task(found.spec_path) != TASK:
            continue
        kept = None
        if config is not None and config.cache:
            from hashlib import sha256  # lazy: hashlib (~10 ms), only with the cache on
            st = os.stat(found.spec_path)
            stamp = f"v3|{os.path.abspath(found.spec_path)}|{st.st_size}|{st.st_mtime_ns}"
            kept = os.path.join(config.cache_root(), "code-size", "library-"
                                + sha256(stamp.encode()).hexdigest()[:24] + ".marshal")
            try:
                with open(kept, "rb") as fh:
                    spec = marshal.loads(fh.read())
                if isinstance(spec, dict) and isinstance(spec.get("library"), dict):
                    return spec
            except (OSError, ValueError, EOFError, TypeError):
                pass        # missing or damaged: read the spec again
        head = load_head(found, config)
        spec = {"library": {str(m): dict(pairs) for m, pairs in head.library.items()},
                "costs": {str(m): costs for m, costs in head.costs.items()},
                "gate": {str(m): model for m, model in head.gate.items()},
                "ranker": {str(head.ranker["llvm"]): True} if head.ranker else {}}
        if kept is not None:
            try:
                atomic_write_bytes(kept, marshal.dumps(spec))
            except (OSError, ValueError):
                pass        # only the shortcut is lost
        return spec
    raise HeadError("no code-size head is installed")


def parse_gate(spec: dict, library: dict, where) -> dict[int, dict]:
    """The spec's ``object_gate``: LLVM major -> ``{threshold, mean, scale,
    pipelines: {name: [intercept, coefficient per feature]}}`` (``mire
    size-gate``; features: :data:`~mirecc.tasks.code_size.build.GATE_FEATURES`
    of the user's own object).  A candidate whose chance is below the
    threshold is not built."""
    gate = spec.get("object_gate")
    if gate is None:
        return {}
    n = len(GATE_FEATURES)
    out = {}
    for major, model in gate.items() if isinstance(gate, dict) else [(None, None)]:
        names = {name for name, _ in library.get(major, [])}
        ok = (isinstance(model, dict) and isinstance(model.get("threshold"), (int, float))
              and all(isinstance(model.get(k), list) and len(model[k]) == n
                      and all(isinstance(x, (int, float)) for x in model[k])
                      and (k == "mean" or all(x > 0 for x in model[k]))
                      for k in ("mean", "scale"))
              and isinstance(model.get("pipelines"), dict) and set(model["pipelines"]) <= names
              and all(isinstance(c, list) and len(c) == n + 1
                      and all(isinstance(x, (int, float)) for x in c)
                      for c in model["pipelines"].values()))
        if not ok:
            raise HeadError(f"{where}: 'object_gate' must map LLVM majors of the library to "
                            f"{{threshold, mean and scale ({n} numbers each), pipelines: "
                            f"{{library name: [intercept and {n} coefficients]}}}}")
        out[major] = {"threshold": float(model["threshold"]), "mean": model["mean"],
                      "scale": model["scale"], "pipelines": model["pipelines"]}
    return out


class CodeSizeHead:
    name = TASK

    def __init__(self, directory, spec: dict, config=None):
        from pathlib import Path    # here: the driver's gate and early step import this module

        self.directory = Path(directory)
        self.config = config
        self.k = int(getattr(config, "size_search", 0) or 0)
        self.budget = float(getattr(config, "size_budget", 1.0))
        self.library = parse_library(spec, self.directory / "spec.yaml")
        try:
            self.costs = library_costs(spec)
        except HeadError as exc:
            raise HeadError(f"{self.directory / 'spec.yaml'}: {exc}") from None
        self.ranker = self._ranker(spec.get("ranker"))
        self.gate = parse_gate(spec, self.library, self.directory / "spec.yaml")
        self.inline_policy = self._inline_policy(spec.get("inline_policy"))

    def _inline_policy(self, policy) -> dict | None:
        """The spec's ``inline_policy`` (``mire size-inline-judge
        --write-policy``): ``llvm`` (the clang it was trained with), ``head``
        (its forest's file), ``features`` (a site's statistics it reads),
        ``margin`` (log bytes a prediction must exceed to force a site)."""
        if policy is None:
            return None
        where = self.directory / "spec.yaml"
        if not isinstance(policy, dict) or not isinstance(policy.get("llvm"), int) \
                or not isinstance(policy.get("head"), str) \
                or not isinstance(policy.get("features"), int) \
                or isinstance(policy.get("margin"), bool) \
                or not isinstance(policy.get("margin"), (int, float)):
            raise HeadError(f"{where}: 'inline_policy' must give 'llvm', its 'head' file, "
                            f"'features' (a count) and 'margin' (a number)")
        if not (self.directory / policy["head"]).is_file():
            raise HeadError(f"{self.directory / policy['head']}: the inlining policy named in "
                            f"{where} is missing")
        return policy

    def _ranker(self, ranker) -> dict | None:
        if ranker is None:
            return None
        where = self.directory / "spec.yaml"
        if not isinstance(ranker, dict) or ranker.get("llvm") not in self.library \
                or ranker.get("features") not in ("counts", "encoder") \
                or not isinstance(ranker.get("head"), str):
            raise HeadError(f"{where}: 'ranker' must name an 'llvm' of the library, "
                            f"'features' (counts or encoder) and its 'head' file")
        if not (self.directory / ranker["head"]).is_file():
            raise HeadError(f"{self.directory / ranker['head']}: ranker file named in {where} "
                            f"is missing")
        if ranker["features"] == "encoder" and not isinstance(ranker.get("encoder"), str):
            raise HeadError(f"{where}: a ranker on the encoder names its 'encoder'")
        return ranker

    def applies_to(self, request) -> bool:
        return request.language in ("c", "c++") and request.opt_level in declared_task(TASK).opt_levels

    def why_not(self, request) -> str:
        if request.language not in ("c", "c++"):
            return f"applies to C and C++, not {request.language}"
        return f"applies with -Oz or -Os, not -O{request.opt_level}"

    def rank(self, ctx) -> list[Ranking]:
        major = clang_major(ctx.request.compiler) if ctx.request.compiler else 0
        pipelines = self.library.get(major)
        if not pipelines:
            known = ", ".join(str(m) for m in sorted(self.library))
            raise NoDecision(f"no candidate pipelines for LLVM {major or '?'} "
                             f"(the library has {known})", code="no-candidates")
        n = len(pipelines)
        order, ctx.notes[TASK] = list(range(n)), "library order"
        if self.ranker and self.ranker["llvm"] == major and self.k:
            scores = self._scores(ctx, n)
            order = sorted(range(n), key=lambda i: -scores[i])
            ctx.notes[TASK] = f"ranked by the forest on {self.ranker['features']}"
        # the user's own level first at equal size; candidates best first
        candidates = [Candidate({}, 1.0)] + [
            Candidate({"pipeline": pipelines[i][0]}, round(1.0 - (rank + 1) / (n + 1), 6))
            for rank, i in enumerate(order)]
        return [Ranking("module", tuple(candidates))]

    def _scores(self, ctx, n: int) -> list[float]:
        """The ranker's predicted .text reduction of each pipeline (the mean
        over its trees)."""
        # lazy: numpy, ONNX Runtime and the encoder, only where a ranker scores
        import numpy as np
        from mirecc.taskapi.context import encoder_model
        from mirecc.taskapi.onnxhead import run_onnx

        if self.ranker["features"] == "encoder":
            info = encoder_model(self.config)
            if info.cache_version != self.ranker["encoder"]:
                raise HeadError(f"{self.directory / 'spec.yaml'}: the ranker was trained on "
                                f"encoder {self.ranker['encoder']}, not {info.cache_version}")
            x = ctx.embedding()[0].module
        else:
            from mirecc.tasks.code_size.features import graph_counts  # lazy: as above
            x = graph_counts(ctx.graph)
        path = self.directory / self.ranker["head"]
        try:
            gains = np.asarray(run_onnx(path, np.asarray(x, np.float32)[None, :]))
        except Exception as exc:  # onnxruntime raises its own types
            raise HeadError(f"{path}: cannot run the ranker: {exc}") from None
        if gains.ndim != 3 or gains.shape[2] != n:
            raise HeadError(f"{path}: the ranker scores {gains.shape[-1]} pipelines, the "
                            f"library for LLVM {self.ranker['llvm']} has {n}")
        return gains[0].mean(axis=0).tolist()

    def decide(self, ctx, rankings: list[Ranking]) -> list[Decision]:
        [ranking] = rankings
        if not self.k:
            raise NoDecision("size_search is 0: nothing to verify", code="size-search-off")
        major = clang_major(ctx.request.compiler) if ctx.request.compiler else 0
        costs = self.costs.get(major, {})
        calls, policy_note = self._policy(ctx, major)
        # the policy's candidate, where it forces a site, takes the first
        # slot: an -Oz/-Os compile of the bitcode, cost 1
        first = [POLICY] if calls else []
        chosen = first + within_budget(
            [c.value["pipeline"] for c in ranking.candidates if c.value],
            costs, self.k - len(first), self.budget - len(first))
        if not chosen:
            raise NoDecision(f"size_budget {self.budget:g} is below the first candidate's "
                             f"cost: nothing to verify", code="size-budget")
        spent = sum(1.0 if name == POLICY else costs.get(name, 1.0) for name in chosen)
        value = {"verify": chosen, **({"calls": calls} if calls else {})}
        return [Decision(
            task=TASK, target="module", value=value, default={},
            confidence=None, applied=True, candidates=candidates_of(ranking),
            reason=(f"build {len(chosen)} candidate(s) ({ctx.notes.get(TASK)}{policy_note}; "
                    f"predicted cost {spent:.2f} of your compile, budget {self.budget:g}) "
                    f"besides -O{ctx.request.opt_level} and keep the smallest object "
                    f"(ties: -O{ctx.request.opt_level})"))]

    def _policy(self, ctx, major: int) -> tuple[dict, str]:
        """(the call sites the inlining policy forces, what the reason says
        of it) with ``size_inline`` on; a policy that cannot run is said in
        the reason and builds nothing (the library's candidates still do)."""
        policy = self.inline_policy
        if not getattr(self.config, "size_inline", False):
            return {}, ""
        if policy is None or policy["llvm"] != major:
            return {}, (f"; no inlining policy for LLVM {major or '?'}"
                        + (f" (it has LLVM {policy['llvm']}'s)" if policy else ""))
        if self.budget < 1 or self.k < 1:
            return {}, "; the inlining policy's candidate does not fit the budget"
        # lazy: numpy, ONNX Runtime and the plugin's finder, only with size_inline
        from mirecc.plugin.build import PluginError, ensure_plugin
        from mirecc.tasks.code_size.build import CandidateError, tool_beside
        from mirecc.tasks.code_size.inline_policy import policy_calls

        try:
            plugin = getattr(self.config, "plugin", None) or ensure_plugin(major)
            calls = policy_calls(ctx, policy, self.directory / policy["head"],
                                 tool_beside(ctx.request.compiler, "opt"), plugin)
        except (HeadError, PluginError, CandidateError) as exc:
            return {}, f"; the inlining policy did not run: {exc}"
        if not calls:
            return {}, f"; the inlining policy forces none of {len(ctx.calls)} call sites"
        shown = ", ".join(f"{site} {how}" for site, how in sorted(calls.items())[:3])
        more = f" and {len(calls) - 3} more" if len(calls) > 3 else ""
        return calls, (f"; the inlining policy forces {len(calls)} of {len(ctx.calls)} call "
                       f"sites ({shown}{more}) in its candidate")
