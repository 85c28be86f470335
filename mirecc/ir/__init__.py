"""IR statements for the encoder: normalisation (``normalise``) and the
WordPiece tokenizer (``tokenizer``).  Neither is imported by the driver path.

Layer 3 of the house (``docs/layout.md``): may import ``mirecc.util``.
"""
