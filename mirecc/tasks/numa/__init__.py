"""NUMA, thread placement and prefetcher decisions per OpenMP region
(issue 16): learned from published measurements on a 2-socket Intel Xeon
(``../shared/datasets/numa-prefetch``).  The offline side lives in
:mod:`mirecc.tasks.numa.offline`; the head and the launcher come later.
"""
