"""The programs of the OpenMP dataset: PolyBench-ACC's OpenMP programs (read in
place from ``../shared/datasets/polybench-acc/OpenMP``) and the generated
kernel families of :mod:`.kernels`.

A program is built from one source file whose regions are decided (the
decisions file names it as the module), plus support sources that never are
(PolyBench's ``utilities/polybench.c``). Input sizes are PolyBench's macros
(``-DSMALL_DATASET`` ...), which the generated kernels follow too. PolyBench
programs are built with ``-DPOLYBENCH_TIME`` (the kernel's time, in seconds,
on stdout) and ``-DPOLYBENCH_DUMP_ARRAYS`` (the output arrays on stderr,
the output that is checked); the kernels print ``time <s>`` and
``checksum <hex>``: :func:`parse_output` reads both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mirecc.learn.datasets import default_root
from mirecc.tasks.openmp.offline import kernels

#: PolyBench's dataset macros, smallest first (-D<SIZE>_DATASET)
SIZES = ("MINI", "SMALL", "STANDARD", "LARGE")
DEFAULT_SIZES = ("SMALL", "STANDARD")
POLYBENCH_DEFINES = ("-DPOLYBENCH_TIME", "-DPOLYBENCH_DUMP_ARRAYS")


@dataclass(frozen=True)
class Program:
    name: str
    suite: str                       # "polybench" | "kernels"
    group: str                       # PolyBench category, or the kernel family
    source: Path                     # the one source whose regions are decided
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    support: tuple[Path, ...] = ()   # other sources linked in, never decided
    deps: tuple[Path, ...] = ()      # every file whose content makes the binary
    libs: tuple[str, ...] = ("-lm",)
    params: tuple = ()               # (key, value) pairs of a generated kernel

    def flags(self, size: str) -> list[str]:
        """Front-end flags of the program's source and support sources at
        ``size`` (not the optimisation level, not -fopenmp)."""
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r} (known: {', '.join(SIZES)})")
        return [*self.defines, f"-D{size}_DATASET", *(f"-I{d}" for d in self.include_dirs)]


def polybench_root() -> Path:
    """``polybench-acc/OpenMP`` of the datasets folder (``$MIRECC_DATASETS``,
    else ``../shared/datasets`` beside the checkout)."""
    return default_root() / "polybench-acc" / "OpenMP"


def polybench_programs(root: Path | str | None = None) -> list[Program]:
    """The programs of ``utilities/benchmark_list``, in its order."""
    root = Path(root) if root else polybench_root()
    listing = root / "utilities" / "benchmark_list"
    try:
        entries = [ln.strip() for ln in listing.read_text().splitlines() if ln.strip()]
    except OSError as exc:
        raise ValueError(f"PolyBench-ACC OpenMP not found: {listing}: {exc.strerror} "
                         f"(set MIRECC_DATASETS to the datasets folder)") from None
    util = root / "utilities"
    out = []
    for entry in entries:
        src = (root / entry).resolve()
        pdir = src.parent
        deps = sorted(p for p in pdir.iterdir() if p.suffix in (".c", ".h"))
        out.append(Program(
            name=src.stem, suite="polybench", group=str(pdir.parent.relative_to(root.resolve())),
            source=src, include_dirs=(util, pdir), defines=POLYBENCH_DEFINES,
            support=(util / "polybench.c",),
            deps=(*deps, util / "polybench.c", util / "polybench.h")))
    return out


def kernel_programs(kernel_dir: Path | str, seed: int = 0, per_family: int | None = None,
                    families: list[str] | None = None) -> list[Program]:
    """Write the generated kernels into ``kernel_dir``; their programs."""
    kernel_dir = Path(kernel_dir).resolve()
    recs = kernels.write_kernels(kernel_dir, seed, per_family or kernels.DEFAULT_PER_FAMILY,
                                 families)
    return [Program(name=r["name"], suite="kernels", group=r["family"],
                    source=kernel_dir / r["file"], deps=(kernel_dir / r["file"],),
                    params=tuple(sorted(r["params"].items())))
            for r in recs]


def select(programs: list[Program], names: list[str] | None) -> list[Program]:
    """Those named (all when ``names`` is None); an unknown name is an error."""
    if not names:
        return programs
    by = {p.name: p for p in programs}
    unknown = [n for n in names if n not in by]
    if unknown:
        raise ValueError(f"unknown program(s): {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(by))})")
    return [by[n] for n in names]


_TIME = re.compile(r"^(?:time\s+)?([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*$")


def parse_output(stdout: str, stderr: str) -> tuple[float | None, bytes]:
    """(the kernel time in seconds, the output to check): the time is the last
    stdout line that is ``time <s>`` or a bare number (PolyBench's
    ``POLYBENCH_TIME``); the output is everything else, stdout then stderr."""
    lines = stdout.splitlines()
    t, at = None, None
    for i in range(len(lines) - 1, -1, -1):
        m = _TIME.match(lines[i].strip())
        if m:
            t, at = float(m.group(1)), i
            break
    rest = [ln for i, ln in enumerate(lines) if i != at]
    return t, ("\n".join(rest) + "\n\x00stderr\n" + stderr).encode()
