"""The result cache and capture mode, through the real ``mirecc`` and clang-14,
and under concurrency (many processes, ``make -j4``)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

needs_clang = pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

SOURCE = """\
int dot(const int *a, const int *b, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
"""


def source(n: int) -> str:
    return f"int f{n}(int *a, int m) {{ int s = {n}; " \
           f"for (int i = 0; i < m; i++) s += a[i] * {n + 1}; return s; }}\n"


def base_env(tmp_path: Path, **extra: str) -> dict:
    return isolated_env(tmp_path, **{"MIRECC_CC": CLANG,
                                     "MIRECC_CACHE_DIR": str(tmp_path / "cache"), **extra})


def mirecc(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([MIRECC, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc


def explain(cwd: Path, env: dict, *args: str) -> dict:
    proc = mirecc(["--explain=json", "-O2", *args, "-c", "dot.c", "-o", "dot.o"], cwd, env)
    assert proc.stderr == ""
    data = json.loads(proc.stdout)
    assert len(data["translation_units"]) == 1
    return data["translation_units"][0]


def cache_entries(root: Path) -> list[Path]:
    """The result cache's files (not the statistics beside them)."""
    return sorted(p for p in (root / "results").rglob("*") if p.is_file())


def assert_no_partial_files(root: Path) -> None:
    leftovers = [p for p in root.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def pipeline_version(tmp_path: Path) -> str:
    from mirecc.tu.cache import pipeline_key
    from mirecc.taskapi.config import Config

    # as the driver computes it for dot.c, with base_env's (empty) heads directory
    config = Config(heads_dir=isolated_env(tmp_path)["MIRECC_HEADS_DIR"])
    return pipeline_key(config, {"c"})


# --- cache -------------------------------------------------------------------------


@needs_clang
def test_second_identical_compile_is_a_cache_hit(tmp_path):
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path)
    first = explain(tmp_path, env)
    second = explain(tmp_path, env)
    assert (first["cache"], second["cache"]) == ("miss", "hit")
    assert first["seen"] == second["seen"]
    assert first["no_decision_reasons"] == second["no_decision_reasons"]
    # Another optimisation level is another entry.
    assert explain(tmp_path, env, "-O3")["cache"] == "miss"
    assert explain(tmp_path, env, "-O3")["cache"] == "hit"


@needs_clang
def test_entries_are_content_addressed_json(tmp_path):
    from mirecc.tu.cache import ResultCache
    from mirecc.taskapi.records import TUResult

    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path)
    tu = explain(tmp_path, env)
    key = ResultCache.key(tu["ir"]["sha256"], pipeline_version(tmp_path), "2")
    entry = tmp_path / "cache" / "results" / "v1" / key[:2] / f"{key}.json"
    assert cache_entries(tmp_path / "cache") == [entry]
    data = json.loads(entry.read_text())
    assert data["summary"] == tu["seen"]
    assert data["no_decision_reasons"] == tu["no_decision_reasons"]
    assert TUResult.from_dict(data).summary.loops == 1
    # The same bitcode from another directory (same flags) maps to the same entry.
    other = tmp_path / "other"
    other.mkdir()
    (other / "dot.c").write_text(SOURCE)
    assert explain(other, env)["cache"] == "hit"
    # ... but a change of the code does not.
    (other / "dot.c").write_text(SOURCE.replace("s = 0", "s = 1"))
    assert explain(other, env)["cache"] == "miss"
    assert len(cache_entries(tmp_path / "cache")) == 2


@needs_clang
@pytest.mark.parametrize("damage", [
    b"", b"{", b"\x00\xff\xfe", b"[]", b"null", b'{"schema": 999}', b'{"schema": 1}',
    b'{"schema": 1, "summary": null, "decisions": [1], "no_decision_reasons": []}',
    b'{"schema": 1, "summary": {"functions": 3}, "decisions": [], '
    b'"no_decision_reasons": []}',
])
def test_damaged_entry_is_a_miss_and_is_rewritten(tmp_path, damage):
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path)
    good = explain(tmp_path, env)
    [entry] = cache_entries(tmp_path / "cache")
    intact = entry.read_bytes()
    entry.write_bytes(damage)
    again = explain(tmp_path, env)
    assert again["cache"] == "miss"
    assert again["seen"] == good["seen"]
    assert entry.read_bytes() == intact
    assert explain(tmp_path, env)["cache"] == "hit"
    assert_no_partial_files(tmp_path / "cache")


@needs_clang
def test_entry_without_summary_is_completed_for_explain(tmp_path):
    """A capture-only call stores no summary; --explain then recomputes it."""
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(tmp_path / "capture"))
    mirecc(["-O2", "-c", "dot.c", "-o", "dot.o"], tmp_path, env)
    [entry] = cache_entries(tmp_path / "cache")
    assert json.loads(entry.read_text())["summary"] is None
    assert explain(tmp_path, env)["cache"] == "miss"
    assert json.loads(entry.read_text())["summary"] is not None
    assert explain(tmp_path, env)["cache"] == "hit"


@needs_clang
def test_cache_off(tmp_path):
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CACHE="0")
    assert explain(tmp_path, env)["cache"] == "off"
    assert explain(tmp_path, env)["cache"] == "off"
    assert not (tmp_path / "cache" / "results").exists()   # (mire stats' counters are there)


@needs_clang
def test_default_cache_dir_is_under_xdg_cache_home(tmp_path):
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path)
    del env["MIRECC_CACHE_DIR"]
    assert explain(tmp_path, env)["cache"] == "miss"
    assert list((tmp_path / "xdg-cache" / "mirecc" / "results").rglob("*.json"))
    assert not (tmp_path / "cache").exists()


@needs_clang
def test_unwritable_cache_is_reported_in_explain(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CACHE_DIR=str(blocker / "cache"))
    proc = subprocess.run([MIRECC, "--explain=json", "-O2", "-c", "dot.c", "-o", "dot.o"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["translation_units"][0]["cache"] == "unwritable"
    assert len(proc.stderr.splitlines()) == 1 and "cache" in proc.stderr


# --- concurrent writers to ResultCache ---------------------------------------------------


def _writer(root: str, worker: int, rounds: int) -> int:
    """Write the shared key and a key of our own many times; read the shared
    entry's file directly in between: it must always be absent or whole."""
    from mirecc.tu.cache import ResultCache
    from mirecc.taskapi.records import TUResult

    cache = ResultCache(Path(root))
    shared = ResultCache.key("0" * 64, "v", "2")
    own = ResultCache.key(f"{worker + 1:064x}", "v", "2")
    bad = 0
    for i in range(rounds):
        reason = f"round {i} of worker {worker} " + "x" * (i * 37 % 2000)
        cache.put(shared, TUResult(None, [], [reason], ["test"]))
        cache.put(own, TUResult(None, [], [reason], ["test"]))
        try:
            raw = Path(cache.folder.path(shared)).read_bytes()
        except FileNotFoundError:
            continue
        try:
            TUResult.from_dict(json.loads(raw))
        except (ValueError, KeyError, TypeError):
            bad += 1
    return bad


def test_concurrent_result_cache_writers(tmp_path):
    from mirecc.tu.cache import ResultCache

    workers, rounds = 10, 40
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        bad = pool.starmap(_writer, [(str(tmp_path), w, rounds) for w in range(workers)])
    assert bad == [0] * workers
    files = cache_entries(tmp_path)
    assert len(files) == workers + 1
    assert_no_partial_files(tmp_path)
    cache = ResultCache(tmp_path)
    for path in files:
        assert cache.get(path.stem) is not None
        assert path.parent.name == path.stem[:2]


def test_put_into_unwritable_root_raises_cache_error(tmp_path):
    from mirecc.tu.cache import CacheError, ResultCache
    from mirecc.taskapi.records import TUResult

    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = ResultCache(blocker / "cache")
    with pytest.raises(CacheError, match=str(blocker)):
        cache.put(ResultCache.key("a" * 64, "v", "2"), TUResult(None))
    assert cache.get(ResultCache.key("a" * 64, "v", "2")) is None


# --- capture ------------------------------------------------------------------------


def bitcode_is_valid(data: bytes) -> bool:
    import llvmlite.binding as llvm

    module = llvm.parse_bitcode(data)
    module.verify()
    return True


@needs_clang
def test_capture_stores_each_tu_once_with_a_manifest_line(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "k.h").write_text("#define K 3\n")
    (tmp_path / "dot.c").write_text('#include "k.h"\n' + SOURCE.replace("s = 0", "s = K"))
    capture = tmp_path / "capture"
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(capture))
    args = ["-O2", "-Iinc", "-DFOO=1", "-MD", "-MF", "dot.d", "-c", "dot.c", "-o", "dot.o"]
    for _ in range(2):
        proc = mirecc(args, tmp_path, env)
        assert proc.stderr == "" and proc.stdout == ""
    subprocess.run([CLANG, *args[:-1], "ref.o"], cwd=tmp_path, check=True)
    assert (tmp_path / "dot.o").read_bytes() == (tmp_path / "ref.o").read_bytes()

    [bc] = [p for p in (capture / "ir").rglob("*") if p.is_file()]
    sha = hashlib.sha256(bc.read_bytes()).hexdigest()
    assert bc == capture / "ir" / sha[:2] / f"{sha}.bc"
    assert bitcode_is_valid(bc.read_bytes())

    lines = (capture / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 2
    version = subprocess.run([CLANG, "--version"], capture_output=True,
                             text=True).stdout.splitlines()[0]
    for line in lines:
        record = json.loads(line)
        assert record["sha256"] == sha
        assert record["ir"] == f"ir/{sha[:2]}/{sha}.bc"
        assert record["source"] == str(tmp_path / "dot.c")
        assert record["cwd"] == str(tmp_path)
        assert record["language"] == "c" and record["opt_level"] == "2"
        assert record["flags"] == ["-O2", "-Iinc", "-DFOO=1"]
        assert record["compiler"] == CLANG
        assert record["compiler_version"] == version.strip()
    assert_no_partial_files(capture)


@needs_clang
def test_capture_two_sources_in_one_call(tmp_path):
    (tmp_path / "a.c").write_text(source(1))
    (tmp_path / "b.c").write_text(source(2) + "int main(void) { return 0; }\n")
    capture = tmp_path / "capture"
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(capture))
    mirecc(["-O1", "a.c", "b.c", "-o", "prog"], tmp_path, env)
    records = [json.loads(x) for x in (capture / "manifest.jsonl").read_text().splitlines()]
    assert [Path(r["source"]).name for r in records] == ["a.c", "b.c"]
    for r in records:
        assert bitcode_is_valid((capture / r["ir"]).read_bytes())


@needs_clang
def test_capture_from_stdin(tmp_path):
    capture = tmp_path / "capture"
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(capture))
    proc = subprocess.run([MIRECC, "-O2", "-x", "c", "-c", "-", "-o", "in.o"], cwd=tmp_path,
                          env=env, input=SOURCE, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    [record] = [json.loads(x) for x in (capture / "manifest.jsonl").read_text().splitlines()]
    assert record["source"] == "-"
    assert bitcode_is_valid((capture / record["ir"]).read_bytes())


# --- make -j4 -------------------------------------------------------------------------


def write_project(tmp_path: Path, files: int, copies_of_same: int) -> list[str]:
    """files distinct sources, plus copies_of_same objects built from one source."""
    objects = []
    rules = []
    for n in range(files):
        (tmp_path / f"s{n}.c").write_text(source(n))
        objects.append(f"s{n}.o")
    (tmp_path / "same.c").write_text(SOURCE)
    for n in range(copies_of_same):
        objects.append(f"same{n}.o")
        rules.append(f"same{n}.o: same.c\n\t$(CC) -O2 -c same.c -o $@\n")
    (tmp_path / "Makefile").write_text(
        f"CC = {MIRECC}\nall: {' '.join(objects)}\n"
        "%.o: %.c\n\t$(CC) -O2 -c $< -o $@\n" + "".join(rules))
    return objects


@needs_clang
@needs_make
def test_make_j4_capture_into_one_directory(tmp_path):
    objects = write_project(tmp_path, files=8, copies_of_same=0)
    capture = tmp_path / "capture"
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(capture))
    proc = subprocess.run(["make", "-j4", "-s"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = (capture / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 8
    records = [json.loads(line) for line in lines]
    assert sorted(Path(r["source"]).name for r in records) == sorted(
        f"s{n}.c" for n in range(8))
    assert len({r["sha256"] for r in records}) == 8
    for r in records:
        data = (capture / r["ir"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"]
        assert bitcode_is_valid(data)
    assert_no_partial_files(capture)
    for obj in objects:
        assert (tmp_path / obj).is_file()


@needs_clang
@needs_make
def test_make_j4_same_and_different_keys_leave_whole_files(tmp_path):
    """Four objects from one source write the same cache entry and the same
    captured IR at the same time; eight others write their own."""
    write_project(tmp_path, files=8, copies_of_same=4)
    capture = tmp_path / "capture"
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(capture))
    proc = subprocess.run(["make", "-j4", "-s"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    records = [json.loads(x) for x in (capture / "manifest.jsonl").read_text().splitlines()]
    assert len(records) == 12
    assert len({r["sha256"] for r in records}) == 9
    assert len(list((capture / "ir").rglob("*.bc"))) == 9
    entries = cache_entries(tmp_path / "cache")
    assert len(entries) == 9
    from mirecc.tu.cache import ResultCache
    cache = ResultCache(tmp_path / "cache")
    for entry in entries:
        json.loads(entry.read_text())
        assert cache.get(entry.stem) is not None
    assert_no_partial_files(tmp_path / "cache")
    assert_no_partial_files(capture)


@needs_clang
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_written_files_follow_the_umask(tmp_path, umask):
    """Cache entries and captured IR get 0666 less the umask, like any file a
    compiler writes (mkstemp alone would make them 0600)."""
    (tmp_path / "dot.c").write_text(SOURCE)
    env = base_env(tmp_path, MIRECC_CAPTURE_DIR=str(tmp_path / "capture"))
    old = os.umask(umask)
    try:
        mirecc(["-O2", "-c", "dot.c", "-o", "dot.o"], tmp_path, env)
    finally:
        os.umask(old)
    files = sorted(p for p in tmp_path.glob("ca*/**/*") if p.is_file())
    assert len(files) == 4   # cache entry, statistics, bitcode, manifest
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
