"""The team store: a code-size winner verified by one build (CI, writing)
is used by another checkout with an empty cache (reading) on a real Redis
server and on a shared directory, giving the same object; an entry that is
damaged, another compiler's or wrong is rejected, counted, and changes
nothing; a stopped server costs one short timeout and the build goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs import free_port, isolated_env
from size_helpers import SOURCE, two_candidate_heads   # SOURCE: searched

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))
MIRE = str(Path(sys.executable).with_name("mire"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")



def _start_redis(tmp_path, *options: str, password: str | None = None):
    """A real redis-server on a free port, private to the test (``options``
    added to its command line): (process, port)."""
    server = shutil.which("redis-server")
    if not server:
        pytest.skip("needs redis-server (scripts/setup.sh --test installs it)")
    redis = pytest.importorskip("redis")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path), *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, password=password)
    for _ in range(100):
        try:
            client.ping()
            return proc, port
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail("redis-server did not start")


@pytest.fixture
def redis_url(tmp_path):
    """A real redis-server on a free port, private to the test."""
    proc, port = _start_redis(tmp_path)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)



def _checkout(tmp_path: Path, name: str) -> Path:
    """A checkout of the project at its own path."""
    where = tmp_path / name / "src"
    where.mkdir(parents=True)
    (where / "p.c").write_text(SOURCE)
    return where


def _build(where: Path, tmp_path: Path, cache: str, store: str, write: bool,
           **extra: str) -> tuple[bytes, str]:
    """``mirecc -Os -c p.c`` in ``where`` (the candidates: -Os,
    default<Oz> and default<O3>: default<Oz> wins)."""
    env = isolated_env(tmp_path, MIRECC_CC=CLANG,
                       MIRECC_HEADS_DIR=str(two_candidate_heads(tmp_path)),
                       MIRECC_CACHE_DIR=str(tmp_path / cache), MIRECC_SIZE_SEARCH="2",
                       MIRECC_SIZE_BUDGET="2", MIRECC_STORE=store,
                       MIRECC_STORE_WRITE="1" if write else "0", **extra)
    proc = subprocess.run([MIRECC, "-Os", "-c", "p.c", "-o", "p.o"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return (where / "p.o").read_bytes(), proc.stderr


def _stats(tmp_path: Path, cache: str) -> dict:
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config

    return stats.read(Config(cache_dir=str(tmp_path / cache)))


def _store_kinds(tmp_path: Path, url: str) -> list[tuple[str, bytes]]:
    from mirecc.store.backends import open_backend

    backend = open_backend(url, 2.0)
    return [(key, backend.get("winner", key)) for key in backend.keys("winner")]


@pytest.mark.parametrize("kind", ["redis", "directory"])
def test_a_winner_verified_in_ci_is_used_by_another_checkout(tmp_path, kind, request):
    url = request.getfixturevalue("redis_url") if kind == "redis" else str(tmp_path / "shared")
    if kind == "directory":
        os.makedirs(url)
    ci, _ = _build(_checkout(tmp_path, "ci"), tmp_path, "ci-cache", url, write=True)
    assert _stats(tmp_path, "ci-cache").get("store.fills") == 1
    (key, data), = _store_kinds(tmp_path, url)
    entry = json.loads(data)
    assert entry["payload"]["winner"] == "default<Oz>" and entry["kind"] == "winner"
    assert entry["tools"]["compiler"].startswith("clang|sha256:")
    # another user's checkout at another path, an empty cache, read only
    dev, err = _build(_checkout(tmp_path, "dev"), tmp_path, "dev-cache", url, write=False)
    assert dev == ci, err
    counts = _stats(tmp_path, "dev-cache")
    assert counts.get("store.hits") == 1 and counts.get("verified.code-size.from-store") == 1
    assert not counts.get("store.fills")                     # read only: nothing written
    # plain clang's object differs: the winner was applied, not the user's level
    plain = subprocess.run([CLANG, "-Os", "-c", "p.c", "-o", "plain.o"],
                           cwd=tmp_path / "dev" / "src")
    assert plain.returncode == 0 and (tmp_path / "dev" / "src" / "plain.o").read_bytes() != dev


def _tamper(url: str, key: str, change) -> None:
    from mirecc.store.backends import open_backend

    backend = open_backend(url, 2.0)
    entry = json.loads(backend.get("winner", key))
    backend.put("winner", key, change(entry))


def _wrong_winner(e):
    e["payload"]["winner"] = "default<O3>"
    return json.dumps(e).encode()


def _wrong_sizes(e):
    e["payload"]["sizes"]["default<Oz>"] -= 16
    return json.dumps(e).encode()


def _other_compiler(e):
    e["tools"]["compiler"] = "clang|sha256:" + "0" * 64
    return json.dumps(e).encode()


def _foreign_key(e):
    e["key"] = "f" * 64
    return json.dumps(e).encode()


@pytest.mark.parametrize("change", [
    lambda e: json.dumps(e).encode()[:40],        # truncated
    lambda e: b"\x00\xff not json",
    lambda e: json.dumps({**e, "mirecc-store": 99}).encode(),
    _wrong_winner, _wrong_sizes, _other_compiler, _foreign_key,
], ids=["truncated", "garbage", "another-version", "wrong-winner", "wrong-sizes",
        "another-compiler", "another-key"])
def test_a_tampered_entry_is_rejected_counted_and_changes_nothing(tmp_path, redis_url, change):
    ci, _ = _build(_checkout(tmp_path, "ci"), tmp_path, "ci-cache", redis_url, write=True)
    (key, _), = _store_kinds(tmp_path, redis_url)
    _tamper(redis_url, key, change)
    dev, err = _build(_checkout(tmp_path, "dev"), tmp_path, "dev-cache", redis_url,
                      write=False)
    assert dev == ci                    # the search ran, as without a store
    counts = _stats(tmp_path, "dev-cache")
    assert counts.get("store.rejected") == 1 and not counts.get("store.hits"), counts
    assert err.count("team store") == 1 and "not used" in err, err


def test_a_stopped_server_costs_one_timeout_and_the_build_goes_on(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"     # nothing listens there
    plain, _ = _build(_checkout(tmp_path, "a"), tmp_path, "plain-cache", "", write=False)
    start = time.monotonic()
    first, err = _build(_checkout(tmp_path, "b"), tmp_path, "cache", url, write=True)
    assert first == plain and "team store unavailable" in err
    # the next compile (its winner not known here) does not ask again (the
    # marker), and says nothing
    shutil.rmtree(tmp_path / "cache" / "code-size")
    second, err2 = _build(_checkout(tmp_path, "c"), tmp_path, "cache", url, write=True)
    assert second == plain and "team store" not in err2
    assert time.monotonic() - start < 120
    counts = _stats(tmp_path, "cache")
    # two asks per compile, each counted: its plain entry (mirecc.tu.travel), its winner
    assert counts.get("store.unavailable") == 4 and not counts.get("store.hits")


def test_envelopes_check_version_kind_key_and_tools():
    from mirecc.store.team import Rejected, envelope, open_envelope

    tools = {"compiler": "clang|sha256:" + "1" * 64, "opt": "opt|sha256:" + "2" * 64}
    data = envelope("winner", "k1", tools, {"winner": "-Oz"})
    assert open_envelope(data, "winner", "k1", tools)["payload"] == {"winner": "-Oz"}
    assert open_envelope(data, "winner", "k1", None)["tools"] == tools
    for kind, key, want in (("profile", "k1", tools), ("winner", "k2", tools),
                            ("winner", "k1", {**tools, "opt": "opt|sha256:" + "3" * 64})):
        with pytest.raises(Rejected):
            open_envelope(data, kind, key, want)


def test_a_bad_store_setting_is_a_clear_error(tmp_path):
    env = isolated_env(tmp_path, MIRECC_STORE="http://example.org/store")
    proc = subprocess.run([MIRE, "store", "status"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "MIRECC_STORE" in proc.stderr and "redis://host:port/db" in proc.stderr


def test_mire_store_status_export_import_and_prune(tmp_path, redis_url):
    _build(_checkout(tmp_path, "ci"), tmp_path, "ci-cache", redis_url, write=True)
    env = isolated_env(tmp_path, MIRECC_STORE=redis_url,
                       MIRECC_CACHE_DIR=str(tmp_path / "ci-cache"))

    def mire(*args):
        proc = subprocess.run([MIRE, "store", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    status = mire("status")
    assert "Redis" in status and "winner entries: 1 (1 made by tools installed here" in status
    assert "fills" in status
    dump = tmp_path / "store.jsonl"
    assert "exported 1 entries" in mire("export", str(dump))
    from mirecc.store.backends import open_backend

    backend = open_backend(redis_url, 2.0)
    (key,) = list(backend.keys("winner"))
    backend.put("winner", "0" * 64, b"damaged")
    assert "removed 1 entries, kept 1" in mire("prune")
    backend.delete("winner", key)
    assert "imported 1 entries (0 not)" in mire("import", str(dump))
    assert list(backend.keys("winner")) == [key]
    assert "removed 1 entries, kept 0" in mire("prune", "--older-than", "0")


def test_run_time_verdicts_travel_to_another_user_on_the_same_kind_of_machine(tmp_path,
                                                                             redis_url):
    """A decided verdict of the adaptive runtime (as mire tune's seeding
    writes it) pushed by CI is pulled into another user's store for this
    machine; a verdict of another kind of machine, or a line that is not a
    decided verdict of its key, is not."""
    from mirecc.runtime.store import machine_descriptor, read_store, seed
    from mirecc.store.backends import open_backend

    machine = machine_descriptor()
    ci_cache = tmp_path / "ci-cache"
    seed(ci_cache / "adapt" / f"{machine}.txt", "ab" * 16, "k.c:3 region", "half-static-default")
    seed(ci_cache / "adapt" / "c999-00000000-pnone.txt", "cd" * 16, "k.c:9 region", "f4")

    def mire(cache, *args, write=False):
        env = isolated_env(tmp_path, MIRECC_STORE=redis_url, MIRECC_CACHE_DIR=str(cache),
                           MIRECC_STORE_WRITE="1" if write else "0")
        return subprocess.run([MIRE, "store", *args], env=env, capture_output=True, text=True,
                              timeout=120)
    assert mire(ci_cache, "push-verdicts").returncode == 2          # read only: refused
    proc = mire(ci_cache, "push-verdicts", write=True)
    assert proc.returncode == 0 and "wrote 2 decided verdicts" in proc.stdout, proc.stderr
    backend = open_backend(redis_url, 2.0)
    bad = next(k for k in backend.keys("verdict")
               if json.loads(backend.get("verdict", k))["tools"]["machine"] != machine)
    dev = tmp_path / "dev-cache"
    proc = mire(dev, "pull-verdicts")
    assert proc.returncode == 0 and "added 1 verdicts" in proc.stdout, proc.stdout + proc.stderr
    (cell,) = read_store(dev / "adapt" / f"{machine}.txt")
    assert (cell.key, cell.phase, cell.best) == ("ab" * 16, 1, "half-static-default")
    assert "added 0 verdicts" in mire(dev, "pull-verdicts").stdout   # already there
    # a line that is not a decided verdict of its key is rejected, counted
    entry = json.loads(backend.get("verdict", bad))
    entry["tools"]["machine"] = machine
    backend.put("verdict", bad, json.dumps(entry).encode())
    proc = mire(tmp_path / "third-cache", "pull-verdicts")
    assert "added 1 verdicts" in proc.stdout and "(1 rejected)" in proc.stdout, proc.stdout


def test_decisions_profile_entries_travel_by_their_function_digest(tmp_path, redis_url):
    from mirecc.store.backends import open_backend
    from mirecc.taskapi.profile import read_profile

    profile = tmp_path / "ci" / "mirecc.profile"
    profile.parent.mkdir()
    profile.write_text("# mirecc decisions profile 1\n"
                       "openmp  src/cov.c  kernel_covariance:0  5e1f0c9a2b7d3e48  "
                       "threads=2,schedule=static,chunk=8  # 1.43x\n")

    def mire(*args, write=False):
        env = isolated_env(tmp_path, MIRECC_STORE=redis_url,
                           MIRECC_CACHE_DIR=str(tmp_path / "cache"),
                           MIRECC_STORE_WRITE="1" if write else "0")
        return subprocess.run([MIRE, "store", *args], env=env, capture_output=True, text=True,
                              timeout=120)
    assert mire("push-profile", str(profile)).returncode == 2      # read only: refused
    assert "wrote 1 profile entries" in mire("push-profile", str(profile), write=True).stdout
    mine = tmp_path / "dev" / "mirecc.profile"
    mine.parent.mkdir()
    assert "added 1 profile entries" in mire("pull-profile", str(mine)).stdout
    (entry,) = read_profile(str(mine))
    assert entry.digest == "5e1f0c9a2b7d3e48" and entry.source == str(mine.parent / "src/cov.c")
    assert "added 0 profile entries" in mire("pull-profile", str(mine)).stdout
    # a damaged entry is rejected and the profile left as it is
    backend = open_backend(redis_url, 2.0)
    (key,) = list(backend.keys("profile"))
    entry = json.loads(backend.get("profile", key))
    entry["payload"]["line"] = entry["payload"]["line"].replace("threads=2", "threads=x")
    backend.put("profile", key, json.dumps(entry).encode())
    other = tmp_path / "other.profile"
    proc = mire("pull-profile", str(other))
    assert "added 0 profile entries" in proc.stdout and "not used" in proc.stderr, proc.stderr


def test_a_compiles_read_gives_what_the_client_wrote_with_a_password_and_a_database(tmp_path):
    """A compile reads an entry over a socket (no client import): on a
    server that asks for a password, in database 3, binary data, a missing
    entry, a wrong password (unavailable, not an entry)."""
    redis = pytest.importorskip("redis")
    from mirecc.store.backends import RedisStore, Unavailable

    proc, port = _start_redis(tmp_path, "--requirepass", "s3cret", password="s3cret")
    try:
        client = redis.Redis(port=port, password="s3cret", db=3)
        data = bytes(range(256)) * 3 + b"\r\n$-1\r\n"
        writer = RedisStore(f"redis://:s3cret@127.0.0.1:{port}/3", 2.0)
        writer.put("winner", "k1", data)
        assert client.get("mirecc:winner:k1") == data
        reader = RedisStore(f"redis://:s3cret@127.0.0.1:{port}/3", 2.0)
        assert reader.get("winner", "k1") == data
        assert reader._client is None           # read without the client
        assert reader.get("winner", "nothing") is None
        assert RedisStore(f"redis://:s3cret@127.0.0.1:{port}/0", 2.0).get("winner", "k1") \
            is None
        with pytest.raises(Unavailable, match="WRONGPASS|invalid"):
            RedisStore(f"redis://:wrong@127.0.0.1:{port}/3", 2.0).get("winner", "k1")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6380/2", "redis://host", "redis://Host.Example:1/",
                                 "redis://:pw@h:7/3", "redis://user:pw@h/0", "redis://user@h:9",
                                 "redis://h:6379/1?x=1", "redis://[::1]:6400/4",
                                 "rediss://h:6380/0", "redis://:p%40w@h/1"])
def test_a_compiles_url_reading_agrees_with_urllib(url):
    """The compile path reads ``redis://`` URLs by hand (no urllib import);
    it must read what urllib reads."""
    from urllib.parse import urlsplit

    from mirecc.store.backends import _plain_url

    parts = urlsplit(url)
    want = None if parts.scheme != "redis" else (
        parts.hostname or "localhost", parts.port or 6379, int(parts.path.strip("/") or "0"),
        parts.username, parts.password)
    assert _plain_url(url) == want
