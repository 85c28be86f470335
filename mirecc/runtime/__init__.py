"""Code that runs inside the user's program, and what mirecc does with it.

The adaptive OpenMP runtime (``runtime/adapt/mirecc_adapt.c``, a small C
archive linked into programs built with ``adapt_openmp``): :mod:`.build`
finds or builds it, :mod:`.store` reads the verdicts it keeps per user and
machine (``mire adapt``).

Layer 9 of the house (``docs/layout.md``): may import the layers up to
``mirecc.plugin``.
"""
