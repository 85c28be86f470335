"""Generated kernel families: choosing seeded variants per family and
writing their sources (the loop and OpenMP datasets' generators use these)."""
from __future__ import annotations

import json
import random
from pathlib import Path

from mirecc.util.fsutil import atomic_write_bytes


def pick_families(table: dict, family_seed, seed: int, per_family: int,
                  families: list[str] | None, what: str = "kernel family") -> list:
    """``per_family`` kernels of each family of ``table`` (name -> generator
    ``(rng, seed) -> kernels``), chosen by ``family_seed(seed, family)``;
    ValueError naming an unknown family. Shared with the OpenMP kernels."""
    out = []
    for fam in families or list(table):
        if fam not in table:
            raise ValueError(f"unknown {what} {fam!r} (known: {', '.join(table)})")
        fseed = family_seed(seed, fam)
        allk = table[fam](random.Random(fseed), fseed)
        random.Random(fseed ^ 0x5EED).shuffle(allk)
        out.extend(sorted(allk[:per_family], key=lambda k: k.name))
    names = [k.name for k in out]
    assert len(names) == len(set(names)), "kernel names must be unique"
    return out


def write_sources(out_dir: Path | str, kernels: list, index: dict) -> list[dict]:
    """Write ``<name>.c`` per kernel (only when changed) and ``index.json``
    (``index`` plus the kernels' records); returns the records."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = []
    for k in kernels:
        path = out_dir / f"{k.name}.c"
        data = k.source.encode()
        if not path.exists() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
        records.append(k.record())
    atomic_write_bytes(out_dir / "index.json",
                       (json.dumps({**index, "kernels": records}, indent=1) + "\n").encode())
    return records
