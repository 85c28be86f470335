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
       mirecc --explain[=json] [clang arguments...]
       mirecc --print-toolchain-file | --mirecc-version | --mirecc-help

Every argument except the ones above goes to clang untouched.
Configuration: .mirecc.yaml (searched upward from the working directory) or
environment variables MIRECC_CC, MIRECC_CXX, MIRECC_PREFIX, MIRECC_CACHE_DIR,
MIRECC_CACHE, MIRECC_CAPTURE_DIR, MIRECC_TIMEOUT, MIRECC_QUIET, MIRECC_MODEL,
MIRECC_PLUGIN, MIRECC_HEADS_DIR, MIRECC_DISABLE, MIRECC_RECORD,
MIRECC_EMBED_SERVER, MIRECC_OPENCL_TRANSFER, MIRECC_OPENCL_WGSIZE,
MIRECC_OPENCL_GPU, MIRECC_APPLY_LOOPS, MIRECC_CONFIG.
"""


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
        elif arg == "--explain=json":
            explain = "json"
        elif arg.startswith("--explain="):
            raise ValueError(f"unknown --explain format '{arg[10:]}' (use text or json)")
        elif arg in ("--print-toolchain-file", "--mirecc-version", "--mirecc-help"):
            action = arg
        else:
            args.append(arg)
    return args, explain, action


def main_c() -> int:
    return main(sys.argv[1:], cxx=False)


def main_cxx() -> int:
    return main(sys.argv[1:], cxx=True)


def main(argv: list[str], cxx: bool) -> int:
    try:
        args, explain, action = _parse_own_options(argv)
    except ValueError as exc:
        _say("error", str(exc))
        return 2
    if action == "--mirecc-version":
        from mirecc import __version__
        print(f"mirecc {__version__}")
        return 0
    if action == "--mirecc-help":
        print(USAGE, end="")
        return 0
    if action == "--print-toolchain-file":
        from mirecc.toolchain import toolchain_file
        try:
            print(toolchain_file())
        except OSError as exc:
            _say("error", f"cannot write the CMake toolchain file: {exc}")
            return 1
        return 0

    from mirecc.compiler import CompilerNotFound, find_compiler
    from mirecc.config import ConfigError, load_config

    try:
        config = load_config()
        compiler = find_compiler(config, cxx)
    except (ConfigError, CompilerNotFound) as exc:
        _say("error", str(exc))
        return 2

    final = [*config.prefix, compiler, *args]
    if config.disable and not explain:
        return _exec(final)
    return _compile(args, final, compiler, config, cxx, explain)


def _compile(args, final, compiler, config, cxx, explain) -> int:
    from mirecc.cmdline import (TU_LANGUAGES, ResponseFileError, classify,
                                expand_response_files)

    try:
        inv = classify(expand_response_files(args), cxx_driver=cxx)
    except ResponseFileError as exc:
        # clang reads the response file itself and will report the problem.
        if explain:
            _print_explanation(explain, compiler, "unreadable", str(exc), [], None, [],
                               to_stderr=True)
        return _exec(final)

    tus = [s for s in inv.sources if s.language in TU_LANGUAGES]
    skipped = [f"{s.path}: {s.language} is not C, C++ or OpenCL" for s in inv.sources
               if s.language not in TU_LANGUAGES]
    if inv.kind != "compile" or not tus or not inv.optimised:
        if explain:
            reason = inv.reason if inv.kind != "compile" else (
                "no C, C++ or OpenCL source" if not tus else
                "compiled without optimisation (-O0 or no -O): mirecc leaves it alone")
            _print_explanation(explain, compiler, inv.kind, reason, [], None, skipped,
                               to_stderr=_compiler_writes_stdout(inv))
        return _exec(final)

    if not (explain or config.capture_dir
            or _heads_installed(config, {s.language for s in tus})):
        # Nothing would read the IR: skip the side run, pay only start-up.
        return _exec(final)

    stdin_data = sys.stdin.buffer.read() if inv.reads_stdin else None
    outcome, fallback, source_may_be_broken = None, None, False
    try:
        from mirecc import mlpath
        try:
            outcome = mlpath.run(inv, compiler, config, want_summary=bool(explain),
                                 stdin_data=stdin_data)
        except mlpath.MLFailure as exc:
            fallback, source_may_be_broken = str(exc), exc.ir_compile_failed
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the build must survive any bug here
        if os.environ.get("MIRECC_DEBUG"):
            import traceback
            traceback.print_exc()
        fallback = (f"internal error {type(exc).__name__}: {exc} "
                    f"(set MIRECC_DEBUG=1 for a traceback)")

    extra = outcome.extra_args if outcome and not fallback else []
    if explain:
        _print_explanation(explain, compiler, inv.kind, inv.reason,
                           outcome.reports if outcome else [], fallback, skipped,
                           to_stderr=_compiler_writes_stdout(inv))

    warning = None
    if fallback:
        warning = f"{fallback}; compiled without mirecc decisions"
    elif outcome and outcome.warnings:
        warning = outcome.warnings[0]
    if not config.warnings:
        warning = None

    if source_may_be_broken:
        # The side IR run failed; if the real compile fails too, the source is
        # broken and clang's own error says it all.  Warn only otherwise.
        rc = _run(final, stdin_data)
        if rc == 0 and warning:
            _say("warning", warning)
        return rc
    if warning:
        _say("warning", warning)
    if stdin_data is not None:
        return _run(final + extra, stdin_data)
    return _exec(final + extra)


def _heads_installed(config, languages) -> bool:
    """Is a head installed that applies to one of ``languages`` and has a use
    in this build?  A line scan of each spec.yaml (registry.spec_languages,
    registry.has_use), no YAML parser: heads for OpenCL alone do not make a C
    compile run the side run, nor does a loop-vectorize head whose decisions
    would neither be applied nor recorded."""
    from mirecc.registry import default_heads_dirs, has_use, heads_for_languages
    return any(has_use(spec, config)
               for spec in heads_for_languages(default_heads_dirs(config), languages))


def _compiler_writes_stdout(inv) -> bool:
    """Does clang print its result on stdout (-o -, -E, -M, --version, ...)?
    Queries without -o do; link-only and compile calls write files."""
    return inv.output == "-" or (inv.kind == "query" and inv.output is None)


def _print_explanation(fmt, compiler, kind, reason, reports, fallback, skipped, to_stderr):
    from mirecc.explain import explanation, render

    text = render(explanation(compiler=compiler, invocation_kind=kind, reason=reason,
                              reports=reports, fallback=fallback, skipped=skipped), fmt)
    # Keep the compiler's own stdout clean when it writes its output there.
    stream = sys.stderr if to_stderr else sys.stdout
    stream.write(text)
    stream.flush()
