"""JSON documents read without importing :mod:`json`.

Importing ``json`` compiles its regular expressions and so imports ``re``
and ``enum``: about 8 ms, more than the rest of a compile that reads one
small document on its way to running clang (a direct-mode hit's result, a
team-store entry).  :func:`loads` calls the C scanner that ``json`` itself
uses (``_json.make_scanner``) with ``json.loads``'s defaults, and falls back
to ``json.loads`` where that scanner is missing or the document is not
JSON (which raises ``json``'s own error, a ``ValueError``).
"""
from __future__ import annotations

_WHITESPACE = " \t\n\r"     # JSON's (RFC 8259)


class _Defaults:
    """What ``json.loads`` passes its scanner when given no hooks."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"NaN": float("nan"), "Infinity": float("inf"),
                "-Infinity": float("-inf")}[name]


_scan = None


def loads(data: str | bytes):
    """``json.loads(data)`` (UTF-8 where bytes)."""
    global _scan
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        body = text.strip(_WHITESPACE)
        if _scan is None:
            from _json import make_scanner  # inside the guard: no C scanner, json's answer
            _scan = make_scanner(_Defaults())
        value, end = _scan(body, 0)
        if end == len(body):
            return value
    except (ImportError, StopIteration, TypeError, ValueError, RecursionError):
        pass
    import json     # not JSON, or no C scanner: json's own answer (or error)

    return json.loads(data)
