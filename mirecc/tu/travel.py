"""Direct mode through the team store: a TU that CI compiled and found
nothing to do for is known as such in another checkout, under another
user or on another machine, without its front end or its gates.

A local manifest (:mod:`mirecc.tu.direct`) is keyed by the compiler's path
and time and the working directory, and may name a kept object, whose
bytes can hold the directory (``-g``); it cannot travel.  A *plain* entry
holds no object and no decision: only that the TU's object is the user's
own compile (its gates said no candidate can pay, or the search kept the
user's level, and no decision changed the object).  Its key travels: the
compiler by its content (:mod:`mirecc.util.toolid`), mirecc's code, heads
and settings by content (:func:`mirecc.tu.cache.travelling_pipeline_key`),
the arguments and the environment clang reads; its files are listed as
the front end named them (relative names resolve against the working
directory, as they did for the front end) with their SHA-256, and every
one must still have that content.  Neither key nor list holds the
checkout's own path: in both, its directories are written relative to the
working directory (``<cwd>/..``; :class:`mirecc.util.paths.Checkout`), so a
checkout elsewhere with the same layout and content has the same key and
files.

A hit runs the user's command as it is: the object is clang's, so a wrong
or hostile entry can at most leave a search undone, never change an
object.  CI (``store_write``) writes an entry after each such compile.
Counted as ``tus.from-store`` and the store's own counters.
"""
from __future__ import annotations

import os

from mirecc.store.kinds import TRAVELLING
from mirecc.tu.cache import travelling_pipeline_key
from mirecc.tu.direct import CLANG_ENVIRONMENT, TOO_NEW_NS, dependency_files
from mirecc.util.fsutil import file_sha256, sha256
from mirecc.util.paths import Checkout
from mirecc.util.toolid import tool_identity

#: the entries' kind in the team store (:data:`mirecc.store.kinds.TRAVELLING`)
KIND = TRAVELLING.name
SCHEMA = 2


def travelling_key(compiler_identity: str, args: list[str], version: str,
                   checkout: Checkout) -> str:
    """The entry's key: what the TU's object depends on besides the files
    the front end reads, the checkout's directories written relative."""

    material = [f"plain{SCHEMA}", version, compiler_identity,
                *(f"{v}={checkout.portable(os.environ.get(v, ''))}" for v in CLANG_ENVIRONMENT),
                "args", *map(checkout.portable, args)]
    return sha256("\0".join(material).encode("utf-8", "surrogateescape")).hexdigest()


def unchanged(files, checkout: Checkout) -> bool:
    """Does every listed ``[name, sha256]`` still have that content?"""
    try:
        return bool(files) and all(file_sha256(checkout.here(name)) == digest
                                   for name, digest in files)
    except (OSError, TypeError, ValueError):
        return False


def listed_files(dep_file: str, source: str, started_ns: int,
                 checkout: Checkout) -> list[list[str]] | None:
    """``[name, sha256]`` of the source and every file the front end read,
    named as it named them (:meth:`Checkout.portable`); None when one
    changed while it ran or cannot be read."""

    try:
        with open(dep_file, encoding="utf-8", errors="surrogateescape") as fh:
            names = dependency_files(fh.read())
    except (OSError, ValueError):
        return None
    files, seen = [], set()
    for name in [source, *names]:
        if name in seen:
            continue
        seen.add(name)
        try:
            if os.stat(name).st_mtime_ns >= started_ns - TOO_NEW_NS:
                return None
            files.append([checkout.portable(name), file_sha256(name)])
        except OSError:
            return None
    return files


class Plain:
    """A call's plain entry in the store: its ``key`` and ``tools``."""

    def __init__(self, team, compiler: str, args: list[str], source: str, config, languages,
                 version: str):

        root = config.cache_root()
        self.team, self.checkout = team, Checkout(args, source)
        self.source = self.checkout.portable(source)
        self.tools = {"compiler": tool_identity(compiler, root)}
        self.key = travelling_key(self.tools["compiler"], args,
                                  travelling_pipeline_key(config, languages, version),
                                  self.checkout)

    def known(self) -> bool:
        """Does the store know this TU's object to be the user's own, its
        files unchanged?  (Counted: a hit is used; changed files a miss.)"""
        payload = self.team.get(KIND, self.key, self.tools,
                                f"the entry of {self.checkout.here(self.source)}")
        if payload is None:
            return False
        if payload.get("schema") == SCHEMA and payload.get("source") == self.source \
                and unchanged(payload.get("files"), self.checkout):
            self.team.used()
            return True
        self.team.counts["store.misses"] = self.team.counts.get("store.misses", 0) + 1
        return False

    def publish(self, source: str, dep_file: str, started_ns: int) -> None:
        """Write the entry of a TU whose object is the user's own (CI)."""
        files = listed_files(dep_file, source, started_ns, self.checkout)
        if files is not None:
            self.team.put(KIND, self.key, self.tools,
                          {"schema": SCHEMA, "source": self.source, "files": files})


def is_plain(report, verified: dict) -> bool:
    """Is the object of ``report``'s TU the user's own compile: no applied
    decision but a build step's that kept the user's level?"""
    for decision in report.result.decisions:
        if not decision.applied:
            continue
        step = verified.get(decision.task)
        if step is None or step.winner != step.own:
            return False
    return True
