"""Loop-nest schedules per function: LLVM's own or Polly with one of a few
settings (:mod:`.schedules`), ranked by a forest over loop-nest statistics
of the build's IR (:mod:`.features`, :mod:`.head`) and applied through the
compile's flags (``-mllvm -polly -polly-only-func=...``).
Offline: :mod:`.offline` (``mire nests-data``: the timed dataset;
``mire bench nests``: the leave-one-program-out table and the head).
Shipped head: ``heads/loop-nests``.

This module is the task's declaration: standard library only.
"""
from mirecc.runtime.versions import ADAPT_LOOPS, RUNTIME, adapting
from mirecc.taskapi.api import BenchSuite, Command, Setting, Task, parse_bool


def _nests_suite():
    """``mire bench nests``: (run, add_arguments)."""
    from .offline import bench  # lazy: declarations are read on every compile

    return bench.run, bench.add_arguments


# the -O levels the head decides at (without "-O")
OPT_LEVELS = ("2", "3", "fast")

class LoopNests(Task):
    name = "loop-nests"
    summary = ("a loop-nest schedule (LLVM's, or Polly with one of a few settings) per "
               "function with a nest, through -mllvm -polly -polly-only-func")
    languages = frozenset({"c", "c++"})
    # off by default: leave one program out shows programs below 0.95x, and
    # the shipped head's gate refuses forcing (its spec's refuse_forcing)
    applied_when = "apply_loop_nests"
    settings = (Setting("apply_loop_nests", "MIRECC_APPLY_LOOP_NESTS", parse_bool, False,
                        "apply the loop-nests head's schedules (default: shown by "
                        "--explain and recorded only)"),
                ADAPT_LOOPS)
    opt_levels = OPT_LEVELS
    measured = ("leave one program out on 81 timed cases of 47 programs (docs/results/"
                "loop-nests.md): guessing 1.26x geomean over -O3 with 2 programs below "
                "0.95x (so the gate refuses forcing); the first 2 schedules measured reach "
                "92% of the oracle's log gain")
    commands = (
          Command("nests-data", "mirecc.tasks.loop_nests.offline.dataset",
                  "time loop-nest programs under every schedule (the loop-nests dataset)",
                  "Build PolyBench-ACC's kernels (sequential) and mirecc's own loop-nest "
                  "families with clang -O3 and each schedule, check outputs against -O3's, "
                  "time them pinned with repeats, sides rotated, and write labels "
                  "(resumable)."),
      )
    bench = (BenchSuite("nests", _nests_suite,
                        "loop-nest schedules: the head's rankings against LLVM's, Polly "
                        "always on, the best single schedule, IR2Vec and encoders, leave "
                        "one program out on the timed labels (needs "
                        "pip install 'mirecc[train,bench]')"),)
    reasons = {
        "no-nests": "no loop nest of depth 2 or more",
        "user-schedule": "the source chose its loops' schedule (loop pragmas)",
        "no-schedule-gain": "no function with a nest expected to gain from a schedule "
                            "(adapt_loops)",
    }

    def applies(self, config) -> bool:
        return bool(getattr(config, "apply_loop_nests", False) or adapting(config))

    def link_step(self):
        # with adapt_loops its versions call the adaptive runtime
        return RUNTIME

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_nests.head import LoopNestHead

        return LoopNestHead

    def injection(self):
        # lazy: declarations are read on every compile
        from mirecc.plugin.decisions import inject as plugin
        from mirecc.tasks.loop_nests.head import inject

        # versions (adapt_loops) through the plugin; Polly's flags of its own
        return (plugin, inject)

    def plugin_entry(self, source, decisions):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_nests.head import plugin_entry

        return plugin_entry(source, decisions)

    def profile_kind(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.loop_nests.profile import KIND

        return KIND

    def judged(self, kinds, out, models):
        from .offline import bench  # lazy: declarations are read on every compile

        return bench.judged(kinds, out, models)


TASKS = (LoopNests(),)
