"""mirecc's LLVM pass plugin (passes/loophints): building it for a clang, and
the decisions file every plugin-applied task contributes its entries to."""
