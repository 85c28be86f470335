"""Code size: the smallest object among the user's own -Oz/-Os compile and
the top K pass pipelines of a candidate library, each compiled and measured.

A guess cannot make an object larger here: every candidate is built from the
TU's front-end bitcode (``opt -passes=<pipeline>``, then clang's back end on
the result), its ``.text`` bytes are counted, and the user's own object is
one of the candidates (it wins ties), so the result is never larger than
the user's level, and the same input always gives the same object.  A
candidate in which LLVM 14's x86 machine outliner left a function that
control can run off is not kept (:func:`.build.check_outlined`).

Driver side (and :mod:`.link`, the step at an LTO link): :mod:`.head` (ranks the library of ``heads/code-size/spec.yaml``:
in its own order, or by a forest on :mod:`.features` when the spec ships
one), :mod:`.build` (a candidate's object and its ``.text`` size),
:mod:`.verify` (the build step the driver calls after the user's own object
is made), :mod:`.winners` (the winner cache, so a rebuild builds one) and,
with ``size_inline``, :mod:`.inline_policy` (the learned inlining policy's
call-site decisions, built as a candidate of their own, from the statistics
of :mod:`.inline_features`).
Offline: :mod:`.offline` (``mire size-search``, ``size-check``,
``size-data``, ``size-train``, ``size-inline-data``, ``size-inline-judge``,
``mire bench size``).

This module is the task's declaration: standard library only.
"""
from mirecc.taskapi.api import (BenchSuite, Command, CompileStep, LinkStep, Setting, Task,
                                parse_bool)


def _size_suite():
    """``mire bench size``: (run, add_arguments)."""
    from .offline import bench, cli  # lazy: declarations are read on every compile

    return bench.run, cli.add_bench_arguments


def _as_positive(value):
    number = _as_count(value)
    if number < 1:
        raise ValueError(f"expected a positive whole number, got {value!r}")
    return number


def _as_budget(value):
    """A budget: a number >= 0."""
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not number >= 0 or number == float("inf"):
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return number


def _as_count(value):
    """K: a whole number >= 0 (0: off)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(f"expected a whole number >= 0, got {value!r}")


# the -O levels the task decides at (without "-O")
OPT_LEVELS = ("s", "z")
DEFAULT_K = 10
DEFAULT_BUDGET = 1.0

class _SizeStep(CompileStep):
    """The task's build step: after a split compile's object is made,
    candidates built from the front end's bitcode and the smallest object
    kept (:mod:`.verify`); before it, the object gate that lets the IR go
    unread where no candidate can pay, and the first candidate built in a
    free job slot meanwhile (:mod:`.early`).  Declared here, its modules
    imported by the method that needs them: a compile pays for what it
    calls."""

    def verify(self, decision, report, split, extra, workdir, config):
        # lazy: dataclasses, pathlib and the candidate builds: only a searched TU pays
        from mirecc.tasks.code_size.verify import smallest_object

        return smallest_object(decision, report, split, extra, workdir, config)

    def gate(self, object_path, config, compiler):
        from mirecc.tasks.code_size.early import worth_searching  # lazy: a gated compile

        return worth_searching(object_path, config, compiler)

    def early(self, split, config, workdir):
        from mirecc.tasks.code_size.early import first_candidate  # lazy: as in gate

        return first_candidate(split, config, workdir)


_STEP = _SizeStep()


class _OutlinedLink(LinkStep):
    """The task's link step (:mod:`.link`: an ``-flto`` link at a size level
    linked again with the machine outliner), declared here so that a call
    that links pays nothing for it: it adds no arguments, and its module is
    imported only for a link-only call at a size level."""

    needs_flags = ("-flto",)      # it takes LTO links only

    def wants(self, args, config):
        from mirecc.tasks.code_size.link import LINK  # lazy: a link-only call at -Oz/-Os

        return LINK.wants(args, config)

    def link(self, command, output, config, own_link):
        from mirecc.tasks.code_size.link import LINK  # lazy: as in wants

        return LINK.link(command, output, config, own_link)


_LINK = _OutlinedLink()


class CodeSize(Task):
    name = "code-size"
    summary = ("with -Oz/-Os: the smallest object among the user's own and the top K "
               "pass pipelines, each compiled and measured")
    languages = frozenset({"c", "c++"})
    applied_when = "size_search"
    # K = 10 bounds the budget (size_budget, default 1: one candidate,
    # the one budget whose first build stays near 2x clang's;
    # docs/code-size.md)
    settings = (Setting("size_search", "MIRECC_SIZE_SEARCH", _as_count, DEFAULT_K,
                        "with -Oz or -Os, build the TU through this many candidate pass "
                        "pipelines besides the user's level and keep the smallest object "
                        "(0: off)"),
                Setting("size_budget", "MIRECC_SIZE_BUDGET", _as_budget, DEFAULT_BUDGET,
                        "candidates built per TU cost at most this many of its own compiles "
                        "together (each pipeline's cost measured by mire size-order); the "
                        "first K that fit are built"),
                Setting("size_gate", "MIRECC_SIZE_GATE", parse_bool, True,
                        "skip the candidates the object gate (statistics of your own "
                        "object) expects not to gain; off: build every candidate the "
                        "budget allows"),
                Setting("size_jobs", "MIRECC_SIZE_JOBS", _as_positive, 1,
                        "candidates built at once where make's jobserver is not reachable "
                        "(with one, its free slots decide)"),
                Setting("size_inline", "MIRECC_SIZE_INLINE", parse_bool, False,
                        "with size_search on: the learned inlining policy forces the call "
                        "sites it predicts smaller inlined or out of line, in a candidate of "
                        "its own built first (an -Oz/-Os compile, cost 1 of the budget), kept "
                        "only when its object is the smallest"),
                Setting("size_link", "MIRECC_SIZE_LINK", parse_bool, True,
                        "at an -Oz/-Os link with -flto: link again with the machine "
                        "outliner in the LTO back end and keep the smaller output"))
    opt_levels = OPT_LEVELS
    measured = ("verified: every candidate is built, never more loadable bytes than your "
                "level; at the default budget Debian's zlib, bzip2, lua5.4 and sqlite3 1.5% "
                "less .text in total (3.9% with ten candidates each), pcre2, which no search "
                "saw, 9.1%, tests pass; their "
                "programs linked with -Oz -flto 0.2-3.5% fewer loadable bytes "
                "(docs/code-size.md)")
    commands = (
          Command("size-data", "mirecc.tasks.code_size.offline.cli",
                  "measure the code-size dataset: IR instructions and .text bytes of every "
                  "corpus module through -Oz and each library pipeline",
                  "For each module of a corpus built at -Oz (mire corpus build --opt-"
                  "level=-Oz), build it through clang's -Oz and through every pipeline of the "
                  "code-size library (or --pipelines FILE) and record IR instructions and .text"
                  " bytes (resumable)."),
          Command("size-search", "mirecc.tasks.code_size.offline.cli",
                  "search the code-size candidate library on training modules",
                  "Measure systematic and random variations of -Oz on a sample of training "
                  "modules (held-out packages never), then choose greedily the pipelines that "
                  "together shrink the most below -Oz; --write-spec puts them into heads/code-"
                  "size/spec.yaml."),
          Command("size-check", "mirecc.tasks.code_size.offline.cli",
                  "check that every code-size library pipeline keeps programs' outputs",
                  "Build the bundled programs and csmith programs (seeds the corpus never used)"
                  " through clang -Oz and each library pipeline, run them and compare their "
                  "output with their -O0 build; --write-spec drops every pipeline that changed "
                  "one."),
          Command("size-order", "mirecc.tasks.code_size.offline.order",
                  "order the code-size library by bytes saved per compile second and "
                  "measure each pipeline's cost, on the training packages' labels",
                  "From the labels of mire size-data (default: the committed ones): each "
                  "pipeline's build time over -Oz's (its cost, what size_budget is spent in) "
                  "and a greedy order by .text bytes saved per unit of cost on the training "
                  "modules; --write-spec puts both into heads/code-size/spec.yaml."),
          Command("size-gate", "mirecc.tasks.code_size.offline.gate",
                  "fit the code-size object gate on the training packages' labels and judge "
                  "it on the held-out ones (needs scikit-learn)",
                  "Build the labelled corpus modules' -Oz objects, fit per library pipeline a "
                  "logistic regression from statistics of the object to whether the pipeline "
                  "makes it smaller, choose the threshold by leave-one-package-out cross-"
                  "validation on the training packages, and report the held-out packages; "
                  "--write-spec puts the gate into heads/code-size/spec.yaml."),
          Command("size-train", "mirecc.tasks.code_size.offline.train",
                  "train the code-size ranker on the training packages' labels (needs scikit-"
                  "learn)",
                  "Judge each feature set the driver computes (instruction counts, the "
                  "encoder's embedding) by leave-packages-out cross-validation against the "
                  "library order, and ship the best forest as heads/code-size/ranker.onnx, or "
                  "none if none beats it."),
          Command("size-inline-data", "mirecc.tasks.code_size.offline.inline_labels",
                  "label call sites for an inlining policy: each site's .text bytes inlined "
                  "and not inlined",
                  "For each call site of each corpus module (mire corpus build --opt-level=-Oz)"
                  " whose callee the module defines, compile the module at its level with the "
                  "site forced inline and forced out of line (the pass plugin's call-site "
                  "decisions), every other site left to LLVM, and record the object's .text "
                  "bytes (resumable)."),
          Command("size-inline-judge", "mirecc.tasks.code_size.offline.inline_callee",
                  "judge the inlining policy's inputs (statistics, the encoder, both) on the "
                  "call-site labels (or per callee), leaving packages out (needs scikit-learn)",
                  "Fit a forest from each representation of a call site to the bytes inlining "
                  "it saves, leaving one package out, at 1%, 10% and 100% of the training "
                  "labels, and write the share of the best choices' bytes each one's policy "
                  "saves, with package-resampled intervals; --write-policy ships the "
                  "statistics' forest, fitted on the training packages, as heads/code-size/"
                  "inline-policy.onnx (size_inline); --per callee judges a policy that "
                  "decides all of a callee's sites at once, on the per-callee labels."),
      )
    bench = (
          BenchSuite("size", _size_suite,
                     "rankings of the code-size library on held-out packages, from the labels "
                     "of mire size-data"),
      )
    step_reasons = {
        "too-small": "too small to gain",
        "predicted-no-gain": "no candidate predicted to gain",
    }
    step_counters = {
        "inline-policy": "the inlining policy's candidate built",
        "inline-policy-kept": "its object kept (the smallest)",
    }
    reasons = {
        "no-candidates": "no candidate to choose from",
        "size-search-off": "size_search is 0: nothing to verify",
        "size-budget": "size_budget is below the first candidate's cost: nothing to verify",
    }

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.code_size.head import CodeSizeHead

        return CodeSizeHead

    def compile_step(self):
        return _STEP

    def link_step(self):
        return _LINK

    def judged(self, kinds, out, models):
        from .offline import judge  # lazy: declarations are read on every compile

        return judge.judged(kinds, out, models)


TASKS = (CodeSize(),)
