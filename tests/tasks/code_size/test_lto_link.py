"""Code size at an LTO link (:mod:`mirecc.tasks.code_size.link`): a link-only
call with -flto at -Oz is linked again with the machine outliner in the LTO
back end, and the output with fewer loadable bytes is kept; the user's link
wins ties and is then clang's byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envs import isolated_env
from size_helpers import OUTLINER_MISCOMPILES

CLANG = "/usr/bin/clang-14"
MIRECC = str(Path(sys.executable).with_name("mirecc"))

# straight-line blocks repeated in 24 functions: the outliner halves the code
REPEATED = "struct S { int v[16]; };\n" + "\n".join(
    f"__attribute__((noinline)) void f{i}(struct S *p, struct S *q) {{ "
    + " ".join(f"p->v[{k}] = p->v[{k + 1}] * {k + 3} + q->v[{k}];" for k in range(12))
    + f" p->v[15] += {i}; }}" for i in range(24))
# calls with a few arguments: the outliner's calls cost more than they save
CALLS = "__attribute__((noinline)) int g(int x, int y, int z) { return x * 31 + y * 7 + z; }\n" \
    + "\n".join(f"__attribute__((noinline)) int f{i}(struct S *p, struct S *q) {{ int a = "
                f"p->v[0], b = q->v[1], s = {i}; s += g(a, b, 1); s += g(b, a, 2); "
                f"s ^= g(s, a, 4); return s * a + b; }}" for i in range(24))
MAIN = ("#include <stdio.h>\nstruct S { int v[16]; };\n"
        + "".join(f"void f{i}(struct S *, struct S *);\n" for i in range(24))
        + "int main(int argc, char **argv) { struct S x = {{argc}}, y = {{2, argc}};\n"
        + "".join(f"  f{i}(&x, &y);\n" for i in range(24))
        + '  printf("%d %d\\n", x.v[0], x.v[15]); return 0; }\n')


@pytest.fixture(scope="module")
def lto_objects(tmp_path_factory):
    """Bitcode objects (clang -Oz -flto -c) of both programs."""
    d = tmp_path_factory.mktemp("lto")
    (d / "repeated.c").write_text(REPEATED)
    (d / "calls.c").write_text("struct S { int v[16]; };\n" + CALLS)
    (d / "main.c").write_text(MAIN)
    for name in ("repeated", "calls", "main"):
        subprocess.run([CLANG, "-Oz", "-flto", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=d,
                       check=True)
    return d


def _env(tmp_path: Path, **extra) -> dict:
    return isolated_env(tmp_path, MIRECC_CC=CLANG, MIRECC_CACHE_DIR=str(tmp_path / "cache"),
                        **extra)


def _link(cmd: str, objs: Path, out: Path, env=None, flags=("-Oz", "-flto")):
    """Link main.o with repeated.o or calls.o (as ``out``'s name says)."""
    other = objs / ("repeated.o" if "repeated" in out.name else "calls.o")
    return subprocess.run([cmd, *flags, str(objs / "main.o"), str(other), "-o", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)


def _stats(env: dict) -> dict:
    from mirecc.tu import stats as counters
    from mirecc.taskapi.config import Config
    return counters.read(Config(cache_dir=env["MIRECC_CACHE_DIR"]))


def _loadable(path: Path) -> int:
    from mirecc.tasks.code_size.build import object_sizes
    return object_sizes(str(path))[0]


def _output(path: Path) -> str:
    return subprocess.run([str(path), "x"], capture_output=True, text=True, check=True).stdout


def test_an_lto_link_keeps_the_outliners_smaller_program(tmp_path, lto_objects):
    env = _env(tmp_path)
    plain, ours = tmp_path / "repeated-clang", tmp_path / "repeated-mirecc"
    assert _link(CLANG, lto_objects, plain).returncode == 0
    run = _link(MIRECC, lto_objects, ours, env)
    assert run.returncode == 0, run.stderr
    assert _loadable(ours) < _loadable(plain)
    assert _output(ours) == _output(plain)
    counted = _stats(env)
    assert counted["links.code-size"] == 1 == counted["links.code-size.improved"]
    assert "links.code-size.failed" not in counted
    text = subprocess.run([MIRECC, "--explain", "-Oz", "-flto", str(lto_objects / "main.o"),
                           str(lto_objects / "repeated.o"), "-o", str(tmp_path / "again")],
                          env=env, capture_output=True, text=True, timeout=300).stdout
    assert "code-size: linked again" in text and "* " in text and "machine-outliner" in text
    assert (tmp_path / "again").read_bytes() == ours.read_bytes()   # deterministic


def test_an_lto_link_the_outliner_would_grow_is_clangs(tmp_path, lto_objects):
    env = _env(tmp_path)
    plain, ours = tmp_path / "calls-clang", tmp_path / "calls-mirecc"
    assert _link(CLANG, lto_objects, plain).returncode == 0
    assert _link(MIRECC, lto_objects, ours, env).returncode == 0
    assert ours.read_bytes() == plain.read_bytes()
    counted = _stats(env)
    assert counted["links.code-size"] == 1 and "links.code-size.improved" not in counted


def test_an_lto_link_the_outliner_miscompiles_or_that_is_stripped_is_clangs(tmp_path):
    """The outliner's program is smaller but miscompiled (LLVM 14's x86
    outliner): the user's link stands, byte for byte, counted as failed.
    A stripped program has no symbols to check: the user's link stands."""
    (tmp_path / "p.c").write_text(OUTLINER_MISCOMPILES)
    subprocess.run([CLANG, "-Oz", "-flto", "-c", "p.c", "-o", "p.o"], cwd=tmp_path, check=True)
    (tmp_path / "r.c").write_text(REPEATED + "\n" + MAIN.replace("struct S { int v[16]; };\n",
                                                                 "", 1))
    subprocess.run([CLANG, "-Oz", "-flto", "-c", "r.c", "-o", "r.o"], cwd=tmp_path, check=True)
    for obj, flags, why in (("p.o", (), "miscompiled: the machine outliner ended "),
                            ("r.o", ("-s",), "no symbol table")):
        (tmp_path / f"env-{obj}").mkdir()
        env = _env(tmp_path / f"env-{obj}")
        links = [subprocess.run([cc, "-Oz", "-flto", *flags, obj, "-o", f"{obj}-{name}"],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)
                 for cc, name in ((CLANG, "clang"), (MIRECC, "mirecc"))]
        assert [p.returncode for p in links] == [0, 0], links[1].stderr
        ours = tmp_path / f"{obj}-mirecc"
        assert ours.read_bytes() == (tmp_path / f"{obj}-clang").read_bytes()
        counted = _stats(env)
        assert counted["links.code-size"] == 1 == counted["links.code-size.failed"]
        assert "links.code-size.improved" not in counted
        text = subprocess.run([MIRECC, "--explain", "-Oz", "-flto", *flags, obj, "-o", "again"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300).stdout
        assert why in text
    assert subprocess.run([str(tmp_path / "p.o-mirecc")], capture_output=True, text=True,
                          check=True).stdout == "0 wrong\n"


@pytest.mark.parametrize("flags, setting", [
    (("-Oz", "-flto"), {"MIRECC_SIZE_LINK": "0"}),       # the step off
    (("-Oz", "-flto"), {"MIRECC_SIZE_SEARCH": "0"}),     # code size off
    (("-O2", "-flto"), {}),                              # a level the task does not take
])
def test_links_the_step_does_not_take_are_clangs(tmp_path, lto_objects, flags, setting):
    env = _env(tmp_path, **setting)
    plain, ours = tmp_path / "repeated-clang", tmp_path / "repeated-mirecc"
    clang = _link(CLANG, lto_objects, plain, flags=flags)
    mine = _link(MIRECC, lto_objects, ours, env, flags=flags)
    assert (clang.returncode, mine.returncode) == (0, 0), mine.stderr
    assert ours.read_bytes() == plain.read_bytes()
    assert not any(k.startswith("links.") for k in _stats(env))


def test_a_failing_lto_link_fails_as_clangs_and_builds_nothing(tmp_path, lto_objects):
    env = _env(tmp_path)
    cmd = ["-Oz", "-flto", str(lto_objects / "main.o"), "-o", str(tmp_path / "broken")]
    clang = subprocess.run([CLANG, *cmd], capture_output=True, text=True)
    mine = subprocess.run([MIRECC, *cmd], env=env, capture_output=True, text=True, timeout=300)
    assert clang.returncode != 0 and mine.returncode == clang.returncode
    assert "undefined reference" in mine.stderr
    assert not (tmp_path / "broken").exists()
    assert not list(tmp_path.glob(".broken*"))
    assert not any(k.startswith("links.") for k in _stats(env))


def test_the_last_lto_flag_decides():
    from mirecc.tasks.code_size.link import lto_link
    assert lto_link(["-Oz", "-flto=thin", "a.o"]) and lto_link(["-fno-lto", "-flto"])
    assert not lto_link(["-Oz", "-flto", "-fno-lto"]) and not lto_link(["-Oz", "a.o"])


def test_the_candidate_link_beside_the_users_gives_the_same_program(tmp_path, lto_objects):
    """size_jobs 2 (no jobserver): the outliner's link runs beside the
    user's; the kept program is the one linked after it."""
    after = tmp_path / "repeated-after"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _link(MIRECC, lto_objects, after, _env(tmp_path / "a")).returncode == 0
    beside = tmp_path / "repeated-beside"
    env = _env(tmp_path / "b", MIRECC_SIZE_JOBS="2")
    assert _link(MIRECC, lto_objects, beside, env).returncode == 0
    assert beside.read_bytes() == after.read_bytes()
    assert _stats(env)["links.code-size.improved"] == 1
    assert not list(tmp_path.glob(".repeated*"))


def test_a_failing_candidate_link_leaves_the_users(tmp_path, lto_objects):
    """A candidate link that fails (here its command names a missing
    object) leaves the user's output, counted as failed."""
    from mirecc.tasks.code_size import link

    calls = []

    def own_link():
        calls.append(1)
        return subprocess.run([CLANG, "-Oz", "-flto", str(lto_objects / "main.o"),
                               str(lto_objects / "repeated.o"), "-o", str(out)]).returncode

    out = tmp_path / "prog"
    from mirecc.taskapi.config import Config
    # a command that cannot link: the candidate fails, the user's output stands
    rc, counts, done = link.LINK.link([CLANG, "-Oz", "-flto", "/nonexistent.o"], str(out),
                                      Config(), own_link)
    assert rc == 0 and calls == [1] and out.is_file()
    assert counts == {"links.code-size": 1, "links.code-size.failed": 1}
    assert done.winner == "your link" and "the link failed" in done.skipped["machine-outliner"]
