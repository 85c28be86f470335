"""OpenCL kernels (``.cl`` files) from Debian source packages.

Each ``.cl`` file is compiled by clang 14 on its own::

    clang-14 -x cl -cl-std=CL1.2 -O1 -Xclang -disable-llvm-passes
             -Xclang -finclude-default-header -emit-llvm -c -I<its dir>

(``-finclude-default-header`` declares the OpenCL built-ins such as
``get_global_id``; without it clang 14 rejects most kernels).  Many ``.cl``
files are fragments included by others or templates the host fills in
(CLBlast, clFFT): those fail and are recorded in the state file, not fatal.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirecc.frontend.compiler import compiler_version
from mirecc.corpus.debian import fetch
from mirecc.corpus.store import Corpus, State
from mirecc.corpus.util import say

# opencv, ffmpeg and gromacs fetch through this machine's Debian mirror; the
# others named in DESIGN.md answered 404 for their tarballs here (2026-11-21)
# and are tried (a fetch failure is retried on the next run, not marked done).
DEFAULT_CL_PACKAGES = ["opencv", "ffmpeg", "gromacs", "pocl", "clblast", "viennacl",
                       "darktable", "hashcat"]
CL_FLAGS = ["-x", "cl", "-cl-std=CL1.2", "-O1", "-Xclang", "-disable-llvm-passes",
            "-Xclang", "-finclude-default-header", "-emit-llvm", "-c"]


def cl_compiler() -> str:
    found = shutil.which("clang-14") or shutil.which("clang")
    if not found:
        raise FileNotFoundError("clang-14 not found")
    return found


_UNKNOWN_TYPE = re.compile(r"error: unknown type name '(\w+)'")
_UNDECLARED = re.compile(r"error: use of undeclared identifier '(\w+)'")


def compile_cl(path: Path, clang: str, timeout: float = 120, rounds: int = 6,
               includes: list[Path] = ()) -> tuple[bytes | None, str, list[str]]:
    """Compile one .cl file; returns (bitcode or None, error, defines used).

    Kernels that the host specialises with ``-D`` (OpenCV: ``T``, ``cn``,
    ``rowsPerWI``...) fail as they stand; each failed round adds ``-DX=float``
    for an unknown type name and ``-DY=1`` for an undeclared identifier that
    clang reports, up to ``rounds`` times.  The defines go in the manifest."""
    defines: list[str] = []
    err = ""
    with tempfile.TemporaryDirectory(prefix="mirecc-cl-") as tmp:
        out = Path(tmp) / "k.bc"
        for _ in range(rounds):
            try:
                proc = subprocess.run([clang, *CL_FLAGS, f"-I{path.parent}",
                                       *(f"-I{i}" for i in includes), *defines, str(path),
                                       "-o", str(out)], capture_output=True, text=True,
                                      timeout=timeout, cwd=path.parent)
            except subprocess.TimeoutExpired:
                return None, f"timed out after {timeout} s", defines
            if proc.returncode == 0 and out.is_file():
                return out.read_bytes(), "", defines
            lines = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
            err = (lines[0] if lines else proc.stderr.strip())[-300:]
            # types first: parameters of an unknown type make their uses look undeclared
            known = {d[2:].split("=")[0] for d in defines}
            new = [f"-D{n}=float" for n in dict.fromkeys(_UNKNOWN_TYPE.findall(proc.stderr))
                   if n not in known]
            if not new:
                new = [f"-D{n}=1" for n in dict.fromkeys(_UNDECLARED.findall(proc.stderr))
                       if n not in known]
            if not new:
                break
            defines += new
    return None, err, defines


def add_cl_files(corpus: Corpus, files: list[Path], origin: str, base: Path, *,
                 jobs: int = 2, extra: dict | None = None) -> dict:
    includes = [d for d in (base, base / "src", base / "include") if d.is_dir()]
    clang = cl_compiler()
    version = compiler_version(clang)
    counts = {"files": len(files), "added": 0, "duplicate": 0, "eval_dropped": 0,
              "ir_error": 0, "compile_failed": 0, "with_inferred_defines": 0}
    failures = {}
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda f: compile_cl(f, clang, includes=includes), files))
    for f, (bc, err, defines) in zip(files, results):
        rel = str(f.relative_to(base)) if f.is_relative_to(base) else str(f)
        if bc is None:
            counts["compile_failed"] += 1
            failures[rel] = err
            continue
        record = {"kind": "opencl", "origin": origin, "path": rel, "language": "cl",
                  "flags": CL_FLAGS + defines, "compiler_version": version, **(extra or {})}
        status = corpus.add(bc, record)
        counts["ir_error" if status == "error" else status] += 1
        if defines:
            counts["with_inferred_defines"] += 1
    counts["failures"] = dict(list(failures.items())[:50])
    return counts


def build_opencl(corpus: Corpus, packages: list[str], *, jobs: int = 2, progress=None,
                 fetch_timeout: float = 900) -> dict:
    state = State(corpus.root, "opencl")
    work = corpus.root / "_work" / "opencl"
    logs = corpus.root / "logs" / "opencl"
    todo = [p for p in packages if not state.is_done(p)]
    bar = progress(total=len(packages), initial=len(packages) - len(todo), desc="opencl",
                   unit="pkg") if progress else None
    results = {}
    for package in todo:
        t0 = time.monotonic()
        info: dict = {"package": package}
        try:
            tree, version = fetch(package, work, logs / f"{package}.log", fetch_timeout)
            files = sorted(p for p in tree.rglob("*.cl") if p.is_file())
            info.update(version=version,
                        **add_cl_files(corpus, files, package, tree, jobs=jobs,
                                       extra={"version": version}))
            info["status"] = "ok"
        except Exception as exc:
            info["status"] = "error"
            info["error"] = str(exc)[:500]
        info["seconds"] = round(time.monotonic() - t0, 1)
        if info["status"] == "error" and "apt-get source" in info.get("error", ""):
            state.data.setdefault("fetch_failed", {})[package] = info
            state.forget(package)
        else:
            state.data.get("fetch_failed", {}).pop(package, None)
            state.mark_done(package, info)
        results[package] = info
        if bar:
            bar.update(1)
        say(bar, f"opencl {package}: {info['status']} ({info.get('added', 0)} of "
                      f"{info.get('files', 0)} .cl files added)")
    if bar:
        bar.close()
    return results
