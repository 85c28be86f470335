"""OpenMP runtime decisions: threads, schedule and chunk per parallel region.

For each ``#pragma omp parallel`` region of a C/C++ TU built with
``-fopenmp``, the task chooses the team size and, for the region's
worksharing loops that have no schedule clause, the schedule kind (static,
dynamic, guided) and chunk. The decisions reach the binary through the
``mirecc-omp-decide`` pass of the ``mirecc-loophints`` plugin
(``passes/loophints/FORMAT.md``, "OpenMP decisions"), which rewrites the
region's OpenMP runtime calls; explicit ``schedule(...)`` / ``num_threads(...)``
clauses and the user's ``OMP_*`` environment always win.

Modules: :mod:`.sites` (the regions and worksharing loops of a module, with
the plugin's call ids, source locations and explicit clauses); offline:
:mod:`.offline` (``mire omp-data``, the timed dataset). The head and the
driver path are not written yet (issue 15, items 3 and 4), so the task is
not registered in :mod:`mirecc.tasks.registry`.
"""
