"""Per-process caches, declared by their owners and dropped together.

A module that keeps something loaded between TUs in a long-lived process
(the per-user server: encoders, ONNX sessions, loaded pipelines) declares
its cache here with :func:`process_cache` instead of a private dict; the
server frees memory with :func:`drop_all` without knowing who keeps what.
"""
from __future__ import annotations

_CACHES: dict = {}


def process_cache(name: str) -> dict:
    """The process's cache called ``name`` (one dict per name and process)."""
    return _CACHES.setdefault(name, {})


def drop_all() -> None:
    """Empty every declared cache (what they hold loads again on next use)."""
    for cache in _CACHES.values():
        cache.clear()
