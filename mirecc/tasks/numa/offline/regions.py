"""The published regions of the NUMA/prefetcher dataset, mapped to the IR
of their programs.

A region is named ``__cere__<file>_<function>_<line>``: the file (its stem,
or its path from the program's folder with ``/`` and ``.`` written ``_``),
the function and the line of its ``#pragma omp parallel``.  The sources in
``sources/`` are compiled as their makefiles do, with ``-fopenmp -g`` (the
IR as clang emits it before optimisation, as the OpenMP task reads it), and
a region maps to the ``__kmpc_fork_call`` whose debug location is that file
and line; its outlined function is the region's code.  A region whose file
is not among the sources, or whose line holds no parallel region, or holds
several, is reported with the reason, never guessed.

NPB's programs include ``npbparams.h``, which its ``sys/setparams`` writes
per benchmark and class: it is generated here for :data:`NPB_CLASS` (the
class changes array sizes, not the regions' code), with NPB's
``config/make.def.template`` as the ``make.def`` it reads.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from mirecc.ir.regions import Site, emit_ir, find_sites

PREFIX = "__cere__"
SOURCE_SUFFIXES = (".c", ".cpp")
NPB = "npb3.0-omp-c"
NPB_CLASS = "A"
# the optimisation level of the programs' makefiles
CFLAGS = ["-O3", "-fopenmp", "-g"]
# what a program's makefile adds (cfd/makefile: -Dblock_length=$(OMP_NUM_THREADS), 8)
PROGRAM_FLAGS = {"rodinia-3.1-openmp/cfd": ["-Dblock_length=8"]}


class RegionsError(Exception):
    """The dataset is missing or malformed; the message names the file."""


@dataclass
class Region:
    name: str                        # as in labels/region
    line: int | None = None
    source: str | None = None        # relative to sources/
    function: str | None = None      # as named in the region name
    site: str | None = None          # the fork call's id ("<function>:<index>")
    outlined: str | None = None      # the region's outlined function
    ir: str | None = None            # the module's IR file, relative to the output
    why: str | None = None           # not mapped: the reason

    @property
    def mapped(self) -> bool:
        return self.outlined is not None

    def to_dict(self) -> dict:
        return asdict(self)


def read_region_names(dataset: Path) -> list[str]:
    path = dataset / "labels" / "region"
    try:
        names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except OSError as exc:
        raise RegionsError(f"{path}: cannot read: {exc.strerror}") from None
    bad = [n for n in names if not n.startswith(PREFIX) or not n.rsplit("_", 1)[-1].isdigit()]
    if bad:
        raise RegionsError(f"{path}: not a region name: {bad[0]!r} (expected "
                           f"{PREFIX}<file>_<function>_<line>)")
    return names


def program_of(source: Path, sources: Path) -> Path:
    """The program folder of a source file: the first two levels under
    ``sources/`` (``npb3.0-omp-c/CG``, ``rodinia-3.1-openmp/lavaMD``)."""
    rel = source.relative_to(sources)
    return sources / rel.parts[0] / rel.parts[1]


def file_keys(source: Path, program: Path) -> set[str]:
    """How a region name may spell ``source``: its stem, or its path from
    the program folder (``./kernel/kernel_cpu.c`` -> ``__kernel_kernel_cpu``)."""
    rel = "./" + source.relative_to(program).with_suffix("").as_posix()
    return {source.stem, rel.replace("/", "_").replace(".", "_")}


def source_files(sources: Path) -> list[Path]:
    return sorted(p for p in sources.rglob("*") if p.suffix in SOURCE_SUFFIXES
                  and p.is_file() and len(p.relative_to(sources).parts) > 2)


def candidates(name: str, sources: Path, files: list[Path]) -> list[tuple[Path, str, int]]:
    """(source, function, line) readings of a region name, one per source
    file whose spelling begins it."""
    rest, line = name[len(PREFIX):].rsplit("_", 1)
    out = []
    for path in files:
        for key in file_keys(path, program_of(path, sources)):
            if rest.startswith(key + "_"):
                out.append((path, rest[len(key) + 1:], int(line)))
                break
    return out


def npb_params(sources: Path, program: Path, cc: str, work: Path) -> Path:
    """A folder holding the ``npbparams.h`` of NPB ``program`` (class
    :data:`NPB_CLASS`), written by NPB's own ``setparams``."""
    out = work / "npbparams" / program.name
    if (out / "npbparams.h").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    make_def = work / "npbparams" / "config" / "make.def"     # setparams reads ../config
    if not make_def.is_file():
        make_def.parent.mkdir(exist_ok=True)
        make_def.write_text((sources / NPB / "config" / "make.def.template").read_text())
    setparams = work / "npbparams" / "setparams"
    if not setparams.is_file():
        _run([cc, "-O1", str(sources / NPB / "sys" / "setparams.c"), "-o", str(setparams)],
             "setparams")
    _run([str(setparams), program.name.lower(), NPB_CLASS], f"setparams {program.name}",
         cwd=out)
    return out


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RegionsError(f"{what}: {exc}") from None
    if p.returncode != 0:
        raise RegionsError(f"{what}: {' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")


def compile_flags(source: Path, sources: Path, cc: str, work: Path) -> list[str]:
    """The flags of ``source``'s compile: the makefiles' -O3, -fopenmp and
    -g, the source's folder and program folder, NPB's common headers and
    generated parameters."""
    program = program_of(source, sources)
    flags = [*CFLAGS, *PROGRAM_FLAGS.get(program.relative_to(sources).as_posix(), []),
             f"-I{source.parent}", f"-I{program}"]
    if source.relative_to(sources).parts[0] == NPB:
        flags += [f"-I{sources / NPB / 'common'}", f"-I{npb_params(sources, program, cc, work)}"]
    return flags


def map_regions(dataset: Path, out: Path, cc: str, cxx: str) -> list[Region]:
    """Every region of ``dataset`` mapped to its IR (written under
    ``out/ir``) or given the reason it is not."""
    sources, out = (dataset / "sources").resolve(), out.resolve()
    if not sources.is_dir():
        raise RegionsError(f"{sources}: no program sources")
    files = source_files(sources)
    names = read_region_names(dataset)
    modules: dict[Path, list[Site] | str] = {}
    regions = []
    for name in names:
        region = Region(name, line=int(name.rsplit("_", 1)[1]))
        readings = candidates(name, sources, files)
        if not readings:
            region.why = "no source file of that name in sources/"
            regions.append(region)
            continue
        matches = []
        for path, function, line in readings:
            if path not in modules:
                modules[path] = _sites(path, sources, cc, cxx, out)
            sites = modules[path]
            if isinstance(sites, str):
                region.why = sites
                continue
            here = [s for s in sites if s.kind == "parallel" and s.location
                    and s.location.rsplit(":", 1)[-1] == str(line)
                    and Path(s.location.rsplit(":", 1)[0]).name == path.name]
            matches += [(path, function, s) for s in here]
        if len(matches) == 1:
            path, function, site = matches[0]
            region.source = str(path.relative_to(sources))
            region.function, region.site, region.outlined = function, site.id, site.outlined
            region.ir = str(_ir_path(path, sources).as_posix())
            region.why = None
        elif len(matches) > 1:
            region.why = (f"{len(matches)} parallel regions at line {region.line} of "
                          f"{', '.join(sorted({str(p.relative_to(sources)) for p, _, _ in matches}))}")
        elif not region.why:
            region.why = (f"no parallel region at line {region.line} of "
                          f"{', '.join(str(p.relative_to(sources)) for p, _, _ in readings)}")
        regions.append(region)
    return regions


def _ir_path(source: Path, sources: Path) -> Path:
    return Path("ir") / source.relative_to(sources).with_suffix(".ll")


def _sites(source: Path, sources: Path, cc: str, cxx: str, out: Path) -> list[Site] | str:
    """The OpenMP sites of ``source`` (its IR written under ``out``), or why
    it did not compile."""
    compiler = cxx if source.suffix == ".cpp" else cc
    try:
        ir = emit_ir(source, compiler, compile_flags(source, sources, cc, out / "work"),
                     cwd=source.parent)
    except (RuntimeError, RegionsError) as exc:
        return f"{source.relative_to(sources)} did not compile: {str(exc)[-300:]}"
    path = out / _ir_path(source, sources)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as fh:
        fh.write(ir)
    os.replace(fh.name, path)
    return find_sites(ir)
