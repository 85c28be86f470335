"""Find the real clang that mirecc drives, deterministically.

Order:

1. the config's ``cc``/``cxx`` (or ``MIRECC_CC``/``MIRECC_CXX``);
2. the compiler setup configured for this installation: ``scripts/setup.sh``
   writes ``<sys.prefix>/etc/mirecc/compilers`` (``cc=...``, ``cxx=...``
   lines; ``MIRECC_SITE_FILE`` names another file);
3. the newest clang on PATH whose OpenMP runtime is installed (``omp.h`` in
   its resource directory), else the newest clang on PATH.  A newer clang
   without its runtime (Debian's clang-19 beside libomp-14-dev) would fail
   ``-fopenmp`` builds that the older one compiles.

"Newest" is read from the name (``clang-19``) or from where an unversioned
``clang`` link points (``/usr/lib/llvm-19/bin/clang``), so no subprocess is
spent on it.  mirecc itself is never picked, even when a directory on PATH
makes ``clang`` point at it.  :func:`find_compiler` says where its choice
came from; ``mirecc --explain`` prints it.

Also how a driver hands a call to the compiler it found: one line on
stderr (:func:`say`), the process replaced by the compiler
(:func:`exec_command`: exit code, signals and streams are then the
compiler's), or the compiler run as a child when the driver must act after
it (:func:`run_command`).

Runs on every call, so only ``os`` and ``sys`` are imported (``re`` alone
would cost several milliseconds per compile).
"""

from __future__ import annotations

import os
import sys


def say(kind: str, message: str, who: str = "mirecc") -> None:
    """``who: kind: message`` on stderr, always exactly one line."""
    message = " ".join(message.split())
    sys.stderr.write(f"{who}: {kind}: {message}\n")
    sys.stderr.flush()


#: False in the compile server's call (:mod:`mirecc.driver.serve`): the
#: compiler runs as a child whose status the call answers, on the client's
#: descriptors
EXEC_REPLACES = True


def exec_command(cmd: list[str]) -> int:
    """Replace this process with ``cmd``: exit code, signals, stdin, stdout
    and stderr are then exactly the compiler's.  Returns 127 (with one line
    saying why) only when it cannot be run.  In the compile server's call
    (``EXEC_REPLACES`` false): ``cmd`` as a child with the same descriptors,
    its exit status or minus the signal that killed it."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if not EXEC_REPLACES:
            pid = os.posix_spawnp(cmd[0], cmd, os.environ)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    return 127  # not reached


def run_command(cmd: list[str], stdin_data: bytes | None) -> int:
    """Run ``cmd`` as a child (``stdin_data`` on its standard input) and
    return its exit status, a signal reported as a shell would (128 + N)."""
    import subprocess   # lazy: ~15 ms of start-up that most calls never need

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        proc = subprocess.run(cmd, input=stdin_data)
    except OSError as exc:
        say("error", f"cannot run '{cmd[0]}': {exc.strerror}")
        return 127
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode


class CompilerNotFound(Exception):
    pass


#: in the compiled client's binary (client/mirecc_client.c)
CLIENT_MARKER = b"MIRECC-COMPILED-CLIENT"


def _is_mirecc(path: str) -> bool:
    """True for mirecc's own scripts and its compiled client, also behind
    symlinks or copied under another name."""
    try:
        resolved = os.path.realpath(path)
        if os.path.basename(resolved).startswith("mirecc"):
            return True
        with open(resolved, "rb") as fh:
            head = fh.read(4096)     # the client's marker is a note in its first page
        return b"mirecc.driver.clang" in head[:512] or (head.startswith(b"\x7fELF")
                                                      and CLIENT_MARKER in head)
    except OSError:
        return False


def _versioned_name(name: str) -> tuple[bool, int] | None:
    """For 'clang-19' -> (False, 19), 'clang++-14.0' -> (True, 14); else None."""
    for cxx, stem in ((True, "clang++-"), (False, "clang-")):
        if name.startswith(stem):
            parts = name[len(stem):].split(".")
            if all(p.isdigit() for p in parts):
                return cxx, int(parts[0])
            return None
    return None


def _version_of(path: str) -> int:
    versioned = _versioned_name(os.path.basename(path))
    if versioned:
        return versioned[1]
    # An unversioned link such as /usr/bin/clang -> /usr/lib/llvm-19/bin/clang,
    # or one to a versioned file outside an llvm-N directory (/opt/bin/clang-19).
    resolved = os.path.realpath(path)
    versioned = _versioned_name(os.path.basename(resolved))
    if versioned:
        return versioned[1]
    for part in resolved.split(os.sep):
        if part.startswith("llvm-") and part[5:].isdigit():
            return int(part[5:])
    return 0


def clang_major(compiler: str) -> int:
    """The LLVM major of ``compiler``: from its name or where it links to
    (``clang-19``, ``/usr/lib/llvm-19/bin/clang``), else ``--version``; 0
    when neither tells."""
    major = _version_of(compiler)
    if major:
        return major
    import re  # lazy: only when the name does not tell (re costs ms)
    import subprocess

    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.search(r"clang version (\d+)\.", out)
    return int(m.group(1)) if m else 0


def _is_wanted_name(name: str, cxx: bool) -> bool:
    if not name.startswith("clang"):
        return False
    if name == ("clang++" if cxx else "clang"):
        return True
    versioned = _versioned_name(name)
    return versioned is not None and versioned[0] == cxx


def has_openmp_runtime(clang: str) -> bool:
    """Is ``omp.h`` in the clang's resource directory
    (``<prefix>/lib/clang/<version>/include``)?"""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(clang)))
    base = os.path.join(prefix, "lib", "clang")
    try:
        versions = os.listdir(base)
    except OSError:
        return False
    return any(os.path.isfile(os.path.join(base, v, "include", "omp.h")) for v in versions)


def newest_clang_on_path(cxx: bool, path_env: str | None = None,
                         need_openmp: bool = False) -> str | None:
    """The clang (or clang++) with the highest major version on PATH (with
    ``need_openmp``: among those whose OpenMP runtime is installed)."""
    best: tuple[int, int, str] | None = None
    dirs = (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep)
    for order, directory in enumerate(dirs):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            if not _is_wanted_name(name, cxx):
                continue
            # An empty PATH entry is the working directory; keep a "./" so
            # that exec runs this file and does not search PATH again.
            candidate = os.path.join(directory or ".", name)
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)) \
                    or _is_mirecc(candidate):
                continue
            if need_openmp and not has_openmp_runtime(candidate):
                continue
            # Higher version wins; among equals, the earlier PATH entry wins.
            key = (_version_of(candidate), -order, candidate)
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best else None


def which(program: str) -> str | None:
    """Like shutil.which, without importing shutil."""
    if os.sep in program:
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def tool_beside(compiler: str, tool: str) -> str | None:
    """An LLVM ``tool`` (``opt``, ``llvm-dis``) of the clang ``compiler``, of
    the same LLVM: beside its real path, as Debian installs
    ``/usr/lib/llvm-<N>/bin``; a bare name (``clang-19``) is looked up on
    PATH first.  None when there is none."""
    if os.sep not in compiler:
        compiler = which(compiler) or compiler
    path = os.path.join(os.path.dirname(os.path.realpath(compiler)), tool)
    return path if os.access(path, os.X_OK) else None


def _cxx_sibling(cc: str) -> str | None:
    """clang++ next to a chosen clang: clang-19 -> clang++-19."""
    directory, name = os.path.split(cc)
    if name.startswith("clang++"):
        return cc
    if name.startswith("clang"):
        sibling = os.path.join(directory, name.replace("clang", "clang++", 1))
        return which(sibling)
    return None


def site_file() -> str:
    """Where setup records the compilers of this installation."""
    return os.environ.get("MIRECC_SITE_FILE") or os.path.join(sys.prefix, "etc", "mirecc",
                                                              "compilers")


def site_compilers(path: str | None = None) -> dict:
    """``{"cc": ..., "cxx": ...}`` from the site file (``key=value`` lines,
    ``#`` comments); empty when there is none."""
    found = {}
    try:
        with open(path or site_file(), encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep and not key.startswith("#") and key.strip() in ("cc", "cxx") \
                        and value.strip():
                    found[key.strip()] = value.strip()
    except OSError:
        pass
    return found


def find_compiler(config, cxx: bool) -> str:
    """Path of the compiler for this call (see :func:`choose_compiler`)."""
    return choose_compiler(config, cxx)[0]


def choose_compiler(config, cxx: bool) -> tuple[str, str]:
    """(path of the compiler for this call, where the choice came from).
    The path is as found: links are not resolved, so clang's diagnostics
    name it the way a direct call would."""
    configured = config.cxx if cxx else config.cc
    if configured:
        found = which(configured)
        if not found:
            var = "cxx / MIRECC_CXX" if cxx else "cc / MIRECC_CC"
            raise CompilerNotFound(f"the configured compiler '{configured}' ({var}, "
                                   f"from {config.source}) was not found")
        if _is_mirecc(found):
            raise CompilerNotFound(f"the configured compiler '{configured}' is mirecc "
                                   f"itself; point it at the real clang")
        var = "MIRECC_CXX" if cxx else "MIRECC_CC"
        where = var if os.environ.get(var) else f"{'cxx' if cxx else 'cc'} in {config.source}"
        return found, f"configured ({where})"
    if cxx and config.cc:
        sibling = _cxx_sibling(find_compiler(config, cxx=False))
        if sibling:
            return sibling, "the clang++ beside the configured cc"
    site = site_compilers()
    chosen = site.get("cxx" if cxx else "cc")
    if cxx and not chosen and site.get("cc"):
        chosen = _cxx_sibling(site["cc"])
    if chosen:
        found = which(chosen)
        if found and not _is_mirecc(found):
            return found, f"set up for this installation ({site_file()})"
    found_path = newest_clang_on_path(cxx, need_openmp=True)
    how = "the newest clang on PATH with its OpenMP runtime"
    if found_path is None:
        found_path = newest_clang_on_path(cxx)
        how = "the newest clang on PATH (none has its OpenMP runtime installed)"
    if found_path is None:
        wanted = "clang++" if cxx else "clang"
        raise CompilerNotFound(
            f"no {wanted} found on PATH; install clang (e.g. apt-get install clang-14) "
            f"or set {'MIRECC_CXX' if cxx else 'MIRECC_CC'}")
    return found_path, how


_VERSIONS: dict = {}


def compiler_version(compiler: str) -> str:
    """First line of ``compiler --version``, e.g. 'Debian clang version 14.0.6'
    (asked once per compiler and process)."""
    if compiler not in _VERSIONS:
        import subprocess  # lazy: ~15 ms, asked once per compiler

        try:
            out = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
            _VERSIONS[compiler] = out.splitlines()[0].strip() if out else "unknown"
        except (OSError, subprocess.SubprocessError):
            _VERSIONS[compiler] = "unknown"
    return _VERSIONS[compiler]


class Compiler:
    """One compiler mirecc drives, as sccache's ``CCompilerImpl`` is one:
    what the drop-in driver asks of it, whichever it is.  A compiler is one
    module of this layer defining ``COMPILER``, an instance of a subclass,
    and one line of :data:`mirecc.frontend.compilers.COMPILER_MODULES`.

    - ``name``: the registry's key; ``languages``: the TU languages whose IR
      mirecc reads from its calls;
    - :meth:`find`: the real compiler for a call, and where the choice came
      from (``--explain`` prints it); :meth:`fallback`: the one a call runs
      when mirecc fails before :meth:`find` answered;
    - :meth:`parse`: the call classified (what it is, its TUs, the flags the
      IR is read with);
    - :meth:`split_blocked`: why the call cannot be split into the front end
      that reads the IR and the user's own compile beside it (None: it can),
      and :meth:`split`: the commands of that split compile;
    - :meth:`ir_command`: the side run that writes a TU's IR when the call
      is not split;
    - :meth:`final_command`: the user's command as the compiler runs it.

    The defaults are "none": a compiler that reads no IR classifies nothing
    as a compile and is run as it is."""

    name = ""
    languages: frozenset = frozenset()
    #: flags that change the optimisation pipeline but not the front end's IR:
    #: part of the result cache's key
    pipeline_only_flags: frozenset = frozenset()

    def find(self, config, cxx: bool) -> tuple[str, str]:
        """(path of the real compiler for this call, where the choice came
        from); raises :class:`CompilerNotFound` with what to do."""
        raise CompilerNotFound(f"{self.name}: no way to find the compiler")

    def fallback(self, cxx: bool) -> str:
        """The compiler a call runs when mirecc failed before :meth:`find`."""
        return self.name

    def parse(self, args: list[str], cxx: bool):
        """(the arguments as the compiler reads them, response files
        expanded; the call classified: an object with ``kind``
        (``compile``, ``link``, ``query``...), ``sources`` and what the
        driver reads)."""
        raise NotImplementedError

    def split_blocked(self, inv, args: list[str], config) -> str | None:
        return "this compiler's calls are not split"

    def split(self, compiler: str, args: list[str], inv, bitcode_path: str, **options):
        raise NotImplementedError

    def ir_command(self, compiler: str, inv, source, out: str) -> list[str]:
        raise NotImplementedError

    def final_command(self, launcher: tuple, compiler: str, args: list[str]) -> list[str]:
        """The user's own command: the launcher (``prefix``: ccache,
        distcc), the compiler and the user's arguments, untouched."""
        return [*launcher, compiler, *args]

    def __repr__(self) -> str:
        return f"Compiler({self.name!r})"
