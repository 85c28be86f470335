"""Thread coarsening applied at run time: the plan for one OpenCL program.

The interposer (``runtime/opencl``, loaded by ``mire run --opencl``) runs
``python -m mirecc.tasks.opencl.coarsen SOURCE OPTIONS DEVICE TYPE PREFIX``
once per program source, build options and device (it caches the result
under that digest) and reads back two files:

``PREFIX.plan``
    ``# mirecc-opencl-plan 1``, then per kernel of the source, tab-separated,
    ``kernel NAME DIM F,F,... FLAGS WHY`` (accepted: the factors to try, in
    the order the head ranks them; FLAGS ``local`` where the kernel reads
    its work-group (local ids or sizes, group ids): only launches that give
    a local size are coarsened, since a platform's own choice of work-group
    for the coarsened launch need not match the original's; else ``-``) or
    ``refused NAME REASON``.
``PREFIX.cl``
    the program's source followed by each accepted kernel's coarsened forms,
    ``NAME__mirecc_f<k>``, in OpenCL C: platforms without an IL path (pocl
    on the CPU here) build kernels only from source.

Whether a kernel may be coarsened is the plugin's ``mirecc-coarsen`` pass's
answer on the kernel's IR (clang -x cl, then ``opt`` with the plugin: the
same refusals as ``mire bench coarsen-check`` tabulates); the source form
applies the same rewrite, along dimension 0, in the consecutive mode:

    get_global_id(0)   -> off + (get_global_id(0) - off) * k + s
    get_global_size(0) -> get_global_size(0) * k
    get_local_id(0)    -> get_local_id(0) * k + s
    get_local_size(0)  -> get_local_size(0) * k

by the preprocessor around a copy of the kernel's body moved into a function
with one more parameter (the sub-item ``s``), which the coarsened kernel
calls for s = 0..k-1.  Kernels the text form cannot carry (attributes on the
kernel, a body or parameters it cannot find) are refused with the reason.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mirecc.frontend.compiler import find_compiler
from mirecc.frontend.source import blank, matching, pieces
from mirecc.plugin.build import clang_major, ensure_plugin
from mirecc.taskapi.config import load_config
from mirecc.taskapi.registry import default_heads_dirs

PLAN_HEADER = "# mirecc-opencl-plan 1"
#: the factors tried where no head ranks them for the device, in this order
DEFAULT_FACTORS = (2, 4, 8)
DIM = 0


class PlanError(RuntimeError):
    """The plan cannot be made (the message says why)."""


# ---------------------------------------------------------------- the source


class SourceKernel:
    """A kernel as the text has it: its name, parameter list, body and
    whether it has attributes (which the text form does not carry)."""

    def __init__(self, name, params, body, attributes):
        self.name, self.params, self.body, self.attributes = name, params, body, attributes

    def param_names(self) -> list[str] | None:
        names = []
        for part in split_params(self.params):
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", part)
            if not m:
                return None
            names.append(m.group(1))
        return names


def split_params(params: str) -> list[str]:
    """A parameter list's parameters, split at its top-level commas."""
    parts, _ = pieces(params, 0, ")")
    return [p.strip() for p, _ in parts if p.strip() and p.strip() != "void"]


_KERNEL = re.compile(r"\b(?:__kernel|kernel)\b")
_READS_GROUP = re.compile(r"\bget_(?:local_id|local_size|group_id|num_groups|enqueued_local_size)"
                          r"\s*\(")


def source_kernels(source: str) -> list[SourceKernel]:
    """The kernels of an OpenCL C source, in order."""
    text = blank(source)
    kernels = []
    for m in _KERNEL.finditer(text):
        pos, attributes, paren = m.end(), False, -1
        while True:   # past __attribute__((...)) to the parameter list
            paren = text.find("(", pos)
            if paren < 0 or not text[pos:paren].rstrip().endswith("__attribute__"):
                break
            attributes, pos = True, matching(text, paren, "(", ")")
            if pos < 0:
                paren = -1
                break
        if paren < 0:
            continue
        head = text[m.end():paren]
        names = re.findall(r"[A-Za-z_]\w*", re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", head))
        if not names or "void" not in names:
            continue
        end_params = matching(text, paren, "(", ")")
        brace = text.find("{", end_params) if end_params > 0 else -1
        if brace < 0 or text[end_params:brace].strip():
            continue
        end_body = matching(text, brace, "{", "}")
        if end_body < 0:
            continue
        kernels.append(SourceKernel(names[-1], source[paren + 1:end_params - 1],
                                    source[brace:end_body],
                                    attributes))
    return kernels


def _helpers(k: int, dim: int) -> str:
    return f"""
size_t mirecc_gid_f{k}(uint d, uint s) {{
  return d == {dim} ? get_global_offset({dim}) + (get_global_id({dim}) - get_global_offset({dim})) * {k} + s
                    : get_global_id(d);
}}
size_t mirecc_gsz_f{k}(uint d) {{ return d == {dim} ? get_global_size({dim}) * {k} : get_global_size(d); }}
size_t mirecc_lid_f{k}(uint d, uint s) {{ return d == {dim} ? get_local_id({dim}) * {k} + s : get_local_id(d); }}
size_t mirecc_lsz_f{k}(uint d) {{ return d == {dim} ? get_local_size({dim}) * {k} : get_local_size(d); }}
"""


def coarsened_form(kernel: SourceKernel, k: int, dim: int = DIM) -> str:
    """The kernel's coarsened form at factor ``k``, in OpenCL C (after the
    factor's helpers, :func:`_helpers`)."""
    names = kernel.param_names() or []
    params = kernel.params.strip()
    params = "" if params == "void" else params
    body = f"{kernel.name}__mirecc_body_f{k}"
    sep = ", " if params else ""
    return f"""
#define get_global_id(d) mirecc_gid_f{k}((d), mirecc_s)
#define get_global_size(d) mirecc_gsz_f{k}(d)
#define get_local_id(d) mirecc_lid_f{k}((d), mirecc_s)
#define get_local_size(d) mirecc_lsz_f{k}(d)
void {body}({params}{sep}uint mirecc_s)
{kernel.body}
#undef get_global_id
#undef get_global_size
#undef get_local_id
#undef get_local_size
__kernel void {kernel.name}__mirecc_f{k}({params}) {{
  for (uint mirecc_s = 0; mirecc_s < {k}; ++mirecc_s)
    {body}({", ".join([*names, "mirecc_s"])});
}}
"""


# ---------------------------------------------------------------- the IR check


def llvm_tool(name: str, major: int) -> str:
    tool = shutil.which(f"{name}-{major}") or shutil.which(
        str(Path(f"/usr/lib/llvm-{major}/bin/{name}")))
    if not tool:
        raise FileNotFoundError(f"{name}-{major} is not installed")
    return tool


def coarsen_ir(ir: Path, kernel: str, factor: int, mode: str, major: int, plugin: Path,
               out: Path | None = None, dim: int = DIM) -> tuple[bool, str]:
    """(accepted, the pass's line) for one kernel of ``ir``; the coarsened IR
    at ``out`` (None: only the answer)."""
    where = ["-o", str(out), "-S"] if out else ["-disable-output"]
    proc = subprocess.run([llvm_tool("opt", major), "-load-pass-plugin", str(plugin),
                           f"-passes=mirecc-coarsen<kernel={kernel};factor={factor};dim={dim};"
                           f"mode={mode}>", str(ir), *where],
                          capture_output=True, text=True)
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("mirecc-coarsen:")),
                proc.stderr.strip()[-200:])
    ok = proc.returncode == 0 and ": refused:" not in line and (out is None or out.is_file())
    return ok, line


def clang_options(options: str) -> list[str]:
    """The build options clang needs to read the source as the platform does:
    macros, include folders and the language version."""
    words, out, i = options.split(), [], 0
    while i < len(words):
        w = words[i]
        if w in ("-D", "-I") and i + 1 < len(words):
            out += [w, words[i + 1]]
            i += 2
            continue
        if w.startswith(("-D", "-I", "-cl-std=")):
            out.append(w)
        i += 1
    return out


def kernels_ir(source: Path, options: str, major: int, out: Path) -> None:
    """The program's IR for this CPU by clang -x cl, not optimised (helpers
    stay calls, as the text form keeps them)."""
    opts = clang_options(options)
    std = [] if any(o.startswith("-cl-std=") for o in opts) else ["-cl-std=CL1.2"]
    proc = subprocess.run([llvm_tool("clang", major), "-x", "cl", *std, *opts, "-Xclang",
                           "-finclude-default-header", "-O1", "-Xclang",
                           "-disable-llvm-passes", "-emit-llvm", "-S", str(source), "-o",
                           str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr)
        raise PlanError(f"clang cannot read the program: {first.strip()[:200]}")


# ---------------------------------------------------------------- the plan


ORDERS = "coarsening-runtime/orders.json"
#: how many of a learned order's factors are tried
TRIES = 3


def learned_order(device_type: str) -> dict | None:
    """The factor order ``mire bench opencl --opencl-write-order`` learned
    from this kind of device's labels (the shipped heads'
    ``coarsening-runtime/orders.json``); None where there is none."""
    for d in default_heads_dirs(load_config()):
        path = Path(d) / ORDERS
        if path.is_file():
            try:
                entry = json.loads(path.read_text()).get("devices", {}).get(device_type)
            except (OSError, ValueError) as exc:
                raise PlanError(f"{path}: not a factor-order file ({exc})") from None
            if entry and all(isinstance(f, int) and f > 1 for f in entry.get("order", [])):
                return entry
    return None


def ranked_factors(device: str, device_type: str) -> tuple[list[int], str]:
    """The factors to try for a kernel on ``device``, best first, and how
    they were ranked."""
    env = os.environ.get("MIRECC_OPENCL_FACTORS")
    if env:
        try:
            factors = [int(f) for f in env.split(",") if f.strip()]
        except ValueError:
            raise PlanError(f"MIRECC_OPENCL_FACTORS={env} is not a list of factors") from None
        if any(f < 2 or f > 1024 for f in factors):
            raise PlanError(f"MIRECC_OPENCL_FACTORS={env}: factors are 2..1024")
        return factors, "factors from MIRECC_OPENCL_FACTORS"
    learned = learned_order(device_type)
    if learned and learned.get("order"):
        return learned["order"][:TRIES], (
            f"the order learned on {learned.get('kernels', '?')} kernels' labels on "
            f"{learned.get('device', device_type)}")
    return list(DEFAULT_FACTORS), (f"no head ranks factors for {device_type} devices: "
                                   f"the fixed order {', '.join(map(str, DEFAULT_FACTORS))}")


def make_plan(source_text: str, options: str, device: str, device_type: str,
              major: int, plugin: Path) -> tuple[str, str]:
    """(plan text, coarsened program source)."""
    kernels = source_kernels(source_text)
    factors, how = ranked_factors(device, device_type)
    lines, forms = [PLAN_HEADER], []
    with tempfile.TemporaryDirectory(prefix="mirecc-opencl-") as tmp:
        src, ir = Path(tmp) / "program.cl", Path(tmp) / "program.ll"
        src.write_text(source_text)
        kernels_ir(src, options, major, ir)
        for kernel in kernels:
            reason = None
            if kernel.attributes:
                reason = "has attributes (the source form does not carry them)"
            elif kernel.param_names() is None:
                reason = "its parameters could not be read"
            else:
                ok, line = coarsen_ir(ir, kernel.name, 2, "consecutive", major, plugin)
                if not ok:
                    reason = line.split(": refused: ", 1)[-1] if ": refused: " in line \
                        else f"the pass failed: {line[:160]}"
            reason = reason and reason.replace("\t", " ").replace("\n", " ")
            if reason:
                lines.append(f"refused\t{kernel.name}\t{reason}")
                continue
            flags = "local" if _READS_GROUP.search(blank(kernel.body)) else "-"
            lines.append(f"kernel\t{kernel.name}\t{DIM}\t{','.join(map(str, factors))}\t"
                         f"{flags}\t{how}")
            forms += [coarsened_form(kernel, k) for k in factors]
    helpers = "".join(_helpers(k, DIM) for k in factors) if forms else ""
    coarse = source_text + "\n/* mirecc: coarsened forms */\n" + helpers + "".join(forms)
    return "\n".join(lines) + "\n", coarse


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 5:
        print("usage: python -m mirecc.tasks.opencl.coarsen SOURCE OPTIONS DEVICE TYPE PREFIX",
              file=sys.stderr)
        return 2
    source, options, device, device_type, prefix = argv
    try:
        major = clang_major(find_compiler(load_config(), cxx=False))
        plan, coarse = make_plan(Path(source).read_text(errors="replace"), options, device,
                                 device_type, major, ensure_plugin(major))
        _write(Path(prefix + ".cl"), coarse)
        _write(Path(prefix + ".plan"), plan)
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
        print(f"mirecc-opencl: no plan for {source}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
