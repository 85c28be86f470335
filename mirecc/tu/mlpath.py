"""The guarded ML step: emit each TU's IR, run the pipeline, collect decisions
into the call's :class:`~mirecc.tu.context.CompileContext`.

Everything here may fail; :mod:`mirecc.tu.compile` catches ``MLFailure``
(and anything else) and falls back to the user's exact compile with one
warning.  Nothing
here touches the user's outputs except the dependency file of a split
compile's front end (:mod:`mirecc.frontend.clang`), which clang would write the
same.  This module imports no task by name: tasks come from the registry.
"""

from __future__ import annotations

import _signal as signal   # not signal: it builds its enums at import, ~10 ms a compile
import os
import sys
import time

from mirecc import __version__
from mirecc.frontend import clang as frontend
from mirecc.frontend.cmdline import Invocation, Source
from mirecc.taskapi.api import HeadError
from mirecc.taskapi.records import TURequest, TUResult
from mirecc.taskapi.registry import (default_heads_dirs, has_use, heads_for_languages,
                                     spec_task, task)
from mirecc.tu import objcache, stats
from mirecc.tu.cache import CacheError, ResultCache, pipeline_key
from mirecc.tu.context import CompileContext
from mirecc.tu.direct import Manifests, manifest_key
from mirecc.util.faults import inject_debug_fault
from mirecc.util.fsutil import append_line_locked, sha256

class TUReport:
    """What the ML path saw and decided for one TU.  ``result`` is a
    TUResult; a direct-mode hit gives a :class:`mirecc.tu.direct.Entry`
    instead, whose JSON is parsed only when ``result`` is read (``decided``,
    ``applied`` and ``reason_codes``, which every call counts, come
    without it)."""

    def __init__(self, source: str, language: str, opt_level: str, bitcode_sha256: str,
                 bitcode_bytes: int, result, cache: str,
                 captured: str | None = None, where: str = ""):
        self.source = source
        self.language = language
        self.opt_level = opt_level
        self.bitcode_sha256 = bitcode_sha256
        self.bitcode_bytes = bitcode_bytes
        self._result = result
        self.cache = cache              # "hit", "miss", "off" or "unwritable"
        self.captured = captured        # path of the stored IR in capture mode
        self.where = where              # "server", "in process", "cache" or "direct"
        self.object_key = None          # direct: the kept object's key (mirecc.tu.objcache)
        self.object_sha256 = None       # and its digest
        self.hit_counts = None          # direct: the counters its manifest lists

    @property
    def result(self) -> TUResult:
        if not isinstance(self._result, TUResult):      # a direct-mode entry
            from mirecc.util.jsonread import loads      # lazy: only a direct hit reads it
            self._result = TUResult.from_dict(loads(self._result.result_json))
        return self._result

    @result.setter
    def result(self, value: TUResult) -> None:
        self._result = value

    # a TUResult's or a direct-mode entry's, without parsing the entry
    @property
    def decided(self) -> bool:
        return self._result.decided

    @property
    def applied(self) -> bool:
        return self._result.applied

    @property
    def reason_codes(self) -> list[str]:
        return list(self._result.reason_codes)


class PendingManifest:
    """A direct-mode manifest to write once the compile has ended
    (:mod:`mirecc.tu.direct`): where (``manifests``, ``key``), the files the
    front end read (``dep_file``), the ``source`` and when its front end
    ``started``, the TU's ``report`` (None for a TU whose gates answered: its
    object is the answer), the bitcode's ``sha`` and ``size``, the
    ``compiler``, the ``output`` object and the user's own dependency file
    (``user_dep``, kept with the object; None when the command writes none)."""

    __slots__ = ("manifests", "key", "dep_file", "source", "started", "report", "sha",
                 "size", "compiler", "output", "user_dep")

    def __init__(self, manifests, key: str, dep_file: str, source: str, started: int,
                 compiler: str, output: str, user_dep: str | None, report=None,
                 sha: str | None = None, size: int | None = None):
        self.manifests, self.key, self.dep_file = manifests, key, dep_file
        self.source, self.started, self.compiler = source, started, compiler
        self.output, self.user_dep = output, user_dep
        self.report, self.sha, self.size = report, sha, size


def _pending(ctx: CompileContext, source: str, started: int, dep_file: str, output: str,
             user_dep: str | None, **result) -> PendingManifest:
    """A manifest of the call's TU to write after the compile."""
    return PendingManifest(ctx.manifests, ctx.manifest_key, dep_file, source, started,
                           ctx.compiler, output, user_dep, **result)


class MLFailure(Exception):
    """The ML path gave up; ``str()`` is the one-line reason for the warning.

    ``ir_compile_failed`` marks a failure of the IR run, which most often
    means the source itself does not compile: clang's final compile will then
    report the error, and mirecc's warning would only be noise.  ``code`` is
    the reason code ``mire stats`` counts.
    """

    def __init__(self, reason: str, ir_compile_failed: bool = False, code: str = "ml-failed"):
        super().__init__(reason)
        self.ir_compile_failed = ir_compile_failed
        self.code = "ir-failed" if ir_compile_failed else code


class MLTimeout(BaseException):
    """Raised by the alarm; a BaseException so no handler on the way swallows it."""


class deadline:
    """``with deadline(seconds):`` raises MLTimeout in the main thread after
    ``seconds`` (wall clock).  (``_signal``, the C module under signal:
    signal builds its enums at import, ~10 ms of every compile.)"""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.previous = None

    def __enter__(self):

        def on_alarm(signum, frame):
            raise MLTimeout()

        self.previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc_info):

        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)
        return False


def _short(cmd: list[str], workdir: str) -> list[str]:
    """``cmd``, through a response file when it is too long for exec."""
    if sum(len(a) for a in cmd) > 100_000:  # stay under ARG_MAX: use a response file
        rsp = os.path.join(workdir, "args.rsp")
        with open(rsp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write("\n".join('"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"'
                               for a in cmd[1:]))
        cmd = [cmd[0], "@" + rsp]
    return cmd


def _run_ir_command(cmd: list[str], source: Source, workdir: str, stdin_data):
    import subprocess   # lazy: ~15 ms (signal, enum), a side run only

    cmd = _short(cmd, workdir)
    try:
        return subprocess.run(cmd, input=stdin_data if source.is_stdin else None,
                              stdin=None if source.is_stdin else subprocess.DEVNULL,
                              capture_output=True)
    except OSError as exc:
        raise MLFailure(f"cannot run {cmd[0]} to emit IR: {exc}") from None


class EarlyFrontEnd:
    """Work started beside the user's own compile, before the gates have
    read its object, in a job slot known to be free (:func:`_start_early`):
    the split compile's front end, then the first step of the gated task's
    build step (``CompileStep.early``: code size's first candidate).  What a gate
    or the build step does not take is stopped: ``close()`` stops what
    still runs and gives the slot back."""

    def __init__(self, child, slot):
        self.child, self.slot = child, slot
        self.step = None            # (key, Child, output) of the task's early step
        self.taken = False          # the build step took its output

    def start_step(self, early, split, config, workdir: str, own) -> None:
        """Once the front end has written the bitcode, while the user's own
        compile (``own``, a Child) still runs: start ``early`` (a task's
        ``CompileStep.early``) in the slot, its commands one after the other."""

        while self.child.poll() is None:
            if own.poll() is not None:
                return      # the user's compile ended first: nothing left to overlap
            time.sleep(0.002)
        if self.child.returncode != 0 or own.poll() is not None:
            return
        try:
            planned = early(split, config, workdir)
        except Exception:   # noqa: BLE001 - nothing early: the build step builds it
            return
        if planned is None:
            return
        key, commands, output = planned
        # (quoted here: shlex imports re, ~12 ms)
        script = " && ".join(" ".join("'" + a.replace("'", "'\\''") + "'" for a in cmd)
                             for cmd in commands)
        try:
            self.step = (key, frontend.spawn(["/bin/sh", "-c", script],
                                    os.path.join(workdir, "early"), group=True), output)
        except OSError:
            pass

    def take(self, key: str, timeout: float) -> str | None:
        """The early step's output for ``key`` once it has ended well (waited
        for, at most ``timeout`` seconds); None when it built something else,
        failed or ran over."""
        if self.step is None or self.step[0] != key:
            return None
        _, child, output = self.step
        until = time.monotonic() + timeout
        while child.poll() is None:
            if time.monotonic() > until:
                child.kill()
                return None
            time.sleep(0.005)
        self.taken = child.returncode == 0 and os.path.isfile(output)
        return output if self.taken else None

    def close(self) -> None:
        for child in (self.child, self.step and self.step[1]):
            try:
                if child:
                    child.kill()
            except OSError:
                pass
        self.slot.close()


def _start_early(split, workdir: str) -> EarlyFrontEnd | None:
    """The front end of ``split`` started now, when a job slot is free
    beside this one (:func:`mirecc.util.jobserver.spare_slot`); else None (it
    runs after the gates, if they want the IR)."""
    if "MAKEFLAGS" not in os.environ:
        return None         # no make (configure, ninja, a shell): no module to import
    from mirecc.util.jobserver import spare_slot  # lazy: under make only

    slot = spare_slot()
    if slot is None:
        return None
    try:
        child = frontend.spawn(_short(split.frontend_command(), workdir),
                      os.path.join(workdir, "front-end"))
    except OSError:
        slot.close()
        return None
    return EarlyFrontEnd(child, slot)


def _early_step(gates: dict):
    """The early step (``CompileStep.early``) of the first gated task with one."""
    for name in sorted(gates):
        if gates[name].has("early"):
            return gates[name].early
    return None


def emit_ir(cmd: list[str], source: Source, out: str, workdir: str,
            stdin_data: bytes | None, started: EarlyFrontEnd | None = None):
    """Run ``cmd`` (clang's front end writing ``source``'s bitcode to
    ``out``), or wait for it when ``started`` runs it; return (bitcode, the
    front end's stderr)."""
    if started is not None:
        started.child.wait()
        proc = started.child
    else:
        proc = _run_ir_command(cmd, source, workdir, stdin_data)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.decode(errors="replace").splitlines()
                      if "error" in ln), "no error message")
        raise MLFailure(f"emitting IR for {source.path} failed: {first.strip()}",
                        ir_compile_failed=True)
    try:
        with open(out, "rb") as fh:
            return fh.read(), proc.stderr
    except OSError:
        raise MLFailure(f"emitting IR for {source.path}: clang succeeded but wrote no "
                        f"bitcode (a flag in the command overrides -emit-llvm?)") from None


def _check_plugin(config) -> None:
    if config.plugin and not os.path.isfile(config.plugin):
        raise MLFailure(f"pass plugin not found: {config.plugin}")


def run(ctx: CompileContext) -> None:
    """Run the ML path for every C/C++/OpenCL source of the call within the
    timeout, filling ``ctx`` (a user's compile started here is stopped by
    the caller whatever happens).  ``ctx.workdir`` (made and removed by the
    caller, outside the deadline) holds the bitcode, which a split
    compile's back end reads.

    Direct mode (:mod:`mirecc.tu.direct`) is tried first, outside the deadline
    and before anything that a hit does not need is imported: it only reads
    files."""

    config, inv = ctx.config, ctx.inv
    _check_plugin(config)
    languages = {s.language for s in inv.sources if s.language in ctx.front.languages}
    ctx.version = pipeline_key(config, languages)
    # direct mode replays a cached result without the IR a profile is matched on
    if ctx.split_blocked is None and config.cache and not ctx.explain \
            and not config.capture_dir and not config.profile:

        ctx.manifests = Manifests(config.cache_root())
        ctx.manifest_key = manifest_key(ctx.compiler, ctx.expanded, ctx.version)
        report = _direct_hit(ctx)
        if report is not None and report.object_key:
            # its object was a build step's choice: only the kept object will do
            # (a manifest names one only then: no result to parse here)
            ctx.kept_object, ctx.kept_dep_file = _kept_object(report, ctx.expanded, config)
            if ctx.kept_object is None:
                report = None
        if report is not None:
            ctx.reports.append(report)
            ctx.extra_args = injection_args(ctx.reports, ctx.compiler, config)
            return
        if getattr(config, "store", None) and _known_plain(ctx, languages):
            return      # the user's command as it is (mirecc.tu.travel)
    try:
        with deadline(config.timeout):
            _run(ctx)
    except MLTimeout:
        raise MLFailure(f"timed out after {config.timeout:g} s "
                        f"(timeout / MIRECC_TIMEOUT)", code="timeout") from None


def _run(ctx: CompileContext) -> None:
    """The ML path after a direct-mode miss: each TU's IR read (beside the
    user's own compile where the compile can be split), its result found or
    computed, and the flags that apply the decisions."""
    inject_debug_fault("ml")
    cache = None        # made after the gate: pathlib costs ~5 ms a probe need not pay
    for number, source in enumerate(ctx.inv.sources):
        if source.language not in ctx.front.languages:
            continue
        bc_path = os.path.join(ctx.workdir, f"tu{number}.bc")
        started = time.time_ns()
        if ctx.split_blocked is None:
            bitcode = _split_front_end(ctx, number, source, bc_path, started)
            if bitcode is None:
                return          # the gates answered: no IR is read
        else:
            command = ctx.front.ir_command(ctx.compiler, ctx.inv, source, bc_path)
            bitcode, _ = emit_ir(command, source, bc_path, ctx.workdir, ctx.stdin_data)
        if cache is None and ctx.config.cache:

            cache = ResultCache(ctx.config.resolved_cache_dir())
        report = _tu_report(ctx, source, bc_path, bitcode, cache)
        split = ctx.split
        dep_file = split.dependency_file() if split else None
        # written after the compile (record_manifests), which finds out
        # whether the applied decisions change the object; a TU whose object
        # a build step chooses gets its object kept, and the user's
        # dependency file with it (mirecc.tu.objcache)
        if ctx.manifests is not None and dep_file and report.cache in ("hit", "miss"):
            ctx.pending.append(_pending(
                ctx, source.path, started, dep_file, split.output,
                split.user_dep_file() if split.writes_dep_file else None,
                report=report, sha=report.bitcode_sha256, size=len(bitcode)))
        ctx.reports.append(report)
    ctx.extra_args = injection_args(ctx.reports, ctx.compiler, ctx.config)


def _split_front_end(ctx: CompileContext, number: int, source: Source, bc_path: str,
                     started: int) -> bytes | None:
    """The user's own compile started on another core and the TU's bitcode
    read beside it (a split compile: the compiler's
    :meth:`~mirecc.frontend.compiler.Compiler.split`); None when every gate
    said its build step cannot pay on the user's own object: that object is
    the answer, and no IR is read."""

    config, args = ctx.config, ctx.expanded
    split = ctx.front.split(ctx.compiler, args, ctx.inv, bc_path, color=sys.stderr.isatty(),
                           private_dep_file=os.path.join(ctx.workdir, f"tu{number}.d"),
                           launcher=config.prefix)
    gates = _gates(ctx)
    # where a gate may answer in direct mode, the own compile lists the files
    # it reads, for the manifest that keeps its object: into a private file,
    # or the user's own -MD file (every header; -MMD's leaves out the system
    # ones: no object kept then)
    own_dep = user_dep = None
    if gates and ctx.manifests is not None:
        if not split.writes_dep_file:
            own_dep = os.path.join(ctx.workdir, f"own{number}.d")
        elif "-MMD" not in args:
            user_dep = split.user_dep_file()
    # the user's own compile, on another core, while the IR is read
    ctx.own = split.start_own(("-MD", "-MF", own_dep) if own_dep else ())
    # with gates the IR is read after they have seen the object, unless a job
    # slot is free now: then it is read meanwhile, and thrown away if they
    # say no (the build step's first candidate after it); the caller closes it
    early = ctx.early = _start_early(split, ctx.workdir) if gates else None
    if early is not None:
        step = _early_step(gates)
        if step:
            early.start_step(step, split, config, ctx.workdir, ctx.own.child)
    gated = _gated(gates, ctx.own, config)
    if gated:
        # every head's build step said it cannot pay on this object: the
        # user's own compile is the answer, no IR is read
        if early is not None:
            early.close()
        ctx.counts.update(gated)
        if own_dep or user_dep:
            ctx.gated_manifest = _pending(ctx, source.path, started, own_dep or user_dep,
                                          split.output, user_dep)
        return None
    ctx.split = split
    split.early = early
    bitcode, _ = emit_ir(split.frontend_command(), source, bc_path, ctx.workdir,
                         ctx.stdin_data, started=early)
    return bitcode


def _tu_report(ctx: CompileContext, source: Source, bc_path: str, bitcode: bytes,
               cache) -> TUReport:
    """The TU's report: its bitcode captured where asked, its result from the
    result cache or the pipeline (what ``--explain`` adds cached apart), and
    a decisions profile's entries applied over it."""
    config, inv = ctx.config, ctx.inv
    sha = sha256(bitcode).hexdigest()
    report = TUReport(source.path, source.language, inv.opt_level or "0",
                      sha, len(bitcode), TUResult(None), "off")
    if config.capture_dir:
        from mirecc.tu.capture import CaptureError, capture  # lazy: capture mode only
        try:
            report.captured = str(capture(
                config.capture_dir, bitcode, sha, source=source.path,
                language=source.language, opt_level=report.opt_level,
                flags=list(inv.ir_flags), compiler=ctx.compiler))
        except CaptureError as exc:
            raise MLFailure(str(exc)) from None

    request = TURequest(source.path, source.language, report.opt_level,
                        tuple(inv.ir_flags), os.path.abspath(bc_path), sha, ctx.compiler,
                        os.getcwd())
    # flags that change the optimisation pipeline but not the front end's IR
    # (so not the sha) must still tell cached results apart
    level = " ".join([report.opt_level] + [f for f in inv.ir_flags
                                           if f in ctx.front.pipeline_only_flags])
    _find_result(ctx, report, request, cache, level)
    if config.profile:
        from mirecc.taskapi.profile import ProfileError, apply_profile  # lazy: re
        try:
            report.result = apply_profile(report.result, request, config.profile)
        except (ProfileError, OSError) as exc:
            raise MLFailure(str(exc), code="bad-profile") from None
    return report


def _find_result(ctx: CompileContext, report: TUReport, request: TURequest, cache,
                 level: str) -> None:
    """``report``'s result: the cached one, else the pipeline's (cached now);
    with ``--explain``, what the tasks add for it, cached under its own key."""

    key = ResultCache.key(report.bitcode_sha256, ctx.version, level)
    # --explain's additions are cached apart: a build reads less
    explain_key = ResultCache.key(report.bitcode_sha256, ctx.version + "|explain", level)
    cached = cache.get(explain_key) if cache and ctx.explain else None
    explained = cached is not None
    if cached is None and cache:
        cached = cache.get(key)
    if cached is not None and (cached.summary or not ctx.explain):
        report.result, report.cache, report.where = cached, "hit", "cache"
    else:
        report.result, report.where = run_pipeline(request, ctx.config, bool(ctx.explain),
                                                   ctx.version)
        report.cache = "miss" if cache else "off"
        if cache:
            try:
                cache.put(key, report.result)
            except CacheError as exc:
                # The result is still valid; only its reuse is lost.
                report.cache = "unwritable"
                if not ctx.warnings:
                    ctx.warnings.append(str(exc))
    if ctx.explain and not explained:
        result = explain_decisions(report.result, request)
        if cache and result is not report.result and report.cache != "unwritable":
            try:
                cache.put(explain_key, result)
            except CacheError:
                pass
        report.result = result


def _gates(ctx: CompileContext) -> dict:
    """task name -> its compile step (whose ``CompileStep.gate`` answers), when
    every head with a use in this compile belongs to a task with a gate; else {}
    (the IR is read as usual).  Never with --explain, a record, a capture or
    a decisions profile: they want the IR."""
    config, inv = ctx.config, ctx.inv
    if ctx.explain or config.record or config.capture_dir or config.profile:
        return {}

    languages = {s.language for s in inv.sources if s.language in ctx.front.languages}
    gates = {}
    for spec in heads_for_languages(default_heads_dirs(config), languages):
        if has_use(spec, config, inv.opt_level or "0"):
            step = build_step(spec_task(spec.spec_path) or "", "gate")
            if step is None:
                return {}
            gates[spec_task(spec.spec_path)] = step
    return gates


def build_step(name: str, method: str = "verify"):
    """Task ``name``'s compile step when it has ``method`` (``verify``: a
    build step after a split compile's object; ``gate``, ``early``), else
    None."""
    declared = task(name)
    if declared is None or not declared.has("compile_step"):
        return None
    step = declared.compile_step()
    return step if step is not None and step.has(method) else None


def _gated(gates: dict, own, config) -> dict:
    """Wait for the user's own compile and ask the ``gates``
    (:func:`_gates`); their counters (``verified.<task>.not-searched`` and
    the reason) when each gave a reason, else {} (the IR is read)."""
    if not gates or not _wait_untimed(own):
        return {}
    counts = {}
    for name, step in sorted(gates.items()):
        try:
            reason = step.gate(own.temp, config, own.split.compiler)
        except Exception:   # noqa: BLE001 - a gate never breaks the build: read the IR
            return {}
        if not reason:
            return {}
        counts[f"verified.{name}"] = counts[f"verified.{name}.not-searched"] = 1
        counts[f"verified.{name}.{reason}"] = 1
    return counts


def _wait_untimed(own) -> bool:
    """``own.wait()`` with the ML path's deadline paused: the user's own
    compile takes what it takes (sqlite3.c: a minute) and is not the ML
    path's time."""

    left, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        return own.wait()
    finally:
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left)


def _direct_hit(ctx: CompileContext) -> TUReport | None:
    """The report of the call's one source from its manifest, when every
    file the front end read last time is unchanged."""
    entry = ctx.manifests.lookup(ctx.manifest_key)
    if entry is None:
        return None
    source = ctx.inv.sources[0]
    report = TUReport(source.path, source.language, ctx.inv.opt_level or "0",
                      entry.bitcode_sha256, entry.bitcode_bytes, entry, "hit",
                      where="direct")
    report.object_key, report.object_sha256 = entry.object_key, entry.object_sha256
    report.hit_counts = entry.hit_counts
    if report.applied or ctx.config.record:   # the result is read now: damaged is a miss
        try:
            report.result
        except Exception:  # noqa: BLE001
            return None
    return report


def _known_plain(ctx: CompileContext, languages) -> bool:
    """Does the team store know the call's TU to need nothing, its files
    unchanged (:mod:`mirecc.tu.travel`)?  Keeps the call's entry on the
    context (CI writes it after the compile) and counts the asks."""
    # here: only a build that names a team store loads it (~0.6 ms of any other)
    from mirecc.store.team import team_store
    from mirecc.tu.travel import Plain

    try:
        plain = Plain(team_store(ctx.config), ctx.compiler, ctx.expanded,
                      ctx.inv.sources[0].path, ctx.config, languages, ctx.version)
        known = plain.known()
    except Exception:  # noqa: BLE001 - the store is a shortcut: the path goes on
        return False
    ctx.counts.update(plain.team.counts)
    plain.team.counts = {}
    if known:
        ctx.counts["tus.from-store"] = 1
    elif plain.team.write:
        ctx.plain = plain
    return known


def _publish_plain(ctx: CompileContext, source: str, dep_file: str, started: int) -> dict:
    """CI: the store learns that this TU's object is the user's own; the
    store's counters of it."""
    try:
        ctx.plain.publish(source, dep_file, started)
    except Exception:  # noqa: BLE001 - only the store's shortcut is lost
        pass
    counts, ctx.plain.team.counts = ctx.plain.team.counts, {}
    return counts


def _kept_object(report: TUReport, args: list[str], config):
    """(object, dependency file or None) a direct hit's manifest names, when
    still kept; (None, None) when not, or when the command writes a
    dependency file and none was kept with the object."""

    kept = objcache.ObjectCache(config.cache_root(), config.object_cache_mb)
    data = kept.get(report.object_key, report.object_sha256)
    if data is None or not frontend.writes_dep_file(args):
        return data, None
    dep = kept.dependency_file(report.object_key, report.object_sha256)
    return (data, dep) if dep is not None else (None, None)


def verifies(report: TUReport) -> bool:
    """Does an applied decision of ``report`` have a build step
    (``CompileStep.verify``)?  It needs the front end's bitcode, which a direct-mode
    hit skips: such a TU gets a manifest only with its kept object
    (:mod:`mirecc.tu.objcache`)."""
    return any(d.applied and build_step(d.task) is not None for d in report.result.decisions)


def record_manifests(ctx: CompileContext) -> dict:
    """Write the direct-mode manifests of the call's TUs, with their results
    as the compile left them (decisions that changed nothing not applied).
    A TU whose object a build step chose gets one only when every such step
    succeeded and its object is kept (:mod:`mirecc.tu.objcache`); a TU whose
    gates answered gets one from :func:`record_gated`.  CI also writes the
    team store's plain entries (:mod:`mirecc.tu.travel`); the store's
    counters of that are returned."""
    counts: dict = {}
    config = ctx.config
    for pending in ctx.pending:
        report = pending.report
        if ctx.plain is not None:     # a build that names a team store (_known_plain)
            from mirecc.tu.travel import is_plain  # lazy: as in _known_plain

            if is_plain(report, ctx.verified):
                counts.update(_publish_plain(ctx, pending.source, pending.dep_file,
                                             pending.started))
        object_key = object_sha256 = None
        if verifies(report):
            steps = {d.task for d in report.result.decisions
                     if d.applied and build_step(d.task) is not None}
            if not steps <= set(ctx.verified):
                continue            # a build step failed: the object is not its choice
            object_key = objcache.object_key(pending.key, pending.sha, pending.compiler)
            kept = objcache.ObjectCache(config.cache_root(), config.object_cache_mb)
            object_sha256 = kept.put(object_key, pending.output, pending.user_dep)
            if object_sha256 is None:
                continue
        pending.manifests.record(pending.key, pending.dep_file, pending.source,
                                 pending.started, report.result, pending.sha, pending.size,
                                 stats.report_counts(report, where="direct"),
                                 object_key=object_key, object_sha256=object_sha256)
    return counts


def record_gated(ctx: CompileContext) -> dict:
    """Keep the object of a TU whose gates answered (:func:`_gated`), once
    the user's own compile has put it in place, and write its manifest: a
    rebuild of the unchanged TU copies it.  It has no decision and no
    bitcode: the manifest's ``bitcode`` line holds the object's digest.
    CI also writes its plain entry; the store's counters of that are
    returned."""

    config, pending = ctx.config, ctx.gated_manifest
    counts = _publish_plain(ctx, pending.source, pending.dep_file, pending.started) \
        if ctx.plain is not None else {}
    try:
        with open(pending.output, "rb") as fh:
            data = fh.read()
    except OSError:
        return counts
    sha = sha256(data).hexdigest()
    kept = objcache.object_key(pending.key, sha, pending.compiler)
    digest = objcache.ObjectCache(config.cache_root(), config.object_cache_mb).put(
        kept, pending.output, pending.user_dep)
    if digest is not None:
        result = TUResult(None)
        hit = stats.report_counts(TUReport(pending.source, "", "", sha, len(data), result,
                                           "hit"), where="direct")
        pending.manifests.record(pending.key, pending.dep_file, pending.source,
                                 pending.started, result, sha, len(data), hit,
                                 object_key=kept, object_sha256=digest)
    return counts


def record_reports(ctx: CompileContext) -> str | None:
    """Append the reports to the record file (``record``), once the compile
    knows which decisions changed the object; the warning when it cannot."""
    config = ctx.config
    if not config.record:
        return None
    for report in ctx.reports:
        try:
            record(config.record, report, ctx.inv, ctx.compiler)
        except OSError as exc:
            # The decisions stand; only this record of them is lost.
            return f"cannot append to the record file {config.record}: {exc.strerror or exc}"
    return None


def mark_unchanged(ctx: CompileContext, same: bool = True) -> None:
    """The decision flags left the object as the user's own (``same``: the
    compiler made the same choice), or their compile failed: no decision
    applied through them changed the build."""

    def flagged(d) -> bool:   # applied through the compile's flags (not a build step)
        declared = task(d.task)
        return d.applied and declared is not None and declared.has("injection")

    for report in ctx.reports:
        if report.applied:
            report.result = report.result.replace(decisions=[
                d.replace(applied=False, same_as_compiler=same) if flagged(d) else d
                for d in report.result.decisions])


def attribute(ctx: CompileContext, extra: list[str]) -> None:
    """The decided compile changed the object: when more than one decision
    went in through its flags, each task whose head can tell (its head
    class's ``attribute(decisions, split, extra)``) says which of its own
    changed the build.  Whatever fails, they all
    stay applied; so do they when the tasks' answers would leave none."""

    def flagged_by(d) -> bool:   # applied through the compile's flags
        return d.applied and task(d.task) is not None and task(d.task).has("injection")

    for report in ctx.reports:
        decisions = report.result.decisions
        flagged = [d for d in decisions if flagged_by(d)]
        if len(flagged) < 2:
            continue
        new = list(decisions)
        for name in sorted({d.task for d in flagged}):
            try:
                head = task(name).head_class()
                if not hasattr(head, "attribute"):
                    continue
                new = head.attribute(new, ctx.split, extra)
            except Exception:   # noqa: BLE001 - an attribution never breaks the build
                return
        if any(flagged_by(d) for d in new):
            report.result = report.result.replace(decisions=new)


def run_pipeline(request: TURequest, config, explain: bool,
                 version: str) -> tuple[TUResult, str]:
    """The TU's result from the per-user server (started when none answers),
    else computed in this process; and where it was computed.  ``version``
    is the pipeline key (:func:`mirecc.tu.cache.pipeline_key`) the caller has."""
    from mirecc.util.modelfiles import ModelError  # lazy: hashlib, json, dataclasses

    if config.server:
        from mirecc.tu import server  # lazy: json, socket, subprocess

        reply = server.run_pipeline(request, config, explain, version)
        if reply.get("ok"):
            return TUResult.from_dict(reply["result"]), "server"
        if "error" in reply:
            raise MLFailure(reply["error"])
    try:
        from mirecc.tu.pipeline import run_in_process  # lazy: the heads, ONNX Runtime

        return run_in_process(request, config, explain, version), "in process"
    except (ModelError, HeadError) as exc:
        raise MLFailure(str(exc)) from None


def explain_decisions(result: TUResult, request: TURequest) -> TUResult:
    """The result with what each task adds for ``--explain`` only (each
    task's ``explain`` gets the TU's context: its IR read once for all)."""
    from mirecc.taskapi.context import TUContext  # lazy: the IR readers, --explain only

    ctx = TUContext(request, None, where="explain")
    for name in sorted({d.task for d in result.decisions}):
        declared = task(name)
        if declared is not None and declared.has("explain"):
            result = declared.explain(result, ctx)
    return result


def injection_args(reports, compiler: str, config) -> list[str]:
    """Flags that apply the reports' applied decisions in the final compile.
    Tasks whose ``Task.injection`` is the same function (one pass plugin,
    one decisions file) get one call with all their decisions; a task whose
    injection is a tuple of functions has its decisions in the call of each."""

    by_inject: dict = {}        # function -> {source: decisions}
    tasks_of: dict = {}         # function -> task names
    for report in reports:
        if not report.applied:
            continue
        for d in report.result.decisions:
            declared = task(d.task)
            if d.applied and declared is not None and declared.has("injection"):
                injects = declared.injection()
                for inject in injects if isinstance(injects, tuple) else (injects,):
                    by_inject.setdefault(inject, {}).setdefault(report.source, []).append(d)
                    tasks_of.setdefault(inject, set()).add(d.task)
    args = []
    for spec, by_source in sorted(by_inject.items(),
                                  key=lambda item: f"{item[0].__module__}.{item[0].__qualname__}"):
        try:
            args += spec(by_source, compiler, config)
        except Exception as exc:  # noqa: BLE001 - a task's injection must not break a build
            names = ", ".join(sorted(tasks_of[spec]))
            raise MLFailure(f"{names}: cannot inject its decisions: {exc}") from None
    return args


def append_record(path: str, fields: dict) -> None:
    """Append one JSON line to the record file (``record`` in .mirecc.yaml,
    ``MIRECC_RECORD``): ``fields`` with the time, the working folder and
    mirecc's version every line carries.  Appended under a lock: safe under
    ``make -j``.  ``mirecc-nvcc`` writes its CUDA sources' lines through it
    too (with ``front_end``: a line without one is ``mirecc``'s)."""
    import json     # lazy: the record file only (a direct hit reads JSON without it)
    from pathlib import Path

    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cwd": os.getcwd(),
            "mirecc_version": __version__, **fields}
    append_line_locked(Path(path).expanduser(), json.dumps(line, sort_keys=True))


def record(path: str, report: TUReport, inv: Invocation, compiler: str) -> None:
    """Append one line for ``report`` to the record file
    (:func:`append_record`): what mirecc decided or predicted for the TU,
    readable after ``CC=mirecc make``."""
    append_record(path, {
        "source": report.source,
        "output": inv.output,
        "language": report.language,
        "opt_level": report.opt_level,
        "ir_sha256": report.bitcode_sha256,
        "compiler": compiler,
        "cache": report.cache,
        "decisions": [d.to_dict() for d in report.result.decisions],
        "no_decision_reasons": list(report.result.no_decision_reasons),
        "reason_codes": list(report.result.reason_codes),
    })
