"""The corpus store: content-addressed modules, one manifest, per-source state.

Layout of a corpus directory::

    ir/<aa>/<sha256>.bc        each module once (sha256 of the bitcode)
    stmts/<aa>/<sha256>.bin    its distinct statement hashes (8 bytes each, sorted)
    stmts/<aa>/<sha256>.norm.bin  the same after mirecc.ir normalisation
    manifest.jsonl             one line per module: sha256, ir, kind, origin,
                               path, flags, compiler version, counts
    dropped.jsonl              modules dropped as copies of evaluation kernels
    state/<source>.json        what each source has finished (for resuming)
    report.json                the last report

A module is added by writing its statements file and manifest line first and
its bitcode last (atomically): the bitcode's existence is what "present"
means, so an interrupted add is simply redone, and the report keeps the
first manifest line per sha256.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from pathlib import Path

from mirecc.corpus.evalfilter import EvalFilter
from mirecc.corpus.irtext import module_stats
from mirecc.ir.text import IRTextError, disassemble
from mirecc.util.fsutil import append_line_locked, atomic_write_bytes

# build-system probes compiled at -O2 (autoconf, zlib's configure, CMake): not corpus material
CONFIG_TEST = re.compile(r"(^|/)(conftest|ztest)[^/]*\.(c|cc|cpp)$|(^|/)CMakeFiles/")

MANIFEST_KEYS = ("sha256", "ir", "kind", "origin", "path", "flags", "language",
                 "compiler_version", "functions", "statements", "unique_statements",
                 "unique_normalised_statements")


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(Path(path), (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


class State:
    """Per-source progress file: ``done`` items are skipped when resuming."""

    def __init__(self, root: Path, source: str):
        self.path = Path(root) / "state" / f"{source}.json"
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}
        self.data.setdefault("done", {})
        self._forgotten: set[str] = set()

    def is_done(self, key: str) -> bool:
        return key in self.data["done"]

    def reload_done(self, key: str) -> bool:
        """Whether ``key`` is done on disk now (another process may have done it)."""
        try:
            on_disk = json.loads(self.path.read_text()).get("done", {})
        except (OSError, ValueError):
            return self.is_done(key)
        if key in on_disk and key not in self._forgotten:
            self.data["done"][key] = on_disk[key]
            return True
        return self.is_done(key)

    def mark_done(self, key: str, info: dict) -> None:
        self.data["done"][key] = {**info, "marked_at": time.time()}
        self._forgotten.discard(key)
        self.save()

    def save(self) -> None:
        """Write the state, merged with what another process may have written
        meanwhile (their ``done`` entries are kept), under a lock."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                on_disk = json.loads(self.path.read_text())
            except (OSError, ValueError):
                on_disk = {}
            # per item, the entry marked last wins (another process may have redone it)
            merged_done = dict(on_disk.get("done", {}))
            for k, v in self.data["done"].items():
                if v.get("marked_at", 0) >= merged_done.get(k, {}).get("marked_at", 0):
                    merged_done[k] = v
            self.data = {**on_disk, **self.data, "done": merged_done}
            for key in self._forgotten:
                self.data["done"].pop(key, None)
            atomic_write_json(self.path, self.data)

    def forget(self, key: str) -> None:
        """Mark ``key`` not done (to be redone)."""
        self.data["done"].pop(key, None)
        self._forgotten.add(key)
        self.save()


class Corpus:
    def __init__(self, root: Path, eval_filter: EvalFilter | None = None):
        self.root = Path(root).absolute()
        self.root.mkdir(parents=True, exist_ok=True)
        self.eval_filter = eval_filter
        self._dropped = self._load_dropped()

    def _load_dropped(self) -> set[str]:
        out = set()
        try:
            with open(self.root / "dropped.jsonl") as fh:
                for line in fh:
                    try:
                        out.add(json.loads(line)["sha256"])
                    except (ValueError, KeyError):
                        pass
        except OSError:
            pass
        return out

    def ir_path(self, sha: str) -> Path:
        return self.root / "ir" / sha[:2] / f"{sha}.bc"

    def stmts_path(self, sha: str) -> Path:
        return self.root / "stmts" / sha[:2] / f"{sha}.bin"

    def norm_path(self, sha: str) -> Path:
        return self.root / "stmts" / sha[:2] / f"{sha}.norm.bin"

    def add(self, bitcode: bytes, record: dict, text: str | None = None) -> str:
        """Add one module; returns 'added', 'duplicate', 'eval_dropped' or 'error'."""
        sha = hashlib.sha256(bitcode).hexdigest()
        ir = self.ir_path(sha)
        if ir.is_file():
            return "duplicate"
        if sha in self._dropped:
            return "eval_dropped"
        try:
            if text is None:
                text = disassemble(bitcode, record.get("path", sha))
        except (IRTextError, OSError) as exc:
            append_line_locked(self.root / "errors.jsonl",
                               json.dumps({"sha256": sha, "error": str(exc), **record}))
            return "error"
        if self.eval_filter is not None and self.eval_filter.matches(text):
            self._dropped.add(sha)
            append_line_locked(self.root / "dropped.jsonl",
                               json.dumps({"sha256": sha, **record}, sort_keys=True))
            return "eval_dropped"
        stats = module_stats(text)
        atomic_write_bytes(self.stmts_path(sha), b"".join(sorted(stats.statement_hashes)))
        if stats.normalised_hashes is not None:
            atomic_write_bytes(self.norm_path(sha), b"".join(sorted(stats.normalised_hashes)))
        line = {"sha256": sha, "ir": str(ir.relative_to(self.root)), **record,
                **stats.as_dict()}
        for key in MANIFEST_KEYS:
            line.setdefault(key, None)
        append_line_locked(self.root / "manifest.jsonl", json.dumps(line, sort_keys=True))
        atomic_write_bytes(ir, bitcode)
        return "added"

    def refilter(self, progress=None) -> int:
        """Apply the evaluation-kernel filter to every module already stored
        (after the evaluation set or the normalisation changed): matches are
        moved to dropped.jsonl and their files removed.  Returns how many."""
        if self.eval_filter is None:
            return 0
        records = {}
        try:
            with open(self.root / "manifest.jsonl") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    records.setdefault(rec.get("sha256"), rec)
        except OSError:
            return 0
        dropped = 0
        items = [(sha, rec) for sha, rec in records.items() if sha and self.ir_path(sha).is_file()]
        bar = progress(total=len(items), desc="eval filter", unit="mod") if progress else None
        for sha, rec in items:
            ir = self.ir_path(sha)
            try:
                text = disassemble(ir.read_bytes(), str(ir))
            except (IRTextError, OSError):
                text = None
            if text is not None and self.eval_filter.matches(text):
                self._dropped.add(sha)
                append_line_locked(self.root / "dropped.jsonl", json.dumps(
                    {k: v for k, v in rec.items() if k in ("sha256", "kind", "origin", "path")},
                    sort_keys=True))
                ir.unlink()
                self.stmts_path(sha).unlink(missing_ok=True)
                self.norm_path(sha).unlink(missing_ok=True)
                dropped += 1
            if bar:
                bar.update(1)
        if bar:
            bar.close()
        return dropped

    def merge_capture(self, capture_dir: Path, kind: str, origin: str, *,
                      base: Path | None = None, extra: dict | None = None,
                      origin_of=None) -> dict:
        """Move what mirecc's capture mode stored in ``capture_dir`` into the corpus."""
        counts = {"added": 0, "duplicate": 0, "eval_dropped": 0, "error": 0,
                  "config_test": 0}
        manifest = Path(capture_dir) / "manifest.jsonl"
        if not manifest.is_file():
            return counts
        with open(manifest) as fh:
            lines = fh.readlines()
        for raw in lines:
            try:
                rec = json.loads(raw)
                data = (Path(capture_dir) / rec["ir"]).read_bytes()
            except (ValueError, KeyError, OSError):
                counts["error"] += 1
                continue
            path = rec.get("source", "")
            if CONFIG_TEST.search(path):
                counts["config_test"] += 1
                continue
            fields = origin_of(path) if origin_of else {}
            if base is not None:
                try:
                    path = os.path.relpath(path, base)
                except ValueError:
                    pass
            record = {"kind": kind, "origin": origin, "path": path,
                      "flags": rec.get("flags"), "language": rec.get("language"),
                      "compiler_version": rec.get("compiler_version"), **(extra or {}),
                      **fields}
            counts[self.add(data, record)] += 1
        return counts
