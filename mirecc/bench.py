"""``mire bench``: build the bundled benchmark programs with plain clang and with
mirecc, check they compute the same thing, and show per program what each
task decided and applied, and what that did to run time, code size and
compile time.

Protocol: every program is compiled to an object file with both compilers,
alternating, ``compile_repeats`` times each (median kept); what mirecc
decided comes from its record file (one line per TU: every task's
decisions, applied or not); objects and program outputs are compared byte
for byte (objects may differ only where a decision was applied); code size
is the objects' ``.text`` bytes; each binary then runs once to warm up and
``run_repeats`` times, the two sides alternating so that machine drift hits
both; medians are reported with min and max.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def bundled_programs_dir() -> Path:
    package = Path(__file__).resolve().parent
    installed = package / "programs"                           # pip install
    source_tree = package.parent / "benchmarks" / "programs"   # checkout
    return installed if installed.is_dir() else source_tree


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_description(compiler: str) -> dict:
    from mirecc.capture import compiler_version

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "compiler": compiler_version(compiler)}


@dataclass
class ProgramResult:
    program: str
    compile_clang_s: list[float]
    compile_mirecc_s: list[float]
    run_clang_s: list[float]
    run_mirecc_s: list[float]
    same_object: bool
    same_output: bool
    # task -> [decisions made, decisions applied] in mirecc's last compile
    decisions: dict = field(default_factory=dict)
    text_clang: int = 0       # .text bytes of the objects
    text_mirecc: int = 0

    @property
    def applied(self) -> int:
        return sum(applied for _, applied in self.decisions.values())

    @property
    def correct(self) -> bool:
        """Same output, and the same object unless a decision was applied."""
        return self.same_output and (self.same_object or self.applied > 0)

    @property
    def compile_ratio(self) -> float:
        return statistics.median(self.compile_mirecc_s) / statistics.median(self.compile_clang_s)

    @property
    def speedup(self) -> float:
        """1.0 for the same binary (not timed: identical code has no speedup)."""
        if self.same_object:
            return 1.0
        return statistics.median(self.run_clang_s) / statistics.median(self.run_mirecc_s)


def _timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, **kw)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stderr.decode(errors='replace')}")
    return elapsed, proc


def bench_program(source: Path, work: Path, clang: str, mirecc: str, flags: list[str],
                  compile_repeats: int, run_repeats: int, progress) -> ProgramResult:
    name = source.stem
    objs = {"clang": work / f"{name}.clang.o", "mirecc": work / f"{name}.mirecc.o"}
    bins = {"clang": work / f"{name}.clang", "mirecc": work / f"{name}.mirecc"}
    drivers = {"clang": clang, "mirecc": mirecc}
    times: dict[str, list[float]] = {"clang": [], "mirecc": []}
    record = work / f"{name}.decisions.jsonl"
    env = {"clang": None, "mirecc": dict(os.environ, MIRECC_RECORD=str(record))}
    for _ in range(compile_repeats):
        for side in ("clang", "mirecc"):
            t, _ = _timed([drivers[side], *flags, "-c", str(source), "-o", str(objs[side])],
                          env=env[side])
            times[side].append(t)
            progress()
    decisions: dict[str, list[int]] = {}
    if record.is_file():   # the last compile's decisions
        last = json.loads(record.read_text().splitlines()[-1])
        for d in last["decisions"]:
            counts = decisions.setdefault(d["task"], [0, 0])
            counts[0] += bool(d["value"])      # an empty value keeps the compiler's choice
            counts[1] += bool(d["applied"])
    for side in ("clang", "mirecc"):
        _timed([clang, str(objs[side]), "-o", str(bins[side]), "-lm"])
    same_object = objs["clang"].read_bytes() == objs["mirecc"].read_bytes()

    runs: dict[str, list[float]] = {"clang": [], "mirecc": []}
    outputs = {}
    for side in ("clang", "mirecc"):  # warm-up, and the output to compare
        outputs[side] = _timed([str(bins[side])])[1].stdout
    # the same object links to the same binary: 1.0x by construction, not timed
    for _ in range(0 if same_object else run_repeats):
        for side in ("clang", "mirecc"):
            runs[side].append(_timed([str(bins[side])])[0])
            progress()
    return ProgramResult(name, times["clang"], times["mirecc"], runs["clang"],
                         runs["mirecc"], same_object, outputs["clang"] == outputs["mirecc"],
                         decisions, text_bytes(objs["clang"]), text_bytes(objs["mirecc"]))


def text_bytes(obj: Path) -> int:
    """Bytes of an ELF object's code: its ``.text*`` sections (read from the
    section headers; 0 for what is not a 64-bit little-endian ELF file)."""
    import struct

    data = obj.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return 0
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):   # (name offset, size, file offset)
        base = shoff + i * shentsize
        name, = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, size, offset

    _, _, strings = section(shstrndx)
    total = 0
    for i in range(shnum):
        name_at, size, _ = section(i)
        end = data.index(b"\0", strings + name_at)
        if data[strings + name_at:end].startswith(b".text"):
            total += size
    return total


def decided_text(decisions: dict) -> str:
    """'loop-vectorize 3/1' (decided / applied) per task; '-' for none."""
    return "; ".join(f"{task} {made}/{applied}"
                     for task, (made, applied) in sorted(decisions.items())) or "-"


def _spread(values: list[float]) -> str:
    if not values:
        return "same binary"
    return (f"{statistics.median(values) * 1e3:.1f} "
            f"({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f})")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown_table(results: list[ProgramResult], machine: dict, flags: list[str],
                   compile_repeats: int, run_repeats: int) -> str:
    lines = [
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['compiler']}",
        f"Flags: {' '.join(flags)}; compile: median of {compile_repeats}, "
        f"run: median of {run_repeats} after one warm-up, sides alternating (the same "
        f"binary is 1.000x, not timed); "
        f"times in ms as median (min-max); decided/applied: decisions that differ from "
        f"the compiler's own choice / of those, applied to the compile.",
        "",
        "| program | decided/applied | compile clang | compile mirecc | compile ratio "
        "| .text clang | .text mirecc | run clang | run mirecc | speedup | same object "
        "| same output |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.program} | {decided_text(r.decisions)} | "
                     f"{_spread(r.compile_clang_s)} | {_spread(r.compile_mirecc_s)} | "
                     f"{r.compile_ratio:.3f} | {r.text_clang} | {r.text_mirecc} | "
                     f"{_spread(r.run_clang_s)} | {_spread(r.run_mirecc_s)} | "
                     f"{r.speedup:.3f} | "
                     f"{'yes' if r.same_object else ('no (applied)' if r.applied else 'NO')} | "
                     f"{'yes' if r.same_output else 'NO'} |")
    lines.append(f"| **geomean** | | | | {geomean([r.compile_ratio for r in results]):.3f} "
                 f"| | | | | {geomean([r.speedup for r in results]):.3f} | | |")
    return "\n".join(lines) + "\n"


def run_bench(programs: Path, out: Path, flags: list[str], compile_repeats: int,
              run_repeats: int, clang: str | None = None) -> int:
    from tqdm import tqdm

    from mirecc.compiler import find_compiler
    from mirecc.config import load_config
    from mirecc.toolchain import installed_driver

    sources = sorted(programs.glob("*.c"))
    if not sources:
        print(f"mire bench: no .c programs in {programs}", file=sys.stderr)
        return 2
    clang = clang or find_compiler(load_config(), cxx=False)
    mirecc = installed_driver("mirecc")
    machine = machine_description(clang)
    steps = len(sources) * 2 * (compile_repeats + run_repeats)
    results = []
    # disable=None: no progress bar when stderr is not a terminal (CI logs)
    with tempfile.TemporaryDirectory(prefix="mire-bench-") as tmp, \
            tqdm(total=steps, desc="mire bench", unit="step", file=sys.stderr,
                 disable=None) as bar:
        os.environ.setdefault("MIRECC_CC", clang)  # compare against the very same clang
        for source in sources:
            bar.set_postfix_str(source.stem)
            results.append(bench_program(source, Path(tmp), clang, mirecc, flags,
                                         compile_repeats, run_repeats,
                                         lambda: bar.update(1)))
    table = markdown_table(results, machine, flags, compile_repeats, run_repeats)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.md").write_text(table)
    (out / "bench.json").write_text(json.dumps({
        "machine": machine, "flags": flags, "compile_repeats": compile_repeats,
        "run_repeats": run_repeats,
        "programs": [asdict(r) | {"compile_ratio": r.compile_ratio, "speedup": r.speedup,
                                  "applied": r.applied}
                     for r in results]}, indent=2))
    print(table)
    print(f"saved {out / 'bench.md'} and {out / 'bench.json'}")
    bad = [r.program for r in results if not r.correct]
    if bad:
        print(f"mire bench: results differ from clang for: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0
