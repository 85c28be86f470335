"""Build real C projects with clang and with mirecc, run their tests, and
compare every object file byte for byte.

    .venv/bin/python benchmarks/real_projects.py [--work DIR]
                     [--projects zlib,lua5.4,cmake-sample]

Projects
--------
zlib
    Debian bookworm's source package (``apt-get source zlib``), built with
    its own ``./configure && make -j2`` (CFLAGS ``-O2 -g``); tests: its
    ``make test`` (static, shared and 64-bit-offset test programs).
lua5.4
    Debian bookworm's source package (patches applied by ``apt-get source``).
    Debian's ``src/Makefile`` compiles through libtool, builds PIC and non-PIC
    objects and a C++ copy of the library (``CXX`` compiling the ``.c``
    files), so the build follows ``debian/rules`` without debhelper:
    ``autoreconf`` + ``configure`` of ``debian/configure.ac`` to make a
    libtool for the chosen CC/CXX, the generated multiarch header, then
    ``make -j2 linux-readline LIBTOOL=... CC="$CC -std=gnu99" CXX=$CXX``.
    CFLAGS are Debian's own (``dpkg-buildflags``: ``-g -O2`` plus hardening
    flags), as the package's Makefile asks for them.  Needs autoconf,
    automake, libtool and libreadline-dev (installed with apt-get when
    missing and running as root).
    Lua's test suite is not part of the source package (it is a separate
    tarball on lua.org), so the tests are Debian's ``make test`` (runs
    ``lua5.4 -v``) plus the scripts in ``benchmarks/lua_tests/`` written for
    this benchmark: each checks results with assertions and prints a few
    values.  Each script runs with the built ``lua5.4``, and again after
    ``luac5.4`` compiled it to bytecode; both builds must print the same.
cmake-sample
    The repository's top-level CMakeLists.txt (the bundled benchmark
    programs), configured with
    ``-DCMAKE_TOOLCHAIN_FILE=$(mirecc --print-toolchain-file)``, built, and
    tested with ``ctest``; ``CMakeCache.txt`` must name mirecc / mirecc++ as
    the compilers and CMake must have identified them as Clang.  A reference
    build with ``-DCMAKE_C_COMPILER=<real clang>`` gives the objects to
    compare with.

The two compilers
-----------------
``CC=<real clang>`` is the clang mirecc itself resolves (asked with
``mirecc --explain=json -fsyntax-only``), e.g. ``/usr/bin/clang-14``;
``CC=<abs path of .venv/bin/mirecc>``.  ``MIRECC_*`` variables are removed
from the environment of both builds, so mirecc runs in its default mode,
except that no task heads are installed (``MIRECC_HEADS_DIR`` names an
empty place): then it must not change a single object.

Fair comparison
---------------
Debug info and ``__FILE__`` embed absolute paths (DW_AT_comp_dir, source
names), so two builds in different directories differ even with the same
compiler.  Both builds of a project therefore run in the same absolute
directory, ``DIR/build/<project>``: a fresh copy of the pristine unpacked
source is made there, configured, built and tested, and the whole tree is
then moved to ``DIR/results/<project>/<clang|mirecc>``; the second build
starts again from a fresh copy at the same path.  Nothing else differs
between the two builds but ``CC``/``CXX``.  The alternatives were rejected:
``-ffile-prefix-map`` would make the comparison depend on a remapping flag
(and hide any path that mirecc might leak into the output), and dropping
``-g`` would leave debug-info generation, half of what a compiler emits,
uncompared.

What is compared: every ELF relocatable file in the two trees (``*.o``,
zlib's PIC ``*.lo``, ...) and every member of every ``ar`` archive, keyed by
relative path (``lib.a(member)`` for members); they must be 100% identical,
and no object may exist in only one tree.  Linked outputs (executables,
shared libraries) are compared too and must be identical as well.

Output: a report on stdout, progress on stderr, logs in ``DIR/logs/``,
results as JSON in ``DIR/real_projects.json``.  The exit status is 0 only if
every project built, passed its tests and had identical objects.

Sources are fetched into ``DIR/src/<package>/`` once and reused.  When no
``deb-src`` line is configured, ``/etc/apt/sources.list.d/mirecc-deb-src.list``
is written (with the Signed-By keyring the existing Debian entry uses, since
apt refuses the same source with two different keyrings) and ``apt-get
update`` is run; this needs root.  ``apt-get source`` needs dpkg-dev.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirecc.util.machine import cpu_model
from mirecc.frontend.compiler import compiler_version
from mirecc.corpus.util import neutral_build_env, run_logged, tail

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO / ".work"
LUA_TESTS = Path(__file__).resolve().parent / "lua_tests"
DEB_SRC_LIST = Path("/etc/apt/sources.list.d/mirecc-deb-src.list")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
ALL_PROJECTS = ("zlib", "bzip2", "lua5.4", "cmake-sample")
ZLIB_CFLAGS = "-O2 -g"
BZIP2_CFLAGS = "-Wall -Winline -O2 -g -D_FILE_OFFSET_BITS=64"    # its Makefile's
LUA_BUILD_TOOLS = {"autoreconf": "autoconf", "aclocal": "automake", "libtoolize": "libtool"}

_T0 = time.monotonic()


class BenchError(Exception):
    """A stage failed; the message says which, and where its log is."""


class FetchError(BenchError):
    """The source package could not be fetched."""


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def spread(values: list[float], digits: int = 2) -> str:
    """``median (min-max)`` of timed runs."""
    import statistics
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def publish(text: str, md: Path | None) -> None:
    """Print a benchmark's page, and write it to ``md`` when asked."""
    print(text)
    if md:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(text)


# --------------------------------------------------------------------------
# running commands

# MIRECC_CC / MIRECC_CXX for every build once the reference compilers are
# known: both sides then use the very same clang even if a newer one appears
# on PATH while the benchmark runs (mirecc picks the newest by default).
_PINNED: dict[str, str] = {}


def pin_compilers(cc: str, cxx: str) -> None:
    # and no task heads: this benchmark checks the driver itself (with no
    # head deciding, not one object may change); a heads directory that
    # does not exist holds no heads and replaces the shipped ones
    _PINNED.update(MIRECC_CC=cc, MIRECC_CXX=cxx)
    if not _SIDE_ENV:   # --mirecc-env: the shipped heads decide, under those settings
        _PINNED["MIRECC_HEADS_DIR"] = os.path.join(tempfile.gettempdir(), "mirecc-no-heads")


# --mirecc-env: settings of the mirecc side only (compiler path -> variables)
_SIDE_ENV: dict[str, dict[str, str]] = {}
# --opt: the optimisation level replacing the projects' own -O2
_OPT = {"level": "-O2"}


def build_env(**extra: str) -> dict[str, str]:
    """The environment for builds: ours without MIRECC_* (default mode; only
    the pinned compilers, and the mirecc side's --mirecc-env settings) and
    without variables that would change a project's build from outside."""
    side = _SIDE_ENV.get(extra.get("CC", ""), {})
    return neutral_build_env(**{**_PINNED, **side, **extra})


def with_level(flags: str) -> str:
    """A project's flags (or their description) with -O2 replaced by --opt's level."""
    return re.sub(r"(?<![\w-])-O2\b", _OPT["level"], flags)


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], log_path: Path,
        stage: str, check: bool = True, timeout: float = 3600) -> int:
    """Run ``cmd`` with its output appended to ``log_path`` (the whole process
    group is killed on timeout); raise BenchError (with the log's tail) when
    it fails and ``check`` is set."""
    rc = run_logged(cmd, cwd=cwd, env=env, log=log_path, timeout=timeout)
    if rc != 0 and check:
        raise BenchError(f"{stage} failed (exit status {rc}); log: {log_path}\n"
                         f"{tail(log_path, 25)}")
    return rc


# --------------------------------------------------------------------------
# compilers

def find_mirecc(name: str = "mirecc") -> Path:
    """mirecc (or mirecc++) of the environment this script runs in: the bin
    directory of sys.executable (a venv's python), else the repo's .venv,
    else PATH."""
    candidates = [Path(sys.executable).parent / name, REPO / ".venv" / "bin" / name]
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    raise BenchError(f"cannot find {name} (looked in {', '.join(map(str, candidates))})")


def real_compiler(mirecc: Path, cxx: bool = False) -> str:
    """The clang that ``mirecc`` (or ``mirecc++``) drives, as the driver
    itself reports it."""
    lang = "c++" if cxx else "c"
    proc = subprocess.run([str(mirecc), "--explain=json", "-fsyntax-only", "-x", lang,
                           os.devnull], env=build_env(), capture_output=True, text=True)
    # The explanation of a query goes to stdout or (newer drivers, so as not
    # to mix with clang's own output) stderr.
    for stream in (proc.stdout, proc.stderr):
        try:
            return json.loads(stream)["compiler"]
        except (ValueError, KeyError, TypeError):
            continue
    raise BenchError(f"cannot ask {mirecc} which compiler it uses (exit status "
                     f"{proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")


@dataclass(frozen=True)
class Side:
    """One of the two builds."""
    name: str      # "clang" or "mirecc"
    cc: str
    cxx: str


def sides(mirecc: Path) -> list[Side]:
    """The reference build (the real clang/clang++ that mirecc resolves) and
    the mirecc build (mirecc/mirecc++ given by absolute path)."""
    mirecxx = mirecc.with_name("mirecc++")
    if not mirecxx.is_file():
        mirecxx = find_mirecc("mirecc++")
    reference = Side("clang", real_compiler(mirecc), real_compiler(mirecxx, cxx=True))
    pin_compilers(reference.cc, reference.cxx)
    return [reference, Side("mirecc", str(mirecc), str(mirecxx))]


# --------------------------------------------------------------------------
# fetching Debian source packages

def _sources_files() -> list[Path]:
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    return [f for f in files if f.is_file()]


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas, current, key = [], {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif line[0] in " \t" and key:
            current[key] += "\n" + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def _sources_texts():
    """(path, text) of each readable apt sources file."""
    for path in _sources_files():
        try:
            yield path, path.read_text(errors="replace")
        except OSError:
            continue


def deb_src_configured() -> bool:
    """True when some apt source has a deb-src entry."""
    for path, text in _sources_texts():
        if path.suffix == ".sources":
            for stanza in _deb822_stanzas(text):
                if "deb-src" in stanza.get("types", "").split() \
                        and stanza.get("enabled", "yes").lower() != "no":
                    return True
        elif any(line.split()[:1] == ["deb-src"] for line in text.splitlines()):
            return True
    return False


def _debian_signed_by() -> str | None:
    """The Signed-By keyring of the existing entry for the Debian mirror: the
    deb-src entry must use the same one, or apt refuses the sources list."""
    for path, text in _sources_texts():
        if path.suffix == ".sources":
            for stanza in _deb822_stanzas(text):
                if any(u.rstrip("/") == DEBIAN_MIRROR for u in stanza.get("uris", "").split()):
                    return stanza.get("signed-by")
        else:
            for line in text.splitlines():
                if line.split()[:1] == ["deb"] and DEBIAN_MIRROR in line:
                    m = re.search(r"signed-by=([^\s\]]+)", line)
                    return m.group(1) if m else None
    return None


def _codename() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    except OSError:
        pass
    return "bookworm"


def _apt_update(logs: Path) -> None:
    log("apt-get update")
    run(["apt-get", "update"], cwd=Path("/"), env=build_env(), log_path=logs / "apt.log",
        stage="apt-get update")


def ensure_deb_src(logs: Path) -> None:
    """Add a deb-src entry for the Debian mirror when none exists (root only)."""
    if deb_src_configured():
        return
    if os.geteuid() != 0:
        raise FetchError("no deb-src entry is configured in apt and this is not root: add "
                         f"'deb-src {DEBIAN_MIRROR} {_codename()} main' to "
                         f"{DEB_SRC_LIST} and run apt-get update")
    signed_by = _debian_signed_by()
    options = f"[signed-by={signed_by}] " if signed_by and "\n" not in signed_by else ""
    text = (f"# Added by mirecc's benchmarks/real_projects.py for `apt-get source`.\n"
            f"deb-src {options}{DEBIAN_MIRROR} {_codename()} main\n")
    log(f"no deb-src configured: writing {DEB_SRC_LIST}")
    DEB_SRC_LIST.write_text(text)
    try:
        _apt_update(logs)
    except BenchError as exc:
        DEB_SRC_LIST.unlink()  # do not leave apt broken
        raise FetchError(f"apt-get update failed after adding {DEB_SRC_LIST} "
                         f"(removed it again): {exc}") from None


def fetch_source(package: str, src_root: Path, *, configure_apt: bool = True,
                 logs: Path | None = None) -> Path:
    """The unpacked Debian source tree of ``package`` under ``src_root``,
    fetched with ``apt-get source`` unless already there.  With
    ``configure_apt`` false, apt's configuration is never touched (a missing
    deb-src entry is then a FetchError)."""
    pkg_dir = src_root / package
    marker = pkg_dir / "fetched.json"
    logs = logs or src_root.parent / "logs"
    if marker.is_file():
        try:
            tree = pkg_dir / json.loads(marker.read_text())["tree"]
            if tree.is_dir():
                log(f"{package}: source already in {tree}, not fetching")
                return tree
        except (ValueError, KeyError):
            pass
    if not shutil.which("dpkg-source"):
        raise FetchError("apt-get source needs dpkg-source: apt-get install dpkg-dev")
    if not shutil.which("apt-get"):
        raise FetchError("apt-get is not available (not a Debian system?)")
    if configure_apt:
        ensure_deb_src(logs)
    elif not deb_src_configured():
        raise FetchError("no deb-src entry is configured in apt")
    if pkg_dir.exists():
        shutil.rmtree(pkg_dir)
    pkg_dir.mkdir(parents=True)
    log(f"{package}: apt-get source {package}")
    fetch_log = logs / f"fetch-{package}.log"
    rc = run(["apt-get", "source", package], cwd=pkg_dir, env=build_env(),
             log_path=fetch_log, stage=f"apt-get source {package}", check=False)
    if rc != 0 and configure_apt and os.geteuid() == 0 \
            and re.search(r"Unable to find a source package|must put some 'deb-src'",
                          tail(fetch_log, 10)):
        _apt_update(logs)  # deb-src configured but its index never downloaded
        rc = run(["apt-get", "source", package], cwd=pkg_dir, env=build_env(),
                 log_path=fetch_log, stage=f"apt-get source {package}", check=False)
    if rc != 0:
        raise FetchError(f"apt-get source {package} failed (exit status {rc}); "
                         f"log: {fetch_log}\n{tail(fetch_log, 8)}")
    trees = [p for p in pkg_dir.iterdir() if p.is_dir()]
    if len(trees) != 1:
        raise FetchError(f"apt-get source {package} left {len(trees)} directories in {pkg_dir}")
    dsc = next(iter(pkg_dir.glob("*.dsc")), None)
    version = None
    if dsc:
        m = re.search(r"^Version:\s*(\S+)", dsc.read_text(errors="replace"), re.M)
        version = m.group(1) if m else None
    marker.write_text(json.dumps({"package": package, "tree": trees[0].name,
                                  "version": version}, indent=2) + "\n")
    return trees[0]


def source_version(tree: Path) -> str | None:
    try:
        return json.loads((tree.parent / "fetched.json").read_text()).get("version")
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------
# comparing build trees

def _elf_type(head: bytes) -> int | None:
    """e_type of an ELF header (1 relocatable, 2 executable, 3 shared), else None."""
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


def ar_members(data: bytes) -> list[tuple[str, bytes]]:
    """Members of an ``ar`` archive (GNU long names resolved; symbol tables
    skipped).  Returns (name, content) in archive order."""
    if not data.startswith(b"!<arch>\n"):
        return []
    members, names, pos = [], b"", 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode(errors="replace").rstrip()
        size = int(header[48:58].decode().strip() or 0)
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if name == "//":
            names = body
            continue
        if name.startswith("/") and name[1:].isdigit():
            start = int(name[1:])
            end = names.find(b"\n", start)
            name = names[start:end if end >= 0 else None].decode(errors="replace")
        members.append((name.rstrip("/"), body))
    return members


def inventory(root: Path, exclude: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """sha256 of every object ("objects": ELF relocatables, archive members)
    and linked output ("linked": executables, shared libraries) under root,
    keyed by relative path.  Symbolic links are not followed."""
    objects: dict[str, str] = {}
    linked: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fname in sorted(filenames):
            path = Path(dirpath) / fname
            rel = str(path.relative_to(root))
            if path.is_symlink() or not path.is_file() or rel.startswith(exclude):
                continue
            with open(path, "rb") as fh:
                head = fh.read(18)
            kind = _elf_type(head)
            if kind == 1:
                objects[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif kind in (2, 3):
                linked[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif head.startswith(b"!<arch>\n"):
                seen: dict[str, int] = {}
                for name, body in ar_members(path.read_bytes()):
                    n = seen[name] = seen.get(name, 0) + 1
                    key = f"{rel}({name})" + (f"#{n}" if n > 1 else "")
                    objects[key] = hashlib.sha256(body).hexdigest()
    return {"objects": objects, "linked": linked}


def compare(a: dict[str, str], b: dict[str, str]) -> dict:
    """Identical / differing / one-sided entries of two inventories."""
    common = sorted(set(a) & set(b))
    differing = [k for k in common if a[k] != b[k]]
    return {
        "total": len(set(a) | set(b)),
        "identical": len(common) - len(differing),
        "differing": differing,
        "only_clang": sorted(set(a) - set(b)),
        "only_mirecc": sorted(set(b) - set(a)),
    }


def all_identical(cmp: dict) -> bool:
    return (cmp["total"] > 0 and cmp["identical"] == cmp["total"])


def account_for_decisions(result: "ProjectResult", record: Path, build_dir: Path) -> None:
    """With mirecc's record of the build (one line per TU whose IR was
    read): the differing objects that had a decision applied (``explained``),
    and the checks: how many TUs were read, had a decision applied, or had
    decisions that left the object unchanged; every other object must be
    clang's."""
    lines = [json.loads(ln) for ln in record.read_text().splitlines()] \
        if record.is_file() else []
    applied_paths, applied_names, unchanged = set(), set(), 0
    for line in lines:
        decisions = line["decisions"]
        unchanged += any(d.get("same_as_compiler") for d in decisions)
        if any(d["applied"] for d in decisions) and line.get("output"):
            path = os.path.normpath(os.path.join(line["cwd"], line["output"]))
            applied_paths.add(os.path.relpath(path, build_dir))
            applied_names.add(os.path.basename(path))
    explained, unexplained = [], []
    for key in result.objects["differing"]:
        path, _, member = key.partition("(")
        hit = member.split(")")[0] in applied_names if member else path in applied_paths
        (explained if hit else unexplained).append(key)
    result.explained = explained
    result.checks["tus_read"] = len(lines)
    result.checks["tus_applied"] = sum(any(d["applied"] for d in ln["decisions"])
                                       for ln in lines)
    result.checks["tus_applied_but_unchanged"] = unchanged
    result.checks["objects_differing_with_a_decision"] = len(explained)
    result.checks["objects_differing_without_a_decision"] = unexplained or 0
    result.checks["every_undecided_object_is_clangs"] = not unexplained


# --------------------------------------------------------------------------
# results

@dataclass
class SideResult:
    side: str
    cc: str
    build_ok: bool = False
    build_s: float | None = None
    tests_ok: bool = False
    tests: str = ""                    # what ran, one line
    test_output_sha256: str | None = None
    error: str | None = None


@dataclass
class ProjectResult:
    project: str
    version: str | None = None
    flags: str = ""
    sides: list[SideResult] = field(default_factory=list)
    objects: dict | None = None
    linked: dict | None = None
    checks: dict = field(default_factory=dict)   # extra named checks -> bool / detail
    error: str | None = None
    compared: bool = True      # False: only the mirecc build was made
    # differing objects that mirecc's record shows a decision applied to
    # (--mirecc-env): the only objects allowed to differ
    explained: list = field(default_factory=list)


    @property
    def build_ok(self) -> bool:
        return bool(self.sides) and all(s.build_ok for s in self.sides)

    @property
    def tests_ok(self) -> bool:
        return bool(self.sides) and all(s.tests_ok for s in self.sides) \
            and self.checks.get("test_output_same", True) is not False

    @property
    def ok(self) -> bool:
        return (self.error is None and self.build_ok and self.tests_ok
                and (not self.compared
                     or self.objects is not None and self.objects["total"] > 0
                     and self.objects["identical"] + len(self.explained)
                     == self.objects["total"])
                and (self.linked is None or self.linked["total"] == 0
                     or all_identical(self.linked) or bool(self.explained))
                and all(v is not False for v in self.checks.values()))

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(build_ok=self.build_ok, tests_ok=self.tests_ok, ok=self.ok)
        return d


# --------------------------------------------------------------------------
# zlib

def build_zlib(tree: Path, side: Side, logs: Path) -> None:
    env = build_env(CC=side.cc, CFLAGS=with_level(ZLIB_CFLAGS))
    lp = logs / f"zlib-{side.name}-build.log"
    log(f"zlib [{side.name}]: ./configure")
    run(["./configure"], cwd=tree, env=env, log_path=lp, stage="zlib ./configure")
    log(f"zlib [{side.name}]: make -j2")
    run(["make", "-j2"], cwd=tree, env=env, log_path=lp, stage="zlib make")


def test_zlib(tree: Path, side: Side, logs: Path) -> tuple[str, str]:
    """Run ``make test``; returns (summary, output that must match across builds)."""
    lp = logs / f"zlib-{side.name}-test.log"
    log(f"zlib [{side.name}]: make test")
    start = lp.stat().st_size if lp.exists() else 0
    run(["make", "test"], cwd=tree, env=build_env(), log_path=lp, stage="zlib make test")
    output = lp.read_text(errors="replace")[start:]
    oks = [ln.strip().strip("*").strip() for ln in output.splitlines() if "test OK" in ln]
    if len(oks) < 3:
        raise BenchError(f"zlib make test printed {len(oks)} 'test OK' lines, expected 3; "
                         f"log: {lp}")
    outputs = "\n".join(ln for ln in output.splitlines()
                        if not ln.startswith(("$ ", "[exit", "make")))
    return f"make test: {', '.join(oks)}", outputs


# --------------------------------------------------------------------------
# bzip2

def build_bzip2(tree: Path, side: Side, logs: Path) -> None:
    """Its own Makefile (libbz2.a, bzip2, bzip2recover) with its own CFLAGS."""
    env = build_env(CC=side.cc)
    lp = logs / f"bzip2-{side.name}-build.log"
    log(f"bzip2 [{side.name}]: make -j2 libbz2.a bzip2 bzip2recover")
    run(["make", "-j2", f"CC={side.cc}", f"CFLAGS={with_level(BZIP2_CFLAGS)}",
         "libbz2.a", "bzip2", "bzip2recover"], cwd=tree, env=env, log_path=lp,
        stage="bzip2 make")


def test_bzip2(tree: Path, side: Side, logs: Path) -> tuple[str, str]:
    """Its ``make test``: compress and decompress the six sample files, cmp each."""
    lp = logs / f"bzip2-{side.name}-test.log"
    log(f"bzip2 [{side.name}]: make test")
    start = lp.stat().st_size if lp.exists() else 0
    run(["make", "test", f"CC={side.cc}", f"CFLAGS={with_level(BZIP2_CFLAGS)}"], cwd=tree,
        env=build_env(), log_path=lp, stage="bzip2 make test")
    output = lp.read_text(errors="replace")[start:]
    if "like you're in business" not in output or " differ" in output:
        raise BenchError(f"bzip2 make test: a sample did not round-trip; log: {lp}")
    samples = [ln for ln in output.splitlines() if ln.startswith("cmp ")]
    return f"make test: {len(samples)} round trips compared", "\n".join(samples)


# --------------------------------------------------------------------------
# lua5.4

def _ensure_lua_tools(logs: Path) -> None:
    missing = sorted({pkg for tool, pkg in LUA_BUILD_TOOLS.items() if not shutil.which(tool)})
    if not Path("/usr/include/readline/readline.h").is_file():
        missing.append("libreadline-dev")
    if not missing:
        return
    if os.geteuid() != 0:
        raise BenchError(f"lua5.4 needs {' '.join(missing)}: apt-get install {' '.join(missing)}")
    log(f"lua5.4: installing its build dependencies: {' '.join(missing)}")
    run(["apt-get", "install", "-y", "--no-install-recommends", *missing], cwd=Path("/"),
        env=build_env(DEBIAN_FRONTEND="noninteractive"), log_path=logs / "apt.log",
        stage=f"apt-get install {' '.join(missing)}")


def _dpkg_flag(name: str, cwd: Path | None = None) -> str:
    """Debian's build flag ``name``; its -ffile-prefix-map names ``cwd``."""
    return subprocess.run(["dpkg-buildflags", "--get", name], capture_output=True,
                          text=True, check=True, cwd=cwd).stdout.strip()


def _multiarch() -> str:
    try:
        return subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"{platform.machine()}-linux-gnu"


def lua_make_env(side: Side) -> dict[str, str]:
    """The environment of lua's make steps: the side's compiler (so that
    --mirecc-env settings reach mirecc) and, with --opt, that level appended
    to the flags src/Makefile asks dpkg-buildflags for (its -Os files keep
    their -Os, which comes after)."""
    extra = {"CC": side.cc}
    if _OPT["level"] != "-O2":
        extra.update(DEB_CFLAGS_APPEND=_OPT["level"], DEB_CXXFLAGS_APPEND=_OPT["level"])
    return extra


def build_lua(tree: Path, side: Side, logs: Path) -> None:
    """debian/rules' override_dh_auto_configure and override_dh_auto_build,
    without debhelper."""
    _ensure_lua_tools(logs)
    lp = logs / f"lua5.4-{side.name}-build.log"
    multiarch = _multiarch()
    # The header debian/rules generates (luaconf.h includes it).
    (tree / "src" / "lua5.4-deb-multiarch.h").write_text(
        "#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n"
        f"#define DEB_HOST_MULTIARCH \"{multiarch}\"\n#endif\n")
    lt = tree / "debian" / "libtool"
    lt.mkdir()
    shutil.copy2(tree / "debian" / "configure.ac", lt / "configure.ac")
    env = build_env(CC=side.cc, CXX=side.cxx, CFLAGS=with_level(_dpkg_flag("CFLAGS", tree)),
                    CXXFLAGS=with_level(_dpkg_flag("CXXFLAGS", tree)), CPPFLAGS=_dpkg_flag("CPPFLAGS", tree),
                    LDFLAGS=_dpkg_flag("LDFLAGS", tree), LIBTOOLIZE="libtoolize -i")
    log(f"lua5.4 [{side.name}]: autoreconf + configure of debian/configure.ac (libtool)")
    run(["autoreconf", "-f", "-i"], cwd=lt, env=env, log_path=lp, stage="lua5.4 autoreconf")
    run(["./configure"], cwd=lt, env=env, log_path=lp, stage="lua5.4 libtool configure")
    make_vars = ["MYLIBS=", f"LIBTOOL={lt / 'libtool'}", f"CC={side.cc} -std=gnu99",
                 f"CXX={side.cxx}", f"DEB_HOST_MULTIARCH={multiarch}"]
    # src/Makefile's rule "$(LUA_A): $(BASE_O)" names two libraries without
    # grouping them, so make -j2 runs the same two libtool links twice at
    # once, and they remove each other's .libs/liblua5.4.a (a race in the
    # package, seen here with both compilers).  So: compile every object with
    # -j2 (ALL=o: same target, same SYSCFLAGS), then link with -j1.
    log(f"lua5.4 [{side.name}]: make -j2 linux-readline ALL=o (objects)")
    run(["make", "-j2", "linux-readline", "ALL=o", *make_vars], cwd=tree,
        env=build_env(**lua_make_env(side)),
        log_path=lp, stage="lua5.4 make (objects)")
    log(f"lua5.4 [{side.name}]: make -j1 linux-readline (libraries and programs)")
    run(["make", "-j1", "linux-readline", *make_vars], cwd=tree,
        env=build_env(**lua_make_env(side)),
        log_path=lp, stage="lua5.4 make (link)")


def test_lua(tree: Path, side: Side, logs: Path) -> tuple[str, str]:
    lp = logs / f"lua5.4-{side.name}-test.log"
    lua, luac = tree / "src" / "lua5.4", tree / "src" / "luac5.4"
    env = build_env()
    log(f"lua5.4 [{side.name}]: make test + {len(list(LUA_TESTS.glob('*.lua')))} "
        f"scripts of benchmarks/lua_tests (source and luac bytecode)")
    run(["make", "test", f"LIBTOOL={tree / 'debian' / 'libtool' / 'libtool'}"], cwd=tree,
        env=env, log_path=lp, stage="lua5.4 make test")
    outputs, scripts = [], sorted(LUA_TESTS.glob("*.lua"))
    if not scripts:
        raise BenchError(f"no Lua test scripts in {LUA_TESTS}")
    scratch = tree / "mirecc-lua-tests"
    scratch.mkdir(exist_ok=True)
    for script in scripts:
        bytecode = scratch / (script.stem + ".luac")
        run([str(luac), "-o", str(bytecode), str(script)], cwd=scratch, env=env,
            log_path=lp, stage=f"luac5.4 {script.name}")
        for what, target in (("source", script), ("bytecode", bytecode)):
            proc = subprocess.run([str(lua), str(target)], cwd=scratch, env=env,
                                  capture_output=True, text=True, timeout=600)
            with open(lp, "a") as fh:
                fh.write(f"\n$ lua5.4 {target}\n{proc.stdout}{proc.stderr}"
                         f"[exit status {proc.returncode}]\n")
            if proc.returncode != 0 or f"OK {script.stem}" not in proc.stdout:
                raise BenchError(f"lua5.4 {script.name} ({what}) failed (exit status "
                                 f"{proc.returncode}): {proc.stderr.strip()[-400:]}; log: {lp}")
            outputs.append(f"== {script.name} ({what})\n{proc.stdout}")
    shutil.rmtree(scratch)
    return (f"make test (lua5.4 -v) + {len(scripts)} Lua scripts x (source, luac bytecode) "
            f"passed", "".join(outputs))


# --------------------------------------------------------------------------
# the two-build protocol

PROJECTS = {
    "zlib": ("zlib", build_zlib, test_zlib, f"CFLAGS={ZLIB_CFLAGS}"),
    "bzip2": ("bzip2", build_bzip2, test_bzip2, f"CFLAGS={BZIP2_CFLAGS}"),
    "lua5.4": ("lua5.4", build_lua, test_lua, "CFLAGS=$(dpkg-buildflags) (Debian's own)"),
}


def run_source_project(name: str, work: Path, mirecc: Path, src: Path | None = None,
                       *, configure_apt: bool = True) -> ProjectResult:
    """Fetch (if needed), build with both compilers in the same directory,
    test both, compare the trees."""
    package, build, test, flags = PROJECTS[name]
    logs = work / "logs"
    result = ProjectResult(name, flags=with_level(flags))
    try:
        if src is None:
            src = fetch_source(package, work / "src", configure_apt=configure_apt, logs=logs)
        result.version = source_version(src)
        build_dir = work / "build" / name
        if name == "lua5.4":
            # As src/Makefile computes them (in src/, hence the prefix map).
            src_dir = build_dir / "src"
            src_dir.mkdir(parents=True, exist_ok=True)
            result.flags = (f"CFLAGS={with_level(_dpkg_flag('CFLAGS', src_dir))} "
                            f"CPPFLAGS={_dpkg_flag('CPPFLAGS', src_dir)} (dpkg-buildflags, "
                            f"as src/Makefile asks) + -std=gnu99; -Os for llex/lparser/lcode")
        outputs = {}
        trees = {}
        record = None
        if _SIDE_ENV:
            record = work / "records" / f"{name}.jsonl"
            record.parent.mkdir(parents=True, exist_ok=True)
            record.unlink(missing_ok=True)
            for env in _SIDE_ENV.values():
                env["MIRECC_RECORD"] = str(record)
        for side in sides(mirecc):
            sr = SideResult(side.name, side.cc)
            result.sides.append(sr)
            for old in logs.glob(f"{name}-{side.name}-*.log"):
                old.unlink()
            if build_dir.exists():
                shutil.rmtree(build_dir)
            build_dir.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, build_dir, symlinks=True)
            started = time.monotonic()
            try:
                build(build_dir, side, logs)
                sr.build_ok = True
                sr.build_s = round(time.monotonic() - started, 2)
                sr.tests, outputs[side.name] = test(build_dir, side, logs)
                sr.tests_ok = True
                sr.test_output_sha256 = hashlib.sha256(
                    outputs[side.name].encode()).hexdigest()
            except BenchError as exc:
                sr.error = str(exc)
                log(f"{name} [{side.name}]: FAILED: {str(exc).splitlines()[0]}")
            dest = work / "results" / name / side.name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(build_dir), str(dest))
            trees[side.name] = dest
        if len(outputs) == 2:
            result.checks["test_output_same"] = outputs["clang"] == outputs["mirecc"]
        log(f"{name}: comparing objects of results/{name}/clang and results/{name}/mirecc")
        inv = {s: inventory(t) for s, t in trees.items()}
        result.objects = compare(inv["clang"]["objects"], inv["mirecc"]["objects"])
        result.linked = compare(inv["clang"]["linked"], inv["mirecc"]["linked"])
        if record is not None:
            account_for_decisions(result, record, build_dir)
    except BenchError as exc:
        result.error = str(exc)
        log(f"{name}: FAILED: {str(exc).splitlines()[0]}")
    return result


# --------------------------------------------------------------------------
# cmake-sample

def _cmake_cache(build_dir: Path) -> dict[str, str]:
    entries = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            m = re.match(r"^([A-Za-z_][\w.-]*):[A-Z]+=(.*)$", line)
            if m:
                entries[m.group(1)] = m.group(2)
    except OSError:
        pass
    return entries


def _cmake_compiler_ids(build_dir: Path) -> dict[str, str]:
    """CMake's identification of the C and C++ compilers."""
    ids = {}
    for lang in ("C", "CXX"):
        for f in build_dir.glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake"):
            text = f.read_text()
            for key in ("ID", "VERSION"):
                m = re.search(rf'set\(CMAKE_{lang}_COMPILER_{key} "([^"]*)"\)', text)
                if m:
                    ids[f"CMAKE_{lang}_COMPILER_{key}"] = m.group(1)
    return ids


def run_cmake_sample(work: Path, mirecc: Path, *, compare_with_clang: bool = True,
                     jobs: int = 2) -> ProjectResult:
    """Build REPO/CMakeLists.txt through mirecc's toolchain file, run ctest,
    check the cache; and (compare_with_clang) build it with the real clang in
    the same directory and compare objects."""
    logs = work / "logs"
    result = ProjectResult("cmake-sample", version="repo CMakeLists.txt",
                           flags="CMAKE_BUILD_TYPE=Release (-O3 -DNDEBUG)")
    build_dir = work / "build" / "cmake-sample"
    trees = {}
    try:
        toolchain = subprocess.run([str(mirecc), "--print-toolchain-file"], env=build_env(),
                                   capture_output=True, text=True)
        if toolchain.returncode != 0 or not toolchain.stdout.strip():
            raise BenchError(f"mirecc --print-toolchain-file failed: {toolchain.stderr.strip()}")
        toolchain_file = toolchain.stdout.strip()
        result.checks["toolchain_file"] = toolchain_file
        all_sides = sides(mirecc)
        if not compare_with_clang:
            all_sides = [s for s in all_sides if s.name == "mirecc"]
        for side in all_sides:
            sr = SideResult(side.name, side.cc)
            result.sides.append(sr)
            for old in logs.glob(f"cmake-sample-{side.name}-*.log"):
                old.unlink()
            lp = logs / f"cmake-sample-{side.name}.log"
            if build_dir.exists():
                shutil.rmtree(build_dir)
            build_dir.parent.mkdir(parents=True, exist_ok=True)
            if side.name == "mirecc":
                compilers = [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}"]
            else:
                compilers = [f"-DCMAKE_C_COMPILER={side.cc}", f"-DCMAKE_CXX_COMPILER={side.cxx}"]
            env = build_env()
            started = time.monotonic()
            try:
                log(f"cmake-sample [{side.name}]: cmake configure")
                run(["cmake", "-S", str(REPO), "-B", str(build_dir), *compilers], cwd=work,
                    env=env, log_path=lp, stage="cmake configure")
                log(f"cmake-sample [{side.name}]: cmake --build -j{jobs}")
                run(["cmake", "--build", str(build_dir), f"-j{jobs}"], cwd=work, env=env,
                    log_path=lp, stage="cmake --build")
                sr.build_ok = True
                sr.build_s = round(time.monotonic() - started, 2)
                log(f"cmake-sample [{side.name}]: ctest")
                start = lp.stat().st_size
                run(["ctest", "--test-dir", str(build_dir), "--output-on-failure"], cwd=work,
                    env=env, log_path=lp, stage="ctest")
                m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)",
                              lp.read_text()[start:])
                sr.tests = f"ctest: {m.group(0)}" if m else "ctest passed"
                sr.tests_ok = bool(m) and m.group(2) == "0" and int(m.group(3)) > 0
                if not sr.tests_ok:
                    sr.error = f"ctest ran no tests or some failed; log: {lp}"
                if side.name == "mirecc":
                    cache = _cmake_cache(build_dir)
                    ids = _cmake_compiler_ids(build_dir)
                    cc_path = cache.get("CMAKE_C_COMPILER", "")
                    cxx_path = cache.get("CMAKE_CXX_COMPILER", "")
                    result.checks["cache_c_compiler"] = cc_path
                    result.checks["cache_cxx_compiler"] = cxx_path
                    result.checks.update(ids)
                    result.checks["cache_names_mirecc"] = (
                        os.path.realpath(cc_path) == os.path.realpath(side.cc)
                        and os.path.realpath(cxx_path) == os.path.realpath(side.cxx))
                    result.checks["identified_as_clang"] = (
                        ids.get("CMAKE_C_COMPILER_ID") == "Clang"
                        and ids.get("CMAKE_CXX_COMPILER_ID") == "Clang")
            except BenchError as exc:
                sr.error = str(exc)
                log(f"cmake-sample [{side.name}]: FAILED: {str(exc).splitlines()[0]}")
            dest = work / "results" / "cmake-sample" / side.name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(build_dir), str(dest))
            trees[side.name] = dest
        if compare_with_clang:
            log("cmake-sample: comparing objects")
            inv = {s: inventory(t) for s, t in trees.items()}
            result.objects = compare(inv["clang"]["objects"], inv["mirecc"]["objects"])
            result.linked = compare(inv["clang"]["linked"], inv["mirecc"]["linked"])
        else:
            result.compared = False
    except BenchError as exc:
        result.error = str(exc)
        log(f"cmake-sample: FAILED: {str(exc).splitlines()[0]}")
    return result


# --------------------------------------------------------------------------
# report

def _ratio(cmp: dict | None) -> str:
    if cmp is None:
        return "-"
    return f"{cmp['identical']}/{cmp['total']}"


def report(results: list[ProjectResult], machine: dict) -> str:
    lines = [f"mirecc real-project check on {machine['cpu']} ({machine['cores']} cores), "
             f"{machine['clang']}", ""]
    header = f"{'project':<14}{'version':<22}{'build ok':<10}{'tests ok':<10}" \
             f"{'objects identical':<19}{'linked identical':<18}{'result'}"
    lines += [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.project:<14}{(r.version or '-'):<22}"
                     f"{'yes' if r.build_ok else 'NO':<10}{'yes' if r.tests_ok else 'NO':<10}"
                     f"{_ratio(r.objects):<19}{_ratio(r.linked):<18}"
                     f"{'OK' if r.ok else 'FAIL'}")
    lines.append("")
    for r in results:
        lines.append(f"{r.project}: flags {r.flags}")
        for s in r.sides:
            t = f"{s.build_s:.1f} s" if s.build_s is not None else "-"
            lines.append(f"  [{s.side}] CC={s.cc}: build {'ok' if s.build_ok else 'FAILED'} "
                         f"({t}); {s.tests or 'tests not run'}")
            if s.error:
                lines.append("    error: " + s.error.replace("\n", "\n    "))
        times = {s.side: s.build_s for s in r.sides if s.build_s}
        if len(times) == 2:
            lines.append(f"  build time mirecc / clang: {times['mirecc'] / times['clang']:.2f}x "
                         f"(one build each, configure included)")
        for what, cmp in (("objects", r.objects), ("linked outputs", r.linked)):
            if not cmp:
                continue
            for key in ("differing", "only_clang", "only_mirecc"):
                if cmp[key]:
                    shown = ", ".join(cmp[key][:10]) + (" ..." if len(cmp[key]) > 10 else "")
                    lines.append(f"  {what} {key.replace('_', ' in ')}: {len(cmp[key])}: {shown}")
        for key, value in r.checks.items():
            lines.append(f"  {key}: {value}")
        if r.error:
            lines.append("  error: " + r.error.replace("\n", "\n  "))
    return "\n".join(lines)


def machine_info(clang: str) -> dict:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "clang": compiler_version(clang),
            "python": platform.python_version(), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help=f"work directory (default: {DEFAULT_WORK})")
    parser.add_argument("--projects", default=",".join(ALL_PROJECTS),
                        help=f"comma-separated subset of {','.join(ALL_PROJECTS)}")
    parser.add_argument("--mirecc", type=Path, default=None,
                        help="mirecc to test (default: the one next to this Python)")
    parser.add_argument("--opt", default="-O2", choices=("-O1", "-O2", "-O3", "-Os", "-Oz"),
                        help="the level that replaces the projects' own -O2 (default: -O2)")
    parser.add_argument("--mirecc-env", action="append", default=[], metavar="VAR=VALUE",
                        help="a setting for the mirecc build (repeatable), e.g. "
                             "MIRECC_APPLY_LOOPS=1: the shipped heads then decide, every TU "
                             "is recorded, and only objects with a decision applied may differ")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report here (e.g. docs/results/packages-O3-loops.md)")
    parser.add_argument("--fetch-only", action="store_true",
                        help="only fetch the source packages (adding a deb-src entry "
                             "to apt when root and none exists), then stop")
    args = parser.parse_args(argv)
    _OPT["level"] = args.opt
    if args.mirecc_env:
        settings = dict(kv.split("=", 1) for kv in args.mirecc_env)
        # a cold cache: the build pays for every decision
        settings["MIRECC_CACHE_DIR"] = str((args.work / f"cache-{os.getpid()}").absolute())
        _SIDE_ENV["pending"] = settings
    projects = [p.strip() for p in args.projects.split(",") if p.strip()]
    unknown = [p for p in projects if p not in ALL_PROJECTS]
    if unknown or not projects:
        parser.error(f"unknown project(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(ALL_PROJECTS)}")
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    if args.fetch_only:
        try:
            for name in projects:
                if name != "cmake-sample":
                    log(f"fetched {name}: {fetch_source(name, work / 'src')}")
        except FetchError as exc:
            print(f"real_projects: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        mirecc = args.mirecc.absolute() if args.mirecc else find_mirecc()
        clang = real_compiler(mirecc)
    except BenchError as exc:
        print(f"real_projects: {exc}", file=sys.stderr)
        return 2
    log(f"mirecc: {mirecc}; real compiler: {clang}; work directory: {work}")
    if "pending" in _SIDE_ENV:
        settings = _SIDE_ENV.pop("pending")
        _SIDE_ENV[str(mirecc)] = settings
        mirecxx = mirecc.with_name("mirecc++")
        _SIDE_ENV[str(mirecxx if mirecxx.is_file() else find_mirecc("mirecc++"))] = settings
    results = []
    for name in projects:
        log(f"=== {name}")
        if name == "cmake-sample":
            results.append(run_cmake_sample(work, mirecc))
        else:
            results.append(run_source_project(name, work, mirecc))
    machine = machine_info(clang)
    text = report(results, machine)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["benchmarks/real_projects.py", *(argv if argv is not None
                                                              else sys.argv[1:])])
        args.out.write_text(f"# Real packages built with clang and with mirecc\n\n"
                            f"Command: `.venv/bin/python {command}`\n\n```\n{text}\n```\n")
    out = work / "real_projects.json"
    out.write_text(json.dumps({"machine": machine, "mirecc": str(mirecc),
                               "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "results": [r.to_dict() for r in results]}, indent=2) + "\n")
    print(f"\nJSON: {out}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
