"""The code-size task's build step: after the user's own object is made,
build each decided candidate from the same bitcode and keep the smallest.

Called by the driver (``CompileStep.verify``) for a split compile only (the
candidates need the front end's bitcode).  Candidates that fail to build
are skipped; the user's object wins ties, so the output is never larger
than the user's level and the choice is the same for the same input.

Candidates are built several at once where make's jobserver has free slots
(:mod:`mirecc.util.jobserver`: never more than it allows), else ``size_jobs`` at
once (default 1).  The winner is remembered (:mod:`.winners`): a rebuild of the same TU builds
only the winning candidate, or none when the user's level won.

A TU whose own object has less than :data:`MIN_TEXT_BYTES` of ``.text`` is
not searched (configure's probe compiles: zlib's have 0 to 173 bytes); the
gate that says so, ``early.worth_searching``, imports only the ELF reader, so
that a probe imports neither this module nor its dataclasses.
Chosen on the committed labels (``heads/code-size/labels``, clang 14, the
library's first 10 pipelines): the 165 of 484 training modules under 1024
bytes gave 2,511 of the 486,520 bytes the search saves there (0.52%) for
12% of the compile time; the 24 of 159 held-out modules under it gave 240
of 51,975 (0.46%).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirecc.frontend.compiler import clang_major
from mirecc.util.fsutil import atomic_write_bytes
from mirecc.util.jobserver import slots

from mirecc.tasks.code_size.build import (MIN_TEXT_BYTES, POLICY, CandidateError,
                                          build_candidate, build_policy, builds_shared_code,
                                          gate_keeps, object_sizes, opt_beside, run_step,
                                          tool_beside)


@dataclass
class Verified:
    """What the build step did: ``sizes`` (candidate -> loadable bytes: every
    allocated section; the user's own level as ``"-O<level>"``), ``text``
    (candidate -> .text bytes, shown beside), ``winner``, ``skipped``
    (candidate -> why), ``own`` (the user's level's name), ``built`` (the
    candidates built by this compile: all of them, or only the winner when
    the winner cache knew it: ``from_cache``)."""

    sizes: dict
    winner: str
    skipped: dict
    own: str = ""
    built: int = 0
    from_cache: bool = False
    from_twin: bool = False     # the winner came from a twin compile (winners.twin_key)
    from_store: bool = False    # the winner came from the team store (mirecc.store)
    store_counts: dict = field(default_factory=dict)   # store.* counters of this compile
    text: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)   # the task's step_counters of this compile
    note: str = ""          # why nothing was built, when that is the reason
    reason: str = ""        # its code, as the gate gives it (too-small, predicted-no-gain)

    def to_dict(self) -> dict:
        return asdict(self)


def smallest_object(decision, report, split, extra: list[str], workdir: str,
                    config=None) -> Verified:
    """Build the pipelines ``decision.value["verify"]`` names (the installed
    library's); replace the user's object (``split.output``, already made)
    by the smallest candidate when it is strictly smaller.  The winner cache
    lives in ``config``'s cache directory (caching off: every candidate is
    built).  ``report``: the TU's (its level, its bitcode's SHA-256)."""
    own = f"-O{report.opt_level}"
    own_sizes = _shipped(split.output, split)
    if own_sizes[1] < MIN_TEXT_BYTES:
        # before anything is loaded: configure's probes pay only this
        return Verified({own: own_sizes[0]}, own, {}, own, built=0, text={own: own_sizes[1]},
                        note=f"not searched: the object has {own_sizes[1]} bytes of .text, "
                             f"under {MIN_TEXT_BYTES} (too small to gain)", reason="too-small")
    # lazy: the head's spec and the winner cache, only for an object worth a search
    from mirecc.tasks.code_size.head import installed
    from mirecc.tasks.code_size.winners import (TEAM_KIND, WinnerCache, shared_key, tools,
                                                travelling_flags, twin_key, winner_key)

    spec, major = installed(config), str(clang_major(split.compiler))
    library = spec["library"].get(major, {})
    names = list(decision.value["verify"])
    gated = None
    if getattr(config, "size_gate", True):
        with open(split.output, "rb") as fh:
            gated = gate_keeps(spec["gate"].get(major), fh.read(), names)
    gate_skipped = {}
    if gated is not None:
        threshold = spec["gate"][major]["threshold"]
        gate_skipped = {name: f"not built: the object gate gives it a {gated[1][name]:.2f} "
                              f"chance to gain (threshold {threshold:g})"
                        for name in names if name not in gated[0]}
        names = gated[0]
        if not names:
            return Verified({own: own_sizes[0]}, own, gate_skipped, own, built=0,
                            text={own: own_sizes[1]},
                            note="not searched: the object gate predicts that no candidate "
                                 "within the budget makes this object smaller",
                            reason="predicted-no-gain")
    passes = {name: library[name] for name in names if name in library}
    calls = decision.value.get("calls") or {}
    if calls and POLICY in names:
        # the inlining policy's candidate, named in the keys by its decisions
        passes[POLICY] = _Policy(calls, config)
    candidates = [str(passes.get(n, n)) for n in names]
    cache = key = twin = code = None
    root = config.cache_root() if config is not None else None
    if config is not None and config.cache:
        cache = WinnerCache(root)
        key = winner_key(report.bitcode_sha256,
                         split.backend_command(extra, output="-", bitcode="-"),
                         opt_beside(split.compiler), candidates, root)
        known = cache.get(key)
        if known is not None:
            return _rebuild_winner(known, split, extra, workdir, own, passes, own_sizes)
        code = _code_digest(split)
        twin = twin_key(code, opt_beside(split.compiler), split.compiler, candidates, root) \
            if code is not None else None
        known = cache.get(twin) if twin is not None else None
        if known is not None:
            verified = _rebuild_winner(_as_twin(known, own), split, extra, workdir, own,
                                       passes, own_sizes)
            verified.from_twin = True
            # this TU's own record: its rebuild knows its winner
            cache.put(key, verified.winner, verified.sizes, verified.skipped, verified.text)
            return verified
    team = shared = ids = None
    if config is not None and getattr(config, "store", None):
        from mirecc.store.team import team_store  # lazy: only with a team store configured

        code = code if code is not None else _code_digest(split)
        team = team_store(config) if code is not None else None
    if team is not None:
        ids = tools(split.compiler, opt_beside(split.compiler), root)
        shared = shared_key(code, ids, travelling_flags(
            split.backend_command(extra, output="-", bitcode="-")), candidates)
        known = team.get(TEAM_KIND, shared, ids, f"the code-size winner of {split.source.path}")
        verified = None if known is None else _from_store(
            known, team, split, extra, workdir, own, passes, own_sizes)
        if verified is not None:
            verified.store_counts = team.counts
            if cache is not None:
                cache.put(key, verified.winner, verified.sizes, verified.skipped, verified.text)
                if twin is not None:   # its static or shared copy takes it, as from a search
                    cache.put(twin, verified.winner, verified.sizes, verified.skipped,
                              verified.text)
            return verified
    sizes, text, skipped, paths = {own: own_sizes[0]}, {own: own_sizes[1]}, dict(gate_skipped), {}
    def build(item):
        number, name = item
        try:
            path = _build(split, name, passes, extra, workdir, f"size{number}")
            return name, path, _shipped(path, split), None
        except CandidateError as exc:
            return name, None, None, str(exc)

    # at once: make's free jobserver slots, else size_jobs (each candidate's
    # files have their own names; the results go in library order)
    with slots(len(names), getattr(config, "size_jobs", 1) if config is not None else 1) as n:
        if n > 1:
            from concurrent.futures import ThreadPoolExecutor  # lazy: only with free slots
            with ThreadPoolExecutor(max_workers=n) as pool:
                built = list(pool.map(build, enumerate(names)))
        else:
            built = [build(item) for item in enumerate(names)]
    for name, path, measured, why in built:
        if why is not None:
            skipped[name] = why
        else:
            sizes[name], text[name] = measured
            paths[name] = path
    # the fewest loadable bytes; among equals the user's level, then library order
    winner = min(sizes, key=lambda name: (sizes[name], name != own))
    if winner != own:
        _replace_output(split, paths[winner])
    if cache is not None:
        cache.put(key, winner, sizes, skipped, text)
        if twin is not None:
            cache.put(twin, winner, sizes, skipped, text)
    if team is not None:
        # a whole search's record (a twin's or the store's verdict is not one)
        team.put(TEAM_KIND, shared, ids, {"winner": winner, "sizes": sizes, "skipped": skipped,
                                         "text": text, "own": own})
    counts = {"inline-policy": int(POLICY in sizes), "inline-policy-kept": int(winner == POLICY)} \
        if POLICY in names else {}
    return Verified(sizes, winner, skipped, own, built=len(names), text=text,
                    store_counts=team.counts if team is not None else {}, counts=counts)


class _Policy:
    """The inlining policy's candidate (:data:`.build.POLICY`): its call-site
    decisions; as text (the winner cache's and the team store's keys) its
    name and their digest."""

    def __init__(self, calls: dict, config):
        from hashlib import sha256  # lazy: only with the policy's candidate

        self.calls, self.config = calls, config
        self.text = f"{POLICY} " + sha256(
            repr(sorted(calls.items())).encode()).hexdigest()[:16]

    def __str__(self) -> str:
        return self.text


def _build(split, name: str, passes: dict, extra: list[str], workdir: str, tag: str) -> str:
    """The object of candidate ``name`` (``passes``: name -> its candidate
    text, or the policy's :class:`_Policy`); CandidateError when it cannot
    be built."""
    candidate = passes.get(name)
    if candidate is None:
        raise CandidateError(f"{name}: not in the installed library")
    if isinstance(candidate, _Policy):
        # lazy: the plugin's decisions file, only for the policy's candidate
        from mirecc.plugin.decisions import InjectError, with_calls

        if candidate.config is None:
            raise CandidateError(f"{POLICY}: no configuration to find the pass plugin with")
        try:
            flags = with_calls(extra, candidate.calls, split.compiler, candidate.config)
        except InjectError as exc:
            raise CandidateError(str(exc)) from None
        return build_policy(split, flags, workdir, tag)
    return build_candidate(split, candidate, extra, workdir, tag)


def _shipped(path: str, split) -> tuple[int, int]:
    """(shipped bytes, .text bytes) of an object of ``split``'s compile
    (:func:`.build.object_sizes`; its link counted as a shared library's
    where the compile makes position-independent code for one)."""
    return object_sizes(path, builds_shared_code(split.args))


def _code_digest(split) -> str | None:
    """The module's code digest (:func:`.winners.code_digest`) from its
    bitcode's IR text; None when the IR cannot be read (then there is no
    twin and no team store entry)."""
    from mirecc.tasks.code_size.winners import code_digest  # lazy: as in smallest_object

    try:
        text = run_step([tool_beside(split.compiler, "llvm-dis"), "-o", "-",
                         split.bitcode_path], "the bitcode")
    except CandidateError:
        return None
    return code_digest(text)


def _from_store(known: dict, team, split, extra: list[str], workdir: str, own: str,
                passes: dict, own_sizes: tuple[int, int]) -> Verified | None:
    """A team store record used: it must describe this compile (the user's
    own object has the size it gives, its winner is the smallest of its
    sizes), and its winner, built here, must have the size it gives and be
    smaller than the user's object.  None (counted as rejected): the
    search runs as without a store."""
    sizes, winner = known.get("sizes"), known.get("winner")
    what = f"the code-size winner of {split.source.path}"
    if not (isinstance(sizes, dict) and isinstance(winner, str) and winner in sizes
            and all(isinstance(v, int) and not isinstance(v, bool) for v in sizes.values())
            and isinstance(known.get("skipped", {}), dict)):
        team.reject("a record without a winner and its sizes (damaged)", what)
        return None
    if sizes.get(own) != own_sizes[0]:
        team.reject(f"it gives {sizes.get(own)} bytes for {own}, this compile's object has "
                    f"{own_sizes[0]} (another compile's record)", what)
        return None
    if min(sizes.values()) != sizes[winner]:
        team.reject(f"its winner {winner} is not the smallest of its sizes", what)
        return None
    text = {n: v for n, v in known.get("text", {}).items() if isinstance(v, int)} \
        if isinstance(known.get("text"), dict) else {}
    skipped = {n: str(v) for n, v in known.get("skipped", {}).items()}
    if winner == own:
        team.used()
        return Verified(dict(sizes), own, skipped, own, built=0, from_cache=True,
                        from_store=True, text=text)
    if winner not in passes:
        team.reject(f"its winner {winner} is not in this build's candidates", what)
        return None
    try:
        path = _build(split, winner, passes, extra, workdir, "size-winner")
        measured = _shipped(path, split)
    except CandidateError as exc:
        team.reject(f"its winner {winner} does not build here: {exc}", what)
        return None
    if measured[0] != sizes[winner] or measured[0] >= own_sizes[0]:
        team.reject(f"its winner {winner} has {measured[0]} bytes built here, the record "
                    f"gives {sizes[winner]}", what)
        return None
    team.used()
    _replace_output(split, path)
    sizes = dict(sizes)
    text[winner] = measured[1]
    return Verified(sizes, winner, skipped, own, built=1, from_cache=True, from_store=True,
                    text=text)


def _as_twin(known: dict, own: str) -> dict:
    """A twin's record as this TU's: only its verdict (the winner, or the
    user's level) carries over; the candidates it measured are not built
    here, and their sizes, the twin's, are not shown as this TU's."""
    winner = own if known["winner"].startswith("-O") else known["winner"]
    note = (f"not built: a compile of the same code (its static or shared copy) "
            f"kept {'its own level' if winner == own else winner}")
    skipped = dict(known.get("skipped", {}))
    skipped.update({name: note for name in known["sizes"]
                    if name != winner and not name.startswith("-O")})
    return {"winner": winner, "skipped": skipped, "text": {},
            "sizes": {winner: known["sizes"][winner]} if winner != own else {}}


def _rebuild_winner(known: dict, split, extra: list[str], workdir: str, own: str,
                    passes: dict, own_sizes: tuple[int, int]) -> Verified:
    """A rebuild: only the remembered winner is built (none when it is the
    user's level), and it still replaces the user's object only when it is
    strictly smaller now."""
    sizes, skipped, winner = dict(known["sizes"]), dict(known.get("skipped", {})), known["winner"]
    text = dict(known.get("text", {}))
    sizes[own], text[own] = own_sizes
    if winner == own:
        return Verified(sizes, own, skipped, own, built=0, from_cache=True, text=text)
    try:
        path = _build(split, winner, passes, extra, workdir, "size-winner")
        sizes[winner], text[winner] = _shipped(path, split)
    except CandidateError as exc:
        skipped[winner] = str(exc)
        del sizes[winner]
        text.pop(winner, None)
        return Verified(sizes, own, skipped, own, built=1, from_cache=True, text=text)
    if sizes[winner] >= sizes[own]:
        return Verified(sizes, own, skipped, own, built=1, from_cache=True, text=text)
    _replace_output(split, path)
    return Verified(sizes, winner, skipped, own, built=1, from_cache=True, text=text)


def _replace_output(split, path: str) -> None:
    # a copy renamed over the output: the work directory may be on another
    # file system
    with open(path, "rb") as fh:
        atomic_write_bytes(Path(split.output), fh.read())
