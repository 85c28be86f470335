"""The team store: verified results shared by every build that names the
same store (``store`` / ``MIRECC_STORE``): a Redis server
(``redis://host:port/db``) or a shared directory (NFS-style, atomic
renames).  ``backends`` speaks to them, ``team`` checks what comes back
(versioned entries, the tools that made them) and counts it.

Layer 2 of the house (``docs/layout.md``): may import ``mirecc.util`` and the
standard library (and the ``redis`` client, loaded only for a Redis store).
"""
