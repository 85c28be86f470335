"""IR text: the disassembler and function-body reader (``text``), the
OpenMP region table (``regions``, ``region_stats``), LLVM's view of each call
site read through the pass plugin (``calls``); and for the encoder, IR
statements' normalisation (``normalise``) and the WordPiece tokenizer
(``tokenizer``), which the driver path does not import.

Layer 3 of the house (``docs/layout.md``): may import ``mirecc.util``.
"""
