"""One compiler call through mirecc, from the command to the exit status
(ccache's ``Context``): :class:`CompileContext` is made once per call by
the driver and carries what the user asked, what was read once (the
configuration, the compiler, the front end's split of the command, why the
compile cannot be split), the TUs' reports and decisions, the counters and
how the call ended, through every step:

    classify (driver) -> front end and per-TU pipeline (:mod:`.mlpath`)
    -> tasks' flags and build steps -> the compile (:mod:`.compile`)
    -> counters, records, ``--explain``.

Each field has one owner, the step that sets it; the others read it.  The
records it holds (a TU's ``TUReport``, the direct-mode manifests written
after the compile, ``PendingManifest``) are the ML path's
(:mod:`mirecc.tu.mlpath`).

Standard library only, and only ``os`` at that: every call makes one.
"""
from __future__ import annotations

import os


class CompileContext:
    """One call's state.  The driver sets what the user asked (``argv``,
    ``cxx``; the compiler it drives, ``front``, a
    :class:`mirecc.frontend.compiler.Compiler`; ``args`` without mirecc's
    own options, ``explain``'s format, ``action``), the ``config``, the
    ``compiler`` (and where the choice came from, ``chosen``), the
    ``final`` command (launcher, compiler, arguments and what linking tasks
    add), the command with its response files expanded (``expanded``), its
    classification (``inv``), the sources not looked at (``skipped``) and
    why the compile cannot be split (``split_blocked``, None when it can).
    The per-TU path sets the rest."""

    __slots__ = (
        # what the user asked, and what the driver read once (classify)
        "argv", "cxx", "front", "args", "explain", "action", "config", "compiler", "chosen",
        "final", "expanded", "inv", "skipped", "split_blocked", "stdin_data",
        # the per-TU path: where its files go, its cache keys
        "workdir", "version", "manifests", "manifest_key",
        # what it found and decided (mlpath)
        "reports", "extra_args", "warnings", "split", "own", "early", "pending",
        "verified", "kept_object", "kept_dep_file", "gated_manifest", "plain",
        # counters of this call (mire stats), and how the ML path ended
        "counts", "fallback", "fallback_code", "source_may_be_broken",
    )

    def __init__(self, argv: list[str], cxx: bool, front):
        self.argv, self.cxx = argv, cxx
        self.front = front                       # the Compiler (mirecc.frontend.compilers)
        self.args: list[str] | None = None     # None until mirecc's options are read
        self.explain: str | None = None         # --explain's format ("text", "json", ...)
        self.action: str | None = None
        self.config = None
        self.compiler: str | None = None
        self.chosen = ""
        self.final: list[str] = []
        self.expanded: list[str] = []
        self.inv = None                          # frontend.cmdline.Invocation
        self.skipped: list[str] = []
        self.split_blocked: str | None = None
        self.stdin_data: bytes | None = None
        self.workdir = ""                        # holds the bitcode; made by the compile step
        self.version = ""                        # the pipeline key (tu.cache.pipeline_key)
        self.manifests = None                    # direct mode's manifests (tu.direct), if used
        self.manifest_key: str | None = None
        self.counts: dict = {}
        self.fallback: str | None = None         # why the ML path gave up (its warning)
        self.fallback_code: str | None = None    # and the reason code mire stats counts
        self.source_may_be_broken = False        # the IR run failed: clang will say why
        self.found()

    def found(self) -> None:
        """What the ML path finds, empty: set at the start, and again when
        it gives up (nothing it found reaches the build then)."""
        self.reports: list = []              # mlpath.TUReport, one per TU read
        self.extra_args: list[str] = []      # injected into the final compile
        self.warnings: list[str] = []        # non-fatal problems
        self.split = None                    # a frontend.clang.Split whose front end ran
        self.own = None                      # the user's own compile, started beside it
        self.early = None                    # work started in a free job slot (EarlyFrontEnd)
        self.pending: list = []              # mlpath.PendingManifest: written after the compile
        self.verified: dict = {}             # task -> what its build step did (CompileStep.verify)
        self.kept_object: bytes | None = None      # a direct hit's kept object (tu.objcache)
        self.kept_dep_file: bytes | None = None    # and the dependency file kept with it
        self.gated_manifest = None           # a TU whose gates answered (PendingManifest)
        self.plain = None                    # the call's plain entry in the team store

    def give_up(self, reason: str, code: str, ir_failed: bool = False) -> None:
        """The ML path gave up (``reason``: the warning's words, ``code``:
        the counter): what it found is dropped, except the user's own
        compile it started (it may still be the answer) and the early work
        (stopped by the caller)."""
        own, early = self.own, self.early
        self.found()
        self.counts = {}
        self.own, self.early = own, early
        self.fallback, self.fallback_code = reason, code
        self.source_may_be_broken = ir_failed

    @property
    def ok(self) -> bool:
        """Did the ML path end without giving up?"""
        return self.fallback is None

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def compiler_writes_stdout(self) -> bool:
        """Does clang print its result on stdout (-o -, -E, -M, --version,
        ...)?  Queries without -o do; link-only and compile calls write files."""
        inv = self.inv
        return inv is not None and (inv.output == "-" or (inv.kind == "query"
                                                          and inv.output is None))


def make_workdir() -> str:
    """A private directory under $TMPDIR for the call's bitcode (tempfile
    and shutil, with what they import, would cost ~14 ms on every compile
    that reads the IR)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(base, f"mirecc-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def remove_workdir(path: str) -> None:
    """Remove the work directory (flat: bitcode, a response file)."""
    if not path:
        return
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
    except OSError:
        pass
