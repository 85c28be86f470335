"""The OpenMP task's offline lab: the timed dataset of threads, schedule and
chunk per parallel region (``mire omp-data``: :mod:`.programs`,
:mod:`.kernels`, :mod:`.dataset`, :mod:`.cli`).  Never imported by the driver."""
