"""Where the team store's entries live: a shared directory or a Redis
server.  Both map (kind, key) to bytes; neither reads what it stores.

A directory store keeps ``<root>/<kind>/<key[:2]>/<key>`` files, written to
a temporary name and renamed (readers see the old entry or the whole new
one, also over NFS).  A Redis store keeps ``mirecc:<kind>:<key>`` strings
and answers within ``timeout`` seconds or raises :class:`Unavailable`.
"""
from __future__ import annotations

import os

from mirecc.util.fsutil import atomic_write_bytes


class Unavailable(Exception):
    """The store cannot be reached now (the message says why)."""


class DirStore:
    def __init__(self, root: str):
        self.root = root
        self.url = root

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.root, kind, key[:2], key)

    def get(self, kind: str, key: str) -> bytes | None:
        try:
            with open(self._path(kind, key), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Unavailable(f"{self.root}: {exc.strerror or exc}") from None

    def put(self, kind: str, key: str, data: bytes) -> None:
        try:
            atomic_write_bytes(self._path(kind, key), data)
        except OSError as exc:
            raise Unavailable(f"{self.root}: {exc.strerror or exc}") from None

    def delete(self, kind: str, key: str) -> None:
        try:
            os.unlink(self._path(kind, key))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise Unavailable(f"{self.root}: {exc.strerror or exc}") from None

    def keys(self, kind: str):
        base = os.path.join(self.root, kind)
        if not os.path.isdir(base):
            if not os.path.isdir(self.root):
                raise Unavailable(f"{self.root}: no such directory")
            return
        for sub in sorted(os.listdir(base)):
            folder = os.path.join(base, sub)
            if os.path.isdir(folder):
                for name in sorted(os.listdir(folder)):
                    if not name.startswith("."):
                        yield name

    def describe(self) -> str:
        if not os.path.isdir(self.root):
            raise Unavailable(f"{self.root}: no such directory")
        return f"directory {self.root}"


class RedisStore:
    PREFIX = "mirecc"

    def __init__(self, url: str, timeout: float):
        self.url = url
        try:
            import redis
        except ImportError:
            raise Unavailable("the redis client is not installed (pip install redis)") from None
        self._errors = (redis.exceptions.RedisError, OSError)
        try:
            self._client = redis.Redis.from_url(url, socket_timeout=timeout,
                                                socket_connect_timeout=timeout,
                                                retry_on_timeout=False)
        except ValueError as exc:
            raise Unavailable(f"{url}: {exc}") from None

    def _name(self, kind: str, key: str) -> str:
        return f"{self.PREFIX}:{kind}:{key}"

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except self._errors as exc:
            raise Unavailable(f"{self.url}: {str(exc) or type(exc).__name__}") from None

    def get(self, kind: str, key: str) -> bytes | None:
        return self._call(self._client.get, self._name(kind, key))

    def put(self, kind: str, key: str, data: bytes) -> None:
        self._call(self._client.set, self._name(kind, key), data)

    def delete(self, kind: str, key: str) -> None:
        self._call(self._client.delete, self._name(kind, key))

    def keys(self, kind: str):
        prefix = self._name(kind, "")
        for name in self._call(lambda: list(self._client.scan_iter(match=prefix + "*",
                                                                   count=1000))):
            yield name.decode()[len(prefix):] if isinstance(name, bytes) else name[len(prefix):]

    def describe(self) -> str:
        info = self._call(self._client.info, "server")
        return f"Redis {info.get('redis_version', '?')} at {self.url}"


def open_backend(url: str, timeout: float):
    """The backend ``url`` names: ``redis://`` / ``rediss://`` / ``unix://``
    a Redis server, ``file://PATH`` or a path a directory."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(url, timeout)
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        raise Unavailable(f"{url}: not a store (redis://host:port/db or a directory)")
    return DirStore(os.path.expanduser(url))
