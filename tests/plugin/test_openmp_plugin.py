"""OpenMP runtime decisions (mirecc-omp-decide, passes/plugin) on real clangs.

The plugin is built once per session and LLVM major into a temporary cache
(mirecc.plugin.build.build_plugin), so the tests check the
source in this checkout; a clang without its LLVM CMake package is skipped,
and the tests that run programs are skipped where no OpenMP runtime links.
The call ids are counted here, from the ``-disable-llvm-passes`` IR, on
their own (FORMAT.md), not by the plugin's code.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mirecc.plugin import build as lp

MAJORS = [14, 19]
_LINK: dict[str, list[str] | None] = {}


@pytest.fixture(params=MAJORS, ids=lambda m: f"clang{m}")
def llvm(request, llvm_plugin):
    """(clang, major, plugin path) for one LLVM major; built on first use."""
    return llvm_plugin(request.param)


def omp_link_flags(clang: str, tmp: Path) -> list[str] | None:
    """Extra flags with which ``clang -fopenmp`` links and runs a program:
    none, or an installed libomp of another LLVM (Debian's clang-19 without
    libomp-19-dev); None if nothing works."""
    if clang not in _LINK:
        _LINK[clang] = None
        src = tmp / "omp-link.c"
        src.write_text("int main(void) { int n = 0;\n#pragma omp parallel\n n = 1;\n return !n; }\n")
        dirs = sorted({os.path.dirname(p) for p in glob.glob("/usr/lib/llvm-*/lib/libomp.so")})
        for extra in [[]] + [["-L" + d, "-Wl,-rpath," + d] for d in dirs]:
            exe = tmp / "omp-link"
            if (subprocess.run([clang, "-fopenmp", str(src), "-o", str(exe), *extra],
                               capture_output=True).returncode == 0
                    and subprocess.run([str(exe)], capture_output=True).returncode == 0):
                _LINK[clang] = extra
                break
    return _LINK[clang]


def run_env(**extra: str) -> dict:
    """The environment without the caller's OMP_* / KMP_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_"))}
    env["KMP_BLOCKTIME"] = "0"  # oversubscribed teams: no spinning
    env.update(extra)
    return env


_DEFINE = re.compile(r'^define [^@]*@("[^"]+"|[^\s(]+)\(')
_FORK = re.compile(r"@__kmpc_fork_call\(")
_STATIC_INIT = re.compile(r"call void @__kmpc_for_static_init_(?:4|4u|8|8u)\(")


def function_bodies(ir: str) -> dict[str, str]:
    """Function name -> its body text, in the order of the module."""
    bodies, name = {}, None
    for line in ir.splitlines():
        m = _DEFINE.match(line)
        if m:
            name = m.group(1).strip('"')
            bodies[name] = ""
        elif line == "}":
            name = None
        elif name:
            bodies[name] += line + "\n"
    return bodies


def omp_ids(clang: str, src: Path, flags: list[str]) -> tuple[list[str], list[str]]:
    """The ids of the __kmpc_fork_call and __kmpc_for_static_init_* calls,
    in module order, in the IR as clang emits it."""
    ll = src.with_suffix(".nopasses.ll")
    subprocess.run([clang, *flags, "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(ll)], check=True)
    forks, inits = [], []
    for fn, body in function_bodies(ll.read_text()).items():
        forks += [f"{fn}:{k}" for k in range(len(_FORK.findall(body)))]
        inits += [f"{fn}:{k}" for k in range(len(_STATIC_INIT.findall(body)))]
    return forks, inits


def write_decisions(path: Path, module: str, parallel=None, worksharing=None) -> Path:
    openmp = {}
    if parallel:
        openmp["parallel"] = parallel
    if worksharing:
        openmp["worksharing"] = worksharing
    path.write_text(json.dumps({"version": 1, "modules": {module: {"openmp": openmp}}}))
    return path


REMARK = re.compile(r":(\d+):\d+: remark: (.*) \[-R")
RPASS = ["-Rpass=mirecc-loophints", "-Rpass-missed=mirecc-loophints"]
FLAGS = ["-fopenmp", "-O2"]


def compile_(clang, src: Path, flags, extra=(), out: Path | None = None, what="-c"):
    """Compile (``what``: -c, -S -emit-llvm or link); returns (stderr, remark texts)."""
    out = out or src.with_suffix(".o")
    proc = subprocess.run([clang, *flags, *what.split(), str(src), "-o", str(out), *extra],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, [m.group(2) for m in REMARK.finditer(proc.stderr)]


# A parallel region with a triangular worksharing loop that records which
# thread ran each iteration, a combined parallel for with a reduction of
# integer-valued doubles, and a region with its own num_threads(3) clause.
PROGRAM = """\
#include <stdio.h>
int omp_get_thread_num(void);
int omp_get_num_threads(void);
#define N 64
static int who[N];
static long tri[N];

int main(void) {
  int team = 0, fixed = 0;
  double dsum = 0;
  #pragma omp parallel
  {
    #pragma omp single
    team = omp_get_num_threads();
    #pragma omp for
    for (int i = 0; i < N; i++) {
      long s = 0;
      for (int j = 0; j <= i * 100; j++) s += (long)j * (j % 5);
      tri[i] = s;
      who[i] = omp_get_thread_num();
    }
  }
  #pragma omp parallel for reduction(+:dsum)
  for (int i = 0; i < 1000; i++) dsum += (double)(i % 17) * 0.5;
  #pragma omp parallel num_threads(3)
  {
    #pragma omp single
    fixed = omp_get_num_threads();
  }
  long t = 0;
  for (int i = 0; i < N; i++) t += tri[i] * (i + 1);
  printf("result %ld %.1f\\n", t, dsum);
  printf("team %d fixed %d\\n", team, fixed);
  printf("who");
  for (int i = 0; i < N; i++) printf(" %d", who[i]);
  printf("\\n");
  return 0;
}
"""
N = 64
# a team size that differs from the machine's default (its core count)
THREADS = 5 if os.cpu_count() != 5 else 6


@pytest.fixture
def prog(tmp_path) -> Path:
    path = tmp_path / "omp.c"
    path.write_text(PROGRAM)
    return path


def parse(out: str) -> tuple[str, tuple[int, int], list[int]]:
    result, team, who = out.splitlines()
    t = team.split()
    return result, (int(t[1]), int(t[3])), [int(w) for w in who.split()[1:]]


def blocks(nthreads: int) -> list[int]:
    """The static block partition of N iterations (libomp's balanced one)."""
    small, extra = divmod(N, nthreads)
    return [t for t in range(nthreads) for _ in range(small + (t < extra))]


def build_pair(llvm, prog: Path, dec: Path, tmp_path: Path):
    """(plain, decided) executables and the decided build's remarks."""
    clang, major, plugin = llvm
    link = omp_link_flags(clang, tmp_path)
    if link is None:
        pytest.skip(f"{clang} -fopenmp links no working OpenMP runtime here")
    plain, decided = tmp_path / "plain", tmp_path / "decided"
    compile_(clang, prog, FLAGS, link, out=plain, what="")
    _, remarks = compile_(clang, prog, FLAGS, [*RPASS, *link, *lp.plugin_args(major, plugin, dec)],
                          out=decided, what="")
    return plain, decided, remarks


def run(exe: Path, **env: str) -> str:
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                          env=run_env(**env), timeout=60).stdout


def test_decisions_reach_the_ir(llvm, prog, tmp_path):
    clang, major, plugin = llvm
    forks, inits = omp_ids(clang, prog, FLAGS)
    assert len(forks) == 3 and len(inits) == 2 and all(f.startswith("main:") for f in forks)
    dec = write_decisions(tmp_path / "d.json", str(prog), parallel={"main:0": {"threads": THREADS}},
                          worksharing={inits[0]: {"schedule": "dynamic", "chunk": 8}})
    plain_ll, dec_ll = tmp_path / "plain.ll", tmp_path / "dec.ll"
    compile_(clang, prog, FLAGS, out=plain_ll, what="-S -emit-llvm")
    _, remarks = compile_(clang, prog, FLAGS, [*RPASS, *lp.plugin_args(major, plugin, dec)],
                          out=dec_ll, what="-S -emit-llvm")
    assert f"parallel main:0: threads={THREADS}" in remarks
    assert f"worksharing {inits[0]}: schedule=dynamic chunk=8" in remarks
    plain, decided = function_bodies(plain_ll.read_text()), function_bodies(dec_ll.read_text())
    loop_fn, other_fn = (i.rsplit(":", 1)[0] for i in inits)
    # the chosen loop dispatches, the other one is still static
    assert "__kmpc_for_static_init_4(" in plain[loop_fn] and "__kmpc_dispatch" not in plain[loop_fn]
    assert "__kmpc_for_static_init_4(" not in decided[loop_fn]
    assert "call void @__kmpc_dispatch_init_4(" in decided[loop_fn]
    assert "call i32 @__kmpc_dispatch_next_4(" in decided[loop_fn]
    # schedule 35 (dynamic) and chunk 8, or 34 and 0 when OMP_SCHEDULE is set
    assert re.search(r"select i1 %\S+, i32 (35, i32 34|34, i32 35)\b", decided[loop_fn])
    assert re.search(r"select i1 %\S+, i32 (8, i32 0|0, i32 8)\b", decided[loop_fn])
    assert 'c"OMP_SCHEDULE\\00"' in dec_ll.read_text()
    assert "__kmpc_for_static_init_4(" in decided[other_fn] and "__kmpc_dispatch" not in decided[other_fn]
    # the threads push (the helper, inlined at -O2) before the first fork,
    # under the OMP_NUM_THREADS check; the num_threads(3) clause's own push
    pushes = re.findall(r"@__kmpc_push_num_threads\(.*, i32 (\d+)\)", decided["main"])
    assert sorted(pushes) == sorted(["3", str(THREADS)])
    assert re.findall(r"@__kmpc_push_num_threads\(.*, i32 (\d+)\)", plain["main"]) == ["3"]
    assert 'c"OMP_NUM_THREADS\\00"' in dec_ll.read_text() and "@getenv(" in decided["main"]


def test_decided_program_computes_the_same(llvm, prog, tmp_path):
    """threads and a static,2 schedule take effect; the user's OMP_NUM_THREADS
    and OMP_SCHEDULE win; num_threads(3) in the source is kept; the results
    are those of the plain build in every case."""
    clang, major, _ = llvm
    forks, inits = omp_ids(clang, prog, FLAGS)
    dec = write_decisions(tmp_path / "d.json", str(prog),
                          parallel={"main:0": {"threads": THREADS}, "main:2": {"threads": 2}},
                          worksharing={inits[0]: {"schedule": "static", "chunk": 2},
                                       inits[1]: {"schedule": "guided"}})
    plain, decided, remarks = build_pair(llvm, prog, dec, tmp_path)
    assert f"parallel main:0: threads={THREADS}" in remarks
    assert f"worksharing {inits[0]}: schedule=static chunk=2" in remarks
    assert f"worksharing {inits[1]}: schedule=guided" in remarks
    assert "parallel main:2: threads=2 not applied: the source has a num_threads clause for it" in remarks

    result, _, _ = parse(run(plain))
    # no OMP_* set: the decisions
    r, (team, fixed), who = parse(run(decided))
    assert (r, team, fixed) == (result, THREADS, 3)
    assert who == [(i // 2) % THREADS for i in range(N)]  # chunks of 2, round robin
    # OMP_NUM_THREADS wins over threads (the schedule stays)
    for n in (1, 2):
        r, (team, fixed), who = parse(run(decided, OMP_NUM_THREADS=str(n)))
        assert (r, team, fixed) == (result, n, 3)
        assert who == [(i // 2) % n for i in range(N)]
    # OMP_SCHEDULE wins over the schedule: the plain build's static blocks
    r, (team, fixed), who = parse(run(decided, OMP_SCHEDULE="dynamic,3"))
    assert (r, team, fixed) == (result, THREADS, 3)
    _, (plain_team, _), plain_who = parse(run(plain, OMP_NUM_THREADS=str(THREADS)))
    assert plain_team == THREADS and who == plain_who == blocks(THREADS)


def test_dynamic_schedule_takes_effect(llvm, prog, tmp_path):
    clang, _, _ = llvm
    _, inits = omp_ids(clang, prog, FLAGS)
    dec = write_decisions(tmp_path / "d.json", "*", parallel={"main:0": {"threads": 2}},
                          worksharing={inits[0]: {"schedule": "dynamic", "chunk": 1}})
    plain, decided, remarks = build_pair(llvm, prog, dec, tmp_path)
    assert f"worksharing {inits[0]}: schedule=dynamic chunk=1" in remarks
    result, _, plain_who = parse(run(plain, OMP_NUM_THREADS="2"))
    assert plain_who == blocks(2)
    r, (team, _), who = parse(run(decided))
    assert (r, team) == (result, 2)
    assert who != blocks(2) and set(who) <= {0, 1}
    r, _, who = parse(run(decided, OMP_SCHEDULE="static"))
    assert r == result and who == blocks(2)


REFUSED = """\
int omp_get_thread_num(void);
int a[100], b[100];
int main(void) {
  int last = -1;
  #pragma omp parallel
  {
    #pragma omp for schedule(dynamic)
    for (int i = 0; i < 100; i++) a[i] = i;
    #pragma omp for lastprivate(last)
    for (int i = 0; i < 100; i++) last = a[i];
    #pragma omp for schedule(static, 4)
    for (int i = 0; i < 100; i++) b[i] = a[i] + 1;
    #pragma omp for nowait
    for (int i = 0; i < 100; i++) b[i] += omp_get_thread_num();
    #pragma omp for
    for (int i = 0; i < 100; i++) a[i] += b[i];
  }
  return last + b[7];
}
"""


def test_explicit_schedule_lastprivate_nowait_not_rewritten(llvm, tmp_path):
    clang, major, plugin = llvm
    src = tmp_path / "refused.c"
    src.write_text(REFUSED)
    _, inits = omp_ids(clang, src, FLAGS)
    assert len(inits) == 4  # schedule(dynamic) is a dispatch loop already
    fn = inits[0].rsplit(":", 1)[0]
    dec = write_decisions(tmp_path / "d.json", str(src), worksharing={
        f"{fn}:{k}": {"schedule": "dynamic", "chunk": 2} for k in (0, 1, 2, 4)})
    compile_(clang, src, FLAGS, RPASS, out=tmp_path / "plain.o")
    _, remarks = compile_(clang, src, FLAGS, [*RPASS, *lp.plugin_args(major, plugin, dec)],
                          out=tmp_path / "dec.o")
    why = {r.split(":")[0] + ":" + r.split(":")[1].split()[0]: r for r in remarks}
    head = f"worksharing {fn}:%d: schedule=dynamic chunk=2 not applied: "
    assert why[f"worksharing {fn}:0"].startswith(head % 0 + "the loop reads its last-iteration flag")
    assert why[f"worksharing {fn}:1"].startswith(head % 1 + "the loop has a schedule clause")
    assert why[f"worksharing {fn}:2"].startswith(head % 2 + "no barrier follows the loop (nowait)")
    assert why[f"worksharing {fn}:4"] == (f"worksharing {fn}:4: no __kmpc_for_static_init call "
                                          "with that index; decision ignored")
    assert not [r for r in remarks if "not applied" not in r and "no __kmpc" not in r]
    assert (tmp_path / "plain.o").read_bytes() == (tmp_path / "dec.o").read_bytes()


@pytest.mark.parametrize("entry", [
    {"worksharing": {"X:0": {"schedule": "dynamic", "chunks": 4}}},
    {"worksharing": {"X:0": {"schedule": "fast"}}},
    {"parallel": {"main:0": {"threads": 0}}},
    {"parallel": {"main:0": {"threads": 2}}, "tasks": {}},
], ids=["unknown-key", "schedule-fast", "threads-0", "unknown-kind"])
def test_bad_openmp_entry_changes_nothing(llvm, prog, tmp_path, entry):
    clang, major, plugin = llvm
    _, inits = omp_ids(clang, prog, FLAGS)
    text = json.dumps({"version": 1, "modules": {"*": {
        "loops": {}, "openmp": {"parallel": {"main:0": {"threads": 3}}} | json.loads(
            json.dumps(entry).replace('"X:0"', json.dumps(inits[0])))}}})
    dec = tmp_path / "bad.json"
    dec.write_text(text)
    compile_(clang, prog, FLAGS, out=tmp_path / "plain.o")
    stderr, _ = compile_(clang, prog, FLAGS, lp.plugin_args(major, plugin, dec), out=tmp_path / "dec.o")
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"mirecc-loophints: warning: {dec}: ")
    assert (tmp_path / "plain.o").read_bytes() == (tmp_path / "dec.o").read_bytes()


def test_opt_pass_by_name_verifies_and_optimises(llvm, prog, tmp_path):
    clang, major, plugin = llvm
    opt = shutil.which(f"opt-{major}")
    if not opt:
        pytest.skip(f"opt-{major} is not installed")
    forks, inits = omp_ids(clang, prog, FLAGS)
    dec = write_decisions(tmp_path / "d.json", str(prog), parallel={"main:0": {"threads": 4}},
                          worksharing={inits[0]: {"schedule": "guided", "chunk": 3},
                                       inits[1]: {"schedule": "dynamic"}})
    env = dict(os.environ, MIRECC_LOOP_DECISIONS=str(dec))
    rewritten = tmp_path / "rewritten.ll"
    proc = subprocess.run([opt, f"-load-pass-plugin={plugin}", "-passes=mirecc-omp-decide",
                           "-pass-remarks=mirecc-loophints", "-S",
                           str(prog.with_suffix(".nopasses.ll")), "-o", str(rewritten)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("remark: ") == 3, proc.stderr
    bodies = function_bodies(rewritten.read_text())
    for lid in inits:
        body = bodies[lid.rsplit(":", 1)[0]]
        assert "__kmpc_for_static_init" not in body and "__kmpc_for_static_fini" not in body
        assert "@__kmpc_dispatch_init_4(" in body and "@__kmpc_dispatch_next_4(" in body
    assert "@__mirecc_omp_push_threads(" in bodies["main"]
    assert "__mirecc_omp_push_threads" in bodies and "__mirecc_omp_user_schedule" in bodies
    for passes in ("verify", "default<O2>", "default<O3>"):
        out = subprocess.run([opt, f"-passes={passes}", "-S", str(rewritten), "-o", "-"],
                             capture_output=True, text=True)
        assert out.returncode == 0, (passes, out.stderr)
    assert "@__kmpc_dispatch_next_4(" in out.stdout
