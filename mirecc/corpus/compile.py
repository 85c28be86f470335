"""Compiling generated C programs through mirecc's capture mode, in batches."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirecc.corpus.store import Corpus, State
from mirecc.corpus.util import clean_env, say
from mirecc.frontend.toolchain import installed_driver


def compile_captured(sources: list[Path], capture: Path, flags: list[str], *, jobs: int,
                     timeout: float = 120) -> dict[str, str]:
    """``mirecc <flags> -c`` each source with MIRECC_CAPTURE_DIR=capture;
    returns {source: error text} for those that failed."""
    env = clean_env(MIRECC_CAPTURE_DIR=str(capture))
    cc = installed_driver("mirecc")
    failures: dict[str, str] = {}

    def one(src: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="mirecc-corpus-") as tmp:
            try:
                proc = subprocess.run([cc, *flags, "-c", str(src), "-o", f"{tmp}/out.o"],
                                      env=env, capture_output=True, text=True,
                                      timeout=timeout, cwd=src.parent)
                if proc.returncode:
                    failures[str(src)] = proc.stderr.strip()[-400:]
            except subprocess.TimeoutExpired:
                failures[str(src)] = f"timed out after {timeout} s"

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, sources))
    return failures


def run_batches(corpus: Corpus, source: str, items: list[tuple[str, str]], *,
                flags: list[str], jobs: int, batch: int, progress, record_extra) -> dict:
    """Write each (key, C text) item to a file, compile in batches through
    capture, merge each batch into the corpus and mark its keys done."""
    state = State(corpus.root, source)
    work = corpus.root / "_work" / source
    todo = [(k, t) for k, t in items if not state.is_done(k)]
    bar = progress(total=len(items), initial=len(items) - len(todo), desc=source,
                   unit="prog") if progress else None
    totals = {"added": 0, "duplicate": 0, "eval_dropped": 0, "error": 0, "compile_failed": 0}
    for start in range(0, len(todo), batch):
        chunk = todo[start:start + batch]
        bdir = work / f"batch-{start // batch}"
        capture = bdir / "capture"
        if bdir.exists():
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        paths = []
        for key, text in chunk:
            p = bdir / f"{key}.c"
            p.write_text(text)
            paths.append(p)
        failures = compile_captured(paths, capture, flags, jobs=jobs)
        # merge per program so the manifest names its family/seed
        by_path = {str(p): k for p, (k, _) in zip(paths, chunk)}
        counts = corpus.merge_capture(capture, source, source, base=bdir,
                                      origin_of=lambda path: record_extra(by_path.get(path, "")))
        for k in ("added", "duplicate", "eval_dropped", "error"):
            totals[k] += counts.get(k, 0)
        totals["compile_failed"] += len(failures)
        for key, _ in chunk:
            p = str(bdir / f"{key}.c")
            state.data["done"][key] = {"ok": p not in failures,
                                       **({"error": failures[p][-200:]} if p in failures else {})}
        state.save()
        shutil.rmtree(bdir, ignore_errors=True)
        if bar:
            bar.update(len(chunk))
        say(bar, f"{source}: {len(state.data['done'])} of {len(items)} programs "
                 f"(+{counts.get('added', 0)} modules, {len(failures)} failed to compile)")
    if bar:
        bar.close()
    return totals
