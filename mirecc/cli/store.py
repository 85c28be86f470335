"""``mire store``: the team store (``store`` / ``MIRECC_STORE``).

- ``status``: where it is, whether it answers, its entries and bytes by kind
  (:data:`mirecc.store.kinds.TEAM`) and how many this machine's tools can
  use, this user's ``store.*`` counters, and every kind in this user's cache
  with its size (:data:`mirecc.store.kinds.LOCAL`);
- ``fill -- BUILD...``: run a build that writes what it verifies (a fresh
  local cache for the run, so that every TU searches: a CI job's fill);
- ``prune``: remove entries that no mirecc can use (damaged, another
  version), and with ``--older-than DAYS`` or ``--foreign`` (made by tools
  not installed here) those too;
- ``export FILE`` / ``import FILE``: the entries as JSON lines (each as
  stored: ``import`` writes only what would be read back unchanged);
- ``push-profile FILE`` / ``pull-profile FILE``: a decisions profile's
  entries (``mire tune``'s measurements, each keyed by its function's code
  digest), per kind of machine, to the store (with ``store_write``) and
  back into a profile (its own entries win; ``profile: FILE`` applies it);
- ``push-verdicts`` / ``pull-verdicts``: the adaptive runtimes' decided
  verdicts (``mire adapt``), per kind of machine, from this user's stores
  to the team store (with ``store_write``) and back into this machine's
  store (where it has no verdict of its own for the site).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirecc.runtime.store import (machine_descriptor, pull_verdicts, push_verdicts, store_dir,
                                  store_files)
from mirecc.store.backends import Unavailable, open_backend
from mirecc.store.kinds import (PROFILES, TEAM, TEAM_VERDICTS, TEAM_WINNERS, TRAVELLING,
                                local_table, size_words)
from mirecc.store.team import COUNTERS, Rejected, TeamStore, open_envelope
from mirecc.taskapi.config import ConfigError, load_config
from mirecc.taskapi.profile import FORMAT_LINE, ProfileError, parse_entry, read_profile
from mirecc.tu import stats
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.toolid import tool_identity

#: the team store's kinds, by their names there
KINDS = tuple(kind.name for kind in TEAM)


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="store_command", required=True)
    sub.add_parser("status", help="where the store is, whether it answers, what it holds")
    fill = sub.add_parser("fill", help="run a build that writes its verified results")
    fill.add_argument("build", nargs="+", help="the build command (after --)")
    prune = sub.add_parser("prune", help="remove entries no build can use")
    prune.add_argument("--older-than", type=float, metavar="DAYS",
                       help="also entries written more than DAYS ago")
    prune.add_argument("--foreign", action="store_true",
                       help="also winners made by tools not installed here")
    prune.add_argument("--dry-run", action="store_true", help="say what would go")
    exp = sub.add_parser("export", help="write the entries to a JSON-lines file")
    exp.add_argument("file")
    imp = sub.add_parser("import", help="add the entries of an exported file")
    imp.add_argument("file")
    for name, words in (("push-profile", "write a decisions profile's entries to the store "
                                         "(store_write)"),
                        ("pull-profile", "add the store's profile entries for this machine "
                                         "to a decisions profile")):
        sub.add_parser(name, help=words).add_argument("profile", metavar="FILE")
    sub.add_parser("push-verdicts", help="write this user's decided run-time verdicts to the "
                                         "store (store_write)")
    sub.add_parser("pull-verdicts", help="add the store's verdicts for this machine to its "
                                         "verdict store")


def _local_tools(config) -> set[str]:
    """The identities of the clang and opt installs this machine has."""

    ids = set()
    for pattern in ("/usr/lib/llvm-*/bin/clang", "/usr/lib/llvm-*/bin/opt"):
        for path in glob.glob(pattern):
            ids.add(tool_identity(path, config.cache_root()))
    if config.cc:
        ids.add(tool_identity(config.cc, config.cache_root()))
    return ids


def _entries(backend, kind: str):
    """(key, raw bytes) of every entry of ``kind``."""
    for key in backend.keys(kind):
        data = backend.get(kind, key)
        if data is not None:
            yield key, data


def run(args) -> int:

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"mire store: {exc}", file=sys.stderr)
        return 2
    if not config.store:
        print("mire store: no team store is set (store: in .mirecc.yaml or MIRECC_STORE, "
              "e.g. redis://host:6379/0 or a shared directory)", file=sys.stderr)
        return 2
    if args.store_command == "fill":
        return _fill(args.build, config)
    if args.store_command in ("push-verdicts", "pull-verdicts"):
        return _verdicts(args.store_command, config)
    if args.store_command in ("push-profile", "pull-profile"):
        return _profile(args.store_command, args.profile, config)
    try:
        backend = open_backend(config.store, max(config.store_timeout, 2.0))
        if args.store_command == "status":
            print(f"team store: {backend.describe()}")
            print(f"  this user's builds: {'read and write' if config.store_write else 'read only'}"
                  f" (store_write), answer within {config.store_timeout:g} s (store_timeout)")

            mine = _local_tools(config) | {machine_descriptor()}
            for kind in TEAM:
                total = usable = bad = size = 0
                for key, data in _entries(backend, kind.name):
                    total += 1
                    size += len(data)
                    try:
                        entry = open_envelope(data, kind.name, key, None)
                    except Rejected:
                        bad += 1
                        continue
                    usable += all(v in mine for v in entry["tools"].values())
                whose = "for this machine" if kind in (TEAM_VERDICTS, PROFILES) \
                    else "made by tools installed here"
                print(f"  {kind.name} entries: {total} ({usable} {whose}, "
                      f"{bad} damaged or of another version), {size_words(size)}: {kind.holds}")
            counts = stats.read(config)
            for name, words in COUNTERS.items():
                print(f"  {name[len('store.'):]:<12}{counts.get(name, 0):>8}  {words}")
            print(f"  this user's cache ({config.cache_root()}):")
            print("\n".join(local_table(config.cache_root(), config)))
            return 0
        if args.store_command == "export":

            rows = [json.dumps({"kind": kind, "key": key,
                                "entry": data.decode("utf-8", "replace")}) + "\n"
                    for kind in KINDS for key, data in _entries(backend, kind)]
            n = len(rows)
            atomic_write_bytes(args.file, "".join(rows).encode(), durable=False)
            print(f"mire store: exported {n} entries to {args.file}")
            return 0
        if args.store_command == "import":
            n = skipped = 0
            try:
                lines = open(args.file, encoding="utf-8").read().splitlines()
            except OSError as exc:
                print(f"mire store: {args.file}: {exc.strerror or exc}", file=sys.stderr)
                return 2
            for number, line in enumerate(lines, 1):
                try:
                    row = json.loads(line)
                    open_envelope(row["entry"].encode(), row["kind"], row["key"], None)
                except (ValueError, KeyError, TypeError, AttributeError, Rejected) as exc:
                    print(f"mire store: {args.file}:{number}: not imported: {exc}",
                          file=sys.stderr)
                    skipped += 1
                    continue
                backend.put(row["kind"], row["key"], row["entry"].encode())
                n += 1
            print(f"mire store: imported {n} entries ({skipped} not)")
            return 0 if not skipped else 1
        # prune
        mine = _local_tools(config) if args.foreign else set()
        gone = kept = 0
        for kind in KINDS:
            for key, data in list(_entries(backend, kind)):
                why = None
                try:
                    entry = open_envelope(data, kind, key, None)
                    if args.older_than is not None and \
                            time.time() - float(entry.get("at", 0)) > args.older_than * 86400:
                        why = f"older than {args.older_than:g} days"
                    elif args.foreign and kind in (TEAM_WINNERS.name, TRAVELLING.name) and \
                            not all(v in mine for v in entry["tools"].values()):
                        why = "made by tools not installed here"
                except Rejected as exc:
                    why = str(exc)
                if why is None:
                    kept += 1
                    continue
                gone += 1
                if args.dry_run:
                    print(f"  would remove {kind} {key[:16]}: {why}")
                else:
                    backend.delete(kind, key)
        print(f"mire store: {'would remove' if args.dry_run else 'removed'} {gone} entries, "
              f"kept {kept}")
        return 0
    except Unavailable as exc:
        print(f"mire store: the team store does not answer: {exc}", file=sys.stderr)
        return 1


def _may_write(command: str, config) -> bool:
    """Whether this user writes to the store (store_write); says why not."""
    if not config.store_write:
        print(f"mire store {command}: this user's store access is read only "
              "(store_write / MIRECC_STORE_WRITE=1 to write)", file=sys.stderr)
    return bool(config.store_write)


def _verdicts(command: str, config) -> int:
    """push-verdicts / pull-verdicts (mirecc.runtime.store)."""

    team = TeamStore(config.store, max(config.store_timeout, 2.0), config.store_write,
                     config.cache_root())
    try:
        if command == "push-verdicts":
            if not _may_write("push-verdicts", config):
                return 2
            files = store_files() if os.environ.get("MIRECC_ADAPT_STORE") else \
                store_files(store_dir(config.cache_root()))
            n = push_verdicts(team, files)
            print(f"mire store: wrote {n} decided verdicts from {len(files)} store files")
        else:
            machine = machine_descriptor()
            path = Path(os.environ.get("MIRECC_ADAPT_STORE") or
                        store_dir(config.cache_root()) / f"{machine}.txt")
            added, rejected = pull_verdicts(team, machine, path)
            print(f"mire store: added {added} verdicts for {machine} to {path}"
                  + (f" ({rejected} rejected)" if rejected else ""))
    except Unavailable as exc:
        print(f"mire store: the team store does not answer: {exc}", file=sys.stderr)
        return 1
    finally:
        stats.bump(config, team.counts)
    return 0


def _profile_key(machine: str, fields: list[str]) -> str:

    return hashlib.sha256("\0".join([machine, *fields[:4]]).encode()).hexdigest()


def _profile(command: str, path: str, config) -> int:
    """push-profile / pull-profile: each entry's line as written (its source
    relative to the profile's folder), keyed by the machine, task, source,
    target and function digest."""

    machine = machine_descriptor()
    team = TeamStore(config.store, max(config.store_timeout, 2.0), config.store_write,
                     config.cache_root())
    base = os.path.dirname(os.path.abspath(path))
    try:
        if command == "push-profile":
            if not _may_write("push-profile", config):
                return 2
            try:
                read_profile(path)
                lines = open(path, encoding="utf-8").read().splitlines()
            except (ProfileError, OSError) as exc:
                print(f"mire store: {exc}", file=sys.stderr)
                return 2
            n = 0
            for line in lines:
                fields = line.partition("#")[0].split()
                if len(fields) == 5:
                    n += team.put_line(PROFILES.name, _profile_key(machine, fields), machine,
                                       line.strip())
            print(f"mire store: wrote {n} profile entries for {machine}")
            return 0
        try:
            text = open(path, encoding="utf-8").read()
            read_profile(path)
        except FileNotFoundError:
            text = FORMAT_LINE + "\n"
        except (ProfileError, OSError) as exc:
            print(f"mire store: {exc}", file=sys.stderr)
            return 2
        have = {tuple(ln.partition("#")[0].split()[:4]) for ln in text.splitlines()}

        def why_not(key: str, line: str) -> str | None:
            try:
                if parse_entry(line, base, f"store entry {key[:12]}") is not None and \
                        _profile_key(machine, line.partition("#")[0].split()) == key:
                    return None
            except ProfileError as exc:
                return str(exc)
            return "not an entry of its key"

        new = []
        lines, _ = team.machine_lines(PROFILES.name, machine, why_not,
                                      "a decisions profile entry")
        for line in lines:
            fields = line.partition("#")[0].split()
            if tuple(fields[:4]) not in have:
                have.add(tuple(fields[:4]))
                new.append(line)
        if new:
            atomic_write_bytes(path, (text.rstrip("\n") + "\n" + "\n".join(new) + "\n").encode())
        print(f"mire store: added {len(new)} profile entries for {machine} to {path}")
        return 0
    except Unavailable as exc:
        print(f"mire store: the team store does not answer: {exc}", file=sys.stderr)
        return 1
    finally:
        stats.bump(config, team.counts)


def _fill(build: list[str], config) -> int:
    """The build, writing to the store, with a local cache of its own (a
    cache that already knows a TU's winner would search nothing)."""

    if build and build[0] == "--":
        build = build[1:]
    if not build:
        print("mire store fill: no build command (mire store fill -- make -j2)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mirecc-fill-") as tmp:
        env = {**os.environ, "MIRECC_STORE": config.store, "MIRECC_STORE_WRITE": "1",
               "MIRECC_CACHE_DIR": tmp}
        proc = subprocess.run(build, env=env)

        counts = stats.read(load_config(environ=env))
        # the run's counters join this user's
        stats.bump(config, {k: v for k, v in counts.items() if k.startswith(("store.",
                                                                             "verified."))})
    print(f"mire store fill: {counts.get('store.fills', 0)} entries written, "
          f"{counts.get('verified.code-size', 0)} TUs verified; the build exited "
          f"{proc.returncode}", file=sys.stderr)
    return proc.returncode
