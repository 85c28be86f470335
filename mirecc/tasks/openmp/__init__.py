"""OpenMP runtime decisions: threads, schedule and chunk per parallel region.

For each ``#pragma omp parallel`` region of a C/C++ TU built with
``-fopenmp``, the task chooses the team size and, for the region's
worksharing loops that have no schedule clause, the schedule kind (static,
dynamic, guided) and chunk. The decisions reach the binary through the
``mirecc-omp-decide`` pass of mirecc's pass plugin
(``passes/plugin/FORMAT.md``, "OpenMP decisions"), which rewrites the
region's OpenMP runtime calls; explicit ``schedule(...)`` / ``num_threads(...)``
clauses and the user's ``OMP_*`` environment always win.

With ``adapt_openmp`` the regions become adaptive sites instead: the object
carries each region's top ``adapt_candidates`` configurations in the head's
order (machine-relative: a share of the cores, a schedule, a chunk), and the
adaptive runtime linked into the program (``runtime/adapt``, :mod:`mirecc.runtime`)
tries them in the program's own runs against its own configuration, keeps
what measures faster, and remembers the verdict (``mire adapt`` lists them).

Driver side: :mod:`.head` (the per-region forest head, its plugin entries
and ``--explain`` lines), :mod:`.features` (static region statistics),
:mod:`.sites` (the regions and worksharing loops of a module, with the
plugin's call ids, source locations and explicit clauses). Offline:
:mod:`.offline` (``mire omp-data``, the timed dataset; ``mire omp-train``,
the head and its leave-one-application-out evaluation). Power caps are a
launcher's business, not the compile's (``mire run``, :mod:`mirecc.launch`).

This module is the task's declaration: standard library only.
"""
from mirecc.runtime.link import AdaptiveRuntime
from mirecc.taskapi.api import BenchSuite, Command, Setting, Task, parse_bool
from mirecc.taskapi.settings import as_positive_int


def _openmp_suite():
    """``mire bench openmp``: (run, add_arguments)."""
    from .offline import train  # lazy: declarations are read on every compile

    return train.run_bench, train.add_bench_arguments


def _tune_suite():
    """``mire bench tune --tune-task openmp``: (run, add_arguments)."""
    from .offline import train, tune_bench  # lazy: declarations are read on every compile

    return tune_bench.run, train.add_bench_arguments


# with adapt_openmp, a link with -fopenmp carries the adaptive runtime
_ADAPTIVE_RUNTIME = AdaptiveRuntime("adapt_openmp", needs_flags=("-fopenmp",))


class OpenMP(Task):
    name = "openmp"
    summary = ("threads, schedule and chunk per OpenMP parallel region, through the "
               "loop-hints pass plugin")
    languages = frozenset({"c", "c++"})
    # off by default: applied only where leave-one-application-out
    # cross-validation shows no application slower (see docs/openmp.md)
    applied_when = "apply_openmp"
    settings = (Setting("apply_openmp", "MIRECC_APPLY_OPENMP", parse_bool, False,
                        "apply the OpenMP head's region configurations (default: record "
                        "them only)"),
                Setting("adapt_openmp", "MIRECC_ADAPT_OPENMP", parse_bool, False,
                        "make each parallel region an adaptive site: the runtime linked into"
                        " the program tries the head's candidates in its runs and keeps what "
                        "measures faster (wins over apply_openmp)"),
                Setting("adapt_candidates", "MIRECC_ADAPT_CANDIDATES", as_positive_int, 4,
                        "candidates per adaptive site, the head's best first, beside the "
                        "program's own configuration"))
    opt_levels = ("1", "2", "3", "s", "z", "fast")
    # --mirecc-help prints the head's calibrated gate (mirecc.learn.gates) instead
    measured = ("leave one application out on its labels and on held-out programs "
                "(mire omp-train --held-out, docs/results/gates.md)")
    commands = (
          Command("omp-data", "mirecc.tasks.openmp.offline.cli",
                  "time threads x schedule x chunk per OpenMP region (the OpenMP dataset)",
                  "Build PolyBench-ACC's OpenMP programs (and generated kernel families) with "
                  "every (threads, schedule, chunk) forced on each parallel region through the "
                  "pass plugin, time them against the default build with repeats, check "
                  "outputs, and write labels (resumable); --summary: the best configuration per"
                  " region and the oracle."),
          Command("omp-train", "mirecc.tasks.openmp.offline.train",
                  "judge the OpenMP head leave one application out, and write it (needs scikit-"
                  "learn)",
                  "From the labels of mire omp-data: default, best single configuration and a "
                  "forest per feature set (region statistics, IR2Vec, a random-init encoder, "
                  "mirecc's encoder), each judged on applications it never saw: speedup, share "
                  "of the oracle, slowdowns; --write-head fits one on every region and writes "
                  "heads/openmp."),
      )
    bench = (
          BenchSuite("openmp", _openmp_suite,
                     "the OpenMP head's policies judged leave one application out on the labels"
                     " of mire omp-data (--omp-labels)"),
          BenchSuite("tune", _tune_suite,
                     "mire tune's candidates replayed on OpenMP regions' configurations "
                     "(--tune-task openmp, --omp-labels)",
                     variant="openmp"),
      )
    reasons = {
        "fixed-by-source": "every region's configuration is fixed by the source's clauses",
        "functions-unmatched": "the encoder's IR has other functions than the build's",
    }

    def applies(self, config) -> bool:
        return bool(getattr(config, "apply_openmp", False)
                    or getattr(config, "adapt_openmp", False))

    def link_step(self):
        return _ADAPTIVE_RUNTIME

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.openmp.head import OpenMPHead

        return OpenMPHead

    def injection(self):
        from mirecc.plugin.decisions import inject  # lazy: declarations are read on every compile

        return inject

    def plugin_entry(self, source, decisions):
        # lazy: declarations are read on every compile
        from mirecc.tasks.openmp.head import plugin_entry

        return plugin_entry(source, decisions)

    def explain(self, result, ctx):
        # lazy: declarations are read on every compile
        from mirecc.tasks.openmp.head import explain_openmp_decisions

        return explain_openmp_decisions(result, ctx)

    def profile_kind(self):
        from mirecc.tasks.openmp.profile import KIND  # lazy: declarations are read on every compile

        return KIND

    def judged(self, kinds, out, models):
        from .offline import judge  # lazy: declarations are read on every compile

        return judge.judged(kinds, out, models)


TASKS = (OpenMP(),)
