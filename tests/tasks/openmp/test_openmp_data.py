"""The OpenMP task's sites (ids, regions, locations, explicit clauses) on
clang 14 and 19, and the dataset harness (mire omp-data) on tiny runs:
PolyBench-ACC's gemm at MINI size and one generated kernel, 1 repeat, two
configurations; a program whose output depends on the team size; resume;
the oracle on hand-written rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mirecc.ir import regions as S
from mirecc.tasks.openmp.offline import dataset as D
from mirecc.tasks.openmp.offline import kernels as K
from mirecc.tasks.openmp.offline import programs as P

MAJORS = [14, 19]
FLAGS = ["-fopenmp", "-O3"]


def _clang(major: int) -> str:
    cc = shutil.which(f"clang-{major}")
    if not cc:
        pytest.skip(f"clang-{major} is not installed")
    return cc


# A module with: a combined parallel for (8-byte iteration variable); a
# region with num_threads(2) whose first loop says schedule(static) on a
# continuation line, whose second loop is unsigned, and which calls a
# function with an orphaned loop; a nested parallel for; a
# schedule(dynamic) loop (a dispatch loop: not counted); schedule(static, 4).
SITES_PROGRAM = """\
long a[1000], b[1000];
void omp_set_max_active_levels(int);
void orphan(int n) {
  #pragma omp for
  for (int i = 0; i < n; i++) b[i] += 1;                 /* ORPHAN */
}
int main(void) {
  long s = 0;
  omp_set_max_active_levels(2);
  #pragma omp parallel for reduction(+:s)
  for (long i = 0; i < 1000; i++) s += i;               /* COMBINED */
  #pragma omp parallel num_threads(2)
  {
    #pragma omp for \\
      schedule(static)
    for (int i = 0; i < 1000; i++) a[i] = i;            /* CONTINUED */
    orphan(1000);
    #pragma omp for
    for (unsigned i = 0; i < 1000u; i++) a[i] += 1;     /* UNSIGNED */
  }
  #pragma omp parallel for
  for (int o = 0; o < 4; o++) {                         /* OUTER */
    #pragma omp parallel for
    for (int i = 0; i < 250; i++) b[o * 250 + i] += a[i];   /* INNER */
  }
  #pragma omp parallel for schedule(dynamic, 4)
  for (int i = 0; i < 1000; i++) b[i] *= 2;
  #pragma omp parallel for schedule(static, 4)
  for (int i = 0; i < 1000; i++) b[i] *= 2;             /* CHUNKED */
  return (int)(s + b[7]);
}
"""


def _pragma_line(src: str, marker: str) -> int:
    """The line of the pragma just above the statement marked ``marker``
    (the line a site's location names)."""
    lines = src.splitlines()
    at = next(i for i, ln in enumerate(lines) if marker in ln)
    j = at - 1
    while j > 0 and lines[j - 1].rstrip().endswith("\\"):
        j -= 1
    return j + 1


@pytest.mark.parametrize("major", MAJORS, ids=lambda m: f"clang{m}")
def test_sites_ids_regions_locations_clauses(major, tmp_path):
    cc = _clang(major)
    src = tmp_path / "sites.c"
    src.write_text(SITES_PROGRAM)
    found = S.program_sites(src.name, cc, FLAGS, cwd=tmp_path)
    par = [s for s in found if s.kind == "parallel"]
    loops = [s for s in found if s.kind == "loop"]
    # clang names the outlined functions differently per version
    out = ([".omp_outlined.", ".omp_outlined..1", ".omp_outlined..2", ".omp_outlined..3",
            ".omp_outlined..4", ".omp_outlined..5"] if major == 14 else
           ["main.omp_outlined", "main.omp_outlined.1", "main.omp_outlined.2",
            "main.omp_outlined.2.omp_outlined", "main.omp_outlined.3", "main.omp_outlined.4"])
    # in module order: main's forks, then the nested one in main:2's outlined function
    assert [(s.id, s.outlined) for s in par] == [
        ("main:0", out[0]), ("main:1", out[1]), ("main:2", out[2]), ("main:3", out[4]),
        ("main:4", out[5]), (f"{out[2]}:0", out[3])]
    # the schedule(dynamic) loop is a dispatch loop: not a static init, not counted
    assert [(s.id, s.init, s.schedule) for s in loops] == [
        ("orphan:0", "4", 34), (f"{out[0]}:0", "8", 34), (f"{out[1]}:0", "4", 34),
        (f"{out[1]}:1", "4u", 34), (f"{out[2]}:0", "4", 34), (f"{out[3]}:0", "4", 34),
        (f"{out[5]}:0", "4", 33)]
    by = {(s.kind, s.id): s for s in found}
    # regions: the orphaned loop runs in the region that calls it; nesting
    assert by[("loop", "orphan:0")].region == "main:1"
    assert by[("loop", f"{out[0]}:0")].region == "main:0"
    assert by[("loop", f"{out[2]}:0")].region == "main:2"
    assert by[("parallel", f"{out[2]}:0")].region == "main:2"
    assert by[("loop", f"{out[3]}:0")].region == f"{out[2]}:0"
    assert by[("parallel", "main:0")].region is None
    # locations: the pragma's line
    text = SITES_PROGRAM
    want = {("loop", "orphan:0"): "ORPHAN", ("loop", f"{out[0]}:0"): "COMBINED",
            ("parallel", "main:0"): "COMBINED", ("loop", f"{out[1]}:0"): "CONTINUED",
            ("loop", f"{out[1]}:1"): "UNSIGNED", ("parallel", "main:2"): "OUTER",
            ("loop", f"{out[2]}:0"): "OUTER", ("parallel", f"{out[2]}:0"): "INNER",
            ("loop", f"{out[3]}:0"): "INNER", ("loop", f"{out[5]}:0"): "CHUNKED"}
    for key, marker in want.items():
        assert by[key].location == f"sites.c:{_pragma_line(text, marker)}", key
    assert by[("parallel", "main:1")].location == f"sites.c:{_pragma_line(text, 'CONTINUED') - 2}"
    # explicit: num_threads (push before the fork), schedule(static) in the
    # source (34 in the IR, like no clause), schedule(static, 4) (33)
    assert by[("parallel", "main:1")].explicit and by[("parallel", "main:1")].why == "num_threads clause"
    assert by[("loop", f"{out[1]}:0")].explicit
    assert by[("loop", f"{out[1]}:0")].why == "schedule clause in the source"
    assert by[("loop", f"{out[5]}:0")].explicit
    undecided = {k for k, s in by.items() if not s.decidable}
    assert undecided == {("parallel", "main:1"), ("loop", f"{out[1]}:0"), ("loop", f"{out[5]}:0")}
    # the plain compile has no locations; its ids are those of the -g one
    plain = S.find_sites(S.emit_ir(src.name, cc, FLAGS, cwd=tmp_path))
    assert [(s.kind, s.id) for s in plain] == [(s.kind, s.id) for s in found]
    assert all(s.location is None for s in plain)


@pytest.mark.parametrize("major", MAJORS, ids=lambda m: f"clang{m}")
def test_locations_only_when_the_ids_match(major, tmp_path):
    cc = _clang(major)
    src = tmp_path / "sites.c"
    src.write_text(SITES_PROGRAM)
    plain = S.find_sites(S.emit_ir(src, cc, FLAGS))
    locs = S.site_locations(src, cc, FLAGS, plain)
    assert len(locs) == len(plain)
    # sites that the debug compile does not reproduce: no locations at all
    shifted = plain[1:]
    assert S.site_locations(src, cc, FLAGS, shifted) == {}
    other = [S.Site(**{**s.to_dict(), "schedule": 35 if s.kind == "loop" else None})
             for s in plain]
    assert S.site_locations(src, cc, FLAGS, other) == {}


def test_omp_set_num_threads_fixes_every_region(tmp_path):
    cc = _clang(14)
    src = tmp_path / "set.c"
    src.write_text("void omp_set_num_threads(int);\nint a[64];\nint main(void) {\n"
                   "  omp_set_num_threads(3);\n  #pragma omp parallel for\n"
                   "  for (int i = 0; i < 64; i++) a[i] = i;\n  return a[5];\n}\n")
    found = S.program_sites(src, cc, FLAGS)
    region = next(s for s in found if s.kind == "parallel")
    loop = next(s for s in found if s.kind == "loop")
    assert region.explicit and "omp_set_num_threads" in region.why
    assert loop.decidable and loop.region == region.id


def test_pragma_text_and_clauses(tmp_path):
    f = tmp_path / "p.c"
    f.write_text("int x;\n"
                 "  #pragma omp parallel for \\\n"
                 "     private(x) \\\n"
                 "     num_threads (4)\n"
                 "  for (;;) ;\n"
                 "#pragma omp for\n"
                 "// a comment\n"
                 "\n"
                 "for (;;) ;\n"
                 "x = 1;\n")
    text = S.pragma_text(f, 2)
    assert "private(x)" in text and S.has_clause(text, "num_threads")
    assert not S.has_clause(text, "schedule")
    # a loop's line: the directive that ends above it (continuations joined)
    assert S.pragma_text(f, 5) == text
    assert S.pragma_text(f, 9).strip() == "#pragma omp for"
    assert S.pragma_text(f, 10) is None and S.pragma_text(f, 99) is None
    assert S.pragma_text(tmp_path / "missing.c", 1) is None
    assert not S.has_clause("#pragma omp for // schedule is static", "schedule")


def test_find_sites_quoted_names_and_psource():
    ir = "\n".join([
        '@0 = private unnamed_addr constant [28 x i8] c";d\\5Cx.c;main;12;3;;\\00", align 1',
        "@1 = private unnamed_addr constant %struct.ident_t { i32 0, i32 2, i32 0, i32 27, ptr @0 }, align 8",
        '@2 = private unnamed_addr constant [23 x i8] c";unknown;unknown;0;0;;\\00", align 1',
        "@3 = private unnamed_addr constant %struct.ident_t { i32 0, i32 514, i32 0, i32 22, ptr @2 }, align 8",
        'define internal void @"odd name.omp_outlined"(ptr %0, ptr %1) {',
        "  call void @__kmpc_for_static_init_8u(ptr @3, i32 %5, i32 34, ptr %a, ptr %b, ptr %c, ptr %d, i64 1, i64 1)",
        "  ret void",
        "}",
        "define i32 @main() {",
        "  %call = call i32 @__kmpc_global_thread_num(ptr @1)",
        '  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @1, i32 0, ptr @"odd name.omp_outlined")',
        "  ret i32 0",
        "}"])
    found = S.find_sites(ir)
    assert [(s.kind, s.id, s.location) for s in found] == [
        ("loop", "odd name.omp_outlined:0", None), ("parallel", "main:0", "d\\x.c:12")]
    assert found[0].region == "main:0" and found[0].init == "8u"
    assert found[1].outlined == "odd name.omp_outlined"
    assert S.parse_psource(";unknown;unknown;0;0;;") is None
    assert S.parse_psource(";a.c;f;0;0;;") is None


# ---------------------------------------------------------------------------
# programs, configurations, output parsing


def test_spaces_configs_and_output_parsing():
    assert len(D.FULL_SPACE) == 72 and len({c.key for c in D.FULL_SPACE}) == 72
    assert {c.threads for c in D.FULL_SPACE} == {1, 2, 4}
    assert D.Config(2, "dynamic", 8).key == "t2-dynamic-8"
    assert D.Config.parse("t4-guided-default") == D.Config(4, "guided", None)
    assert 2 <= len(D.SMALL_SPACE) < 20
    for bad in ("t0-static-8", "t2-auto-8", "t2-static-0", "2-static"):
        with pytest.raises(ValueError):
            D.Config.parse(bad)
    region = S.Site("main:0", "parallel", "main", 0)
    fixed = S.Site("main:1", "parallel", "main", 1, explicit=True)
    loops = [S.Site("f:0", "loop", "f", 0, schedule=34),
             S.Site("f:1", "loop", "f", 1, schedule=33, explicit=True)]
    assert D.region_decisions(region, loops, D.Config(4, "guided", None)) == {
        "parallel": {"main:0": {"threads": 4}}, "worksharing": {"f:0": {"schedule": "guided"}}}
    assert D.region_decisions(fixed, loops, D.Config(1, "dynamic", 8)) == {
        "worksharing": {"f:0": {"schedule": "dynamic", "chunk": 8}}}
    # PolyBench: the bare time line; kernels: "time <s>"; the rest is checked
    t, out = P.parse_output("0.001234\n", "0.00 1.00 \n")
    assert t == 0.001234 and b"1.00" in out and b"0.001234" not in out
    t, out = P.parse_output("time 2.5e-03\nchecksum 00ff\n", "")
    assert t == 0.0025 and b"checksum 00ff" in out
    assert P.parse_output("checksum 1\n", "")[0] is None


def test_kernel_generator_is_deterministic(tmp_path):
    a = K.write_kernels(tmp_path / "a", seed=1, per_family=2)
    b = K.write_kernels(tmp_path / "b", seed=1, per_family=2)
    assert a == b and len(a) == 2 * len(K.FAMILIES)
    assert {r["family"] for r in a} == set(K.FAMILIES)
    assert [k.source for k in K.generate(seed=2, per_family=2)] != \
        [k.source for k in K.generate(seed=1, per_family=2)]
    for k in K.generate(seed=0, per_family=1):
        assert "#pragma omp parallel" in k.source and "checksum" in k.source


# ---------------------------------------------------------------------------
# the harness on tiny runs


def _plugin(major: int) -> Path:
    from mirecc.plugin import build as lp

    _clang(major)
    try:
        return lp.ensure_plugin(major)
    except lp.PluginError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def plugin14():
    return _plugin(14)


def _polybench_gemm() -> P.Program:
    try:
        progs = P.polybench_programs()
    except ValueError as exc:
        pytest.skip(str(exc))
    return P.select(progs, ["gemm"])[0]


CONFIGS = [D.Config(1, "static", None), D.Config(2, "dynamic", 8)]


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_dataset_rows_check_and_resume(tmp_path, plugin14):
    out = tmp_path / "ds"
    gemm = _polybench_gemm()
    kern = [p for p in P.kernel_programs(out / "kernels", seed=0, per_family=1,
                                         families=["reduction"])]
    assert len(kern) == 1
    progs = [gemm, *kern]
    labels = D.run_dataset(out, progs, sizes=["MINI"], configs=CONFIGS, repeats=1,
                           cc="clang-14", progress=False, plugin=plugin14, timeout=60)
    rows = _lines(labels)
    assert [r["row"] for r in rows] == [
        f"gemm|MINI|kernel_gemm:0|{CONFIGS[0].key}", f"gemm|MINI|kernel_gemm:0|{CONFIGS[1].key}",
        f"{kern[0].name}|MINI|kernel:0|{CONFIGS[0].key}",
        f"{kern[0].name}|MINI|kernel:0|{CONFIGS[1].key}"]
    for r in rows:
        assert r["ok"] and not r["output_changed"], r
        assert len(r["times_s"]) == 1 and r["median_s"] == r["min_s"] == r["max_s"] > 0
        assert len(r["default"]["times_s"]) == 1 and r["default"]["stable_output"]
        assert r["speedup"] == pytest.approx(r["default"]["median_s"] / r["median_s"])
        assert not r["same_binary_as_default"] and r["bin_sha256"] != r["default"]["bin_sha256"]
        threads = r["config"]["threads"]
        assert r["decisions"]["parallel"] == {r["region"]: {"threads": threads}}
        # the plugin applied the team size and the loop's schedule
        assert f"parallel {r['region']}: threads={threads}" in r["remarks"]["applied"]
        assert len(r["loops"]) == 1
        assert any(m.startswith(f"worksharing {r['loops'][0]}: schedule=")
                   for m in r["remarks"]["applied"])
        assert r["region_location"].endswith((":77", ":53"))
    meta = json.loads((out / "meta.json").read_text())
    assert meta["cores"] == os.cpu_count() and meta["protocol"]["repeats"] == 1
    assert meta["protocol"]["configs"] == [c.key for c in CONFIGS]
    assert "clang version 14" in meta["cc_version"]

    # a rerun does nothing; one more configuration adds only its rows and
    # builds only its binaries (the others come from the cache)
    before = labels.read_bytes()
    bins = sorted((out / "work" / "bin").rglob("*.json"))
    # files only: a new binary may land in an existing hash-prefix folder
    stamps = {p: p.stat().st_mtime_ns for p in (out / "work" / "bin").rglob("*")
              if p.is_file()}
    D.run_dataset(out, progs, sizes=["MINI"], configs=CONFIGS, repeats=1, cc="clang-14",
                  progress=False, plugin=plugin14, timeout=60)
    assert labels.read_bytes() == before
    assert sorted((out / "work" / "bin").rglob("*.json")) == bins
    more = CONFIGS + [D.Config(2, "guided", None)]
    D.run_dataset(out, progs, sizes=["MINI"], configs=more, repeats=1, cc="clang-14",
                  progress=False, plugin=plugin14, timeout=60)
    rows2 = _lines(labels)
    assert labels.read_bytes().startswith(before)
    assert [r["row"] for r in rows2[len(rows):]] == [
        "gemm|MINI|kernel_gemm:0|t2-guided-default", f"{kern[0].name}|MINI|kernel:0|t2-guided-default"]
    assert len(sorted((out / "work" / "bin").rglob("*.json"))) == len(bins) + 2
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps     # nothing rebuilt
    # a run of fewer programs into the folder keeps the others in meta.json
    D.run_dataset(out, [gemm], sizes=["MINI"], configs=more, repeats=1, cc="clang-14",
                  progress=False, plugin=plugin14, timeout=60)
    assert json.loads((out / "meta.json").read_text())["programs"] == ["gemm", kern[0].name]
    # labels of another compiler never mix with these
    if shutil.which("clang-19"):
        with pytest.raises(ValueError, match="give another --out"):
            D.run_dataset(out, progs, sizes=["MINI"], configs=more, repeats=1, cc="clang-19",
                          progress=False, plugin=plugin14, timeout=60)
        assert _lines(labels) == rows2


TEAM_PROGRAM = """\
#include <omp.h>
#include <stdio.h>
int main(void) {
  int n = 0;
  #pragma omp parallel
  {
    #pragma omp single
    n = omp_get_num_threads();
  }
  printf("time 0.001\\nteam %d\\n", n);
  return 0;
}
"""


@pytest.mark.parametrize("major", MAJORS, ids=lambda m: f"clang{m}")
def test_output_that_depends_on_the_team_is_flagged(major, tmp_path):
    """Also: clang-19 builds and runs with another LLVM's omp.h and libomp
    where it has none of its own (Debian's clang-19)."""
    plugin = _plugin(major)
    src = tmp_path / "team.c"
    src.write_text(TEAM_PROGRAM)
    prog = P.Program(name="team", suite="kernels", group="test", source=src, deps=(src,))
    cores = os.cpu_count()
    same, other = D.Config(cores, "static", None), D.Config(cores + 1, "static", None)
    labels = D.run_dataset(tmp_path / "ds", [prog], sizes=["MINI"], configs=[same, other],
                           repeats=2, cc=f"clang-{major}", progress=False, plugin=plugin,
                           timeout=60)
    by = {r["config_key"]: r for r in _lines(labels)}
    assert not by[same.key]["output_changed"] and by[same.key]["ok"]
    assert by[other.key]["output_changed"] and by[other.key]["ok"]
    assert len(by[other.key]["times_s"]) == 2
    # the region has no loop: only the team size is decided
    assert by[other.key]["decisions"] == {"parallel": {"main:0": {"threads": cores + 1}}}
    o = D.oracle(list(by.values()))
    assert o["per"][("team", "MINI")]["regions"]["main:0"]["best"] == same.key
    assert o["per"][("team", "MINI")]["regions"]["main:0"]["output_changed"] == 1
    assert o["single"]["config"] == same.key


# ---------------------------------------------------------------------------
# the summary


def _row(prog, region, key, median, default, parent=None, **kw):
    return {"row": f"{prog}|SMALL|{region}|{key}", "program": prog, "suite": "polybench",
            "size": "SMALL", "region": region, "region_location": f"/x/{prog}.c:10",
            "region_parent": parent, "config_key": key, "ok": True, "output_changed": False,
            "median_s": median, "default": {"median_s": default, "stable_output": True}, **kw}


def test_oracle_and_summary_on_hand_written_rows(tmp_path):
    rows = [
        # one region: x as fast, y faster but changes the output, z 1.25x
        _row("one", "r:0", "x", 1.0, 1.0), _row("one", "r:0", "y", 0.5, 1.0, output_changed=True),
        _row("one", "r:0", "z", 0.8, 1.0),
        # two independent regions: bests 2x (saves 1/2) and 1.25x (saves 1/5)
        _row("two", "a:0", "x", 2.0, 4.0), _row("two", "a:0", "z", 3.0, 4.0),
        _row("two", "b:0", "x", 4.0, 4.0), _row("two", "b:0", "z", 3.2, 4.0),
        # nested: the inner region's 2x (saves 1/2) and the outer's 1.25x
        # (saves 1/5) are one tree: 2x, not 1 / (1 - 1/2 - 1/5)
        _row("nest", "o:0", "x", 1.6, 2.0), _row("nest", "o:0", "z", 2.0, 2.0),
        _row("nest", "i:0", "x", 1.0, 2.0, parent="o:0"), _row("nest", "i:0", "z", 3.0, 2.0, parent="o:0"),
        # every configuration slower, one failed: the default stays (1.0)
        _row("slow", "s:0", "x", 2.0, 1.0), _row("slow", "s:0", "z", 1.0, 1.0, ok=False),
        {"row": "broken|SMALL|*|-", "program": "broken", "size": "SMALL", "error": "sites: boom"},
    ]
    o = D.oracle(rows)
    per = o["per"]
    assert per[("one", "SMALL")]["regions"]["r:0"]["best"] == "z"
    assert per[("one", "SMALL")]["oracle"] == pytest.approx(1.25)
    assert not per[("one", "SMALL")]["oracle_estimated"]
    assert per[("two", "SMALL")]["oracle"] == pytest.approx(1 / (1 - 0.5 - 0.2))
    assert per[("two", "SMALL")]["oracle_estimated"]
    assert per[("nest", "SMALL")]["oracle"] == pytest.approx(2.0)
    assert per[("slow", "SMALL")]["oracle"] == pytest.approx(1.0)
    assert per[("slow", "SMALL")]["regions"]["s:0"]["best"] == "x"
    assert o["geomean_oracle"] == pytest.approx((1.25 * (1 / 0.3) * 2.0 * 1.0) ** 0.25)
    # the single configuration: z failed in "slow", so only x is everywhere
    assert o["single"]["config"] == "x"
    x = [1.0, 1 / (1 - 0.5 - 0.0), 2.0, 0.5]
    assert o["single"]["geomean"] == pytest.approx((x[0] * x[1] * x[2] * x[3]) ** 0.25)
    assert D.combine({"a": 2.0}) == 2.0 and D.combine({}) == 1.0

    out = tmp_path / "ds"
    out.mkdir()
    (out / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from mirecc.cli import mire
    assert mire.main(["omp-data", "--summary", "--out", str(out)]) == 0
    md = (out / "summary.md").read_text()
    assert "| two | SMALL |" in md and "3.333 est." in md and "| one | SMALL |" in md
    assert "best single configuration for all regions of all programs: x" in md
    assert "failed: broken SMALL: sites: boom" in md
    text, _ = D.summarize(rows)
    assert "geomean oracle speedup over the default: " in text and "(the default is faster)" in text


def _dataset(path: Path, rows: list[dict], **protocol) -> Path:
    path.mkdir(parents=True)
    (path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "meta.json").write_text(json.dumps({
        "cc_version": "clang 14", "cores": 2, "date": str(path.name),
        "protocol": {"space": "full", "configs": ["x", "z"], "repeats": 3, "opt": "-O3",
                     **protocol}}))
    return path


def test_export_merges_label_sets_into_the_committed_form(tmp_path):
    import gzip

    from mirecc.cli import mire
    dest = tmp_path / "heads" / "labels-full"
    first = _dataset(tmp_path / "a", [_row("one", "r:0", "x", 1.0, 1.0),
                                       _row("one", "r:0", "z", 0.8, 1.0)])
    second = _dataset(tmp_path / "b", [_row("two", "a:0", "x", 2.0, 4.0),
                                        _row("one", "r:0", "z", 0.5, 1.0)])  # measured again
    (second / "kernels").mkdir()
    (second / "kernels" / "index.json").write_text('{"seed": 0}')
    assert mire.main(["omp-data", "--out", str(first), "--export", str(dest)]) == 0
    committed = (dest / "labels.jsonl.gz").read_bytes()
    assert D.export_labels(first, dest) == 2
    assert (dest / "labels.jsonl.gz").read_bytes() == committed     # same rows, same bytes
    assert D.export_labels(second, dest) == 3
    with gzip.open(dest / "labels.jsonl.gz", "rt") as f:
        rows = {r["row"]: r for r in map(json.loads, f)}
    assert rows["one|SMALL|r:0|z"]["median_s"] == 0.5 and "one|SMALL|r:0|x" in rows
    meta = json.loads((dest / "meta.json").read_text())
    assert meta["programs"] == ["one", "two"] and meta["dates"] == ["a", "b"]
    assert (dest / "kernels-index.json").read_text() == '{"seed": 0}'
    assert "| two | SMALL |" in (dest / "summary.md").read_text()
    # another protocol is not the same dataset: nothing written
    other = _dataset(tmp_path / "c", [_row("three", "r:0", "x", 1.0, 1.0)], repeats=5)
    with pytest.raises(ValueError, match="repeats 3, .*c with 5"):
        D.export_labels(other, dest)
    assert mire.main(["omp-data", "--out", str(other), "--export", str(dest)]) == 2
    assert json.loads((dest / "meta.json").read_text())["programs"] == ["one", "two"]


def test_a_racy_program_is_left_out_of_the_figures(tmp_path):
    """A program whose default output differs from its build without
    -fopenmp (a data race in its OpenMP code) is marked racy and left out
    of the geomean and the best single configuration."""
    racy_default = {"median_s": 1.0, "stable_output": True, "matches_sequential": False}
    rows = [_row("clean", "r:0", "x", 0.5, 1.0), _row("clean", "r:0", "z", 1.0, 1.0),
            {**_row("racy", "r:0", "z", 0.25, 1.0), "default": racy_default}]
    o = D.oracle(rows)
    assert o["per"][("racy", "SMALL")]["racy"] and not o["per"][("clean", "SMALL")]["racy"]
    assert o["geomean_oracle"] == pytest.approx(2.0)
    assert o["single"]["config"] == "x"
    _, md = D.summarize(rows)
    assert "left out of the geomean: racy" in md and "4.000 racy" in md


def test_the_sequential_reference_builds_without_openmp(tmp_path):
    """The reference output of a program built without -fopenmp; None for
    one that calls the OpenMP runtime (it does not link without it)."""
    plain, calls = tmp_path / "plain.c", tmp_path / "calls.c"
    plain.write_text("#include <stdio.h>\nint main(void) { int s = 0;\n"
                     "#pragma omp parallel for reduction(+:s)\n"
                     "for (int i = 0; i < 100; i++) s += i;\n"
                     "printf(\"time 0.001\\n%d\\n\", s); return 0; }\n")
    calls.write_text("int omp_get_thread_num(void);\n"
                     "int main(void) { return omp_get_thread_num(); }\n")
    builder = D.Builder("clang-14", tmp_path / "work", toolchain={"cflags": [], "ldflags": []})
    progs = {p.stem: P.Program(name=p.stem, suite="kernels", group="test", source=p,
                               deps=(p,)) for p in (plain, calls)}
    first = builder.sequential_output(progs["plain"], "MINI", 10)
    assert first and builder.sequential_output(progs["plain"], "MINI", 10) == first
    assert builder.sequential_output(progs["calls"], "MINI", 10) is None
