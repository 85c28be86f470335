"""Offline side of the NUMA/prefetcher task: the published regions mapped
to their programs' IR (:mod:`.regions`), and ``mire numa-regions``."""
