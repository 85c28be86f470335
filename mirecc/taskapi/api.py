"""The task interface: what a decision task declares, and what its heads do.

A task is one folder, ``mirecc/tasks/<task>/``:

- its ``__init__.py`` declares the task with :class:`Task` (standard library
  only: the driver reads the declarations on every optimised compile);
- its driver side (the head class, how decisions reach the compile, what
  ``--explain`` adds) is imported only when a head of the task is loaded;
- its ``offline/`` part (dataset, training, benchmark) is never imported by
  the driver;
- its shipped head is ``heads/<name>/`` (``spec.yaml`` with ``task: <name>``).

Adding a task is that folder plus one line in :mod:`mirecc.taskapi.registry`.

A head (``Task.head``, built as ``cls(directory, spec_dict, config)``) has
``name``, ``version`` (its files and the settings it reads: part of the cache
key), ``applies_to(request)``, ``why_not(request)`` and

- ``rank(ctx) -> list[Ranking]``: for each target of the TU (a loop, a
  kernel), every candidate decision the head can score, best first; the
  compiler's own choice is always among them (an empty ``value``).  This is
  what verification and tuning consume;
- ``decide(ctx, rankings) -> list[Decision]``: the head's policy over its
  rankings (for example: act only where a low quantile still promises a
  gain); it may raise :class:`NoDecision`.

``ctx`` is the one per-TU context (:class:`mirecc.taskapi.context.TUContext`): one
graph, one embedding, one loop table, shared by every head.

Only the standard library is imported here.
"""
from __future__ import annotations

from mirecc.taskapi.settings import Setting, as_bool as parse_bool  # noqa: F401


class Command(tuple):
    """A ``mire`` subcommand a task brings, ``(name, module, help,
    description)``: ``module`` has ``add_arguments(parser)`` and ``run(args)``
    and is imported only when the subcommand runs.  (A plain tuple: the
    driver reads the declarations on every compile, and ``typing`` costs
    ~40 ms to import.)"""
    __slots__ = ()

    def __new__(cls, name: str, module: str, help: str, description: str):
        return super().__new__(cls, (name, module, help, description))

    name = property(lambda self: self[0])
    module = property(lambda self: self[1])
    help = property(lambda self: self[2])
    description = property(lambda self: self[3])


class BenchSuite:
    """A ``mire bench <name>`` suite a task brings: ``run`` and ``arguments``
    (``"module:function"``; the latter adds its options to the bench parser,
    shared by suites that name the same function); ``variant``: the value of
    ``--tune-task`` that selects this suite where several share a name."""
    __slots__ = ("name", "run", "summary", "arguments", "variant")

    def __init__(self, name: str, run: str, summary: str, arguments: str | None = None,
                 variant: str | None = None):
        self.name, self.run, self.summary = name, run, summary
        self.arguments, self.variant = arguments, variant


class Task:
    """A decision task's declaration.

    ``languages``: the clang languages its heads may apply to (``c``,
    ``c++``, ``cl``); a head's ``spec.yaml`` names its own subset.
    ``settings``: the configuration keys it adds.
    ``applied_when``: the Config field that makes its decisions change the
    compile (``None``: advisory, never applied): when it is off, decisions
    are only recorded, so a build that neither explains nor records does not
    run the task at all.
    ``head``: ``"module:Class"`` of the head class (``None``: no head yet;
    its decisions come from decisions profiles only).
    ``inject``: ``"module:function"``: ``function(decisions_by_source,
    compiler, config) -> list[str]``, the flags that apply the applied
    decisions in the compile of those sources (a decisions file and a pass
    plugin, later a linked object or a launcher record); ``None`` when its
    decisions never change the compile.  Tasks that declare the same
    function get one call with all their decisions (one plugin, one file).
    ``explain``: ``"module:function"``: ``function(result, ctx) -> result``,
    adding what only ``--explain`` pays for (source lines, the compiler's
    own choice); ``None`` for nothing more.
    ``verify``: ``"module:function"``: ``function(decision, report, split,
    extra, workdir, config)``, run by the driver after the object of a
    split compile is made (``report``: the TU's, with its level and its
    bitcode's SHA-256), for each applied decision: it may build
    candidates from the front end's bitcode and replace the object with a
    better one it measured (code size; ``config``: the build's settings,
    its cache directory); it returns an object with ``winner``, ``own``
    and ``to_dict()`` (what ``--explain`` shows); ``None`` for tasks whose
    flags are the whole decision.
    ``gate``: ``"module:function"``: ``function(object_path, config,
    compiler) -> str | None``, for a task with ``verify``: asked with the
    user's own object of a split compile before the IR is read; a reason (a
    short code) when the build step could not pay on it (code size: too
    little code, or no candidate its object gate expects to gain), ``None``
    when it could.  When every head with a use in the compile belongs to a task
    whose gate gives a reason, the IR is not read at all: the user's own
    object is the answer (configure's probes pay one compile).
    ``early``: ``"module:function"``: ``function(split, config, workdir)
    -> (key, commands, output) | None``, for a task with ``gate``: the
    first thing its build step would build from the front end's bitcode
    (code size: the first candidate), run one command after the other in
    a job slot that is free (a serial make's idle core, a free jobserver
    slot) while the user's own compile and the gate run; the build step
    takes ``output`` through ``split.early.take(key)`` instead of building
    it, and whatever it does not take is stopped.  ``None``: nothing early.
    ``link``: ``"module:NAME"``: the task's step at a link-only call into a
    file (no source; the -O level the task names, its decisions on; the
    first task whose step wants the link takes it): an object with
    ``wants(args, config) -> bool``, asked before the user's link (cheap:
    nothing is run when no task wants the link), and ``link(command,
    output, config, own_link) -> (exit status, counters, verified or
    None)``, which runs the user's link through ``own_link()`` (once; it
    may build candidates beside it) and may replace ``output`` by a better
    one it measured (code size: links with ``-flto``); ``verified`` is shown
    by ``--explain`` as a build step's is.
    ``plugin_entry``: ``"module:function"``: ``function(source, decisions)
    -> {key: value}``, the task's part of the source's module entry in the
    plugin's decisions file (``passes/plugin/FORMAT.md``), for tasks
    whose ``inject`` is :func:`mirecc.plugin.decisions.inject`.
    ``attribute``: ``"module:function"``: ``function(decisions, split,
    extra) -> decisions``, called by the driver when a decided compile's
    object differs from the user's and more than one decision went in
    through the flags ``extra``: it tells which of this task's applied
    decisions changed the build (the rest: ``applied`` False, with
    ``same_as_compiler`` where the compiler chose the same); ``None``: the
    object's change counts for every decision.
    ``profile``: ``"module:NAME"``: the task's kind of decisions-profile
    entry (a :class:`mirecc.taskapi.profile.ProfileKind`: how its targets and values
    are written, which digest an entry carries, the ``mire tune`` site of a
    decision); ``None``: its decisions take no profile entries.
    ``front_end``: for a task of another front end than clang's (``cuda``:
    ``mirecc-nvcc``), the module that front end drives (for CUDA: where
    launches can be set, the plans, the rewritten command); ``None``: none.
    ``commands``: the ``mire`` subcommands it brings (:class:`Command`);
    ``bench``: its ``mire bench`` suites (:class:`BenchSuite`).
    ``measured``: one sentence: the measured effect of forcing its
    decisions on held-out work, and the command or page it comes from.
    ``opt_levels``: the -O levels (``"2"``, ``"s"``, ``"fast"``; ``"0"``
    for none) at which the task's heads decide; a compile at another level
    does not read its IR for this task.  ``None``: any level.
    """

    __slots__ = ("name", "languages", "settings", "applied_when", "head", "inject",
                 "explain", "verify", "gate", "early", "link", "attribute", "plugin_entry", "profile", "front_end", "commands", "bench", "summary", "opt_levels", "measured")

    def __init__(self, name: str, *, summary: str, languages, head: str | None,
                 settings: tuple = (), applied_when: str | None = None,
                 inject: str | None = None, explain: str | None = None,
                 verify: str | None = None, gate: str | None = None,
                 early: str | None = None, link: str | None = None,
                 attribute: str | None = None,
                 plugin_entry: str | None = None, profile: str | None = None,
                 front_end: str | None = None, commands: tuple = (),
                 bench: tuple = (),
                 opt_levels: tuple | None = None, measured: str = ""):
        self.name = name
        self.summary = summary          # one line for --mirecc-help
        # what its decisions did on work they were not fitted to, with where
        # the figure comes from (--mirecc-help prints it)
        self.measured = measured
        self.languages = frozenset(languages)
        self.settings = tuple(settings)
        self.applied_when = applied_when
        self.head = head
        self.inject = inject
        self.explain = explain
        self.verify = verify
        self.gate = gate
        self.early = early
        self.link = link
        self.attribute = attribute
        self.plugin_entry = plugin_entry
        self.profile = profile
        self.front_end = front_end
        self.commands = tuple(commands)
        self.bench = tuple(bench)
        self.opt_levels = opt_levels

    def applies(self, config) -> bool:
        """Would this task's decisions change the compile under ``config``?"""
        return self.applied_when is not None and bool(getattr(config, self.applied_when, False))

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


def load_attribute(spec: str):
    """``"package.module:name"`` -> the object (imported on first use)."""
    import importlib

    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


class HeadError(Exception):
    """A head directory is unusable (the message names the file)."""


class NoDecision(Exception):
    """Raised by a head when it has nothing to decide for this TU.

    ``str()`` is the one-line reason ``--explain`` shows; ``code`` the stable
    reason code counted by ``mire stats`` (see :mod:`mirecc.reasons`)."""

    def __init__(self, message: str, code: str = "no-decision"):
        super().__init__(message)
        self.code = code
