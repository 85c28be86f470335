"""Understand a gcc/clang command line just enough to find its translation units.

mirecc never rewrites the user's command: the final compile is always the
exact argument list the user gave (plus, later, injected decision flags).
This module only *reads* the command line to answer three questions:

* does this call compile C/C++ (or OpenCL) sources with optimisation on?
* which sources, in which language?
* which flags must the side IR-emission run keep (defines, include paths,
  target, -f options) and which must it drop (outputs, dependency files,
  link-step flags, other side effects)?

Everything here is pure: ``classify(args)`` takes the argument list (already
expanded from ``@response`` files) and returns an ``Invocation``.
"""

from __future__ import annotations

import os

# Flags that consume the *next* argument when written on their own, and take
# the value glued on otherwise (``-I dir`` and ``-Idir``).  If one of these is
# missing here, its operand would be mistaken for an input file; the damage is
# limited to the side IR run (the final compile is untouched).
JOINED_OR_SEPARATE = {
    # preprocessor
    "-I", "-D", "-U", "-F", "-iquote", "-isystem", "-idirafter", "-iprefix",
    "-iwithprefix", "-iwithprefixbefore", "-isysroot", "-include", "-imacros",
    "-include-pch", "-cxx-isystem", "-isystem-after", "-ivfsoverlay",
    # outputs and dependency files (handled specially below as well)
    "-o", "-MF", "-MT", "-MQ", "-MJ",
    # language selection
    "-x",
    # linker / search paths
    "-L", "-l", "-T", "-u", "-B", "-e",
}

# Flags that always consume the next argument and have no glued form.
SEPARATE = {
    "-Xclang", "-Xlinker", "-Xassembler", "-Xpreprocessor", "-Xanalyzer",
    "-Xcuda-fatbinary", "-Xcuda-ptxas", "-Xopenmp-target", "-mllvm",
    "-target", "-arch", "-z", "-gcc-toolchain", "-resource-dir",
    "-serialize-diagnostics", "--serialize-diagnostics", "-dependency-file",
    "-dependency-dot", "-working-directory", "--param", "-aux-triple",
    "-install_name", "-current_version", "-compatibility_version",
    "--sysroot", "--output", "--include-directory", "--define-macro",
    "--undefine-macro", "--language", "--include", "--library-directory",
    "--prefix", "--target", "--gcc-toolchain", "--write-dependencies-file",
    # more clang 14 driver options written with a separate operand (checked
    # with ``clang -### -c FLAG op.c a.c``: op.c is not compiled)
    "-Xarch_host", "-Xarch_device", "-ccc-gcc-name", "-ccc-install-dir",
    "-ccc-arcmt-migrate", "-ccc-objcmt-migrate", "--config", "-G",
    "-iframework", "-iframeworkwithsysroot", "-iwithsysroot", "-imultilib",
    "-meabi", "-mthread-model", "-stdlib++-isystem", "-fmodules-user-build-path",
    "--analyzer-output", "--imacros", "--include-prefix", "--include-with-prefix",
    "--include-with-prefix-after", "--include-with-prefix-before",
    "--include-directory-after", "--system-header-prefix",
    "--no-system-header-prefix", "--dyld-prefix", "--encoding", "--extdirs",
    "--std", "--stdlib", "--mhwdiv", "--classpath", "--CLASSPATH",
    "--bootclasspath", "--output-class-directory", "--resource",
}

# Flags whose mere presence means "this call compiles nothing": clang answers
# a question or preprocesses.  The call passes straight through.
QUERY_FLAGS = {
    "--version", "-dumpversion", "-dumpmachine", "-dumpspecs", "--help",
    "-help", "--help-hidden", "-###", "-E", "-M", "-MM", "-fsyntax-only",
    "-print-search-dirs", "-print-multi-lib", "-print-multi-directory",
    "-print-multi-os-directory", "-print-libgcc-file-name",
    "-print-resource-dir", "-print-targets", "-print-supported-cpus",
    "-print-effective-triple", "-print-target-triple", "-print-runtime-dir",
    "-print-multiarch", "-print-rocm-search-dirs", "-print-diagnostic-options",
    # long spellings of -E, -M and -MM, and modes that produce no object code
    "--preprocess", "--dependencies", "--user-dependencies", "--analyze",
    "-emit-ast", "--precompile", "-ccc-print-phases", "-ccc-print-bindings",
}
QUERY_PREFIXES = ("-print-prog-name=", "-print-file-name=", "--print-", "-print-")
# Front-end actions passed with -Xclang that replace code generation: the
# call then writes no object (an AST dump, tokens, a PCH, ...), and neither
# would the side IR run.
CC1_ACTIONS_WITHOUT_CODE = {
    "-fsyntax-only", "-E", "-Eonly", "-ast-dump", "-ast-dump-all", "-ast-dump-lookups",
    "-ast-print", "-ast-list", "-ast-view", "-dump-tokens", "-dump-raw-tokens",
    "-emit-html", "-analyze", "-emit-pch", "-emit-module", "-emit-module-interface",
    "-emit-header-module", "-init-only", "-print-preamble", "-print-decl-contexts",
    "-rewrite-macros", "-rewrite-objc", "-rewrite-test", "-templight-dump", "-migrate",
    "-module-file-info", "-verify-pch", "-fixit",
}
CC1_ACTION_PREFIXES = ("-ast-dump=", "-ast-dump-all=", "-fixit=")

# Dependency-file flags: the side IR run must not write .d files.
DEPENDENCY_FLAGS = {"-MD", "-MMD", "-MP", "-MG", "-MV", "--write-dependencies",
                    "--write-user-dependencies", "--print-missing-file-dependencies"}
DEPENDENCY_WITH_ARG = {"-MF", "-MT", "-MQ", "-MJ", "-dependency-file", "-dependency-dot",
                       "-module-dependency-dir", "-gen-cdb-fragment-path",
                       "-arcmt-migrate-report-output"}

# Flags that would make the side IR run leave files behind or print things.
SIDE_EFFECT_FLAGS = {"-save-temps", "-ftime-trace", "-v", "--verbose",
                     "-ftime-report", "-fproc-stat-report", "-Q", "-save-stats"}
SIDE_EFFECT_PREFIXES = ("-save-temps=", "-ftime-trace=", "-ftime-trace-granularity=",
                        "-fproc-stat-report=", "--serialize-diagnostics=", "-save-stats=",
                        "-foptimization-record-file=")

# Link-step-only flags.  The side IR run compiles only (-c), where clang
# reports each of these as unused; with -Werror that warning is an error and
# the side run would fail although the user's compile and link succeed.
# They do not change the IR, so they are dropped.
LINK_FLAGS = {
    "-shared", "-rdynamic", "-pie", "-no-pie", "-nopie", "-static-pie",
    "-static-libgcc", "-static-libstdc++", "-shared-libgcc", "-static-openmp",
    "-nolibc", "-s", "-r", "-t", "-Z",
}
LINK_PREFIXES = ("-Wl,", "-l", "-L", "-fuse-ld=", "--ld-path=", "-rtlib=", "--rtlib=",
                 "-unwindlib=", "--unwindlib=", "--library-directory=", "--for-linker=",
                 "-T")
# Link-step-only flags with separate operands: name -> number of operands.
LINK_WITH_ARGS = {
    "-l": 1, "-L": 1, "--library-directory": 1, "-Xlinker": 1, "--for-linker": 1,
    "-z": 1, "-rpath": 1, "-T": 1, "-Tbss": 1, "-Tdata": 1, "-Ttext": 1, "-u": 1,
    "-e": 1, "-b": 1, "--rtlib": 1, "--force-link": 1, "--assert": 1,
    # Darwin linker options (clang parses them on every target)
    "-framework": 1, "-weak_framework": 1, "-lazy_framework": 1, "-weak_library": 1,
    "-lazy_library": 1, "-filelist": 1, "-exported_symbols_list": 1,
    "-unexported_symbols_list": 1, "-install_name": 1, "-current_version": 1,
    "-compatibility_version": 1, "-dylib_file": 1, "-force_load": 1,
    "-bundle_loader": 1, "-allowable_client": 1, "-client_name": 1, "-init": 1,
    "-image_base": 1, "-umbrella": 1, "-sub_library": 1, "-sub_umbrella": 1,
    "-seg_addr_table": 1, "-seg_addr_table_filename": 1, "-seg1addr": 1,
    "-pagezero_size": 1, "-multiply_defined": 1, "-multiply_defined_unused": 1,
    "-read_only_relocs": 1, "-dylinker_install_name": 1, "-segs_read_only_addr": 1,
    "-segs_read_write_addr": 1, "-undefined": 1, "-dsym-dir": 1,
    "-sectobjectsymbols": 2, "-segaddr": 2,
    "-sectalign": 3, "-sectcreate": 3, "-segcreate": 3, "-segprot": 3, "-sectorder": 3,
}
SIDE_EFFECT_WITH_ARG = {"-serialize-diagnostics", "--serialize-diagnostics"}

# Phase flags: the IR run sets its own phase.
PHASE_FLAGS = {"-c", "-S", "-emit-llvm", "--compile", "--assemble"}

# File suffix -> clang language, for the languages mirecc looks at (and the
# ones it knowingly leaves alone).  Looked up case-sensitively, as clang does:
# .C and .CC are C++, .H is a C++ header, .M is Objective-C++, and a suffix
# clang does not know (.I, .Cpp) makes the file a linker input.
SUFFIX_LANGUAGE = {
    ".c": "c", ".i": "cpp-output",
    ".cc": "c++", ".cp": "c++", ".cxx": "c++", ".cpp": "c++", ".c++": "c++",
    ".C": "c++", ".CC": "c++", ".CXX": "c++", ".CPP": "c++", ".C++": "c++",
    ".ii": "c++-cpp-output", ".cppm": "c++",
    ".h": "c-header", ".H": "c++-header", ".hh": "c++-header", ".hpp": "c++-header",
    ".hxx": "c++-header",
    ".cl": "cl", ".cu": "cuda", ".hip": "hip",
    ".m": "objective-c", ".mm": "objective-c++", ".M": "objective-c++",
    ".s": "assembler", ".S": "assembler-with-cpp", ".sx": "assembler-with-cpp",
    ".ll": "ir", ".bc": "ir",
}
# What the clang++ driver makes of C inputs (without -x): C++.
CXX_DRIVER_LANGUAGE = {"c": "c++", "cpp-output": "c++-cpp-output",
                       "c-header": "c++-header"}
# Languages whose translation units go through the decision pipeline
# ("cl": OpenCL C, for the OpenCL task heads).
TU_LANGUAGES = {"c", "c++", "cpp-output", "c++-cpp-output", "cl"}
CXX_LANGUAGES = {"c++", "c++-cpp-output"}


class Source:
    """One input that clang will compile as its own translation unit."""

    __slots__ = ("path", "language", "explicit_language")

    def __init__(self, path: str, language: str, explicit_language: bool):
        self.path = path                  # as written; "-" is standard input
        self.language = language          # clang language name, e.g. "c", "c++"
        self.explicit_language = explicit_language  # set by -x: repeat it for the IR run

    @property
    def is_stdin(self) -> bool:
        return self.path == "-"

    def __eq__(self, other) -> bool:
        return isinstance(other, Source) and (self.path, self.language, self.explicit_language) \
            == (other.path, other.language, other.explicit_language)

    def __repr__(self) -> str:
        return f"Source({self.path!r}, {self.language!r}, {self.explicit_language!r})"


class Invocation:
    """What a compiler command line asks for, as far as mirecc cares.

    (Plain classes, not dataclasses: this module runs on every compile and
    ``dataclasses`` costs more to import than the rest of mirecc's start-up.)
    """

    __slots__ = ("kind", "reason", "sources", "other_inputs", "opt_level", "ir_flags",
                 "output", "emits_object_only")

    def __init__(self, kind: str, reason: str, sources: tuple = (), other_inputs: tuple = (),
                 opt_level: str | None = None, ir_flags: tuple = (), output: str | None = None,
                 emits_object_only: bool = False):
        self.kind = kind                  # "query", "compile", "link", "empty"
        self.reason = reason              # one line: why this kind
        self.sources = sources            # translation units mirecc may look at
        self.other_inputs = other_inputs  # objects, libraries, ...
        self.opt_level = opt_level        # last -O level without "-O"; None for -O0/none
        self.ir_flags = ir_flags          # flags to keep for the side IR run
        self.output = output              # -o value if any
        self.emits_object_only = emits_object_only  # -c / -S: no link step

    @property
    def optimised(self) -> bool:
        return self.opt_level is not None

    @property
    def reads_stdin(self) -> bool:
        return any(s.is_stdin for s in self.sources)

    def __repr__(self) -> str:
        return "Invocation(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


class ResponseFileError(ValueError):
    """A response file exists but could not be read (named in the message)."""


_WHITESPACE = " \t\r\n"


def tokenize_gnu(text: str) -> list[str]:
    """Split a response file's text as clang's GNU-style tokenizer does.

    Not POSIX shell quoting: a backslash escapes the next character anywhere,
    also inside single or double quotes (``"a\\b"`` is ``ab``); quotes may
    start or end in the middle of a token; an empty token (``""``) is dropped;
    an unterminated quote runs to the end of the text.
    """
    tokens: list[str] = []
    token: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            token.append(text[i + 1])
            i += 2
        elif c in "\"'":
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                token.append(text[i])
                i += 1
            i += 1  # the closing quote
        elif c in _WHITESPACE:
            if token:
                tokens.append("".join(token))
                token = []
            i += 1
        else:
            token.append(c)
            i += 1
    if token:
        tokens.append("".join(token))
    return tokens


def expand_response_files(args: list[str], depth: int = 0) -> list[str]:
    """Expand ``@file`` arguments the way clang's GNU tokenizer does.

    A token whose file does not exist stays as it is: clang then reports it
    as a missing input, and so will the final (untouched) compile.
    """
    if depth > 20:
        raise ResponseFileError("response files nested more than 20 deep")
    out: list[str] = []
    for arg in args:
        if not (arg.startswith("@") and len(arg) > 1 and os.path.isfile(arg[1:])):
            out.append(arg)
            continue
        try:
            with open(arg[1:], encoding="utf-8", errors="surrogateescape") as fh:
                text = fh.read()
            tokens = tokenize_gnu(text.removeprefix("\ufeff"))
        except (OSError, ValueError) as exc:
            raise ResponseFileError(f"{arg[1:]}: cannot read response file: {exc}") from exc
        out.extend(expand_response_files(tokens, depth + 1))
    return out


def _optimisation(flag: str) -> str | None | bool:
    """Level named by an -O flag: str, None for -O0, False if not an -O flag."""
    if flag == "--optimize":
        return "1"
    if flag.startswith("--optimize="):
        flag = "-O" + flag[len("--optimize="):]
    if not flag.startswith("-O"):
        return False
    level = flag[2:] or "1"
    if level.isdigit() and int(level) == 0:
        return None  # -O0, also spelt -O00
    if level in {"1", "2", "3", "s", "z", "fast", "g"} or level.isdigit():
        return level
    return False  # e.g. an unknown -Ofoo: clang will complain, not our business


def _split_flag(arg: str, names: set[str]) -> tuple[str, str] | None:
    """Return (name, glued value) if ``arg`` is one of ``names`` with a glued value."""
    for name in names:
        if arg.startswith(name) and len(arg) > len(name):
            rest = arg[len(name):]
            if name.startswith("--") and rest.startswith("="):
                rest = rest[1:]
            return name, rest
    return None


def language_of(path: str, forced: str | None, cxx_driver: bool) -> str:
    """The language clang compiles ``path`` as."""
    if forced:
        return forced
    if path == "-":
        return "c++" if cxx_driver else "c"
    lang = SUFFIX_LANGUAGE.get(os.path.splitext(path)[1])
    if lang is None:
        return "object"  # clang hands unknown suffixes to the linker
    if cxx_driver:
        # clang++ compiles .c files as C++ (with a deprecation warning), .i as
        # preprocessed C++, and .h as a C++ header.
        return CXX_DRIVER_LANGUAGE.get(lang, lang)
    return lang


def classify(args: list[str], cxx_driver: bool = False) -> Invocation:
    """Classify a compiler command line (response files already expanded).

    Returns an Invocation whose ``kind`` is:
      * "query": prints information or preprocesses (``--version``, ``-E``,
        ``-M``, ``-###``, ``-print-*``, ``-fsyntax-only``), compiles nothing;
      * "compile": at least one input is compiled (maybe linked after);
      * "link": only objects/libraries, nothing compiled;
      * "empty": no inputs at all (clang will say so).
    """
    ir_flags: list[str] = []
    sources: list[Source] = []
    others: list[str] = []
    opt_level: str | None = None
    output: str | None = None
    forced_language: str | None = None
    emits_object_only = False
    query_reason: str | None = None
    has_verbose = False

    i = 0
    n = len(args)
    while i < n:
        arg = args[i]
        i += 1

        # --- inputs -----------------------------------------------------------
        if arg == "-" or not arg.startswith("-") or arg == "":
            lang = language_of(arg, forced_language, cxx_driver)
            if lang == "object":
                others.append(arg)
            else:
                sources.append(Source(arg, lang, forced_language is not None))
            continue
        if arg == "--":
            # Everything after "--" is an input.
            for rest in args[i:]:
                lang = language_of(rest, forced_language, cxx_driver)
                if lang == "object":
                    others.append(rest)
                else:
                    sources.append(Source(rest, lang, forced_language is not None))
            break

        # --- questions and preprocessing ------------------------------------
        if arg in QUERY_FLAGS or arg.startswith(QUERY_PREFIXES):
            query_reason = query_reason or f"{arg} compiles nothing"
            continue
        if arg in ("-v", "--verbose"):
            has_verbose = True
            continue

        # --- optimisation ---------------------------------------------------
        level = _optimisation(arg)
        if level is not False:
            opt_level = level
            ir_flags.append(arg)
            continue

        # --- phases ---------------------------------------------------------
        if arg in PHASE_FLAGS:
            if arg in ("-c", "-S", "--compile", "--assemble"):
                emits_object_only = True
            continue

        # --- language (positional: applies to the inputs that follow) ------
        if arg in ("-x", "--language"):
            if i < n:
                forced_language = None if args[i] == "none" else args[i]
                i += 1
            continue
        if arg.startswith("-x") or arg.startswith("--language="):
            value = arg[len("--language="):] if arg.startswith("--") else arg[2:]
            forced_language = None if value == "none" else value
            continue

        # --- output ---------------------------------------------------------
        if arg in ("-o", "--output"):
            if i < n:
                output = args[i]
                i += 1
            continue
        if arg.startswith("--output="):
            output = arg[len("--output="):]
            continue
        if arg.startswith("-o") and not arg.startswith(("-objcmt", "-object")):
            output = arg[2:]
            continue

        # --- dependency files and other side effects: dropped for IR run ---
        if arg in DEPENDENCY_FLAGS or arg in SIDE_EFFECT_FLAGS \
                or arg.startswith(SIDE_EFFECT_PREFIXES):
            continue
        if arg in DEPENDENCY_WITH_ARG or arg in SIDE_EFFECT_WITH_ARG:
            i += 1
            continue
        if _split_flag(arg, {"-MF", "-MT", "-MQ", "-MJ"}):
            continue
        if arg.startswith(("-Wp,-MD,", "-Wp,-MMD,")):
            continue  # gcc-style dependency request through the preprocessor

        # --- link-step-only flags: dropped, with their operands ------------
        if arg in LINK_WITH_ARGS:
            i += LINK_WITH_ARGS[arg]
            continue
        if arg in LINK_FLAGS or arg.startswith(LINK_PREFIXES):
            continue

        # --- everything else is kept, with its operand if it has one -------
        ir_flags.append(arg)
        if arg in SEPARATE or arg in JOINED_OR_SEPARATE:
            if i < n:
                if arg == "-Xclang" and (args[i] in CC1_ACTIONS_WITHOUT_CODE
                                         or args[i].startswith(CC1_ACTION_PREFIXES)):
                    query_reason = query_reason or f"-Xclang {args[i]} compiles nothing"
                ir_flags.append(args[i])
                i += 1

    if query_reason:
        return Invocation("query", query_reason, tuple(sources), tuple(others),
                          opt_level, tuple(ir_flags), output, emits_object_only)
    if not sources and not others:
        reason = "no input files" if not has_verbose else "-v without inputs"
        return Invocation("empty", reason, (), (), opt_level, tuple(ir_flags), output)
    if not sources:
        return Invocation("link", "link-only call: no source to compile", (),
                          tuple(others), opt_level, tuple(ir_flags), output)
    return Invocation("compile", "compiles sources", tuple(sources), tuple(others),
                      opt_level, tuple(ir_flags), output, emits_object_only)
