"""The compilers mirecc drives: one module each, named here, each defining
``COMPILER`` (a :class:`mirecc.frontend.compiler.Compiler`).  Adding a
compiler is its module and one line below; the driver takes it by name
(``mirecc.driver.clang.main(argv, cxx, kind=...)``).

Only ``importlib`` (a builtin module, already loaded) is used: a call
imports the one compiler it runs.
"""
from __future__ import annotations

import importlib

#: compiler name -> the module that defines it
COMPILER_MODULES = {
    "clang": "mirecc.frontend.clang",
    "nvcc": "mirecc.frontend.nvcc",
}


def compiler(name: str):
    """The compiler registered as ``name`` (imported on first use); KeyError
    naming the known ones when there is none."""
    try:
        module = COMPILER_MODULES[name]
    except KeyError:
        raise KeyError(f"no compiler '{name}' (known: {', '.join(sorted(COMPILER_MODULES))})"
                       ) from None
    return importlib.import_module(module).COMPILER
