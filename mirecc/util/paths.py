"""Where mirecc keeps its files.  Only ``os`` is imported: the driver's
configuration reads it on every call."""
from __future__ import annotations

import os


def default_cache_dir() -> str:
    """mirecc's cache directory when none is configured:
    ``$XDG_CACHE_HOME/mirecc``, else ``~/.cache/mirecc``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mirecc")
