"""``mirecc`` / ``mirecc++``: drop-in replacements for clang / clang++.

The promise, in ccache's words: exactly the same compiler output as a normal
compilation.  The final compile is always the user's own argument list, run
by the real clang (behind an optional launcher such as ccache); mirecc only
adds flags that inject decisions.  Before it, for C/C++ (and OpenCL) translation units
compiled with optimisation, a guarded ML step may run; whatever goes wrong
there, the user's compile runs unchanged, with one warning.

The driver owns one step of a call: it reads mirecc's own options, the
configuration and the compiler, classifies the command and hands the call,
in its :class:`~mirecc.tu.context.CompileContext`, to the one step that
takes it: the compiler as it is, a task's link step or the per-TU path
(:mod:`mirecc.tu.compile`), called once.

Start-up cost is paid once per file under make, so this module imports at
the top only what a compile uses (standard library only below it: ``os``,
``fcntl``); what only some calls need (the ML path, ``--explain``'s JSON,
``--mirecc-help``) is imported where they need it, with what it costs.
"""

from __future__ import annotations

import os
import sys

from mirecc.frontend.cmdline import ResponseFileError
from mirecc.frontend.clang import COMPILER as CLANG
from mirecc.frontend.compiler import CompilerNotFound, exec_command, run_command, say
from mirecc import __version__
from mirecc.taskapi.config import CORE_SETTINGS, ENV_NEGATED, ConfigError, load_config
from mirecc.taskapi.registry import (default_heads_dirs, find_head_specs, has_use,
                                     heads_for_languages, spec_task, tasks)
from mirecc.tu import stats
from mirecc.tu.context import CompileContext
from mirecc.util.faults import inject_debug_fault

USAGE = """\
usage: mirecc [clang arguments...]      (C; mirecc++ for C++)
       mirecc --explain[=verbose|json] [clang arguments...]
       mirecc --print-toolchain-file | --mirecc-version | --mirecc-help
       mirecc --mirecc-identity    (what ccache's compiler_check should hash)

Every argument except the ones above goes to clang untouched.
Configuration: .mirecc.yaml (searched upward from the working directory, or
named by MIRECC_CONFIG) and environment variables, which win over the file.
"""


def help_text() -> str:
    """--mirecc-help: the usage, then every setting (mirecc's and each
    task's) with its environment variable, and the tasks."""
    from mirecc.learn.gates import describe, installed_gates  # lazy: yaml, json; help only

    negated = {field: var for var, field in ENV_NEGATED.items()}

    def shown(value) -> str:
        return {True: "true", False: "false", None: "unset", (): "none"}.get(value, str(value)) \
            if isinstance(value, (bool, type(None), tuple)) else str(value)

    def rows(settings):
        out = []
        for s in settings:
            env = s.env or (f"{negated[s.key]}=1 negates" if s.key in negated else "-")
            # one default per setting: the help's own words where it names one
            default = "" if "default" in s.help else f" (default: {shown(s.default)})"
            out.append(f"  {s.key:<22} {env:<24} {s.help}{default}")
        return out

    def when(task) -> str:
        default = next((s.default for s in task.settings if s.key == task.applied_when), False)
        return (f"{task.applied_when} is true" if isinstance(default, bool)
                else f"{task.applied_when} is above 0")

    lines = [USAGE, "Settings (.mirecc.yaml key, environment variable, meaning):"]
    lines += rows(CORE_SETTINGS)
    try:    # the installed heads' calibrated gates (mire gates), else the task's words
        dirs = default_heads_dirs(load_config())
        gates = installed_gates(dirs)
        readers = encoder_readers(dirs)
    except Exception:   # noqa: BLE001 - a bad configuration must not break --mirecc-help
        gates, readers = {}, {}
    for task in tasks().values():
        applied = (f"applied when {when(task)}" if task.applied_when
                   else "no head: applied from a decisions profile"
                   if not task.has("head_class") and task.has("profile_kind")
                   else "advisory: recorded, never applied")
        lines.append(f"\nTask {task.name} ({', '.join(sorted(task.languages))}; "
                     f"{applied}): {task.summary}")
        measured = describe(gates.get(task.name)) or task.measured
        if measured:
            lines.append(f"  measured: {measured}")
        if task.has("head_class"):
            lines.append(f"  encoder: read by its head ({', '.join(readers[task.name])}); "
                         "judged against statistics alone in docs/encoder.md"
                         if readers.get(task.name) else
                         "  encoder: not read (its head reads statistics; the build does not "
                         "run the encoder for it)")
        lines += rows(task.settings)
    return "\n".join(lines) + "\n"


def encoder_readers(dirs: list[str]) -> dict[str, list[str]]:
    """task -> the installed heads that read the encoder's embedding (an
    embedding among their ``spec.yaml``'s ``features``)."""
    import yaml     # lazy: ~10 ms, --mirecc-help only

    out: dict[str, list[str]] = {}
    for head in find_head_specs(dirs):
        try:
            with open(head.spec_path) as f:
                spec = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError):
            continue
        if spec.get("task") and any("embedding" in str(f) for f in spec.get("features") or ()):
            out.setdefault(spec["task"], []).append(f"{head.name}: {spec['encoder']}")
    return out


#: mirecc's own options that answer and compile nothing
OWN_ACTIONS = ("--print-toolchain-file", "--mirecc-version", "--mirecc-help",
               "--mirecc-identity")


def _parse_own_options(argv: list[str]):
    """Split mirecc's own options from the compiler's. Returns
    (compiler args, explain format or None, action or None)."""
    args, explain, action = [], None, None
    for arg in argv:
        if arg in ("--explain", "--explain=text"):
            explain = "text"
        elif arg in ("--explain=json", "--explain=verbose"):
            explain = arg[10:]
        elif arg.startswith("--explain="):
            raise ValueError(f"unknown --explain format '{arg[10:]}' (use text, verbose "
                             f"or json)")
        elif arg in OWN_ACTIONS:
            action = arg
        else:
            args.append(arg)
    return args, explain, action


def main_c() -> int:
    return main(sys.argv[1:], cxx=False)


def main_cxx() -> int:
    return main(sys.argv[1:], cxx=True)


def main(argv: list[str], cxx: bool, kind: str = "clang") -> int:
    """The whole driver for the compiler registered as ``kind``
    (:mod:`mirecc.frontend.compilers`), guarded: any internal error
    anywhere runs the user's command with the compiler, with one warning."""
    ctx = CompileContext(argv, cxx, CLANG if kind == "clang" else _registered(kind))
    try:
        return _main(ctx)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the build must survive any bug in mirecc
        return _fall_back(ctx, exc)


def _registered(kind: str):
    """Another compiler than clang, from the registry (clang, every
    ``mirecc`` call's, is imported directly: one module less a call)."""
    from mirecc.frontend.compilers import compiler  # lazy: a compiler other than clang only

    return compiler(kind)


def _fall_back(ctx: CompileContext, exc: BaseException) -> int:
    """The user's command after an internal error: with the compiler once it
    is known, else a clang found on PATH; one warning (unless the
    configuration turned warnings off)."""
    if os.environ.get("MIRECC_DEBUG"):
        import traceback    # lazy: MIRECC_DEBUG only
        traceback.print_exc()
    config = ctx.config     # set with the compiler: its launcher and warnings
    if config is None or config.warnings:
        say("warning", f"internal error {type(exc).__name__}: {exc} (set "
                       f"MIRECC_DEBUG=1 for a traceback); compiled without mirecc")
    compiler = ctx.compiler or ctx.front.fallback(ctx.cxx)
    args = ctx.args
    if args is None:   # the fault came before mirecc's own options were read
        args = [a for a in ctx.argv if not a.startswith(("--explain", *OWN_ACTIONS))]
    cmd = [*(config.prefix if config is not None else ()), compiler, *args]
    if ctx.stdin_data is not None:
        return run_command(cmd, ctx.stdin_data)
    return exec_command(cmd)


def identity(config, compiler: str, cxx: bool) -> str:
    """One line that changes whenever mirecc could compile a source
    differently: its version and code, the model, the installed heads, every
    task's settings (:func:`mirecc.tu.cache.pipeline_key`) and the real
    compiler by its content.  ccache's ``compiler_check`` runs
    ``%compiler% --mirecc-identity`` so that its entries follow mirecc's."""
    # lazy: --mirecc-identity only (ccache's compiler_check)
    from mirecc.tu.cache import pipeline_key
    from mirecc.util.toolid import tool_identity

    languages = {"c++"} if cxx else {"c"}
    return (f"mirecc {__version__} pipeline {pipeline_key(config, languages)[:32]} "
            f"compiler {tool_identity(compiler, config.cache_root())}")


def _main(ctx: CompileContext) -> int:
    """mirecc's own options and actions, the configuration and the
    compiler; then the call classified (:func:`_classify`)."""
    try:
        ctx.args, ctx.explain, ctx.action = _parse_own_options(ctx.argv)
    except ValueError as exc:
        say("error", str(exc))
        return 2
    action = ctx.action
    if action == "--mirecc-version":
        print(f"mirecc {__version__}")
        return 0
    if action == "--mirecc-help":
        print(help_text(), end="")
        return 0
    if action == "--print-toolchain-file":
        from mirecc.frontend.toolchain import toolchain_file  # lazy: hashlib, shutil
        try:
            # a bad configuration is reported like any failure to write the file
            print(toolchain_file(load_config().resolved_cache_dir()))
        except (OSError, ConfigError) as exc:
            say("error", f"cannot write the CMake toolchain file: {exc}")
            return 1
        return 0

    inject_debug_fault("driver-config")
    try:
        config = load_config()
        compiler, chosen = ctx.front.find(config, ctx.cxx)
    except (ConfigError, CompilerNotFound) as exc:
        say("error", str(exc))
        return 2
    if action == "--mirecc-identity":
        print(identity(config, compiler, ctx.cxx))
        return 0
    ctx.config, ctx.compiler, ctx.chosen = config, compiler, chosen
    if "MIRECC_CLIENT_RULES" in os.environ:     # the compiled client asks for its rules
        from mirecc.driver.rules import write_asked  # lazy: once per settings
        write_asked(config, ctx.cxx, compiler)
    ctx.final = ctx.front.final_command(config.prefix, compiler, ctx.args)
    if config.disable and not ctx.explain:
        _count(config, "disabled")
        return exec_command(ctx.final)
    return _classify(ctx)


def _count(config, passthrough: str) -> None:
    """Count a call passed through as it is, and why (``mire stats``)."""
    stats.bump(config, {"calls": 1, f"passthrough.{passthrough}": 1})


def _explain_passthrough(ctx: CompileContext, kind: str, reason: str) -> None:
    from mirecc.tu.explain import show  # lazy: json, for --explain only

    show(ctx, reason, to_stderr=kind == "unreadable" or ctx.compiler_writes_stdout(),
         kind=kind)


def _classify(ctx: CompileContext) -> int:
    """What the call is (:func:`route`), and the one step that takes it: the
    compiler as it is, a task's link step (:func:`mirecc.tu.compile.link_call`)
    or the per-TU path (:func:`mirecc.tu.compile.compile_call`), each called
    once with the call's context."""
    config, explain = ctx.config, ctx.explain
    inject_debug_fault("driver-classify")
    where, detail = route(ctx)
    if where == "link":
        from mirecc.tu.compile import link_call  # lazy: the ML path's modules
        return link_call(ctx, *detail)
    if where != "compile":
        _count(config, where)
        if explain and where != "no-use":
            inv = ctx.inv
            if where == "response-file":
                _explain_passthrough(ctx, "unreadable", detail)
            else:
                _explain_passthrough(ctx, inv.kind, inv.reason if inv.kind != "compile" else (
                    "no C, C++ or OpenCL source" if where == "not-c" else
                    "compiled without optimisation (-O0 or no -O): mirecc leaves it alone"))
        return exec_command(ctx.final)
    from mirecc.tu.compile import compile_call  # lazy: only a compile that reads IR pays
    return compile_call(ctx)


def route(ctx: CompileContext):
    """Where a call goes, decided from its command line and the
    configuration alone (the compiled client, ``client/``, decides the
    same from the rules :mod:`mirecc.driver.rules` writes from this):
    ``("link", (task, step))``, ``("compile", None)`` or, for a call passed
    to the compiler as it is, (its ``passthrough.<code>``, detail).  Sets
    the context's expanded arguments, invocation, skipped inputs, why the
    compile cannot be split and the final command's link arguments."""
    config, explain = ctx.config, ctx.explain
    try:
        ctx.expanded, ctx.inv = ctx.front.parse(ctx.args, ctx.cxx)
        inv = ctx.inv
    except ResponseFileError as exc:
        # clang reads the response file itself and will report the problem.
        return "response-file", str(exc)

    if inv.kind in ("compile", "link") and not inv.emits_object_only:
        ctx.final += _link_arguments(ctx)
    if inv.kind == "link" and inv.optimised and inv.output != "-":
        step = _link_step(ctx)
        if step is not None:
            return "link", step

    languages = ctx.front.languages
    tus = [s for s in inv.sources if s.language in languages]
    ctx.skipped = [f"{s.path}: {s.language} is not C, C++ or OpenCL" for s in inv.sources
                   if s.language not in languages]
    if inv.kind != "compile" or not tus or not inv.optimised:
        return ("not-compile" if inv.kind != "compile" else
                "not-c" if not tus else "not-optimised"), None

    inject_debug_fault("driver-heads")
    ctx.split_blocked = ctx.front.split_blocked(inv, ctx.expanded, config)
    if not (explain or config.capture_dir or config.profile
            or _heads_installed(config, {s.language for s in tus}, inv.opt_level or "0",
                                ctx.split_blocked is None)):
        # Nothing would read the IR: skip the side run, pay only start-up.
        return "no-use", None
    return "compile", None


def _link_arguments(ctx: CompileContext) -> list[str]:
    """What the tasks that apply add to a call that links
    (``LinkStep.arguments`` of ``Task.link_step()``); a task that cannot
    adds nothing, with one warning (its objects fall back to the program's
    own configuration)."""
    config = ctx.config
    extra, seen = [], []
    for task in tasks().values():
        if task.has("link_step") and task.applies(config) and task.link_step().active(config):
            step = task.link_step()
            if any(step is s for s in seen):   # one step two tasks share (adapt_loops)
                continue
            seen.append(step)
            try:
                extra += step.arguments(ctx.expanded, config, ctx.compiler)
            except Exception as exc:  # noqa: BLE001 - the link must survive it
                if config.warnings:
                    say("warning", f"{task.name}: {exc}; linked without it")
    return extra


def _link_step(ctx: CompileContext):
    """(task name, step) of the first task whose step (``Task.link_step()``) wants
    this link-only call into a file, else None."""
    config = ctx.config
    for task in tasks().values():
        if task.has("link_step") and task.applies(config) and (
                task.opt_levels is None or ctx.inv.opt_level in task.opt_levels):
            step = task.link_step()
            if step.active(config) and step.wants(ctx.expanded, config):
                return task.name, step
    return None


def _heads_installed(config, languages, opt_level: str, splittable: bool = True) -> bool:
    """Is a head installed that applies to one of ``languages`` and has a use
    in this build?  A line scan of each spec.yaml (registry.spec_languages,
    registry.has_use), no YAML parser: heads for OpenCL alone do not make a C
    compile run the side run, nor does a loop-vectorize head whose decisions
    would neither be applied nor recorded, nor, in a compile that cannot be
    split (``cc conftest.c -o conftest``, several sources), a head whose
    task acts only through its build step (code size: ``CompileStep.verify``
    builds candidates from a split compile's bitcode), unless recorded.  (A
    clang task with a compile step acts through its build step: asked of
    the declaration, nothing of the task is imported.)"""
    for spec in heads_for_languages(default_heads_dirs(config), languages):
        if not has_use(spec, config, opt_level):
            continue
        declared = tasks().get(spec_task(spec.spec_path) or "")
        if splittable or config.record or declared is None \
                or not declared.has("compile_step"):
            return True
    return False


