"""mirecc composed with the compile caches and distributors teams use, each
run for real: ``CC="ccache mirecc"``, ``CC="sccache mirecc"``, and mirecc
with ``prefix=ccache`` and ``prefix=distcc`` (a local distccd).  In each,
the code-size search runs where the compile is a miss, the object is the
one mirecc alone gives, and a rebuild is served by the cache; a change of
mirecc's settings (its identity) is a miss for ccache and sccache."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs import free_port, isolated_env
from size_helpers import SOURCE, two_candidate_heads   # SOURCE: searched

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")



def _env(tmp_path: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, MIRECC_CC=CLANG,
                        MIRECC_HEADS_DIR=str(two_candidate_heads(tmp_path)),
                        MIRECC_CACHE_DIR=str(tmp_path / "cache"), MIRECC_SIZE_SEARCH="2",
                        MIRECC_SIZE_BUDGET="2", **extra)


def _compile(tmp_path: Path, cc: list[str], env: dict, out: str = "p.o") -> bytes:
    (tmp_path / "p.c").write_text(SOURCE)
    proc = subprocess.run([*cc, "-Os", "-c", "p.c", "-o", out], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = (tmp_path / out).read_bytes()
    (tmp_path / out).unlink()
    return data


def _mirecc_alone(tmp_path: Path) -> bytes:
    """The object mirecc gives with no launcher and no cache of any kind."""
    alone = tmp_path / "alone"
    alone.mkdir()
    return _compile(alone, [MIRECC], _env(alone))


def _searched(tmp_path: Path) -> int:
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config

    counts = stats.read(Config(cache_dir=str(tmp_path / "cache")))
    return counts.get("verified.code-size", 0) - counts.get("verified.code-size.from-cache", 0)


def _ccache_stats(env: dict) -> dict:
    out = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True,
                         text=True).stdout
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return {"hits": int(stats.get("direct_cache_hit", 0))
            + int(stats.get("preprocessed_cache_hit", 0)),
            "misses": int(stats.get("cache_miss", 0))}


needs_ccache = pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache")


@needs_ccache
def test_ccache_in_front_of_mirecc(tmp_path):
    """``CC="ccache mirecc"`` with compiler_check on mirecc's identity: the
    miss runs mirecc (its search), the rebuild is ccache's hit, and another
    mirecc setting is a miss."""
    alone = _mirecc_alone(tmp_path)
    env = _env(tmp_path, CCACHE_DIR=str(tmp_path / "ccache"), CCACHE_COMPILERTYPE="clang",
               CCACHE_COMPILERCHECK="%compiler% --mirecc-identity")
    first = _compile(tmp_path, ["ccache", MIRECC], env)
    assert first == alone and _searched(tmp_path) == 1
    again = _compile(tmp_path, ["ccache", MIRECC], env)
    assert again == alone and _ccache_stats(env) == {"hits": 1, "misses": 1}
    assert _searched(tmp_path) == 1                     # mirecc did not compile it again
    other = _compile(tmp_path, ["ccache", MIRECC], {**env, "MIRECC_SIZE_SEARCH": "1"})
    assert _ccache_stats(env)["misses"] == 2            # another identity: a miss
    assert other                                         # (whatever one candidate gives)


@needs_ccache
def test_mirecc_with_ccache_as_its_prefix(tmp_path):
    """``prefix: ccache``: mirecc splits the compile as without it (the
    search runs), the user's own compile goes through ccache."""
    alone = _mirecc_alone(tmp_path)
    env = _env(tmp_path, CCACHE_DIR=str(tmp_path / "ccache"), MIRECC_PREFIX="ccache")
    assert _compile(tmp_path, [MIRECC], env) == alone and _searched(tmp_path) == 1
    assert _ccache_stats(env)["misses"] == 1
    # the rebuild: mirecc's winner cache, and ccache's hit for the own compile
    # (or, where the source was already a second old at the first compile,
    # mirecc's kept object: nothing compiled at all)
    assert _compile(tmp_path, [MIRECC], env) == alone
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config

    kept = stats.read(Config(cache_dir=str(tmp_path / "cache"))).get("tus.object", 0)
    assert _ccache_stats(env) == {"hits": 1 - kept, "misses": 1}


@pytest.mark.skipif(shutil.which("sccache") is None, reason="needs sccache")
def test_sccache_in_front_of_mirecc(tmp_path):
    """``CC="sccache mirecc"``: sccache identifies mirecc as clang; its key
    holds mirecc's script, not its settings or heads, so its cache buster
    carries mirecc's identity."""
    alone = _mirecc_alone(tmp_path)
    port = free_port()
    env = _env(tmp_path, SCCACHE_DIR=str(tmp_path / "sccache"), SCCACHE_SERVER_PORT=str(port),
               SCCACHE_IDLE_TIMEOUT="0")
    identity = subprocess.run([MIRECC, "--mirecc-identity"], env=env, capture_output=True,
                              text=True, check=True).stdout.strip()
    env["SCCACHE_C_CUSTOM_CACHE_BUSTER"] = identity
    subprocess.run(["sccache", "--start-server"], env=env, capture_output=True, check=True)
    try:
        assert _compile(tmp_path, ["sccache", MIRECC], env) == alone
        assert _searched(tmp_path) == 1
        assert _compile(tmp_path, ["sccache", MIRECC], env) == alone
        stats = subprocess.run(["sccache", "--show-stats"], env=env, capture_output=True,
                               text=True).stdout
        hits = next(int(line.split()[-1]) for line in stats.splitlines()
                    if line.startswith("Cache hits") and "rate" not in line)
        assert hits == 1, stats
        assert _searched(tmp_path) == 1
        other = {**env, "MIRECC_SIZE_SEARCH": "1"}
        other["SCCACHE_C_CUSTOM_CACHE_BUSTER"] = subprocess.run(
            [MIRECC, "--mirecc-identity"], env=other, capture_output=True, text=True,
            check=True).stdout.strip()
        assert other["SCCACHE_C_CUSTOM_CACHE_BUSTER"] != identity
    finally:
        subprocess.run(["sccache", "--stop-server"], env=env, capture_output=True)



@pytest.mark.skipif(shutil.which("distccd") is None, reason="needs distcc")
def test_mirecc_with_distcc_as_its_prefix(tmp_path):
    """``prefix: distcc`` with a local distccd: the user's own compile is
    distributed (distccd compiles it), the front end and the search run
    here; the object is mirecc's alone."""
    alone = _mirecc_alone(tmp_path)
    port = free_port()
    log = tmp_path / "distccd.log"
    # its log on stderr: as root, distccd runs as the distcc user, who cannot
    # write into the test's folder
    with open(log, "wb") as err:
        daemon = subprocess.Popen(["distccd", "--no-detach", "--daemon", "--listen",
                                   "127.0.0.1", "--port", str(port), "--allow", "127.0.0.1",
                                   "--log-stderr", "--log-level", "info", "--jobs", "1",
                                   "--enable-tcp-insecure"],
                                  stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        (tmp_path / "distcc").mkdir()
        env = _env(tmp_path, MIRECC_PREFIX="distcc", DISTCC_HOSTS=f"127.0.0.1:{port}/1",
                   DISTCC_FALLBACK="0", DISTCC_DIR=str(tmp_path / "distcc"))
        assert _compile(tmp_path, [MIRECC], env) == alone
        assert _searched(tmp_path) == 1
        text = log.read_text(errors="replace")
        assert "COMPILE_OK" in text, text[-2000:]       # the daemon compiled it
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
