"""The front ends: clang's command line (``cmdline``: the flag table), the
real compiler found and its version (``compiler``), the user's compile run
beside the front end that emits the IR (``clang``: the split compile),
nvcc's command line and the device IR of CUDA sources (``nvcc``), C-family
source text as the tasks that read sources scan it (``source``: comments and
literals blanked with offsets kept, matching brackets, argument lists), and
the installed driver scripts with the CMake toolchain file (``toolchain``).

Layer 4 of the house (``docs/layout.md``): may import ``mirecc.util`` and
``mirecc.ir``.
"""
