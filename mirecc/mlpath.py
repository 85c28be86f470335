"""The guarded ML step: emit each TU's IR, run the pipeline, collect decisions.

Everything here may fail; the driver catches ``MLFailure`` (and anything
else) and falls back to the user's exact compile with one warning.  Nothing
here touches the user's outputs: the IR is emitted by a side run of clang
into a private temporary directory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from mirecc.cmdline import TU_LANGUAGES, Invocation, Source
from mirecc.pipeline import Pipeline, TURequest, TUResult

# Flags that make clang write unoptimised-but-optimisable IR: the front end's
# output with the -O level's attributes, before any LLVM pass runs.  Warnings
# are off: the side run is one TU at a time, so a flag meant for another TU is
# "unused" here, and with -Werror that must not fail it (the final compile
# reports the user's warnings as usual).
IR_EMIT_FLAGS = ["-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                 "-w", "-Wno-unused-command-line-argument"]

# Test hook for failures no real input can provoke (a bug in mirecc itself,
# a hang).  Documented in the README; never set in normal use.
FAULT_ENV = "MIRECC_DEBUG_FAULT"


class MLFailure(Exception):
    """The ML path gave up; ``str()`` is the one-line reason for the warning.

    ``ir_compile_failed`` marks a failure of the side IR run, which most often
    means the source itself does not compile: clang's final compile will then
    report the error, and mirecc's warning would only be noise.
    """

    def __init__(self, reason: str, ir_compile_failed: bool = False):
        super().__init__(reason)
        self.ir_compile_failed = ir_compile_failed


class MLTimeout(BaseException):
    """Raised by the alarm; a BaseException so no handler on the way swallows it."""


@dataclass
class TUReport:
    source: str
    language: str
    opt_level: str
    bitcode_sha256: str
    bitcode_bytes: int
    result: TUResult
    cache: str                      # "hit", "miss", "off" or "unwritable"
    captured: str | None = None     # path of the stored IR in capture mode


@dataclass
class Outcome:
    reports: list[TUReport] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)   # injected into the final compile
    warnings: list[str] = field(default_factory=list)     # non-fatal problems


@contextmanager
def deadline(seconds: float):
    """Raise MLTimeout in the main thread after ``seconds`` (wall clock)."""
    def on_alarm(signum, frame):
        raise MLTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def ir_command(compiler: str, inv: Invocation, source: Source, out: str) -> list[str]:
    """The side run that writes ``source``'s bitcode to ``out``."""
    lang = ["-x", source.language] if source.explicit_language else []
    return [compiler, *inv.ir_flags, *lang, source.path, *IR_EMIT_FLAGS, "-o", out]


def emit_ir(compiler: str, inv: Invocation, source: Source, out: str, workdir: str,
            stdin_data: bytes | None) -> bytes:
    """Run clang's front end on ``source``; return the bitcode (also left at ``out``)."""
    cmd = ir_command(compiler, inv, source, out)
    if sum(len(a) for a in cmd) > 100_000:  # stay under ARG_MAX: use a response file
        rsp = os.path.join(workdir, "args.rsp")
        with open(rsp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write("\n".join('"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"'
                               for a in cmd[1:]))
        cmd = [cmd[0], "@" + rsp]
    try:
        proc = subprocess.run(cmd, input=stdin_data if source.is_stdin else None,
                              stdin=None if source.is_stdin else subprocess.DEVNULL,
                              capture_output=True)
    except OSError as exc:
        raise MLFailure(f"cannot run {compiler} to emit IR: {exc}") from None
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.decode(errors="replace").splitlines()
                      if "error" in ln), "no error message")
        raise MLFailure(f"emitting IR for {source.path} failed: {first.strip()}",
                        ir_compile_failed=True)
    try:
        with open(out, "rb") as fh:
            return fh.read()
    except OSError:
        raise MLFailure(f"emitting IR for {source.path}: clang succeeded but wrote no "
                        f"bitcode (a flag in the command overrides -emit-llvm?)") from None


def _check_plugin(config) -> None:
    if config.plugin and not os.path.isfile(config.plugin):
        raise MLFailure(f"pass plugin not found: {config.plugin}")


def _inject_debug_fault() -> None:
    fault = os.environ.get(FAULT_ENV)
    if fault == "exception":
        raise RuntimeError(f"fault injected by {FAULT_ENV}=exception")
    if fault == "hang":
        time.sleep(3600)


def run(inv: Invocation, compiler: str, config, *, want_summary: bool,
        stdin_data: bytes | None = None) -> Outcome:
    """Run the ML path for every C/C++/OpenCL source of ``inv`` within the timeout."""
    # The work directory is made and removed outside the deadline: the alarm
    # may interrupt anything inside it, and must not leave files behind.
    workdir = tempfile.mkdtemp(prefix="mirecc-")
    try:
        with deadline(config.timeout):
            return _run(inv, compiler, config, want_summary, stdin_data, workdir)
    except MLTimeout:
        raise MLFailure(f"timed out after {config.timeout:g} s "
                        f"(raise 'timeout' in .mirecc.yaml or MIRECC_TIMEOUT)") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(inv, compiler, config, want_summary, stdin_data, workdir: str) -> Outcome:
    from mirecc.cache import CacheError, ResultCache
    from mirecc.capture import CaptureError, capture
    from mirecc.irinfo import IRReadError, summarize_bitcode
    from mirecc.model import ModelError
    from mirecc.pipeline import HeadError

    outcome = Outcome()
    languages = {s.language for s in inv.sources if s.language in TU_LANGUAGES}
    try:
        pipeline = Pipeline.load(config, languages)
    except (ModelError, HeadError) as exc:
        raise MLFailure(str(exc)) from None
    _check_plugin(config)
    _inject_debug_fault()

    cache = ResultCache(config.resolved_cache_dir()) if config.cache else None
    for number, source in enumerate(inv.sources):
        if source.language not in TU_LANGUAGES:
            continue
        bc_path = os.path.join(workdir, f"tu{number}.bc")
        bitcode = emit_ir(compiler, inv, source, bc_path, workdir, stdin_data)
        sha = hashlib.sha256(bitcode).hexdigest()
        report = TUReport(source.path, source.language, inv.opt_level or "0",
                          sha, len(bitcode), TUResult(None), "off")
        if config.capture_dir:
            try:
                report.captured = str(capture(
                    config.capture_dir, bitcode, sha, source=source.path,
                    language=source.language, opt_level=report.opt_level,
                    flags=list(inv.ir_flags), compiler=compiler))
            except CaptureError as exc:
                raise MLFailure(str(exc)) from None

        key = ResultCache.key(sha, pipeline.version, report.opt_level)
        cached = cache.get(key) if cache else None
        needs_summary = want_summary or bool(pipeline.heads)
        if cached is not None and (cached.summary or not needs_summary):
            report.result, report.cache = cached, "hit"
        else:
            summary = None
            if needs_summary:
                try:
                    summary = summarize_bitcode(bitcode, f"IR of {source.path}")
                except IRReadError as exc:
                    raise MLFailure(str(exc)) from None
            request = TURequest(source.path, source.language, report.opt_level,
                                tuple(inv.ir_flags), bc_path, sha, compiler)
            try:
                report.result = pipeline.run(request, summary)
            except (ModelError, HeadError) as exc:
                raise MLFailure(str(exc)) from None
            report.cache = "miss" if cache else "off"
            if cache:
                try:
                    cache.put(key, report.result)
                except CacheError as exc:
                    # The result is still valid; only its reuse is lost.
                    report.cache = "unwritable"
                    if not outcome.warnings:
                        outcome.warnings.append(str(exc))
        if want_summary:
            from mirecc.vectorize.head import explain_loop_decisions
            report.result = explain_loop_decisions(report.result, compiler,
                                                   list(inv.ir_flags), source.path)
        outcome.reports.append(report)
        if config.record:
            try:
                record(config.record, report, inv, compiler)
            except OSError as exc:
                # The decisions stand; only this record of them is lost.
                if not outcome.warnings:
                    outcome.warnings.append(
                        f"cannot append to the record file {config.record}: "
                        f"{exc.strerror or exc}")
    outcome.extra_args = _injection_args(outcome.reports, compiler, config)
    return outcome


def _injection_args(reports, compiler: str, config) -> list[str]:
    """Flags that apply the reports' applied decisions in the final compile."""
    loops = {}
    for report in reports:
        for d in report.result.decisions:
            if d.task == "loop-vectorize" and d.applied:
                loops.setdefault(report.source, {})[d.target] = d.value
    if not loops:
        return []
    from mirecc.vectorize.inject import InjectError, compile_args
    try:
        return compile_args(compiler, loops, config.resolved_cache_dir())
    except InjectError as exc:
        raise MLFailure(str(exc)) from None


def record(path: str, report: TUReport, inv: Invocation, compiler: str) -> None:
    """Append one JSON line for ``report`` to the record file (``record`` in
    .mirecc.yaml, ``MIRECC_RECORD``): what mirecc decided or predicted for the
    TU, readable after ``CC=mirecc make``.  Appended under a lock: safe under
    ``make -j``."""
    import json
    from dataclasses import asdict
    from pathlib import Path

    from mirecc import __version__
    from mirecc.fsutil import append_line_locked

    line = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cwd": os.getcwd(),
        "source": report.source,
        "output": inv.output,
        "language": report.language,
        "opt_level": report.opt_level,
        "ir_sha256": report.bitcode_sha256,
        "compiler": compiler,
        "mirecc_version": __version__,
        "cache": report.cache,
        "decisions": [asdict(d) for d in report.result.decisions],
        "no_decision_reasons": list(report.result.no_decision_reasons),
    }
    append_line_locked(Path(path).expanduser(), json.dumps(line, sort_keys=True))
