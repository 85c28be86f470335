"""MIREncoder (PACT'24): the multi-modal IR encoder, training side.

The model lives in :mod:`mirecc.encoder.model` and needs torch; importing
this package does not, so the driver and torch-less installs can import
``mirecc.encoder`` (for its constants and, later, the ONNX runtime side)
without paying for or requiring torch.

Layer 6 of the house (``docs/layout.md``): may import ``mirecc.util``, ``ir``,
``frontend`` and ``graph``.
"""
from pathlib import Path

#: the shipped model directory (``mire export`` writes it): the default of
#: the runtime, the server and ``mire embed``
SHIPPED_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "encoder"
