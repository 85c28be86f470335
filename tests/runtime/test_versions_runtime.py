"""Functions compiled in versions (adapt_loops): the plugin's "versions"
entries (passes/plugin/FORMAT.md, "Function versions") and the adaptive
runtime choosing among them (runtime/adapt), on real clangs: programs built,
run and timed for real.

What is checked: the function becomes a dispatch over its clones, each
clone's loop with its version's factors; the runtime tries the versions in
the program's runs, drops a clearly slower one, writes its store, and every
run prints clang's output; linked without the runtime the program runs
LLVM's version and writes nothing; what cannot be versioned is left with a
remark; a bad entry changes nothing; the driver does it only with the
setting and links the runtime then.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mirecc.runtime import build as rb
from mirecc.runtime.store import read_store
from tests.plugin.test_openmp_plugin import RPASS, compile_

# saxpy without a reduction: every (VF, IF) computes the same floats.  Its
# loop's header is block 1 of the function as clang emits it (block 0, the
# entry, branches to it).
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void saxpy(int n, float a, float *restrict x, float *restrict y) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
int main(int argc, char **argv) {
  int n = 4096, reps = argc > 1 ? atoi(argv[1]) : 4000;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (int i = 0; i < n; i++) x[i] = i % 7, y[i] = i % 3;
  for (int r = 0; r < reps; r++) saxpy(n, 1.0001f, x, y);
  double s = 0;
  for (int i = 0; i < n; i++) s += y[i];
  printf("%.9g\n", s);
  return 0;
}
"""

# What cannot become a dispatch: a variadic function.
VARIADIC = r"""
#include <stdarg.h>
int total(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int s = 0;
  for (int i = 0; i < n; i++) s += va_arg(ap, int);
  va_end(ap);
  return s;
}
"""

VERSIONS = [{"name": "1x1", "loops": {"1": {"vectorize.width": 1, "interleave.count": 1}}},
            {"name": "8x4", "loops": {"1": {"vectorize.width": 8, "interleave.count": 4}}}]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    return rb.ensure_runtime("clang-14", tmp_path_factory.mktemp("runtime-cache"))


def decisions(path: Path, function: str, versions=VERSIONS, key="v000000000000001") -> Path:
    path.write_text(json.dumps({"version": 1, "modules": {"*": {"versions": {
        function: {"key": key, "name": f"k.c {function}", "versions": versions}}}}}))
    return path


def plugin_flags(plugin: Path, dec: Path) -> list[str]:
    return ["-Xclang", "-load", "-Xclang", str(plugin), f"-fpass-plugin={plugin}",
            "-mllvm", f"-mirecc-loop-decisions={dec}", *RPASS]


def build(clang, plugin, tmp: Path, runtime: Path | None, versions=VERSIONS, name="k"):
    src = tmp / f"{name}.c"
    src.write_text(PROGRAM)
    dec = decisions(tmp / f"{name}.json", "saxpy", versions)
    _err, remarks = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec))
    exe = tmp / name
    cmd = [clang, str(src.with_suffix(".o")), "-o", str(exe)]
    if runtime:
        cmd += rb.link_arguments(clang, runtime.parent.parent)
    subprocess.run(cmd, check=True, capture_output=True)
    return exe, remarks


def run(exe: Path, store: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_ADAPT")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True,
                          env={**clean, "MIRECC_ADAPT_STORE": str(store), **env})


def runs_as_clangs(clang, src: Path, flags, runtime: Path, tmp: Path, runs: int) -> list:
    """``src`` built with ``flags`` and the runtime, run ``runs`` times from
    an empty store, each run printing what clang -O3's build prints; the
    store's cells."""
    _err, _ = compile_(clang, src, ["-O3"], flags)
    exe = tmp / f"{src.stem}.versions"
    subprocess.run([clang, str(src.with_suffix(".o")), "-o", str(exe),
                    *rb.link_arguments(clang, runtime.parent.parent)], check=True)
    subprocess.run([clang, "-O3", str(src), "-o", str(tmp / "plain")], check=True)
    want = subprocess.run([str(tmp / "plain")], capture_output=True, text=True).stdout
    store = tmp / "store.txt"
    for _ in range(runs):
        assert run(exe, store).stdout == want
    return read_store(store)


def driver(tmp: Path, **settings: str) -> tuple[str, dict]:
    """The installed mirecc and an environment of no MIRECC_ settings but a
    cache of its own and ``settings``."""
    mirecc = shutil.which("mirecc", path=str(Path(os.sys.executable).parent)) or "mirecc"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env.update(MIRECC_CACHE_DIR=str(tmp / "cache"), **settings)
    return mirecc, env


def plain(clang, tmp: Path) -> str:
    src = tmp / "plain.c"
    src.write_text(PROGRAM)
    subprocess.run([clang, "-O3", str(src), "-o", str(tmp / "plain")], check=True)
    return subprocess.run([str(tmp / "plain")], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("major", [14, 19])
def test_the_function_becomes_a_dispatch_over_its_versions(llvm_plugin, tmp_path, major):
    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "k.c"
    src.write_text(PROGRAM)
    dec = decisions(tmp_path / "k.json", "saxpy")
    _err, remarks = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec),
                             out=tmp_path / "k.ll", what="-S -emit-llvm")
    assert any("function saxpy: 3 versions (LLVM's, 1x1, 8x4)" in r for r in remarks), remarks
    ir = (tmp_path / "k.ll").read_text()
    for i in range(3):
        assert re.search(rf"define internal .*@saxpy\.mirecc\.v{i}\(", ir), i
    def body(name):
        text = ir[re.search(rf"define [^\n]*@{re.escape(name)}\(", ir).start() :]
        return text[: text.index("\n}\n")]

    # the dispatch: the fast path (the version the runtime handed out) in
    # tail calls, else the slow path, which asks the runtime
    dispatch = body("saxpy")
    assert "load atomic i32" in dispatch and "@saxpy.mirecc.ask(" in dispatch
    assert "__mirecc_version_begin" not in dispatch
    assert "version_begin" in body("saxpy.mirecc.ask")
    assert re.search(r"define internal .*@saxpy\.mirecc\.ask\(.*#", ir)
    # the site handed to the runtime before main, by a constructor
    assert re.search(r"@llvm.global_ctors = .*@\.mirecc\.versions\.prepare", ir)
    assert "__mirecc_version_prepare(" in body(".mirecc.versions.prepare").replace(
        "@__mirecc_weak__mirecc_version_prepare(", "__mirecc_version_prepare(")
    # each version's loop vectorized as its factors say, LLVM's as LLVM does
    _err, vect = compile_(clang, src, ["-O3"], [*plugin_flags(plugin, dec)[:-2],
                                               "-Rpass=loop-vectorize"])
    assert any("width: 8, interleaved count: 4" in r for r in vect), vect


def test_the_runtime_chooses_among_the_versions(llvm_plugin, runtime, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    exe, _remarks = build(clang, plugin, tmp_path, runtime)
    want = plain(clang, tmp_path)
    store = tmp_path / "store.txt"
    for _ in range(3):
        assert run(exe, store).stdout == want
    (cell,) = read_store(store)
    assert cell.name == "k.c saxpy"
    assert [a.name for a in cell.arms] == ["default", "1x1", "8x4"]
    # the call's size is its largest integer argument: 4096 -> 4^6
    assert cell.bucket == 6
    # scalar code is several times slower than LLVM's vector loop: dropped
    scalar = cell.arms[1]
    assert scalar.dropped and not scalar.kept
    assert cell.arms[0].samples > 0
    # every call counted, those the dispatch ran on its fast path (once
    # decided) included
    assert cell.invocations == 3 * 4000


# PROGRAM whose main removes the store before its first call of saxpy
REMOVES_STORE = PROGRAM.replace("  int n = 4096,", "  remove(getenv(\"MIRECC_ADAPT_STORE\"));\n  int n = 4096,")


@pytest.mark.parametrize("major", [14, 19])
def test_the_store_and_the_sites_are_read_before_main(llvm_plugin, runtime, tmp_path, major):
    """The site's state is set up at the program's start (its first call
    may be timed, with cold caches): a main that removes the store before
    calling the function still continues the store's counts."""
    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "r.c"
    src.write_text(REMOVES_STORE)
    dec = decisions(tmp_path / "r.json", "saxpy")
    compile_(clang, src, ["-O3"], plugin_flags(plugin, dec))
    exe = tmp_path / "r"
    subprocess.run([clang, str(src.with_suffix(".o")), "-o", str(exe),
                    *rb.link_arguments(clang, runtime.parent.parent)], check=True)
    store = tmp_path / "store.txt"
    for runs in (1, 2):
        run(exe, store, "5")
        (cell,) = read_store(store)
        assert cell.invocations == 5 * runs


def called_once_per_run(llvm_plugin, runtime, tmp: Path):
    """(the versions' build, what clang's build prints with saxpy called
    once, an empty store's path)."""
    clang, _major, plugin = llvm_plugin(14)
    exe, _remarks = build(clang, plugin, tmp, runtime)
    plain(clang, tmp)
    want = subprocess.run([str(tmp / "plain"), "1"], capture_output=True, text=True,
                          check=True).stdout
    return exe, want, tmp / "store.txt"


def test_a_short_function_called_once_per_run_is_left_alone(llvm_plugin, runtime, tmp_path):
    """A function called once per process and shorter than the runtime's
    shortest timed call (MIRECC_ADAPT_MIN_US) is explored across runs until
    its time is known, then left alone (LLVM's version): a batch of calls
    cannot span runs, and it could gain a few microseconds per process.
    (A 1 ms shortest call: a batch of saxpy's calls would reach it.)"""
    exe, want, store = called_once_per_run(llvm_plugin, runtime, tmp_path)
    states = []
    for _ in range(12):
        assert run(exe, store, "1", MIRECC_ADAPT_MIN_US="1000").stdout == want
        (cell,) = read_store(store)
        states.append(cell.phase)
    assert states[-1] == 2 and cell.best == "default", (states, cell)
    # it stays so: no run explores it again
    at = states.index(2)
    assert set(states[at:]) == {2}
    before = [a.samples for a in cell.arms]
    run(exe, store, "1", MIRECC_ADAPT_MIN_US="1000")
    (cell,) = read_store(store)
    assert cell.phase == 2 and [a.samples for a in cell.arms] == before


def test_a_function_called_once_per_run_gives_its_candidates_successive_runs(
        llvm_plugin, runtime, tmp_path):
    """Explored across runs, one arm per run: the default's first three
    runs, then a candidate runs while it has fewer samples than the
    reference (the default's samples from earlier runs count), where it
    used to alternate with the reference run by run."""
    exe, want, store = called_once_per_run(llvm_plugin, runtime, tmp_path)
    seen = []
    for n in range(30):
        cells = read_store(store) if n else []
        before = {a.name: a for a in cells[0].arms} if cells else {}
        assert run(exe, store, "1", MIRECC_ADAPT_MIN_US="0").stdout == want
        (cell,) = read_store(store)
        grew = [a.name for a in cell.arms if a.samples > getattr(before.get(a.name), "samples", 0)]
        assert len(grew) <= 1, grew   # one arm per run (the first run's call: none)
        if grew and cells and cells[0].phase == 0 and cells[0].across:
            ref = before[cells[0].best].samples
            open_ = [a for a in cells[0].arms[1:] if not (a.dropped or a.kept)]
            wanted = cells[0].best if ref < 3 or ref <= open_[0].samples else open_[0].name
            seen.append((grew[0], wanted))
        if cell.phase == 1:
            break
    assert cell.phase == 1, cell
    assert seen and all(g == w for g, w in seen), seen
    # at least one candidate ran in two successive runs
    names = [g for g, _ in seen]
    assert any(a == b != "default" for a, b in zip(names, names[1:])), names


def test_without_the_runtime_llvms_version_runs(llvm_plugin, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    exe, _remarks = build(clang, plugin, tmp_path, None)
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
    assert " w __mirecc_version_begin" in nm
    store = tmp_path / "store.txt"
    assert run(exe, store).stdout == plain(clang, tmp_path)
    assert not store.exists()


def test_what_cannot_be_versioned_is_left_with_a_remark(llvm_plugin, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "v.c"
    src.write_text(VARIADIC)
    dec = decisions(tmp_path / "v.json", "total")
    _err, remarks = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec),
                             out=tmp_path / "v.ll", what="-S -emit-llvm")
    assert "function total: not versioned: a variadic function" in remarks
    assert ".mirecc.v" not in (tmp_path / "v.ll").read_text()


@pytest.mark.parametrize("versions, problem", [
    ([], '"versions" must be an array of 1..7 objects'),
    ([{"name": "a b", "loops": {}}], "1..31 characters without spaces"),
    ([{"name": "x", "loops": {"h": {}}}], "a loop is its header block's index"),
    ([{"name": "x", "loops": {"1": {"vectorize.width": 3}}}], "must be a power of two"),
    ([{"name": "x", "loops": {}}, {"name": "x", "loops": {}}], "two versions named x"),
])
def test_a_bad_entry_changes_nothing(llvm_plugin, tmp_path, versions, problem):
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "k.c"
    src.write_text(PROGRAM)
    dec = decisions(tmp_path / "k.json", "saxpy", versions)
    err, _ = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec), out=tmp_path / "a.o")
    assert problem in err and "loops left to LLVM" in err, err
    subprocess.run([clang, "-O3", "-c", str(src), "-o", str(tmp_path / "b.o")], check=True)
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()


def test_the_driver_versions_only_with_the_setting(tmp_path):
    """mirecc -O3 with adapt_loops: versions in the object (the shipped head
    expects a gain for saxpy's loop) and the runtime in the program; without
    it the object is clang's byte for byte and the link takes nothing."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    src = tmp_path / "k.c"
    src.write_text(PROGRAM)
    mirecc, env = driver(tmp_path, MIRECC_ADAPT_STORE=str(tmp_path / "store.txt"))
    subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "a.o")],
                   check=True, env=env)
    subprocess.run(["clang-14", "-O3", "-c", str(src), "-o", str(tmp_path / "b.o")], check=True)
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()
    subprocess.run([mirecc, str(tmp_path / "a.o"), "-o", str(tmp_path / "p0")],
                   check=True, env=env)
    nm = subprocess.run(["nm", str(tmp_path / "p0")], capture_output=True, text=True).stdout
    assert "__mirecc" not in nm

    on = {**env, "MIRECC_ADAPT_LOOPS": "1"}
    subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "c.o")],
                   check=True, env=on)
    nm = subprocess.run(["nm", str(tmp_path / "c.o")], capture_output=True, text=True).stdout
    assert "saxpy.mirecc.v1" in nm and " w __mirecc_version_begin" in nm
    # the head's two factors; with adapt_unroll, last, its loop unrolled
    assert "saxpy.mirecc.v2" in nm and "saxpy.mirecc.v3" not in nm
    subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "e.o")],
                   check=True, env={**on, "MIRECC_ADAPT_UNROLL": "8"})
    nm8 = subprocess.run(["nm", str(tmp_path / "e.o")], capture_output=True, text=True).stdout
    assert "saxpy.mirecc.v3" in nm8 and "saxpy.mirecc.v4" not in nm8
    subprocess.run([mirecc, str(tmp_path / "c.o"), "-o", str(tmp_path / "prog")],
                   check=True, env=on)
    nm = subprocess.run(["nm", str(tmp_path / "prog")], capture_output=True, text=True).stdout
    assert " T __mirecc_version_begin" in nm
    out = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True,
                         env=on, check=True)
    assert out.stdout == plain("clang-14", tmp_path) and out.stderr == ""
    assert "k.c saxpy" in {c.name for c in read_store(tmp_path / "store.txt")}
    bad = subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "d.o")],
                         env={**on, "MIRECC_ADAPT_VERSIONS": "1"}, capture_output=True,
                         text=True)
    assert bad.returncode == 2
    assert "MIRECC_ADAPT_VERSIONS: bad value: must be 2..8" in bad.stderr
    bad = subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "d.o")],
                         env={**on, "MIRECC_ADAPT_UNROLL": "3"}, capture_output=True, text=True)
    assert bad.returncode == 2 and "MIRECC_ADAPT_UNROLL: bad value" in bad.stderr


def test_main_is_not_versioned(tmp_path):
    """A held-out kernel whose main's loops the head expects to gain from
    other factors (its set-up loops): the kernel is versioned, main is not
    (its time is the whole program's)."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    from mirecc.tasks.loop_vectorize.offline.dataset import COMMITTED, kernel_source
    from mirecc.tasks.loop_vectorize.offline.train import read_labels

    row = next(r for r in read_labels(COMMITTED) if r["name"] == "nested-f32-rowsum-16x128x100")
    src = tmp_path / "k.c"
    src.write_text(kernel_source(COMMITTED, row).read_text())
    mirecc, env = driver(tmp_path, MIRECC_ADAPT_LOOPS="1")
    subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "k.o")],
                   check=True, env=env)
    # the sites' descriptors name their functions (main's versions would be
    # folded into main, leaving no symbol)
    data = (tmp_path / "k.o").read_bytes()
    assert b"k.c kernel\0" in data and b"k.c main\0" not in data


def test_an_inlinable_function_is_folded_into_its_caller(llvm_plugin, runtime, tmp_path):
    """A static function clang inlines: each version called from one place,
    so the versions and the dispatch are folded into main as the function
    was; the runtime still chooses, and the output is clang's."""
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "k.c"
    src.write_text(PROGRAM.replace("__attribute__((noinline)) void saxpy",
                                   "static void saxpy"))
    dec = decisions(tmp_path / "k.json", "saxpy")
    _err, remarks = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec),
                             out=tmp_path / "k.ll", what="-S -emit-llvm")
    assert any("function saxpy: 3 versions" in r for r in remarks), remarks
    ir = (tmp_path / "k.ll").read_text()
    assert "define" not in "".join(line for line in ir.splitlines() if "saxpy" in line)
    assert "mirecc.version.site" in ir and ".mirecc.ask" not in ir
    (cell,) = runs_as_clangs(clang, src, plugin_flags(plugin, dec), runtime, tmp_path, 2)
    assert cell.name == "k.c saxpy" and cell.arms[1].dropped


# a loop nest Polly can schedule (a matrix-vector product, as PolyBench's mvt)
NEST = r"""
#include <stdio.h>
#define N 400
static double A[N][N], x[N], y[N];
static void mv(int n, double a[N][N], double *restrict out, const double *restrict in) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) out[i] += a[j][i] * in[j];
}
int main(int argc, char **argv) {
  for (int i = 0; i < N; i++) {
    y[i] = i % 5;
    for (int j = 0; j < N; j++) A[i][j] = (i * j % 7) / 7.0;
  }
  for (int r = 0; r < 20; r++) mv(N, A, x, y);
  double s = 0;
  for (int i = 0; i < N; i++) s += x[i];
  printf("%.17g\n", s);
  return 0;
}
"""


@pytest.mark.parametrize("major", [14, 19])
def test_a_tagged_version_keeps_its_name_for_polly(llvm_plugin, runtime, tmp_path, major):
    """A version with a "tag" is a clone named <fn>.mirecc.v<i>.<tag>, kept
    out of line (the rest folded into main), that a flag reaches by name:
    Polly schedules that clone alone; the runtime chooses; the output is
    clang's."""
    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "n.c"
    src.write_text(NEST)
    dec = decisions(tmp_path / "n.json", "mv",
                    [{"name": "polly", "loops": {}, "tag": "polly"}, VERSIONS[0]])
    polly = ["-mllvm", "-polly", "-mllvm", r"-polly-only-func=^mv\.mirecc\.v[0-9]+\.polly$"]
    err, remarks = compile_(clang, src, ["-O3"], [*plugin_flags(plugin, dec), *polly],
                            out=tmp_path / "n.ll", what="-S -emit-llvm")
    assert any("function mv: 3 versions (LLVM's, polly, 1x1)" in r for r in remarks), remarks
    ir = (tmp_path / "n.ll").read_text()
    assert re.search(r"define internal .*@mv\.mirecc\.v1\.polly\(", ir)
    assert not re.search(r"define [^\n]*@mv\.mirecc\.v[02]\(", ir)   # folded into main
    # Polly's code: its alias scopes, on the tagged clone's accesses
    body = ir[re.search(r"define [^\n]*@mv\.mirecc\.v1\.polly\(", ir).start():]
    assert "polly.alias.scope" in ir and "!alias.scope" in body[: body.index("\n}\n")]
    _err, _ = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec),
                       out=tmp_path / "none.ll", what="-S -emit-llvm")
    assert "polly.alias.scope" not in (tmp_path / "none.ll").read_text()
    (cell,) = runs_as_clangs(clang, src, [*plugin_flags(plugin, dec), *polly], runtime,
                             tmp_path, 3)
    assert [a.name for a in cell.arms] == ["default", "polly", "1x1"]


@pytest.mark.parametrize("tag", ["", "Polly", "a.b", "x" * 16, 3])
def test_a_bad_tag_changes_nothing(llvm_plugin, tmp_path, tag):
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "k.c"
    src.write_text(PROGRAM)
    dec = decisions(tmp_path / "k.json", "saxpy", [{"name": "x", "loops": {}, "tag": tag}])
    err, _ = compile_(clang, src, ["-O3"], plugin_flags(plugin, dec), out=tmp_path / "a.o")
    assert '"tag" must be 1..15 lowercase letters or digits' in err, err
    subprocess.run([clang, "-O3", "-c", str(src), "-o", str(tmp_path / "b.o")], check=True)
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()


def test_the_driver_offers_the_loop_nests_schedule_as_a_version(tmp_path):
    """mirecc -O3 with adapt_loops on a loop nest: the loop-nests head's
    schedule as a version of its own (Polly on that clone alone, whatever
    the shipped head's gate says about forcing it), merged with the
    loop-vectorize head's versions into one dispatch and one store key; the
    program prints clang's output."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    src = tmp_path / "n.c"
    src.write_text(NEST)
    mirecc, env = driver(tmp_path, MIRECC_ADAPT_LOOPS="1",
                         MIRECC_ADAPT_STORE=str(tmp_path / "store.txt"))
    explained = subprocess.run([mirecc, "-O3", "-c", str(src), "-o", str(tmp_path / "n.o"),
                                "--explain"], check=True, env=env, capture_output=True,
                               text=True).stdout
    nests = [line for line in explained.splitlines() if "loop-nests mv:" in line]
    assert nests and "applied" in nests[0] and "Polly on that version alone" in nests[0], \
        explained
    nm = subprocess.run(["nm", str(tmp_path / "n.o")], capture_output=True, text=True).stdout
    assert re.search(r" t mv\.mirecc\.v1\.polly$", nm, re.M), nm
    subprocess.run([mirecc, str(tmp_path / "n.o"), "-o", str(tmp_path / "prog")], check=True,
                   env=env)
    subprocess.run(["clang-14", "-O3", str(src), "-o", str(tmp_path / "plain")], check=True)
    want = subprocess.run([str(tmp_path / "plain")], capture_output=True, text=True).stdout
    assert subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, env=env,
                          check=True).stdout == want
    (cell,) = [c for c in read_store(tmp_path / "store.txt") if c.name == "n.c mv"]
    # the loop-nests head's version first (tasks in name order), its schedule's name
    schedule = re.search(r"versions (polly[a-z0-9-]*)", nests[0]).group(1)
    assert [a.name for a in cell.arms][:2] == ["default", schedule]


def test_two_tasks_versions_of_one_function_are_merged():
    """loop-nests' schedule and loop-vectorize's factors for one function:
    one entry, the first task's (by name) first, a key of its own (new
    verdicts for a new set), at most the plugin's 7 beside LLVM's; the
    injection reaches Polly's clone by its tag, whatever its place."""
    from mirecc.plugin.decisions import module_entries
    from mirecc.taskapi.records import Decision
    from mirecc.tasks.loop_nests.head import inject

    def versions(task, names, **extra):
        value = {"key": f"k-{task}", "name": "a.c f", **extra,
                 "versions": [{"name": n, "loops": {}} for n in names]}
        return Decision(task=task, target="f", value=value, default=None, confidence=1.0,
                        reason="", applied=True)

    nests = versions("loop-nests", ["polly-tile64"], schedule="polly-tile64")
    vector = versions("loop-vectorize", [f"{w}x1" for w in (2, 4, 8, 16, 32, 64, 1)])
    merged = module_entries({"a.c": [vector, nests]})["a.c"]["versions"]["f"]
    assert [v["name"] for v in merged["versions"]] == ["polly-tile64", "2x1", "4x1", "8x1",
                                                       "16x1", "32x1", "64x1"]
    assert merged["key"] not in ("k-loop-nests", "k-loop-vectorize") and "schedule" not in merged
    alone = module_entries({"a.c": [vector]})["a.c"]["versions"]["f"]
    assert alone["key"] == "k-loop-vectorize" and len(alone["versions"]) == 7
    flags = inject({"a.c": [nests]}, "clang-14", None)
    assert flags[-1] == r"-polly-only-func=^f\.mirecc\.v[0-9]+\.polly$"
    assert "-polly-default-tile-size=64" in flags


def test_a_nest_whose_accesses_do_not_move_gets_no_schedule_version(tmp_path):
    """Debian's zlib (as setup fetches it): adler32_z's nest walks a byte
    pointer, so no access moves with its loops and a schedule has nothing to
    reorder; the shipped head's median still expects a gain there (it never
    saw code like it), so the rule, not the head, leaves it out."""
    from mirecc.cli.bench import fetched_library
    from mirecc.tasks.loop_nests import features as F

    tree = fetched_library()
    if tree is None or not shutil.which("clang-14"):
        pytest.skip("no zlib source fetched by scripts/setup.sh, or no clang-14")
    ir = subprocess.run(["clang-14", "-O3", "-Xclang", "-disable-llvm-passes", "-S",
                         "-emit-llvm", str(tree / "adler32.c"), "-o", "-"],
                        capture_output=True, text=True, check=True).stdout
    stats = F.function_features(ir, F.parse_functions(ir))["adler32_z"]
    assert stats["unit_share"] == stats["strided_share"] == 0
    mirecc, env = driver(tmp_path, MIRECC_ADAPT_LOOPS="1")
    explained = subprocess.run([mirecc, "-O3", "-c", str(tree / "adler32.c"), "-o",
                                str(tmp_path / "a.o"), "--explain"], check=True, env=env,
                               capture_output=True, text=True).stdout
    assert "[no-schedule-gain] loop-nests: no function with a nest has an access that moves" \
        in explained, explained
    nm = subprocess.run(["nm", str(tmp_path / "a.o")], capture_output=True, text=True).stdout
    assert ".polly" not in nm
