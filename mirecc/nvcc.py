"""``mirecc-nvcc``: a drop-in for nvcc.

    mirecc-nvcc [--explain[=json]] [nvcc arguments...]

The build is nvcc's own: its arguments, outputs, messages and exit code
are untouched unless a decision is made, and then the only difference is
the decision.  What mirecc adds is the device side's IR: for each CUDA
source of a compile, clang's CUDA mode emits the device IR (``-x cuda
--cuda-device-only -emit-llvm``, the IR as clang emits it, as for C), which
goes through the same graph builder and encoder as any other TU, and
``--explain`` lists each kernel with its thread-block shape.  No CUDA head
ships (thread-block shapes need labels timed on a GPU); the one decision
made is a kernel's block shape from a decisions profile's ``cuda-block``
entries (:mod:`mirecc.profile`), where the launch is tunable: see "launch
shapes" below.  Any failure on mirecc's side is one warning and nvcc's
plain build.

nvcc is found as ``$MIRECC_NVCC``, else the one of the pip wheels in this
Python's environment (``nvidia-cuda-nvcc``, CUDA 13: ``nvidia/cu13/bin``,
with ``nvidia-nvvm``, ``nvidia-cuda-crt`` and ``nvidia-cuda-runtime``:
``pip install 'mirecc[cuda]'``), else ``nvcc`` on PATH, else
``/usr/local/cuda/bin/nvcc``.  nvcc compiles host code with its own host
compiler (``-ccbin``; by default the ``g++`` on PATH).

Clang reads CUDA 13's headers with two headers CUDA 12 dropped stubbed out
(``mirecc/data/cuda-stubs``), its texture intrinsics left out, and
``_NV_RSQRT_SPECIFIER`` (which CUDA 13.5 defines in a header clang's wrapper
includes after the one that uses it) defined empty: device IR for reading,
never code to run.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

STUBS = Path(__file__).resolve().parent / "data" / "cuda-stubs"
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
    import shutil

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
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = []
    for location in (spec.submodule_search_locations or []) if spec else []:
        roots += sorted(Path(location).glob("cu[0-9]*"), reverse=True)
    return roots


def toolkit_of(nvcc: str) -> Path:
    """The CUDA prefix of ``nvcc`` (``<prefix>/bin/nvcc``)."""
    return Path(os.path.realpath(nvcc)).parent.parent


# ------------------------------------------------------------------ device IR

def device_ir_command(source: str, cmd: NvccCommand, toolkit: Path, clang: str,
                      out: Path, arch: str | None = None) -> list[str]:
    """clang's command for ``source``'s device IR, as clang emits it."""
    return [clang, "-x", "cuda", "--cuda-device-only", f"--cuda-path={toolkit}",
            f"--cuda-gpu-arch={arch or device_arch(cmd)}", "-Wno-unknown-cuda-version",
            "-D__CLANG_CUDA_TEXTURE_INTRINSICS_H__", "-D_NV_RSQRT_SPECIFIER=",
            "-isystem", str(STUBS),
            *cmd.preprocessor, "-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm",
            "-c", source, "-o", str(out)]


def device_ir(source: str, cmd: NvccCommand, toolkit: Path, clang: str, out: Path,
              cwd: str | None = None) -> Path:
    """Emit ``source``'s device bitcode into ``out``; NvccError with clang's
    last error line when it cannot (a newer architecture than the clang
    knows is retried as nvcc's default)."""
    for arch in dict.fromkeys([device_arch(cmd), DEFAULT_ARCH]):
        proc = subprocess.run(device_ir_command(source, cmd, toolkit, clang, out, arch),
                              capture_output=True, text=True, cwd=cwd)
        if proc.returncode == 0:
            return out
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    raise NvccError(f"{source}: clang cannot emit its device IR: "
                    f"{(errors or ['no message'])[-1].strip()}")


@dataclass
class Kernel:
    name: str
    instructions: int
    embedding: list[float] | None = None


def read_kernels(bitcode: Path, embed: bool = True) -> list[Kernel]:
    """The kernels of a device module: their names (the functions clang
    marks as kernels: the ``ptx_kernel`` calling convention or an
    ``nvvm.annotations`` "kernel" entry), instruction counts and, with
    ``embed``, the shipped encoder's embedding of each."""
    from mirecc.ir.text import disassemble

    text = disassemble(bitcode.read_bytes(), str(bitcode))
    names = _kernel_names(text)
    counts = _instruction_counts(text)
    kernels = [Kernel(n, counts.get(n, 0)) for n in names]
    if embed and kernels:
        from mirecc.encoder.runtime import Encoder
        from mirecc.graph import build_graph_any
        from mirecc.model import load_model
        from mirecc.encoder import SHIPPED_MODEL_DIR

        graph = build_graph_any(bitcode)
        emb = Encoder(load_model(SHIPPED_MODEL_DIR).directory, cache=False).embed_graph(graph)
        for k in kernels:
            vector = emb.functions.get(k.name)
            k.embedding = None if vector is None else [float(x) for x in vector]
    return kernels


def _kernel_names(text: str) -> list[str]:
    import re

    names = re.findall(r"^define[^@]*\bptx_kernel\b[^@]*@\"?([^\"(]+)\"?\(", text, re.M)
    for m in re.finditer(r"!\{ptr @\"?([^\",]+)\"?, !\"kernel\", i32 1\}|"
                         r"!\{void \([^)]*\)\* @\"?([^\",]+)\"?, !\"kernel\", i32 1\}", text):
        name = m.group(1) or m.group(2)
        if name not in names:
            names.append(name)
    return names


def _instruction_counts(text: str) -> dict[str, int]:
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


# ------------------------------------------------------------------ launch shapes
#
# A kernel's thread-block shape is decided (from a decisions profile's
# cuda-block entries; no head ships) only where the source makes it a
# compile-time value whose grid follows it:
#
# * launches marked with mirecc/launch.h (MIRECC_BLOCK_X/Y(kernel, default)):
#   the decision is a -DMIRECC_BLOCK_<kernel>_X/Y define;
# * PolyBench-ACC's ``#define DIM_THREAD_BLOCK[_KERNEL_<n>]_X/Y <int>``, once
#   and unconditionally in a file next to the .cu, where every launch that
#   uses the macro derives that axis of its grid from it: nvcc compiles a
#   copy of the .cu and its folder's headers in a temporary folder with those
#   lines rewritten, the original folder first on the include path and
#   ``#line`` naming the originals, so that everything else is the same.
#
# Elsewhere the shape is reported, and a profile entry is advisory.

HEADER_DIR = Path(__file__).resolve().parent / "data" / "include"
LAUNCH_HEADER = "mirecc/launch.h"
#: PolyBench-ACC's block-shape macros: per source, or per launch (_KERNEL_<n>_)
BLOCK_MACRO = re.compile(r"\bDIM_THREAD_BLOCK(?:_KERNEL_\d+)?_[XY]\b")
AXES = ("x", "y")
ADVISORY = "not tunable: no MIRECC_BLOCK_X/Y (mirecc/launch.h) and no DIM_THREAD_BLOCK define"
_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/',
                                re.S)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w+)[ \t]*(.*)")
_HEADER_USE = re.compile(r"\bMIRECC_BLOCK_([XY])\s*\(")
_LAUNCH = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>;(){}]*>\s*)?<<<")


def _code(text: str) -> str:
    """``text`` with comments blanked, newlines kept (line numbers hold)."""
    def blank(m):
        return m[0] if m[0][0] in "\"'" else re.sub(r"[^\n]", " ", m[0])
    return _COMMENT_OR_STRING.sub(blank, text)


def _arguments(text: str, start: int, close: str = ")") -> tuple[list[str], int]:
    """The comma-separated arguments from ``text[start]`` (just after an
    opening bracket) to the ``close`` at depth 0, and the index after it."""
    args, depth, begin, i = [], 0, start, start
    while i < len(text):
        if depth == 0 and text.startswith(close, i):
            return args + [text[begin:i].strip()], i + len(close)
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    return args + [text[begin:].strip()], len(text)


@dataclass
class Define:
    """One ``#define``/``#undef`` of a block-shape macro."""
    macro: str
    value: int | None       # None: not a plain positive integer (or an #undef)
    file: str
    line: int               # 0-based
    nested: bool            # inside an #if other than the include guard


@dataclass
class Launch:
    kernel: str             # the name before <<<, as written
    block: list[str]        # the block's x and y as written ("?" unknown)
    grid: list[str]         # the grid's x and y, the block variable's .x/.y spelled out


@dataclass
class Scan:
    """What the source and the files it includes say about launches."""
    source: str                                   # as given to nvcc
    folder: str                                   # its folder, absolute
    folder_files: dict[str, str] = field(default_factory=dict)  # path -> name as included
    included_from_outside: set[str] = field(default_factory=set)
    uses_header: bool = False
    header: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> axis -> default
    launches: list[Launch] = field(default_factory=list)
    defines: dict[str, list[Define]] = field(default_factory=dict)


def _include_dirs(cmd: NvccCommand) -> list[str]:
    pp = cmd.preprocessor
    return [pp[i + 1] for i in range(len(pp) - 1) if pp[i] == "-I"]


def scan_source(source: str, cmd: NvccCommand, limit: int = 400) -> Scan:
    """Read ``source`` and the files it includes that are found in its folder
    or the command's -I folders (system headers are not followed; #if is
    not evaluated, so every #include counts)."""
    root = os.path.normpath(os.path.abspath(source))
    scan = Scan(source, os.path.dirname(root))
    dirs = _include_dirs(cmd)
    names, texts, todo = {root: source}, {}, [root]
    while todo and len(texts) < limit:
        path = todo.pop()
        if path in texts:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                texts[path] = _code(fh.read())
        except OSError:       # nvcc says so, if it matters
            texts[path] = ""
        for quote, spelled in _INCLUDE.findall(texts[path]):
            scan.uses_header |= spelled.strip() == LAUNCH_HEADER
            here = [os.path.dirname(names[path])] if quote == '"' else []
            for d in here + dirs:    # the name the preprocessor gives it: dir/spelling
                found = os.path.normpath(os.path.abspath(os.path.join(d, spelled)))
                if os.path.isfile(found):
                    names.setdefault(found, os.path.join(d, spelled))
                    if (os.path.dirname(found) == scan.folder
                            and os.path.dirname(path) != scan.folder):
                        scan.included_from_outside.add(found)
                    todo.append(found)
                    break
    for path, code in texts.items():
        if path.endswith(os.sep + LAUNCH_HEADER.replace("/", os.sep)):
            continue          # the header's own definitions are no launch
        if os.path.dirname(path) == scan.folder:
            scan.folder_files[path] = names[path]
            scan.launches += _launches(code)
        _header_uses(code, scan.header)
        for d in _block_defines(path, code):
            scan.defines.setdefault(d.macro, []).append(d)
    return scan


def _header_uses(code: str, into: dict) -> None:
    for m in _HEADER_USE.finditer(code):
        args, _ = _arguments(code, m.end())
        if len(args) == 2 and re.fullmatch(r"[A-Za-z_]\w*", args[0]):
            into.setdefault(args[0], {})[m[1].lower()] = " ".join(args[1].split())


def _block_defines(path: str, code: str) -> list[Define]:
    lines = code.split("\n")
    directives = [(i, m[1], m[2].strip()) for i, ln in enumerate(lines)
                  if (m := _DIRECTIVE.match(ln))]
    # an include guard (#ifndef G / #define G first) is not a condition
    guard = (len(directives) > 1 and directives[0][1] == "ifndef"
             and directives[1][1] == "define" and directives[1][2] == directives[0][2])
    out, depth = [], 0
    for i, word, rest in directives:
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            depth -= 1
        elif word in ("define", "undef") and rest:
            name, value = (rest.split(None, 1) + [""])[:2]
            if BLOCK_MACRO.fullmatch(name):
                number = re.fullmatch(r"\(?\s*([1-9]\d*)\s*\)?", value.strip())
                out.append(Define(name, int(number[1]) if number and word == "define" else None,
                                  path, i, depth > (1 if guard else 0)))
    return out


def _launches(code: str) -> list[Launch]:
    out = []
    for m in _LAUNCH.finditer(code):
        config, _ = _arguments(code, m.end(), ">>>")
        if len(config) < 2:
            continue
        grid, _ = _dim3(config[0], code)
        block, var = _dim3(config[1], code)
        for axis, written in zip(AXES, block) if var else ():
            # grid(n / block.x): the block's x as written
            grid = [re.sub(rf"\b{var}\s*\.\s*{axis}\b", f" {written} ", g) for g in grid]
        out.append(Launch(m[1], block, grid))
    return out


def _dim3(expr: str, code: str) -> tuple[list[str], str | None]:
    """The x and y of a launch's grid or block expression ("?" where it
    cannot be told), and the dim3 variable's name when it is one."""
    inline = re.fullmatch(r"dim3\s*[({](.*)[)}]", expr, re.S)
    if inline:
        return _pad(_arguments(inline[1] + ")", 0)[0]), None
    if not re.fullmatch(r"[A-Za-z_]\w*", expr):
        return [expr, "1"], None       # a plain number of threads
    found = set()
    for m in re.finditer(rf"\bdim3\s+{expr}\s*(?:=\s*dim3\s*)?([({{])", code):
        args, _ = _arguments(code, m.end(), ")" if m[1] == "(" else "}")
        found.add(tuple(_pad(args)))
    if not found:
        return [expr, "1"], None       # an integer variable or macro
    return (list(found.pop()) if len(found) == 1 else ["?", "?"]), expr


def _pad(args: list[str]) -> list[str]:
    args = [" ".join(a.split()) for a in args if a.strip()]
    return (args + ["1", "1"])[:2]


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
    device function's (:func:`mirecc.profile.function_digests`), or, for a
    name several kernels share (overloads, template instances), one digest
    of all of theirs."""
    import hashlib

    from mirecc.profile import function_digests

    functions = function_digests(ir_text)
    groups: dict[str, list[str]] = {}
    for symbol in _kernel_names(ir_text):
        groups.setdefault(source_name(symbol), []).append(functions.get(symbol, ""))
    return {name: ds[0] if len(ds) == 1 else
            hashlib.sha256("\n".join(sorted(ds)).encode()).hexdigest()[:16]
            for name, ds in groups.items()}


@dataclass
class KernelBlock:
    """One kernel's block shape: as the source has it, and as compiled."""
    kernel: str
    tunable: str | None           # "header", "define", or None (advisory)
    default: list[str]            # x, y as the source has them ("?" unknown)
    macros: list[str | None]      # per axis, the macro a decision sets
    shape: list[str]              # x, y in effect
    origin: str = "source default"
    note: str = ""

    def describe(self) -> dict:
        return {"shape": "x".join(self.shape), "origin": self.origin,
                "tunable": self.tunable, "advisory": self.tunable is None,
                "macros": [m for m in self.macros if m], "note": self.note}


@dataclass
class SourcePlan:
    """The launch decisions for one CUDA source."""
    source: str
    scan: Scan
    blocks: dict[str, KernelBlock] = field(default_factory=dict)
    defines: list[str] = field(default_factory=list)     # -D for mirecc/launch.h launches
    rewrites: dict[str, int] = field(default_factory=dict)  # DIM_THREAD_BLOCK macro -> value
    decisions: list[dict] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return bool(self.defines or self.rewrites)


def _settable(scan: Scan) -> dict[str, str | None]:
    """Block-shape macro -> None when a decision may rewrite it, else why not."""
    why = {}
    for macro, defs in scan.defines.items():
        d = defs[0]
        if scan.included_from_outside:   # an outside file would reach the originals
            why[macro] = (f"{macro} cannot be set: a file outside the source's folder "
                          f"includes {os.path.basename(min(scan.included_from_outside))}")
        elif len(defs) > 1:
            why[macro] = f"{macro} is defined or undefined more than once"
        elif d.value is None or d.nested:
            why[macro] = f"{macro} is not a plain number defined unconditionally"
        elif os.path.dirname(d.file) != scan.folder:
            why[macro] = f"{macro} is defined outside the source's folder"
        else:
            why[macro] = None
    # changing a macro must change the grid with it, on the block's own axis only
    for launch in scan.launches:
        for axis, block, grid in zip(AXES, launch.block, launch.grid):
            if why.get(block, "") is None and not re.search(rf"\b{block}\b", grid):
                why[block] = (f"{block} cannot be set: the grid of the {launch.kernel} "
                              f"launch does not follow its block's {axis}")
            for used in BLOCK_MACRO.findall(grid):
                if used != block and why.get(used, "") is None:
                    why[used] = (f"{used} cannot be set: the grid of the {launch.kernel} "
                                 f"launch uses it for its {axis}")
    return why


def _kernel_block(name: str, scan: Scan, settable: dict) -> KernelBlock:
    launches = [launch for launch in scan.launches if launch.kernel == name]
    shapes = {tuple(launch.block) for launch in launches}
    written = list(next(iter(shapes))) if len(shapes) == 1 else ["?", "?"]
    if name in scan.header:
        marked = scan.header[name]
        default = [marked.get(a, written[i]) for i, a in enumerate(AXES)]
        macros = [f"MIRECC_BLOCK_{name}_{a.upper()}" if a in marked else None for a in AXES]
        return KernelBlock(name, "header", default, macros, list(default),
                           note="marked with " + LAUNCH_HEADER)
    values = {m: str(d[0].value) for m, d in scan.defines.items() if d[0].value}
    default = [values.get(w, w) for w in written]

    def advisory(why):
        return KernelBlock(name, None, default, [None, None], list(default),
                           note="advisory: " + why)
    if not launches:
        return advisory("no launch in this source")
    if len(shapes) > 1:
        return advisory("launched with different block shapes")
    macros = [w if settable.get(w, "") is None else None for w in written]
    if not any(macros):
        return advisory(next((settable[w] for w in written if settable.get(w)), ADVISORY))
    files = sorted({os.path.basename(scan.defines[m][0].file) for m in macros if m})
    note = f"tunable: {', '.join(m for m in macros if m)} in {', '.join(files)}"
    for axis, macro, w in zip(AXES, macros, written):
        if not macro:
            note += f"; its {axis} is fixed" + (f" ({settable[w]})" if settable.get(w) else "")
    return KernelBlock(name, "define", default, macros, list(default), note=note)


def plan_source(scan: Scan, cmd: NvccCommand, entries=(), digests: dict | None = None,
                profile: str = "") -> SourcePlan:
    """The block shape of each kernel of ``scan``'s source (those launched
    or marked there, and those of ``digests``), with the decisions profile's
    cuda-block ``entries`` for the source applied where the launch is
    tunable and the kernel's digest (in ``digests``) still matches."""
    settable = _settable(scan)
    plan = SourcePlan(scan.source, scan)
    names = [*scan.header, *(launch.kernel for launch in scan.launches), *(digests or {})]
    plan.blocks = {n: _kernel_block(n, scan, settable) for n in dict.fromkeys(names)}
    classes = {flag[2:].partition("=")[0] for flag in cmd.preprocessor if flag.startswith("-D")}
    considered = [e for e in entries if e.size_class in (None, *classes)]
    live = [e for e in considered if (digests or {}).get(e.function) == e.digest]
    if len(live) < len(considered):
        stale = len(considered) - len(live)
        plan.reasons.append(f"decisions profile {profile}: {stale} cuda-block entr"
                            f"{'y' if stale == 1 else 'ies'} for this source ignored: the "
                            "kernel changed since it was measured")
    chosen: dict = {}
    for e in live:        # a size class's entry beats a classless one, then the later one
        if not (e.function in chosen and chosen[e.function].size_class and not e.size_class):
            chosen[e.function] = e
    # a rewritten copy would leave its temporary names in the dependency file
    rewrite_blocked = cmd.writes_dependencies and not cmd.dependency_file
    wanted: dict[str, list] = {}     # DIM_THREAD_BLOCK macro -> [(value, decision, kernel)]
    for kernel, e in chosen.items():
        block = plan.blocks[kernel]
        value = [e.value["x"], e.value["y"]]
        shape = f"{value[0]}x{value[1]}"
        decision = {"task": "cuda-block", "target": e.target, "value": shape, "applied": False,
                    "reason": f"from the decisions profile {profile}:{e.line}"
                              + (f" ({e.comment})" if e.comment else "")}
        plan.decisions.append(decision)
        fixed = [a for a, m, v, d in zip(AXES, block.macros, value, block.default)
                 if m is None and str(v) != d]
        if block.tunable is None or fixed or (block.tunable == "define" and rewrite_blocked):
            why = (block.note[len("advisory: "):] if block.tunable is None else
                   f"the launch's {fixed[0]} is not tunable" if fixed else
                   "a dependency file (-MD) without -MF cannot name the rewritten copies")
            decision["advisory"] = why
            block.note += f"; the profile's {shape} is not applied" + (
                "" if block.tunable is None else f": {why}")
            continue
        decision["applied"] = True
        block.origin, block.shape = decision["reason"], [str(v) for v in value]
        if block.tunable == "header":
            plan.defines += [f"-D{m}={v}" for m, v in zip(block.macros, value) if m]
            decision["how"] = " ".join(f"-D{m}={v}" for m, v in zip(block.macros, value) if m)
        else:
            for m, v in zip(block.macros, value):
                if m:
                    wanted.setdefault(m, []).append((v, decision, kernel))
    for macro, asks in wanted.items():
        if len({v for v, _, _ in asks}) > 1:      # kernels that share the macro disagree
            for _, decision, kernel in asks:
                decision["applied"] = False
                decision["advisory"] = f"{macro} is shared by kernels whose entries differ"
                block = plan.blocks[kernel]
                block.shape, block.origin = list(block.default), "source default"
                block.note += f"; the profile's {decision['value']} is not applied: " \
                              f"{decision['advisory']}"
            continue
        value = asks[0][0]
        if str(value) != str(scan.defines[macro][0].value):
            plan.rewrites[macro] = value
        for _, decision, _ in asks:
            decision["how"] = (decision.get("how", "") + f" {macro}={value}").strip()
    for block in plan.blocks.values():
        if block.tunable == "define":
            for i, m in enumerate(block.macros):
                if m in plan.rewrites:     # also kernels that only share the macro
                    block.shape[i] = str(plan.rewrites[m])
                    if block.origin == "source default":
                        block.origin = f"the decisions profile, through the shared {m}"
    return plan


def _source_digests(source: str, cmd: NvccCommand, nvcc: str, out: Path) -> dict:
    """Kernel name -> digest, from ``source``'s device IR (clang)."""
    from mirecc.compiler import find_compiler
    from mirecc.config import load_config
    from mirecc.ir.text import disassemble

    clang = find_compiler(load_config(), cxx=True)
    bc = device_ir(source, cmd, toolkit_of(nvcc), clang, out)
    return kernel_digests(disassemble(bc.read_bytes(), str(bc)))


def plan_sources(cmd: NvccCommand, scans: list[Scan], nvcc: str,
                 profile: str | None) -> list[SourcePlan]:
    """Each CUDA source's plan; the device IR is read (for the digests) only
    for a source the profile has cuda-block entries for."""
    from mirecc.profile import read_profile

    entries = [e for e in read_profile(profile) if e.task == "cuda-block"] if profile else []
    plans = []
    # a folder for the device IR only where there are entries to check
    with (tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") if entries
          else contextlib.nullcontext("")) as tmp:
        for n, (source, scan) in enumerate(zip(cmd.sources, scans)):
            path = os.path.normpath(os.path.abspath(source))
            mine = [e for e in entries if e.source == path]
            digests = _source_digests(source, cmd, nvcc, Path(tmp) / f"{n}.bc") if mine else None
            plans.append(plan_source(scan, cmd, mine, digests, profile=profile or ""))
    return plans


def rewritten_args(args: list[str], cmd: NvccCommand, plans: list[SourcePlan],
                   tmp: str) -> tuple[list[str], dict[str, str]]:
    """``args`` with the plans' decisions: -D defines for mirecc/launch.h
    launches; for rewritten DIM_THREAD_BLOCK defines, the source replaced by
    its copy in ``tmp`` (with its folder's included files, the define lines
    rewritten, ``#line`` naming the originals) and its folder first on the
    include path.  Also the copies' paths -> the originals' names (for the
    dependency file)."""
    front, defines, renamed, copies = [], [], {}, {}
    for n, plan in enumerate(plans):
        defines += plan.defines
        if not plan.rewrites:
            continue
        where = Path(tmp) / str(n)
        where.mkdir()
        lines_of = {}
        for macro, value in plan.rewrites.items():
            d = plan.scan.defines[macro][0]
            lines_of.setdefault(d.file, {})[d.line] = f"#define {macro} {value}"
        for path, name in plan.scan.folder_files.items():
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
                lines = fh.read().split("\n")
            for i, text in lines_of.get(path, {}).items():
                lines[i] = text + ("\r" if lines[i].endswith("\r") else "")
            copy = where / os.path.basename(path)
            quoted = name.replace("\\", "\\\\").replace('"', '\\"')
            with open(copy, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
                fh.write(f'#line 1 "{quoted}"\n' + "\n".join(lines))
            renamed[str(copy)] = name
        copies[plan.source] = str(where / os.path.basename(plan.scan.source))
        front += ["-I", plan.scan.folder]
    out = list(args)
    for index, source in zip(cmd.positions, cmd.sources):
        out[index] = copies.get(source, source)
    return front + out + defines, renamed


# ------------------------------------------------------------------ the driver

def _say(level: str, message: str) -> None:
    print(f"mirecc-nvcc: {level}: {message}", file=sys.stderr)


def explain_sources(cmd: NvccCommand, nvcc: str, fmt: str, plans: list) -> None:
    """Print each CUDA source's kernels and their block shapes (``--explain``)."""
    import json

    from mirecc.compiler import find_compiler
    from mirecc.config import load_config
    from mirecc.ir.text import disassemble

    clang = find_compiler(load_config(), cxx=True)
    toolkit = toolkit_of(nvcc)
    units = []
    with tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") as tmp:
        for n, source in enumerate(cmd.sources):
            unit = {"source": source, "device_arch": device_arch(cmd), "compiler": clang}
            plan = plans[n] if n < len(plans) else None
            try:
                plan = plan or plan_source(scan_source(source, cmd), cmd)
            except Exception:  # noqa: BLE001 - the kernels can still be listed
                plan = None
            try:
                bc = device_ir(source, cmd, toolkit, clang, Path(tmp) / f"{n}.bc")
                digests = kernel_digests(disassemble(bc.read_bytes(), str(bc)))
                unit["kernels"] = [k.__dict__ for k in read_kernels(bc)]
                for k in unit["kernels"]:
                    k["source_name"] = source_name(k["name"])
                    k["digest"] = digests.get(k["source_name"])
                    if plan:
                        block = plan.blocks.get(k["source_name"]) or _kernel_block(
                            k["source_name"], plan.scan, _settable(plan.scan))
                        k["block"] = block.describe()
            except Exception as exc:  # noqa: BLE001 - the explanation must not fail a build
                unit["error"] = str(exc)
            unit["decisions"] = plan.decisions if plan else []
            unit["no_decision_reasons"] = plan.reasons if plan else []
            unit["no_decision"] = ("no CUDA head installed: thread-block shapes need "
                                   "labels timed on a GPU (issue 17)")
            units.append(unit)
    if fmt == "json":
        for u in units:
            for k in u.get("kernels", []):      # the vector's size, not its numbers
                k["embedding"] = len(k["embedding"]) if k["embedding"] else None
        print(json.dumps({"nvcc": nvcc, "translation_units": units}, indent=1))
        return
    for u in units:
        print(f"{u['source']} (cuda device code for {u['device_arch']}, IR by {u['compiler']})")
        if "error" in u:
            print(f"  no device IR: {u['error']}")
            continue
        for k in u["kernels"]:
            embedded = f", embedded ({len(k['embedding'])} numbers)" if k["embedding"] else ""
            print(f"  kernel {k['name']}: {k['instructions']} instructions{embedded}")
            if "block" in k:
                b = k["block"]
                print(f"    block {b['shape']} ({k['source_name']}, digest {k['digest']}): "
                      f"{b['origin']}" + (f"; {b['note']}" if b["note"] else ""))
        for reason in u["no_decision_reasons"]:
            print(f"  {reason}")
        print(f"  {u['no_decision']}")


def _profile() -> str | None:
    """The decisions profile of this call (``profile:``, ``MIRECC_PROFILE``)."""
    from mirecc.config import load_config

    config = load_config()
    return None if config.disable else config.profile


def _run_decided(nvcc: str, base: list[str], cmd: NvccCommand, plans: list) -> int:
    """nvcc with the plans' decisions; should that fail, one warning and
    nvcc without them (``base``), whose messages are then the build's."""
    with tempfile.TemporaryDirectory(prefix="mirecc-nvcc-") as tmp:
        try:
            decided, renamed = rewritten_args(base, cmd, plans, tmp)
            proc = subprocess.run([nvcc, *decided], capture_output=True)
            if proc.returncode == 0:
                sys.stdout.buffer.write(proc.stdout)
                sys.stdout.flush()
                sys.stderr.buffer.write(proc.stderr)
                sys.stderr.flush()
                if renamed and cmd.dependency_file:
                    _rename_in(cmd.dependency_file, renamed)
                return 0
            errors = [ln for ln in proc.stderr.decode(errors="replace").splitlines()
                      if "error" in ln]
            why = f"nvcc failed with them: {(errors or ['no message'])[-1].strip()}"
        except Exception as exc:  # noqa: BLE001 - never fail a build over a decision
            why = f"{type(exc).__name__}: {exc}"
    _say("warning", f"launch decisions not applied ({why}); building without them")
    for plan in plans:
        for d in plan.decisions:
            if d["applied"]:
                d["applied"], d["advisory"] = False, f"withdrawn: {why}"
        for block in plan.blocks.values():
            block.shape, block.origin = list(block.default), "source default"
    return subprocess.call([nvcc, *base])


def _rename_in(path: str, renamed: dict[str, str]) -> None:
    """The rewritten copies' paths in a dependency file -> the originals'
    (each once: the preprocessor also lists the names ``#line`` gives)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        text = fh.read()
    for copy in sorted(renamed, key=len, reverse=True):    # a.cuh before a.cu
        text = text.replace(copy, renamed[copy])
    seen, lines = set(), []
    for line in text.splitlines(keepends=True):
        words = line.strip().rstrip("\\").split()
        if line[:1].isspace() and len(words) == 1 and words[0] in seen:   # listed already
            if not line.rstrip().endswith("\\") and lines:   # it ended the rule
                lines[-1] = lines[-1].rstrip().rstrip("\\").rstrip() + "\n"
            continue
        seen.update(words)
        lines.append(line)
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("".join(lines))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, explain = split_own(argv)
    except ValueError as exc:
        _say("error", str(exc))
        return 2
    nvcc = find_nvcc()
    if nvcc is None:
        _say("error", "no nvcc found: pip install 'mirecc[cuda]' (NVIDIA's nvcc wheels), "
                      "put nvcc on PATH or set MIRECC_NVCC")
        return 127
    cmd, plans, base = None, [], list(args)
    try:
        cmd = parse(args)
        scans = [scan_source(source, cmd) for source in cmd.sources]
        if any(scan.uses_header for scan in scans):     # -E and -M read it too
            # after the user's own include folders: a copy of theirs wins
            base += ["-isystem", str(HEADER_DIR)]
            cmd.preprocessor += ["-isystem", str(HEADER_DIR)]
        if scans and cmd.compiles:
            plans = plan_sources(cmd, scans, nvcc, _profile())
    except Exception as exc:  # noqa: BLE001 - a decision never breaks a build
        _say("warning", f"launch decisions not applied: {exc}")
        plans = []
    if any(plan.decided for plan in plans):
        status = _run_decided(nvcc, base, cmd, plans)
    else:
        status = subprocess.call([nvcc, *base])
    if explain and status == 0:
        try:
            if cmd and cmd.sources and cmd.compiles:
                explain_sources(cmd, nvcc, explain, plans)
        except Exception as exc:  # noqa: BLE001 - never fail a build that nvcc made
            _say("warning", f"cannot explain: {type(exc).__name__}: {exc}")
    return status
