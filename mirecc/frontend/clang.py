"""Compile a translation unit whose IR the ML path reads: the front end for
the IR, and the user's own command for the object, side by side.

1. The front end runs with the user's flags (no warnings, no user dependency
   file), writing unoptimised-but-optimisable bitcode (``-emit-llvm -Xclang
   -disable-llvm-passes``) and a private list of every file it read (direct
   mode's manifest);
2. at the same time, on another core, the user's own command compiles the
   object into a hidden file beside the output (its dependency file too),
   with its diagnostics kept;
3. the pipeline decides from the bitcode.  When no decision applies, the
   user's compile is accepted: its diagnostics replayed, its files moved
   over the user's.  The object is clang's own, byte for byte: compiling
   the object from the bitcode instead (``clang -c x.bc``) would run the
   same passes on the same IR, but clang numbers the private globals that
   LLVM creates (``.Lstr.29`` for a ``printf`` turned into ``puts``)
   differently in a module read from bitcode.
4. When decisions apply, the user's command runs again with the decision
   flags; if its object equals the user's, the decisions changed nothing
   (the compiler made the same choice) and the user's object stands.

The cost over one compile is one front end (measured:
docs/results/compile-time-own-compile.md against
docs/results/compile-time-from-bitcode.md).
Where anything fails, the user's command runs as asked, so clang reports
errors itself.  :class:`Clang` is this compiler behind the interface every
compiler mirecc drives has (:class:`mirecc.frontend.compiler.Compiler`).

Flags whose effect this could change (outputs named after the object,
records of the command line, instrumentation, ``-Xclang``, LTO, ...) make
a call ineligible: mirecc then emits the IR in a side run and runs the
user's command (with the decision flags), as before.  A launcher
(``prefix``: ccache, distcc) runs the user's own compile; the front end and
a task's candidates run here, without it (they are mirecc's own work, kept
in its own caches).
"""
from __future__ import annotations

import os

from mirecc.frontend.cmdline import TU_LANGUAGES, classify, expand_response_files
from mirecc.frontend.compiler import Compiler, choose_compiler, newest_clang_on_path

# A call with one of these flags (exact, or as a prefix) is not split.
INELIGIBLE_FLAGS = {
    "--", "-v", "--verbose", "-###", "-emit-llvm", "-Xclang", "-Xpreprocessor", "-pg",
    "-serialize-diagnostics", "--serialize-diagnostics", "-ftime-report", "-Q",
    "-fmodules", "-fcxx-modules",
    # long spellings of -MD/-MMD/-M/-MM: dependency files are handled by their short names
    "--write-dependencies", "--write-user-dependencies", "--dependencies",
    "--user-dependencies",
}
INELIGIBLE_PREFIXES = (
    "-save-temps", "-save-stats", "-ftime-trace", "-flto", "-fembed-bitcode", "-Wp,", "-MJ",
    "-frecord-command-line", "-grecord-command-line", "-grecord-gcc-switches",
    "-fsanitize", "-fprofile", "-fcs-profile", "-fcoverage", "-fxray", "-gsplit-dwarf",
    "-fsave-optimization-record", "-foptimization-record", "--serialize-diagnostics=",
    "-fthinlto", "-fopenmp-targets", "--cuda", "-fgpu", "-fproc-stat-report",
    "-fmodules-", "-fdebug-compilation-dir", "-fplugin", "-fpass-plugin", "-Xarch",
    "-R",      # remarks: the back end prints them without source context from bitcode
)
# dependency-file flags: kept for the front end, dropped for the back end
DEP_FLAGS = {"-MD", "-MMD", "-MP", "-MG", "-MV"}
DEP_WITH_ARG = {"-MF", "-MT", "-MQ"}


def why_not(inv, args: list[str], config) -> str | None:
    """None when the call can be split into front end and back end; else why not."""
    if inv.kind != "compile" or len(inv.sources) != 1 or inv.other_inputs:
        return "not a compile of one source"
    if not inv.emits_object_only or inv.output == "-":
        return "not -c into a file"
    if inv.sources[0].is_stdin:
        return "the source is standard input"
    output = inv.output or ""
    if output and os.path.exists(output) and not os.path.isfile(output):
        # /dev/null, a pipe: written in place, never replaced by a file
        return "the output is not a regular file"
    phases = [a for a in args if a in ("-c", "-S", "--compile", "--assemble")]
    if set(phases) != {"-c"}:
        # -S from bitcode names more blocks in the assembly's comments (the
        # back end keeps value names it creates): the object is the same
        return "not -c (an object)"
    for arg in args:
        if arg in INELIGIBLE_FLAGS or arg.startswith(INELIGIBLE_PREFIXES):
            return f"{arg} is not split"
    return None


def object_path(inv) -> str:
    """The object a compile of ``inv``'s one source writes: ``-o``, else (as
    clang) the source's stem with ``.o`` in the working directory."""
    return inv.output or os.path.splitext(os.path.basename(inv.sources[0].path))[0] + ".o"


class Split:
    """The commands of a split compile of ``inv``'s one source (an
    :class:`mirecc.frontend.cmdline.Invocation` for the user's ``args``)."""

    def __init__(self, compiler: str, args: list[str], inv, bitcode_path: str,
                 color: bool = False, private_dep_file: str | None = None,
                 launcher: tuple = ()):
        self.compiler = compiler
        self.launcher = tuple(launcher)   # before the user's own compile (prefix)
        self.args = list(args)
        self.source = inv.sources[0]
        self.bitcode_path = bitcode_path
        # where the front end lists every file it reads (direct mode's
        # manifest is made from it); without one, no list is written
        self.private_dep_file = private_dep_file
        # work started early in a free job slot (tu.mlpath.EarlyFrontEnd), if any
        self.early = None
        self.output = object_path(inv)
        self.writes_dep_file = writes_dep_file(args)
        self.color = color and not any(a.startswith(("-fcolor-diagnostics",
                                                      "-fno-color-diagnostics",
                                                      "-fdiagnostics-color"))
                                       for a in args)

    def _user_flags(self, drop_dep_flags: bool) -> list[str]:
        """The user's arguments without the output (and, with
        ``drop_dep_flags``, without the dependency-file flags)."""
        out, i, args = [], 0, self.args
        while i < len(args):
            a = args[i]
            skip = _output_operands(a)
            if drop_dep_flags and a in DEP_WITH_ARG:
                skip = 2
            elif drop_dep_flags and (a in DEP_FLAGS or (a[:3] in DEP_WITH_ARG and len(a) > 3)):
                skip = 1
            elif a == "-MF":                       # the dependency file is named apart
                skip = 2
            elif a.startswith("-MF") and len(a) > 3:
                skip = 1
            if skip:
                i += skip
                continue
            out.append(a)
            i += 1
        return out

    def frontend_command(self) -> list[str]:
        """The user's command writing bitcode to ``bitcode_path``, without
        warnings (the object's compile reports them) and without the user's
        dependency file; the private one lists every file read."""
        out = [a for a in self._user_flags(drop_dep_flags=True) if a != "-c"]
        if self.private_dep_file:
            out += ["-MD", "-MF", self.private_dep_file, "-MQ", self.output]
        return [self.compiler, *out, "-w", "-c", "-emit-llvm", "-Xclang",
                "-disable-llvm-passes", "-o", self.bitcode_path]

    def own_command(self, output: str, dep_output: str | None, extra=()) -> list[str]:
        """The user's own command, plus ``extra``, writing the object to
        ``output`` and the dependency file (when the user asked for one) to
        ``dep_output`` under the names clang derives from the user's output
        (the target: the -o value, else the object's default name)."""
        out = self._user_flags(drop_dep_flags=False)
        if self.writes_dep_file:
            out += ["-MF", dep_output]
            if not _has_flag(self.args, "-MT") and not _has_flag(self.args, "-MQ"):
                out += ["-MQ", self.output]
        if self.color:
            out.append("-fcolor-diagnostics")
        return [*self.launcher, self.compiler, *out, *extra, "-o", output]

    def dependency_file(self) -> str | None:
        """The file listing every file the front end read (None without one)."""
        return self.private_dep_file

    def user_dep_file(self) -> str:
        """Where the user's own command writes its dependency file."""
        return user_dep_file(self.args, self.output)

    def backend_command(self, extra: list[str], output: str | None = None,
                        bitcode: str | None = None) -> list[str]:
        """The object from the bitcode (``bitcode``, default the front end's)
        into ``output`` (default: the user's), with the user's flags (those
        of the front end are unused: not reported) and ``extra``; no source,
        language or dependency flags.  (Code size builds its candidates so;
        the user's object always comes from :meth:`own_command`: compiled
        from bitcode, clang numbers private globals differently.)"""
        out, i, args = [], 0, self.args
        while i < len(args):
            a = args[i]
            skip = _output_operands(a)
            if a in DEP_WITH_ARG or a in ("-x", "--language"):
                skip = 2
            elif a in DEP_FLAGS or (a[:3] in DEP_WITH_ARG and len(a) > 3) \
                    or (a.startswith("-x") and len(a) > 2) or a.startswith("--language=") \
                    or a == self.source.path:
                skip = 1
            if skip:
                i += skip
                continue
            out.append(a)
            i += 1
        if self.color:
            out.append("-fcolor-diagnostics")
        return [self.compiler, *out, "-Wno-unused-command-line-argument", *extra,
                "-o", output or self.output, "-x", "ir", bitcode or self.bitcode_path]

    def start_own(self, extra=(), tag: str = "own") -> "BackgroundCompile":
        """Start the user's own command (plus ``extra``) into hidden files
        beside the output (``*.o`` globs do not see them), moved over the
        user's files only when accepted.  Started with the front end, on
        another core: when no decision applies, its object is the answer,
        byte for byte clang's.  Its stdout and stderr go to files in the
        work directory (beside the bitcode) until it is waited for."""
        directory, name = os.path.split(self.output)
        temp = os.path.join(directory, f".{name}.mirecc-{os.getpid()}-{tag}.tmp")
        dep_temp = (os.path.join(os.path.dirname(self.user_dep_file()),
                                 f".{os.path.basename(self.user_dep_file())}"
                                 f".mirecc-{os.getpid()}-{tag}.tmp")
                    if self.writes_dep_file else None)
        streams = os.path.join(os.path.dirname(os.path.abspath(self.bitcode_path)), tag)
        return BackgroundCompile(spawn(self.own_command(temp, dep_temp, extra), streams),
                       temp, dep_temp, self)


def user_dep_file(args: list[str], output: str) -> str:
    """Where a command that writes a dependency file writes it: the -MF
    value, else clang's default, the output with ``.d``."""
    value = None
    for i, a in enumerate(args):
        if a == "-MF" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("-MF") and len(a) > 3:
            value = a[3:]
    return value if value is not None else os.path.splitext(output)[0] + ".d"


def writes_dep_file(args: list[str]) -> bool:
    """Does the command write a dependency file beside its object?"""
    return any(a in ("-MD", "-MMD") for a in args)


def spawn(cmd: list[str], streams: str, group: bool = False) -> "Child":
    """Start ``cmd`` (searched on PATH) with stdin from /dev/null and its
    stdout and stderr into ``streams``.out and ``streams``.err.
    (os.posix_spawnp rather than subprocess: subprocess, with the signal,
    enum and locale modules it imports, costs ~15 ms of start-up on every
    compile of a build.)"""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, streams + ".out", flags, 0o600),
               (os.POSIX_SPAWN_OPEN, 2, streams + ".err", flags, 0o600)]
    # group: a process group of its own, so that kill() stops what it started
    return Child(os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=actions,
                                 **({"setpgroup": 0} if group else {})), streams, group)


class Child:
    """A process from :func:`spawn`: ``returncode`` (negative: killed by
    that signal, as subprocess says), ``stdout`` and ``stderr`` once it
    has ended."""

    def __init__(self, pid: int, streams: str, group: bool = False):
        self.pid, self.streams, self.group = pid, streams, group
        self.returncode: int | None = None
        self.stdout = self.stderr = b""

    def _ended(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        for attr, suffix in (("stdout", ".out"), ("stderr", ".err")):
            try:
                with open(self.streams + suffix, "rb") as fh:
                    setattr(self, attr, fh.read())
                os.unlink(self.streams + suffix)
            except OSError:
                pass

    def wait(self) -> int:
        if self.returncode is None:
            self._ended(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._ended(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            (os.killpg if self.group else os.kill)(self.pid, 9)     # SIGKILL
            self.wait()


class BackgroundCompile:
    """A compile of the user's command started in the background."""

    def __init__(self, child: Child, temp: str, dep_temp: str | None, split: Split):
        self.child = child
        self.temp = temp
        self.dep_temp = dep_temp
        self.split = split

    returncode = property(lambda self: self.child.returncode)
    stdout = property(lambda self: self.child.stdout)
    stderr = property(lambda self: self.child.stderr)

    def wait(self) -> bool:
        """Wait for it: True when it compiled (exit 0, nothing on stdout)."""
        return self.child.wait() == 0 and not self.child.stdout

    def object_bytes(self) -> bytes | None:
        try:
            with open(self.temp, "rb") as fh:
                return fh.read()
        except OSError:
            return None

    def accept(self) -> bool:
        """Wait for it; if it compiled, move its object (and dependency file)
        over the user's and say True; else throw it away."""
        if self.wait():
            try:
                if self.dep_temp is not None:
                    os.replace(self.dep_temp, self.split.user_dep_file())
                os.replace(self.temp, self.split.output)
                return True
            except OSError:
                pass
        self.discard()
        return False

    def discard(self) -> None:
        """Stop it if it still runs, and remove what it wrote."""
        self.child.kill()
        for path in (self.temp, self.dep_temp):
            if path is None:
                continue
            try:
                os.unlink(path)
            except OSError:     # accepted (moved), never written, or no such directory
                pass


def _has_flag(args: list[str], name: str) -> bool:
    return any(a == name or (a.startswith(name) and len(a) > len(name)) for a in args)


def _output_operands(arg: str) -> int:
    """How many arguments an output option takes up (-o X: 2; -oX,
    --output=X: 1), else 0 (-objcmt-*, -object are other options)."""
    if arg in ("-o", "--output"):
        return 2
    if arg.startswith("--output=") or (arg.startswith("-o") and len(arg) > 2
                                       and not arg.startswith(("-objcmt", "-object"))):
        return 1
    return 0


# Flags that make clang write unoptimised-but-optimisable IR: the front end's
# output with the -O level's attributes, before any LLVM pass runs.  Warnings
# are off in the side run: it is one TU at a time, so a flag meant for another
# TU is "unused" here, and with -Werror that must not fail it (the final
# compile reports the user's warnings as usual).
IR_EMIT_FLAGS = ["-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                 "-w", "-Wno-unused-command-line-argument"]


class Clang(Compiler):
    """clang and clang++ (``mirecc``, ``mirecc++``): found by
    :func:`mirecc.frontend.compiler.choose_compiler`, classified by the flag
    table (:mod:`mirecc.frontend.cmdline`), split into the front end and the
    user's own compile (:class:`Split`).  A clang-like compiler (a newer
    clang with other flags, a vendor's clang) subclasses it and overrides
    what differs."""

    name = "clang"
    languages = frozenset(TU_LANGUAGES)
    #: the vectorizers on or off, unrolling: a head reads them, the front
    #: end's IR does not change with them
    pipeline_only_flags = frozenset({
        "-fvectorize", "-fno-vectorize", "-ftree-vectorize", "-fno-tree-vectorize",
        "-fslp-vectorize", "-fno-slp-vectorize", "-ftree-slp-vectorize",
        "-fno-tree-slp-vectorize", "-funroll-loops", "-fno-unroll-loops"})

    def find(self, config, cxx: bool) -> tuple[str, str]:
        return choose_compiler(config, cxx)

    def fallback(self, cxx: bool) -> str:
        return newest_clang_on_path(cxx, need_openmp=True) or newest_clang_on_path(cxx) \
            or ("clang++" if cxx else "clang")

    def parse(self, args: list[str], cxx: bool):
        """(response files expanded, the :class:`~mirecc.frontend.cmdline.Invocation`);
        raises :class:`~mirecc.frontend.cmdline.ResponseFileError`."""
        expanded = expand_response_files(args)
        return expanded, classify(expanded, cxx_driver=cxx)

    def split_blocked(self, inv, args: list[str], config) -> str | None:
        return why_not(inv, args, config)

    def split(self, compiler: str, args: list[str], inv, bitcode_path: str, **options):
        return Split(compiler, args, inv, bitcode_path, **options)

    def ir_command(self, compiler: str, inv, source, out: str) -> list[str]:
        """The side run that writes ``source``'s bitcode to ``out``."""
        lang = ["-x", source.language] if source.explicit_language else []
        return [compiler, *inv.ir_flags, *lang, source.path, *IR_EMIT_FLAGS, "-o", out]


COMPILER = Clang()
