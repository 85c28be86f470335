"""A TU CI found nothing to do for travels as a plain entry: another
checkout at another path, another user's empty cache, runs the user's
command as it is (clang's object, no IR read); a changed file or a foreign
entry is a miss or a rejection, and the object is still clang's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from size_helpers import two_candidate_heads

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

pytestmark = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")

# too small for the size search: the object is the user's own compile
TINY = '#include "t.h"\nint twice(int x) { return TWICE(x); }\n'
HEADER = "#define TWICE(x) ((x) * 2)\n"


def _checkout(tmp_path: Path, name: str) -> Path:
    where = tmp_path / name / "src"
    (where / "inc").mkdir(parents=True)
    (where / "t.c").write_text(TINY)
    (where / "inc" / "t.h").write_text(HEADER)
    old = 1_600_000_000          # older than a compile's start (direct mode's rule)
    for f in (where / "t.c", where / "inc" / "t.h"):
        os.utime(f, (old, old))
    return where


PLAIN_ARGS = ["-Oz", "-Iinc", "-c", "t.c", "-o", "t.o"]


def _debian_args(where: Path) -> list[str]:
    """Debian's flags name the checkout (a prefix map of the directory
    above the build's); CMake's name sources and includes absolutely."""
    return ["-Oz", "-g", f"-ffile-prefix-map={where.parent}=.", f"-I{where / 'inc'}",
            "-c", str(where / "t.c"), "-o", "t.o"]


def _build(where: Path, tmp_path: Path, cache: str, store: str, write: bool,
           args: list[str] = PLAIN_ARGS) -> tuple[bytes, str]:
    env = isolated_env(tmp_path, MIRECC_CC=CLANG,
                       MIRECC_HEADS_DIR=str(two_candidate_heads(tmp_path)),
                       MIRECC_CACHE_DIR=str(tmp_path / cache), MIRECC_STORE=store,
                       MIRECC_STORE_WRITE="1" if write else "0")
    proc = subprocess.run([MIRECC, *args], cwd=where,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return (where / "t.o").read_bytes(), proc.stderr


def _stats(tmp_path: Path, cache: str) -> dict:
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config

    return stats.read(Config(cache_dir=str(tmp_path / cache)))


def _clang(where: Path, args: list[str] = PLAIN_ARGS) -> bytes:
    subprocess.run([CLANG, *args[:-1], "clang.o"], cwd=where, check=True)
    return (where / "clang.o").read_bytes()


def _entries(url: str) -> list[tuple[str, dict]]:
    from mirecc.store.backends import open_backend

    backend = open_backend(url, 2.0)
    return [(key, json.loads(backend.get("manifest", key))) for key in backend.keys("manifest")]


def test_a_plain_tu_travels_to_another_checkout_and_runs_clang_alone(tmp_path):
    url = str(tmp_path / "shared")
    os.makedirs(url)
    _build(_checkout(tmp_path, "ci"), tmp_path, "ci-cache", url, write=True)
    (key, entry), = _entries(url)
    assert entry["kind"] == "manifest" and entry["tools"]["compiler"].startswith("clang|sha256:")
    # the files as the front end named them: relative, so another checkout reads its own
    names = [name for name, _ in entry["payload"]["files"]]
    assert names[0] == "t.c" and "inc/t.h" in names
    assert not any(str(tmp_path) in name for name in names)
    dev = _checkout(tmp_path, "dev")
    obj, err = _build(dev, tmp_path, "dev-cache", url, write=False)
    assert obj == _clang(dev), err
    counts = _stats(tmp_path, "dev-cache")
    assert counts.get("tus.from-store") == 1 and counts.get("store.hits") == 1, counts
    assert not counts.get("verified.code-size") and not counts.get("store.fills")   # no IR, no gate
    # a header changed in this checkout: a miss, the TU goes through the path
    (dev / "inc" / "t.h").write_text("#define TWICE(x) ((x) + (x))\n")
    obj, err = _build(dev, tmp_path, "dev-cache2", url, write=False)
    assert obj == _clang(dev), err
    counts = _stats(tmp_path, "dev-cache2")
    assert not counts.get("tus.from-store") and counts.get("verified.code-size") == 1, counts


def test_a_checkouts_own_path_in_the_flags_does_not_keep_the_entry_home(tmp_path):
    url = str(tmp_path / "shared")
    os.makedirs(url)
    ci = _checkout(tmp_path, "ci")
    _build(ci, tmp_path, "ci-cache", url, write=True, args=_debian_args(ci))
    (key, entry), = _entries(url)
    names = [name for name, _ in entry["payload"]["files"]]
    assert names[:2] == ["<cwd>/t.c", "<cwd>/inc/t.h"], names
    assert str(tmp_path) not in json.dumps(entry)
    dev = _checkout(tmp_path, "dev")
    obj, err = _build(dev, tmp_path, "dev-cache", url, write=False, args=_debian_args(dev))
    assert obj == _clang(dev, _debian_args(dev)), err
    counts = _stats(tmp_path, "dev-cache")
    assert counts.get("tus.from-store") == 1 and counts.get("store.hits") == 1, counts


def test_the_checkouts_directories_are_written_relative_to_the_working_directory():
    from mirecc.util.paths import Checkout

    args = ["-ffile-prefix-map=/w/lua=.", "-fdebug-prefix-map=/elsewhere=x", "-I/w/lua/src/inc",
            "-I/w/luax/inc", "-I/usr/include"]
    here = Checkout(args, "lapi.c", cwd="/w/lua/src")
    assert [here.portable(a) for a in args] == [
        "-ffile-prefix-map=<cwd>/..=.", "-fdebug-prefix-map=/elsewhere=x", "-I<cwd>/inc",
        "-I/w/luax/inc", "-I/usr/include"]
    assert here.here("<cwd>/../include/x.h") == "/w/lua/src/../include/x.h"
    assert here.here("lua.h") == "lua.h"
    # an absolute source shares a directory with the build's (CMake); the root never counts
    cmake = Checkout([], "/w/p/src/a.c", cwd="/w/p/build/src")
    assert cmake.portable("/w/p/src/a.c") == "<cwd>/../../src/a.c"
    assert Checkout([], "/x/a.c", cwd="/w/p").portable("/x/a.c -I/w/p") == "/x/a.c -I<cwd>"


@pytest.mark.parametrize("change", ["files", "compiler", "key"])
def test_a_foreign_or_stale_plain_entry_leaves_clangs_object(tmp_path, change):
    from mirecc.store.backends import open_backend

    url = str(tmp_path / "shared")
    os.makedirs(url)
    _build(_checkout(tmp_path, "ci"), tmp_path, "ci-cache", url, write=True)
    (key, entry), = _entries(url)
    if change == "files":
        entry["payload"]["files"][0][1] = "0" * 64
    elif change == "compiler":
        entry["tools"]["compiler"] = "clang|sha256:" + "0" * 64
    else:
        entry["key"] = "f" * 64
    open_backend(url, 2.0).put("manifest", key, json.dumps(entry).encode())
    dev = _checkout(tmp_path, "dev")
    obj, err = _build(dev, tmp_path, "dev-cache", url, write=False)
    assert obj == _clang(dev)
    counts = _stats(tmp_path, "dev-cache")
    assert not counts.get("tus.from-store") and counts.get("verified.code-size") == 1, counts
    if change == "files":
        assert counts.get("store.misses") and not counts.get("store.rejected"), counts
    else:
        assert counts.get("store.rejected") == 1 and err.count("team store") == 1, err


def test_the_travelling_pipeline_key_names_files_by_content_and_is_remembered(tmp_path):
    from mirecc.taskapi.config import Config
    from mirecc.tu.cache import pipeline_key, travelling_pipeline_key

    config = Config(cache_dir=str(tmp_path / "cache"))
    local = pipeline_key(config, {"c"})
    travelling = travelling_pipeline_key(config, {"c"}, local)
    assert travelling == pipeline_key(config, {"c"}, content=True) != local
    memo, = (tmp_path / "cache" / "tools").glob("pipeline-*")
    memo.write_text("e" * 64)           # the memo is what a later compile reads
    assert travelling_pipeline_key(config, {"c"}, local) == "e" * 64
    assert travelling_pipeline_key(config, {"c"}, "0" * 64) == travelling
