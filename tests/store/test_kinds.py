"""One storage interface: every stored kind declared once (mirecc.store.kinds),
over one folder implementation (mirecc.store.local), its owners' files where
they always were, and every kind listed with its size."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.store import kinds
from mirecc.store.local import TRIM_TO, Folder

MIRE = str(Path(sys.executable).with_name("mire"))


def test_each_owner_writes_where_its_kind_says(tmp_path):
    """The owners' schema numbers and the kinds' folders agree, and each
    writes its file where existing caches have it."""
    from mirecc.encoder.stmtcache import StatementCache, _FUNCTION_SCHEMA, _SCHEMA
    from mirecc.tasks.code_size.winners import TEAM_KIND, VERSION, WinnerCache
    from mirecc.tu import direct, objcache, travel
    from mirecc.tu.cache import ResultCache
    from mirecc.taskapi.records import TUResult

    assert kinds.OBJECTS.path == f"objects/v{objcache.SCHEMA}"
    assert kinds.MANIFESTS.path == f"direct/v{direct.SCHEMA}"
    assert kinds.WINNERS.path == f"code-size/v{VERSION}"
    assert [t in _SCHEMA + _FUNCTION_SCHEMA for t in kinds.EMBEDDINGS.tables] == [True, True]
    assert (TEAM_KIND, travel.KIND) == ("winner", "manifest")

    key = "ab" + "0" * 62
    ResultCache(tmp_path).put(key, TUResult(None))
    WinnerCache(str(tmp_path)).put(key, "-Oz", {"-Oz": 1}, {})
    obj = tmp_path / "a.o"
    obj.write_bytes(b"\x7fELF")
    assert objcache.ObjectCache(str(tmp_path)).put(key, str(obj)) is not None
    StatementCache(tmp_path / "embeddings.sqlite", "m", 2).close()
    for name in (f"results/v1/ab/{key}.json", f"code-size/v4/ab/{key}.json",
                 f"objects/v1/ab/{key}.o", "embeddings.sqlite"):
        assert (tmp_path / name).is_file(), name
    assert [k.name for k in kinds.LOCAL] == ["results", "objects", "manifests", "winners",
                                            "verdicts", "embeddings"]
    assert [k.name for k in kinds.TEAM] == ["winner", "manifest", "verdict", "profile"]


def test_a_folder_keeps_its_limit_least_recently_used_first(tmp_path):
    folder = Folder(str(tmp_path / "f"), ".o", companions=(".d",), durable=False,
                    max_bytes=256 * 1000)           # 1000 bytes per subfolder
    for i in range(6):
        key = f"aa{i:062d}"
        folder.write(key, b"d", suffix=".d")
        folder.write(key, bytes(300))
        os.utime(folder.path(key), ns=(i * 10**9, i * 10**9))
    # each write trimmed: at most 1000 bytes, down to 900 once over
    left = list(folder.keys())
    assert sum(len(folder.read(k)) for k in left) <= 1000
    assert left == sorted(left) and left[-1].endswith("5")
    gone = f"aa{0:062d}"
    assert gone not in left and not os.path.exists(folder.path(gone, ".d"))
    use = folder.usage()
    assert use.entries == len(left) and use.bytes == 301 * len(left)
    assert TRIM_TO < 1
    unbounded = Folder(str(tmp_path / "g"), ".json")
    for i in range(50):
        unbounded.write(f"bb{i:062d}", bytes(100_000))
    assert unbounded.usage().entries == 50 and unbounded.trim("bb") == 0


def test_every_kind_is_listed_with_its_size(tmp_path):
    cache = tmp_path / "cache"
    (cache / "results" / "v1" / "ab").mkdir(parents=True)
    (cache / "results" / "v1" / "ab" / ("ab" + "1" * 62 + ".json")).write_text("{}")
    (cache / "adapt").mkdir()
    (cache / "adapt" / "c4-x-pnone.txt").write_text("# mirecc-adapt 1 machine=m\na\nb\n")
    db = sqlite3.connect(cache / "embeddings.sqlite")
    db.execute("CREATE TABLE statement_embedding (model, text, embedding)")
    db.execute("CREATE TABLE function_embedding (model, digest, embedding)")
    db.execute("INSERT INTO statement_embedding VALUES ('m', 's', x'00')")
    db.commit()
    db.close()
    assert kinds.RESULTS.usage(str(cache)).entries == 1
    assert kinds.VERDICTS.usage(str(cache)).entries == 2
    assert kinds.EMBEDDINGS.usage(str(cache)).entries == 1
    assert kinds.OBJECTS.usage(str(cache)).entries == 0

    env = isolated_env(tmp_path, MIRECC_CACHE_DIR=str(cache))
    proc = subprocess.run([MIRE, "stats"], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0]: line for line in proc.stdout.splitlines()
              if line.startswith("    ") and " entries " in line}
    assert sorted(listed) == sorted(k.name for k in kinds.LOCAL)
    assert listed["results"].split()[1] == "1" and "no limit" in listed["results"]
    assert listed["verdicts"].split()[1] == "2"
    assert "1024 MB" in listed["objects"] and "(object_cache_mb)" in listed["objects"]


@pytest.mark.parametrize("backend", ["shared", "redis"])
def test_both_team_backends_are_one_interface(tmp_path, backend):
    """get, put, delete, keys and usage over a shared directory (a folder per
    kind, files where they always were) and over Redis."""
    from mirecc.store.backends import Unavailable, open_backend

    proc = None
    if backend == "redis":
        from test_team_store import _start_redis

        proc, port = _start_redis(tmp_path)
    try:
        url = f"redis://127.0.0.1:{port}/0" if proc else str(tmp_path)
        store, key = open_backend(url, 2.0), "ab" + "2" * 62
        store.put("winner", key, b"{}")
        if not proc:
            assert (tmp_path / "winner" / "ab" / key).read_bytes() == b"{}"
        assert list(store.keys("winner")) == [key] and store.get("winner", key) == b"{}"
        assert (store.usage("winner").entries, store.usage("winner").bytes) == (1, 2)
        assert kinds.TEAM_WINNERS.usage(store).entries == 1
        store.delete("winner", key)
        assert list(store.keys("winner")) == [] and store.get("winner", key) is None
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    with pytest.raises(Unavailable):
        list(open_backend(str(tmp_path / "missing"), 1.0).keys("winner"))
