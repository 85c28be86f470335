"""Direct mode: a TU's decisions found from its source and headers, without
running clang's front end (ccache's "direct mode", for decisions).

The result cache (:mod:`mirecc.tu.cache`) is keyed by the TU's bitcode, so a
hit there still pays a front end and a back end from bitcode.  After a TU's
result is known, mirecc also writes a *manifest*: keyed by what the bitcode
depends on besides the files it reads (the compiler and its identity, the
arguments, the working directory, the environment variables clang reads,
mirecc's pipeline key), it lists every file the front end read (the source
and each header, from the dependency file the front end wrote) with its
SHA-256, and holds the result.  On a later compile with the same key, when
every listed file still has that content, the result is the manifest's, and
the user's own command runs as is (plus the decisions' flags): one clang
run, as without mirecc.

A manifest is lines of text (``json`` and what it imports would cost ~10 ms
on every hit): the files, the bitcode's hash and size, what ``mire stats``
and the injection need to know (decided? applied? the reason codes), and
the counters a hit adds (``hit``: what :func:`mirecc.tu.stats.report_counts`
gives, so that neither a hit nor the compiled client parses the result), and
the result's JSON, parsed only when it is read (a decision to apply, a
record file).

What it cannot see, as in ccache: a new header that would now shadow a
listed one in an earlier include directory, and ``__DATE__``/``__TIME__``.
A manifest gives decisions, and the user's compile runs; the one exception
is a TU whose object a task's build step chose (code size): its manifest
names the kept object (:mod:`mirecc.tu.objcache`), which a hit copies, and
nothing is compiled.  A file
modified while the front end ran (mtime less than 1 s older than its start)
makes no manifest.  Damaged manifests are misses (so they are written
without waiting for the disk).  Manifests are the stored kind
:data:`mirecc.store.kinds.MANIFESTS`, without a size limit.
"""
from __future__ import annotations

import os

from mirecc.store.kinds import MANIFESTS
from mirecc.taskapi.records import PIPELINE_SCHEMA
from mirecc.util.fsutil import file_identity, file_sha256, sha256

SCHEMA = 2
# A file whose mtime is this close to the front end's start may have changed
# while it was read (file times come from a coarse clock): no manifest (ccache
# leaves 1 s too)
TOO_NEW_NS = 1_000_000_000
# Variables clang's driver and front end read (include paths, configuration)
CLANG_ENVIRONMENT = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
                     "OBJCPLUS_INCLUDE_PATH", "CCC_OVERRIDE_OPTIONS", "SDKROOT",
                     "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_CTYPE")


def manifest_key(compiler: str, args: list[str], pipeline_version: str) -> str:
    """What a TU's bitcode and result depend on besides the files the front
    end reads."""
    material = [f"direct{SCHEMA}", pipeline_version, file_identity(compiler), os.getcwd(),
                *(f"{v}={os.environ.get(v, '')}" for v in CLANG_ENVIRONMENT),
                "args", *args]
    return sha256("\0".join(material).encode("utf-8", "surrogateescape")).hexdigest()


def dependency_files(text: str) -> list[str]:
    """The prerequisites of the first rule of a Make dependency file as
    clang writes it (``\\`` line continuations; ``\\ ``, ``\\#`` and ``$$``
    escapes); ``-MP``'s later phony rules are ignored."""
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    rule = text.split("\n", 1)[0]
    # the target ends at the first ": " (clang escapes spaces in names, not colons)
    at = rule.find(": ")
    if at < 0:
        at = rule.find(":")
        if at < 0 or rule[at + 1:].strip():
            raise ValueError("not a dependency rule")
    body, files, name, i = rule[at + 1:], [], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] in " #\\":
            name.append(body[i + 1])
            i += 2
            continue
        if c == "$" and body[i + 1:i + 2] == "$":
            name.append("$")
            i += 2
            continue
        if c in " \t":
            if name:
                files.append("".join(name))
                name = []
        else:
            name.append(c)
        i += 1
    if name:
        files.append("".join(name))
    return files


class Entry:
    """A manifest whose files are unchanged: ``bitcode_sha256``,
    ``bitcode_bytes``, ``decided``, ``applied``, ``reason_codes`` and
    ``result_json`` (the TUResult's JSON, unparsed), ``hit_counts`` (the
    counters a hit adds); ``object_key`` and
    ``object_sha256``: the kept object's key and digest
    (:mod:`mirecc.tu.objcache`), or None."""

    def __init__(self, fields: dict):
        self.bitcode_sha256 = fields["bitcode"][0]
        self.bitcode_bytes = int(fields["bitcode"][1])
        self.decided = fields["decided"] == ["1"]
        self.applied = fields["applied"] == ["1"]
        self.reason_codes = fields["reasons"]
        self.result_json = fields["result"]
        self.hit_counts = {name: int(n) for name, _, n in
                           (pair.partition("=") for pair in fields["hit"])}
        self.object_key, self.object_sha256 = (fields.get("object") or [None, None])[:2]


class Manifests:
    """The manifests under ``<cache dir>/direct/v2``
    (:data:`mirecc.store.kinds.MANIFESTS`: no size limit)."""

    MAGIC = f"mirecc direct manifest {SCHEMA}"

    def __init__(self, cache_dir: str):
        self.folder = MANIFESTS.folder(cache_dir)
        self.root = self.folder.root

    def lookup(self, key: str) -> Entry | None:
        """The manifest's :class:`Entry` when every file it lists has its
        recorded content; else None."""
        try:
            lines = self.folder.read(key).decode("utf-8", "surrogateescape").split("\n")
            if lines[0] != self.MAGIC:
                return None
            fields = {}
            for line in lines[1:]:
                kind, _, rest = line.partition(" ")
                if kind == "file":
                    digest, _, path = rest.partition(" ")
                    if file_sha256(path) != digest:
                        return None
                elif kind == "result":
                    fields["result"] = rest
                elif kind:
                    fields[kind] = rest.split()
            return Entry(fields)
        except Exception:  # noqa: BLE001 - missing, damaged, a file gone: a miss
            return None

    def record(self, key: str, dep_file: str, source: str, started_ns: int, result,
               bitcode_sha256: str, bitcode_bytes: int, hit_counts: dict,
               object_key: str | None = None, object_sha256: str | None = None) -> bool:
        """Write the manifest of a TU whose front end started at
        ``started_ns`` and wrote ``dep_file``, with its ``result`` (a
        TUResult), the counters a hit adds and, for a TU whose object a build step chose, the kept
        object's ``object_key`` and ``object_sha256``.  False (nothing
        written) when a file it read changed while it ran, or cannot be
        read."""
        try:
            with open(dep_file, encoding="utf-8", errors="surrogateescape") as fh:
                names = dependency_files(fh.read())
        except (OSError, ValueError):
            return False
        lines, seen = [self.MAGIC], set()
        for name in [source, *names]:
            path = os.path.abspath(name)
            if path in seen:
                continue
            if "\n" in path:
                return False            # not representable in a line
            seen.add(path)
            try:
                if os.stat(path).st_mtime_ns >= started_ns - TOO_NEW_NS:
                    return False        # changed while the front end read it
                lines.append(f"file {file_sha256(path)} {path}")
            except OSError:
                return False
        lines += [f"bitcode {bitcode_sha256} {bitcode_bytes}",
                  f"decided {int(result.decided)}",
                  f"applied {int(result.applied)}",
                  "reasons " + " ".join(result.reason_codes),
                  "hit " + " ".join(f"{k}={n}" for k, n in sorted(hit_counts.items())),
                  *([f"object {object_key} {object_sha256}"] if object_key else []),
                  "result " + result_json(result), ""]
        try:
            # not durable: a damaged manifest is a miss (module docstring)
            self.folder.write(key, "\n".join(lines).encode("utf-8", "surrogateescape"))
        except OSError:
            return False        # only the shortcut is lost
        return True


def result_json(result) -> str:
    """A TUResult's JSON (sorted keys) for a manifest's ``result`` line.
    An empty result (a TU the gates answered, no head with a use) is
    written without the json module, which costs ~6 ms of such a compile."""

    if not (result.summary or result.decisions or result.no_decision_reasons
            or result.reason_codes):
        return ('{"decisions": [], "no_decision_reasons": [], "reason_codes": [], '
                f'"schema": {PIPELINE_SCHEMA}, "summary": null}}')
    import json  # lazy: json, a manifest write only

    return json.dumps(result.to_dict(), sort_keys=True)
