"""What mirecc did, counted per user (as ccache's statistics): ``mire stats``.

The counters live in ``<cache_dir>/stats`` (one ``name value`` line each)
and are updated under an exclusive lock (safe under ``make -j``); a damaged
line is dropped.  Plain lines, not JSON: a call that passes through pays
for neither ``json`` nor ``pathlib`` (~15 ms of imports).  Every reason has a stable code: ``--explain`` prints it with the
words, and the counters are named by it.

Counters:

- ``calls``: compiler calls mirecc classified;
- ``passthrough.<code>``: calls handed to clang as they are, and why
  (:data:`PASSTHROUGH`);
- ``tus.seen`` / ``tus.decided`` / ``tus.applied``: translation units whose
  IR the pipeline saw, that got at least one decision other than the
  compiler's own choice, that got at least one decision applied to the
  compile;
- ``tus.cached`` / ``tus.server`` / ``tus.in-process``: where their results
  came from; ``tus.direct``: those of the cached found from the source and
  its headers, without running the front end (:mod:`mirecc.direct`);
- ``tus.split``: compiled once from the front end's bitcode;
- ``verified.<task>`` / ``verified.<task>.improved`` /
  ``verified.<task>.from-cache``: TUs whose object a task's build step chose
  by building candidates (code size), those where a candidate beat the
  user's level, and those where the winner was known from an earlier build
  (only it was built);
- ``skip.<code>``: a head decided nothing for a TU, and why (the codes of
  :class:`mirecc.tasks.api.NoDecision`, e.g. ``no-loops``);
- ``fallback.<code>``: the ML path gave up and the user's command ran
  (``ml-failed``, ``timeout``, ``ir-failed``, ``internal-error``,
  ``backend-failed``).

Only ``os`` is imported at the top (it runs on every compile).
"""
from __future__ import annotations

import os

PASSTHROUGH = {
    "disabled": "mirecc is disabled (disable / MIRECC_DISABLE)",
    "not-compile": "no compile: a query, preprocessing, a link or no input",
    "not-c": "no C, C++ or OpenCL source",
    "not-optimised": "compiled without optimisation (-O0 or no -O)",
    "no-use": "nothing would read the IR (no head applies, no --explain or capture)",
    "response-file": "an unreadable response file (clang reports it)",
}


def stats_path(config) -> str:
    return os.path.join(config.cache_root(), "stats")


def bump(config, counts: dict) -> None:
    """Add ``counts`` to the counters; a counter that cannot be written is
    lost, never an error (statistics must not fail a build)."""
    if not counts:
        return
    import fcntl

    path = stats_path(config)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = _load(fd)
        for name, n in counts.items():
            data[name] = data.get(name, 0) + n
        blob = "".join(f"{k} {v}\n" for k, v in sorted(data.items())).encode()
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, blob)
    except OSError:
        pass
    finally:
        os.close(fd)      # also releases the lock


def _load(fd: int) -> dict:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    data = {}
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        name, _, value = line.partition(" ")
        if name and value.isdigit():
            data[name] = int(value)
    return data


def read(config) -> dict:
    import fcntl

    try:
        fd = os.open(stats_path(config), os.O_RDONLY)
    except OSError:
        return {}
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _load(fd)
    finally:
        os.close(fd)


def zero(config) -> None:
    try:
        os.unlink(stats_path(config))
    except FileNotFoundError:
        pass


def tu_counts(reports, split: bool) -> dict:
    """The counters of one call's translation units."""
    counts: dict[str, int] = {}

    def add(name):
        counts[name] = counts.get(name, 0) + 1

    for report in reports:
        add("tus.seen")
        add({"cache": "tus.cached", "direct": "tus.cached", "server": "tus.server"}.get(
            report.where, "tus.in-process"))
        if report.where == "direct":
            add("tus.direct")
        if report.decided:
            add("tus.decided")
        if report.applied:
            add("tus.applied")
        for code in report.reason_codes:
            add(f"skip.{code}")
        if split:
            add("tus.split")
    return counts


def render(data: dict, path: str) -> str:
    """``mire stats`` as text."""
    def n(name):
        return data.get(name, 0)

    lines = [f"mirecc statistics ({path})",
             f"  compiler calls                  {n('calls'):>8}",
             f"  translation units seen          {n('tus.seen'):>8}",
             f"    with a decision               {n('tus.decided'):>8}",
             f"    with a decision applied       {n('tus.applied'):>8}",
             f"    served from the result cache  {n('tus.cached'):>8}",
             f"      found without a front end   {n('tus.direct'):>8}",
             f"    computed by the server        {n('tus.server'):>8}",
             f"    computed in process           {n('tus.in-process'):>8}",
             f"    compiled once from bitcode    {n('tus.split'):>8}",
             f"    candidates built, code size   {n('verified.code-size'):>8}",
             f"      smaller than the user's -O  {n('verified.code-size.improved'):>8}",
             f"      winner known (one built)    {n('verified.code-size.from-cache'):>8}"]
    groups = (("passed to clang untouched", "passthrough."),
              ("heads decided nothing", "skip."),
              ("fell back to the plain compile", "fallback."))
    for title, prefix in groups:
        names = sorted(k for k in data if k.startswith(prefix))
        if names:
            lines.append(f"  {title}:")
            for name in names:
                code = name[len(prefix):]
                words = PASSTHROUGH.get(code, "") if prefix == "passthrough." else ""
                lines.append(f"    {code:<28}{data[name]:>8}" + (f"  {words}" if words else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="mire stats", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the counters as JSON")
    p.add_argument("--zero", action="store_true", help="set every counter to zero")


def run(args) -> int:
    from mirecc.config import ConfigError, load_config
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"mire stats: {exc}", file=__import__("sys").stderr)
        return 2
    if args.zero:
        zero(config)
        return 0
    data = read(config)
    if args.json:
        import json
        print(json.dumps(data, indent=1, sort_keys=True))
    else:
        print(render(data, stats_path(config)), end="")
    return 0
