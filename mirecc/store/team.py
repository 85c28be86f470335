"""The team store as the build sees it: versioned entries, checked before
use, counted.

An entry is JSON::

    {"mirecc-store": 1, "kind": "winner", "key": "<its key>",
     "tools": {"compiler": "clang|sha256:…", …}, "payload": {…},
     "by": "user@host", "at": 1764351234}

It is used only when its version, kind and key are the ones asked for and
its tools are this build's (:mod:`mirecc.util.toolid`); the owner of the
kind then checks the payload (a code-size winner is still compiled and
compared with the user's own object).  Anything else is *rejected*: counted
(``store.rejected``), one warning per compile, and the compile goes on as
without a store.

A store that does not answer within ``store_timeout`` is *unavailable*:
counted, and not asked again for :data:`DOWN_SECONDS` by any compile of
this user (a marker file in the cache), so a stopped server costs one
timeout, not one per compile.  Builds write only with ``store_write``
(CI); developers' builds read.
"""
from __future__ import annotations

import os
import sys
import time

from mirecc.store.backends import Unavailable, open_backend

SCHEMA = 1
#: after a failure, the store is left alone this long (seconds)
DOWN_SECONDS = 60.0

#: the counters the store keeps (``mire stats``), declared here, their owner
COUNTERS = {
    "store.hits": "entries found and used",
    "store.misses": "entries asked for and not there",
    "store.fills": "entries written (store_write)",
    "store.rejected": "entries found and not used (damaged, another version, "
                      "another compiler's, not what this compile measures)",
    "store.unavailable": "asks or writes that found the store down or slow",
}


class Rejected(Exception):
    """An entry that cannot be used (the message says why)."""


def envelope(kind: str, key: str, tools: dict, payload: dict) -> bytes:
    import getpass  # lazy: who wrote it, a write only
    import socket

    try:
        by = f"{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # noqa: BLE001 (no user name: no matter)
        by = "?"
    import json  # lazy: json, a write only (reads use jsonread)

    return json.dumps({"mirecc-store": SCHEMA, "kind": kind, "key": key, "tools": tools,
                       "payload": payload, "by": by, "at": int(time.time())},
                      sort_keys=True).encode()


def open_envelope(data: bytes, kind: str, key: str, tools: dict | None) -> dict:
    """The entry's fields, or :class:`Rejected`; ``tools`` None: any tools."""
    from mirecc.util.jsonread import loads  # lazy: a read only

    try:
        entry = loads(data)
    except ValueError:
        raise Rejected("not a mirecc store entry (damaged)") from None
    if not isinstance(entry, dict) or entry.get("mirecc-store") != SCHEMA:
        version = entry.get("mirecc-store") if isinstance(entry, dict) else "?"
        raise Rejected(f"store entry version {version}, this mirecc reads {SCHEMA}")
    if entry.get("kind") != kind or entry.get("key") != key:
        raise Rejected("an entry of another key (copied or damaged)")
    if not isinstance(entry.get("payload"), dict) or not isinstance(entry.get("tools"), dict):
        raise Rejected("an entry without its payload or tools (damaged)")
    if tools is not None and entry["tools"] != tools:
        theirs = ", ".join(f"{k} {v.split('|')[-1][:19]}" for k, v in sorted(entry["tools"].items())
                           if isinstance(v, str) and tools.get(k) != v)
        raise Rejected(f"made by other tools ({theirs or 'another set'})")
    return entry


class TeamStore:
    """One compile's view of the store: ``counts`` for ``mire stats``."""

    def __init__(self, url: str, timeout: float, write: bool, cache_root: str):
        self.url, self.timeout, self.write = url, timeout, write
        self.counts: dict[str, int] = {}
        self._marker = os.path.join(cache_root, "store-down")
        self._backend = None
        self._warned = False

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def _down(self) -> bool:
        try:
            with open(self._marker, encoding="utf-8") as fh:
                url, _, since = fh.read().partition("\n")
            return url == self.url and time.time() - float(since) < DOWN_SECONDS
        except (OSError, ValueError):
            return False

    def _mark_down(self, why: str) -> None:
        from mirecc.util.fsutil import atomic_write_bytes  # lazy: a store found down only

        self._count("store.unavailable")
        print(f"mirecc: warning: team store unavailable ({why}); builds go on without it "
              f"for {DOWN_SECONDS:.0f} s", file=sys.stderr)
        try:
            atomic_write_bytes(self._marker, f"{self.url}\n{time.time()}".encode(), durable=False)
        except OSError:
            pass

    def backend(self):
        if self._backend is None:
            self._backend = open_backend(self.url, self.timeout)
        return self._backend

    def used(self) -> None:
        """Count an entry its owner checked and used."""
        self._count("store.hits")

    def reject(self, why: str, what: str) -> None:
        """Count a rejected entry (its owner's checks call this too)."""
        self._count("store.rejected")
        if not self._warned:
            self._warned = True
            print(f"mirecc: warning: team store {self.url}: {what}: {why}; not used",
                  file=sys.stderr)

    def get(self, kind: str, key: str, tools: dict, what: str) -> dict | None:
        """The payload stored for (kind, key), checked; None: not there,
        rejected or the store unavailable (each counted)."""
        if self._down():
            self._count("store.unavailable")
            return None
        try:
            data = self.backend().get(kind, key)
        except Unavailable as exc:
            self._mark_down(str(exc))
            return None
        if data is None:
            self._count("store.misses")
            return None
        try:
            return open_envelope(data, kind, key, tools)["payload"]
        except Rejected as exc:
            self.reject(str(exc), what)
            return None

    def entries(self, kind: str):
        """(key, entry) of every readable entry of ``kind``, whatever its
        tools (the caller checks them); the damaged ones counted as
        rejected.  Raises :class:`Unavailable`."""
        backend = self.backend()
        for key in list(backend.keys(kind)):
            data = backend.get(kind, key)
            if data is None:
                continue
            try:
                yield key, open_envelope(data, kind, key, None)
            except Rejected as exc:
                self.reject(str(exc), f"a {kind} entry")

    def machine_lines(self, kind: str, machine: str, why_not, what: str) -> tuple[list, int]:
        """The lines of ``kind``'s entries made on ``machine`` (a run-time
        verdict, a decisions profile entry: :meth:`put_line`) that
        ``why_not(key, line)`` accepts (None); one it says why not is
        rejected (counted).  Returns (lines, rejected); raises
        :class:`Unavailable`."""
        lines, rejected = [], 0
        for key, entry in self.entries(kind):
            if entry["tools"].get("machine") != machine:
                continue
            line = entry["payload"].get("line")
            why = "not one line" if not isinstance(line, str) or "\n" in line \
                else why_not(key, line)
            if why is None:
                lines.append(line)
            else:
                rejected += 1
                self.reject(why, what)
        return lines, rejected

    def put_line(self, kind: str, key: str, machine: str, line: str) -> bool:
        """Write one line that holds only on ``machine`` (:meth:`machine_lines`)."""
        return self.put(kind, key, {"machine": machine}, {"line": line})

    def put(self, kind: str, key: str, tools: dict, payload: dict) -> bool:
        if not self.write or self._down():
            return False
        try:
            self.backend().put(kind, key, envelope(kind, key, tools, payload))
        except Unavailable as exc:
            self._mark_down(str(exc))
            return False
        self._count("store.fills")
        return True


def team_store(config) -> TeamStore | None:
    """The build's team store, or None when ``store`` is unset."""
    url = getattr(config, "store", None)
    if not url:
        return None
    return TeamStore(url, config.store_timeout, config.store_write, config.cache_root())
