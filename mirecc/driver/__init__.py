"""The drop-in drivers: ``mirecc``/``mirecc++`` (``clang``), ``mirecc-nvcc``
(``nvcc``) and the counters and reason codes ``mire stats`` shows
(``stats``).

Layer 14 of the house (``docs/layout.md``): may import every layer below
it; nothing below imports it.
"""
