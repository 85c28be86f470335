"""The team store on a Redis server: ``mirecc:<kind>:<key>`` strings,
answered within ``timeout`` seconds or
:class:`~mirecc.store.local.Unavailable`.  No size limit of mirecc's (the server's ``maxmemory``
policy, if any; ``mire store prune`` removes what no build can use).

A compile only reads, once: for a plain ``redis://`` URL that read is a few
protocol lines over a socket (:func:`_resp_get`), because importing the
Redis client costs a compile 0.1-0.4 s on this project's 2-core machines;
everything else (writes, listing, ``rediss://`` and ``unix://``) goes
through the client.
"""
from __future__ import annotations

from mirecc.store.local import Unavailable, Usage


class RedisStore:
    """A team store backend (:mod:`mirecc.store.backends`) on a Redis server."""

    PREFIX = "mirecc"

    def __init__(self, url: str, timeout: float):
        self.url = url
        self.timeout = timeout
        self._client = None
        self._plain = None      # (host, port, db, username, password) for _resp_get
        try:
            self._plain = _plain_url(url)
        except ValueError as exc:
            raise Unavailable(f"{url}: {exc}") from None

    def client(self):
        """The Redis client (redis-py), made on first use."""
        if self._client is None:
            try:
                import redis  # lazy: optional (pip install redis)
            except ImportError:
                raise Unavailable("the redis client is not installed (pip install redis)") \
                    from None
            self._errors = (redis.exceptions.RedisError, OSError)
            try:
                self._client = redis.Redis.from_url(self.url, socket_timeout=self.timeout,
                                                    socket_connect_timeout=self.timeout,
                                                    retry_on_timeout=False)
            except ValueError as exc:
                raise Unavailable(f"{self.url}: {exc}") from None
        return self._client

    def _name(self, kind: str, key: str) -> str:
        return f"{self.PREFIX}:{kind}:{key}"

    def _call(self, method: str, *args):
        client = self.client()
        try:
            return getattr(client, method)(*args)
        except self._errors as exc:
            raise Unavailable(f"{self.url}: {str(exc) or type(exc).__name__}") from None

    def get(self, kind: str, key: str) -> bytes | None:
        if self._plain is not None:
            try:
                return _resp_get(self._plain, self._name(kind, key), self.timeout)
            except (OSError, ValueError) as exc:
                raise Unavailable(f"{self.url}: {str(exc) or type(exc).__name__}") from None
        return self._call("get", self._name(kind, key))

    def put(self, kind: str, key: str, data: bytes) -> None:
        self._call("set", self._name(kind, key), data)

    def delete(self, kind: str, key: str) -> None:
        self._call("delete", self._name(kind, key))

    def keys(self, kind: str):
        prefix = self._name(kind, "")
        for name in self._call("scan_iter", prefix + "*", 1000):
            yield name.decode()[len(prefix):] if isinstance(name, bytes) else name[len(prefix):]

    def usage(self, kind: str) -> Usage:
        """The entries of ``kind`` and their values' bytes (``STRLEN``)."""
        out = Usage(where=self._name(kind, "*"))
        for key in list(self.keys(kind)):
            out.entries += 1
            out.bytes += int(self._call("strlen", self._name(kind, key)) or 0)
        return out

    def describe(self) -> str:
        info = self._call("info", "server")
        return f"Redis {info.get('redis_version', '?')} at {self.url}"


def _plain_url(url: str) -> tuple | None:
    """(host, port, db, username, password) of a ``redis://`` URL; None for
    other schemes (``rediss://``: the client's TLS).  Read by hand where it
    has no brackets, query, fragment or escapes: ``urllib.parse`` costs a
    compile that asks the store ~3 ms to import."""
    if any(c in url for c in "[]?#%") or "://" not in url:
        from urllib.parse import urlsplit  # lazy: ~3 ms, an unusual URL only

        parts = urlsplit(url)
        if parts.scheme != "redis":
            return None
        return (parts.hostname or "localhost", parts.port or 6379,
                int(parts.path.strip("/") or "0"), parts.username, parts.password)
    scheme, _, rest = url.partition("://")
    if scheme.lower() != "redis":
        return None
    netloc, _, path = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    username = password = None
    if at:
        username, colon, pw = userinfo.partition(":")
        password = pw if colon else None
    host, colon, port = hostport.partition(":")
    if colon and not port.isdigit():
        raise ValueError(f"Port could not be cast to integer value as {port!r}")
    return (host.lower() or "localhost", int(port) if port else 6379,
            int(path.strip("/") or "0"), username, password)


class _Reader:
    """``readline`` and ``read`` over a socket's ``recv`` (what ``makefile``
    gives, without the ``socket`` module)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def readline(self) -> bytes:
        while b"\n" not in self.buf and self._more():
            pass
        at = self.buf.find(b"\n") + 1 or len(self.buf)
        line, self.buf = self.buf[:at], self.buf[at:]
        return line

    def read(self, size: int) -> bytes:
        while len(self.buf) < size and self._more():
            pass
        data, self.buf = self.buf[:size], self.buf[size:]
        return data


def _connect(host: str, port: int, timeout: float):
    """A TCP connection to ``host``, as ``socket.create_connection`` makes
    it (each address in turn, ``timeout`` for each), through ``_socket``:
    the ``socket`` module costs ~5 ms to import.  An ASCII host name is
    passed as bytes (no IDNA codec to load)."""
    import _socket  # lazy: socket costs ~5 ms (docstring)

    name = host.encode("ascii") if host.isascii() else host
    error: OSError | None = None
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0,
                                                               _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"{host}: no address")


def _command(*words: str) -> bytes:
    """One Redis command in the protocol's request form (RESP arrays)."""
    out = [b"*%d\r\n" % len(words)]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _resp_get(plain: tuple, name: str, timeout: float) -> bytes | None:
    """``GET name`` on the server ``plain`` names (after ``AUTH`` and
    ``SELECT`` where the URL asks for them), all sent at once, within
    ``timeout``; raises OSError or ValueError (an error reply, a reply this
    does not read)."""
    host, port, db, username, password = plain
    commands = []
    if password is not None:
        commands.append(_command("AUTH", *([username] if username else []), password))
    if db:
        commands.append(_command("SELECT", str(db)))
    commands.append(_command("GET", name))
    sock = _connect(host, port, timeout)
    try:
        sock.sendall(b"".join(commands))
        reader = _Reader(sock)
        reply = None
        for _ in commands:
            reply = _read_reply(reader)
    finally:
        sock.close()
    return reply


def _read_reply(reader) -> bytes | None:
    """One simple, error or bulk-string reply (all that AUTH, SELECT and GET
    give)."""
    line = reader.readline()
    if not line.endswith(b"\r\n"):
        raise ValueError("the connection closed before a whole reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body
    if kind == b"-":
        raise ValueError(f"the server answered {body.decode(errors='replace')}")
    if kind == b"$":
        size = int(body)
        if size < 0:
            return None
        data = reader.read(size + 2)
        if len(data) != size + 2:
            raise ValueError("the connection closed inside a reply")
        return data[:-2]
    raise ValueError(f"an unexpected reply {line[:40]!r}")
