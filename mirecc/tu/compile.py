"""The compile of a call the driver classified as one mirecc works on,
from the ML path to the exit status: the driver calls :func:`compile_call`
(a compile whose IR something reads) or :func:`link_call` (a link a task's
link step takes) once, with the call's :class:`~mirecc.tu.context.CompileContext`,
and gets the exit status back.

The steps, each owning what it sets on the context:

1. the ML path (:func:`mirecc.tu.mlpath.run`): direct mode, the front end
   beside the user's own compile, the pipeline, the decisions' flags; any
   failure there gives up (``ctx.give_up``) and the user's command runs;
2. the object (:func:`_compile_split`): the user's own, or the decided
   compile's when its object differs; a kept object on a direct hit;
3. the tasks' build steps (:func:`_verify`, ``CompileStep.verify``);
4. the counters, the direct-mode manifests and the record file
   (:func:`_finish`), and ``--explain``.

Whatever goes wrong, the user's compile runs unchanged, with one warning.
"""
from __future__ import annotations

import os
import sys

from mirecc.frontend.compiler import exec_command, run_command, say
from mirecc.tu import mlpath, stats
from mirecc.tu.context import CompileContext, make_workdir, remove_workdir
from mirecc.util.faults import inject_debug_fault


def compile_call(ctx: CompileContext) -> int:
    """The ML path, then the compile; the exit status.  The work directory
    is made and removed here, outside the ML path's deadline (the alarm may
    interrupt anything inside it); whatever happens, the user's compile
    started in the ML path is stopped and the early work closed."""
    ctx.stdin_data = sys.stdin.buffer.read() if ctx.inv.reads_stdin else None
    ctx.workdir = make_workdir()
    try:
        try:
            return _compile(ctx)
        finally:
            if ctx.own is not None:
                ctx.own.discard()
            if ctx.early is not None:
                ctx.early.close()
    finally:
        remove_workdir(ctx.workdir)


def _exec_final(ctx: CompileContext, extra=()) -> int:
    """The user's command (plus ``extra``) in place of this process; the work
    directory removed first (exec runs no ``finally``)."""
    remove_workdir(ctx.workdir)
    return exec_command(ctx.final + list(extra))


def _compile(ctx: CompileContext) -> int:
    try:
        try:
            mlpath.run(ctx)
        except mlpath.MLFailure as exc:
            ctx.give_up(str(exc), code=exc.code, ir_failed=exc.ir_compile_failed)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the build must survive any bug here
        if os.environ.get("MIRECC_DEBUG"):
            import traceback  # lazy: MIRECC_DEBUG only
            traceback.print_exc()
        ctx.give_up(f"internal error {type(exc).__name__}: {exc} "
                    f"(set MIRECC_DEBUG=1 for a traceback)", code="internal-error")

    config = ctx.config
    warning = None
    if ctx.fallback:
        warning = f"{ctx.fallback}; compiled without mirecc decisions"
    elif ctx.warnings:
        warning = ctx.warnings[0]
    if not config.warnings:
        warning = None

    if ctx.kept_object is not None:
        # an unchanged TU whose object a build step chose: the kept object is
        # the compile's (mirecc.tu.objcache), and its dependency file; nothing runs
        from mirecc.frontend.clang import object_path, user_dep_file
        from mirecc.util.fsutil import atomic_write_bytes
        output = object_path(ctx.inv)
        try:
            if ctx.kept_dep_file is not None:
                atomic_write_bytes(user_dep_file(ctx.expanded, output), ctx.kept_dep_file,
                                   durable=False)
            atomic_write_bytes(output, ctx.kept_object)
            ctx.count("tus.object")
            _finish(ctx)
            return 0
        except OSError as exc:
            if config.warnings:
                say("warning", f"cannot write the kept object to {output}: {exc}; "
                               f"compiled as asked")
            return _exec_final(ctx)
    if ctx.own is not None and ctx.split is None:
        # the ML path gave up after the user's own compile started, or its
        # gates answered: it is the answer
        _finish(ctx)
        rc = _finish_own(ctx, ctx.own, ctx.stdin_data)
        if rc == 0 and ctx.gated_manifest is not None:
            stats.bump(config, mlpath.record_gated(ctx))
        if rc == 0 and warning:
            say("warning", warning)
        return rc
    if ctx.source_may_be_broken:
        # The side IR run failed; if the real compile fails too, the source is
        # broken and clang's own error says it all.  Warn only otherwise.
        _finish(ctx)
        rc = run_command(ctx.final, ctx.stdin_data)
        if rc == 0 and warning:
            say("warning", warning)
        return rc
    if warning:
        say("warning", warning)
    if ctx.split is not None:
        rc = _compile_split(ctx, ctx.extra_args)
        _finish(ctx, compiled_ok=rc == 0)
        return rc
    _finish(ctx)
    if ctx.stdin_data is not None:
        return run_command(ctx.final + ctx.extra_args, ctx.stdin_data)
    return _exec_final(ctx, ctx.extra_args)


def _finish(ctx: CompileContext, compiled_ok: bool = True) -> None:
    """After the compile: count, record and explain what it applied."""
    config = ctx.config
    counts = dict(ctx.counts)
    if ctx.ok:
        counts.update(stats.tu_counts(ctx.reports, split=ctx.split is not None))
    else:
        counts[f"fallback.{ctx.fallback_code}"] = 1
    counts["calls"] = 1
    stats.bump(config, counts)
    if ctx.ok:
        if compiled_ok:
            stats.bump(config, mlpath.record_manifests(ctx))
        problem = mlpath.record_reports(ctx)
        if problem and config.warnings:
            say("warning", problem)
    if ctx.explain:
        try:
            inject_debug_fault("driver-explain")
            from mirecc.tu.explain import show  # lazy: json, which a direct hit never pays
            show(ctx, ctx.inv.reason, to_stderr=ctx.compiler_writes_stdout())
        except Exception as exc:  # noqa: BLE001 - the object is made: only words are lost
            if config.warnings:
                say("warning", f"internal error {type(exc).__name__}: {exc} (set "
                               f"MIRECC_DEBUG=1 for a traceback); no explanation")


def _finish_own(ctx: CompileContext, own, stdin_data: bytes | None = None) -> int:
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
    return run_command(ctx.final, stdin_data)


def _replay(compile_) -> None:
    sys.stderr.buffer.write(compile_.stderr)
    sys.stderr.flush()


def _compile_split(ctx: CompileContext, extra: list[str]) -> int:
    """The object of a compile whose IR the ML path read.  Without decision
    flags (``extra``): the user's own compile (started beside the ML path).
    With them: the user's command again with the flags; when its object
    equals the user's, the decisions changed nothing (the compiler's own
    choice): the user's object stands and no decision counts as applied.
    A decided compile that fails or prints more than the user's leaves the
    user's object, with one warning."""
    own = ctx.own
    if not extra:
        rc = _finish_own(ctx, own)
        if rc == 0:
            _verify(ctx, extra)
        return rc
    decided = ctx.split.start_own(extra, tag="decided")
    try:
        decided_ok, own_ok = decided.wait(), own.wait()
        if decided_ok and own_ok and decided.object_bytes() == own.object_bytes():
            mlpath.mark_unchanged(ctx)
            ctx.count("tus.unchanged")
            decided.discard()
            return _compile_split(ctx, [])
        if decided_ok and decided.accept():
            own.discard()
            _replay(decided)
            mlpath.attribute(ctx, extra)
            _verify(ctx, extra)
            return 0
    finally:
        decided.discard()
    ctx.count("fallback.decided-failed")
    mlpath.mark_unchanged(ctx, same=False)
    rc = _finish_own(ctx, own)
    if rc == 0 and ctx.config.warnings:
        say("warning", "the compile with mirecc's decisions failed; compiled as asked, "
                       "without them")
    return rc


def _verify(ctx: CompileContext, extra: list[str]) -> None:
    """The build step of tasks that verify their decisions (``CompileStep.verify``:
    code size builds candidates and keeps the smallest object), after the
    user's object is made.  Whatever fails, that object stands, with one
    warning."""
    for report in ctx.reports:
        if not report.applied:
            continue
        for decision in report.result.decisions:
            step = mlpath.build_step(decision.task) if decision.applied else None
            if step is None:
                continue
            try:
                verified = step.verify(
                    decision, report, ctx.split, extra,
                    os.path.dirname(ctx.split.bitcode_path), ctx.config)
            except Exception as exc:  # noqa: BLE001 - the user's object stands
                ctx.count("fallback.verify-failed")
                if ctx.config.warnings:
                    say("warning", f"{decision.task}: verifying candidates failed: {exc}; "
                                   f"kept the object of the user's level")
                continue
            ctx.verified[decision.task] = verified
            for name, n in stats.verified_counts(decision.task, verified, report,
                                                 ctx.split.early).items():
                ctx.count(name, n)


def link_call(ctx: CompileContext, name: str, step) -> int:
    """The user's link, run by task ``name``'s link ``step`` (which may
    build candidates beside it and replace the output by a smaller one); a
    step that fails leaves the user's output, with one warning."""
    config, inv = ctx.config, ctx.inv
    ran = []

    def own_link() -> int:
        if not ran:
            ran.append(run_command(ctx.final, None))
        return ran[0]

    counts = {"calls": 1}
    try:
        rc, step_counts, done = step.link(ctx.final, inv.output or "a.out", config, own_link)
        counts.update(step_counts)
        if done is not None:
            ctx.verified[name] = done
    except Exception as exc:  # noqa: BLE001 - the build must survive any bug here
        rc = own_link()         # the user's link, if the step had not run it
        if rc == 0:
            counts[f"links.{name}"] = counts[f"links.{name}.failed"] = 1
            if config.warnings:
                say("warning", f"{name}: the link step failed ({type(exc).__name__}: {exc}); "
                               f"the link is clang's")
    stats.bump(config, counts)
    if ctx.explain:
        from mirecc.tu.explain import show  # lazy: as in _finish
        show(ctx, inv.reason, to_stderr=False)
    return rc
