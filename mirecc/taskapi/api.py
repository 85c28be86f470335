"""The task interface: what a decision task declares, and what its heads do.

A task is one folder, ``mirecc/tasks/<task>/``:

- its ``__init__.py`` declares the task, a subclass of :class:`Task` whose
  class attributes are its facts and whose methods are its hooks (standard
  library only: the driver reads the declarations on every optimised
  compile; a hook imports the task's own modules when it is called);
- its driver side (the head class, how decisions reach the compile, what
  ``--explain`` adds) is imported only when a head of the task is loaded;
- its ``offline/`` part (dataset, training, benchmark) is never imported by
  the driver;
- its shipped head is ``heads/<name>/`` (``spec.yaml`` with ``task: <name>``).

Adding a task is that folder plus one line in :mod:`mirecc.taskapi.registry`.

A head (the class ``Task.head_class()`` returns, built as
``cls(directory, spec_dict, config)``; :class:`mirecc.taskapi.onnxhead.OnnxHead`
is the shared base) has
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
    """A ``mire bench <name>`` suite a task brings.  ``load``: a function of no
    arguments, defined in the task's declaration, that imports the suite's
    modules (relatively, inside its body) and returns ``(run,
    add_arguments)``: ``run(args) -> int`` runs the suite, ``add_arguments(
    parser)`` adds its options to the bench parser (once, however many suites
    return the same function; None: no options); ``mire bench`` calls it
    only when it builds its own parser or runs the suite.  ``variant``: the
    value of ``--tune-task`` that selects this suite where several share a
    name."""
    __slots__ = ("name", "load", "summary", "variant")

    def __init__(self, name: str, load, summary: str, variant: str | None = None):
        self.name, self.load, self.summary, self.variant = name, load, summary, variant


class Task:
    """A decision task's declaration: its facts as class attributes, its
    hooks as methods.  A task subclasses this in its folder's
    ``__init__.py`` (standard library only: the driver reads every
    declaration on each optimised compile) and overrides what it has; each
    default below is "the task has none".  A hook imports its task's own
    modules inside its body, so that only a compile that calls it pays for
    them.  ``TASKS`` in the folder holds one instance per task.
    """

    #: the ``task:`` a head's ``spec.yaml`` names
    name = ""
    #: one line for ``--mirecc-help``
    summary = ""
    #: what its decisions did on work they were not fitted to, with where
    #: the figure comes from (``--mirecc-help`` prints it)
    measured = ""
    #: the clang languages its heads may apply to (``c``, ``c++``, ``cl``;
    #: ``cuda``: ``mirecc-nvcc``'s); a head's ``spec.yaml`` names its subset
    languages: frozenset = frozenset()
    #: the configuration keys it adds (:class:`Setting`)
    settings: tuple = ()
    #: the Config field that makes its decisions change the compile (None:
    #: advisory, never applied); while off, decisions are only recorded, so a
    #: build that neither explains nor records does not run the task at all
    applied_when: str | None = None
    #: the -O levels (``"2"``, ``"s"``, ``"fast"``; ``"0"`` for none) its
    #: heads decide at; a compile at another level does not read its IR for
    #: this task (None: any level)
    opt_levels: tuple | None = None
    #: the reason codes its heads raise (:class:`NoDecision`), code -> words:
    #: ``mire stats`` counts them as ``skip.<code>`` (one table, each code
    #: declared by its owner)
    reasons: dict = {}
    #: why its build step (:meth:`compile_step`: verify, gate) built nothing for a
    #: TU, code -> words: ``mire stats``' ``verified.<task>.<code>``
    step_reasons: dict = {}
    #: what its build step counts of a TU besides (``Verified.counts``), code
    #: -> words: ``mire stats``' ``verified.<task>.<code>``
    step_counters: dict = {}
    #: the ``mire`` subcommands it brings (:class:`Command`)
    commands: tuple = ()
    #: its ``mire bench`` suites (:class:`BenchSuite`)
    bench: tuple = ()

    # ------------------------------------------------------------------ hooks

    def head_class(self):
        """The head class, built as ``cls(directory, spec_dict, config)``;
        None: no head yet (decisions come from decisions profiles only)."""
        return None

    def injection(self):
        """``function(decisions_by_source, compiler, config) -> list[str]``:
        the flags that apply the applied decisions in the compile of those
        sources (a decisions file and a pass plugin, a linked object, a
        launcher record); None when its decisions never change the compile.
        Tasks that return the same function get one call with all their
        decisions (one plugin, one decisions file).  A tuple of functions:
        its decisions reach each (the plugin's and flags of its own)."""
        return None

    def plugin_entry(self, source: str, decisions: list) -> dict:
        """For a task whose :meth:`injection` is the plugin's
        (:func:`mirecc.plugin.decisions.inject`): its part of ``source``'s
        module entry in the decisions file (``passes/plugin/FORMAT.md``)."""
        return {}

    def explain(self, result, ctx):
        """``result`` with what only ``--explain`` pays for (source lines, the
        compiler's own choice); ``ctx``: the TU's context."""
        return result

    def compile_step(self):
        """Its step in a compile of its languages beside the heads' pipeline
        (a :class:`CompileStep`: code size's build step after a split
        compile's object; CUDA's launch planner in ``mirecc-nvcc``); None:
        none."""
        return None

    def link_step(self):
        """Its part of a call that links (a :class:`LinkStep`: the arguments
        a linking call adds, a step that takes a link-only call); None:
        none."""
        return None

    def profile_kind(self):
        """Its kind of decisions-profile entry (a
        :class:`mirecc.taskapi.profile.ProfileKind`); None: its decisions take
        no profile entries."""
        return None

    def run_part(self):
        """Its part of ``mire run``, made fresh for each run: a
        :class:`mirecc.launch.part.RunPart` (its options, the variables and
        command prefix the program runs with, what it sets on the machine
        for the run and puts back); None: it takes no part."""
        return None

    def judged(self, kinds: list, out, models: dict):
        """Its leave-one-program-out rankings of each representation in
        ``kinds`` on its labels, for ``mire bench encoder``: a
        :class:`mirecc.learn.judge.Judged` or a list of them (``out``: the
        directory for its files; ``models``: more encoders, name -> directory).
        Only a task that overrides it is judged."""
        raise NotImplementedError

    # ------------------------------------------------------------------ facts

    def has(self, hook: str) -> bool:
        """Does this task override ``hook`` (a method name above)?  Answered
        from the class alone: nothing of the task is imported."""
        return getattr(type(self), hook) is not getattr(Task, hook)

    def applies(self, config) -> bool:
        """Would this task's decisions change the compile under ``config``?"""
        return self.applied_when is not None and bool(getattr(config, self.applied_when, False))

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


class CompileStep:
    """A task's step in a compile (``Task.compile_step()``); a task overrides
    what it has, each default below is "none".  For a split compile of
    clang's (:mod:`mirecc.tu.compile`): :meth:`verify`, the build step after
    the object is made, with :meth:`gate` and :meth:`early` before it.  A
    step of another compiler's driver (``mirecc-nvcc``'s launch planner)
    adds the methods that driver calls."""

    def verify(self, decision, report, split, extra: list, workdir: str, config):
        """Run after the object of a split compile is made, for each applied
        decision (``report``: the TU's, with its level and its bitcode's
        SHA-256): it may build candidates from the front end's bitcode and
        replace the object with a better one it measured; returns an object
        with ``winner``, ``own`` and ``to_dict()`` (what ``--explain``
        shows).  Only a step that overrides it is a build step."""
        raise NotImplementedError

    def gate(self, object_path: str, config, compiler: str) -> str | None:
        """For a build step: asked with the user's own object of a split
        compile before the IR is read; a short reason code when the build
        step could not pay on it, None when it could.  When every head with
        a use in the compile belongs to a task whose gate gives a reason, the
        IR is not read at all (configure's probes pay one compile)."""
        return None

    def early(self, split, config, workdir: str):
        """For a step with :meth:`gate`: ``(key, commands, output)``, the first
        thing its build step would build from the front end's bitcode, run
        in a free job slot while the user's own compile and the gate run (the
        build step takes ``output`` through ``split.early.take(key)``); None:
        nothing early."""
        return None

    def has(self, method: str) -> bool:
        """Does this step override ``method``?"""
        return getattr(type(self), method, None) is not getattr(CompileStep, method, None)


class LinkStep:
    """A task's part of a call that links (``Task.link_step()``); each
    default below is "none"."""

    #: flag prefixes without one of which the step neither adds arguments
    #: nor wants a link (empty: any call): the compiled client runs a link
    #: with none of them itself (:mod:`mirecc.driver.rules`)
    needs_flags: tuple = ()

    def has(self, method: str) -> bool:
        """Does this step override ``method``?"""
        return getattr(type(self), method, None) is not getattr(LinkStep, method, None)

    def active(self, config) -> bool:
        """Does the step act under ``config`` at all (asked after the task
        applies: a task may apply for its compiles while its link step
        waits for a setting of its own)?"""
        return True

    def arguments(self, args: list, config, compiler: str) -> list:
        """Arguments a call that links (``args``: the user's) adds at its end
        when the task applies (a runtime archive the task's objects call
        into); raises OSError-like errors with the problem."""
        return []

    def wants(self, args: list, config) -> bool:
        """Does the step take this link-only call into a file (no source; a
        level the task names, its decisions on; the first task whose step
        wants the link takes it)?  Asked before the user's link."""
        return False

    def link(self, command: list, output: str, config, own_link):
        """Run the user's link through ``own_link()`` and maybe replace
        ``output`` by a better one it measured: (exit status, counters,
        what ``--explain`` shows or None)."""
        raise NotImplementedError


class HeadError(Exception):
    """A head directory is unusable (the message names the file)."""


class NoDecision(Exception):
    """Raised by a head when it has nothing to decide for this TU.

    ``str()`` is the one-line reason ``--explain`` shows; ``code`` the stable
    reason code counted by ``mire stats`` (its owner declares it: a task in
    ``Task.reasons``; :func:`mirecc.tu.stats.reason_table` lists them all)."""

    def __init__(self, message: str, code: str = "no-decision"):
        super().__init__(message)
        self.code = code
