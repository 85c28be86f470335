"""The drop-in drivers: ``mirecc``/``mirecc++`` (``clang``: mirecc's own
options, the configuration, the compiler and the call classified, then
handed once to the per-TU path in its ``mirecc.tu.context.CompileContext``)
and ``mirecc-nvcc`` (``nvcc``).

Layer 15 of the house (``docs/layout.md``): may import every layer below
it; nothing below imports it.
"""
