"""IR statements for the encoder: normalisation (``normalise``) and the
WordPiece tokenizer (``tokenizer``).  Neither is imported by the driver path."""
