"""The compiled client's rules: what ``mirecc`` decides before Python starts.

The client (``client/mirecc_client.c``, installed as ``mirecc``,
``mirecc++`` and ``mirecc-nvcc``) runs the compiler itself for every call
that nothing in mirecc reads, and hands the rest to the per-user compile
server (:mod:`mirecc.driver.serve`) or, without one, to this Python driver.
It decides from two things, both derived from the driver's own code:

- **the flag tables**, compiled into it: :func:`header` writes them, at
  set-up, from :mod:`mirecc.frontend.cmdline` and :mod:`mirecc.frontend.clang`
  (the same tables :func:`mirecc.driver.clang.route` classifies with),
  with their digest;
- **the rules file** for the settings in force: the compiler, the
  launcher, whether mirecc is disabled, and, from the installed heads and
  the tasks' declarations, at which language and ``-O`` level something
  reads the IR (:func:`mirecc.driver.clang._heads_installed`) and which
  links a task's link step may take.  The driver writes it when the client
  asks (``MIRECC_CLIENT_RULES``: the client found none for its settings, or
  a stale one), named by a digest of what selects the settings (the
  configuration file in force and the environment variables the settings
  and the compiler's search read: :func:`key_material`), and lists the files
  it was derived from (the configuration, the site compilers file, the
  heads and their specs, the modules the rules come from) with their size
  and time; the client refuses a rules file when any of them changed, or
  when its tables digest is not the client's own.

Nothing here runs on a call the client decides; writing the rules is a
first call's work, once per settings.
"""
from __future__ import annotations

import os
from hashlib import sha256

from mirecc.frontend import clang as clang_front
from mirecc.frontend import cmdline
from mirecc.taskapi.config import find_config_file
from mirecc.taskapi.registry import (applies_to_any, default_heads_dirs, find_head_specs,
                                     has_use, spec_task, tasks)

#: the client's and the server's protocol, and the rules file's format; the
#: client is built with it (``-DMIRECC_PROTOCOL``)
PROTOCOL = 1
#: the environment variables that select settings besides ``MIRECC_*``
#: (the cache directory's default, the compiler's search)
KEY_ENVIRONMENT = ("PATH", "HOME", "XDG_CACHE_HOME")
#: the variable the client names the rules file in
ASK = "MIRECC_CLIENT_RULES"
#: the client's own variables (``MIRECC_CLIENT=0``: the Python driver only,
#: ``MIRECC_CLIENT_CLASSIFY``, ...): never part of a key
CLIENT_VARIABLES = "MIRECC_CLIENT"
#: rules files kept per installation (the least recently written go)
KEEP = 256
#: the ``-O`` levels the rules list (any other digits: as "4", which no task names)
LEVELS = ("1", "2", "3", "s", "z", "fast", "g", "4")
#: modules the rules are derived from (relative to the package): an edited
#: checkout makes its rules stale
SOURCES = ("__init__.py", "frontend/cmdline.py", "frontend/clang.py", "frontend/compiler.py",
           "driver/clang.py", "driver/rules.py", "taskapi/api.py", "taskapi/config.py",
           "taskapi/registry.py", "taskapi/settings.py")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def key_material(environ, config_path: str | None) -> bytes:
    """What selects the settings, as the client spells it: the protocol,
    the configuration file in force (``-``: none) and, sorted by name, every
    ``MIRECC_*`` variable (but the client's own) and :data:`KEY_ENVIRONMENT`'s."""
    names = sorted(n for n in environ if (n.startswith("MIRECC_")
                                          and not n.startswith(CLIENT_VARIABLES))
                   or n in KEY_ENVIRONMENT)
    lines = [f"mirecc-rules {PROTOCOL}", f"config {config_path or '-'}",
             *(f"env {n}={environ[n]}" for n in names)]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits: the rules file's name from its key material (the
    client computes it on every call: no SHA-256 there)."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def rules_name(environ, config_path: str | None) -> str:
    return f"{fnv1a64(key_material(environ, config_path)):016x}"


def _dep(path: str, kind: str = "dep") -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{kind} {st.st_mtime_ns} {st.st_size} {path}"


def render(config, config_path: str | None, compilers: dict) -> str:
    """The rules file's text for ``config`` (``compilers``: ``{"c": path or
    None, "c++": ...}``)."""
    from mirecc.frontend.compiler import site_file  # lazy: rules are written once per settings

    deps = [config_path, site_file(), *(os.path.join(_PACKAGE, s) for s in SOURCES)]
    tasks_dir = os.path.join(_PACKAGE, "tasks")
    deps.append(tasks_dir)
    deps += sorted(os.path.join(tasks_dir, d, "__init__.py") for d in os.listdir(tasks_dir)
                   if os.path.isfile(os.path.join(tasks_dir, d, "__init__.py")))
    dirs = default_heads_dirs(config)
    deps += dirs
    deps += [os.path.join(s.directory, "spec.yaml") for s in find_head_specs(dirs)]
    if any("\n" in str(v) for v in (*config.prefix, *compilers.values(), *deps)):
        raise ValueError("a name with a line break cannot be written in a rules file")
    lines = [f"mirecc-rules {PROTOCOL}", f"tables {tables_digest()}"]
    lines += [d for d in map(_dep, filter(None, deps)) if d]
    from mirecc.tu.stats import stats_path  # lazy: as above

    lines += [f"disable {int(bool(config.disable))}", f"server {int(bool(config.server))}",
              f"warnings {int(bool(config.warnings))}",
              f"stats {stats_path(config)}"]
    lines += [f"compiler {lang} {path or '-'}" for lang, path in compilers.items()]
    lines += [f"prefix {arg}" for arg in config.prefix]
    lines += _link_rules(config)
    if config.capture_dir or config.profile:
        lines.append("reads-all")
    known = set(LEVELS) - {"4"}
    for task in tasks().values():
        if task.opt_levels is not None and not set(task.opt_levels) <= known:
            lines.append("reads-all")       # a level the client does not know
    # each spec read once: its languages and its task
    specs = [(s, tasks().get(spec_task(s.spec_path) or "")) for s in find_head_specs(dirs)]
    for lang in sorted(clang_front.COMPILER.languages):
        heads = [(s, d) for s, d in specs if applies_to_any(s, {lang})]
        for level in LEVELS:
            if _reads(config, heads, level, splittable=False):
                lines.append(f"reads {lang} {level} always")
            elif _reads(config, heads, level, splittable=True):
                lines.append(f"reads {lang} {level} split")
    lines += _direct_rules(config, compilers)
    return "\n".join(lines) + "\n"


def _direct_rules(config, compilers: dict) -> list[str]:
    """What the client needs to serve a direct-mode hit itself
    (:mod:`mirecc.tu.direct`: a kept object, or a TU nothing was applied
    to) where the ML path would try one first: the manifests' schema and
    folder, the environment their key reads, each compiler's identity,
    each language's pipeline key, and (``stamp``) every file those were
    made from, which the client checks before it uses them.  None when
    the ML path would not try direct mode (no cache, capture, a decisions
    profile read or recorded, a missing pass plugin)."""
    if not config.cache or config.capture_dir or config.profile or config.record \
            or (config.plugin and not os.path.isfile(config.plugin)):
        return []
    # lazy: once per settings
    from mirecc.store.kinds import MANIFESTS, OBJECTS
    from mirecc.tu import direct
    from mirecc.tu.cache import pipeline_inputs, pipeline_key
    from mirecc.util.fsutil import file_identity

    languages = sorted(clang_front.COMPILER.languages)
    manifests, objects = (k.folder(config.cache_root()).root for k in (MANIFESTS, OBJECTS))
    lines = [f"direct {direct.SCHEMA}", f"direct-manifests {manifests}",
             f"direct-objects {objects}", "direct-env " + " ".join(direct.CLANG_ENVIRONMENT)]
    stamped = [config.plugin] if config.plugin else []
    for lang, path in compilers.items():
        if path:
            lines.append(f"identity {lang} {file_identity(path)}")
            stamped.append(os.path.realpath(path))
    for lang in languages:
        lines.append(f"pipeline {lang} {pipeline_key(config, {lang})}")
        stamped += pipeline_inputs(config, {lang})
    if any("\n" in p for p in (*stamped, manifests, objects)):
        return []
    lines += [d for d in (_dep(p, "stamp") for p in dict.fromkeys(stamped)) if d]
    return lines


def _reads(config, heads, level: str, splittable: bool) -> bool:
    """:func:`mirecc.driver.clang._heads_installed` for the ``heads`` of one
    language ((spec, its task) pairs)."""
    for spec, declared in heads:
        if not has_use(spec, config, level, declared):
            continue
        if splittable or config.record or declared is None \
                or not declared.has("compile_step"):
            return True
    return False


def _link_rules(config) -> list[str]:
    """``link-args FLAG...``: a call that links and has an argument starting
    with one of the flags may get a task's link arguments (``*``: any);
    ``link-step LEVEL FLAG...``: a link-only call at that level with one of
    the flags may be a task's link step's (:func:`mirecc.driver.clang._link_arguments`,
    ``_link_step``)."""
    args, steps = [], {}
    for task in tasks().values():
        if not (task.has("link_step") and task.applies(config)):
            continue
        step = task.link_step()
        if not step.active(config):
            continue
        needs = list(step.needs_flags) or ["*"]
        if step.has("arguments"):
            args += needs
        if step.has("wants"):
            for level in (task.opt_levels or LEVELS):
                steps.setdefault(level, []).extend(f for f in needs
                                                   if f not in steps.get(level, ()))
    args = list(dict.fromkeys(args))   # a step two tasks share: once
    out = [f"link-args {' '.join(args)}"] if args else []
    out += [f"link-step {level} {' '.join(flags)}" for level, flags in sorted(steps.items())]
    return out


def write_asked(config, cxx: bool, compiler: str | None) -> None:
    """The rules file the client asked for (:data:`ASK` names it), when the
    client's key is this driver's own: written atomically; any problem: none
    written (the client then hands its calls over, as now)."""
    target = os.environ.pop(ASK, "")
    if not target:
        return
    try:
        config_path = find_config_file()
        if os.path.basename(target) != rules_name(os.environ, config_path):
            return      # the client and the driver disagree on the settings: none
        # lazy: once per settings, never on a call the client decides
        from mirecc.frontend.compiler import CompilerNotFound, choose_compiler
        from mirecc.util.fsutil import atomic_write_bytes

        compilers = {}
        for lang, is_cxx in (("c", False), ("c++", True)):
            if is_cxx == cxx and compiler:
                compilers[lang] = compiler
                continue
            try:
                compilers[lang] = choose_compiler(config, is_cxx)[0]
            except CompilerNotFound:
                compilers[lang] = None
        text = render(config, config_path, compilers)
        directory = os.path.dirname(target)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        atomic_write_bytes(target, text.encode("utf-8", "surrogateescape"), durable=False)
        _trim(directory)
    except Exception:  # noqa: BLE001 - the rules are a shortcut: never a failed build
        return


def _trim(directory: str, keep: int = KEEP) -> None:
    """At most ``keep`` rules files (one per settings seen): the least
    recently written go (a build whose settings change per job, CI with a
    cache directory per run, would otherwise add one per job)."""
    entries = []
    with os.scandir(directory) as it:
        for entry in it:
            try:
                entries.append((entry.stat().st_mtime_ns, entry.path))
            except OSError:
                pass
    for _, path in sorted(entries)[:-keep]:
        try:
            os.unlink(path)
        except OSError:
            pass


# ------------------------------------------------------------ the tables

def _tables() -> list[tuple[str, list]]:
    """(C name, entries) of every table the client classifies with."""
    link_n = sorted(cmdline.LINK_WITH_ARGS.items())
    return [
        ("query_flags", sorted(cmdline.QUERY_FLAGS)),
        ("query_prefixes", list(cmdline.QUERY_PREFIXES)),
        ("noskip_flags", sorted(cmdline.DEPENDENCY_FLAGS | cmdline.SIDE_EFFECT_FLAGS)),
        ("noskip_prefixes", list(cmdline.SIDE_EFFECT_PREFIXES)),
        ("skip1_flags", sorted(cmdline.DEPENDENCY_WITH_ARG | cmdline.SIDE_EFFECT_WITH_ARG)),
        ("linkn_flags", [f for f, _ in link_n]),
        ("linkn_counts", [n for _, n in link_n]),
        ("link_flags", sorted(cmdline.LINK_FLAGS)),
        ("link_prefixes", list(cmdline.LINK_PREFIXES)),
        ("separate_flags", sorted(cmdline.SEPARATE | cmdline.JOINED_OR_SEPARATE)),
        ("cc1_actions", sorted(cmdline.CC1_ACTIONS_WITHOUT_CODE)),
        ("cc1_prefixes", list(cmdline.CC1_ACTION_PREFIXES)),
        ("suffixes", sorted(cmdline.SUFFIX_LANGUAGE)),
        ("suffix_languages", [cmdline.SUFFIX_LANGUAGE[k] for k in sorted(cmdline.SUFFIX_LANGUAGE)]),
        ("cxx_from", sorted(cmdline.CXX_DRIVER_LANGUAGE)),
        ("cxx_to", [cmdline.CXX_DRIVER_LANGUAGE[k] for k in sorted(cmdline.CXX_DRIVER_LANGUAGE)]),
        ("tu_languages", sorted(clang_front.COMPILER.languages)),
        ("ineligible_flags", sorted(clang_front.INELIGIBLE_FLAGS)),
        ("ineligible_prefixes", list(clang_front.INELIGIBLE_PREFIXES)),
        ("own_options", ["--explain", "--print-toolchain-file", "--mirecc-version",
                         "--mirecc-help", "--mirecc-identity"]),
    ]


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _body() -> str:
    out = []
    for name, entries in _tables():
        if entries and isinstance(entries[0], int):
            out.append(f"static const int {name}[] = {{{', '.join(map(str, entries))}}};")
        else:
            items = ", ".join(map(_c_string, entries))
            out.append(f"static const char *const {name}[] = {{{items}, 0}};")
    return "\n".join(out) + "\n"


def tables_digest() -> str:
    return sha256(_body().encode()).hexdigest()[:16]


def header() -> str:
    """The C header the client is built with: the tables and their digest."""
    return ("/* written by python -m mirecc.driver.rules --header: do not edit */\n"
            f"#define MIRECC_TABLES_DIGEST \"{tables_digest()}\"\n"
            f"#define MIRECC_RULES_PROTOCOL {PROTOCOL}\n" + _body())


def main(argv: list[str] | None = None) -> int:
    import sys  # lazy: the command only

    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--header"]:
        sys.stdout.write(header())
        return 0
    if argv == ["--protocol"]:
        print(PROTOCOL)
        return 0
    print("usage: python -m mirecc.driver.rules --header | --protocol", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
