"""Loop vectorization: a vectorize width and interleave count per innermost loop.

Driver side: :mod:`.head` (the per-loop forest head), :mod:`.loops` (the
loop table), :mod:`.features` (static loop statistics), :mod:`.forest`
(the head's ONNX forest), :mod:`.inject` and :mod:`.plugin` (the decisions
reach the compiler through mirecc's LLVM pass plugin (``mirecc-plugin``),
``passes/plugin``, decisions file format in its FORMAT.md).
With ``adapt_loops`` each function holding loops the head expects to gain
is compiled in a few versions (LLVM's own and the head's best factors) and
the adaptive runtime linked into the program (``runtime/adapt``) chooses
among them in its runs, keeping what measures faster (``mire adapt``).
Offline: :mod:`.offline` (``mire vectorize-data``, ``mire vectorize-train``,
``mire bench vectorize``).  Shipped head: ``heads/loop-vectorize``.

This module is the task's declaration: standard library only.
"""
from mirecc.runtime.versions import (ADAPT_LOOPS, ADAPT_UNROLL, ADAPT_VERSIONS, RUNTIME,
                                     adapting)
from mirecc.taskapi.api import BenchSuite, Command, Setting, Task, parse_bool


def _vectorize_suite():
    """``mire bench vectorize``: (run, add_arguments)."""
    from .offline import bench  # lazy: declarations are read on every compile

    return bench.run, bench.add_arguments


def _tune_suite():
    """``mire bench tune --tune-task loops``: (run, add_arguments)."""
    from .offline import tune_bench  # lazy: declarations are read on every compile

    return tune_bench.run, tune_bench.add_arguments


# the -O levels the head decides at (without "-O"): LLVM's vectorizer runs there
OPT_LEVELS = ("2", "3", "fast")


class LoopVectorize(Task):
    name = "loop-vectorize"
    summary = "a (VF, IF) per innermost loop, through the loop-hints pass plugin"
    languages = frozenset({"c", "c++"})
    # off by default: the decisions are then recorded, not applied
    # (measured: the shipped head slows some programs, see docs/loop-vectorize.md)
    applied_when = "apply_loop_decisions"
    settings = (Setting("apply_loop_decisions", "MIRECC_APPLY_LOOPS", parse_bool, False,
                        "apply the loop-vectorize head's factors (default: record them "
                        "only)"),
                ADAPT_LOOPS, ADAPT_VERSIONS, ADAPT_UNROLL)
    opt_levels = OPT_LEVELS
    # --mirecc-help prints the head's calibrated gate (mirecc.learn.gates) instead
    measured = ("leave one family out on its labels (mire vectorize-train, "
                "docs/results/gates.md); forced on 48 held-out kernels of 4 unseen families: "
                "nothing applied, every binary clang's own")
    commands = (
          Command("vectorize-data", "mirecc.tasks.loop_vectorize.offline.cli",
                  "generate loop kernels and time every (VF, IF) of each (the vectorize "
                  "dataset)",
                  "Generate loop kernels of many families, compile each with every (VF, IF) in "
                  "{1..64} x {1..16} and with clang's default, check outputs against a scalar "
                  "reference, time them pinned with repeats, and write labels (resumable)."),
          Command("vectorize-train", "mirecc.tasks.loop_vectorize.offline.train",
                  "train the per-loop vectorize head on the vectorize dataset (needs torch)",
                  "Embed each kernel's target loop and function with the frozen encoder, train "
                  "the (VF, IF) head on the training families, evaluate by family, and write "
                  "heads/loop-vectorize."),
      )
    bench = (
          BenchSuite("vectorize", _vectorize_suite,
                     "binaries built by mirecc -O3 (the loop-vectorize head) against clang -O3,"
                     " on the dataset's held-out kernel families or --programs DIR"),
          BenchSuite("tune", _tune_suite,
                     "mire tune's candidates in the head's order vs random, replayed on timed "
                     "held-out loop kernels (--tune-data)",
                     variant="loops"),
      )
    reasons = {
        "no-loops": "no loops",
        "loops-unmatched": "the encoder's IR has other loops than the build's",
        "target-flags": "built for another target than the labels' (-march, -mcpu, ...)",
        "no-expected-gain": "no function's loops expected to gain from other factors "
                            "(adapt_loops)",
    }

    def applies(self, config) -> bool:
        return bool(getattr(config, "apply_loop_decisions", False) or adapting(config))

    def link_step(self):
        return RUNTIME

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_vectorize.head import LoopVectorizeHead

        return LoopVectorizeHead

    def injection(self):
        from mirecc.plugin.decisions import inject  # lazy: declarations are read on every compile

        return inject

    def plugin_entry(self, source, decisions):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_vectorize.head import plugin_entry

        return plugin_entry(source, decisions)

    def explain(self, result, ctx):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_vectorize.head import explain_loop_decisions

        return explain_loop_decisions(result, ctx)

    def profile_kind(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_vectorize.profile import KIND

        return KIND

    def judged(self, kinds, out, models):
        from .offline import judge  # lazy: declarations are read on every compile

        return judge.judged(kinds, out, models)


TASKS = (LoopVectorize(),)
