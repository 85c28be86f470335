"""Per-function "compiler feedback" vectors: what a fixed set of pipelines
does to each defined function of a module, as labels for the encoder.

    vecs = function_outcomes("m.bc")          # {"saxpy": float32[len(OUTCOMES)], ...}
    python -m mirecc.encoder.feedback --corpus .work/corpus --out .work/fb-labels.jsonl --jobs 2

The input is front-end IR (``clang -O? -Xclang -disable-llvm-passes
-emit-llvm``, .bc or .ll), compiled as it is by clang 14 (``clang-14 -O3 -c
m.bc``) for the module's own target: mirecc's corpora are x86-64, and an
object of another machine is an error.  Every value is ``log2(1 + x)``, x a
count or a byte size, and a function the pipeline removed (inlined away,
unused) reads 0.  The columns, in :data:`OUTCOMES` order:

``size_O1`` ``size_O2`` ``size_O3`` ``size_Os`` ``size_Oz``
    machine-code bytes of the function (its ELF symbol's size) in the object
    of ``clang-14 -O<l> -c -ffunction-sections -fno-asynchronous-unwind-tables``.
``loop_vectorized`` ... ``loop_vectorize_missed``
    optimization remarks of the ``-O3`` compile (``-fsave-optimization-record``,
    the same run that gives ``size_O3``) whose ``Function:`` is this one, by
    the table :data:`REMARK_COLUMNS`: passed ``loop-vectorize`` (loops
    vectorized or interleaved), ``slp-vectorizer``, ``loop-unroll`` (full,
    partial or runtime), ``licm`` (hoisted, sunk, promoted), ``inline`` and
    ``always-inline`` (calls inlined *into* this function), ``gvn`` (loads
    eliminated or PRE'd); missed ``loop-vectorize`` (loops it could not or
    would not vectorize).  Remarks name the function the pass ran on, so a
    static helper keeps the remarks of its own optimization before it was
    inlined away.
``polly_scops``
    SCoPs Polly builds at ``-O3 -mllvm -polly`` (its default, profitable
    regions only): ``polly-scops`` remarks ``ScopEnd`` that read "SCoP ends
    here." (not "... but was dismissed.").  That compile adds
    ``-mllvm -polly-code-generation=none`` and stops at IR: Polly's code
    generation makes ScopInfo run again on the regions it wrote and repeat
    the remarks (matmul reads 2, not 1); detection and modelling, which
    happen first, are unchanged.
``instructions_O0``
    instructions of the function in the input module itself (a size anchor:
    > 0 for every defined function, removed or not).

Cost: 5 object compiles, one Polly compile to IR and one ``llvm-dis-14``
per module, each under a timeout (:data:`COMPILE_TIMEOUT`).
:func:`function_outcomes` raises :class:`FeedbackError` (a ValueError that
names the file) when one fails or runs out of time.

The labeller (:func:`main`) writes JSON lines: first ``{"meta": {...}}``
(the columns, the clang version, the flags), then one line per module,
``{"sha": ..., "functions": {name: [floats]}}`` or ``{"sha": ..., "error":
...}``.  It appends, skips modules already written (errors included: a
compile that fails, fails again), drops a partial last line left by a kill,
and refuses a file whose meta names other columns or another clang.
:func:`load_labels` reads the file back.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import yaml
from tqdm import tqdm

from mirecc.encoder.data import CorpusIndex
from mirecc.ir.text import IRTextError, disassemble, functions
from mirecc.util.elf import elf_sections

#: bump when a column's meaning or a compile's flags change (meta "version")
FEEDBACK_VERSION = 1
#: seconds one compile may take before the module is recorded as an error
COMPILE_TIMEOUT = 60.0

#: the size pipelines, in column order
LEVELS = ("-O1", "-O2", "-O3", "-Os", "-Oz")
#: the level whose compile also writes the optimization remarks
REMARKS_LEVEL = "-O3"
#: flags of every object compile (after the level)
OBJECT_FLAGS = ("-c", "-ffunction-sections", "-fno-asynchronous-unwind-tables")
#: the Polly compile: detection and modelling only (see the module docstring)
POLLY_FLAGS = ("-O3", "-mllvm", "-polly", "-mllvm", "-polly-code-generation=none",
               "-S", "-emit-llvm")

#: remark columns of the -O3 compile: column -> (remark kind, passes).
#: Every remark of that kind from those passes counts once for its Function.
REMARK_COLUMNS = {
    "loop_vectorized": ("Passed", ("loop-vectorize",)),     # Vectorized, Interleaved
    "slp_vectorized": ("Passed", ("slp-vectorizer",)),      # VectorizedList, StoresVectorized...
    "loop_unrolled": ("Passed", ("loop-unroll",)),          # FullyUnrolled, PartialUnrolled...
    "licm": ("Passed", ("licm",)),                          # Hoisted, InstSunk, PromoteLoop...
    "inlined_into": ("Passed", ("inline", "always-inline")),  # named by the caller
    "gvn": ("Passed", ("gvn",)),                            # LoadElim, LoadPRE
    "loop_vectorize_missed": ("Missed", ("loop-vectorize",)),  # MissedDetails...
}

#: the columns of every vector, in order (declared once: the labels file's
#: meta carries them, and a model's head is sized by them)
OUTCOMES: tuple[str, ...] = (
    *(f"size_{lvl[1:]}" for lvl in LEVELS),
    *REMARK_COLUMNS,
    "polly_scops",
    "instructions_O0",
)

_EM_X86_64 = 62
_SHT_SYMTAB = 2
_STT_FUNC = 2
_SYM64 = struct.Struct("<IBBHQQ")   # st_name, st_info, st_other, st_shndx, st_value, st_size


class FeedbackError(ValueError):
    """A module that does not compile (or not in time); ``str()`` names it."""


# ------------------------------------------------------------ one module

def function_outcomes(ir_path: str | os.PathLike, clang: str = "clang-14",
                      tmpdir: str | os.PathLike | None = None,
                      timeout: float = COMPILE_TIMEOUT) -> dict[str, np.ndarray]:
    """Defined function (its LLVM name, as in ``define``) -> float32 vector
    of ``len(OUTCOMES)`` (see the module docstring), in module order.

    Args:
        ir_path: front-end IR, ``.bc`` or ``.ll``.
        clang: the compiler (a clang 14 with Polly for ``polly_scops``).
        tmpdir: where the objects and remark files go (a fresh directory
            under it, removed afterwards); the system's default if None.
        timeout: seconds per compile.

    Raises:
        FeedbackError: the IR cannot be read, a compile fails or runs out of
            time, or the object is not x86-64 ELF.
    """
    ir_path = Path(ir_path)
    instructions = _instruction_counts(ir_path, timeout)
    with tempfile.TemporaryDirectory(prefix="mirecc-feedback-", dir=tmpdir) as tmp:
        tmp = Path(tmp)
        sizes = {}
        remarks_yaml = tmp / "remarks.yaml"
        for level in LEVELS:
            obj = tmp / f"out{level}.o"
            extra = ()
            if level == REMARKS_LEVEL:
                passes = sorted({p for _, ps in REMARK_COLUMNS.values() for p in ps})
                extra = ("-fsave-optimization-record",
                         f"-foptimization-record-file={remarks_yaml}",
                         f"-foptimization-record-passes=^({'|'.join(passes)})$")
            _compile(clang, ir_path, [level, *OBJECT_FLAGS, *extra], obj, timeout, level)
            sizes[level] = _function_sizes(obj.read_bytes(), ir_path)
        o3_remarks = _read_remarks(remarks_yaml)
        polly_yaml = tmp / "polly.yaml"
        _compile(clang, ir_path, [*POLLY_FLAGS, "-fsave-optimization-record",
                                  f"-foptimization-record-file={polly_yaml}",
                                  "-foptimization-record-passes=^polly-scops$"],
                 os.devnull, timeout, "Polly")
        polly_remarks = _read_remarks(polly_yaml)

    counts: Counter = Counter()          # (function, column) -> count
    wanted = {(kind, p): col for col, (kind, ps) in REMARK_COLUMNS.items() for p in ps}
    for kind, pass_, name, function, text in o3_remarks:
        col = wanted.get((kind, pass_))
        if col is not None:
            counts[function, col] += 1
    for kind, pass_, name, function, text in polly_remarks:
        if pass_ == "polly-scops" and name == "ScopEnd" and "dismissed" not in text:
            counts[function, "polly_scops"] += 1

    out = {}
    for fn, n_inst in instructions.items():
        sym = fn.lstrip("\x01")          # "\01name": the name as written, no mangling
        raw = [sizes[lvl].get(sym, 0) for lvl in LEVELS]
        raw += [counts[fn, col] for col in REMARK_COLUMNS]
        raw += [counts[fn, "polly_scops"], n_inst]
        out[fn] = np.log2(1.0 + np.asarray(raw, dtype=np.float64)).astype(np.float32)
    return out


def _compile(clang: str, ir_path: Path, flags: list, out, timeout: float, what: str) -> None:
    """Run ``clang flags ir_path -o out``; FeedbackError (``what`` compile
    failed / ran over) otherwise."""
    cmd = [clang, *flags, str(ir_path), "-o", str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FeedbackError(f"{ir_path}: {what} compile ran over {timeout:g} s") from None
    except OSError as exc:
        raise FeedbackError(f"{ir_path}: cannot run {clang}: {exc}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        tail = " | ".join(err[-3:])[:400]
        raise FeedbackError(f"{ir_path}: {what} compile failed (exit {proc.returncode}): {tail}")


_COMMENT = re.compile(r"\s*;.*$")


def _instruction_counts(ir_path: Path, timeout: float) -> dict[str, int]:
    """Defined function -> instruction lines of its body (labels, blanks and
    comments out), in module order."""
    try:
        if ir_path.suffix == ".ll":
            text = ir_path.read_text(encoding="utf-8", errors="replace")
        else:
            text = disassemble(ir_path.read_bytes(), str(ir_path))
    except (OSError, IRTextError, subprocess.TimeoutExpired) as exc:
        raise FeedbackError(f"{ir_path}: cannot read the IR: {exc}") from None
    return {name: sum(1 for line in body
                      if line[:1] in (" ", "\t") and _COMMENT.sub("", line).strip())
            for name, _, body in functions(text)}


def _function_sizes(data: bytes, ir_path: Path) -> dict[str, int]:
    """Symbol name -> st_size of each defined function symbol of an x86-64
    ELF object."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 \
            or struct.unpack_from("<H", data, 0x12)[0] != _EM_X86_64:
        raise FeedbackError(f"{ir_path}: the object is not x86-64 ELF")
    try:
        sections = elf_sections(data)
        sizes: dict[str, int] = {}
        for sh in sections:
            if sh[1] != _SHT_SYMTAB:
                continue
            offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9] or _SYM64.size
            str_off = sections[link][4]
            for pos in range(offset, offset + size, entsize):
                st_name, st_info, _, shndx, _, st_size = _SYM64.unpack_from(data, pos)
                if st_info & 0xF != _STT_FUNC or shndx == 0:
                    continue
                end = data.index(b"\0", str_off + st_name)
                name = data[str_off + st_name:end].decode("utf-8", "replace")
                sizes[name] = max(sizes.get(name, 0), st_size)
    except (struct.error, IndexError, ValueError):
        raise FeedbackError(f"{ir_path}: unreadable symbol table in the object") from None
    return sizes


def _scalar(value: str) -> str:
    """A YAML scalar as LLVM writes it: plain, 'single' or "double" quoted."""
    if value[:1] in ("'", '"'):
        try:
            return str(yaml.safe_load(value))
        except yaml.YAMLError:
            return value.strip("'\"")
    return value


def _read_remarks(path: Path) -> list[tuple[str, str, str, str, str]]:
    """(kind, pass, name, function, first String argument) of each remark in
    an LLVM remarks YAML file; [] when clang wrote none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for doc in text.split("\n--- !"):
        head, _, body = doc.lstrip("-! ").partition("\n")
        fields = {}
        for line in body.splitlines():
            if line[:1] not in (" ", "") and ":" in line:
                key, _, value = line.partition(":")
                fields.setdefault(key, _scalar(value.strip()))
            elif line.startswith("  - String:") and "String" not in fields:
                fields["String"] = _scalar(line.partition(":")[2].strip())
        if "Pass" in fields and "Function" in fields:
            out.append((head.strip(), fields["Pass"], fields.get("Name", ""),
                        fields["Function"], fields.get("String", "")))
    return out


def clang_version(clang: str = "clang-14") -> str:
    """First line of ``clang --version`` (what the labels file's meta names)."""
    proc = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=30)
    return proc.stdout.splitlines()[0].strip() if proc.returncode == 0 and proc.stdout else clang


# ------------------------------------------------------------- labeller

def meta(clang: str) -> dict:
    """The first line of a labels file: what its vectors mean."""
    return {"outcomes": list(OUTCOMES), "version": FEEDBACK_VERSION,
            "clang": clang_version(clang), "transform": "log2(1+x)",
            "levels": list(LEVELS), "object_flags": list(OBJECT_FLAGS),
            "remarks_level": REMARKS_LEVEL,
            "remark_columns": {c: [k, list(p)] for c, (k, p) in REMARK_COLUMNS.items()},
            "polly_flags": list(POLLY_FLAGS)}


def _recover(out: Path) -> tuple[dict | None, set[str]]:
    """(meta, shas written) of an existing labels file; a partial last line
    (a kill mid-write) is cut off first, lines that do not parse are skipped."""
    if not out.exists():
        return None, set()
    data = out.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with open(out, "r+b") as fh:
            fh.truncate(end)
        data = data[:end]
    head, shas = None, set()
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "meta" in rec and head is None:
            head = rec["meta"]
        elif isinstance(rec, dict) and isinstance(rec.get("sha"), str):
            shas.add(rec["sha"])
    return head, shas


def label_record(sha: str, ir_path: str, clang: str = "clang-14",
                 timeout: float = COMPILE_TIMEOUT, tmpdir: str | None = None) -> dict:
    """One module's labels line: ``{"sha", "functions"}`` or ``{"sha", "error"}``."""
    try:
        vecs = function_outcomes(ir_path, clang=clang, tmpdir=tmpdir, timeout=timeout)
    except FeedbackError as exc:
        return {"sha": sha, "error": str(exc)}
    return {"sha": sha, "functions": {name: [round(float(v), 4) for v in vec]
                                      for name, vec in vecs.items()}}


def _label_job(job: tuple) -> tuple[dict, float]:
    t0 = time.perf_counter()
    return label_record(*job), time.perf_counter() - t0


def label_corpus(corpus: str | os.PathLike, out: str | os.PathLike, jobs: int = 2,
                 limit: int | None = None, clang: str = "clang-14",
                 timeout: float = COMPILE_TIMEOUT, progress: bool = True) -> dict:
    """Label the modules of ``corpus`` not yet in ``out`` (at most ``limit``
    of them, in sha order); returns counts (``labelled``, ``errors``,
    ``skipped``: already there, ``seconds``: summed per module)."""
    clang = shutil.which(clang) or clang
    out = Path(out)
    index = CorpusIndex(corpus)
    head, done = _recover(out)
    mine = meta(clang)
    if head is not None:
        for key in ("outcomes", "version", "clang"):
            if head.get(key) != mine[key]:
                raise SystemExit(f"{out}: written with another {key} ({head.get(key)!r}, "
                                 f"now {mine[key]!r}); label into a new file")
    todo = [sha for sha in sorted(index.records) if sha not in done]
    if limit is not None:
        todo = todo[:max(limit, 0)]
    stats = {"labelled": 0, "errors": 0, "skipped": len(done & index.records.keys()),
             "seconds": 0.0}
    out.parent.mkdir(parents=True, exist_ok=True)
    job_list = [(sha, str(index.ir_path(sha)), clang, timeout) for sha in todo]
    bar = tqdm(total=len(todo), unit="module", file=sys.stderr, disable=not progress or None,
               mininterval=1.0)
    with open(out, "ab") as fh:
        if head is None:
            _append(fh, json.dumps({"meta": mine}))
        if jobs <= 1:
            results = map(_label_job, job_list)
            pool = None
        else:
            pool = ProcessPoolExecutor(max_workers=jobs)
            results = pool.map(_label_job, job_list, chunksize=1)
        try:
            for rec, seconds in results:
                _append(fh, json.dumps(rec))
                stats["errors" if "error" in rec else "labelled"] += 1
                stats["seconds"] += seconds
                bar.update(1)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
    return stats


def _append(fh, line: str) -> None:
    """One complete line in one write, flushed (a kill leaves whole lines,
    or a partial last one that the next run cuts off)."""
    fh.write(line.encode("utf-8") + b"\n")
    fh.flush()


def load_labels(path: str | os.PathLike
                ) -> tuple[tuple[str, ...], dict[str, dict[str, np.ndarray]]]:
    """(outcomes, sha -> function -> float32 vector) of a labels file;
    modules with an error are left out."""
    outcomes, labels = OUTCOMES, {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "meta" in rec:
                outcomes = tuple(rec["meta"]["outcomes"])
            elif "functions" in rec:
                labels[rec["sha"]] = {name: np.asarray(v, dtype=np.float32)
                                      for name, v in rec["functions"].items()}
    return outcomes, labels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mirecc.encoder.feedback",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="corpus directory (manifest.jsonl + ir/)")
    p.add_argument("--out", required=True, help="labels file (JSON lines), appended to")
    p.add_argument("--jobs", type=int, default=2, help="modules labelled at once (default 2)")
    p.add_argument("--limit", type=int, default=None,
                   help="label at most N modules not yet in --out this run")
    p.add_argument("--clang", default="clang-14", help="the clang 14 to compile with")
    p.add_argument("--timeout", type=float, default=COMPILE_TIMEOUT,
                   help=f"seconds per compile (default {COMPILE_TIMEOUT:g})")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    stats = label_corpus(args.corpus, args.out, jobs=args.jobs, limit=args.limit,
                         clang=args.clang, timeout=args.timeout)
    n = stats["labelled"] + stats["errors"]
    per = stats["seconds"] / n if n else math.nan
    print(f"labelled {stats['labelled']}, errors {stats['errors']}, already there "
          f"{stats['skipped']}; {time.perf_counter() - t0:.1f} s wall, {per:.2f} s per module",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
