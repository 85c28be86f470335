"""What the block-shape head reads of a CUDA source: kernel statistics from
its device IR (the TU context's text, as clang emits it for the device:
``-O1 -Xclang -disable-llvm-passes``) and the shapes it ranks.

Per kernel, one pass over its body, following values through the stack
slots clang's unoptimised IR keeps them in:

* which values derive from the thread's x index (``threadIdx.x`` or
  ``blockIdx.x``) and y index, and whether one of them is multiplied by
  something other than the block's size: a **strided** axis (consecutive
  threads of a warp then touch addresses a row apart: uncoalesced), the
  largest constant it is multiplied by (an array's row length: with
  PolyBench's sizes fixed at compile time, the input size);
* data loads and stores (float, double and integer values, not the stack
  slots), floating-point operations, loops (``!llvm.loop``), barriers,
  shared memory (``addrspace(3)``).

A source's features are those of its tunable kernels together (the head
gives all of them one shape, as they were timed), with the launches' grid
dimensions.  Standard library only: the driver computes them per compile.
"""
from __future__ import annotations

import math
import re

#: the statistics of one source, in the order the head's rows hold them
SOURCE_FEATURES = (
    "kernels", "loops_max", "loops_mean", "loads_per_kernel", "stores_per_kernel",
    "flops_per_kernel", "x_strided", "y_strided", "x_only", "uses_y", "shared", "barrier",
    "log2_row", "grid_2d", "y_settable",
)
#: the features of a candidate shape (x, y: the block a launch gets)
SHAPE_FEATURES = ("log2_x", "log2_y", "log2_threads", "x_lt_warp", "log2_row_per_x",
                  "log2_row_per_threads")

_DEFINE = re.compile(r'^define[^@]*@"?([^"(]+)"?\(')
_ASSIGN = re.compile(r"^\s*(%[\w.]+)\s*=\s*(.*)$")
_VALUE = re.compile(r"%[\w.]+")
_X = re.compile(r"(threadIdx|blockIdx)_t17__fetch_builtin_x|sreg\.(tid|ctaid)\.x\b")
_Y = re.compile(r"(threadIdx|blockIdx)_t17__fetch_builtin_y|sreg\.(tid|ctaid)\.y\b")
_DIM = re.compile(r"blockDim_t17__fetch_builtin_[xyz]|sreg\.ntid\.[xyz]\b")
_FLOP = re.compile(r"^\s*(fadd|fsub|fmul|fdiv|frem|fneg)\b|@(llvm\.)?(sqrt|exp|log|pow|fma)")
_DATA_LOAD = re.compile(r"=\s*load\s+(float|double|half|i8|i16|i32|i64)\s*,")
_DATA_STORE = re.compile(r"^\s*store\s+(float|double|half|i8|i16|i32|i64)\s+")


def function_bodies(ir_text: str) -> dict[str, list[str]]:
    """Function symbol -> its body's lines."""
    bodies, current = {}, None
    for line in ir_text.splitlines():
        m = _DEFINE.match(line)
        if m:
            current = bodies.setdefault(m[1], [])
        elif line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)
    return bodies


def kernel_statistics(body: list[str]) -> dict:
    """The statistics of one kernel's body (see the module's docstring)."""
    index = {"x": set(), "y": set()}      # values derived from the x / y index
    slots = {"x": set(), "y": set()}      # stack slots holding such values
    dims: set[str] = set()
    strided = {"x": 0, "y": 0}
    row = 0
    stats = {"loads": 0, "stores": 0, "flops": 0, "loops": 0, "barrier": 0, "shared": 0}
    for _ in range(2):                    # a second pass: values stored in a loop's latch
        for line in body:
            m = _ASSIGN.match(line)
            rhs = m[2] if m else line
            if m:
                name = m[1]
                if _DIM.search(rhs) or (rhs.startswith(("sext ", "zext ", "trunc "))
                                        and set(_VALUE.findall(rhs)) & dims):
                    dims.add(name)
                for axis, rx in (("x", _X), ("y", _Y)):
                    used = set(_VALUE.findall(rhs))
                    if rx.search(rhs) or (rhs.startswith("load ") and used & slots[axis]) \
                            or (not rhs.startswith(("load ", "call ")) and used & index[axis]):
                        index[axis].add(name)
            st = re.match(r"\s*store\s+\S+\s+(%[\w.]+),\s*\S+\s+(%[\w.]+)", line)
            if st:
                for axis in ("x", "y"):
                    if st[1] in index[axis]:
                        slots[axis].add(st[2])
    allocas = {m[1] for line in body if (m := _ASSIGN.match(line)) and
               m[2].startswith("alloca ")}
    for line in body:
        m = _ASSIGN.match(line)
        rhs = m[2] if m else line
        mul = re.match(r"mul\b(?:\s+(?:nsw|nuw))*\s+\S+\s+(%[\w.]+|-?\d+),\s*(%[\w.]+|-?\d+)",
                       rhs)
        if mul:
            a, b = mul[1], mul[2]
            for axis in ("x", "y"):
                for mine, other in ((a, b), (b, a)):
                    if mine in index[axis] and other not in dims \
                            and other not in index["x"] | index["y"]:
                        const = int(other) if other.lstrip("-").isdigit() else None
                        if const is None or abs(const) > 1:
                            strided[axis] = 1
            for operand in (a, b):
                if operand.isdigit():      # the longest row the kernel indexes
                    row = max(row, int(operand))
        if _DATA_LOAD.search(line) and _pointer(rhs) not in allocas:
            stats["loads"] += 1
        if _DATA_STORE.match(line) and _pointer(line) not in allocas:
            stats["stores"] += 1
        stats["flops"] += bool(_FLOP.search(rhs))
        stats["loops"] += "!llvm.loop" in line
        stats["barrier"] |= "barrier" in rhs and "call" in rhs
        stats["shared"] |= "addrspace(3)" in line
    stats.update(x_strided=strided["x"], y_strided=strided["y"], row=row,
                 uses_y=int(bool(index["y"])))
    return stats


def _pointer(text: str) -> str | None:
    """The pointer operand of a load or store (the value after its last type)."""
    m = re.search(r"\*\s*(%[\w.]+)|\bptr\s+(%[\w.]+)", text.split(",", 1)[1]
                  if text.lstrip().startswith("store") else text)
    return (m[1] or m[2]) if m else None


def source_features(ir_text: str, kernels: list[str], grid_2d: bool,
                    y_settable: bool) -> dict[str, float]:
    """A source's features (:data:`SOURCE_FEATURES`) from its tunable kernels'
    symbols, whether a launch has a second grid dimension and whether the
    block's y can be set."""
    bodies = function_bodies(ir_text)
    per = [kernel_statistics(bodies[k]) for k in kernels if k in bodies]
    if not per:
        raise ValueError("none of the kernels is in the device IR")
    n = len(per)
    row = max(p["row"] for p in per)
    return {
        "kernels": float(n),
        "loops_max": float(max(p["loops"] for p in per)),
        "loops_mean": sum(p["loops"] for p in per) / n,
        "loads_per_kernel": sum(p["loads"] for p in per) / n,
        "stores_per_kernel": sum(p["stores"] for p in per) / n,
        "flops_per_kernel": sum(p["flops"] for p in per) / n,
        "x_strided": sum(p["x_strided"] for p in per) / n,
        "y_strided": sum(p["y_strided"] for p in per) / n,
        "x_only": sum(1 - p["uses_y"] for p in per) / n,
        "uses_y": float(max(p["uses_y"] for p in per)),
        "shared": float(max(p["shared"] for p in per)),
        "barrier": float(max(p["barrier"] for p in per)),
        "log2_row": math.log2(row) if row > 1 else 0.0,
        "grid_2d": float(grid_2d),
        "y_settable": float(y_settable),
    }


def shape_features(x: int, y: int, log2_row: float) -> list[float]:
    """:data:`SHAPE_FEATURES` of block ``x`` by ``y`` (``log2_row``: the
    source's, 0 when unknown: the row-per-block ratios are then 0 too)."""
    lx, ly = math.log2(x), math.log2(y)
    return [lx, ly, lx + ly, float(x < 32),
            log2_row - lx if log2_row else 0.0,
            log2_row - lx - ly if log2_row else 0.0]


def source_shape_features(x: int, y: int) -> list[float]:
    """The source's own block, which the speedups are relative to."""
    return [math.log2(x), math.log2(y)]


def plan_features(plan, ir_text: str) -> tuple[dict[str, float], list[str]]:
    """The features of a source (:func:`source_features`) from its launch plan
    (:class:`mirecc.tasks.cuda_block.launches.SourcePlan`) and device IR; also
    the tunable kernels' names as written.  ValueError when none is tunable."""
    # lazy: nvcc's front end, loaded where a launch plan exists (the head class loads this)
    from mirecc.frontend.nvcc import kernel_names, source_name

    tunable = [name for name, block in plan.blocks.items() if block.tunable]
    if not tunable:
        raise ValueError("no tunable launch")
    symbols = [s for s in kernel_names(ir_text) if source_name(s) in tunable]
    grid_2d = any(launch.grid[1].strip() != "1" for launch in plan.scan.launches
                  if launch.kernel in tunable)
    y_settable = any(plan.blocks[name].macros[1] for name in tunable)
    return source_features(ir_text, symbols, grid_2d, y_settable), tunable
