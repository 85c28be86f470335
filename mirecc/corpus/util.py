"""Running build commands with a time box and a log."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def tool(name: str) -> str:
    """mirecc / mirecc++ next to the running Python (a venv), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found next to {sys.executable} or on PATH")
    return found


def clean_env(**extra: str) -> dict[str, str]:
    drop = {"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS",
            "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_") and k not in drop}
    env["LC_ALL"] = "C"
    env["MIRECC_QUIET"] = "1"
    # the corpus is clang 14 IR unless asked otherwise (mirecc picks the newest clang)
    env["MIRECC_CC"] = os.environ.get("MIRECC_CORPUS_CC", "clang-14")
    env["MIRECC_CXX"] = os.environ.get("MIRECC_CORPUS_CXX", "clang++-14")
    env.update(extra)
    return env


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
        import time
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tail(path: Path, n: int = 6) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
