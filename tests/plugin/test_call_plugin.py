"""Per-call-site inlining decisions (passes/plugin/FORMAT.md, "Call sites"):
the plugin's `mirecc-call-mark` pass on real clangs.

What is checked: mirecc's numbering of call sites (mirecc.ir.text.call_sites)
is the plugin's, on a program with direct, indirect, variadic and intrinsic
calls and (clang 14) a call through a cast; a site LLVM inlines at -Oz stays
a call when marked "noinline", a site it leaves is inlined when marked
"inline", and every other site is as clang leaves it; the program prints
what clang's prints; a bad entry changes nothing.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from mirecc.ir.text import call_sites
from tests.plugin.test_openmp_plugin import RPASS, compile_

# small(): inlined at -Oz; big(): too large to inline at -Oz (called three
# times: with one call left, LLVM would inline it, as its last);
# apply(): calls through a pointer; old(): declared without a prototype and
# defined after main, with another argument type than the call's (clang 14
# calls it through a cast)
PROGRAM = r"""
#include <stdio.h>
#include <string.h>
long old();
static int small(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int apply(int (*f)(int), int x) { return f(x); }
static int big(int x) {
  int s = 0;
  for (int i = 0; i < x; i++) {
    s += (i * 7) ^ (s >> 3);
    if (s % 11 == 3) s += printf("%d\n", s & 7);
    s -= (s * 5) % 13;
    s ^= (i << 2) + (s >> 1);
  }
  return s;
}
int main(int argc, char **argv) {
  char buf[16];
  memcpy(buf, "abc", 4);
  int a = small(argc);
  int b = big(argc + 20);
  int c = big(argc + 30) + big(argc + 40);
  int d = apply(small, argc);
  int e = old(argc);
  printf("%d %d %d %d %d %s\n", a, b, c, d, e, buf);
  return 0;
}
long old(x) long x; { return x + 2; }
"""


def decisions(path: Path, calls: dict) -> Path:
    path.write_text(json.dumps({"version": 1, "modules": {"*": {"calls": calls}}}))
    return path


def flags(plugin: Path, dec: Path) -> list[str]:
    return ["-Xclang", "-load", "-Xclang", str(plugin), f"-fpass-plugin={plugin}",
            "-mllvm", f"-mirecc-loop-decisions={dec}", *RPASS]


def ir_before_optimisation(clang, src: Path, tmp: Path) -> str:
    out = tmp / "front.ll"
    subprocess.run([clang, "-Oz", "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    "-w", str(src), "-o", str(out)], check=True)
    return out.read_text()


def calls_in(ir: str, function: str) -> list[str]:
    text = ir[re.search(rf"define [^\n]*@{function}\(", ir).start():]
    body = text[: text.index("\n}\n")]
    return re.findall(r"call [^@%\n]*@([\w.]+)\(", body)


@pytest.mark.parametrize("major", [14, 19])
def test_sites_are_numbered_as_mirecc_numbers_them(llvm_plugin, tmp_path, major):
    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    sites = call_sites(ir_before_optimisation(clang, src, tmp_path))
    # memcpy is an intrinsic, f(x) an indirect call: neither has an id
    assert sites["apply"] == []
    main = sites["main"]
    assert main[:5] == ["small", "big", "big", "big", "apply"] and main[-1] == "printf"
    # old() is called through a cast on clang 14 (typed pointers), directly on 19
    assert ("old" in main) == (major >= 15)
    every = {f"{fn}:call{k}": "noinline" for fn, callees in sites.items()
             for k in range(len(callees))}
    err, remarks = compile_(clang, src, ["-Oz", "-w"], flags(plugin, decisions(
        tmp_path / "d.json", every)))
    marked = sorted(re.findall(r"call (\S+) to (\S+): noinline", " ".join(remarks)))
    want = sorted((f"{fn}:call{k}", callee) for fn, callees in sites.items()
                  for k, callee in enumerate(callees))
    assert marked == want, err


@pytest.mark.parametrize("major", [14, 19])
def test_a_marked_site_is_inlined_or_not_as_decided(llvm_plugin, tmp_path, major):
    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    main = call_sites(ir_before_optimisation(clang, src, tmp_path))["main"]
    small, first_big = f"main:call{main.index('small')}", f"main:call{main.index('big')}"
    plain = tmp_path / "plain.ll"
    compile_(clang, src, ["-Oz", "-w"], out=plain, what="-S -emit-llvm")
    before = calls_in(plain.read_text(), "main")
    # at -Oz LLVM inlines small() and keeps the three calls of big()
    assert "small" not in before and before.count("big") == 3
    marked = tmp_path / "marked.ll"
    _err, remarks = compile_(clang, src, ["-Oz", "-w"], flags(plugin, decisions(
        tmp_path / "d.json", {small: "noinline", first_big: "inline"})), out=marked,
        what="-S -emit-llvm")
    assert f"call {small} to small: noinline" in remarks
    after = calls_in(marked.read_text(), "main")
    assert after.count("small") == 1 and after.count("big") == 2
    # the output is clang's
    outputs = []
    for name, extra in (("a", []), ("b", flags(plugin, tmp_path / "d.json"))):
        exe = tmp_path / name
        compile_(clang, src, ["-Oz", "-w"], extra, out=exe, what="")
        outputs.append(subprocess.run([str(exe)], capture_output=True, text=True,
                                      check=True).stdout)
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("calls, problem", [
    ({"main:3": "inline"}, "a call site id is <function>:call<index>"),
    ({"main:callx": "inline"}, "a call site id is <function>:call<index>"),
    ({":call1": "inline"}, "a call site id is <function>:call<index>"),
    ({"main:call1": "always"}, 'expected "inline" or "noinline"'),
    ({"main:call1": True}, 'expected "inline" or "noinline"'),
])
def test_a_bad_entry_changes_nothing(llvm_plugin, tmp_path, calls, problem):
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    err, _ = compile_(clang, src, ["-Oz", "-w"], flags(plugin, decisions(
        tmp_path / "d.json", calls)), out=tmp_path / "a.o")
    assert problem in err and "loops left to LLVM" in err, err
    subprocess.run([clang, "-Oz", "-w", "-c", str(src), "-o", str(tmp_path / "b.o")],
                   check=True)
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()


def test_an_unknown_site_and_O0_change_nothing(llvm_plugin, tmp_path):
    clang, _major, plugin = llvm_plugin(14)
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    for level, calls in (("-Oz", {"main:call99": "inline", "nowhere:call0": "noinline"}),
                         ("-O0", {"main:call0": "inline"})):
        dec = decisions(tmp_path / f"d{level}.json", calls)
        _err, remarks = compile_(clang, src, [level, "-w"], flags(plugin, dec),
                                 out=tmp_path / "a.o")
        assert not any(r.startswith("call ") for r in remarks), remarks
        subprocess.run([clang, level, "-w", "-c", str(src), "-o", str(tmp_path / "b.o")],
                       check=True)
        assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes(), level


@pytest.mark.parametrize("major", [14, 19])
def test_llvms_costs_are_read_per_site(llvm_plugin, tmp_path, major):
    """mirecc-call-tag / mirecc-call-cost: a row per site whose callee the
    module defines, with mirecc's ids; LLVM's -Oz cost says small() is under
    its threshold and big() over it; the neighbour rows count them."""
    from mirecc.tasks.code_size.build import tool_beside
    from mirecc.tasks.code_size.inline_features import (COST_NAMES, llvm_costs,
                                                         neighbour_rows)

    clang, _major, plugin = llvm_plugin(major)
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    bc = tmp_path / "p.bc"
    subprocess.run([clang, "-Oz", "-w", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    ir = ir_before_optimisation(clang, src, tmp_path)
    sites = call_sites(ir)
    costs = llvm_costs(bc, tool_beside(clang, "opt"), plugin)
    want = {f"{fn}:call{k}" for fn, callees in sites.items()
            for k, callee in enumerate(callees) if callee in sites}
    assert set(costs) == want and all(len(r) == len(COST_NAMES) for r in costs.values())
    margin = COST_NAMES.index("llvm_margin")
    main = sites["main"]
    assert costs[f"main:call{main.index('small')}"][margin] > 0
    assert costs[f"main:call{main.index('big')}"][margin] < 0
    around = neighbour_rows(ir, costs)
    # apply() is called once, by main, at a site LLVM would not inline (noinline)
    assert around[f"main:call{main.index('apply')}"][2:] == [0.0, math.log1p(1)]
    assert set(around) == {f"{fn}:call{k}" for fn, callees in sites.items()
                           for k in range(len(callees))}


def test_the_tu_context_owns_the_call_table(tmp_path):
    """The per-TU context reads the call sites once, with the plugin's ids."""
    import hashlib
    import shutil

    from mirecc.taskapi.config import load_config
    from mirecc.taskapi.context import TUContext
    from mirecc.taskapi.records import TURequest

    if not shutil.which("clang-14"):
        pytest.skip("clang-14 is not installed")
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    bc = tmp_path / "p.bc"
    subprocess.run(["clang-14", "-Oz", "-w", "-c", "-emit-llvm", "-Xclang",
                    "-disable-llvm-passes", str(src), "-o", str(bc)], check=True)
    request = TURequest(source=str(src), language="c", opt_level="z", flags=(),
                        bitcode_path=str(bc),
                        bitcode_sha256=hashlib.sha256(bc.read_bytes()).hexdigest())
    ctx = TUContext(request, load_config(environ={"MIRECC_CACHE_DIR": str(tmp_path / "c")}))
    calls = ctx.calls
    assert calls["main:call0"] == ("main", "small") and calls["main:call4"] == ("main", "apply")
    assert not any(caller == "apply" for caller, _ in calls.values())
    assert ctx.calls is calls
