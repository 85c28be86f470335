"""Running build commands with a time box and a log."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path


# Variables that would change a project's build from outside.
BUILD_VARIABLES = {"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS",
                   "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS"}


def neutral_build_env(**extra: str) -> dict[str, str]:
    """Our environment without MIRECC_* and without BUILD_VARIABLES, in the C
    locale, plus ``extra``: a project then builds as its own files say."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MIRECC_") and k not in BUILD_VARIABLES}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of corpus builds: quiet mirecc driving clang 14 (the
    corpus is clang 14 IR unless asked otherwise; mirecc picks the newest),
    without the code-size search (a build at -Oz would otherwise build
    candidates for every captured TU; the IR captured is the same)."""
    return neutral_build_env(**{
        "MIRECC_QUIET": "1",
        "MIRECC_SIZE_SEARCH": "0",
        "MIRECC_CC": os.environ.get("MIRECC_CORPUS_CC", "clang-14"),
        "MIRECC_CXX": os.environ.get("MIRECC_CORPUS_CXX", "clang++-14"),
        **extra})


def run_logged(cmd: list[str], *, cwd: Path, env: dict, log: Path, timeout: float) -> int:
    """Run ``cmd`` (output appended to ``log``) in its own process group, killed
    as a whole when ``timeout`` seconds pass; returns the exit status (124 on
    timeout, 127 when it cannot start)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(f"\n$ cd {cwd} && {shlex.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            fh.write(f"cannot run: {exc}\n")
            return 127
        try:
            rc = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            rc = 124
            fh.write(f"timed out after {timeout:.0f} s\n")
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        fh.write(f"[exit status {rc}]\n")
    return rc


def say(bar, message: str) -> None:
    """A progress line: through the bar when it is shown, else plainly on
    stderr (a log file), with the time."""
    if bar is not None and not getattr(bar, "disable", True):
        bar.write(message, file=sys.stderr)
    else:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tail(path: Path, n: int = 6) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
