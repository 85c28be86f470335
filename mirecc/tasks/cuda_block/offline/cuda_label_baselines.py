"""What a CUDA block-shape head must beat, read off the committed labels.

    .venv/bin/python -m mirecc.tasks.cuda_block.offline.cuda_label_baselines [heads/cuda-block/labels/h100-polybench.jsonl.gz]

Per (program, size) with more than one shape timed (the tunable ones), the
speedup over the source's own shape (median GPU times of
cuda_labels.py) of:

- the oracle: the fastest correct shape;
- one fixed shape, chosen leave one program out: the shape with the best
  geometric-mean speedup over the other programs' cases (a shape that is
  wrong or missing for a case counts as the source shape there, as a
  verified build would fall back), applied to the held-out program where it
  is correct, else the source shape.

Geometric means over the cases, and the share of the oracle's log gain.
"""
from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

if __package__:
    from .cuda_labels import classify
else:                                  # run by path: the sibling script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cuda_labels import classify  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[4] / "heads/cuda-block/labels/h100-polybench.jsonl.gz"


def cases(records: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(program, size) -> {shape: speedup over the source shape} for the
    correct shapes, the source shape included (1.0); only cases where the
    source shape was timed and another shape too."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["program"], r["size"]), []).append(r)
    out = {}
    for key, runs in groups.items():
        table, src = classify(runs)
        src_t = table.get(src, {}).get("median")
        if not src_t or table[src]["bad"] or len(table) < 2:
            continue
        out[key] = {shape: src_t / s["median"] for shape, s in table.items()
                    if not s["bad"] and s["median"]}
        out[key][src] = 1.0
    return out


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def fixed_shape_loo(data: dict) -> dict[tuple[str, str], tuple[str, float]]:
    """Per case: the shape chosen on the other programs and its speedup here."""
    programs = sorted({p for p, _ in data})
    shapes = sorted({s for speeds in data.values() for s in speeds if s != "source"})
    chosen = {}
    for held in programs:
        train = [v for (p, _), v in data.items() if p != held]
        # a shape missing or wrong in a case falls back to the source shape there (1.0)
        score = {s: geomean([v.get(s, 1.0) for v in train]) for s in shapes}
        best = max(shapes, key=lambda s: (score[s], s))
        for (p, size), speeds in data.items():
            if p == held:
                chosen[(p, size)] = (best, speeds.get(best, 1.0))
    return chosen


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else DEFAULT
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as fh:
        records = [json.loads(line) for line in fh]
    data = cases(records)
    if not data:
        sys.exit(f"{path}: no (program, size) with the source shape and another shape timed")
    oracle = [max(v.values()) for v in data.values()]
    loo = fixed_shape_loo(data)
    fixed = [loo[k][1] for k in data]
    log_oracle = sum(map(math.log, oracle))
    share = sum(map(math.log, fixed)) / log_oracle if log_oracle > 0 else float("nan")
    picks = sorted({loo[k][0] for k in data})
    print(f"{path.name}: {len(data)} cases (program x size), "
          f"{len({p for p, _ in data})} programs")
    print(f"{'policy':44} {'geomean':>8} {'worst':>7} {'share of oracle gain':>21}")
    print(f"{'source shape':44} {1.0:8.3f} {1.0:7.3f} {0.0:20.0%}")
    print(f"{'one fixed shape, leave one program out':44} {geomean(fixed):8.3f} "
          f"{min(fixed):7.3f} {share:20.0%}")
    print(f"{'oracle (fastest correct shape)':44} {geomean(oracle):8.3f} "
          f"{min(oracle):7.3f} {1.0:20.0%}")
    print(f"fixed shapes chosen: {', '.join(picks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
