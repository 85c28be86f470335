"""NUMA, thread placement and prefetcher decisions per OpenMP region
(issue 16): learned from published measurements on a 2-socket Intel Xeon
(``../shared/datasets/numa-prefetch``).

These settings belong to a run, not to the code: the compile only records
them.  The head (:mod:`.head`) chooses, per parallel region of a TU built
with ``-fopenmp`` and per input size, a configuration of the published
space (:mod:`.configs`), or keeps the default; the chosen ones are written
into the object as one line of the ``.mirecc.numa`` section (by the
mirecc's pass plugin's records), so the linked binary carries every
TU's line.  ``mire run`` (the task's part of it, :mod:`.run`, over
:mod:`.launch`) reads them back from the binary and applies what the
machine it runs on supports: threads, ``OMP_PLACES`` / ``OMP_PROC_BIND``,
``numactl`` page policy and, with ``--allow-msr``, the prefetcher mask.
Offline: :mod:`.offline` (``mire numa-regions``, ``mire numa-train``,
``mire bench numa``).

This module is the task's declaration: standard library only.
"""
from mirecc.taskapi.api import BenchSuite, Command, Setting, Task, parse_bool


def _numa_suite():
    """``mire bench numa``: (run, add_arguments)."""
    from .offline import bench  # lazy: declarations are read on every compile

    return bench.run, bench.add_arguments


class Numa(Task):
    name = "numa"
    summary = ("NUMA placement, threads and prefetchers per OpenMP region, recorded in the "
               "binary for mire run")
    languages = frozenset({"c", "c++"})
    # off by default: held out (leave one program out) the shipped head
    # gains about 1% over the default, not worth a second look at every
    # OpenMP TU's IR (see docs/numa.md)
    applied_when = "record_numa"
    settings = (Setting("record_numa", "MIRECC_RECORD_NUMA", parse_bool, False,
                        "record the NUMA head's per-region decisions in the binary's "
                        ".mirecc.numa section, for mire run (default: off; they change "
                        "nothing until mire run applies them)"),
                Setting("numa_any_machine", "MIRECC_NUMA_ANY_MACHINE", parse_bool, False,
                        "record NUMA decisions even on a machine other than the one the "
                        "head's labels describe (vendor, sockets, NUMA nodes, threads)"))
    opt_levels = ("1", "2", "3", "s", "z", "fast")
    # --mirecc-help prints the head's calibrated gate (mirecc.learn.gates) instead
    measured = ("leave one program out on the published 2-socket Xeon labels "
                "(mire numa-train, docs/results/gates.md); not measured on any other machine")
    commands = (
          Command("numa-regions", "mirecc.tasks.numa.offline.cli",
                  "map the NUMA/prefetcher dataset's regions to their programs' IR",
                  "Compile the programs of ../shared/datasets/numa-prefetch/sources as their "
                  "makefiles do (-O3 -fopenmp -g) and map each published region "
                  "(__cere__<file>_<function>_<line>) to the outlined function of the parallel "
                  "region at that line; report the regions that cannot be mapped, with the "
                  "reason."),
          Command("numa-train", "mirecc.tasks.numa.offline.train",
                  "fit the NUMA/prefetcher head on the published labels and write heads/numa",
                  "Per input size, a forest over the mapped regions' static statistics "
                  "predicting each candidate configuration's log speedup over the default (the "
                  "policy mire bench numa judges as 'gated forest: statistics'); --write-head "
                  "writes heads/numa."),
      )
    bench = (
          BenchSuite("numa", _numa_suite,
                     "per-region NUMA/placement/prefetcher policies judged on the published "
                     "measurements (leave one program out, 10 folds)"),
      )

    def head_class(self):
        from mirecc.tasks.numa.head import NumaHead  # lazy: declarations are read on every compile

        return NumaHead

    def injection(self):
        from mirecc.plugin.decisions import inject  # lazy: declarations are read on every compile

        return inject

    def plugin_entry(self, source, decisions):
        # lazy: declarations are read on every compile
        from mirecc.tasks.numa.head import plugin_entry

        return plugin_entry(source, decisions)

    def run_part(self):
        from .run import NumaPart  # lazy: declarations are read on every compile

        return NumaPart()


TASKS = (Numa(),)
