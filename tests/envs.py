"""The environment tests run mirecc and clang in: nothing of the caller's
MIRECC_* leaks in, caches and HOME are private to the test, C locale."""

from __future__ import annotations

import os
from pathlib import Path


def isolated_env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    # No task heads unless a test installs its own: the shipped heads (the
    # loop-vectorize head decides for C/C++) are tested where they are named.
    no_heads = tmp_path / "no-heads"
    no_heads.mkdir(exist_ok=True)
    env.update({"XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
                "HOME": str(tmp_path / "home"), "LC_ALL": "C",
                "MIRECC_HEADS_DIR": str(no_heads),
                # the pipeline in the test's own process: a per-user server
                # would outlive the test (tests of the server name a socket)
                "MIRECC_SERVER": "0"})
    env.update(extra)
    return env


def free_port() -> int:
    """A TCP port nothing listens on now (for a server a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
