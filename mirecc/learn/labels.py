"""Label files of the tasks' measured datasets: JSON lines appended under a
lock, read back tolerating a torn last line; the machine and compiler a
dataset was measured with."""
from __future__ import annotations

import fcntl
import gzip
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from mirecc.util.fsutil import append_line_locked


def cc_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return out.splitlines()[0].strip() if out else "unknown"


def append_row(path: Path, row: dict) -> None:
    append_line_locked(path, json.dumps(row, separators=(",", ":")), fsync=True)


def read_rows(path: Path) -> list[dict]:
    """The rows of a labels file; where ``path`` is not there, of its
    committed gzip copy (``<path>.gz``)."""
    rows = []
    packed = path.with_name(path.name + ".gz")
    text = path.read_text() if path.exists() else (
        gzip.decompress(packed.read_bytes()).decode() if packed.exists() else "")
    if text:
        for ln in text.splitlines():
            try:
                rows.append(json.loads(ln))
            except ValueError:
                pass
    return rows


def machine_info(cc: str) -> dict:
    model, flags = "unknown", []
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name") and model == "unknown":
                model = ln.split(":", 1)[1].strip()
            elif ln.startswith("flags") and not flags:
                flags = ln.split(":", 1)[1].split()
    except OSError:
        pass
    simd = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl") if f in flags]
    u = platform.uname()
    return {"cpu_model": model, "cpu_simd": simd, "cores": os.cpu_count(),
            "kernel": f"{u.system} {u.release}", "machine": u.machine,
            "cc": cc, "cc_version": cc_version(cc), "python": sys.version.split()[0],
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def read_done(path: Path) -> set[str]:
    """Row ids already in the labels file; a half-written (unterminated or
    unparsable) last line is cut off so the next append starts clean."""
    if not path.exists():
        return set()
    done = set()
    with open(path, "r+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            data = fh.read()
            good = 0
            pos = 0
            while pos < len(data):
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                line = data[pos:nl]
                try:
                    if line.strip():
                        done.add(json.loads(line)["row"])
                except (ValueError, KeyError):
                    break
                pos = good = nl + 1
            if good < len(data):
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return done
