"""The per-user server's memory bound (mirecc.tu.server.bound_memory): over the
cap it gives freed pages back, then drops what it caches; the caches load
again on the next request."""
from __future__ import annotations

from mirecc.taskapi import context

from mirecc.tu import pipeline

from mirecc.tu import server
from mirecc.taskapi import onnxhead


def test_under_the_cap_nothing_is_dropped():
    pipeline._PIPELINES["marker"] = object()
    try:
        assert server.rss_mb() > 0
        assert server.bound_memory(cap_mb=10**6)
        assert "marker" in pipeline._PIPELINES
    finally:
        pipeline._PIPELINES.pop("marker", None)


def test_over_the_cap_the_caches_are_dropped_and_exit_is_asked():
    pipeline._PIPELINES["marker"] = object()
    context._ENCODERS["marker"] = object()
    onnxhead._SESSIONS["marker"] = object()
    # no process fits in 1 MB: everything is dropped, and the server is told
    # to exit (a fresh one starts with the next compile)
    assert not server.bound_memory(cap_mb=1)
    assert "marker" not in pipeline._PIPELINES and "marker" not in context._ENCODERS
    assert "marker" not in onnxhead._SESSIONS

