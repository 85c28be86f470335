"""One source for the compiled client's rules: the command lines of real
builds (tests/data/calls, recorded by benchmarks/record_calls.py: zlib's
configure and make at -O2 and -Oz, lua5.4's Debian build, libyaml's
autotools configure and make and its CMake build, a CMake project with its
compiler probes) replayed through the client (``MIRECC_CLIENT_CLASSIFY``:
it says where a call would go and runs nothing) and through the Python
driver's own classifier (:func:`mirecc.driver.clang.route`), under several
settings: no call may be classified differently.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CLIENT = BIN / "mirecc"
DATA = Path(__file__).resolve().parents[1] / "data" / "calls"

pytestmark = pytest.mark.skipif(
    not (CLIENT.is_file() and CLIENT.read_bytes()[:4] == b"\x7fELF"
         and os.access("/usr/bin/clang-14", os.X_OK)),
    reason="needs the compiled client (scripts/setup.sh builds it) and clang-14")

SETTINGS = {
    "defaults": {},
    "record": {"MIRECC_RECORD": "decisions.jsonl"},
    "loops applied": {"MIRECC_APPLY_LOOPS": "1"},
    "no size search": {"MIRECC_SIZE_SEARCH": "0"},
    "openmp adaptive": {"MIRECC_APPLY_OPENMP": "1", "MIRECC_ADAPT_OPENMP": "1"},
    "disabled": {"MIRECC_DISABLE": "1"},
}

#: the Python driver's verdict for each call of a file: "plain <code>" or "handoff"
PYTHON_SIDE = r"""
import json, sys
from mirecc.driver import clang as driver
from mirecc.frontend.clang import COMPILER
from mirecc.taskapi.config import load_config
from mirecc.tu.context import CompileContext

config = load_config()
out = []
for line in sys.stdin:
    call = json.loads(line)
    cxx = call["mode"] == "c++"
    ctx = CompileContext(call["args"], cxx, COMPILER)
    ctx.args, ctx.explain, ctx.action = driver._parse_own_options(call["args"])
    ctx.config = config
    ctx.compiler = COMPILER.find(config, cxx)[0]
    ctx.final = COMPILER.final_command(config.prefix, ctx.compiler, ctx.args)
    if config.disable:
        out.append("plain disabled")
        continue
    own = list(ctx.final)
    where, _ = driver.route(ctx)
    # a call run as it is, but with a task's link arguments, is not the
    # client's to run alone
    out.append("handoff" if where in ("compile", "link") or ctx.final != own
               else f"plain {where}")
print(json.dumps(out))
"""


def _calls():
    return sorted(DATA.glob("*.jsonl"))


def test_the_recorded_builds_are_there():
    names = {p.stem for p in _calls()}
    assert {"zlib", "zlib-Oz", "lua5.4", "libyaml-configure", "cmake-sample"} <= names
    total = sum(len(p.read_text().splitlines()) for p in _calls())
    assert total > 500


@pytest.mark.parametrize("settings", SETTINGS, ids=list(SETTINGS))
def test_client_and_driver_classify_every_call_alike(settings, tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env.update(XDG_RUNTIME_DIR=str(run), XDG_CACHE_HOME=str(tmp_path / "cache"),
               MIRECC_SERVER="0", MIRECC_CC="/usr/bin/clang-14",
               MIRECC_CXX="/usr/bin/clang++-14", LC_ALL="C", **SETTINGS[settings])
    # the first call of these settings writes the client's rules
    (build / "warm.c").write_text("int x;\n")
    for mirecc in (CLIENT, BIN / "mirecc++"):
        subprocess.run([str(mirecc), "-O2", "-c", "warm.c", "-o", "warm.o"], cwd=build, env=env,
                       check=True, capture_output=True)
    classify = dict(env, MIRECC_CLIENT_CLASSIFY="1")
    differ, counted, plain = [], 0, 0
    for path in _calls():
        calls = [json.loads(line.replace("<build>", str(build)))
                 for line in path.read_text().splitlines()]
        python = json.loads(subprocess.run(
            [sys.executable, "-c", PYTHON_SIDE], cwd=build, env=env, check=True,
            input="\n".join(json.dumps(c) for c in calls), capture_output=True,
            text=True).stdout)
        for call, theirs in zip(calls, python):
            mirecc = CLIENT if call["mode"] == "c" else BIN / "mirecc++"
            ours = subprocess.run([str(mirecc), *call["args"]], cwd=build, env=classify,
                                  capture_output=True, text=True).stdout.strip()
            assert ours, f"the client said nothing for {call['args']}"
            counted += 1
            plain += ours.startswith("plain")
            if (ours.split(" ", 1)[0] if ours.startswith("handoff") else ours) != theirs:
                differ.append(f"{path.stem}: {call['args']}: client {ours!r}, driver {theirs!r}")
    assert not differ, f"{len(differ)} of {counted} calls differ:\n" + "\n".join(differ[:20])
    if settings in ("defaults", "disabled"):
        assert plain > counted / 2      # most calls of a build are the client's alone


def test_nvcc_calls_are_never_decided_alone(tmp_path):
    """mirecc-nvcc's calls all go to the driver (whose CUDA task decides)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env.update(XDG_RUNTIME_DIR=str(tmp_path), MIRECC_CLIENT_CLASSIFY="1")
    (tmp_path).chmod(0o700)
    for args in (["--version"], ["-E", "a.cu"], ["-O3", "-c", "a.cu", "-o", "a.o"],
                 ["-x", "cu", "-c", "b.cpp"], ["-arch=sm_80", "a.o", "-o", "app"]):
        out = subprocess.run([str(BIN / "mirecc-nvcc"), *args], env=env, capture_output=True,
                             text=True).stdout
        assert out.startswith("handoff mirecc-nvcc"), (args, out)


def test_rules_files_are_kept_to_a_bound(tmp_path):
    """One rules file per settings seen, the least recently written going
    past the bound (CI with a cache directory per job adds one per job)."""
    from mirecc.driver.rules import _trim

    for n in range(12):
        path = tmp_path / f"{n:016x}"
        path.write_text("mirecc-rules 1\n")
        os.utime(path, ns=(n * 10**9, n * 10**9))
    _trim(str(tmp_path), keep=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{n:016x}" for n in range(7, 12)]
