"""Figures beside the benchmarks' tables: matplotlib without a display, and
PNGs written whole (a reader, or a second run, never sees half of one)."""

from __future__ import annotations

import io
from pathlib import Path

from mirecc.util.fsutil import atomic_write_bytes


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or None without matplotlib
    (an optional extra: a benchmark then writes its tables only)."""
    try:
        import matplotlib  # lazy: an optional extra, ~0.5 s with pyplot
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen
    return plt


def save(fig, path: Path, dpi: int = 110) -> None:
    """``fig``, laid out tight, as a PNG at ``path`` (atomically); closed."""
    import matplotlib.pyplot as plt  # lazy: as in pyplot(), which the caller ran

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
