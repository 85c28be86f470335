"""What mirecc did, counted per user (as ccache's statistics): ``mire stats``.

The counters live in ``<cache_dir>/stats`` (``name value`` lines) and are
updated under an exclusive lock (safe under ``make -j``); a damaged line is
dropped.  The compiled client (``client/``) appends its own calls' lines
under the same lock, and a name written twice is summed when read (the next
update writes one line per name again).  Plain lines, not JSON: a call that passes through pays
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
  its headers, without running the front end (:mod:`mirecc.tu.direct`);
  ``tus.object``: those of them whose object a build step had chosen, copied
  from the kept objects with nothing compiled (:mod:`mirecc.tu.objcache`);
- ``tus.from-store``: TUs the team store knew to need nothing (their
  object is the user's own compile; :mod:`mirecc.tu.travel`): the user's
  command ran as it is, no IR read;
- ``tus.unchanged``: TUs whose applied decisions left the object as the
  user's own (the compiler's own choice; not counted in ``tus.applied``);
- ``decisions.applied`` / ``decisions.same``: of the decisions of TUs with
  one, those that changed the build, and those the compiler's own choice
  matched (their flags changed nothing);
- ``tus.split``: the front end ran for the IR beside the user's own compile;
- ``verified.<task>`` / ``verified.<task>.improved`` /
  ``verified.<task>.from-cache``: TUs whose object a task's build step chose
  by building candidates (code size), those where a candidate beat the
  user's level, and those where the winner was known from an earlier build
  (only it was built), ``verified.<task>.from-twin`` among them those
  where it came from a compile of the same code (a static and a shared
  copy of one source), ``verified.<task>.early`` those where a candidate
  was built in a free job slot while the user's own compile ran
  (``CompileStep.early``); ``verified.<task>.not-searched``: those where the
  step built nothing, and why: ``verified.<task>.<code>``, the codes the
  task declares (``Task.step_reasons``; code size: ``too-small``, an object
  too small to gain, or ``predicted-no-gain``, the object
  gate expects no candidate within the budget to gain); and what else the
  step counts, ``verified.<task>.<code>`` as the task declares it
  (``Task.step_counters``; code size: ``inline-policy``, TUs the inlining
  policy's candidate was built for, ``inline-policy-kept``, those where
  its object was kept);
- ``links.<task>`` / ``links.<task>.improved`` / ``links.<task>.failed``:
  link-only calls a task's link step took (``Task.link_step()``: code size at an
  LTO link), those where its output replaced the user's, those where a
  candidate link failed (the user's output stands);
- ``store.<counter>``: the team store's asks and writes, as its owner
  declares them (:data:`mirecc.store.team.COUNTERS`); ``verified.<task>.from-store``:
  TUs whose winner came from it;
- ``cuda.compiles`` / ``cuda.applied``: ``mirecc-nvcc`` calls that compiled
  CUDA sources, and those whose build got a block shape (a decision that
  fails to build is withdrawn: ``fallback.decided-failed``);
- ``skip.<code>``: a head decided nothing for a TU, and why (:data:`SKIP`: the codes of
  :class:`mirecc.taskapi.api.NoDecision`, e.g. ``no-loops``);
- ``fallback.<code>``: the ML path gave up and the user's command ran
  (``ml-failed``, ``timeout``, ``ir-failed``, ``internal-error``,
  ``decided-failed``: the compile with the decisions' flags failed).

``mire stats`` also lists every kind stored in the cache directory with
its entries, bytes and limit (:data:`mirecc.store.kinds.LOCAL`).

Only ``os``, ``fcntl`` and the registry (which the driver has loaded) are
imported at the top: every call counts itself.
"""
from __future__ import annotations

import fcntl
import os

from mirecc.taskapi import registry

PASSTHROUGH = {
    "disabled": "mirecc is disabled (disable / MIRECC_DISABLE)",
    "not-compile": "no compile: a query, preprocessing, a link or no input",
    "not-c": "no C, C++ or OpenCL source",
    "not-optimised": "compiled without optimisation (-O0 or no -O)",
    "no-use": "nothing would read the IR (no head applies, no --explain or capture)",
    "response-file": "an unreadable response file (clang reports it)",
}


#: ``skip.<code>``: why a head decided nothing for a TU, the codes of the
#: generic path (the pipeline's, the TU context's, the decisions profile's);
#: a task declares its own (``Task.reasons``), the region heads theirs
#: (:data:`mirecc.taskapi.regionhead.REASONS`): :func:`reason_table` lists all
SKIP = {
    "no-heads": "no task head is installed for the language",
    "not-applicable": "a head does not apply (language, -O level, flags)",
    "no-functions": "no function definitions (a TU of data alone)",
    "profile-stale": "a decisions profile entry's code changed since it was tuned",
    "profile-unread": "decisions profile entries that need a newer plugin or another task",
}

#: ``fallback.<code>``: the ML path gave up and the user's command ran
FALLBACK = {
    "ml-failed": "the ML path failed (its one-line warning says why)",
    "ir-failed": "emitting the IR failed (most often: the source does not compile)",
    "timeout": "the ML path took longer than timeout / MIRECC_TIMEOUT",
    "bad-profile": "the decisions profile cannot be read",
    "internal-error": "an internal error in mirecc",
    "decided-failed": "the compile with the decisions' flags failed",
    "verify-failed": "a task's build step (code size candidates) failed",
}

def reason_table() -> dict:
    """Every reason code, by counter prefix: the one table ``mire stats`` and
    ``--explain`` speak from, each code declared once by its owner (a test
    checks each code the package raises is here)."""
    from mirecc.taskapi.regionhead import REASONS as REGIONS  # lazy: mire stats, --explain only

    skip = dict(SKIP)
    owners = [("mirecc.taskapi.regionhead", REGIONS)]
    owners += [(f"task {t.name}", t.reasons) for t in registry.tasks().values()]
    for owner, codes in owners:
        for code, words in codes.items():
            if code in skip:
                raise RuntimeError(f"reason code {code!r} of {owner} is declared twice")
            skip[code] = words
    return {"passthrough.": PASSTHROUGH, "skip.": skip, "fallback.": FALLBACK}


def stats_path(config) -> str:
    return os.path.join(config.cache_root(), "stats")


def bump(config, counts: dict) -> None:
    """Add ``counts`` to the counters; a counter that cannot be written is
    lost, never an error (statistics must not fail a build)."""
    if not counts:
        return
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
        if name and value.isdigit():    # a name twice: the compiled client appended it
            data[name] = data.get(name, 0) + int(value)
    return data


def read(config) -> dict:
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
    """The counters of one call's translation units: each report's
    (:func:`report_counts`; a direct-mode hit's as its manifest lists them),
    and ``tus.split`` for a split compile."""
    counts: dict[str, int] = {}
    for report in reports:
        hit = getattr(report, "hit_counts", None)
        for name, n in (hit if hit is not None else report_counts(report)).items():
            counts[name] = counts.get(name, 0) + n
        if split:
            counts["tus.split"] = counts.get("tus.split", 0) + 1
    return counts


def report_counts(report, where: str | None = None) -> dict:
    """The counters of one TU's report (``where``: as if found there; a
    direct-mode manifest keeps those of a hit, which the compiled client
    adds without reading the result)."""
    counts: dict[str, int] = {}

    def add(name):
        counts[name] = counts.get(name, 0) + 1

    where = where or report.where
    add("tus.seen")
    add({"cache": "tus.cached", "direct": "tus.cached", "server": "tus.server"}.get(
        where, "tus.in-process"))
    if where == "direct":
        add("tus.direct")
    if report.decided:
        add("tus.decided")
        for d in report.result.decisions:
            if d.applied:
                add("decisions.applied")
            elif d.same_as_compiler:
                add("decisions.same")
    if report.applied:
        add("tus.applied")
    for code in report.reason_codes:
        add(f"skip.{code}")
    return counts


def verified_counts(task: str, verified, report, early) -> dict:
    """The counters of one TU whose object ``task``'s build step chose
    (``CompileStep.verify`` returned ``verified``; ``early``: the work started in a
    free job slot, if any)."""
    step = f"verified.{task}"
    return {step: 1,
            f"{step}.improved": int(verified.winner != f"-O{report.opt_level}"),
            f"{step}.from-cache": int(getattr(verified, "from_cache", False)),
            f"{step}.from-twin": int(getattr(verified, "from_twin", False)),
            f"{step}.from-store": int(getattr(verified, "from_store", False)),
            **getattr(verified, "store_counts", {}),
            f"{step}.early": int(getattr(early, "taken", False)),
            f"{step}.not-searched": int(getattr(verified, "built", 1) == 0
                                        and not getattr(verified, "from_cache", False)),
            **({f"{step}.{verified.reason}": 1} if getattr(verified, "reason", "") else {}),
            **{f"{step}.{code}": n for code, n in getattr(verified, "counts", {}).items()}}


def _step_reasons(name: str, what: str = "step_reasons") -> dict:
    """Why task ``name``'s build step built nothing (``Task.step_reasons``;
    ``what="step_counters"``: what else it counts); {} for a task this
    mirecc does not know."""
    declared = registry.task(name)
    return getattr(declared, what, {}) if declared is not None else {}


def searched(data: dict, task: str | None = None) -> int:
    """The TUs of ``data`` (counters) for which ``task``'s build step (None:
    every task's) built candidates: neither gated off nor known from an
    earlier build."""
    names = [f"verified.{task}"] if task else \
        [k for k in data if k.startswith("verified.") and k.count(".") == 1]
    return sum(data.get(name, 0) - data.get(f"{name}.from-cache", 0)
               - data.get(f"{name}.not-searched", 0) for name in names)


def render(data: dict, path: str) -> str:
    """``mire stats`` as text: translation units first (each counted once),
    then what each head said (one count per head and TU)."""
    def n(name):
        return data.get(name, 0)

    def row(title, value, indent=2):
        return f"{' ' * indent}{title:<{46 - indent}}{value:>8}"

    lines = [f"mirecc statistics ({path})",
             row("compiler calls", n("calls"))]
    passthrough = sorted(k for k in data if k.startswith("passthrough."))
    if passthrough:
        lines.append(row("passed to clang untouched",
                         sum(data[k] for k in passthrough), 4))
        for name in passthrough:
            code = name[len("passthrough."):]
            lines.append(row(code, data[name], 6) + f"  {PASSTHROUGH.get(code, '')}".rstrip())
    if n("tus.from-store"):
        lines.append(row("TUs the team store knew to need nothing", n("tus.from-store")))
    lines += [row("translation units whose IR was read", n("tus.seen")),
              row("with a decision", n("tus.decided"), 4),
              row("with a decision applied (object changed)", n("tus.applied"), 4),
              row("decisions applied, object unchanged", n("tus.unchanged"), 4),
              row("decisions that changed the build", n("decisions.applied"), 4),
              row("decisions the compiler made the same", n("decisions.same"), 4),
              row("without a decision", max(0, n("tus.seen") - n("tus.decided")), 4),
              row("result from the cache", n("tus.cached"), 4),
              row("found without a front end", n("tus.direct"), 6),
              row("object kept from an earlier build", n("tus.object"), 8),
              row("result computed by the server", n("tus.server"), 4),
              row("result computed in process", n("tus.in-process"), 4)]
    for name in sorted(k for k in data if k.startswith("verified.") and k.count(".") == 1):
        task = name[len("verified."):]
        lines += [row(f"{task}: searched (candidates built)", searched(data, task), 4),
                  row("nothing built", n(f"{name}.not-searched"), 6)]
        lines += [row(words, n(f"{name}.{code}"), 8)
                  for code, words in _step_reasons(task).items()]
        lines += [row("a candidate better than -O<level>", n(f"{name}.improved"), 6),
                  row("winner known from an earlier build", n(f"{name}.from-cache"), 6),
                  row("from its static/shared twin", n(f"{name}.from-twin"), 8),
                  row("from the team store", n(f"{name}.from-store"), 8),
                  row("a candidate built beside your compile", n(f"{name}.early"), 6)]
        lines += [row(words, n(f"{name}.{code}"), 6)
                  for code, words in _step_reasons(task, "step_counters").items()]
    for name in sorted(k for k in data if k.startswith("links.") and k.count(".") == 1):
        task = name[len("links."):]
        lines += [row(f"{task}: links linked again (LTO)", n(name), 4),
                  row("a smaller output kept", n(f"{name}.improved"), 6),
                  row("a candidate link failed", n(f"{name}.failed"), 6)]
    if any(k.startswith("store.") for k in data):
        from mirecc.store.team import COUNTERS  # lazy: mire stats only

        lines.append("  team store (store):")
        lines += [row(name[len("store."):], n(name), 4) + f"  {words}"
                  for name, words in COUNTERS.items()]
    if n("cuda.compiles"):
        lines += [row("CUDA compiles (mirecc-nvcc)", n("cuda.compiles")),
                  row("with a block shape applied", n("cuda.applied"), 4)]
    reasons = reason_table()
    groups = (("fell back to the plain compile", "fallback."),
              ("why heads decided nothing (per head and TU)", "skip."))
    for title, prefix in groups:
        names = sorted(k for k in data if k.startswith(prefix))
        if names:
            lines.append(f"  {title}:")
            for name in names:
                code = name[len(prefix):]
                lines.append(row(code, data[name], 4)
                             + f"  {reasons[prefix].get(code, '')}".rstrip())
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse     # lazy: mire stats only
    p = argparse.ArgumentParser(prog="mire stats", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the counters as JSON")
    p.add_argument("--zero", action="store_true", help="set every counter to zero")


def run(args) -> int:
    from mirecc.taskapi.config import ConfigError, load_config  # lazy: mire stats only
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
        import json     # lazy: mire stats --json only
        print(json.dumps(data, indent=1, sort_keys=True))
    else:
        # here: the driver imports this module, and the kinds' fsutil (fcntl, _sha256)
        from mirecc.store.kinds import local_table

        print(render(data, stats_path(config)), end="")
        print(f"  stored in {config.cache_root()} (entries, bytes, limit):")
        print("\n".join(local_table(config.cache_root(), config)))
    return 0
