"""A real, non-editable ``pip install`` of this checkout into a fresh virtual
environment, used from another working directory.

The checkout's tracked files are copied first, so the build never writes into the working tree.
The venv is created with ``--system-site-packages``; the dependencies
(llvmlite, PyYAML) come from the environment running the tests, through a
path entry added after the install.  ``--no-deps --no-build-isolation``
avoids downloads when the build backend's requirements (setuptools and
wheel) are at hand; otherwise pip builds in isolation, fetching them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

CLANG = "/usr/bin/clang-14"
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(not os.access(CLANG, os.X_OK), reason="needs clang-14"),
    pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                       reason="needs a git checkout to copy"),
]

SOURCE = "int f(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n"

NETWORK_TROUBLE = ("Could not find a version", "No matching distribution",
                   "Failed to establish a new connection", "Temporary failure in name resolution",
                   "Network is unreachable", "ProxyError")


def copy_checkout(dest: Path) -> Path:
    # Tracked files, as a clone would have them (with their working-tree edits).
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"],
                            capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if not src.is_file() or rel.startswith("tests/"):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def can_build_without_isolation(python: Path) -> bool:
    """setuptools' bdist_wheel: built in since 70.1, from 'wheel' before."""
    probe = ("import setuptools, importlib.util, sys\n"
             "v = tuple(int(x) for x in setuptools.__version__.split('.')[:2])\n"
             "sys.exit(0 if v >= (70, 1) or importlib.util.find_spec('wheel') else 1)\n")
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, work dir, env) with mirecc pip-installed from a copy of the checkout."""
    root = tmp_path_factory.mktemp("install")
    src = copy_checkout(root / "src")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True)
    py = venv_python(venv)
    cmd = [str(py), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
           "--no-input", "-q"]
    if can_build_without_isolation(py):
        cmd.append("--no-build-isolation")
    proc = subprocess.run([*cmd, str(src)], cwd=root, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0 and any(s in proc.stderr for s in NETWORK_TROUBLE):
        pytest.skip("building needs setuptools/wheel from the package index, "
                    "which cannot be reached: " + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Dependencies from the running environment, after the install so that pip
    # did not see (and try to replace) the editable mirecc living there.
    purelib = sysconfig.get_paths()["purelib"]
    venv_purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    Path(venv_purelib, "zz-test-deps.pth").write_text(purelib + "\n")
    work = root / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MIRECC_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"MIRECC_CC": CLANG, "XDG_CACHE_HOME": str(root / "xdg-cache"),
                "HOME": str(root / "home"), "LC_ALL": "C",
                "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    return venv, work, env


def run(args: list[str], cwd: Path, env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, **kw)


def test_package_comes_from_the_venv_with_its_data(installed):
    venv, work, env = installed
    probe = (
        "import json, mirecc\n"
        "from importlib import resources\n"
        "root = resources.files('mirecc')\n"
        "print(json.dumps({'file': mirecc.__file__, 'version': mirecc.__version__,\n"
        "  'template': root.joinpath('data/toolchain.cmake.in').is_file(),\n"
        "  'programs': sorted(p.name for p in root.joinpath('programs').iterdir()\n"
        "                     if p.name.endswith('.c')),\n"
        "  'heads_readme': root.joinpath('heads/README.md').is_file(),\n"
        "  'plugin_source': root.joinpath('passplugin/CMakeLists.txt').is_file()}))\n")
    proc = run([str(venv_python(venv)), "-c", probe], work, env)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert Path(info["file"]).resolve().is_relative_to(venv.resolve())
    assert info["template"] and info["heads_readme"]
    assert info["plugin_source"]  # the loop-hints plugin is built from it on first use
    expected = sorted(p.name for p in (REPO / "benchmarks" / "programs").glob("*.c"))
    assert expected and info["programs"] == expected
    for script in ("mirecc", "mirecc++"):
        assert (venv / "bin" / script).is_file()


def test_version(installed):
    venv, work, env = installed
    from mirecc import __version__

    proc = run(["mirecc", "--mirecc-version"], work, env)
    assert proc.returncode == 0 and proc.stdout.strip() == f"mirecc {__version__}"
    # --version is clang's question: a drop-in clang answers it as clang does.
    proc = run(["mirecc", "--version"], work, env)
    ref = run([CLANG, "--version"], work, env)
    assert proc.returncode == 0 and proc.stdout == ref.stdout


def test_print_toolchain_file_names_the_venvs_mirecc(installed):
    venv, work, env = installed
    proc = run(["mirecc", "--print-toolchain-file"], work, env)
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    assert path.is_file()
    assert path.is_relative_to(Path(env["XDG_CACHE_HOME"]))
    text = path.read_text()
    assert str(venv / "bin" / "mirecc++") in text
    assert str(venv / "bin" / "mirecc") in text
    assert "@MIRECC" not in text
    assert str(REPO) not in text
    # Asked again (also by the full path), the same file.
    again = run([str(venv / "bin" / "mirecc"), "--print-toolchain-file"], work, env)
    assert again.stdout == proc.stdout


def test_compiles_and_explains(installed):
    venv, work, env = installed
    (work / "x.c").write_text(SOURCE)
    (work / "no-heads").mkdir(exist_ok=True)
    no_heads = {**env, "MIRECC_HEADS_DIR": str(work / "no-heads")}
    proc = run(["mirecc", "-O2", "-c", "x.c", "-o", "x.o"], work, no_heads)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    subprocess.run([CLANG, "-O2", "-c", "x.c", "-o", "ref.o"], cwd=work, check=True)
    assert (work / "x.o").read_bytes() == (work / "ref.o").read_bytes()
    # The ML path too (llvmlite from the running environment), with the
    # installed package's heads: the loop-vectorize head sees the loop.
    proc = run(["mirecc", "--explain=json", "-O2", "-c", "x.c", "-o", "x.o"], work,
               {**env, "MIRECC_SERVER": "0"})
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    [tu] = json.loads(proc.stdout)["translation_units"]
    assert tu["seen"]["loops"] == 1
    assert [d["task"] for d in tu["decisions"]] == ["loop-vectorize"], tu
    (work / "y.cpp").write_text("int g(int x) { return x * 3; }\n")
    proc = run(["mirecc++", "-O2", "-c", "y.cpp", "-o", "y.o"], work, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("make") is None,
                    reason="needs cmake and make")
def test_cmake_project_builds_with_the_toolchain_file(installed):
    venv, work, env = installed
    proj = work / "proj"
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(demo C CXX)\n"
        "add_executable(demo main.c sum.cpp)\n")
    (proj / "main.c").write_text("int sum(int *a, int n);\n"
                                 "int main(void) { int a[4] = {1, 2, 3, 4}; "
                                 "return sum(a, 4) == 10 ? 0 : 1; }\n")
    (proj / "sum.cpp").write_text('extern "C" int sum(int *a, int n) '
                                  "{ int s = 0; for (int i = 0; i < n; i++) s += a[i]; "
                                  "return s; }\n")
    toolchain = run(["mirecc", "--print-toolchain-file"], work, env).stdout.strip()
    build = work / "cmake-build"
    env = {**env, "MIRECC_CXX": "/usr/bin/clang++-14", "MIRECC_CAPTURE_DIR": str(work / "cap")}
    proc = run(["cmake", "-S", str(proj), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
                "-DCMAKE_BUILD_TYPE=Release"], work, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cache = (build / "CMakeCache.txt").read_text()
    entries = dict(line.split("=", 1) for line in cache.splitlines() if "=" in line
                   and not line.startswith(("#", "//")))
    compilers = {k.split(":")[0]: v for k, v in entries.items()
                 if k.split(":")[0] in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER")}
    assert compilers == {"CMAKE_C_COMPILER": str(venv / "bin" / "mirecc"),
                         "CMAKE_CXX_COMPILER": str(venv / "bin" / "mirecc++")}
    proc = run(["cmake", "--build", str(build)], work, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mirecc: warning" not in proc.stdout + proc.stderr
    assert subprocess.run([str(build / "demo")]).returncode == 0
    sources = {Path(json.loads(line)["source"]).name
               for line in (work / "cap" / "manifest.jsonl").read_text().splitlines()}
    assert {"main.c", "sum.cpp"} <= sources


def test_toolchain_paths_are_escaped_for_cmake():
    from mirecc.frontend.toolchain import _cmake_escape

    assert _cmake_escape("/opt/venv/bin/mirecc") == "/opt/venv/bin/mirecc"
    assert _cmake_escape('/a "b"/${HOME}\\x') == '/a \\"b\\"/\\${HOME}\\\\x'


def test_mire_starts_from_the_install(installed):
    """``mire bench`` builds its parser from every task's offline module: a
    sub-package missing from the install breaks the main job."""
    venv, work, env = installed
    proc = run([str(venv / "bin" / "mire"), "bench", "--help"], work, env)
    assert proc.returncode == 0, proc.stderr
    assert "numa" in proc.stdout


def test_every_package_of_the_checkout_is_installed(installed):
    """setup.py finds the packages: every package folder of the checkout is
    in the install (a new task folder needs no line in setup.cfg)."""
    venv, _work, _env = installed
    site = next((venv / "lib").glob("python3*/site-packages"))
    on_disk = {p.parent.relative_to(REPO) for p in (REPO / "mirecc").rglob("__init__.py")}
    assert len(on_disk) > 15
    missing = sorted(str(rel) for rel in on_disk if not (site / rel / "__init__.py").is_file())
    assert missing == []
    for data in ("heads/README.md", "passplugin/mirecc_plugin.h", "programs/saxpy.c"):
        assert (site / "mirecc" / data).is_file(), data
