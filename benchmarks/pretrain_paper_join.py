"""Join the fp16 weight parts that benchmarks/pretrain_paper_gpu.sh returns
from the device into a model.pt (fp32, what ``mire export`` reads).

    python benchmarks/pretrain_paper_join.py DIR [OUT]   (OUT: .work/pretrain/paper/model.pt)

The weights were trained in fp32 and rounded to fp16 for the trip (the
device tool returns at most 64 MiB); they are widened back here, so the
model exported and benchmarked is the rounded one (``mire pretrain
--eval-only`` gives its held-out metrics).
"""
import io
import sys
from pathlib import Path

import torch

from mirecc.util.fsutil import atomic_write_bytes


def main() -> int:
    parts = sorted(Path(sys.argv[1]).glob("weights.fp16.pt.part*"))
    if not parts:
        sys.exit(f"{sys.argv[1]}: no weights.fp16.pt.part* files")
    out = Path(sys.argv[2] if len(sys.argv) > 2 else ".work/pretrain/paper/model.pt")
    state = torch.load(io.BytesIO(b"".join(p.read_bytes() for p in parts)),
                       map_location="cpu", weights_only=True)
    state["model"] = {k: v.float() if v.is_floating_point() else v
                      for k, v in state["model"].items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buf.getvalue())
    print(f"{out}: step {state.get('step')}, {sum(v.numel() for v in state['model'].values())} "
          f"values from {len(parts)} parts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
