"""Compile a translation unit once: the front end writes bitcode, the back end
compiles the object from it.

When the ML path reads a TU's IR, running clang's front end twice (once for
the IR, once in the final compile) costs ~10-30% of a compile.  For the
common case (one source, ``-c``, an object file) mirecc instead:

1. runs the front end with the user's own flags (diagnostics, ``-Werror``,
   dependency files), writing unoptimised-but-optimisable bitcode
   (``-emit-llvm -Xclang -disable-llvm-passes``) to a private file; its
   stderr is kept;
2. gives that bitcode to the pipeline;
3. compiles the object from the bitcode with the user's flags and the
   injected decision flags, after replaying the front end's stderr.  A back
   end that prints anything (clang formats back-end diagnostics without
   source context for bitcode input) is discarded and the user's command
   (with the decision flags) runs instead, so diagnostics are clang's own.

clang's ``-c x.bc`` runs the same optimisation pipeline on the same IR as
``-c x.c``, so the object is byte-identical when no decision is applied
(``tests/test_frontend.py`` checks it on several flag sets).  The dependency
file is written by step 1, under the names clang derives from the user's
output (``-MF``/``-MQ`` are made explicit because step 1's output is another
file).  Where the front end fails, or anything after it does, the user's own
command runs instead, so clang reports errors itself.

Flags whose effect this split could change (outputs named after the object,
records of the command line, instrumentation added by the back end,
``-Xclang``, LTO, ...) and launchers (``prefix``: ccache hashes the command
it sees) make a call ineligible: mirecc then emits the IR in a side run and
runs the user's command, as before.
"""
from __future__ import annotations

import os

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
    if config.prefix:
        return "a launcher (prefix) runs the compiler"
    if inv.kind != "compile" or len(inv.sources) != 1 or inv.other_inputs:
        return "not a compile of one source"
    if not inv.emits_object_only or inv.output == "-":
        return "not -c into a file"
    if inv.sources[0].is_stdin:
        return "the source is standard input"
    phases = [a for a in args if a in ("-c", "-S", "--compile", "--assemble")]
    if set(phases) != {"-c"}:
        # -S from bitcode names more blocks in the assembly's comments (the
        # back end keeps value names it creates): the object is the same
        return "not -c (an object)"
    for arg in args:
        if arg in INELIGIBLE_FLAGS or arg.startswith(INELIGIBLE_PREFIXES):
            return f"{arg} is not split"
    return None


class Split:
    """The two commands of a split compile of ``inv``'s one source (an
    :class:`mirecc.cmdline.Invocation` for the user's ``args``)."""

    def __init__(self, compiler: str, args: list[str], inv, bitcode_path: str,
                 color: bool = False, private_dep_file: str | None = None):
        self.compiler = compiler
        self.args = list(args)
        self.source = inv.sources[0]
        self.bitcode_path = bitcode_path
        # where the front end lists the files it reads when the user asked
        # for no dependency file (direct mode's manifest is made from it)
        self.private_dep_file = private_dep_file
        # without -o, clang's output is the source's stem in the working directory
        self.output = inv.output or os.path.splitext(os.path.basename(self.source.path))[0] + ".o"
        self.color = color and not any(a.startswith(("-fcolor-diagnostics",
                                                      "-fno-color-diagnostics",
                                                      "-fdiagnostics-color"))
                                       for a in args)

    def frontend_command(self) -> list[str]:
        """The user's command writing bitcode to ``bitcode_path``: the output
        and the phase replaced; dependency-file names made explicit as clang
        derives them from the user's output (-MF: the output with ``.d``;
        the target: the -o value, else the object's default name)."""
        out, i, args = [], 0, self.args
        while i < len(args):
            skip = _output_operands(args[i])
            if skip:
                i += skip
                continue
            if args[i] != "-c":
                out.append(args[i])
            i += 1
        if any(a in ("-MD", "-MMD") for a in args):
            if not _has_flag(args, "-MF"):
                out += ["-MF", self._user_dep_file()]
            if not _has_flag(args, "-MT") and not _has_flag(args, "-MQ"):
                out += ["-MQ", self.output]
        elif self.private_dep_file:
            out += ["-MD", "-MF", self.private_dep_file, "-MQ", self.output]
        if self.color:
            out.append("-fcolor-diagnostics")
        return [self.compiler, *out, "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                "-o", self.bitcode_path]

    def dependency_file(self) -> str | None:
        """The dependency file the front end writes listing every file it
        reads (the user's with -MD, else the private one); None with -MMD,
        which leaves system headers out."""
        if "-MMD" in self.args:
            return None
        if "-MD" in self.args:
            return self._user_dep_file()
        return self.private_dep_file

    def _user_dep_file(self) -> str:
        """The user's -MF value, else clang's default: the output with ``.d``."""
        args, value = self.args, None
        for i, a in enumerate(args):
            if a == "-MF" and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith("-MF") and len(a) > 3:
                value = a[3:]
        return value if value is not None else os.path.splitext(self.output)[0] + ".d"

    def backend_command(self, extra: list[str], output: str | None = None,
                        bitcode: str | None = None) -> list[str]:
        """The object from the bitcode (``bitcode``, default the front end's)
        into ``output`` (default: the user's), with the user's flags (those
        of the front end are unused: not reported) and ``extra``; no source,
        language or dependency flags."""
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

    def start_backend(self) -> "Speculative":
        """Start the back end without decisions while the pipeline decides
        (a second core does it): most TUs get no decision applied, and then
        this object is the answer.  It goes to a hidden file beside the
        output (``*.o`` globs do not see it), renamed over the output only
        when accepted."""
        import subprocess

        directory, name = os.path.split(self.output)
        temp = os.path.join(directory, f".{name}.mirecc-{os.getpid()}.tmp")
        proc = subprocess.Popen(self.backend_command([], output=temp),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        return Speculative(proc, temp)


class Speculative:
    """A back end started before the decisions were known."""

    def __init__(self, proc, temp: str):
        self.proc = proc
        self.temp = temp

    def accept(self, output: str) -> bool:
        """Wait for it; if it compiled silently, move its object to
        ``output`` and say True; else throw it away."""
        out, err = self.proc.communicate()
        if self.proc.returncode == 0 and not out and not err:
            try:
                os.replace(self.temp, output)
                return True
            except OSError:
                pass
        self.discard()
        return False

    def discard(self) -> None:
        """Stop it if it still runs, and remove what it wrote."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        try:
            os.unlink(self.temp)
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
