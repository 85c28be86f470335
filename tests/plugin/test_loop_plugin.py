"""mirecc's pass plugin (mirecc-plugin) (passes/plugin) on real clangs.

The plugin is built once per session and LLVM major into a temporary cache
(mirecc.plugin.build.build_plugin), so the tests check the source in this
checkout; a clang whose LLVM CMake package is missing is skipped.
Loop ids always come from mirecc's graph builder on the
``-disable-llvm-passes`` bitcode, as the driver computes them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mirecc.graph import GraphBuildError, build_graph
from mirecc.plugin import build as lp

MAJORS = [14, 19, 22]


@pytest.fixture(params=MAJORS, ids=lambda m: f"clang{m}")
def llvm(request, llvm_plugin):
    """(clang, major, plugin path) for one LLVM major; built on first use."""
    return llvm_plugin(request.param)


SOURCE = """\
void scale(double *restrict a, const double *restrict b, int n) {
  for (int i = 0; i < n; i++)
    a[i] = 2.0 * b[i];
}

void saxpy(double *restrict y, const double *restrict x, double a, int n) {
  for (int i = 0; i < n; i++)
    y[i] += a * x[i];
}

void matadd(double *restrict c, const double *restrict a, int n, int m) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      c[i * m + j] += a[i * m + j];
}

double total(const double *a, int n) {
  double s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}

void prefix(int *a, int n) {
  for (int i = 1; i < n; i++)
    a[i] = a[i - 1] * 3 + a[i];
}
"""
# Source line of each loop: (function, depth) -> line (1-based).
LINES = {("scale", 1): 2, ("saxpy", 1): 7, ("matadd", 1): 12, ("matadd", 2): 13,
         ("total", 1): 19, ("prefix", 1): 26}

REMARK = re.compile(r":(\d+):\d+: remark: (.*) \[-R")


def loop_ids(clang: str, src: Path, flags: list[str]) -> list[tuple[str, int]]:
    """(loop id, loop depth) of every loop, from the graph builder."""
    bc = src.with_suffix(".nopasses.bc")
    subprocess.run([clang, *flags, "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    try:
        g = build_graph(bc)
    except GraphBuildError:  # IR newer than every native builder
        g = build_graph(bc, builder="llvmlite")
    return list(zip(g.loop_ids, g.arrays["loop_depth"].tolist()))


def loops(clang: str, src: Path, flags: list[str]) -> dict[tuple[str, int], str]:
    """(function, loop depth) -> loop id (one loop per function and depth)."""
    return {(lid.rsplit(":", 1)[0], d): lid for lid, d in loop_ids(clang, src, flags)}


def write_decisions(path: Path, module: str, decided: dict[str, tuple[int, int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "modules": {module: {"loops": {
        lid: {"vectorize.width": w, "interleave.count": ic} for lid, (w, ic) in decided.items()}}}}))
    return path


def compile_(clang, src: Path, flags, extra=(), out: Path | None = None):
    """Compile to an object; returns (stderr, remarks as (line, text))."""
    out = out or src.with_suffix(".o")
    proc = subprocess.run([clang, *flags, *extra, "-c", str(src), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, [(int(m.group(1)), m.group(2)) for m in REMARK.finditer(proc.stderr)]


def vectorized(remarks, line):
    return [t for ln, t in remarks if ln == line and t.startswith("vectorized loop")]


RPASS = ["-Rpass=loop-vectorize|mirecc-loophints", "-Rpass-missed=mirecc-loophints"]


@pytest.fixture
def src(tmp_path) -> Path:
    path = tmp_path / "k.c"
    path.write_text(SOURCE)
    return path


def test_find_and_args(llvm):
    clang, major, plugin = llvm
    plugin_cache = plugin.parent.parent     # build_plugin's <cache>/plugins/
    assert lp.clang_major(clang) == major
    assert plugin.name == f"mirecc-plugin-{major}.so"
    assert lp.ensure_plugin(major, build=False, cache=plugin_cache) is not None
    args = lp.plugin_args(major, plugin, "/d.json")
    assert f"-fpass-plugin={plugin}" in args and args[-2:] == ["-mllvm", "-mirecc-loop-decisions=/d.json"]


@pytest.mark.parametrize("width,ic", [(4, 2), (8, 1)])
def test_forced_factors_honoured(llvm, src, width, ic):
    clang, major, plugin = llvm
    flags = ["-O2"]
    ids = loops(clang, src, flags)
    dec = write_decisions(src.with_name("d.json"), str(src), {ids[("scale", 1)]: (width, ic)})
    _, plain = compile_(clang, src, flags, RPASS)
    assert vectorized(plain, 2) != [f"vectorized loop (vectorization width: {width}, interleaved count: {ic})"]
    _, remarks = compile_(clang, src, flags, [*RPASS, *lp.plugin_args(major, plugin, dec)])
    assert vectorized(remarks, 2) == [f"vectorized loop (vectorization width: {width}, interleaved count: {ic})"]
    assert (2, f"loop {ids[('scale', 1)]}: vectorize.width={width} interleave.count={ic}") in remarks


def test_decisions_reach_the_right_loops(llvm, src):
    clang, major, plugin = llvm
    flags = ["-O2"]
    ids = loops(clang, src, flags)
    assert set(ids) == set(LINES)
    decided = {("scale", 1): (8, 1), ("saxpy", 1): (2, 4), ("matadd", 1): (16, 1), ("matadd", 2): (4, 1)}
    dec = write_decisions(src.with_name("d.json"), "*", {ids[k]: f for k, f in decided.items()})
    _, remarks = compile_(clang, src, flags, [*RPASS, *lp.plugin_args(major, plugin, dec)])
    for key, (w, ic) in decided.items():
        assert (LINES[key], f"loop {ids[key]}: vectorize.width={w} interleave.count={ic}") in remarks
    assert vectorized(remarks, 2) == ["vectorized loop (vectorization width: 8, interleaved count: 1)"]
    assert vectorized(remarks, 7) == ["vectorized loop (vectorization width: 2, interleaved count: 4)"]
    assert vectorized(remarks, 13) == ["vectorized loop (vectorization width: 4, interleaved count: 1)"]
    assert vectorized(remarks, 12) == []  # outer loops are not vectorized


def test_fp_reduction_not_forced_without_fast_math(llvm, src):
    clang, major, plugin = llvm
    for flags, forced in ((["-O2"], False), (["-O2", "-ffast-math"], True)):
        ids = loops(clang, src, flags)
        lid = ids[("total", 1)]
        dec = write_decisions(src.with_name("d.json"), "*", {lid: (8, 1)})
        _, remarks = compile_(clang, src, flags, [*RPASS, *lp.plugin_args(major, plugin, dec)])
        mine = [t for ln, t in remarks if ln == 19 and t.startswith(f"loop {lid}")]
        if forced:
            assert mine == [f"loop {lid}: vectorize.width=8 interleave.count=1"]
            assert vectorized(remarks, 19) == ["vectorized loop (vectorization width: 8, interleaved count: 1)"]
        else:
            assert len(mine) == 1 and "not applied: floating-point recurrence" in mine[0]
            assert vectorized(remarks, 19) == []


def test_width_1_interleave_1_disables(llvm, src):
    clang, major, plugin = llvm
    flags = ["-O2"]
    ids = loops(clang, src, flags)
    dec = write_decisions(src.with_name("d.json"), "*", {ids[("scale", 1)]: (1, 1)})
    rpass = ["-Rpass=loop-vectorize"]
    _, plain = compile_(clang, src, flags, rpass)
    assert vectorized(plain, 2)
    _, remarks = compile_(clang, src, flags, [*rpass, *lp.plugin_args(major, plugin, dec)])
    assert [t for ln, t in remarks if ln == 2] == []
    assert vectorized(remarks, 7)  # other loops untouched


def test_illegal_forced_width_gives_no_warning(llvm, src):
    clang, major, plugin = llvm
    flags = ["-O2", "-Wall", "-Wextra", "-Werror"]
    ids = loops(clang, src, flags)
    dec = write_decisions(src.with_name("d.json"), "*", {ids[("prefix", 1)]: (8, 4)})
    stderr, _ = compile_(clang, src, flags, lp.plugin_args(major, plugin, dec))
    assert stderr == ""
    _, remarks = compile_(clang, src, flags, ["-Rpass=loop-vectorize", *lp.plugin_args(major, plugin, dec)])
    assert vectorized(remarks, 26) == []


@pytest.mark.parametrize("content", ['{"version": 1, "modules": ', None,
                                     '{"version": 1, "modules": {"*": {"loops": {"scale:1": {"vectorize.width": 3}}}}}'],
                         ids=["truncated", "missing", "bad-width"])
def test_bad_decisions_file_changes_nothing(llvm, src, content):
    clang, major, plugin = llvm
    flags = ["-O2"]
    dec = src.with_name("bad.json")
    if content is not None:
        dec.write_text(content)
    compile_(clang, src, flags, out=src.with_name("plain.o"))
    stderr, _ = compile_(clang, src, flags, lp.plugin_args(major, plugin, dec), out=src.with_name("p.o"))
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"mirecc-loophints: warning: {dec}: ")
    assert lines[0].endswith("; loops left to LLVM")
    assert src.with_name("plain.o").read_bytes() == src.with_name("p.o").read_bytes()


PROGRAM = """\
#include <stdio.h>
#define N 1003
static double a[N], b[N], c[N * 4];
static float f[N];
static int v[N];

__attribute__((noinline)) double dot(const double *x, const double *y, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

int main(void) {
  for (int i = 0; i < N; i++) { a[i] = i * 0.37 + 1.0 / (i + 1); b[i] = (i % 7) - 3.1; v[i] = i * 2654435761u; f[i] = 1.0f / (i + 3); }
  for (int i = 0; i < N; i++) a[i] = a[i] * 1.5 + b[i];
  float fs = 0;
  for (int i = 0; i < N; i++) fs += f[i] * f[i];
  long is = 0;
  for (int i = 0; i < N; i++) is += v[i] ^ (v[i] >> 3);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < N; j++) c[i * N + j] = a[j] * i - b[j];
  for (int i = 1; i < N; i++) v[i] = v[i - 1] * 3 + v[i];
  double cs = 0;
  for (int i = 0; i < N * 4; i++) cs += c[i];
  printf("%.17g %.9g %ld %d %.17g %.17g\\n", dot(a, b, N), fs, is, v[N - 1], cs, a[N / 2]);
  return 0;
}
"""


def test_forced_programs_compute_the_same(llvm, tmp_path):
    clang, major, plugin = llvm
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    flags = ["-O2"]
    ids = [lid for lid, _ in loop_ids(clang, src, flags)]
    assert len(ids) == 9
    factors = [(8, 4), (2, 1), (4, 2), (16, 2), (1, 4)]
    dec = write_decisions(tmp_path / "d.json", str(src),
                          {lid: factors[k % len(factors)] for k, lid in enumerate(ids)})
    outputs = []
    for extra in ([], ["-Rpass=mirecc-loophints", *lp.plugin_args(major, plugin, dec)]):
        exe = tmp_path / f"prog{len(outputs)}"
        proc = subprocess.run([clang, *flags, *extra, str(src), "-o", str(exe)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        applied = [t for _, t in REMARK.findall(proc.stderr)]
        assert len(applied) >= (5 if extra else 0) and "warning" not in proc.stderr
        outputs.append(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
    assert outputs[0] == outputs[1] and outputs[0].strip()


def test_opt_named_passes(llvm, src, tmp_path):
    clang, major, plugin = llvm
    opt = shutil.which(f"opt-{major}")
    if not opt:
        pytest.skip(f"opt-{major} is not installed")
    ids = loops(clang, src, ["-O2"])
    dec = write_decisions(tmp_path / "d.json", "*", {ids[("scale", 1)]: (8, 2)})
    env = dict(os.environ, MIRECC_LOOP_DECISIONS=str(dec))
    out = subprocess.run([opt, f"-load-pass-plugin={plugin}", "-passes=mirecc-loop-mark,function(mirecc-loop-hints)",
                          "-S", str(src.with_suffix(".nopasses.bc")), "-o", "-"],
                         capture_output=True, text=True, env=env, check=True).stdout
    assert f'!"mirecc.loop.id", !"{ids[("scale", 1)]}"' in out
    assert '!"llvm.loop.vectorize.width", i32 8' in out and '!"llvm.loop.interleave.count", i32 2' in out


DEPENDENCE = """\
#include <stdio.h>
__attribute__((noinline)) void dep(int *a, const int *b, int n) {
  for (int i = 2; i < n; i++)
    a[i] = a[i - 2] * 3 + b[i];
}
int main(void) {
  static int a[1000], b[1000];
  for (int i = 0; i < 1000; i++) { a[i] = i & 7; b[i] = i % 13; }
  dep(a, b, 1000);
  long s = 0;
  for (int i = 0; i < 1000; i++) s = s * 31 + a[i];
  printf("%ld\\n", s);
  return 0;
}
"""


def assert_same_output(clang: str, tmp: Path) -> None:
    """``plain.o`` and ``forced.o`` in ``tmp``, linked, print the same."""
    outputs = []
    for exe in ("plain", "forced"):
        subprocess.run([clang, f"{exe}.o", "-o", exe], cwd=tmp, check=True)
        outputs.append(subprocess.run([str(tmp / exe)], capture_output=True, text=True).stdout)
    assert outputs[0] == outputs[1] and outputs[0].strip()


def test_bounded_dependence_is_left_to_llvm(llvm, tmp_path):
    """Distance 2: LLVM clamps a forced width to 2, but a forced interleave
    count on top of it gave wrong results; the plugin leaves such loops alone."""
    clang, major, plugin = llvm
    src = tmp_path / "dep.c"
    src.write_text(DEPENDENCE)
    dec = write_decisions(tmp_path / "d.json", "*", {"dep:1": (4, 2)})
    stderr, _ = compile_(clang, src, ["-O3", "-Rpass-missed=mirecc-loophints"],
                         lp.plugin_args(major, plugin, dec), out=tmp_path / "forced.o")
    assert "bounded safe distance" in stderr
    compile_(clang, src, ["-O3"], out=tmp_path / "plain.o")
    assert_same_output(clang, tmp_path)


UNROLLED = """\
#include <stdio.h>
__attribute__((noinline)) double total(const double *a, int n) {
  double s = 0;
  for (int i = 0; i < n; i++)
    s += a[i] * a[i];
  return s;
}
__attribute__((noinline)) double pragma(const double *a, int n) {
  double s = 0;
#pragma unroll 2
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
int main(void) {
  static double a[1001];
  for (int i = 0; i < 1001; i++) a[i] = 1.0 / (i + 1) - (i % 5) * 0.3;
  printf("%.17g %.17g\\n", total(a, 1001), pragma(a, 1001));
  return 0;
}
"""


def multiplies(obj: Path, function: str) -> int:
    """``mulsd`` instructions in ``function`` of ``obj``."""
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True,
                          text=True, check=True).stdout
    body = dump.split(f"<{function}>:", 1)[1].split("\n\n", 1)[0]
    return body.count("mulsd")


def test_unroll_count_is_applied_where_factors_are_not(llvm, tmp_path):
    """An ``unroll.count`` reaches the unroller after the vectorizer on a
    floating-point sum without reassoc (whose forced width is refused: it
    would reorder the sum), gives the same results, and a loop with the
    user's unroll pragma keeps it."""
    clang, major, plugin = llvm
    if not shutil.which("objdump"):
        pytest.skip("objdump is not installed")
    src = tmp_path / "u.c"
    src.write_text(UNROLLED)
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"version": 1, "modules": {"*": {"loops": {
        "total:1": {"vectorize.width": 4, "unroll.count": 8},
        "pragma:1": {"unroll.count": 8}}}}}))
    stderr, remarks = compile_(clang, src, ["-O3"], [*RPASS, *lp.plugin_args(major, plugin, path)],
                               out=tmp_path / "forced.o")
    texts = [t for _, t in remarks]
    assert "loop total:1: unroll.count=8" in texts
    assert any(t.startswith("loop total:1: vectorize.width=4 not applied: floating-point")
               for t in texts)
    assert "loop pragma:1: unroll.count=8 not applied: the source has an unroll pragma for it" in texts
    compile_(clang, src, ["-O3"], out=tmp_path / "plain.o")
    # eight multiplies in the unrolled body (and the remainder's), more than LLVM's own
    assert multiplies(tmp_path / "forced.o", "total") >= 8
    assert multiplies(tmp_path / "forced.o", "total") > multiplies(
        tmp_path / "plain.o", "total")
    assert_same_output(clang, tmp_path)
    path.write_text(json.dumps({"version": 1, "modules": {"*": {"loops": {
        "total:1": {"unroll.count": 3}}}}}))
    stderr, _ = compile_(clang, src, ["-O3"], lp.plugin_args(major, plugin, path),
                         out=tmp_path / "bad.o")
    assert "unroll.count must be a power of two in 1..16; loops left to LLVM" in stderr


# ------------------------------------------------------------------ records

def write_records(path: Path, modules: dict[str, dict]) -> Path:
    """A decisions file with ``modules`` as given (module key -> entry)."""
    path.write_text(json.dumps({"version": 1, "modules": modules}))
    return path


def elf_sections(path: Path, prefix: str = ".mirecc.") -> dict[str, bytes]:
    """Name -> contents of the ELF sections of ``path`` whose name starts with ``prefix``."""
    elffile = pytest.importorskip("elftools.elf.elffile")
    with open(path, "rb") as f:
        return {s.name: s.data() for s in elffile.ELFFile(f).iter_sections()
                if s.name.startswith(prefix)}


NUMA_LINE = '{"regions":{"main:0":{"threads":8}},"source":"k.c"}'


@pytest.mark.parametrize("level", ["-O0", "-O2"])
def test_record_in_object(llvm, src, level):
    """Each record of the module's entry becomes its section, the text and a
    newline; per name the own entry wins over "*", which adds its other names."""
    clang, major, plugin = llvm
    dec = write_records(src.with_name("d.json"), {
        str(src): {"record": {"numa": NUMA_LINE, "x-y": "own"}},     # no "loops"
        "*": {"openmp": {}, "record": {"x-y": "star", "all": "every TU"}},
        "other.c": {"record": {"numa": "not this module"}},
    })
    stderr, _ = compile_(clang, src, [level], lp.plugin_args(major, plugin, dec))
    assert stderr == ""
    assert elf_sections(src.with_suffix(".o")) == {
        ".mirecc.numa": NUMA_LINE.encode() + b"\n",
        ".mirecc.x-y": b"own\n",
        ".mirecc.all": b"every TU\n",
    }


TU_MAIN = "int f(int);\nint g(int);\nint main(void) { return f(1) + g(2) - 5; }\n"
TU_F = "int f(int x) { return x + 1; }\n"
TU_G = "int g(int x) { return x * 2 - 1; }\n"


def test_records_of_linked_tus(llvm, tmp_path):
    """The linker concatenates the objects' sections: one line per TU that
    has the record, in link order, also with --gc-sections."""
    clang, major, plugin = llvm
    srcs = {}
    for name, text in (("main.c", TU_MAIN), ("f.c", TU_F), ("g.c", TU_G)):
        srcs[name] = tmp_path / name
        srcs[name].write_text(text)
    dec = write_records(tmp_path / "d.json", {
        str(srcs["f.c"]): {"record": {"numa": '{"tu":"f"}'}},
        str(srcs["g.c"]): {"record": {"numa": '{"tu":"g"}'}},   # main.c: none
    })
    for s in srcs.values():
        stderr, _ = compile_(clang, s, ["-O2", "-ffunction-sections", "-fdata-sections"],
                             lp.plugin_args(major, plugin, dec))
        assert stderr == ""
    exe = tmp_path / "prog"
    subprocess.run([clang, *(str(s.with_suffix(".o")) for s in srcs.values()),
                    "-Wl,--gc-sections", "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)]).returncode == 0
    assert elf_sections(exe) == {".mirecc.numa": b'{"tu":"f"}\n{"tu":"g"}\n'}


@pytest.mark.parametrize("record", [{"Numa": "x"}, {"": "x"}, {"a.b": "x"}, {"numa": 42}],
                         ids=["upper", "empty", "dot", "not-a-string"])
def test_bad_record_changes_nothing(llvm, src, record):
    clang, major, plugin = llvm
    dec = write_records(src.with_name("bad.json"),
                        {"*": {"record": {"good": "kept?", **record}}})
    for level in ("-O0", "-O2"):
        compile_(clang, src, [level], out=src.with_name("plain.o"))
        stderr, _ = compile_(clang, src, [level], lp.plugin_args(major, plugin, dec),
                             out=src.with_name("p.o"))
        lines = stderr.splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith(f"mirecc-loophints: warning: {dec}: modules[\"*\"].record[")
        assert lines[0].endswith("; loops left to LLVM")
        assert elf_sections(src.with_name("p.o")) == {}
        assert src.with_name("plain.o").read_bytes() == src.with_name("p.o").read_bytes()


def test_entry_without_decisions_is_an_error(llvm, src):
    """An entry needs "loops", "openmp" or "record"."""
    clang, major, plugin = llvm
    dec = write_records(src.with_name("bad.json"), {"*": {"records": {"numa": "x"}}})
    stderr, _ = compile_(clang, src, ["-O2"], lp.plugin_args(major, plugin, dec))
    assert stderr == f'mirecc-loophints: warning: {dec}: modules["*"]: missing object "loops"; loops left to LLVM\n'


def test_opt_record_pass(llvm, src, tmp_path):
    """mirecc-record by name; a module that has the global gets no second one."""
    clang, major, plugin = llvm
    opt = shutil.which(f"opt-{major}")
    if not opt:
        pytest.skip(f"opt-{major} is not installed")
    bc = tmp_path / "k.bc"
    subprocess.run([clang, "-O2", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    dec = write_records(tmp_path / "d.json", {"*": {"record": {"my-rec": "a b"}}})
    env = dict(os.environ, MIRECC_LOOP_DECISIONS=str(dec))
    out = subprocess.run([opt, f"-load-pass-plugin={plugin}", "-passes=mirecc-record,mirecc-record",
                          "-S", str(bc), "-o", "-"], capture_output=True, text=True, env=env,
                         check=True).stdout
    globals_ = [ln for ln in out.splitlines() if ln.startswith("@__mirecc_record_")]
    assert globals_ == ['@__mirecc_record_my_rec = private constant [4 x i8] c"a b\\0A", '
                        'section ".mirecc.my-rec", align 1']
    used = [ln for ln in out.splitlines() if ln.startswith("@llvm.used = appending global [1 x ")]
    assert len(used) == 1 and "@__mirecc_record_my_rec" in used[0]


def test_plugin_report_reads_set_left_and_vectorizer_remarks():
    from mirecc.tasks.loop_vectorize.loops import plugin_report, vectorizer_factors

    stderr = "\n".join([
        "k.c:5:5: remark: loop ns::f(int):3: vectorize.width=8 interleave.count=4 "
        "[-Rpass=mirecc-loophints]",
        "k.c:5:5: remark: vectorized loop (vectorization width: 8, interleaved count: 4) "
        "[-Rpass=loop-vectorize]",
        "k.c:9:3: remark: loop g:1: vectorize.width=4 not applied: floating-point recurrence "
        "without the reassoc flag [-Rpass-missed=mirecc-loophints]",
        "k.c:12:3: remark: loop h:2: not changed: the source has a loop pragma for it "
        "[-Rpass-missed=mirecc-loophints]",
        "k.c:1:0: remark: loop z:7: no loop has that header block; decision ignored "
        "[-Rpass-missed=mirecc-loophints]",
        "k.c:9:3: remark: loop not vectorized [-Rpass-missed=loop-vectorize]",
        "k.c:20:3: remark: vectorized loop (vectorization width: 4, interleaved count: 1) "
        "[-Rpass=loop-vectorize]",
        "k.c:20:3: remark: vectorized loop (vectorization width: 2, interleaved count: 1) "
        "[-Rpass=loop-vectorize]",
    ])
    placed, left = plugin_report(stderr)
    assert placed == {"ns::f(int):3": [(5, 5)]}
    assert left["g:1"].startswith("floating-point recurrence")
    assert left["h:2"].startswith("not changed")
    assert left["z:7"].startswith("no loop has")
    factors = vectorizer_factors(stderr, column=True)
    assert factors[(5, 5)] == {"vectorize.width": 8, "interleave.count": 4}
    assert factors[(9, 3)] == {"vectorize.width": 1, "interleave.count": 1}
    assert (20, 3) not in factors        # two loops at one place: cannot tell
