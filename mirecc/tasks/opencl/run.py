"""``mire run --opencl``: the OpenCL interposer for one run of a program, the
thread-coarsening task's part of ``mire run`` (:class:`CoarseningPart`,
``Task.run_part()``).

Sets ``LD_PRELOAD`` to ``libmirecc-opencl.so`` (``runtime/opencl``, built
into the per-user cache) and ``MIRECC_OPENCL_PLANNER`` to this Python's
:mod:`mirecc.tasks.opencl.coarsen`; ``--opencl-record FILE`` has the
interposer list what was tried, kept and gained; ``--opencl-factor K``
runs every accepted kernel at factor K (labels, benchmarks: no exploring,
nothing stored).  ``--opencl-device`` tells what the platform offers.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import sys

from mirecc.launch.part import RunError, RunPart, Step


class CoarseningPart(RunPart):
    """``--opencl`` and its options (:func:`add_run_arguments`), the variables
    the run gets (:func:`run_environment`)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_run_arguments(parser)

    def prepare(self, args, command: list[str]) -> Step:
        try:
            env, lines = run_environment(args)
        except ValueError as exc:
            raise RunError(str(exc)) from None
        return Step(env=env, lines=lines)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opencl", action="store_true",
                        help="coarsen the program's OpenCL kernels where the transform accepts "
                             "them, trying the head's factors on their first launches and "
                             "keeping one only when it is faster beyond the noise (verdicts "
                             "kept in the adaptive runtime's store)")
    parser.add_argument("--opencl-record", metavar="FILE",
                        help="with --opencl: write what was tried, kept and the measured gain "
                             "per kernel to FILE (tab-separated)")
    parser.add_argument("--opencl-factor", metavar="K",
                        help="with --opencl: run every kernel the transform accepts at factor "
                             "K where the launch allows it, or with 'all' each of its factors "
                             "in turn, launch by launch (labels); every launch timed, nothing "
                             "explored or stored")
    parser.add_argument("--opencl-device", choices=("program", "auto", "confirm"),
                        default="program",
                        help="with --opencl: 'confirm' gives the program each device its "
                             "request finds, run by run, and keeps one only when its runs are "
                             "faster than on the program's own beyond the noise (verdict "
                             "stored); 'auto' says whether the device-mapping head has a "
                             "choice to make here (default: %(default)s, the program's own)")


def opencl_devices() -> list[tuple[str, str, str]]:
    """(platform name, device name, device type: CPU, GPU, accelerator or
    other) of every OpenCL device this machine offers, through the ICD
    loader; [] without one."""
    try:
        cl = ctypes.CDLL("libOpenCL.so.1")
    except OSError:
        return []
    n = ctypes.c_uint32()
    if cl.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0 or not n.value:
        return []
    platforms = (ctypes.c_void_p * n.value)()
    cl.clGetPlatformIDs(n.value, platforms, None)
    out = []
    for p in platforms:
        name = ctypes.create_string_buffer(256)
        cl.clGetPlatformInfo(ctypes.c_void_p(p), 0x0902, 256, name, None)
        count = ctypes.c_uint32()
        if cl.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_uint64(0xFFFFFFFF), 0, None,
                             ctypes.byref(count)) != 0:
            continue
        devices = (ctypes.c_void_p * count.value)()
        cl.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_uint64(0xFFFFFFFF), count.value, devices,
                          None)
        for d in devices:
            dname = ctypes.create_string_buffer(256)
            cl.clGetDeviceInfo(ctypes.c_void_p(d), 0x102B, 256, dname, None)
            dtype = ctypes.c_uint64()
            cl.clGetDeviceInfo(ctypes.c_void_p(d), 0x1000, 8, ctypes.byref(dtype), None)
            kind = ("GPU" if dtype.value & 4 else "CPU" if dtype.value & 2 else
                    "accelerator" if dtype.value & 8 else "other")
            out.append((name.value.decode(errors="replace").strip(),
                        dname.value.decode(errors="replace").strip(), kind))
    return out


def run_environment(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """The variables a run with ``args`` gets and what to say about them;
    raises ``ValueError`` with the problem (an option without ``--opencl``,
    a bad factor, an interposer that cannot be built)."""
    if not args.opencl:
        if args.opencl_record or args.opencl_factor or args.opencl_device != "program":
            raise ValueError("--opencl-record, --opencl-factor and --opencl-device go with "
                             "--opencl")
        return {}, []
    if args.opencl_factor is not None and args.opencl_factor != "all" and not (
            args.opencl_factor.isdigit() and 1 <= int(args.opencl_factor) <= 1024):
        raise ValueError(f"--opencl-factor {args.opencl_factor}: a factor 1..1024 or 'all'")
    # lazy: only with --opencl; every mire run loads each task's run part
    from mirecc.frontend.compiler import find_compiler
    from mirecc.runtime.build import RuntimeBuildError, ensure_interposer
    from mirecc.taskapi.config import load_config

    try:
        library = ensure_interposer(find_compiler(load_config(), cxx=False))
    except RuntimeBuildError as exc:
        raise ValueError(str(exc)) from None
    preload = " ".join(filter(None, [str(library), os.environ.get("LD_PRELOAD", "")]))
    env = {"LD_PRELOAD": preload,
           "MIRECC_OPENCL_PLANNER": f"{shlex.quote(sys.executable)} -m "
                                    "mirecc.tasks.opencl.coarsen"}
    lines = ["OpenCL: kernels coarsened where the transform accepts them, "
             + ("each factor in turn (labels)" if args.opencl_factor == "all" else
                f"all at factor {args.opencl_factor}" if args.opencl_factor else
                "each factor confirmed by timing the kernel's own launches")]
    if args.opencl_record:
        env["MIRECC_OPENCL_RECORD"] = os.path.abspath(args.opencl_record)
    if args.opencl_factor:
        env["MIRECC_OPENCL_FACTOR"] = str(args.opencl_factor)
    if args.opencl_device != "program":
        devices = opencl_devices()
        lines.append(device_line(args.opencl_device, devices))
        if args.opencl_device == "confirm":
            env["MIRECC_OPENCL_DEVICE"] = "confirm"
    return env, lines


def device_line(mode: str, devices: list[tuple[str, str, str]]) -> str:
    """What ``--opencl-device=MODE`` does on a machine offering ``devices``
    ((platform, device, type) each)."""
    listed = ", ".join(f"{d} ({t})" for _, d, t in devices) or "none found"
    if len(devices) <= 1:
        return (f"--opencl-device={mode}: this machine offers one OpenCL device, {listed}; "
                "the program's choice stands")
    if mode == "confirm":
        return (f"--opencl-device=confirm: {len(devices)} devices ({listed}); where the "
                "program's request finds more than one, its runs alternate between them "
                "and the faster device is kept once it wins beyond the noise")
    types = {t for _, _, t in devices}
    if len(types) == 1:
        return (f"--opencl-device=auto: {len(devices)} devices, all {next(iter(types))} "
                f"({listed}): the device-mapping head chooses between CPU and GPU and has "
                "nothing to choose here; the program's choice stands (confirm times them)")
    return (f"--opencl-device=auto: {listed}: the device-mapping head's choice is made per "
            "kernel after the program has chosen its device (--explain shows it); the "
            "program's choice stands (confirm times the devices)")
