"""The pretraining corpus builder (``mire corpus build``).

Four sources feed one content-addressed store: Debian source packages built
through mirecc's capture mode (:mod:`.debian`), csmith random programs
(:mod:`.csmith`), OpenCL kernels from Debian sources (:mod:`.opencl`) and
loop kernels generated here (:mod:`.kernels`).  :mod:`.store` deduplicates,
drops copies of the evaluation kernels (:mod:`.evalfilter`) and records
per-module statistics; :mod:`.report` sums them up.

Layer 11 of the house (``docs/layout.md``): may import the layers up to
``mirecc.runtime``.
"""
