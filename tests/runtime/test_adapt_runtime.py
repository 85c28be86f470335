"""The adaptive OpenMP runtime (runtime/adapt) with the plugin's adaptive
sites (passes/plugin, FORMAT.md "Adaptive sites"), on real clangs and
libomp: programs built, run and timed for real.

What is checked: the site runs the program's own configuration and the
candidates, keeps only one that measures faster, and writes its verdict to
the store, which the next run starts from; outputs equal the plain build's;
the weak references run the program's own configuration when the runtime is
not linked; OMP_* variables and explicit clauses win; a damaged store gives
one warning line; the driver links the runtime only with the setting and
leaves objects byte-identical without it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mirecc.runtime import build as rb
from mirecc.runtime.store import read_store, table
from tests.plugin.test_openmp_plugin import RPASS, compile_, omp_ids, omp_link_flags, run_env

REPO = Path(__file__).resolve().parents[2]

# A triangular worksharing loop in a time loop: the static default leaves
# one thread most of the work, dynamic chunks balance it.  The sum is of
# integers, so any schedule or team size gives the same output exactly.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#define N 1200
static long rows[N];
int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 60;
  long total = 0;
  for (int t = 0; t < steps; t++) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
      long s = 0;
      for (int j = 0; j <= i * 4; j++) s += (j * 7 + t) % 13;
      rows[i] = s;
    }
    for (int i = 0; i < N; i++) total += rows[i];
  }
  printf("%ld\n", total);
  return 0;
}
"""

# A loop the source schedules itself, in a region the source sizes itself.
EXPLICIT = r"""
#include <stdio.h>
static long v[4096];
int main(void) {
  long s = 0;
  for (int t = 0; t < 20; t++) {
    #pragma omp parallel for schedule(static) num_threads(2)
    for (int i = 0; i < 4096; i++) v[i] = (long)i * t;
    for (int i = 0; i < 4096; i++) s += v[i];
  }
  printf("%ld\n", s);
  return 0;
}
"""

CANDIDATES = ["one-static-default", "all-dynamic-8", "all-guided-default"]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """The runtime archive of this checkout, built into a temporary cache."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    return rb.ensure_runtime("clang-14", tmp_path_factory.mktemp("runtime-cache"))


def decisions(path: Path, module: str, loops=(), candidates=CANDIDATES,
              key="k0000000000000001") -> Path:
    entry = {"key": key, "name": f"{Path(module).name} main:0", "candidates": list(candidates),
             "loops": list(loops)}
    path.write_text(json.dumps({"version": 1, "modules": {
        module: {"openmp": {"adapt": {"main:0": entry}}}}}))
    return path


def build(clang, plugin, tmp: Path, source: str, name: str, runtime: Path | None, extra=()):
    """(program, remarks): compiled with the decisions through the plugin,
    linked with the runtime archive when given."""
    src = tmp / f"{name}.c"
    src.write_text(source)
    link = omp_link_flags(clang, tmp)
    if link is None:
        pytest.skip(f"{clang} -fopenmp does not link a runnable program here")
    flags = ["-fopenmp", "-O2", *link]
    _forks, loops = omp_ids(clang, src, flags)   # the region's loop: clang 14 and 19 name it
    _err, remarks = compile_(clang, src, flags, [
        "-Xclang", "-load", "-Xclang", str(plugin), f"-fpass-plugin={plugin}", "-mllvm",
        f"-mirecc-loop-decisions={decisions(tmp / f'{name}.json', str(src), loops)}",
        *RPASS, *extra])
    exe = tmp / name
    cmd = [clang, "-fopenmp", str(src.with_suffix(".o")), "-o", str(exe), *link]
    if runtime:
        cmd += rb.link_arguments(clang, runtime.parent.parent)
    subprocess.run(cmd, check=True, capture_output=True)
    return exe, remarks


def run(exe: Path, store: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True,
                          env=run_env(MIRECC_ADAPT_STORE=str(store), **env))


def plain(clang, tmp: Path, source: str, name: str, *args: str) -> str:
    """The output of the program built by clang alone."""
    src = tmp / f"{name}.c"
    src.write_text(source)
    exe = tmp / name
    subprocess.run([clang, "-fopenmp", "-O2", str(src), "-o", str(exe),
                    *omp_link_flags(clang, tmp)], check=True, capture_output=True)
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True,
                          env=run_env()).stdout


def test_site_explores_keeps_and_remembers(llvm_plugin, runtime, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    exe, remarks = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    assert any(r.startswith("adapt main:0: 1 loop with adaptive schedules") for r in remarks), \
        remarks
    store = tmp_path / "store.txt"
    expected = plain(clang, tmp_path, PROGRAM, "tri_plain", "200")
    first = run(exe, store, "200")
    assert first.stdout == expected and first.stderr == ""
    (cell,) = read_store(store)
    assert cell.key == "k0000000000000001" and cell.name == "tri.c main:0"
    assert [a.name for a in cell.arms] == ["default", *CANDIDATES]
    # every candidate was tried, and the verdict is one of the arms
    assert cell.phase == 1 and cell.tried == len(CANDIDATES), table([cell])
    assert cell.best in ["default", *CANDIDATES]
    kept = [a for a in cell.arms[1:] if a.kept]
    # a kept candidate was measured faster than the default (its median; the
    # stored samples are the last ones, exploiting's among them, so the rule's
    # other terms, read when it was kept, need not hold on them now)
    for a in kept:
        assert a.median < cell.arms[0].median
    # each later candidate must beat the reference, the last one kept: the
    # verdict is the candidate kept last (medians move on as exploiting adds samples)
    assert cell.best == ("default" if not kept else max(kept, key=lambda a: a.at).name)
    assert cell.decided_at <= 200 and cell.runs == 1
    # the next run starts from the verdict: no arm is explored again
    before = {a.name: a.samples for a in cell.arms}
    second = run(exe, store, "50")
    assert second.stdout == plain(clang, tmp_path, PROGRAM, "tri_plain", "50")
    (again,) = read_store(store)
    assert again.runs == 2 and again.phase == 1 and again.best == cell.best
    grew = {a.name for a in again.arms if a.samples > before[a.name]}
    assert grew <= {cell.best, "default"}, grew


def test_without_runtime_and_with_user_settings(llvm_plugin, runtime, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    expected = plain(clang, tmp_path, PROGRAM, "tri_plain")
    # linked without the runtime: the weak references run the program's own
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri_alone", None)
    out = run(exe, tmp_path / "none.txt", "60")
    assert out.stdout == expected and out.stderr == "" and not (tmp_path / "none.txt").exists()
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    for env in ({"OMP_NUM_THREADS": "2"}, {"OMP_SCHEDULE": "static"}, {"MIRECC_ADAPT": "0"}):
        store = tmp_path / f"store-{len(env)}-{next(iter(env))}.txt"
        out = run(exe, store, "60", **env)
        assert out.stdout == expected and out.stderr == ""
        assert not store.exists(), f"the runtime acted under {env}"


def test_damaged_store_warns_once_and_is_replaced(llvm_plugin, runtime, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    store = tmp_path / "store.txt"
    store.write_text("something else\n")
    out = run(exe, store, "60")
    assert out.stdout == plain(clang, tmp_path, PROGRAM, "tri_plain")
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "not a mirecc-adapt store" in lines[0] and str(store) in lines[0]
    assert read_store(store)   # rewritten as the runtime's own


def test_explicit_clauses_win(llvm_plugin, runtime, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    # the head never names a loop with a schedule clause; the team size the
    # num_threads clause fixes stays: nothing is left to adapt
    src = tmp_path / "explicit.c"
    src.write_text(EXPLICIT)
    link = omp_link_flags(clang, tmp_path) or []
    _err, remarks = compile_(clang, src, ["-fopenmp", "-O2", *link], [
        "-Xclang", "-load", "-Xclang", str(plugin), f"-fpass-plugin={plugin}", "-mllvm",
        f"-mirecc-loop-decisions={decisions(tmp_path / 'e.json', str(src), loops=())}",
        *RPASS])
    assert any("adapt main:0 not applied: the source fixes the team size" in r
               for r in remarks), remarks


@pytest.mark.parametrize("major", [14, 19])
def test_rewritten_site_same_output_each_arm(llvm_plugin, runtime, tmp_path, major):
    """Every candidate, forced for a whole run through a store that decided
    on it (and not due for a re-check of the default before invocation 131072),
    gives the plain build's output (integer sums: exactly)."""
    clang, _major, plugin = llvm_plugin(major)
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    expected = plain(clang, tmp_path, PROGRAM, "tri_plain")
    for arm in CANDIDATES:
        store = tmp_path / f"{arm}.txt"
        arms = ";".join(f"{n}:0:0:0:0:" for n in ["default", *CANDIDATES])
        store.write_text("# mirecc-adapt 1 machine=test\n" + "\t".join(
            ["k0000000000000001", "5", "tri.c main:0", "1", arm, "100000", "100000", "1", "1",
             "1", "0", "0", "-", "0", arms]) + "\n")
        out = run(exe, store, "60")
        assert out.stdout == expected, arm
        (cell,) = read_store(store)
        assert cell.best == arm and next(a for a in cell.arms if a.name == arm).samples > 0


def test_driver_links_runtime_only_with_the_setting(tmp_path, monkeypatch):
    """mirecc with adapt_openmp: the site in the object and the runtime in
    the program; without it the object is clang's byte for byte."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    mirecc = shutil.which("mirecc", path=str(Path(os.sys.executable).parent)) or "mirecc"
    src = tmp_path / "tri.c"
    src.write_text(PROGRAM)
    env = {**run_env(), "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
           "MIRECC_ADAPT_STORE": str(tmp_path / "store.txt")}
    env.pop("MIRECC_ADAPT_OPENMP", None)
    subprocess.run([mirecc, "-O2", "-fopenmp", "-c", str(src), "-o", str(tmp_path / "a.o")],
                   check=True, env=env)
    subprocess.run(["clang-14", "-O2", "-fopenmp", "-c", str(src), "-o",
                    str(tmp_path / "b.o")], check=True, env=env)
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()
    on = {**env, "MIRECC_ADAPT_OPENMP": "1"}
    subprocess.run([mirecc, "-O2", "-fopenmp", "-c", str(src), "-o", str(tmp_path / "c.o")],
                   check=True, env=on)
    nm = subprocess.run(["nm", str(tmp_path / "c.o")], capture_output=True, text=True).stdout
    assert " w __mirecc_adapt_begin" in nm
    subprocess.run([mirecc, "-fopenmp", str(tmp_path / "c.o"), "-o", str(tmp_path / "prog")],
                   check=True, env=on)
    nm = subprocess.run(["nm", str(tmp_path / "prog")], capture_output=True, text=True).stdout
    assert " T __mirecc_adapt_begin" in nm
    out = subprocess.run([str(tmp_path / "prog"), "80"], capture_output=True, text=True,
                         env=on, check=True)
    assert out.stderr == ""
    assert read_store(tmp_path / "store.txt")[0].name == "tri.c main:0"
    # a link without -fopenmp or without the setting takes nothing
    subprocess.run([mirecc, "-fopenmp", str(tmp_path / "a.o"), "-o", str(tmp_path / "p2")],
                   check=True, env=env)
    nm = subprocess.run(["nm", str(tmp_path / "p2")], capture_output=True, text=True).stdout
    assert "__mirecc_adapt" not in nm


# A region that runs three times per process: too few to explore in a run.
FEW = PROGRAM.replace('argc > 1 ? atoi(argv[1]) : 60', 'argc > 1 ? atoi(argv[1]) : 3')


def test_across_runs_one_arm_per_run(llvm_plugin, runtime, tmp_path):
    """A region too rare to explore in one run is explored over successive
    runs by default, one arm per run, until every candidate has its
    verdict (``mire adapt``: waiting for the next run); with
    MIRECC_ADAPT_ACROSS_RUNS=0 it keeps the program's own (skipped: too
    few invocations per run)."""
    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, FEW, "few", runtime)
    expected = plain(clang, tmp_path, FEW, "few_plain")
    off = tmp_path / "off.txt"
    for _ in range(4):
        assert run(exe, off, MIRECC_ADAPT_ACROSS_RUNS="0").stdout == expected
    (cell,) = read_store(off)
    assert cell.phase == 0 and cell.tried == 0 and not cell.across, table([cell])
    assert cell.state.startswith("skipped: too few invocations per run"), cell.state
    store = tmp_path / "across.txt"
    arms_per_run, states = [], set()
    for n in range(40):
        before = {a.name: a.samples for a in read_store(store)[0].arms} if n else {}
        assert run(exe, store).stdout == expected
        (cell,) = read_store(store)
        states.add(cell.state)
        grew = [a.name for a in cell.arms if a.samples > before.get(a.name, 0)]
        arms_per_run.append(grew)
        if cell.phase == 1:
            break
    assert cell.phase == 1 and cell.tried == len(CANDIDATES), table([cell])
    assert "waiting for the next run" in states, states
    assert cell.decided_runs == len(arms_per_run)
    # each run tried one candidate at most (after a candidate's verdict the
    # run's other invocations take the reference: the default, or the
    # candidate kept last)
    assert all(len(g) <= 2 for g in arms_per_run), arms_per_run
    assert sum(1 for g in arms_per_run if g != ["default"]) >= len(CANDIDATES)
    assert 0 <= cell.worst <= 1


# 200,000 invocations of a region of 64 iterations: each far shorter than a
# sample can be alone (the fork and join are most of it).
TINY = r"""
#include <stdio.h>
#include <stdlib.h>
static long v[64];
int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 200000;
  long total = 0;
  for (int t = 0; t < steps; t++) {
    #pragma omp parallel for
    for (int i = 0; i < 64; i++) v[i] = (long)i * t + 1;
    total += v[t & 63];
  }
  printf("%ld\n", total);
  return 0;
}
"""


def test_a_tiny_region_is_timed_in_batches(llvm_plugin, runtime, tmp_path):
    """A region too short to time alone is timed over many invocations
    (the fork and join included) and decided like any other, where it used
    to be left alone; the output is the plain build's."""
    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, TINY, "tiny", runtime)
    store = tmp_path / "store.txt"
    # no exploration budget: a slow batch would otherwise pause exploring
    # for as long as the noise of a loaded machine says (not what is tested);
    # "too short" below 2 ms, so that a loaded machine's slower forks (75 µs
    # seen) still count as short
    assert run(exe, store, "60000", MIRECC_ADAPT_BUDGET="1",
               MIRECC_ADAPT_MIN_US="2000").stdout == \
        plain(clang, tmp_path, TINY, "tiny_plain", "60000")
    (cell,) = read_store(store)
    assert cell.batch > 1 and cell.phase != 2, table([cell])
    assert cell.phase == 1 and cell.tried >= 1, table([cell])


# One region, six input sizes: five light ones first (more buckets than a
# site tracks), then the heavy one that holds most of the time.
SIZES = r"""
#include <stdio.h>
static long v[200000];
int main(void) {
  static const int light[5] = {2, 8, 32, 128, 512};
  long total = 0;
  for (int t = 0; t < 700; t++) {
    int n = t < 500 ? light[t % 5] : 200000;
    #pragma omp parallel for
    for (int i = 0; i < n; i++) v[i] = (long)i * t + 1;
    total += v[n - 1];
  }
  printf("%ld\n", total);
  return 0;
}
"""


def test_the_heaviest_input_size_is_tracked(llvm_plugin, runtime, tmp_path):
    """With every bucket taken by light sizes met first, the size that
    holds most of the site's time takes the lightest one's place."""
    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, SIZES, "sizes", runtime)
    store = tmp_path / "store.txt"
    assert run(exe, store).stdout == plain(clang, tmp_path, SIZES, "sizes_plain")
    cells = read_store(store)
    heavy = max(c.bucket for c in cells)
    assert heavy >= 8, table(cells)     # 200,000 iterations: 4^8 and more
    (cell,) = [c for c in cells if c.bucket == heavy]
    assert cell.invocations >= 100, table(cells)


# A program that sets its own team size before its first region.
EIGHT = PROGRAM.replace("  long total = 0;\n", "  long total = 0;\n  omp_set_num_threads(8);\n") \
    .replace("#include <stdio.h>\n", "#include <stdio.h>\n#include <omp.h>\n")


def test_the_machine_key_is_the_machines(llvm_plugin, runtime, tmp_path):
    """A program that sets 8 threads on this machine files its verdicts
    under the cores the process may use, as ``mire adapt`` names the
    machine, not under 8."""
    from mirecc.runtime.store import machine_descriptor

    assert "omp_set_num_threads(8)" in EIGHT
    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, EIGHT, "eight", runtime)
    store = tmp_path / "store.txt"
    assert run(exe, store, "40").stdout == plain(clang, tmp_path, EIGHT, "eight_plain", "40")
    (cell,) = read_store(store)
    assert cell.machine == machine_descriptor(), (cell.machine, machine_descriptor())


def test_a_seeded_verdict_is_run_from_the_first_invocation(llvm_plugin, runtime, tmp_path):
    """mirecc.runtime.store.seed (what mire tune writes): a decided verdict
    for the site's key, adopted for the input size of its first invocation;
    the machine descriptor is the runtime's own."""
    from mirecc.runtime.store import machine_descriptor, seed

    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    store = tmp_path / "adapt" / f"{machine_descriptor()}.txt"
    seed(store, "k0000000000000001", "tri.c main:0", "all-dynamic-8")
    out = run(exe, store, "40")
    assert out.stdout == plain(clang, tmp_path, PROGRAM, "tri_plain", "40")
    (cell,) = read_store(store)
    assert cell.machine == machine_descriptor()     # the runtime wrote the header
    assert cell.phase == 1 and cell.best == "all-dynamic-8" and cell.bucket >= 0
    arms = {a.name: a.samples for a in cell.arms}
    assert arms["all-dynamic-8"] > 0 and arms["one-static-default"] == 0
    assert arms["all-guided-default"] == 0



def test_a_site_decided_for_its_own_configuration_stays_quiet(llvm_plugin, runtime, tmp_path):
    """A site whose verdict is the program's own configuration times one
    invocation in 16 (and the re-checks), not every invocation once it
    passes its first re-check point (64)."""
    from mirecc.runtime.store import machine_descriptor, seed

    clang, _major, plugin = llvm_plugin(14)
    exe, _ = build(clang, plugin, tmp_path, PROGRAM, "tri", runtime)
    store = tmp_path / "adapt" / f"{machine_descriptor()}.txt"
    seed(store, "k0000000000000001", "tri.c main:0", "default")
    assert run(exe, store, "240").stdout == plain(clang, tmp_path, PROGRAM, "tri_plain", "240")
    (cell,) = read_store(store)
    assert cell.phase == 1 and cell.best == "default" and cell.invocations == 240
    samples = {a.name: a.samples for a in cell.arms}
    assert samples["default"] <= 240 // 16 + 8, table([cell])

def test_mire_adapt_seeds_what_a_profile_keeps(tmp_path):
    """mire adapt --seed (and mire tune --seed-adapt): a decisions profile's
    openmp entry, keyed by the region's digest as the site is, becomes this
    machine's verdict; the program built with adapt_openmp runs it from its
    first invocation, with the plain build's output."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    bindir = Path(os.sys.executable).parent
    mirecc = shutil.which("mirecc", path=str(bindir)) or "mirecc"
    mire = shutil.which("mire", path=str(bindir)) or "mire"
    src = tmp_path / "tri.c"
    src.write_text(PROGRAM)
    store = tmp_path / "store.txt"
    env = {**run_env(), "MIRECC_CACHE_DIR": str(tmp_path / "cache"),
           "MIRECC_ADAPT_STORE": str(store), "MIRECC_ADAPT_OPENMP": "1",
           "MIRECC_RECORD": str(tmp_path / "record.jsonl")}
    subprocess.run([mirecc, "-O2", "-fopenmp", str(src), "-o", str(tmp_path / "prog")],
                   check=True, env=env, cwd=tmp_path)
    (rec,) = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    (site,) = [d for d in rec["decisions"] if d["task"] == "openmp"]
    key, arm = site["value"]["key"], site["value"]["adapt"][-1]
    share, schedule, chunk = arm.split("-")
    cores = len(os.sched_getaffinity(0))
    threads = {"one": 1, "all": cores, "half": cores // 2, "quarter": cores // 4}[share]
    value = f"threads={threads},schedule={schedule}" + (
        f",chunk={chunk}" if chunk != "default" else "")
    profile = tmp_path / "mirecc.profile"
    profile.write_text(f"# mirecc decisions profile 1\nopenmp tri.c main:0 {key} {value}\n")

    out = subprocess.run([mire, "adapt", "--seed", str(profile)], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert f"seeded 1 adaptive verdict from {profile}" in out
    (cell,) = read_store(store)
    assert cell.key == key and cell.best == arm and cell.phase == 1

    ran = subprocess.run([str(tmp_path / "prog"), "40"], capture_output=True, text=True,
                         env=env, check=True)
    assert ran.stdout == plain("clang-14", tmp_path, PROGRAM, "tri_plain", "40")
    (cell,) = read_store(store)
    arms = {a.name: a.samples for a in cell.arms}
    assert cell.best == arm and arms[arm] > 0, table([cell])
    assert sum(n for name, n in arms.items() if name not in (arm, "default")) == 0, \
        table([cell])

    # a malformed profile: a clear error naming it, nothing written
    profile.write_text("openmp tri.c main:0 nothex threads=1,schedule=static\n")
    bad = subprocess.run([mire, "adapt", "--seed", str(profile)], env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and str(profile) in bad.stderr


def test_links_with_x_c_and_through_cxx(tmp_path):
    """The runtime's archive on a link after the user's ``-x c`` is read as
    an archive (not a C source), and a first link through mirecc++ (clang++)
    builds the runtime's C file as C."""
    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    bindir = Path(os.sys.executable).parent
    src = tmp_path / "tri.c"
    src.write_text(PROGRAM)
    env = {**run_env(), "MIRECC_ADAPT_STORE": str(tmp_path / "store.txt"),
           "MIRECC_ADAPT_OPENMP": "1"}
    for driver, cache, flags in (("mirecc", "c1", ["-x", "c"]), ("mirecc++", "c2", [])):
        source = src if not flags else tmp_path / "tri.txt"
        if flags:
            source.write_text(PROGRAM)   # a name clang would not read as C
        else:
            source = tmp_path / "tri.cpp"
            source.write_text(PROGRAM)
        exe = tmp_path / f"prog-{driver}"
        proc = subprocess.run([str(bindir / driver), "-O2", "-fopenmp", *flags, str(source),
                               "-o", str(exe)], capture_output=True, text=True,
                              env={**env, "MIRECC_CACHE_DIR": str(tmp_path / cache)})
        assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
        nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
        assert " T __mirecc_adapt_begin" in nm, driver
