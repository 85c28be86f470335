"""The configurations of the NUMA/prefetcher task, as the published
measurements name them (``../shared/datasets/numa-prefetch``).

A configuration is named ``-O3_<threads>_<sockets>_<NUMA nodes>_<compact|
scatter>_<SMT 0|1>_<prefetcher mask>_<ori|bal|loc>``: threads, the sockets
and NUMA nodes they run on, compact or scatter placement, whether the
second hardware thread of a core is used, a 4-bit mask whose set bits turn
Intel's hardware prefetchers off (MSR 0x1A4: bit 0 the L2 streamer, 1 the
L2 adjacent-line, 2 the L1 (DCU) next-line, 3 the L1 IP-stride prefetcher),
and the page placement: first touch, interleaved or local.  The authors'
baseline is :data:`DEFAULT`.

Standard library only: the driver and ``mire run`` read it.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "-O3_32_2_2_compact_0_0_loc"
# a configuration's fields, in column order after "-O3"
FIELDS = ("threads", "sockets", "nodes", "placement", "smt", "prefetch_mask", "pages")
PAGES = {"ori": "first touch", "bal": "interleaved", "loc": "local"}
PREFETCHERS = ("L2 streamer", "L2 adjacent line", "L1 next line", "L1 IP stride")


@dataclass(frozen=True)
class Config:
    threads: int
    sockets: int
    nodes: int
    placement: str
    smt: int
    prefetch_mask: int
    pages: str

    @property
    def name(self) -> str:
        return "_".join(["-O3", *(str(getattr(self, f)) for f in FIELDS)])

    def describe(self) -> str:
        off = [p for bit, p in enumerate(PREFETCHERS) if self.prefetch_mask >> bit & 1]
        return (f"{self.threads} threads on {self.sockets} socket(s), {self.placement}"
                f"{', SMT' if self.smt else ''}, {PAGES[self.pages]} pages, prefetchers "
                + (f"off: {', '.join(off)}" if off else "all on"))


def parse_config(name: str) -> Config:
    """The fields of a configuration name; ValueError naming it when malformed."""
    parts = name.split("_")
    if len(parts) != 8 or parts[0] != "-O3" or parts[4] not in ("compact", "scatter") \
            or parts[7] not in PAGES:
        raise ValueError(f"not a configuration name: {name!r}")
    try:
        config = Config(int(parts[1]), int(parts[2]), int(parts[3]), parts[4], int(parts[5]),
                        int(parts[6]), parts[7])
    except ValueError:
        raise ValueError(f"not a configuration name: {name!r}") from None
    if config.threads < 1 or config.sockets < 1 or config.nodes < 1 \
            or config.smt not in (0, 1) or not 0 <= config.prefetch_mask <= 15:
        raise ValueError(f"not a configuration name: {name!r}")
    return config
