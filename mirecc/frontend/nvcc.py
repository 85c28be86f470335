"""The CUDA front end: nvcc's command line and the device IR of its sources.

What ``mirecc-nvcc`` (:mod:`mirecc.driver.nvcc`) and the CUDA tasks share:
nvcc's arguments parsed into an :class:`NvccCommand`, nvcc found (the pip
wheels' CUDA 13, else ``$MIRECC_NVCC`` or PATH), clang's CUDA mode run for
a source's device IR (``-x cuda --cuda-device-only -emit-llvm``, read
through the per-TU context as any other TU), and the kernels of that IR:
their names as clang marks them, as written in the source, their
instruction counts and the digests decisions profiles give them.

Clang reads CUDA 13's headers with two headers CUDA 12 dropped stubbed out
(``mirecc/data/cuda-stubs``), its texture intrinsics left out, and
``_NV_RSQRT_SPECIFIER`` (which CUDA 13.5 defines in a header clang's wrapper
includes after the one that uses it) defined empty: device IR for reading,
never code to run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.frontend.compiler import Compiler, CompilerNotFound
from mirecc.ir.text import function_digests

STUBS = Path(__file__).resolve().parents[1] / "data" / "cuda-stubs"
#: nvcc 13's default device architecture (``nvcc --help``: -arch)
DEFAULT_ARCH = "sm_75"
#: nvcc options whose value is the next argument when not written with '='
VALUE_OPTIONS = frozenset("""
-o --output-file -x --x -arch --gpu-architecture -code --gpu-code -gencode --generate-code
-ccbin --compiler-bindir -Xcompiler --compiler-options -Xptxas --ptxas-options
-Xlinker --linker-options -Xnvlink --nvlink-options -Xarchive --archive-options
-Xfatbin --fatbin-options -Xcudafe -I --include-path -L --library-path -l --library
-D --define-macro -U --undefine-macro -include --pre-include -isystem --system-include
-odir --output-directory -MF --dependency-output -MT --dependency-target-name
-std --std -rdc --relocatable-device-code -maxrregcount --maxrregcount -t --threads
-split-compile --split-compile -ftz --ftz -prec-div --prec-div -prec-sqrt --prec-sqrt
-fmad --fmad -Werror --Werror -diag-suppress --diag-suppress -diag-warn --diag-warn
-diag-error --diag-error -optf --options-file -time --time -keep-dir --keep-dir
-run-args --run-args -default-stream --default-stream -ldir --libdevice-directory
-cudart --cudart -cudadevrt --cudadevrt -m --machine -ptxas-options -Xrdc
-allow-unsupported-compiler -extra-device-vectorization -dlto -dopt --dopt
-ext-lambda -expt-extended-lambda -lto
""".split()) - {"-allow-unsupported-compiler", "-extra-device-vectorization", "-dlto",
                 "-ext-lambda", "-expt-extended-lambda", "-lto"}
#: modes in which nvcc compiles no device code
NO_DEVICE_CODE = frozenset({"-E", "--preprocess", "-M", "--generate-dependencies", "-MM",
                            "--generate-nonsystem-dependencies", "--version", "-V",
                            "--help", "-h", "-dryrun", "--dryrun", "-link", "--link",
                            "-lib", "--lib", "-dlink", "--device-link"})

#: options that write a dependency file beside the compile
DEPENDENCY_OPTIONS = frozenset({"-MD", "--generate-dependencies-with-compile", "-MMD",
                                "--generate-nonsystem-dependencies-with-compile"})


class NvccError(Exception):
    """nvcc or the device IR cannot be had; ``str()`` is the one-line reason."""


@dataclass
class NvccCommand:
    """What mirecc needs of an nvcc command line."""
    sources: list[str] = field(default_factory=list)       # CUDA sources
    preprocessor: list[str] = field(default_factory=list)  # -I -D -U -include -isystem, -std
    archs: list[str] = field(default_factory=list)         # sm_XX / compute_XX
    compiles: bool = True       # device code is compiled (not -E, -M, --version, link only)
    positions: list[int] = field(default_factory=list)     # the sources' indexes in args
    writes_dependencies: bool = False       # -MD / -MMD: a dependency file with the compile
    dependency_file: str | None = None      # -MF


def split_own(argv: list[str]) -> tuple[list[str], str | None]:
    """(nvcc's arguments, the ``--explain`` format or None)."""
    args, explain = [], None
    for arg in argv:
        if arg in ("--explain", "--explain=text"):
            explain = "text"
        elif arg == "--explain=json":
            explain = "json"
        elif arg.startswith("--explain="):
            raise ValueError(f"unknown --explain format '{arg[10:]}' (use text or json)")
        else:
            args.append(arg)
    return args, explain


def _option(arg: str) -> tuple[str, str | None]:
    """'-arch=sm_70' -> ('-arch', 'sm_70'); '-DX' -> ('-D', 'X'); '-c' -> ('-c', None)."""
    if arg.startswith("--") or (arg.startswith("-") and "=" in arg and
                                arg.split("=", 1)[0] in VALUE_OPTIONS):
        name, eq, value = arg.partition("=")
        return name, value if eq else None
    for short in ("-I", "-D", "-U", "-L", "-l"):
        if arg.startswith(short) and len(arg) > len(short):
            return short, arg[len(short):]
    return arg, None


def parse(args: list[str]) -> NvccCommand:
    """The CUDA sources, preprocessor flags and architectures of nvcc ``args``."""
    cmd = NvccCommand()
    language = None
    it = iter(enumerate(args))
    for index, arg in it:
        if not arg.startswith("-") or arg == "-":
            if arg.endswith(".cu") or language in ("cu", "cuda"):
                cmd.sources.append(arg)
                cmd.positions.append(index)
            continue
        name, value = _option(arg)
        if value is None and name in VALUE_OPTIONS:
            value = next(it, (None, None))[1]
        if name in NO_DEVICE_CODE:
            cmd.compiles = False
        cmd.writes_dependencies |= name in DEPENDENCY_OPTIONS
        if name in ("-MF", "--dependency-output"):
            cmd.dependency_file = value
        if name in ("-x", "--x"):
            language = value
        elif name in ("-I", "--include-path", "-isystem", "--system-include"):
            cmd.preprocessor += ["-isystem" if "system" in name else "-I", value or ""]
        elif name in ("-D", "--define-macro"):
            cmd.preprocessor.append(f"-D{value}")
        elif name in ("-U", "--undefine-macro"):
            cmd.preprocessor.append(f"-U{value}")
        elif name in ("-include", "--pre-include"):
            cmd.preprocessor += ["-include", value or ""]
        elif name in ("-std", "--std"):
            cmd.preprocessor.append(f"-std={value}")
        elif name in ("-arch", "--gpu-architecture", "-code", "--gpu-code"):
            cmd.archs += [a for a in (value or "").split(",") if a]
        elif name in ("-gencode", "--generate-code"):
            for part in (value or "").split(","):
                key, _, v = part.partition("=")
                if key in ("arch", "code"):
                    cmd.archs += [a for a in v.strip("[]").split(",") if a]
    return cmd


def device_arch(cmd: NvccCommand) -> str:
    """The first real architecture named (compute_70 -> sm_70), else nvcc's default."""
    for arch in cmd.archs:
        for prefix in ("sm_", "compute_"):
            if arch.startswith(prefix) and arch[len(prefix):].rstrip("af").isdigit():
                return "sm_" + arch[len(prefix):]
    return DEFAULT_ARCH


# ------------------------------------------------------------------ finding nvcc

def find_nvcc(environ=None) -> str | None:
    environ = os.environ if environ is None else environ

    chosen = environ.get("MIRECC_NVCC")
    if chosen:
        return shutil.which(chosen) or (chosen if os.access(chosen, os.X_OK) else None)
    for root in _wheel_roots():
        nvcc = root / "bin" / "nvcc"
        if os.access(nvcc, os.X_OK):
            return str(nvcc)
    found = shutil.which("nvcc", path=environ.get("PATH"))
    if found:
        return found
    fallback = "/usr/local/cuda/bin/nvcc"
    return fallback if os.access(fallback, os.X_OK) else None


def _wheel_roots() -> list[Path]:
    """The CUDA prefixes of the NVIDIA pip wheels in this environment."""
    spec = importlib.util.find_spec("nvidia")
    roots = []
    for location in (spec.submodule_search_locations or []) if spec else []:
        roots += sorted(Path(location).glob("cu[0-9]*"), reverse=True)
    return roots


def normalised_object(path) -> bytes:
    """An nvcc object's bytes with nvcc's temporary-file stem
    (``tmpxft_<pid>_<n>``, different in two runs of nvcc itself) blanked:
    what "the same object" means between two nvcc runs."""
    with open(path, "rb") as fh:
        return re.sub(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}", b"tmpxft_" + b"0" * 17, fh.read())


@functools.lru_cache(maxsize=8)
def toolkit_of(nvcc: str) -> Path:
    """The CUDA prefix of ``nvcc`` (``<prefix>/bin/nvcc``); for a wrapper
    elsewhere (a script on PATH that execs the real one), the folder nvcc
    says it runs from (``--dryrun``'s ``_HERE_``)."""
    prefix = Path(os.path.realpath(nvcc)).parent.parent
    if (prefix / "include" / "cuda_runtime.h").is_file():
        return prefix
    try:
        proc = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull],
                              capture_output=True, text=True, timeout=60)
        here = re.search(r"^#\$ _HERE_=(.+)$", proc.stderr + proc.stdout, re.M)
    except (OSError, subprocess.SubprocessError):
        here = None
    if here and (Path(here[1].strip()).parent / "include" / "cuda_runtime.h").is_file():
        return Path(here[1].strip()).parent
    return prefix


# ------------------------------------------------------------------ device IR

def device_ir_command(source: str, cmd: NvccCommand, toolkit: Path, clang: str,
                      out: Path, arch: str | None = None) -> list[str]:
    """clang's command for ``source``'s device IR, as clang emits it (CUDA
    13 keeps libcu++, CUB and Thrust in ``include/cccl``, which nvcc, not
    clang, puts on the include path, and they need C++17, nvcc's default
    there: a ``-std`` of the command still comes later and wins)."""
    cccl = Path(toolkit) / "include" / "cccl"
    cccl = ["-isystem", str(cccl), "-std=c++17"] if cccl.is_dir() else []
    return [clang, "-x", "cuda", "--cuda-device-only", f"--cuda-path={toolkit}",
            f"--cuda-gpu-arch={arch or device_arch(cmd)}", "-Wno-unknown-cuda-version",
            "-D__CLANG_CUDA_TEXTURE_INTRINSICS_H__", "-D_NV_RSQRT_SPECIFIER=",
            "-isystem", str(STUBS), *cccl,
            *cmd.preprocessor, "-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm",
            "-c", source, "-o", str(out)]


@functools.lru_cache(maxsize=4)
def newer_clang(clang: str) -> str | None:
    """The newest ``clang++-N`` on PATH with N above ``clang``'s own
    version (from its name, ``clang++-14``, or ``--version``), or None."""
    def version(path):
        m = re.search(r"-(\d+)$", os.path.basename(path))
        if m:
            return int(m[1])
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        m = re.search(r"clang version (\d+)", out)
        return int(m[1]) if m else None
    own = version(clang) or 0
    for n in range(30, own, -1):
        found = shutil.which(f"clang++-{n}")
        if found:
            return found
    return None


def device_ir(source: str, cmd: NvccCommand, toolkit: Path, clang: str, out: Path,
              cwd: str | None = None) -> Path:
    """Emit ``source``'s device bitcode into ``out``; NvccError with clang's
    last error line when it cannot (a newer architecture than the clang
    knows is retried as nvcc's default; a source the clang cannot read, as
    clang 14 cannot read CUDA 13's libcu++, with the newest other clang
    installed, :func:`newer_clang`: only the IR mirecc reads comes from it,
    never an object)."""
    compiler, errors = clang, []
    while compiler:
        for arch in dict.fromkeys([device_arch(cmd), DEFAULT_ARCH]):
            proc = subprocess.run(device_ir_command(source, cmd, toolkit, compiler, out, arch),
                                  capture_output=True, text=True, cwd=cwd)
            if proc.returncode == 0:
                return out
            errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
        compiler = newer_clang(clang) if compiler == clang else None
    raise NvccError(f"{source}: clang cannot emit its device IR: "
                    f"{(errors or ['no message'])[-1].strip()}")


@dataclass
class Kernel:
    name: str
    instructions: int
    embedding: list[float] | None = None


def read_kernels(ctx, embed: bool = True) -> list[Kernel]:
    """The kernels of a device module (``ctx``: its :func:`mirecc.taskapi.context.device_context`):
    their names (the functions clang marks as kernels: the ``ptx_kernel``
    calling convention or an ``nvvm.annotations`` "kernel" entry),
    instruction counts and, with ``embed``, the encoder's embedding of each
    (the configured encoder, as for C)."""
    text = ctx.ir_text
    names = kernel_names(text)
    counts = instruction_counts(text)
    kernels = [Kernel(n, counts.get(n, 0)) for n in names]
    if embed and kernels:
        emb, _ = ctx.embedding()
        for k in kernels:
            vector = emb.functions.get(k.name)
            k.embedding = None if vector is None else [float(x) for x in vector]
    return kernels


def kernel_names(text: str) -> list[str]:
    names = re.findall(r"^define[^@]*\bptx_kernel\b[^@]*@\"?([^\"(]+)\"?\(", text, re.M)
    for m in re.finditer(r"!\{ptr @\"?([^\",]+)\"?, !\"kernel\", i32 1\}|"
                         r"!\{void \([^)]*\)\* @\"?([^\",]+)\"?, !\"kernel\", i32 1\}", text):
        name = m.group(1) or m.group(2)
        if name not in names:
            names.append(name)
    return names


def instruction_counts(text: str) -> dict[str, int]:
    counts, current = {}, None
    for line in text.splitlines():
        if line.startswith("define "):
            start = line.find("@") + 1
            current = line[start:line.find("(", start)].strip('"')
            counts[current] = 0
        elif line.startswith("}"):
            current = None
        elif current and line.startswith("  ") and not line.lstrip().startswith(";"):
            counts[current] += 1
    return counts


def source_name(symbol: str) -> str:
    """A kernel's name as written in the source, from its Itanium-mangled
    symbol (``_Z5saxpyifPKfPf`` -> saxpy, ``_ZN2ns6kernelIfEEvPT_`` ->
    kernel); an unmangled (extern "C") name as it is."""
    if not symbol.startswith("_Z"):
        return symbol
    i = 3 if symbol.startswith("_ZL") else 2
    nested = symbol[i:i + 1] == "N"
    if nested:
        i += 1
        while symbol[i:i + 1] in ("K", "V", "r"):
            i += 1
    name = None
    while m := re.match(r"\d+", symbol[i:]):
        i += len(m[0])
        name, i = symbol[i:i + int(m[0])], i + int(m[0])
        if not nested:
            break
    return name or symbol


def kernel_digests(ir_text: str) -> dict[str, str]:
    """Kernel name as written -> the digest profile entries give it: its
    device function's (:func:`mirecc.ir.text.function_digests`), or, for a
    name several kernels share (overloads, template instances), one digest
    of all of theirs."""

    functions = function_digests(ir_text)
    groups: dict[str, list[str]] = {}
    for symbol in kernel_names(ir_text):
        groups.setdefault(source_name(symbol), []).append(functions.get(symbol, ""))
    return {name: ds[0] if len(ds) == 1 else
            hashlib.sha256("\n".join(sorted(ds)).encode()).hexdigest()[:16]
            for name, ds in groups.items()}


class Nvcc(Compiler):
    """nvcc (``mirecc-nvcc``) behind the interface every compiler mirecc
    drives has: found by :func:`find_nvcc`, classified by :func:`parse`
    (its CUDA sources are its TUs), each source's device IR written by
    clang (:func:`device_ir_command`), its command run as it is.  It reads
    the IR beside nvcc's own compile and never splits it: the object is
    nvcc's."""

    name = "nvcc"
    languages = frozenset({"cuda"})

    def find(self, config, cxx: bool = True) -> tuple[str, str]:
        found = find_nvcc()
        if found is None:
            raise CompilerNotFound("no nvcc found: pip install 'mirecc[cuda]' (NVIDIA's nvcc "
                                   "wheels), put nvcc on PATH or set MIRECC_NVCC")
        return found, ("configured (MIRECC_NVCC)" if os.environ.get("MIRECC_NVCC")
                       else "found (the cuda extra's wheels, PATH or /usr/local/cuda)")

    def fallback(self, cxx: bool = True) -> str:
        return "nvcc"

    def parse(self, args: list[str], cxx: bool = True):
        return list(args), parse(args)

    def ir_command(self, compiler: str, inv, source, out: str) -> list[str]:
        """``source``'s device IR by ``compiler`` (a clang++) for the command
        ``inv``, with the toolkit of the nvcc found."""
        return device_ir_command(source, inv, toolkit_of(self.find(None)[0]), compiler,
                                 Path(out))


COMPILER = Nvcc()
