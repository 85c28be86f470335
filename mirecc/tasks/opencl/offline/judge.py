"""The OpenCL tasks' rankings for ``mire bench encoder``
(:mod:`mirecc.learn.judge`), on the published data (``../shared/datasets``).

- Thread coarsening: a case is a (kernel, GPU) of the PACT'14 runtimes, its
  candidates the factors timed beside factor 1 (the baseline); statistics:
  Magni's features of the uncoarsened kernel (the dataset's PCA1..7 of
  factor 1's row); every kernel's four GPUs held out together.
- Device mapping: a case is a (kernel, data size) of one platform, its one
  candidate the device the static mapping does not use (AMD: the GPU,
  NVIDIA: the CPU); statistics: Grewe et al.'s features (the dataset's
  ``comp`` ... ``wgsize``); ten folds grouped by program (a benchmark
  suite's program, all its kernels and sizes held out together).

Both rank with the same forest (:func:`mirecc.learn.judge.forest_rankings`):
every representation reads the task's own numbers (GPU, transfer and
work-group size) beside its vector, as the shipped heads do.
"""
from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path


from mirecc.learn.datasets import default_root
from mirecc.learn.embeddings import representation_vectors
from mirecc.learn.judge import Judged, forest_rankings
from mirecc.tasks.opencl.offline import datasets as D
from mirecc.tasks.opencl.offline.run_bench import labels

_KERNEL = re.compile(r"^define\s+(?:[^@]*\s)?spir_kernel\s[^@]*@([\w.$]+)\(", re.M)
FACTORS = (2, 4, 8, 16, 32)
GPUS = ("Cypress", "Tahiti", "Fermi", "Kepler")


@dataclass
class Case:
    program: str
    speed: dict
    bad: set = field(default_factory=set)
    stats: list = field(default_factory=list)
    task: list = field(default_factory=list)   # the task's own numbers
    ir: str = ""
    kernels: tuple = ()

    @property
    def oracle(self) -> float:
        return max([1.0, *self.speed.values()])


def kernels(ir_text: str) -> tuple:
    return tuple(_KERNEL.findall(ir_text))


def _vectors(kinds, cases, out: Path, models) -> dict:
    return representation_vectors(kinds, [c.ir for c in cases], [c.kernels for c in cases],
                                  out / "embeddings", models)


#: this machine's labels: the median launch time per factor of the published
#: kernels that run here, as ``mire bench opencl`` wrote them (pocl on the CPU)
HERE_LABELS = Path(__file__).resolve().parents[4] / "docs" / "results" / "opencl-run.json"
PUBLISHED = " (published)"


def here_labels(path: Path = HERE_LABELS) -> tuple[str, dict[str, dict[int, float]]]:
    """(the device, dataset kernel -> {factor: launch seconds}) from ``mire
    bench opencl``'s data; ('', {}) without it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "", {}
    device = str(data.get("device", "this machine")).split(" (")[0]
    return device, {name.removesuffix(PUBLISHED): f
                    for name, f in labels(data.get("programs", [])).items()
                    if name.endswith(PUBLISHED)}


def judged_coarsening(kinds, out: Path, models: dict):
    """The published GPUs' cases and this machine's (pocl's labels of the
    published kernels that run here, a fifth device): one table for all,
    one for this machine's cases alone (their kernels held out as before,
    trained on every other kernel's cases on every device)."""
    root = default_root() / "thread_coarsening"
    rows = list(csv.DictReader(open(root / "pact-2014-runtimes.csv", newline="")))
    by: dict[str, dict] = {}
    for r in rows:
        by.setdefault(r["kernel"], {})[int(r["cf"])] = r
    here, measured = here_labels()
    devices = len(GPUS) + (1 if measured else 0)
    cases, mine = [], []
    for kernel, runs in sorted(by.items()):
        base = runs[1]
        ir = (root / "kernels_ir" / f"{kernel}.ll").read_text()
        stats = [float(base[f"PCA{i}"]) for i in range(1, 8)]
        for g, gpu in enumerate(GPUS):
            if not base[f"runtime_{gpu}"]:
                continue
            t1 = float(base[f"runtime_{gpu}"])
            speed = {cf: t1 / float(runs[cf][f"runtime_{gpu}"]) for cf in FACTORS
                     if cf in runs and runs[cf][f"runtime_{gpu}"]}
            cases.append(Case(kernel, speed, stats=stats,
                              task=[float(g == i) for i in range(devices)], ir=ir,
                              kernels=kernels(ir)))
        f = measured.get(kernel)
        if f and f.get(1):
            mine.append(len(cases))
            cases.append(Case(kernel, {cf: f[1] / f[cf] for cf in FACTORS if f.get(cf)},
                              stats=stats, task=[float(i == len(GPUS)) for i in range(devices)],
                              ir=ir, kernels=kernels(ir)))
    emb = _vectors(kinds, cases, out, models)

    def rank(kinds, fraction=1.0, draw=0):
        return forest_rankings(cases, kinds, emb, lambda c: list(c.speed),
                               lambda cf: [math.log2(cf)], fraction=fraction, draw=draw)

    def rank_here(kinds, fraction=1.0, draw=0):
        full = rank(kinds, fraction, draw)
        return {k: {n: r[i] for n, i in enumerate(mine)} for k, r in full.items()}

    ranked = rank(kinds)
    name = "OpenCL thread coarsening (published GPUs" + (f" and {here})" if mine else ")")
    out_ = [Judged(name, cases, ranked, 0.0, len(FACTORS),
                   f"{len(cases)} cases: {len(by)} kernels x {len(GPUS)} GPUs of the PACT'14 "
                   f"runtimes (Magni et al.)" + (f" and {len(mine)} kernels timed here on "
                                                 f"{here} (`mire bench opencl`)" if mine else "")
                   + "; speedup over factor 1; each kernel's devices held out together; "
                   "statistics: Magni's features of the kernel (PCA1..7)", refit=rank)]
    if mine:
        out_.append(Judged(
            f"OpenCL thread coarsening ({here}, this machine)", [cases[i] for i in mine],
            {k: {n: r[i] for n, i in enumerate(mine)} for k, r in ranked.items()}, 0.0,
            len(FACTORS),
            f"{len(mine)} published kernels timed here (`mire bench opencl`'s labels: median "
            f"launch time per factor, outputs equal), each held out with its GPU cases, the "
            f"rankings trained on every other kernel's cases on all five devices; speedup "
            f"over factor 1; statistics: Magni's features (PCA1..7)", refit=rank_here))
    return out_


def judged_devmap(kinds, out: Path, models: dict) -> list:
    """Both platforms' device mapping."""
    return [judged_platform(kinds, out, models, p) for p in D.PLATFORMS]


def judged_platform(kinds, out: Path, models: dict, platform: str):
    rows = D.load_devmap(default_root() / "devmap", platform)
    static = "CPU" if platform == "amd" else "GPU"
    other = "GPU" if static == "CPU" else "CPU"
    texts: dict[Path, str] = {}
    grewe = ("comp", "rational", "mem", "localmem", "coalesced", "atomic")
    raw = {D.devmap_ir_name(r): r for r in
           csv.DictReader(open(default_root() / "devmap" / f"cgo17-{platform}.csv", newline=""))}
    cases = []
    for r in rows:
        ir = texts.setdefault(r["ir"], Path(r["ir"]).read_text())
        speed = {other: D.devmap_runtime(r, static) / D.devmap_runtime(r, other)}
        extra = [math.log1p(r["transfer"]), math.log1p(r["wgsize"])]
        cases.append(Case(r["benchmark"].rsplit("-", 1)[0], speed,
                          stats=[float(raw[r["name"]][k]) for k in grewe], task=extra,
                          ir=ir,
                          kernels=kernels(ir)))
    emb = _vectors(kinds, cases, out, models)
    def rank(kinds, fraction=1.0, draw=0):
        return forest_rankings(cases, kinds, emb, lambda c: list(c.speed), lambda d: [],
                               folds=10, fraction=fraction, draw=draw)

    return Judged(f"OpenCL device mapping ({platform.upper()})", cases, rank(kinds), 0.0, 1,
                  f"{len(cases)} cases (kernel x data size) of "
                  f"{len({c.program for c in cases})} programs (Cummins et al.'s "
                  f"{platform.upper()} platform); speedup over the static mapping "
                  f"({static}); ten folds grouped by program; statistics: Grewe et al.'s "
                  f"features with transfer and work-group size", refit=rank)
