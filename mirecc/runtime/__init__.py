"""Code that runs inside the user's program, and what mirecc does with it.

The adaptive OpenMP runtime (``runtime/adapt/mirecc_adapt.c``, a small C
archive linked into programs built with ``adapt_openmp``) and the OpenCL
interposer (``runtime/opencl/mirecc_opencl.c``, preloaded by ``mire run
--opencl``), which share one engine (``runtime/common``): :mod:`.build`
finds or builds them, :mod:`.store` reads the verdicts they keep per user
and machine (``mire adapt``; the stored kind ``mirecc.store.kinds.VERDICTS``).

Layer 10 of the house (``docs/layout.md``): may import the layers up to
``mirecc.plugin``.
"""
