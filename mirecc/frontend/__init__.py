"""The compilers mirecc drives, each behind one interface
(``compiler.Compiler``: find it, classify a call, split a compile, the IR
side run, the final command), one module each, named in ``compilers``:
clang (``clang``: the split compile) and nvcc (``nvcc``: its command line
and the device IR of CUDA sources).  Also clang's command line
(``cmdline``: the flag table), the real compiler found and its version
(``compiler``), where a CUDA source's launches are and what sets their
block shape (``launches``, ``knobs``), C-family source text as the tasks
that read sources scan it (``source``: comments and literals blanked with
offsets kept, matching brackets, argument lists), and the installed driver
scripts with the CMake toolchain file (``toolchain``).

Layer 4 of the house (``docs/layout.md``): may import ``mirecc.util`` and
``mirecc.ir``.
"""
