"""Read and write mirecc's binary program-graph files (``.mgraph``).

Layout (see passes/graph/FORMAT.md): the 8-byte magic ``MIRGRAPH``, a
little-endian uint32 version, a uint32 header length, a JSON header (padded
with spaces to a multiple of 8 bytes from the file start) that lists every
array's name, numpy dtype, element count and byte offset, then the arrays,
each 8-byte aligned. Loading is ``numpy.frombuffer`` per array, no
per-element parsing.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from . import schema

MAGIC = b"MIRGRAPH"
VERSION = 1

# name -> dtype, in file order.
ARRAYS = {
    "node_type": "|u1",
    "node_text": "<i4",
    "node_function": "<i4",
    "node_block": "<i4",
    "node_loop": "<i4",
    "node_full_text_offsets": "<i8",
    "node_full_text_bytes": "|u1",
    "edge_flow": "|u1",
    "edge_source": "<i4",
    "edge_target": "<i4",
    "edge_position": "<i4",
    "string_offsets": "<i8",
    "string_bytes": "|u1",
    "function_name_offsets": "<i8",
    "function_name_bytes": "|u1",
    "function_is_declaration": "|u1",
    "function_entry": "<i4",
    "loop_function": "<i4",
    "loop_header": "<i4",
    "loop_depth": "<i4",
    "loop_parent": "<i4",
}


class GraphFormatError(ValueError):
    """A graph file that is not a valid mirecc graph."""


def _strings(offsets: np.ndarray, blob: np.ndarray) -> List[str]:
    data = blob.tobytes()
    offs = offsets.tolist()
    return [data[offs[i]:offs[i + 1]].decode("utf-8", "replace") for i in range(len(offs) - 1)]


@dataclass
class ProgramGraph:
    """A ProGraML-schema program graph held as numpy arrays.

    ``arrays`` maps the names in :data:`ARRAYS` to numpy arrays (read-only
    when loaded from a file). ``meta`` is the file's JSON header less the
    array table.
    """

    arrays: Dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)

    # -- nodes
    @property
    def num_nodes(self) -> int:
        return int(self.arrays["node_type"].shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.arrays["edge_flow"].shape[0])

    @property
    def node_type(self) -> np.ndarray:
        return self.arrays["node_type"]

    @property
    def node_function(self) -> np.ndarray:
        return self.arrays["node_function"]

    @property
    def node_block(self) -> np.ndarray:
        return self.arrays["node_block"]

    @property
    def node_loop(self) -> np.ndarray:
        """Index into :attr:`loop_ids` of each instruction's innermost loop, or -1."""
        return self.arrays["node_loop"]

    @property
    def edge_flow(self) -> np.ndarray:
        return self.arrays["edge_flow"]

    @property
    def edge_source(self) -> np.ndarray:
        return self.arrays["edge_source"]

    @property
    def edge_target(self) -> np.ndarray:
        return self.arrays["edge_target"]

    @property
    def edge_position(self) -> np.ndarray:
        return self.arrays["edge_position"]

    @property
    def edge_index(self) -> np.ndarray:
        """A (2, E) int64 array of (source, target), as PyG expects."""
        return np.stack([self.edge_source, self.edge_target]).astype(np.int64)

    def strings(self) -> List[str]:
        """The string table that ``node_text`` indexes."""
        return _strings(self.arrays["string_offsets"], self.arrays["string_bytes"])

    def node_texts(self) -> List[str]:
        """ProGraML's node ``text``: opcode for instructions, type for data."""
        table = self.strings()
        return [table[i] for i in self.arrays["node_text"].tolist()]

    def full_text(self, node: int) -> str:
        """ProGraML's ``full_text``: an instruction's statement as LLVM prints it."""
        offs = self.arrays["node_full_text_offsets"]
        b, e = int(offs[node]), int(offs[node + 1])
        return self.arrays["node_full_text_bytes"][b:e].tobytes().decode("utf-8", "replace")

    def full_texts(self) -> List[str]:
        return _strings(self.arrays["node_full_text_offsets"], self.arrays["node_full_text_bytes"])

    def statements(self) -> List[str]:
        """Statement text of every instruction node (not [external] or declarations)."""
        offs = self.arrays["node_full_text_offsets"]
        data = self.arrays["node_full_text_bytes"].tobytes()
        out = []
        for n in np.nonzero(self.node_type == schema.INSTRUCTION)[0].tolist():
            if offs[n + 1] > offs[n]:
                out.append(data[offs[n]:offs[n + 1]].decode("utf-8", "replace"))
        return out

    # -- functions and loops
    @property
    def function_names(self) -> List[str]:
        return _strings(self.arrays["function_name_offsets"], self.arrays["function_name_bytes"])

    @property
    def num_loops(self) -> int:
        return int(self.arrays["loop_function"].shape[0])

    @property
    def loop_ids(self) -> List[str]:
        """Stable loop ids: ``<function name>:<header block index>``.

        The header block index counts the function's basic blocks from 0 in
        layout order, so the same IR gives the same ids.
        """
        names = self.function_names
        return [f"{names[f]}:{h}" for f, h in zip(self.arrays["loop_function"].tolist(),
                                                  self.arrays["loop_header"].tolist())]

    # -- summaries
    def node_counts(self) -> Dict[str, int]:
        counts = np.bincount(self.node_type, minlength=3)
        return {name: int(counts[t]) for t, name in schema.NODE_TYPES.items()}

    def edge_counts(self) -> Dict[str, int]:
        counts = np.bincount(self.edge_flow, minlength=3)
        return {name: int(counts[f]) for f, name in schema.EDGE_FLOWS.items()}


def loads(data: bytes, name: str = "<bytes>") -> ProgramGraph:
    """Parse a graph file's bytes (arrays are views into ``data``)."""
    if len(data) < 16 or data[:8] != MAGIC:
        raise GraphFormatError(f"{name}: not a mirecc graph file (bad magic)")
    version, hlen = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise GraphFormatError(f"{name}: unsupported graph format version {version}")
    try:
        header = json.loads(data[16:16 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise GraphFormatError(f"{name}: damaged header: {exc}") from None
    arrays = {}
    for entry in header.pop("arrays"):
        dtype = np.dtype(entry["dtype"])
        count, offset = int(entry["count"]), int(entry["offset"])
        if offset + count * dtype.itemsize > len(data):
            raise GraphFormatError(f"{name}: truncated (array {entry['name']})")
        arrays[entry["name"]] = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    missing = [k for k in ARRAYS if k not in arrays]
    if missing:
        raise GraphFormatError(f"{name}: missing arrays {', '.join(missing)}")
    return ProgramGraph(arrays=arrays, meta=header)


def load(path: str | os.PathLike) -> ProgramGraph:
    with open(path, "rb") as f:
        return loads(f.read(), str(path))


def dumps(graph: ProgramGraph) -> bytes:
    meta = {k: v for k, v in graph.meta.items() if k != "arrays"}
    meta.setdefault("format", "mirecc-graph")
    meta["version"] = VERSION
    meta["num_nodes"] = graph.num_nodes
    meta["num_edges"] = graph.num_edges
    arrays = [(name, np.ascontiguousarray(graph.arrays[name], dtype=np.dtype(dt)))
              for name, dt in ARRAYS.items()]

    def header_for(base: int) -> bytes:
        table, off = [], base
        for name, a in arrays:
            table.append({"name": name, "dtype": ARRAYS[name], "count": int(a.shape[0]),
                          "offset": off})
            off += (a.nbytes + 7) & ~7
        h = json.dumps(dict(meta, arrays=table), separators=(",", ":")).encode()
        return h + b" " * ((-(16 + len(h))) % 8)

    header = header_for(0)
    for _ in range(4):
        nxt = header_for(16 + len(header))
        if len(nxt) == len(header):
            header = nxt
            break
        header = nxt
    parts = [MAGIC, struct.pack("<II", VERSION, len(header)), header]
    for _, a in arrays:
        parts.append(a.tobytes())
        parts.append(b"\0" * ((-a.nbytes) % 8))
    return b"".join(parts)


def dump(graph: ProgramGraph, path: str | os.PathLike) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(dumps(graph))
    os.replace(tmp, path)
