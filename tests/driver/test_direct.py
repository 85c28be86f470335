"""Direct mode (:mod:`mirecc.tu.direct`): a TU compiled again with the same
command, source and headers gets its decisions from the manifest without a
front end run, applies them the same way, and any change to a file the
front end read (or a damaged manifest) sends it back through the bitcode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs import isolated_env
from mirecc.tu.direct import Manifests, dependency_files

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

SOURCE = """\
#include "scale.h"
void scale(double *restrict a, const double *restrict b, int n) {
  for (int i = 0; i < n; i++) a[i] = FACTOR * b[i] + 1.0;
}
"""


def test_dependency_file_parsing():
    text = ("obj/a\\ b.o: src/a\\ b.c /usr/include/stdio.h \\\n"
            "  inc/x\\#1.h cost$$.h\n\n"
            "/usr/include/stdio.h:\n")          # -MP's phony rule: not a prerequisite list
    assert dependency_files(text) == ["src/a b.c", "/usr/include/stdio.h", "inc/x#1.h",
                                      "cost$.h"]
    with pytest.raises(ValueError):
        dependency_files("no rule here\n")


def test_manifest_misses_on_changed_or_damaged_files(tmp_path):
    from mirecc.taskapi.records import TUResult

    source, header, dep = tmp_path / "a.c", tmp_path / "a.h", tmp_path / "a.d"
    source.write_text('#include "a.h"\n')
    header.write_text("int x;\n")
    dep.write_text(f"a.o: {source} {header}\n")
    past = time.time() - 60
    for path in (source, header):
        os.utime(path, (past, past))
    manifests = Manifests(str(tmp_path / "cache"))
    result = TUResult(None, [], ["no loops"], ["no-loops"])
    hit = {"skip.no-loops": 1, "tus.cached": 1, "tus.direct": 1, "tus.seen": 1}
    assert manifests.record("k" * 64, str(dep), str(source), time.time_ns(), result, "f" * 64, 9,
                            hit)
    entry = manifests.lookup("k" * 64)
    assert (entry.bitcode_bytes, entry.decided, entry.applied, entry.reason_codes,
            entry.hit_counts) == (9, False, False, ["no-loops"], hit)
    assert TUResult.from_dict(json.loads(entry.result_json)).to_dict() == result.to_dict()
    header.write_text("int y;\n")
    assert manifests.lookup("k" * 64) is None
    # a file modified while the front end ran: no manifest
    assert not manifests.record("j" * 64, str(dep), str(source), time.time_ns(), result,
                                "f" * 64, 9, hit)
    assert manifests.lookup("j" * 64) is None
    # damaged: a miss, not an error
    path = Path(manifests.folder.path("k" * 64))
    path.write_text("{not a manifest")
    assert manifests.lookup("k" * 64) is None


@pytest.fixture(scope="module")
def heads_8x1(tmp_path_factory) -> Path:
    from vectorize_heads import make_head
    return make_head(tmp_path_factory.mktemp("heads"), "8x1")


def _compile(work: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([MIRECC, "-O2", "-c", "scale.c", "-o", "scale.o", *extra],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def _stats(env: dict) -> dict:
    from mirecc.tu import stats
    from mirecc.taskapi.config import Config
    return stats.read(Config(cache_dir=env["MIRECC_CACHE_DIR"]))


def _project(tmp_path: Path, heads: Path, **extra: str) -> tuple[Path, dict]:
    """A work directory with scale.c and scale.h (a minute old, so the
    front end's files are not too new for a manifest) and its environment."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "scale.c").write_text(SOURCE)
    (work / "scale.h").write_text("#define FACTOR 2.0\n")
    past = time.time() - 60
    for name in ("scale.c", "scale.h"):
        os.utime(work / name, (past, past))
    env = isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CACHE_DIR=str(tmp_path / "cache"),
                       MIRECC_HEADS_DIR=str(heads), MIRECC_APPLY_LOOPS="1", **extra)
    return work, env


@pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")
def test_direct_hit_applies_the_same_decisions_without_a_front_end(tmp_path, heads_8x1):
    record = tmp_path / "record.jsonl"
    work, env = _project(tmp_path, heads_8x1, MIRECC_RECORD=str(record))
    past = time.time() - 60

    first = _compile(work, env, "-MD")
    assert first.returncode == 0 and first.stderr == ""
    first_object = (work / "scale.o").read_bytes()
    first_deps = (work / "scale.d").read_text()
    (work / "scale.o").unlink()
    (work / "scale.d").unlink()
    second = _compile(work, env, "-MD")
    assert second.returncode == 0 and second.stderr == ""
    stats = _stats(env)
    assert stats["tus.direct"] == 1 and stats.get("tus.split") == 1
    # the same decisions, applied: the same object; clang itself wrote the -MD file
    assert (work / "scale.o").read_bytes() == first_object
    assert (work / "scale.d").read_text() == first_deps
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["cache"] for line in lines] == ["miss", "hit"]
    assert lines[0]["decisions"] == lines[1]["decisions"]
    assert any(d["applied"] for d in lines[1]["decisions"])
    assert lines[0]["ir_sha256"] == lines[1]["ir_sha256"]

    # a header changes: the front end runs again (the bitcode differs)
    (work / "scale.h").write_text("#define FACTOR 3.0\n")
    os.utime(work / "scale.h", (past, past))
    assert _compile(work, env, "-MD").returncode == 0
    assert _stats(env)["tus.direct"] == 1
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines[2]["ir_sha256"] != lines[1]["ir_sha256"]

    # another command (a flag more) is another manifest
    assert _compile(work, env, "-MD", "-DUNUSED").returncode == 0
    assert _stats(env)["tus.direct"] == 1


@pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14")
def test_mmd_users_get_their_file_and_direct_mode(tmp_path, heads_8x1):
    """-MMD leaves system headers out of the user's dependency file; the
    manifest comes from the front end's own complete list, so a rebuild is
    still a direct hit, and the user's file is clang's."""
    work, env = _project(tmp_path, heads_8x1)
    (work / "scale.c").write_text("#include <stddef.h>\n" + SOURCE)
    past = time.time() - 60
    os.utime(work / "scale.c", (past, past))
    for _ in range(2):
        assert _compile(work, env, "-MMD").returncode == 0
    assert _stats(env)["tus.direct"] == 1
    manifest = next((tmp_path / "cache" / "direct").rglob("*.txt")).read_text()
    assert "stddef.h" in manifest
    ours = (work / "scale.d").read_text()
    subprocess.run([CLANG, "-O2", "-MMD", "-c", "scale.c", "-o", "scale.o"], cwd=work,
                   check=True)
    assert ours == (work / "scale.d").read_text() and "stddef.h" not in ours


def test_an_empty_results_line_is_the_json_modules():
    """The manifest writes an empty result without json: the same text."""
    from mirecc.tu.direct import result_json
    from mirecc.taskapi.records import TUResult

    empty = TUResult(None)
    assert result_json(empty) == json.dumps(empty.to_dict(), sort_keys=True)
    empty.add_reason("no-use", "no head has a use")
    assert result_json(empty) == json.dumps(empty.to_dict(), sort_keys=True)
    assert json.loads(result_json(empty))["reason_codes"] == ["no-use"]
