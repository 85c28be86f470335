"""Figures beside the benchmarks' tables: matplotlib without a display, and
PNGs written whole (a reader, or a second run, never sees half of one)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or None without matplotlib
    (an optional extra: a benchmark then writes its tables only)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path: Path, dpi: int = 110) -> None:
    """``fig``, laid out tight, as a PNG at ``path`` (atomically); closed."""
    import io

    import matplotlib.pyplot as plt

    from mirecc.util.fsutil import atomic_write_bytes

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
