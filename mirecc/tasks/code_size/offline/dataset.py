"""The code-size dataset: for each module of a corpus built at -Oz (``mire
corpus build --opt-level=-Oz``), IR instructions and ``.text`` bytes through
clang's own -Oz and through every pipeline asked for.

Layout of the output directory::

    meta.json       machine, compiler, opt, corpus (written once, checked on resume)
    labels.jsonl    one line per (module, pipeline): {"module", "pipeline",
                    "ir_instructions", "text_bytes"} or {"module", "pipeline",
                    "error"}; appended under a lock, so a rerun resumes
                    where the last one stopped and two runs can share it;
                    "pipeline" is the pipeline's id (:func:`pipeline_id`)
    pipelines.jsonl {"id", "pipeline"}: the texts of the ids (a pipeline is
                    kilobytes long)

Modules are split by package: the packages the issue builds and tests
(``HELD_OUT``) are never used for the library search or for training.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirecc.frontend.compiler import compiler_version
from mirecc.util.fsutil import append_line_locked, atomic_write_bytes
from mirecc.tasks.code_size.build import CandidateError, opt_beside
from mirecc.tasks.code_size.offline.labels import OWN, codegen_flags, measure

# the packages the finished task is judged on (built with their test suites)
HELD_OUT = ("zlib", "bzip2", "lua5.4", "sqlite3")


class Module:
    __slots__ = ("sha256", "path", "origin", "source", "flags")

    def __init__(self, sha256: str, path: Path, origin: str, source: str, flags: list[str]):
        self.sha256, self.path, self.origin = sha256, path, origin
        self.source, self.flags = source, flags

    @property
    def split(self) -> str:
        return "test" if self.origin in HELD_OUT else "train"


def corpus_modules(corpus: Path) -> list[Module]:
    """The corpus's modules (the first manifest line of each), whose
    bitcode exists; ValueError naming the file when there is no manifest."""
    manifest = corpus / "manifest.jsonl"
    if not manifest.is_file():
        raise ValueError(f"{manifest}: no corpus manifest (build one with: mire corpus build "
                         f"--opt-level=-Oz --out {corpus})")
    seen, out = set(), []
    with open(manifest, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
                sha = rec["sha256"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{manifest}:{number}: not a corpus manifest line") from None
            if sha in seen or not (corpus / rec["ir"]).is_file():
                continue
            seen.add(sha)
            out.append(Module(sha, corpus / rec["ir"], rec.get("origin", "?"),
                              rec.get("path", "?"), list(rec.get("flags", []))))
    return out


def sample(modules: list[Module], count: int, seed: int) -> list[Module]:
    """Up to ``count`` modules, as evenly spread over origins (packages,
    csmith) as they allow, in a seeded random order."""
    rng = random.Random(seed)
    by_origin: dict[str, list[Module]] = {}
    for m in modules:
        by_origin.setdefault(m.origin, []).append(m)
    for group in by_origin.values():
        rng.shuffle(group)
    out: list[Module] = []
    while len(out) < count and any(by_origin.values()):
        for origin in sorted(by_origin):
            if by_origin[origin] and len(out) < count:
                out.append(by_origin[origin].pop())
    return out


def pipeline_id(pipeline: str) -> str:
    """A short stable name of a pipeline text (clang's own level: itself)."""
    if pipeline == OWN:
        return OWN
    return "p" + hashlib.sha256(pipeline.encode()).hexdigest()[:12]


def _read_jsonl(path: Path):
    """The records of ``path``, or of its gzipped copy (the committed export:
    ``mire bench size --labels heads/code-size/labels``)."""
    if not path.is_file():
        packed = path.with_name(path.name + ".gz")
        if packed.is_file():
            with gzip.open(packed, "rt", encoding="utf-8") as fh:
                yield from (json.loads(line) for line in fh if line.strip())
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                yield json.loads(line)
            except ValueError:
                continue        # a line cut by a crash: measured again


class Labels:
    """``labels.jsonl`` and ``pipelines.jsonl`` of an output directory:
    read, resumed, appended.  Rows are keyed by pipeline text."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.path = self.out / "labels.jsonl"
        self.names_path = self.out / "pipelines.jsonl"
        self._lock = threading.Lock()
        self.texts = {OWN: OWN}
        for rec in _read_jsonl(self.names_path):
            if isinstance(rec, dict) and {"id", "pipeline"} <= rec.keys():
                self.texts[rec["id"]] = rec["pipeline"]
        self.rows: dict[tuple[str, str], dict] = {}
        for row in _read_jsonl(self.path):
            try:
                self.rows[(row["module"], self.texts[row["pipeline"]])] = row
            except (KeyError, TypeError):
                continue

    def has(self, module: str, pipeline: str) -> bool:
        return (module, pipeline) in self.rows

    def add(self, pipeline: str, row: dict) -> None:
        """Record ``row`` ({"module", measures or "error"}) for ``pipeline``."""
        pid = pipeline_id(pipeline)
        with self._lock:
            new_name = pid not in self.texts
            self.texts[pid] = pipeline
            self.rows[(row["module"], pipeline)] = row = {**row, "pipeline": pid}
        if new_name:
            append_line_locked(self.names_path, json.dumps({"id": pid, "pipeline": pipeline}))
        append_line_locked(self.path, json.dumps(row, sort_keys=True))

    def table(self) -> dict[str, dict[str, dict]]:
        """module -> pipeline text -> row (errors included)."""
        out: dict[str, dict[str, dict]] = {}
        for (module, pipeline), row in self.rows.items():
            out.setdefault(module, {})[pipeline] = row
        return out


def write_meta(out: Path, compiler: str, corpus: Path) -> dict:
    """The machine and toolchain the labels are measured with; a rerun with
    another compiler is refused (its labels would mix)."""
    meta = {"compiler": os.path.realpath(compiler), "compiler_version":
            compiler_version(compiler), "opt": opt_beside(compiler),
            "machine": {"platform": platform.platform(), "processor": _cpu_model(),
                        "cpus": os.cpu_count()},
            "corpus": str(Path(corpus).resolve()), "own_level": OWN}
    path = out / "meta.json"
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("compiler_version") != meta["compiler_version"]:
            raise ValueError(f"{path}: labels of {old.get('compiler_version')}, not "
                             f"{meta['compiler_version']}: use another --out")
        return old
    atomic_write_bytes(path, json.dumps(meta, indent=2).encode())
    return meta


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def label(modules: list[Module], pipelines: list[str], labels: Labels, compiler: str, *,
          jobs: int = 2, timeout: float = 120, desc: str = "labels") -> int:
    """Measure every (module, pipeline) pair ``labels`` lacks, clang's own
    -Oz included; the number measured."""
    pipelines = [OWN] + [p for p in pipelines if p != OWN]
    todo = [(m, [p for p in pipelines if not labels.has(m.sha256, p)]) for m in modules]
    todo = [(m, ps) for m, ps in todo if ps]
    total = sum(len(ps) for _, ps in todo)
    bar = progress_bar(total, desc)

    def one(item) -> int:
        module, missing = item
        with tempfile.TemporaryDirectory(prefix="mirecc-size-") as work:
            for pipeline in missing:
                row = {"module": module.sha256}
                try:
                    row.update(measure(str(module.path), compiler, pipeline,
                                       codegen_flags(module.flags), work, timeout))
                except CandidateError as exc:
                    row["error"] = str(exc)[:300]
                labels.add(pipeline, row)
                if bar:
                    bar.update(1)
        return len(missing)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        done = sum(pool.map(one, todo))
    if bar:
        bar.close()
    return done


def progress_bar(total: int, desc: str, unit: str = "build"):
    """A tqdm bar on stderr (off when not a terminal), or None without tqdm."""
    try:
        from tqdm import tqdm  # lazy: optional by design (None without tqdm)
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=2,
                disable=None)


def export(out: Path, corpus: Path, dest: Path) -> list[Path]:
    """The labels of ``out`` as committed files under ``dest``: labels,
    pipelines and the labelled modules' origins (gzipped JSON lines), the
    meta, the search's library reports (.text and IR objectives) and the
    correctness check's report."""
    labels = Labels(out)
    labelled = {module for module, _ in labels.rows}
    modules = [{"sha256": m.sha256, "origin": m.origin, "path": m.source, "split": m.split}
               for m in corpus_modules(corpus) if m.sha256 in labelled]
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, lines in (("labels.jsonl.gz", (json.dumps(r, sort_keys=True)
                                              for r in labels.rows.values())),
                        ("pipelines.jsonl.gz", (json.dumps({"id": pipeline_id(t), "pipeline": t})
                                                 for t in sorted(set(labels.texts.values()))
                                                 if t != OWN)),
                        ("modules.jsonl.gz", (json.dumps(m, sort_keys=True) for m in modules))):
        # mtime 0: the same labels give the same bytes
        data = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
        atomic_write_bytes(dest / name, data)
        written.append(dest / name)
    for name in ("meta.json", "library-14.json", "library-19.json", "library-14-ir.json",
                 "library-19-ir.json", "check-14.json", "check-19.json"):
        if (out / name).is_file():
            shutil.copyfile(out / name, dest / name)
            written.append(dest / name)
    return written
