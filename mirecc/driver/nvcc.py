"""``mirecc-nvcc``: a drop-in for nvcc.

    mirecc-nvcc [--explain[=json]] [nvcc arguments...]

The build is nvcc's own: its arguments, outputs, messages and exit code
are untouched unless a decision is made, and then the only difference is
the decision.  What mirecc adds is the device side's IR: for each CUDA
source of a compile, clang's CUDA mode emits the device IR (``-x cuda
--cuda-device-only -emit-llvm``, the IR as clang emits it, as for C), which
is read through the same per-TU context as any other TU (:func:`device_context`:
one read, one graph, the configured encoder), and ``--explain`` lists each
kernel with its thread-block shape.  The decisions are the CUDA tasks'
(the registry's tasks of language ``cuda``; the task's compile step,
``Task.compile_step()``, plans the launches that the front end found:
:mod:`mirecc.frontend.launches`, :mod:`mirecc.frontend.knobs`): today a kernel's block shape from a
decisions profile's entries, where the launch is tunable
(:mod:`mirecc.tasks.cuda_block.launches`), or the block-shape head's with
``apply_cuda_block`` (the head reads the device IR only when its shape is
applied, explained or recorded).  Calls are
counted in ``mire stats`` (``cuda.compiles``, ``cuda.applied``).  With
``MIRECC_RECORD`` each CUDA source compiled is a line of the record file,
its tunable kernels' block shapes and digests the decisions (what ``mire
tune`` tries, building through this front end).  Any failure on mirecc's
side is one warning and nvcc's plain build.

nvcc is found as ``$MIRECC_NVCC``, else the one of the pip wheels in this
Python's environment (``nvidia-cuda-nvcc``, CUDA 13: ``nvidia/cu13/bin``,
with ``nvidia-nvvm``, ``nvidia-cuda-crt`` and ``nvidia-cuda-runtime``:
``pip install 'mirecc[cuda]'``), else ``nvcc`` on PATH, else
``/usr/local/cuda/bin/nvcc``.  nvcc compiles host code with its own host
compiler (``-ccbin``; by default the ``g++`` on PATH).

nvcc's command line and the device IR are the CUDA front end's
(:mod:`mirecc.frontend.nvcc`).
"""
from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

from mirecc.frontend.compiler import CompilerNotFound, find_compiler
from mirecc.frontend.launches import HEADER_DIR, scan_source
from mirecc.frontend.nvcc import COMPILER as NVCC
from mirecc.frontend.nvcc import (NvccCommand, device_arch, device_ir,
                                  kernel_digests, read_kernels, source_name, split_own,
                                  toolkit_of)
from mirecc.taskapi.context import device_context
from mirecc.taskapi.registry import tasks
from mirecc.tu.context import CompileContext

# ------------------------------------------------------------------ the driver

def _say(level: str, message: str) -> None:
    print(f"mirecc-nvcc: {level}: {message}", file=sys.stderr)


def device_texts(cmd: NvccCommand, nvcc: str, config):
    """``source`` -> its device IR's text (clang, through the TU context):
    one clang run per source and call, on first use."""
    @functools.cache
    def text(source: str) -> str:
        with tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") as tmp:
            bc = device_ir(source, cmd, toolkit_of(nvcc), find_compiler(config, cxx=True),
                           Path(tmp) / "device.bc")
            return device_context(source, cmd, bc, config).ir_text
    return text


def device_digests(texts):
    """``source`` -> {kernel name as written: digest}, from the source's
    device IR (``texts``: a :func:`device_texts`, shared with the head), for
    a task that checks profile entries' digests and for the record."""
    return lambda source: kernel_digests(texts(source))


def launch_head(config) -> str | None:
    """The installed CUDA head's name (the CUDA task's ``head_name``), or None."""
    launch = _launch_task()
    return launch.head_name(config) if launch and hasattr(launch, "head_name") else None


def _launch_task():
    """The step through which the registry's CUDA task plans launches (the
    ``Task.compile_step()`` of a task whose languages include ``cuda``), or None."""
    found = [t for t in tasks().values() if "cuda" in t.languages and t.has("compile_step")]
    return found[0].compile_step() if found else None


def explain_sources(ctx: CompileContext, plans: list) -> None:
    """Print each CUDA source's kernels and their block shapes (``--explain``)."""
    import json     # lazy: --explain=json only

    cmd, nvcc, fmt, config = ctx.inv, ctx.compiler, ctx.explain, ctx.config
    clang = find_compiler(config, cxx=True)
    toolkit = toolkit_of(nvcc)
    launch = _launch_task()
    units = []
    with tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") as tmp:
        for n, source in enumerate(cmd.sources):
            unit = {"source": source, "device_arch": device_arch(cmd), "compiler": clang}
            plan = plans[n] if n < len(plans) else None
            try:
                plan = plan or launch.plan_source(scan_source(source, cmd), cmd)
            except Exception:  # noqa: BLE001 - the kernels can still be listed
                plan = None
            try:
                bc = device_ir(source, cmd, toolkit, clang, Path(tmp) / f"{n}.bc")
                ctx = device_context(source, cmd, bc, config)
                digests = kernel_digests(ctx.ir_text)
                unit["kernels"] = [k.__dict__ for k in read_kernels(ctx)]
                for k in unit["kernels"]:
                    k["source_name"] = source_name(k["name"])
                    k["digest"] = digests.get(k["source_name"])
                    if plan:
                        block = launch.block_of(plan, k["source_name"])
                        k["block"] = block.describe()
                        if block.ranking:      # the head's first shape and its prediction
                            k["head"] = {"shape": block.ranking[0][0],
                                         "source": "x".join(block.default),
                                         "predicted_speedup": block.ranking[0][1],
                                         "ranking": [r[0] for r in block.ranking[:5]]}
            except Exception as exc:  # noqa: BLE001 - the explanation must not fail a build
                unit["error"] = str(exc)
            unit["decisions"] = plan.decisions if plan else []
            unit["no_decision_reasons"] = plan.reasons if plan else []
            try:
                head = launch_head(config)
            except Exception as exc:  # noqa: BLE001 - a broken head is explained, not fatal
                head = f"unreadable ({exc})"
            unit["head"] = head
            if head is None:
                unit["no_decision"] = ("no CUDA head installed: block shapes come from a "
                                       "decisions profile only")
            elif not config.apply_cuda_block:
                unit["no_decision"] = (f"head {head}: shapes shown, not applied (set "
                                       f"MIRECC_APPLY_CUDA_BLOCK=1 or apply_cuda_block)")
            units.append(unit)
    if fmt == "json":
        for u in units:
            for k in u.get("kernels", []):      # the vector's size, not its numbers
                k["embedding"] = len(k["embedding"]) if k["embedding"] else None
        print(json.dumps({"nvcc": nvcc, "translation_units": units}, indent=1))
        return
    for u in units:
        print(f"{u['source']} (cuda device code for {u['device_arch']}, IR by {u['compiler']})")
        if "error" in u:
            print(f"  no device IR: {u['error']}")
            continue
        for k in u["kernels"]:
            embedded = f", embedded ({len(k['embedding'])} numbers)" if k["embedding"] else ""
            print(f"  kernel {k['name']}: {k['instructions']} instructions{embedded}")
            if "block" in k:
                b = k["block"]
                print(f"    block {b['shape']} ({k['source_name']}, digest {k['digest']}): "
                      f"{b['origin']}" + (f"; {b['note']}" if b["note"] else ""))
            if "head" in k:
                h = k["head"]
                print(f"    head: {h['shape']} (the source's {h['source']}), predicted "
                      f"{h['predicted_speedup']:.2f}x; next {', '.join(h['ranking'][1:])}")
        for reason in u["no_decision_reasons"]:
            print(f"  {reason}")
        if u.get("no_decision"):
            print(f"  {u['no_decision']}")


def _count(counts: dict, config) -> None:
    """Add to ``mire stats``'s counters (never an error)."""
    try:
        from mirecc.tu import stats  # inside the guard: statistics never fail a build

        stats.bump(config, counts)
    except Exception:  # noqa: BLE001 - statistics never fail a build
        pass


def _record(ctx: CompileContext, plans: list, digests_of) -> None:
    """With ``record`` (``MIRECC_RECORD``): one line per CUDA source in the
    record file, as ``mirecc`` writes one per TU
    (:func:`mirecc.tu.mlpath.append_record`, ``front_end`` ``mirecc-nvcc``),
    whose decisions are the tunable kernels' block shapes with their
    digests (the task's profile kind's ``recorded``): what ``mire tune``
    makes sites of.  A source with a tunable kernel costs a clang run for
    its device IR (``digests_of``), only here.  Any failure: no line for
    any source, one warning."""
    cmd, nvcc, config = ctx.inv, ctx.compiler, ctx.config
    try:
        # inside the guard (a record that fails is one warning); mlpath only with a record
        from mirecc.taskapi.profile import kinds
        from mirecc.tu.mlpath import append_record

        if config.disable or not config.record:
            return
        launch = _launch_task()
        kind = kinds()[launch.task]
        lines = []
        for source, plan in zip(cmd.sources, plans):
            tunable = any(b.tunable for b in plan.blocks.values())
            lines.append({
                "source": source, "front_end": "mirecc-nvcc", "language": "cuda",
                "compiler": nvcc, "device_arch": device_arch(cmd),
                "decisions": kind.recorded(plan, digests_of(source)) if tunable else [],
                "no_decision_reasons": list(plan.reasons)})
        for line in lines:
            append_record(config.record, line)
    except Exception as exc:  # noqa: BLE001 - a record never fails a build that nvcc made
        why = getattr(exc, "strerror", None) or exc
        _say("warning", f"the record file has no line for this compile: "
                        f"{type(exc).__name__}: {why}")


class _Unreadable:
    """The settings of a call whose configuration cannot be read: each use
    raises the error, so that it is reported where the settings are needed
    (a warning, nvcc's plain build), as a read there would."""

    def __init__(self, error: Exception):
        self.error = error

    def __getattr__(self, name):
        raise self.error


def _config():
    """This call's settings, read once and passed down (:class:`_Unreadable`
    when the configuration cannot be read)."""
    try:
        # inside the guard: a configuration that cannot be read is reported where needed
        from mirecc.taskapi.config import load_config

        return load_config()
    except Exception as exc:  # noqa: BLE001 - reported where a setting is needed
        return _Unreadable(exc)


def _run_decided(ctx: CompileContext, plans: list) -> int:
    """nvcc with the plans' decisions; should that fail, one warning and
    nvcc without them (the call's own command), whose messages are then the
    build's."""
    nvcc, base, cmd = ctx.compiler, ctx.final[1:], ctx.inv
    with tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") as tmp:
        try:
            decided, renamed = _launch_task().rewritten_args(base, cmd, plans, tmp)
            proc = subprocess.run([nvcc, *decided], capture_output=True)
            if proc.returncode == 0:
                sys.stdout.buffer.write(proc.stdout)
                sys.stdout.flush()
                sys.stderr.buffer.write(proc.stderr)
                sys.stderr.flush()
                if renamed and cmd.dependency_file:
                    _rename_in(cmd.dependency_file, renamed)
                return 0
            errors = [ln for ln in proc.stderr.decode(errors="replace").splitlines()
                      if "error" in ln]
            why = f"nvcc failed with them: {(errors or ['no message'])[-1].strip()}"
        except Exception as exc:  # noqa: BLE001 - never fail a build over a decision
            why = f"{type(exc).__name__}: {exc}"
    _say("warning", f"launch decisions not applied ({why}); building without them")
    for plan in plans:
        for d in plan.decisions:
            if d["applied"]:
                d["applied"], d["advisory"] = False, f"withdrawn: {why}"
        for block in plan.blocks.values():
            block.shape, block.origin = list(block.default), "source default"
    return subprocess.call(ctx.final)


def _rename_in(path: str, renamed: dict[str, str]) -> None:
    """The rewritten copies' paths in a dependency file -> the originals'
    (each once: the preprocessor also lists the names ``#line`` gives)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        text = fh.read()
    for copy in sorted(renamed, key=len, reverse=True):    # a.cuh before a.cu
        text = text.replace(copy, renamed[copy])
    seen, lines = set(), []
    for line in text.splitlines(keepends=True):
        words = line.strip().rstrip("\\").split()
        if line[:1].isspace() and len(words) == 1 and words[0] in seen:   # listed already
            if not line.rstrip().endswith("\\") and lines:   # it ended the rule
                lines[-1] = lines[-1].rstrip().rstrip("\\").rstrip() + "\n"
            continue
        seen.update(words)
        lines.append(line)
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("".join(lines))


def main(argv: list[str] | None = None) -> int:
    """``mirecc-nvcc``: the call's :class:`~mirecc.tu.context.CompileContext`
    made once (the compiler, nvcc, behind the interface every compiler has:
    :data:`mirecc.frontend.nvcc.COMPILER`), the launches planned by the CUDA
    task's compile step, nvcc run with the decisions (or as it is), then
    counted, recorded and explained."""
    ctx = CompileContext(sys.argv[1:] if argv is None else argv, True, NVCC)
    try:
        ctx.args, ctx.explain = split_own(ctx.argv)
    except ValueError as exc:
        _say("error", str(exc))
        return 2
    try:
        ctx.compiler, ctx.chosen = NVCC.find(None)
    except CompilerNotFound as exc:
        _say("error", str(exc))
        return 127
    ctx.config = config = _config()
    ctx.final = NVCC.final_command((), ctx.compiler, ctx.args)
    plans, digests_of = [], None
    try:
        ctx.expanded, ctx.inv = NVCC.parse(ctx.args)
        cmd = ctx.inv
        launch = _launch_task()
        scans = [scan_source(source, cmd) for source in cmd.sources] if launch else []
        if any(scan.uses_header for scan in scans):     # -E and -M read it too
            # after the user's own include folders: a copy of theirs wins
            ctx.final += ["-isystem", str(HEADER_DIR)]
            cmd.preprocessor += ["-isystem", str(HEADER_DIR)]
        if scans and cmd.compiles:
            texts = device_texts(cmd, ctx.compiler, config)
            digests_of = device_digests(texts)    # the plan's and the record's
            # the head reads the device IR only where its shape is applied,
            # explained or recorded: else the compile is nvcc's alone
            wanted = not config.disable and (config.apply_cuda_block or ctx.explain
                                             or config.record)
            profile = None if config.disable else config.profile
            plans = launch.plan_sources(cmd, scans, profile, digests_of,
                                        texts if wanted else None, config)
    except Exception as exc:  # noqa: BLE001 - a decision never breaks a build
        _say("warning", f"launch decisions not applied: {exc}")
        plans = []
    cmd = ctx.inv
    decided = any(plan.decided for plan in plans)
    status = _run_decided(ctx, plans) if decided else subprocess.call(ctx.final)
    if cmd is not None and cmd.sources and cmd.compiles:
        applied = any(d["applied"] for plan in plans for d in plan.decisions)
        ctx.count("cuda.compiles")
        if applied:
            ctx.count("cuda.applied")
        elif decided:
            ctx.count("fallback.decided-failed")
        _count(ctx.counts, config)
        if status == 0 and plans:
            _record(ctx, plans, digests_of)
    if ctx.explain and status == 0:
        try:
            if cmd and cmd.sources and cmd.compiles:
                explain_sources(ctx, plans)
        except Exception as exc:  # noqa: BLE001 - never fail a build that nvcc made
            _say("warning", f"cannot explain: {type(exc).__name__}: {exc}")
    return status
