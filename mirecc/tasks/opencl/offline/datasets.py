"""Loaders for the downstream-task datasets, read in place (never copied).

The layout is the one IR2Vec's ``experiments/`` folder ships (see
``../shared/datasets/README.md``):

- device mapping (Cummins et al., PACT'17): ``devmap/cgo17-{amd,nvidia}.csv``
  (669 rows each), ``devmap/kernels_ir/<benchmark>[_<dataset>].ll`` and
  ``devmap/all.txt``, the order IR2Vec's folds are drawn in;
- thread coarsening (Magni et al., PACT'14): ``thread_coarsening/
  pact-2014-runtimes.csv`` (runtime per kernel, factor and GPU),
  ``pact-2014-oracles.csv`` and ``kernels_ir/<kernel>.ll``.

Protocols (as IR2Vec runs them, so that figures compare on the same folds):
device mapping uses ``StratifiedKFold(10, shuffle=True, random_state=104)``
over the rows in ``all.txt`` order, per platform; thread coarsening uses
leave-one-row-out over 17 kernels x 4 GPUs, the predicted factor capped at
the kernel's largest measured one. Both need scikit-learn only for the fold
split (``pip install 'mirecc[bench]'``).
"""
from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from mirecc.learn.datasets import default_root  # noqa: F401 - the loaders' default

PLATFORMS = ("amd", "nvidia")
#: the "static mapping" baseline device of each platform (IR2Vec, DeepTune)
STATIC_DEVICE = {"amd": "CPU", "nvidia": "GPU"}
#: thread-coarsening GPUs, in the published tables' order
GPUS = ("Cypress", "Tahiti", "Fermi", "Kepler")
#: IR2Vec's device-mapping split
DEVMAP_FOLDS, DEVMAP_SEED = 10, 104

csv.field_size_limit(1 << 24)   # the src columns hold whole kernels


class DatasetError(Exception):
    """A dataset file is missing or malformed; the message names it."""


def _read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror}") from None
    except csv.Error as exc:
        raise DatasetError(f"{path}: malformed CSV: {exc}") from None


def _listed_files(all_txt: Path) -> list[str]:
    """The IR file names of an ``all.txt`` (``FileNum ProgramName`` lines)."""
    try:
        lines = all_txt.read_text().splitlines()
    except OSError as exc:
        raise DatasetError(f"{all_txt}: cannot read: {exc.strerror}") from None
    names = []
    for n, line in enumerate(lines[1:], 2):
        parts = line.split()
        if len(parts) != 2:
            raise DatasetError(f"{all_txt}:{n}: expected 'number name', got {line!r}")
        names.append(parts[1].removeprefix("./"))
    return names


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------- device mapping

def devmap_ir_name(row: dict) -> str:
    """``benchmark[_dataset].ll``: how the IR files are named."""
    ds = row["dataset"]
    return row["benchmark"] + ("" if ds == "default" else f"_{ds}") + ".ll"


def load_devmap(root: str | Path, platform: str) -> list[dict]:
    """The device-mapping rows of one platform in ``all.txt`` order.

    Each row: ``name`` (IR file), ``ir`` (its path), ``ir_sha256`` (content:
    several rows share one kernel's IR with other data sizes), ``benchmark``,
    ``dataset``, ``transfer`` and ``wgsize`` (ints), ``oracle`` ("CPU" or
    "GPU"), ``runtime_cpu``, ``runtime_gpu`` (floats) and ``src``.
    """
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, not {platform!r}")
    root = Path(root) / "devmap" if (Path(root) / "devmap").is_dir() else Path(root)
    table = root / f"cgo17-{platform}.csv"
    by_name: dict[str, dict] = {}
    for n, raw in enumerate(_read_csv(table), 2):
        try:
            row = {"name": devmap_ir_name(raw), "benchmark": raw["benchmark"],
                   "dataset": raw["dataset"], "transfer": int(raw["transfer"]),
                   "wgsize": int(raw["wgsize"]), "oracle": raw["oracle"],
                   "runtime_cpu": float(raw["runtime_cpu"]),
                   "runtime_gpu": float(raw["runtime_gpu"]), "src": raw["src"]}
        except (KeyError, ValueError) as exc:
            raise DatasetError(f"{table}: row {n}: bad or missing column: {exc}") from None
        if row["oracle"] not in ("CPU", "GPU"):
            raise DatasetError(f"{table}: row {n}: oracle {row['oracle']!r} is not CPU or GPU")
        by_name[row["name"]] = row
    rows = []
    sha_of: dict[Path, str] = {}
    for name in _listed_files(root / "all.txt"):
        row = by_name.get(name)
        if row is None:
            raise DatasetError(f"{root / 'all.txt'}: {name} has no row in {table}")
        ir = root / "kernels_ir" / name
        if not ir.is_file():
            raise DatasetError(f"{ir}: IR file listed in all.txt is missing")
        sha_of.setdefault(ir, _sha256(ir))
        rows.append({**row, "ir": ir, "ir_sha256": sha_of[ir]})
    if len(rows) != len(by_name):
        raise DatasetError(f"{table}: {len(by_name)} rows but all.txt lists {len(rows)}")
    return rows


def devmap_folds(rows: list[dict], n_splits: int = DEVMAP_FOLDS,
                 seed: int = DEVMAP_SEED) -> list[int]:
    """Test-fold index of every row: IR2Vec's stratified split (by oracle
    device) over the rows in the given (``all.txt``) order."""
    # lazy: scikit-learn costs ~1.5 s to import; only devmap_folds() needs it
    from sklearn.model_selection import StratifiedKFold
    labels = [r["oracle"] for r in rows]
    fold = [0] * len(rows)
    split = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for k, (_, test) in enumerate(split.split([[0]] * len(rows), labels)):
        for i in test:
            fold[i] = k
    return fold


def devmap_runtime(row: dict, device: str) -> float:
    return row["runtime_gpu"] if device == "GPU" else row["runtime_cpu"]


def devmap_speedup(row: dict, device: str, platform: str) -> float:
    """Speedup of running on ``device`` over the platform's static mapping."""
    return devmap_runtime(row, STATIC_DEVICE[platform]) / devmap_runtime(row, device)


# ------------------------------------------------------- thread coarsening

def load_coarsening(root: str | Path) -> list[dict]:
    """One row per (kernel, GPU), kernels in ``all.txt`` order and GPUs in
    :data:`GPUS` order: ``kernel``, ``gpu``, ``ir``, ``ir_sha256``, ``src``,
    ``runtimes`` ({factor: runtime}), ``oracle_cf`` (the fastest factor)."""
    root = (Path(root) / "thread_coarsening" if (Path(root) / "thread_coarsening").is_dir()
            else Path(root))
    table = root / "pact-2014-runtimes.csv"
    runtimes: dict[str, dict[str, dict[int, float]]] = {}
    src: dict[str, str] = {}
    for n, raw in enumerate(_read_csv(table), 2):
        try:
            kernel, cf = raw["kernel"], int(raw["cf"])
            for gpu in GPUS:
                per_gpu = runtimes.setdefault(kernel, {}).setdefault(gpu, {})
                if raw[f"runtime_{gpu}"].strip():      # empty: not measured on that GPU
                    per_gpu[cf] = float(raw[f"runtime_{gpu}"])
        except (KeyError, ValueError) as exc:
            raise DatasetError(f"{table}: row {n}: bad or missing column: {exc}") from None
        src.setdefault(kernel, raw.get("src", ""))
    rows = []
    for name in _listed_files(root / "all.txt"):
        kernel = name.removesuffix(".ll")
        if kernel not in runtimes:
            raise DatasetError(f"{root / 'all.txt'}: {name} has no runtimes in {table}")
        ir = root / "kernels_ir" / name
        if not ir.is_file():
            raise DatasetError(f"{ir}: IR file listed in all.txt is missing")
        if any(1 not in runtimes[kernel][gpu] for gpu in GPUS):
            raise DatasetError(f"{table}: kernel {kernel} has no runtime at factor 1 on every GPU")
        sha = _sha256(ir)
        for gpu in GPUS:
            r = runtimes[kernel][gpu]
            rows.append({"kernel": kernel, "gpu": gpu, "ir": ir, "ir_sha256": sha,
                         "src": src[kernel], "runtimes": r,
                         "oracle_cf": min(r, key=lambda cf: (r[cf], cf))})
    return rows


def coarsening_speedup(row: dict, factor: int) -> float:
    """runtime(factor 1) / runtime(factor), the factor capped at the
    kernel's largest measured one (IR2Vec's protocol); a factor between
    measured ones takes the largest measured factor below it."""
    measured = sorted(row["runtimes"])
    usable = [cf for cf in measured if cf <= factor] or measured[:1]
    return row["runtimes"][1] / row["runtimes"][usable[-1]]
