"""Loop vectorization decisions (vectorize width, interleave count per loop).

They reach the compiler through the ``mirecc-loophints`` LLVM pass plugin
(``passes/loophints``, decisions file format in its FORMAT.md);
:mod:`mirecc.vectorize.plugin` finds or builds the plugin and gives the clang
flags that load it.
"""
