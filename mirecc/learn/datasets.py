"""Where the public datasets are read from (in place, never copied)."""
from __future__ import annotations

import os
from pathlib import Path


def default_root() -> Path:
    """``$MIRECC_DATASETS``, else ``../shared/datasets`` beside the checkout
    (where the project's machines keep them)."""
    env = os.environ.get("MIRECC_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"
