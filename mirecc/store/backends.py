"""Where the team store's entries live: a shared directory
(:mod:`mirecc.store.shared`) or a Redis server (:mod:`mirecc.store.redisdb`).

Both are one interface, mapping (kind, key) to bytes without reading them:
``get(kind, key)`` (None: no entry), ``put(kind, key, data)``,
``delete(kind, key)``, ``keys(kind)``, ``usage(kind)`` (its entries and
bytes, :class:`~mirecc.store.local.Usage`) and ``describe()``; each raises
:class:`Unavailable` when the store cannot be reached now.  The kinds they
hold are declared in :mod:`mirecc.store.kinds`.
"""
from __future__ import annotations

import os

from mirecc.store.local import Unavailable


def open_backend(url: str, timeout: float):
    """The backend ``url`` names: ``redis://`` / ``rediss://`` / ``unix://``
    a Redis server, ``file://PATH`` or a path a directory."""
    # here, not at the top: every compile imports this module, and only one
    # that names a store loads its backend (~1 ms each on a 2-core machine)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from mirecc.store.redisdb import RedisStore  # lazy: see above

        return RedisStore(url, timeout)
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        raise Unavailable(f"{url}: not a store (redis://host:port/db or a directory)")
    from mirecc.store.shared import SharedDir  # lazy: see above

    return SharedDir(os.path.expanduser(url))


def __getattr__(name: str):
    """The backends' classes by name (``RedisStore``, ``SharedDir``,
    ``_plain_url``), loaded when first named (:func:`open_backend`)."""
    if name in ("RedisStore", "_plain_url"):
        from mirecc.store import redisdb  # lazy: loaded when first named

        return getattr(redisdb, name)
    if name == "SharedDir":
        from mirecc.store.shared import SharedDir  # lazy: as above

        return SharedDir
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
