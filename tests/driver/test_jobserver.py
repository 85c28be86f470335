"""make's jobserver as mirecc's client (mirecc/util/jobserver.py) and code
size's candidates built in parallel within it: never more slots than make
has free, every slot given back, the same object as one at a time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.util import jobserver

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))


def test_makeflags_name_the_jobserver_make_uses():
    assert jobserver.parse(" -j4 --jobserver-auth=3,4") == ("fds", 3, 4)
    assert jobserver.parse("-j --jobserver-fds=5,6") == ("fds", 5, 6)
    assert jobserver.parse("-j8 --jobserver-auth=fifo:/tmp/GMfifo12") == ("fifo", "/tmp/GMfifo12")
    assert jobserver.parse("--jobserver-auth=3,4 --jobserver-auth=fifo:/x") == ("fifo", "/x")
    assert jobserver.parse("-k") is None and jobserver.parse("") is None
    for broken in ("--jobserver-auth=fifo:", "--jobserver-auth=x,4", "--jobserver-auth=3",
                   "--jobserver-fds=3,", "-j2 --jobserver-authx=3,4"):
        assert jobserver.parse(broken) is None, broken
    assert jobserver.parse("--jobserver-auth=3,4 --jobserver-auth=x,y") == ("fds", 3, 4)


def test_free_slots_are_taken_without_waiting_and_all_given_back():
    r, w = os.pipe()
    try:
        os.write(w, b"++")                        # make has two free slots
        with jobserver.slots(5, makeflags=f"-j3 --jobserver-auth={r},{w}") as n:
            assert n == 3                         # ours plus the two free ones
            with jobserver.slots(5, makeflags=f"-j3 --jobserver-auth={r},{w}") as m:
                assert m == 1                     # none left: nothing waits
        os.set_blocking(r, False)
        assert os.read(r, 10) == b"++"            # both given back
        # at most what is wanted
        os.write(w, b"++++")
        with jobserver.slots(2, makeflags=f"--jobserver-auth={r},{w}") as n:
            assert n == 2
        assert os.read(r, 10) == b"++++"
    finally:
        os.close(r)
        os.close(w)


def test_a_named_fifo_jobserver(tmp_path):
    fifo = tmp_path / "GMfifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)     # make's own end
    try:
        os.write(keep, b"+")
        with jobserver.slots(4, makeflags=f"--jobserver-auth=fifo:{fifo}") as n:
            assert n == 2
        assert os.read(keep, 10) == b"+"
    finally:
        os.close(keep)


def test_no_reachable_jobserver_means_the_setting(tmp_path):
    # numbers that are not the two ends of one pipe (make < 4.4 closes them
    # in a recipe that is not recursive): never read
    f = open(tmp_path / "a-file", "w+b")
    f.write(b"data")
    f.flush()
    fd = f.fileno()
    try:
        with jobserver.slots(5, default=2, makeflags=f"--jobserver-auth={fd},{fd}") as n:
            assert n == 2
        with jobserver.slots(5, default=9, makeflags="--jobserver-auth=987,988") as n:
            assert n == 5
        with jobserver.slots(5, makeflags="-j4 --jobserver-auth=fifo:/nonexistent/fifo") as n:
            assert n == 1
        f.seek(0)
        assert f.read() == b"data"
    finally:
        f.close()


@pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")
def test_candidates_in_the_jobservers_slots_give_the_same_object(tmp_path):
    from size_helpers import SOURCE   # over 1024 bytes of .text at -Os: searched

    (tmp_path / "p.c").write_text(SOURCE)
    heads = tmp_path / "heads"
    (heads / "code-size").mkdir(parents=True)
    (heads / "code-size" / "spec.yaml").write_text(
        'task: code-size\nlanguages: [c]\npipelines:\n  14: ["default<Oz>", "default<O3>", '
        '"default<Os>"]\n')
    objects = {}
    for mode in ("one at a time", "jobserver"):
        env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(heads),
                           MIRECC_CACHE="0", MIRECC_SIZE_SEARCH="3", MIRECC_SIZE_BUDGET="3")
        r, w = os.pipe()
        try:
            os.write(w, b"++")
            if mode == "jobserver":
                env["MAKEFLAGS"] = f"-j3 --jobserver-auth={r},{w}"
            proc = subprocess.run([MIRECC, "--explain=json", "-Os", "-c", "p.c", "-o",
                                   f"{mode[0]}.o"], cwd=tmp_path, env=env, check=True,
                                  timeout=300, pass_fds=(r, w), capture_output=True, text=True)
            verified = json.loads(proc.stdout)["verified"]["code-size"]
            assert verified["built"] == 3 and not verified["skipped"], verified
            os.set_blocking(r, False)
            assert os.read(r, 10) == b"++", mode          # every slot back
        finally:
            os.close(r)
            os.close(w)
        objects[mode] = (tmp_path / f"{mode[0]}.o").read_bytes()
    assert objects["one at a time"] == objects["jobserver"]


def test_a_spare_slot_is_a_free_jobserver_slot_or_a_serial_makes_idle_core(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert jobserver.spare_slot(None) is None          # no make: ninja, a shell
    for serial in ("", " -j1", " -k", " -- CC=cc CFLAGS=-j4", "k -- X=-j2"):
        slot = jobserver.spare_slot(serial)
        assert slot is not None, serial
        slot.close()
    for parallel in (" -j2 --jobserver-auth=987,988", " -j", "-kj3", " -j2"):
        assert jobserver.spare_slot(parallel) is None, parallel
    r, w = os.pipe()
    try:
        os.write(w, b"+")
        slot = jobserver.spare_slot(f" -j2 --jobserver-auth={r},{w}")
        assert slot is not None
        assert jobserver.spare_slot(f" -j2 --jobserver-auth={r},{w}") is None   # none left
        slot.close()
        os.set_blocking(r, False)
        assert os.read(r, 10) == b"+"                    # given back
    finally:
        os.close(r)
        os.close(w)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert jobserver.spare_slot("") is None             # one core: nothing is idle


def test_the_front_end_in_a_spare_slot_gives_the_same_objects(tmp_path):
    """The IR is read beside the user's own compile when a job slot is free
    (here make's jobserver holds one), and thrown away when the object gate
    says no: the same objects as without, and the slot given back."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "tasks" / "code_size"))
    from test_code_size import _gate_spec, heads_with
    from size_helpers import SOURCE

    (tmp_path / "p.c").write_text(SOURCE)
    objects = {}
    for heads in ("searched", "gated"):
        root = tmp_path / heads
        spec = heads_with(root, ["default<Oz>"]) if heads == "searched" else \
            _gate_spec(root, {"default<Oz>": -8.0})
        for how in ("no make", "slot"):
            env = isolated_env(tmp_path / heads, MIRECC_CC=CLANG, MIRECC_HEADS_DIR=str(spec),
                               MIRECC_CACHE="0", MIRECC_SIZE_SEARCH="1",
                               MIRECC_SIZE_BUDGET="1")
            env.pop("MAKEFLAGS", None)
            r, w = os.pipe()
            try:
                os.write(w, b"+")
                if how == "slot":
                    env["MAKEFLAGS"] = f" -j2 --jobserver-auth={r},{w}"
                out = tmp_path / f"{heads}-{how.replace(' ', '-')}.o"
                subprocess.run([MIRECC, "-Os", "-c", "p.c", "-o", str(out)], cwd=tmp_path,
                               env=env, check=True, pass_fds=(r, w), timeout=300)
                os.set_blocking(r, False)
                assert os.read(r, 10) == b"+", (heads, how)      # the slot is back
            finally:
                os.close(r)
                os.close(w)
            objects[heads, how] = out.read_bytes()
        assert objects[heads, "no make"] == objects[heads, "slot"], heads
    subprocess.run([CLANG, "-Os", "-c", "p.c", "-o", "plain.o"], cwd=tmp_path, check=True)
    plain = (tmp_path / "plain.o").read_bytes()
    assert objects["gated", "slot"] == plain != objects["searched", "slot"]
    assert not [p.name for p in tmp_path.iterdir() if ".mirecc-" in p.name]
