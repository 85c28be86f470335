"""``mire run``: run a program with what every registered part gives it, under
a package power cap (:mod:`.powercap`); ``--dry-run`` prints the plan and
runs nothing.

    mire run --dry-run -- ./prog args
    mire run --power-cap 65 -- ./prog args

The parts are the tasks' (``Task.run_part()``, a
:class:`~mirecc.launch.part.RunPart` each), asked in the registry's order:
each adds its options, then says what it does to this run (variables, a
command prefix, one line per thing done or skipped: printed as ``mire run:
...``, on standard output with ``--dry-run``, else on standard error), then,
around the program's run, sets what it sets on the machine and puts it back.
Until the program starts, SIGINT, SIGTERM and SIGHUP unwind through those
restores; then they are passed on to the program.

Exit status: the program's (128 + n when signal n ended it); 2 when no
program is given or a part, the cap or the program cannot be started (the
problem in one line); 128 + n when signal n came before the program started.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
from pathlib import Path

from mirecc.launch.part import RunError
from mirecc.launch.powercap import DEFAULT_ROOT, FORWARDED, run_capped
from mirecc.taskapi.registry import tasks


class _Interrupted(Exception):
    """A forwarded signal arrived before the program was started: the
    settings already changed are put back (``finally``) and the launcher
    exits as the signal would have ended it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def parts() -> list:
    """A fresh part of this run from each task that takes part, in the
    registry's order."""
    return [task.run_part() for task in tasks().values() if task.has("run_part")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--power-cap", default=os.environ.get("MIRECC_POWER_CAP"),
                        help="package power cap for the run: watts (65) or a share of the "
                             "zone's maximum (80%%) (default: $MIRECC_POWER_CAP, else none)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be set and run, and run nothing")
    # a fake powercap tree for tests
    parser.add_argument("--powercap-root", default=str(DEFAULT_ROOT), help=argparse.SUPPRESS)
    for part in parts():
        part.add_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the program and its arguments, after --")


def run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("mire run: no program given (mire run [--power-cap W] [--dry-run] -- ./prog "
              "args)", file=sys.stderr)
        return 2
    say = (lambda line: print(line)) if args.dry_run else \
        (lambda line: print(line, file=sys.stderr))
    taking_part = parts()
    env: dict[str, str] = {}
    prefix: list[str] = []
    try:
        for part in taking_part:
            step = part.prepare(args, command)
            for line in step.lines:
                say(f"mire run: {line}")
            env.update(step.env)
            prefix += step.prefix
    except RunError as exc:
        print(f"mire run: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        print("mire run: would run: " + " ".join(
            filter(None, [shown, shlex.join([*prefix, *command])])))
        if args.power_cap:
            print(f"mire run: with a package power cap of {args.power_cap}")
        return 0

    # until the program runs (and its own forwarding takes over), a signal
    # unwinds through the parts' restores and the cap's
    def interrupt(signum, frame):
        raise _Interrupted(signum)
    previous = {signum: signal.signal(signum, interrupt) for signum in FORWARDED}
    try:
        with contextlib.ExitStack() as applied:
            for part in taking_part:
                applied.enter_context(part.applied(args, say))
            return run_capped([*prefix, *command], args.power_cap, Path(args.powercap_root),
                              env={**os.environ, **env})
    except RunError as exc:
        print(f"mire run: {exc}", file=sys.stderr)
        return 2
    except _Interrupted as exc:
        print(f"mire run: signal {exc.signum} before the program started; settings put "
              "back", file=sys.stderr)
        return 128 + exc.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
