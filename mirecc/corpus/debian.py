"""Debian source packages built through mirecc's capture mode.

For each package: ``apt-get source`` into ``<out>/_work/debian/<pkg>``,
install the few apt packages its recipe names (never ``apt-get build-dep``:
it pulls hundreds of packages for most of these), then build it with its own
build system -- ``configure`` (``autoreconf -fi`` first when only
``configure.ac`` exists), CMake or a plain Makefile -- with ``CC=mirecc
CXX=mirecc++ CFLAGS=CXXFLAGS=-O2`` (``--opt-level`` sets the level) and
``MIRECC_CAPTURE_DIR`` set to a per-package staging directory, ``make -k`` so
one broken file does not stop the rest.  Every stage is time-boxed.  Whatever was captured, build failure
or not, is merged into the corpus; the package is then marked done.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import time
from pathlib import Path

from mirecc.corpus.store import Corpus, State
from mirecc.corpus.util import clean_env, run_logged, say, tail
from mirecc.frontend.toolchain import installed_driver

# name -> recipe.  build: auto|configure|cmake|make; args: configure/cmake
# arguments; configure_env: CC/CFLAGS only in the environment; make: make
# arguments; make_vars: CC and MYCFLAGS/OPTIMIZATION on make's command line;
# subdir_glob: where the build system is when not at the top;
# apt: extra apt packages it needs; files: {path: text} written into the tree
# first (headers debian/rules generates).
PACKAGES: dict[str, dict] = {
    "zlib": {"build": "configure", "args": ["--static"], "configure_env": True},
    "bzip2": {"build": "make", "make": ["libbz2.a", "bzip2"]},
    "lz4": {"build": "make", "make": ["lib", "lz4"]},
    "zstd": {"build": "make", "make": ["-C", "lib", "libzstd.a"]},
    "xz-utils": {"args": ["--disable-shared", "--disable-doc", "--disable-nls"]},
    "expat": {"subdir_glob": "expat", "args": ["--disable-shared", "--without-docbook"]},
    "jansson": {"build": "cmake", "args": ["-DJANSSON_BUILD_DOCS=OFF"]},
    # Debian's lua Makefile compiles through $(LIBTOOL), which debian/rules sets
    "lua5.4": {"build": "make", "make": ["-C", "src", "a", "lua", "MYLIBS=-ldl",
                                         "LIBTOOL=libtool --quiet"],
               "make_vars": True, "apt": ["libtool-bin"],
               "files": {"src/lua5.4-deb-multiarch.h":
                         '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n'}},
    "sqlite3": {"args": ["--disable-tcl", "--disable-shared"], "apt": ["tcl"]},
    "libpng1.6": {"args": ["--disable-shared"]},
    "libwebp": {"args": ["--disable-shared"]},
    "x264": {"args": ["--disable-asm", "--disable-cli", "--enable-static"],
             "configure_env": True},
    "libjpeg-turbo": {"build": "cmake", "args": ["-DWITH_SIMD=0", "-DENABLE_SHARED=0"]},
    # cfitsio and blis (in DESIGN.md's list) answer 404 for their tarballs on
    # this machine's mirror (2026-11-21): openblas and graphicsmagick instead
    "graphicsmagick": {"args": ["--disable-shared", "--without-x", "--without-perl",
                                "--without-magick-plus-plus", "--disable-openmp"]},
    "gsl": {"args": ["--disable-shared"]},
    "fftw3": {"args": ["--disable-shared", "--disable-fortran"]},
    "redis": {"build": "make", "make": ["MALLOC=libc", "BUILD_TLS=no"], "make_vars": True},
    "libxml2": {"args": ["--disable-shared", "--without-python", "--without-lzma",
                         "--without-icu"]},
    "jbigkit": {"build": "make", "make": ["-C", "libjbig"], "make_vars": True},
    "openblas": {"build": "make", "make": ["libs", "NOFORTRAN=1", "NO_SHARED=1",
                                           "USE_OPENMP=0", "USE_THREAD=0", "ONLY_CBLAS=1",
                                           "COMMON_OPT=-O2"]},
    "postgresql-15": {"args": ["--without-readline", "--without-icu", "--without-zlib"]},
    "nginx": {"args": ["--without-http_rewrite_module", "--without-http_gzip_module"],
              "configure_env": True},
    "python3.11": {"args": ["--without-ensurepip"]},
    "hdf5": {"args": ["--disable-shared", "--disable-fortran"]},
    "ngspice": {"args": ["--disable-shared", "--without-x"]},
}
DEFAULT_PACKAGES = list(PACKAGES)
DEFAULT_FLAGS = "-O2"


def _run_apt(packages: list[str], log: Path, timeout: float) -> int:
    missing = [p for p in packages if not Path(f"/var/lib/dpkg/info/{p}.list").exists()
               and not list(Path("/var/lib/dpkg/info").glob(f"{p}:*.list"))]
    if not missing:
        return 0
    return run_logged(["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y",
                       "--no-install-recommends", *missing],
                      cwd=Path("/"), env=clean_env(DEBIAN_FRONTEND="noninteractive"),
                      log=log, timeout=timeout)


def fetch(package: str, work: Path, log: Path, timeout: float) -> tuple[Path, str | None]:
    """Unpacked source tree (fetched once) and the package version."""
    pkg_dir = work / package / "src"
    trees = [p for p in pkg_dir.iterdir() if p.is_dir()] if pkg_dir.is_dir() else []
    if len(trees) != 1:
        if pkg_dir.exists():
            shutil.rmtree(pkg_dir)
        pkg_dir.mkdir(parents=True)
        rc = run_logged(["apt-get", "source", package], cwd=pkg_dir, env=clean_env(),
                        log=log, timeout=timeout)
        trees = [p for p in pkg_dir.iterdir() if p.is_dir()]
        if rc != 0 or len(trees) != 1:
            raise RuntimeError(f"apt-get source {package} failed (exit {rc}): {tail(log, 3)}")
    dsc = next(iter(pkg_dir.glob("*.dsc")), None)
    if (trees[0] / ".mirecc-built").exists() and dsc:
        # an earlier (interrupted) build touched this tree: unpack it afresh so
        # that make rebuilds, and captures, everything
        shutil.rmtree(trees[0])
        rc = run_logged(["dpkg-source", "-x", dsc.name], cwd=pkg_dir, env=clean_env(),
                        log=log, timeout=timeout)
        trees = [p for p in pkg_dir.iterdir() if p.is_dir()]
        if rc != 0 or len(trees) != 1:
            raise RuntimeError(f"dpkg-source -x {dsc.name} failed (exit {rc})")
    (trees[0] / ".mirecc-built").write_text("")
    version = None
    if dsc:
        m = re.search(r"^Version:\s*(\S+)", dsc.read_text(errors="replace"), re.M)
        version = m.group(1) if m else None
    return trees[0], version


def _patched_after_configure(src: Path) -> bool:
    """Debian's patches touched configure.ac or a Makefile.am after configure
    was generated: make would rerun an automake of another version and fail
    ("version mismatch"), so regenerate everything first."""
    try:
        generated = (src / "configure").stat().st_mtime
    except OSError:
        return True
    inputs = [src / "configure.ac", src / "configure.in", src / "Makefile.am"]
    return any(p.exists() and p.stat().st_mtime > generated + 1 for p in inputs)


def build(package: str, recipe: dict, tree: Path, capture: Path, log: Path, jobs: int,
          deadline: float, flags: str = DEFAULT_FLAGS) -> tuple[int, str]:
    """Build ``tree`` with CFLAGS/CXXFLAGS ``flags``; returns (exit status, stage reached)."""
    cc, cxx = installed_driver("mirecc"), installed_driver("mirecc++")
    env = clean_env(CC=cc, CXX=cxx, CFLAGS=flags, CXXFLAGS=flags,
                    MIRECC_CAPTURE_DIR=str(capture))

    def left() -> float:
        return deadline - time.monotonic()

    for rel, content in recipe.get("files", {}).items():
        (tree / rel).write_text(content)  # what debian/rules would have generated
    src = tree
    if recipe.get("subdir_glob"):
        cand = [p for p in tree.glob(recipe["subdir_glob"]) if p.is_dir()]
        if cand and not (tree / "configure").exists() and not (tree / "CMakeLists.txt").exists():
            src = cand[0]
    kind = recipe.get("build", "auto")
    if kind == "auto":
        if (src / "configure").exists() or (src / "configure.ac").exists() \
                or (src / "configure.in").exists():
            kind = "configure"
        elif (src / "CMakeLists.txt").exists():
            kind = "cmake"
        else:
            kind = "make"
    make = ["make", "-k", f"-j{jobs}"]
    if kind == "configure":
        if not (src / "configure").exists() or recipe.get("autoreconf") \
                or _patched_after_configure(src):
            rc = run_logged(["autoreconf", "-fi"], cwd=src, env=env, log=log, timeout=left())
            if rc:
                return rc, "autoreconf"
        args = ["./configure", *recipe.get("args", [])]
        if not recipe.get("configure_env"):
            # autoconf takes them as arguments; configure_env: hand-written configure
            # scripts that reject them and read CC/CFLAGS from the environment
            args += [f"CC={cc}", f"CXX={cxx}", f"CFLAGS={flags}", f"CXXFLAGS={flags}"]
        rc = run_logged(args, cwd=src, env=env, log=log, timeout=left())
        if rc:
            return rc, "configure"
        rc = run_logged(make + recipe.get("make", []), cwd=src, env=env, log=log, timeout=left())
        return rc, "make"
    if kind == "cmake":
        bdir = src / "_mirecc_build"
        rc = run_logged(["cmake", "-S", str(src), "-B", str(bdir), f"-DCMAKE_C_COMPILER={cc}",
                         f"-DCMAKE_CXX_COMPILER={cxx}", "-DCMAKE_BUILD_TYPE=None",
                         f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}",
                         *recipe.get("args", [])], cwd=src, env=env, log=log, timeout=left())
        if rc:
            return rc, "cmake"
        rc = run_logged(make + recipe.get("make", []), cwd=bdir, env=env, log=log,
                        timeout=left())
        return rc, "make"
    extra = [f"CC={cc}", f"CXX={cxx}", f"CFLAGS={flags}", f"CXXFLAGS={flags}"]
    if recipe.get("make_vars"):
        extra = [f"CC={cc}", f"CXX={cxx}", f"MYCFLAGS={flags}", f"OPTIMIZATION={flags}",
                 f"OPTFLAGS={flags}"]
    rc = run_logged(make + recipe.get("make", []) + extra, cwd=src, env=env, log=log,
                    timeout=left())
    return rc, "make"


def build_packages(corpus: Corpus, packages: list[str], *, jobs: int = 2,
                   timeout: float = 1200, progress=None, flags: str = DEFAULT_FLAGS) -> dict:
    state = State(corpus.root, "debian")
    work = corpus.root / "_work" / "debian"
    logs = corpus.root / "logs" / "debian"
    results = {}
    todo = [p for p in packages if not state.is_done(p)]
    bar = progress(total=len(packages), initial=len(packages) - len(todo), desc="debian",
                   unit="pkg") if progress else None
    for package in todo:
        if state.reload_done(package):
            continue                      # another process finished it meanwhile
        lock = _try_lock(work / f"{package}.lock")
        if lock is None:
            say(bar, f"debian {package}: being built by another process, skipped")
            continue
        try:
            results[package] = _one_package(corpus, state, package, work, logs, jobs,
                                            timeout, bar, flags)
        finally:
            lock.close()
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return results


def _try_lock(path: Path):
    """An exclusive lock on ``path`` (kept while the returned file is open),
    or None when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def _one_package(corpus: Corpus, state: State, package: str, work: Path, logs: Path,
                 jobs: int, timeout: float, bar, flags: str) -> dict:
    if bar:
        bar.set_postfix_str(package)
    say(bar, f"debian {package}: fetching and building")
    t0 = time.monotonic()
    deadline = t0 + timeout
    recipe = PACKAGES.get(package, {})
    log = logs / f"{package}.log"
    if log.exists():
        log.unlink()
    info: dict = {"package": package}
    capture = work / package / "capture"
    try:
        if recipe.get("apt"):
            _run_apt(recipe["apt"], log, min(600, timeout))
        tree, version = fetch(package, work, log, min(600, timeout))
        info["version"] = version
        if capture.exists():
            shutil.rmtree(capture)  # a resumed build starts over
        rc, stage = build(package, recipe, tree, capture, log, jobs, deadline, flags)
        info["status"] = "ok" if rc == 0 else ("timeout" if rc == 124 else "failed")
        if rc:
            info["failed_stage"] = stage
            info["exit_status"] = rc
            info["log_tail"] = tail(log, 4)
        info["merge"] = corpus.merge_capture(capture, "debian", package, base=tree,
                                             extra={"version": version})
    except KeyboardInterrupt:
        # stopped (Ctrl-C, SIGTERM): keep what was captured, build it again next time
        info.update(status="interrupted", seconds=round(time.monotonic() - t0, 1))
        if capture.exists():
            info["merge"] = corpus.merge_capture(capture, "debian", package,
                                                 extra={"version": info.get("version")})
        state.data.setdefault("interrupted", {})[package] = info
        state.save()
        say(bar, f"debian {package}: interrupted, {info.get('merge', {}).get('added', 0)} "
                 f"captured modules kept")
        raise
    except Exception as exc:  # one package never stops the run
        info["status"] = "error"
        info["error"] = str(exc)[:500]
        if capture.exists():
            info["merge"] = corpus.merge_capture(capture, "debian", package)
    info["seconds"] = round(time.monotonic() - t0, 1)
    info["log"] = str(log)
    if info["status"] == "error" and "apt-get source" in info.get("error", "") \
            and not info.get("merge", {}).get("added"):
        # not fetched (mirror, network): try again on the next run
        state.data.setdefault("fetch_failed", {})[package] = info
        state.save()
    else:
        state.data.get("fetch_failed", {}).pop(package, None)
        state.mark_done(package, info)
    say(bar, f"debian {package}: {info['status']} "
             f"(+{info.get('merge', {}).get('added', 0)} modules, {info['seconds']} s)")
    return info
