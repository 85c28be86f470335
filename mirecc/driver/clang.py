"""``mirecc`` / ``mirecc++``: drop-in replacements for clang / clang++.

The promise, in ccache's words: exactly the same compiler output as a normal
compilation.  The final compile is always the user's own argument list, run
by the real clang (behind an optional launcher such as ccache); mirecc only
adds flags that inject decisions.  Before it, for C/C++ (and OpenCL) translation units
compiled with optimisation, a guarded ML step may run; whatever goes wrong
there, the user's compile runs unchanged, with one warning.

Start-up cost is paid once per file under make, so this module imports only
``os`` and ``sys`` at the top; everything else is imported where needed.
"""

from __future__ import annotations

import os
import sys

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
    from mirecc.taskapi.config import CORE_SETTINGS, ENV_NEGATED, load_config
    from mirecc.learn.gates import describe, installed_gates
    from mirecc.taskapi.registry import default_heads_dirs, tasks

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
    import yaml

    from mirecc.taskapi.registry import find_head_specs

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


def _say(kind: str, message: str) -> None:
    message = " ".join(message.split())  # always exactly one line
    sys.stderr.write(f"mirecc: {kind}: {message}\n")
    sys.stderr.flush()


def _exec(cmd: list[str]) -> int:
    """Replace this process with the compiler: exit code, signals, stdin,
    stdout and stderr are then exactly the compiler's."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        _say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    return 127  # not reached


def _run(cmd: list[str], stdin_data: bytes | None) -> int:
    """Run the compiler as a child (used when mirecc must act after it)."""
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        proc = subprocess.run(cmd, input=stdin_data)
    except OSError as exc:
        _say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    # A compiler killed by a signal: report it as a shell would.
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode


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


def main(argv: list[str], cxx: bool) -> int:
    """The whole driver, guarded: any internal error anywhere runs the
    user's command with clang, with one warning."""
    guard = _Guard(argv, cxx)
    try:
        return _main(argv, cxx, guard)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the build must survive any bug in mirecc
        return guard.fall_back(exc)


class _Guard:
    """What the whole-driver guard needs to run the user's command: the
    compiler once it is known, else a clang found on PATH."""

    def __init__(self, argv: list[str], cxx: bool):
        self.argv, self.cxx = argv, cxx
        self.compiler: str | None = None
        self.prefix: tuple = ()
        self.args: list[str] | None = None
        self.stdin_data: bytes | None = None
        self.warn = True

    def fall_back(self, exc: BaseException) -> int:
        if os.environ.get("MIRECC_DEBUG"):
            import traceback
            traceback.print_exc()
        if self.warn:
            _say("warning", f"internal error {type(exc).__name__}: {exc} (set "
                            f"MIRECC_DEBUG=1 for a traceback); compiled without mirecc")
        compiler = self.compiler
        if compiler is None:
            from mirecc.frontend.compiler import newest_clang_on_path
            compiler = newest_clang_on_path(self.cxx, need_openmp=True) or \
                newest_clang_on_path(self.cxx) or ("clang++" if self.cxx else "clang")
        args = self.args
        if args is None:   # the fault came before mirecc's own options were read
            args = [a for a in self.argv if not a.startswith(("--explain", *OWN_ACTIONS))]
        cmd = [*self.prefix, compiler, *args]
        if self.stdin_data is not None:
            return _run(cmd, self.stdin_data)
        return _exec(cmd)


def identity(config, compiler: str, cxx: bool) -> str:
    """One line that changes whenever mirecc could compile a source
    differently: its version and code, the model, the installed heads, every
    task's settings (:func:`mirecc.tu.cache.pipeline_key`) and the real
    compiler by its content.  ccache's ``compiler_check`` runs
    ``%compiler% --mirecc-identity`` so that its entries follow mirecc's."""
    from mirecc import __version__
    from mirecc.tu.cache import pipeline_key
    from mirecc.util.toolid import tool_identity

    languages = {"c++"} if cxx else {"c"}
    return (f"mirecc {__version__} pipeline {pipeline_key(config, languages)[:32]} "
            f"compiler {tool_identity(compiler, config.cache_root())}")


def _main(argv: list[str], cxx: bool, guard: _Guard) -> int:
    try:
        args, explain, action = _parse_own_options(argv)
    except ValueError as exc:
        _say("error", str(exc))
        return 2
    guard.args = args
    if action == "--mirecc-version":
        from mirecc import __version__
        print(f"mirecc {__version__}")
        return 0
    if action == "--mirecc-help":
        print(help_text(), end="")
        return 0
    if action == "--print-toolchain-file":
        from mirecc.frontend.toolchain import toolchain_file
        from mirecc.taskapi.config import ConfigError, load_config
        try:
            # a bad configuration is reported like any failure to write the file
            print(toolchain_file(load_config().resolved_cache_dir()))
        except (OSError, ConfigError) as exc:
            _say("error", f"cannot write the CMake toolchain file: {exc}")
            return 1
        return 0

    from mirecc.frontend.compiler import CompilerNotFound, choose_compiler
    from mirecc.taskapi.config import ConfigError, load_config
    from mirecc.util.faults import inject_debug_fault

    inject_debug_fault("driver-config")
    try:
        config = load_config()
        compiler, chosen = choose_compiler(config, cxx)
    except (ConfigError, CompilerNotFound) as exc:
        _say("error", str(exc))
        return 2
    if action == "--mirecc-identity":
        print(identity(config, compiler, cxx))
        return 0
    guard.compiler, guard.prefix, guard.warn = compiler, config.prefix, config.warnings

    final = [*config.prefix, compiler, *args]
    if config.disable and not explain:
        _count(config, "disabled")
        return _exec(final)
    return _compile(args, final, compiler, chosen, config, cxx, explain, guard)


def _count(config, passthrough: str | None = None, counts: dict | None = None) -> None:
    """Count this call (``mire stats``): passed through and why, or ``counts``."""
    from mirecc.driver import stats

    counts = dict(counts or {})
    counts["calls"] = 1
    if passthrough:
        counts[f"passthrough.{passthrough}"] = 1
    stats.bump(config, counts)


def _compile(args, final, compiler, chosen, config, cxx, explain, guard) -> int:
    from mirecc.frontend.cmdline import (TU_LANGUAGES, ResponseFileError, classify,
                                expand_response_files)
    from mirecc.util.faults import inject_debug_fault

    inject_debug_fault("driver-classify")
    try:
        expanded = expand_response_files(args)
        inv = classify(expanded, cxx_driver=cxx)
    except ResponseFileError as exc:
        # clang reads the response file itself and will report the problem.
        _count(config, "response-file")
        if explain:
            _print_explanation(explain, compiler, chosen, "unreadable", str(exc), [], None, [],
                               to_stderr=True)
        return _exec(final)

    if inv.kind in ("compile", "link") and not inv.emits_object_only:
        final = final + _link_arguments(expanded, config, compiler)
    if inv.kind == "link" and inv.optimised and inv.output != "-":
        step = _link_step(inv, expanded, config)
        if step is not None:
            return _link(final, step, inv, compiler, chosen, config, explain)

    tus = [s for s in inv.sources if s.language in TU_LANGUAGES]
    skipped = [f"{s.path}: {s.language} is not C, C++ or OpenCL" for s in inv.sources
               if s.language not in TU_LANGUAGES]
    if inv.kind != "compile" or not tus or not inv.optimised:
        _count(config, "not-compile" if inv.kind != "compile" else
               "not-c" if not tus else "not-optimised")
        if explain:
            reason = inv.reason if inv.kind != "compile" else (
                "no C, C++ or OpenCL source" if not tus else
                "compiled without optimisation (-O0 or no -O): mirecc leaves it alone")
            _print_explanation(explain, compiler, chosen, inv.kind, reason, [], None, skipped,
                               to_stderr=_compiler_writes_stdout(inv))
        return _exec(final)

    inject_debug_fault("driver-heads")
    from mirecc.frontend.clang import why_not
    if not (explain or config.capture_dir or config.profile
            or _heads_installed(config, {s.language for s in tus}, inv.opt_level or "0",
                                why_not(inv, expanded, config) is None)):
        # Nothing would read the IR: skip the side run, pay only start-up.
        _count(config, "no-use")
        return _exec(final)

    stdin_data = sys.stdin.buffer.read() if inv.reads_stdin else None
    guard.stdin_data = stdin_data
    # The work directory is made and removed outside the ML path's deadline
    # (the alarm may interrupt anything inside it); it holds the bitcode a
    # split compile's back end reads.
    workdir = _make_workdir()
    try:
        return _compile_tus(inv, expanded, final, compiler, chosen, config, explain,
                            skipped, stdin_data, workdir)
    finally:
        _remove_workdir(workdir)


def _link_arguments(args, config, compiler) -> list[str]:
    """What the tasks that apply add to a call that links
    (``Task.link_arguments``); a task that cannot adds nothing, with one
    warning (its objects fall back to the program's own configuration)."""
    from mirecc.taskapi.registry import tasks

    extra = []
    for task in tasks().values():
        if task.has("link_arguments") and task.applies(config):
            try:
                extra += task.link_arguments(args, config, compiler)
            except Exception as exc:  # noqa: BLE001 - the link must survive it
                if config.warnings:
                    _say("warning", f"{task.name}: {exc}; linked without it")
    return extra


def _link_step(inv, args, config):
    """(task name, step) of the first task whose step (``Task.link_step()``) wants
    this link-only call into a file, else None."""
    from mirecc.taskapi.registry import tasks

    for task in tasks().values():
        if task.has("link_step") and task.applies(config) and (
                task.opt_levels is None or inv.opt_level in task.opt_levels):
            step = task.link_step()
            if step.wants(args, config):
                return task.name, step
    return None


def _link(final, named_step, inv, compiler, chosen, config, explain) -> int:
    """The user's link, run by the task's link step (which may build
    candidates beside it and replace the output by a smaller one); a step
    that fails leaves the user's output, with one warning."""
    name, step = named_step
    ran = []

    def own_link() -> int:
        if not ran:
            ran.append(_run(final, None))
        return ran[0]

    counts, verified = {"calls": 1}, {}
    try:
        rc, step_counts, done = step.link(final, inv.output or "a.out", config, own_link)
        counts.update(step_counts)
        if done is not None:
            verified[name] = done
    except Exception as exc:  # noqa: BLE001 - the build must survive any bug here
        rc = own_link()         # the user's link, if the step had not run it
        if rc == 0:
            counts[f"links.{name}"] = counts[f"links.{name}.failed"] = 1
            if config.warnings:
                _say("warning", f"{name}: the link step failed ({type(exc).__name__}: {exc}); "
                                f"the link is clang's")
    from mirecc.driver import stats
    stats.bump(config, counts)
    if explain:
        _print_explanation(explain, compiler, chosen, inv.kind, inv.reason, [], None, [],
                           to_stderr=False, verified=verified)
    return rc


def _make_workdir() -> str:
    """A private directory under $TMPDIR (tempfile and shutil, with what
    they import, would cost ~14 ms on every compile that reads the IR)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(base, f"mirecc-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _remove_workdir(path: str) -> None:
    """Remove the work directory (flat: bitcode, a response file)."""
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
    except OSError:
        pass


def _compile_tus(inv, args, final, compiler, chosen, config, explain, skipped, stdin_data,
                 workdir) -> int:
    from mirecc.tu import mlpath

    started = mlpath.Outcome()
    try:
        return _finish_tus(inv, args, final, compiler, chosen, config, explain, skipped,
                           stdin_data, workdir, started)
    finally:
        if started.own is not None:   # whatever happened: stop it, clean up
            started.own.discard()
        if started.early is not None:
            started.early.close()


def _finish_tus(inv, args, final, compiler, chosen, config, explain, skipped, stdin_data,
                workdir, started) -> int:
    """The ML path, then the compile (``started``: the caller's Outcome,
    so that the user's compile started in the ML path is stopped whatever
    happens)."""
    from mirecc.tu import mlpath

    outcome, fallback, fallback_code, source_may_be_broken = None, None, None, False
    try:
        try:
            outcome = mlpath.run(inv, compiler, config, args=args, explain=bool(explain),
                                 workdir=workdir, outcome=started, stdin_data=stdin_data)
        except mlpath.MLFailure as exc:
            fallback, source_may_be_broken = str(exc), exc.ir_compile_failed
            fallback_code = exc.code
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the build must survive any bug here
        if os.environ.get("MIRECC_DEBUG"):
            import traceback
            traceback.print_exc()
        fallback = (f"internal error {type(exc).__name__}: {exc} "
                    f"(set MIRECC_DEBUG=1 for a traceback)")
        fallback_code = "internal-error"

    extra = outcome.extra_args if outcome and not fallback else []
    split = outcome is not None and outcome.split is not None and not fallback
    counts: dict = {}

    def finish(compiled_ok: bool = True) -> None:
        """After the compile: count, record and explain what it applied."""
        from mirecc.driver import stats
        from mirecc.util.faults import inject_debug_fault

        if outcome is not None and not fallback_code:
            counts.update(stats.tu_counts(outcome.reports, split=split))
        if outcome is not None:
            counts.update(outcome.counts)
        if fallback_code:
            counts[f"fallback.{fallback_code}"] = 1
        _count(config, counts=counts)
        if outcome is not None and not fallback:
            if compiled_ok:
                stats.bump(config, mlpath.record_manifests(outcome, config))
            problem = mlpath.record_reports(outcome, inv, compiler, config)
            if problem and config.warnings:
                _say("warning", problem)
        if explain:
            try:
                inject_debug_fault("driver-explain")
                _print_explanation(explain, compiler, chosen, inv.kind, inv.reason,
                                   outcome.reports if outcome else [], fallback, skipped,
                                   to_stderr=_compiler_writes_stdout(inv),
                                   verified=outcome.verified if outcome else {})
            except Exception as exc:  # noqa: BLE001 - the object is made: only words are lost
                if config.warnings:
                    _say("warning", f"internal error {type(exc).__name__}: {exc} (set "
                                    f"MIRECC_DEBUG=1 for a traceback); no explanation")

    warning = None
    if fallback:
        warning = f"{fallback}; compiled without mirecc decisions"
    elif outcome and outcome.warnings:
        warning = outcome.warnings[0]
    if not config.warnings:
        warning = None

    if outcome is not None and not fallback and outcome.kept_object is not None:
        # an unchanged TU whose object a build step chose: the kept object is
        # the compile's (mirecc.tu.objcache), and its dependency file; nothing runs
        from mirecc.frontend.clang import object_path, user_dep_file
        from mirecc.util.fsutil import atomic_write_bytes
        try:
            if outcome.kept_dep_file is not None:
                atomic_write_bytes(user_dep_file(args, object_path(inv)), outcome.kept_dep_file,
                                   durable=False)
            atomic_write_bytes(object_path(inv), outcome.kept_object)
            counts["tus.object"] = 1
            finish()
            return 0
        except OSError as exc:
            if config.warnings:
                _say("warning", f"cannot write the kept object to {object_path(inv)}: {exc}; "
                                f"compiled as asked")
            _remove_workdir(workdir)   # exec runs no finally
            return _exec(final)
    if started.own is not None and not split:
        # the ML path gave up after the user's own compile started, or its
        # gates answered: it is the answer
        finish()
        rc = _finish_own(started.own, final, stdin_data)
        if rc == 0 and not fallback and outcome is not None \
                and outcome.gated_manifest is not None:
            from mirecc.driver import stats

            stats.bump(config, mlpath.record_gated(outcome, config))
        if rc == 0 and warning:
            _say("warning", warning)
        return rc
    if source_may_be_broken:
        # The side IR run failed; if the real compile fails too, the source is
        # broken and clang's own error says it all.  Warn only otherwise.
        finish()
        rc = _run(final, stdin_data)
        if rc == 0 and warning:
            _say("warning", warning)
        return rc
    if warning:
        _say("warning", warning)
    if split:
        rc = _compile_split(outcome, extra, final, config, counts)
        finish(compiled_ok=rc == 0)
        return rc
    finish()
    if stdin_data is not None:
        return _run(final + extra, stdin_data)
    _remove_workdir(workdir)   # exec runs no finally
    return _exec(final + extra)


def _finish_own(own, final, stdin_data) -> int:
    """The user's own compile started beside the ML path: its object and
    diagnostics when it compiled; its diagnostics and exit code when it
    failed (clang's own words); the command run again when it could not be
    read."""
    if own.accept():
        _replay(own)
        return 0
    if own.returncode not in (None, 0) and not own.stdout \
            and os.path.basename(own.temp).encode() not in own.stderr:
        # (clang's words, unless they name the hidden output: then it says them again)
        _replay(own)
        return own.returncode if own.returncode > 0 else 128 - own.returncode
    return _run(final, stdin_data)


def _replay(compile_) -> None:
    sys.stderr.buffer.write(compile_.stderr)
    sys.stderr.flush()


def _compile_split(outcome, extra, final, config, counts: dict) -> int:
    """The object of a compile whose IR the ML path read.  Without decision
    flags: the user's own compile (started beside the ML path).  With
    them: the user's command again with the flags; when its object equals
    the user's, the decisions changed nothing (the compiler's own choice):
    the user's object stands and no decision counts as applied.  A decided
    compile that fails or prints more than the user's leaves the user's
    object, with one warning."""
    from mirecc.tu import mlpath

    own = outcome.own
    if not extra:
        rc = _finish_own(own, final, None)
        if rc == 0 and outcome.split is not None:
            _verify(outcome, extra, config)
        return rc
    decided = outcome.split.start_own(extra, tag="decided")
    try:
        decided_ok, own_ok = decided.wait(), own.wait()
        if decided_ok and own_ok and decided.object_bytes() == own.object_bytes():
            mlpath.mark_unchanged(outcome)
            counts["tus.unchanged"] = 1
            decided.discard()
            return _compile_split(outcome, [], final, config, counts)
        if decided_ok and decided.accept():
            own.discard()
            _replay(decided)
            mlpath.attribute(outcome, extra)
            _verify(outcome, extra, config)
            return 0
    finally:
        decided.discard()
    counts["fallback.decided-failed"] = 1
    mlpath.mark_unchanged(outcome, same=False)
    rc = _finish_own(own, final, None)
    if rc == 0 and config.warnings:
        _say("warning", "the compile with mirecc's decisions failed; compiled as asked, "
                        "without them")
    return rc


def _verify(outcome, extra, config) -> None:
    """The build step of tasks that verify their decisions (``Task.verify``:
    code size builds candidates and keeps the smallest object), after the
    user's object is made.  Whatever fails, that object stands, with one
    warning."""
    from mirecc.driver import stats
    from mirecc.taskapi.registry import task

    for report in outcome.reports:
        if not report.applied:
            continue
        for decision in report.result.decisions:
            declared = task(decision.task)
            if not decision.applied or declared is None or not declared.has("verify"):
                continue
            try:
                verified = declared.verify(
                    decision, report, outcome.split, extra,
                    os.path.dirname(outcome.split.bitcode_path), config)
            except Exception as exc:  # noqa: BLE001 - the user's object stands
                stats.bump(config, {"fallback.verify-failed": 1})
                if config.warnings:
                    _say("warning", f"{decision.task}: verifying candidates failed: {exc}; "
                                    f"kept the object of the user's level")
                continue
            outcome.verified[decision.task] = verified
            stats.bump(config, {f"verified.{decision.task}": 1,
                                f"verified.{decision.task}.improved":
                                    int(verified.winner != f"-O{report.opt_level}"),
                                f"verified.{decision.task}.from-cache":
                                    int(getattr(verified, "from_cache", False)),
                                f"verified.{decision.task}.from-twin":
                                    int(getattr(verified, "from_twin", False)),
                                f"verified.{decision.task}.from-store":
                                    int(getattr(verified, "from_store", False)),
                                **getattr(verified, "store_counts", {}),
                                f"verified.{decision.task}.early":
                                    int(getattr(outcome.split.early, "taken", False)),
                                f"verified.{decision.task}.not-searched":
                                    int(getattr(verified, "built", 1) == 0
                                        and not getattr(verified, "from_cache", False)),
                                **({f"verified.{decision.task}.{verified.reason}": 1}
                                   if getattr(verified, "reason", "") else {})})


def _heads_installed(config, languages, opt_level: str, splittable: bool = True) -> bool:
    """Is a head installed that applies to one of ``languages`` and has a use
    in this build?  A line scan of each spec.yaml (registry.spec_languages,
    registry.has_use), no YAML parser: heads for OpenCL alone do not make a C
    compile run the side run, nor does a loop-vectorize head whose decisions
    would neither be applied nor recorded, nor, in a compile that cannot be
    split (``cc conftest.c -o conftest``, several sources), a head whose
    task acts only through its build step (code size: ``Task.verify``
    builds candidates from a split compile's bitcode), unless recorded."""
    from mirecc.taskapi.registry import (default_heads_dirs, has_use, heads_for_languages,
                                       spec_task, task)

    for spec in heads_for_languages(default_heads_dirs(config), languages):
        if not has_use(spec, config, opt_level):
            continue
        declared = task(spec_task(spec.spec_path) or "")
        if splittable or config.record or declared is None or not declared.has("verify"):
            return True
    return False


def _compiler_writes_stdout(inv) -> bool:
    """Does clang print its result on stdout (-o -, -E, -M, --version, ...)?
    Queries without -o do; link-only and compile calls write files."""
    return inv.output == "-" or (inv.kind == "query" and inv.output is None)


def _print_explanation(fmt, compiler, chosen, kind, reason, reports, fallback, skipped,
                       to_stderr, verified=None):
    from mirecc.tu.explain import explanation, render

    text = render(explanation(compiler=compiler, compiler_chosen=chosen, invocation_kind=kind,
                              reason=reason, reports=reports, fallback=fallback,
                              skipped=skipped, verified=verified), fmt)
    # Keep the compiler's own stdout clean when it writes its output there.
    stream = sys.stderr if to_stderr else sys.stdout
    stream.write(text)
    stream.flush()
