"""Helpers every layer uses: atomic writes and locks (``fsutil``), the
jobserver, fault injection, per-process caches, plots, model manifests
(``modelfiles``), machine facts, ELF section sizes (``elf``).

Layer 1 of the house (``docs/layout.md``): imports the standard library and
third-party packages only, nothing of mirecc.
"""
