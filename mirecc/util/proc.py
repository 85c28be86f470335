"""How a driver hands a call to the real compiler and speaks to the user:
one line on stderr (:func:`say`), the process replaced by the compiler
(:func:`exec_command`: exit code, signals and streams are then the
compiler's), or the compiler run as a child when the driver must act after
it (:func:`run_command`).

Only ``os`` and ``sys`` are imported at the top: every compile pays for
this module.
"""
from __future__ import annotations

import os
import sys


def say(kind: str, message: str, who: str = "mirecc") -> None:
    """``who: kind: message`` on stderr, always exactly one line."""
    message = " ".join(message.split())
    sys.stderr.write(f"{who}: {kind}: {message}\n")
    sys.stderr.flush()


def exec_command(cmd: list[str]) -> int:
    """Replace this process with ``cmd``: exit code, signals, stdin, stdout
    and stderr are then exactly the compiler's.  Returns 127 (with one line
    saying why) only when it cannot be run."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    return 127  # not reached


def run_command(cmd: list[str], stdin_data: bytes | None) -> int:
    """Run ``cmd`` as a child (``stdin_data`` on its standard input) and
    return its exit status, a signal reported as a shell would (128 + N)."""
    import subprocess   # lazy: ~15 ms of start-up that most calls never need

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        proc = subprocess.run(cmd, input=stdin_data)
    except OSError as exc:
        say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
