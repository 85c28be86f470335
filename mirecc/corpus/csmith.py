"""Random C programs from Debian's csmith, compiled through capture mode.

Program ``i`` is ``csmith --seed <seed * 1000003 + i>``: the same seed and
count give the same programs.  csmith's runtime headers come from
libcsmith-dev (``/usr/include/csmith``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from mirecc.corpus.compile import run_batches
from mirecc.corpus.store import Corpus, State

CSMITH_INCLUDE = Path("/usr/include/csmith")


def csmith_program(seed: int) -> str:
    exe = shutil.which("csmith")
    if not exe:
        raise FileNotFoundError("csmith is not installed: apt-get install csmith libcsmith-dev")
    # csmith writes platform.info into its working directory: give it its own.
    with tempfile.TemporaryDirectory(prefix="mirecc-csmith-") as scratch:
        proc = subprocess.run([exe, "--seed", str(seed)], capture_output=True, text=True,
                              timeout=60, cwd=scratch)
    if proc.returncode:
        raise RuntimeError(f"csmith --seed {seed} failed: {proc.stderr.strip()[:200]}")
    return proc.stdout


def build_csmith(corpus: Corpus, count: int, *, seed: int = 1, jobs: int = 2,
                 progress=None, opt_level: str = "-O2") -> dict:
    if not (CSMITH_INCLUDE / "csmith.h").is_file():
        raise FileNotFoundError(f"{CSMITH_INCLUDE}/csmith.h missing: apt-get install libcsmith-dev")
    seeds = [seed * 1000003 + i for i in range(count)]
    state = State(corpus.root, "csmith")
    items = [(f"csmith-{s}", "" if state.is_done(f"csmith-{s}") else csmith_program(s))
             for s in seeds]
    return run_batches(corpus, "csmith", items, flags=[opt_level, "-w", f"-I{CSMITH_INCLUDE}"],
                       jobs=jobs, batch=50, progress=progress,
                       record_extra=lambda key: {"seed": int(key.split("-")[1])} if key else {})
