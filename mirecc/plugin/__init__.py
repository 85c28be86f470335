"""mirecc's LLVM pass plugin (passes/plugin): building it for a clang, and
the decisions file every plugin-applied task contributes its entries to.

Layer 9 of the house (``docs/layout.md``): may import the layers up to
``mirecc.learn``.
"""
