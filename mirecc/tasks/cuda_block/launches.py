"""Where a CUDA kernel's thread-block shape can be set, and the plans that set it.

A kernel's thread-block shape is decided (from a decisions profile's
cuda-block entries, else, with ``apply_cuda_block``, the head's first shape:
:mod:`.head`) only where the source makes it a compile-time value whose
grid follows it:

* launches marked with mirecc/launch.h (MIRECC_BLOCK_X/Y(kernel, default)):
  the decision is a -DMIRECC_BLOCK_<kernel>_X/Y define;
* PolyBench-ACC's ``#define DIM_THREAD_BLOCK[_KERNEL_<n>]_X/Y <int>``, once
  and unconditionally in a file next to the .cu, where every launch that
  uses the macro derives that axis of its grid from it: nvcc compiles a
  copy of the .cu and its folder's headers in a temporary folder with those
  lines rewritten, the original folder first on the include path and
  ``#line`` naming the originals, so that everything else is the same;
* elsewhere, the knob that sets the block in ordinary CUDA code
  (:mod:`mirecc.frontend.knobs`: a macro, a ``const`` or a ``dim3`` literal), where every
  use of it moves with it and the shape fits the device: a -D where the
  source lets one set it (``#ifndef NAME``, an ``#ifdef RD_WG_SIZE..``
  chain), else the same rewritten copy, the value's text replaced.

Elsewhere the shape is reported with the reason (``--explain``), and a
profile entry is advisory.  Where the launches are and what sets their
shape is read by the front end (:mod:`mirecc.frontend.launches`,
:mod:`mirecc.frontend.knobs`); ``mirecc-nvcc`` (:mod:`mirecc.driver.nvcc`)
reaches the plans through the task's compile step, :data:`STEP`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mirecc.frontend import knobs
from mirecc.frontend.launches import AXES, BLOCK_MACRO, LAUNCH_HEADER, Scan
from mirecc.frontend.nvcc import NvccCommand
from mirecc.taskapi.api import CompileStep

TASK = "cuda-block"


ADVISORY = "not tunable: no MIRECC_BLOCK_X/Y (mirecc/launch.h) and no DIM_THREAD_BLOCK define"


@dataclass
class KernelBlock:
    """One kernel's block shape: as the source has it, and as compiled."""
    kernel: str
    #: "header", "define" (DIM_THREAD_BLOCK), a knob kind (:data:`.knobs.KINDS`:
    #: "macro-D", "macro-rewrite", "const", "dim3"), or None (advisory)
    tunable: str | None
    default: list[str]            # x, y as the source has them ("?" unknown)
    macros: list[str | None]      # per axis, the macro a decision sets
    shape: list[str]              # x, y in effect
    origin: str = "source default"
    note: str = ""
    #: the head's shapes for this kernel, best first ("XxY"), with their
    #: predicted speedups over the source's shape; empty without a head
    ranking: list[tuple[str, float]] = field(default_factory=list)
    #: a knob kind's knobs and limits (:class:`mirecc.frontend.knobs.KnobBlock`)
    knob: object | None = None
    #: why not tunable, as a counter's name (:class:`mirecc.frontend.knobs.Refused`'s code)
    code: str | None = None

    def refuses(self, value) -> str | None:
        """Why the block cannot take ``value`` (x, y) beyond the launch's own
        fixed axes, or None (only knob kinds have limits of their own)."""
        return self.knob.refuses(value) if self.knob is not None else None

    def describe(self) -> dict:
        out = {"shape": "x".join(self.shape), "origin": self.origin,
               "tunable": self.tunable, "advisory": self.tunable is None,
               "macros": [m for m in self.macros if m], "note": self.note}
        if self.code:
            out["refused"] = self.code
        return out


@dataclass
class SourcePlan:
    """The launch decisions for one CUDA source."""
    source: str
    scan: Scan
    blocks: dict[str, KernelBlock] = field(default_factory=dict)
    defines: list[str] = field(default_factory=list)     # -D for mirecc/launch.h launches
    rewrites: dict[str, int] = field(default_factory=dict)  # DIM_THREAD_BLOCK macro -> value
    #: knob values rewritten in the copy: (file, 0-based line, (start, end) columns, old, new)
    edits: list[tuple] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return bool(self.defines or self.rewrites or self.edits)


def _settable(scan: Scan) -> dict[str, str | None]:
    """Block-shape macro -> None when a decision may rewrite it, else why not."""
    why = {}
    for macro, defs in scan.defines.items():
        d = defs[0]
        if scan.included_from_outside:   # an outside file would reach the originals
            why[macro] = (f"{macro} cannot be set: a file outside the source's folder "
                          f"includes {os.path.basename(min(scan.included_from_outside))}")
        elif len(defs) > 1:
            why[macro] = f"{macro} is defined or undefined more than once"
        elif d.value is None or d.nested:
            why[macro] = f"{macro} is not a plain number defined unconditionally"
        elif os.path.dirname(d.file) != scan.folder:
            why[macro] = f"{macro} is defined outside the source's folder"
        else:
            why[macro] = None
    # changing a macro must change the grid with it, on the block's own axis only
    for launch in scan.launches:
        for axis, block, grid in zip(AXES, launch.block, launch.grid):
            if why.get(block, "") is None and not re.search(rf"\b{block}\b", grid):
                why[block] = (f"{block} cannot be set: the grid of the {launch.kernel} "
                              f"launch does not follow its block's {axis}")
            for used in BLOCK_MACRO.findall(grid):
                if used != block and why.get(used, "") is None:
                    why[used] = (f"{used} cannot be set: the grid of the {launch.kernel} "
                                 f"launch uses it for its {axis}")
    return why


def _kernel_block(name: str, scan: Scan, settable: dict, knobbed: dict | None = None
                  ) -> KernelBlock:
    launches = [launch for launch in scan.launches if launch.kernel == name]
    shapes = {tuple(launch.block) for launch in launches}
    written = list(next(iter(shapes))) if len(shapes) == 1 else ["?", "?"]
    if name in scan.header:
        marked = scan.header[name]
        default = [marked.get(a, written[i]) for i, a in enumerate(AXES)]
        macros = [f"MIRECC_BLOCK_{name}_{a.upper()}" if a in marked else None for a in AXES]
        return KernelBlock(name, "header", default, macros, list(default),
                           note="marked with " + LAUNCH_HEADER)
    values = {m: str(d[0].value) for m, d in scan.defines.items() if d[0].value}
    default = [values.get(w, w) for w in written]

    def advisory(why):
        return KernelBlock(name, None, default, [None, None], list(default),
                           note="advisory: " + why)
    if not launches:
        return advisory("no launch in this source")
    if knobbed is not None and not any(BLOCK_MACRO.fullmatch(w) for launch in launches
                                       for w in launch.block):
        return _knob_block(name, written, knobbed.get(name), scan)
    if len(shapes) > 1:
        return advisory("launched with different block shapes")
    macros = [w if settable.get(w, "") is None else None for w in written]
    if not any(macros):
        return advisory(next((settable[w] for w in written if settable.get(w)), ADVISORY))
    files = sorted({os.path.basename(scan.defines[m][0].file) for m in macros if m})
    note = f"tunable: {', '.join(m for m in macros if m)} in {', '.join(files)}"
    for axis, macro, w in zip(AXES, macros, written):
        if not macro:
            note += f"; its {axis} is fixed" + (f" ({settable[w]})" if settable.get(w) else "")
    return KernelBlock(name, "define", default, macros, list(default), note=note)


def _knob_block(name: str, written: list[str], found, scan: Scan) -> KernelBlock:
    """A launch whose shape neither the header nor a DIM_THREAD_BLOCK define
    sets: its knob (:mod:`mirecc.frontend.knobs`), or why it has none."""
    if isinstance(found, knobs.KnobBlock) and scan.included_from_outside and any(
            k and k.kind != "macro-D" for k in found.knobs):   # the copy would not reach it
        found = knobs.Refused("outside-include", "a file outside the source's folder "
                              f"includes {os.path.basename(min(scan.included_from_outside))}")

    if found is None or isinstance(found, knobs.Refused):
        why = str(found) if found is not None else "no launch in this source"
        return KernelBlock(name, None, list(written), [None, None], list(written),
                           note=f"advisory: not tunable: {why}",
                           code=found.code if found is not None else "no-launch")
    default = [str(k.value) if k else "1" for k in found.knobs]
    keys = [k.key if k else None for k in found.knobs]
    seen, hows = set(), []
    for k in found.knobs:
        if k and k.key not in seen:
            seen.add(k.key)
            hows.append(k.how())
    note = f"tunable ({knobs.KINDS[found.kind]}): " + "; ".join(hows)
    if keys[0] and keys[0] == keys[1]:
        note += "; square shapes only"
    elif not keys[1]:
        note += "; its y is fixed at 1"
    if found.divides:
        note += "; the shape must divide " + ", ".join(sorted({str(n) for _, n in found.divides}))
    return KernelBlock(name, found.kind, default, keys, list(default), note=note, knob=found)


@dataclass
class HeadChoice:
    """The head's shape for one kernel, in the form of a profile entry."""
    function: str
    value: dict
    reason: str

    @property
    def target(self) -> str:
        return self.function


def plan_source(scan: Scan, cmd: NvccCommand, entries=(), digests: dict | None = None,
                profile: str = "", rank=None, apply_head: bool = False,
                refusal: str | None = None) -> SourcePlan:
    """The block shape of each kernel of ``scan``'s source (those launched
    or marked there, and those of ``digests``), with the decisions profile's
    cuda-block ``entries`` for the source applied where the launch is
    tunable and the kernel's digest (in ``digests``) still matches.

    ``rank(plan)``: the head's shapes for the source, best first, with the
    predicted speedup and whether it clears the head's bar (it fills each
    tunable kernel's ``ranking``); with ``apply_head`` the first is set on
    every tunable kernel no profile entry decides, unless the head's gate
    refuses forcing (``refusal``, its spec's ``refuse_forcing``): then its
    shapes are decisions recorded, not applied, that say why."""
    settable = _settable(scan)
    plan = SourcePlan(scan.source, scan)
    names = [*scan.header, *(launch.kernel for launch in scan.launches), *(digests or {})]
    knobbed = _knobs(scan, cmd)
    plan.blocks = {n: _kernel_block(n, scan, settable, knobbed) for n in dict.fromkeys(names)}
    head: list = []
    if rank is not None and any(b.tunable for b in plan.blocks.values()):
        try:
            head = rank(plan)
        except Exception as exc:  # noqa: BLE001 - the head never breaks a build
            plan.reasons.append(f"head {TASK}: no ranking ({type(exc).__name__}: {exc})")
    classes = {flag[2:].partition("=")[0] for flag in cmd.preprocessor if flag.startswith("-D")}
    considered = [e for e in entries if e.size_class in (None, *classes)]
    live = [e for e in considered if (digests or {}).get(e.function) == e.digest]
    if len(live) < len(considered):
        stale = len(considered) - len(live)
        plan.reasons.append(f"decisions profile {profile}: {stale} cuda-block entr"
                            f"{'y' if stale == 1 else 'ies'} for this source ignored: the "
                            "kernel changed since it was measured")
    chosen: dict = {}
    for e in live:        # a size class's entry beats a classless one, then the later one
        if not (e.function in chosen and chosen[e.function].size_class and not e.size_class):
            chosen[e.function] = e
    if head and not head[0][2]:
        plan.reasons.append(f"head {TASK}: no shape predicted to gain enough "
                            f"(best {head[0][0][0]}x{head[0][0][1]}, {head[0][1]:.2f}x)")
    elif head:
        from mirecc.tasks.cuda_block.head import kernel_value  # lazy: only where a head ranked
        (x, y), gain, _ = head[0]
        for name, block in plan.blocks.items():
            value = kernel_value(block, (x, y))
            if block.tunable and value and name not in chosen:
                choice = HeadChoice(name, {"x": value[0], "y": value[1]},
                                    f"head {TASK}: predicted {gain:.2f}x over the source's "
                                    f"{'x'.join(block.default)}")
                if apply_head and refusal:
                    plan.decisions.append({
                        "task": TASK, "target": name, "value": f"{value[0]}x{value[1]}",
                        "applied": False, "advisory": f"recorded only: {refusal}",
                        "reason": f"{choice.reason} (recorded only: {refusal})"})
                    block.note += (f"; the head's {value[0]}x{value[1]} is not applied: "
                                   f"its gate refuses forcing ({refusal})")
                elif apply_head:
                    chosen[name] = choice
                else:
                    plan.reasons.append(f"{name}: {choice.reason[len('head ' + TASK) + 2:]} "
                                        f"with {value[0]}x{value[1]}; not applied (set "
                                        f"MIRECC_APPLY_CUDA_BLOCK=1)")
    # a rewritten copy would leave its temporary names in the dependency file
    rewrite_blocked = cmd.writes_dependencies and not cmd.dependency_file
    wanted: dict[str, list] = {}     # DIM_THREAD_BLOCK macro -> [(value, decision, kernel)]
    knob_wanted: dict[str, list] = {}  # knob -> [(value, decision, kernel, Knob)]
    for kernel, e in chosen.items():
        block = plan.blocks[kernel]
        value = [e.value["x"], e.value["y"]]
        shape = f"{value[0]}x{value[1]}"
        decision = {"task": TASK, "target": e.target, "value": shape, "applied": False,
                    "reason": e.reason if isinstance(e, HeadChoice) else
                    f"from the decisions profile {profile}:{e.line}"
                    + (f" ({e.comment})" if e.comment else "")}
        plan.decisions.append(decision)
        fixed = [a for a, m, v, d in zip(AXES, block.macros, value, block.default)
                 if m is None and str(v) != d]
        copied = block.tunable == "define" or (block.knob is not None and any(
            k.kind != "macro-D" and str(v) != str(k.value)
            for k, v in zip(block.knob.knobs, value) if k))
        limit = None if block.tunable is None or fixed else block.refuses(value)
        if block.tunable is None or fixed or limit or (copied and rewrite_blocked):
            why = (block.note[len("advisory: "):] if block.tunable is None else
                   f"the launch's {fixed[0]} is not tunable" if fixed else limit or
                   "a dependency file (-MD) without -MF cannot name the rewritten copies")
            decision["advisory"] = why
            whose = "the head's" if isinstance(e, HeadChoice) else "the profile's"
            block.note += f"; {whose} {shape} is not applied" + (
                "" if block.tunable is None else f": {why}")
            continue
        decision["applied"] = True
        block.origin, block.shape = decision["reason"], [str(v) for v in value]
        if block.tunable == "header":
            plan.defines += [f"-D{m}={v}" for m, v in zip(block.macros, value) if m]
            decision["how"] = " ".join(f"-D{m}={v}" for m, v in zip(block.macros, value) if m)
        elif block.knob is not None:
            for k, v in zip(block.knob.knobs, value):
                if k:
                    knob_wanted.setdefault(k.key, []).append((v, decision, kernel, k))
        else:
            for m, v in zip(block.macros, value):
                if m:
                    wanted.setdefault(m, []).append((v, decision, kernel))
    for macro, asks in wanted.items():
        if len({v for v, _, _ in asks}) > 1:      # kernels that share the macro disagree
            for _, decision, kernel in asks:
                _disagreed(plan, decision, kernel, macro)
            continue
        value = asks[0][0]
        if str(value) != str(scan.defines[macro][0].value):
            plan.rewrites[macro] = value
        for _, decision, _ in asks:
            decision["how"] = (decision.get("how", "") + f" {macro}={value}").strip()
    knob_values = _apply_knobs(plan, knob_wanted)
    for block in plan.blocks.values():
        if block.tunable == "define":
            for i, m in enumerate(block.macros):
                if m in plan.rewrites:     # also kernels that only share the macro
                    block.shape[i] = str(plan.rewrites[m])
                    if block.origin == "source default":
                        block.origin = f"the decisions profile, through the shared {m}"
        elif block.knob is not None:
            for i, m in enumerate(block.macros):
                if m in knob_values:      # also kernels that only share the knob
                    block.shape[i] = str(knob_values[m])
                    if block.origin == "source default":
                        block.origin = f"the decisions profile, through the shared {m}"
    return plan


def _disagreed(plan: SourcePlan, decision: dict, kernel: str, shared: str) -> None:
    """``decision`` not applied: ``shared`` (a macro or knob) also sets
    kernels whose entries ask for other values."""
    decision["applied"] = False
    decision["advisory"] = f"{shared} is shared by kernels whose entries differ"
    block = plan.blocks[kernel]
    block.shape, block.origin = list(block.default), "source default"
    whose = "the head's" if decision["reason"].startswith("head") else "the profile's"
    block.note += f"; {whose} {decision['value']} is not applied: {decision['advisory']}"


def _apply_knobs(plan: SourcePlan, wanted: dict[str, list]) -> dict[str, int]:
    """The knobs' values set: a -D for a macro a -D can set, else an edit of
    the copy; kernels that share a knob and disagree get none."""
    out = {}
    for key, asks in wanted.items():
        if len({v for v, *_ in asks}) > 1:
            for _, decision, kernel, _ in asks:
                if decision["applied"]:
                    _disagreed(plan, decision, kernel, key)
            continue
        value, knob = asks[0][0], asks[0][3]
        if str(value) != str(knob.value):
            how = f"-D{knob.selector}={value}" if knob.kind == "macro-D" else \
                f"{key}={value} in a copy"
            if knob.kind == "macro-D":
                plan.defines.append(f"-D{knob.selector}={value}")
            else:
                plan.edits.append((knob.file, knob.line, knob.span, knob.written, str(value)))
            out[key] = value
        else:
            how = f"{key}={value} (the source's)"
        for _, decision, _, _ in asks:
            if how not in decision.get("how", ""):   # a square knob asks twice
                decision["how"] = (decision.get("how", "") + f" {how}").strip()
    return out


def block_of(plan: SourcePlan, name: str) -> KernelBlock:
    """The block of kernel ``name`` in ``plan`` (also one the plan did not list)."""
    return plan.blocks.get(name) or _kernel_block(name, plan.scan, _settable(plan.scan))


def _knobs(scan: Scan, cmd: NvccCommand) -> dict:
    """Kernel -> its :class:`mirecc.frontend.knobs.KnobBlock` or :class:`mirecc.frontend.knobs.Refused`, for
    the kernels launched in the source's folder."""
    kernels = list(dict.fromkeys(launch.kernel for launch in scan.launches))
    if not kernels:
        return {}
    try:
        return knobs.analyse(scan.texts, scan.folder, cmd.preprocessor, kernels)
    except Exception as exc:  # noqa: BLE001 - an unreadable source is advisory, not fatal
        return {k: knobs.Refused("unreadable", f"cannot be traced ({type(exc).__name__}: "
                                               f"{exc})") for k in kernels}


def head_name(config) -> str | None:
    """The installed block-shape head's name, or None."""
    # lazy: the head's module; this module loads on every nvcc compile with a launch
    from mirecc.tasks.cuda_block.head import installed_head

    head = installed_head(config)
    return head.name if head else None


def plan_sources(cmd: NvccCommand, scans: list[Scan], profile: str | None,
                 digests_of, ir_of=None, config=None) -> list[SourcePlan]:
    """Each CUDA source's plan; ``digests_of(source)`` (the front end's:
    kernel name -> digest, from the source's device IR) is called only for a
    source the profile has entries of this task for.  With ``ir_of(source)``
    (its device IR text) and an installed head, the head ranks each source
    with a tunable launch (:func:`plan_source`'s ``rank``); its first shape
    is applied where ``config.apply_cuda_block`` says so."""
    from mirecc.taskapi.profile import read_profile  # lazy: a compile plans, nvcc -E/-M not

    entries = [e for e in read_profile(profile) if e.task == TASK] if profile else []
    rank, apply_head = None, bool(config is not None and config.apply_cuda_block)
    refusal = None
    if ir_of is not None and config is not None:
        from mirecc.tasks.cuda_block.head import installed_head, rank_plan  # lazy: as above

        head = installed_head(config)

        def head_rank(plan):
            return rank_plan(plan, ir_of(plan.source), head)
        rank = head_rank if head is not None else None
        refusal = head.refusal if head is not None else None
    plans = []
    for source, scan in zip(cmd.sources, scans):
        path = os.path.normpath(os.path.abspath(source))
        mine = [e for e in entries if e.source == path]
        digests = digests_of(source) if mine else None
        plans.append(plan_source(scan, cmd, mine, digests, profile=profile or "", rank=rank,
                                 apply_head=apply_head, refusal=refusal))
    return plans


def rewritten_args(args: list[str], cmd: NvccCommand, plans: list[SourcePlan],
                   tmp: str) -> tuple[list[str], dict[str, str]]:
    """``args`` with the plans' decisions: -D defines for mirecc/launch.h
    launches and -D-settable knobs; for rewritten DIM_THREAD_BLOCK defines
    and knobs, the source replaced by its copy in ``tmp`` (with its
    folder's included files, the define lines or the knobs' values
    rewritten, ``#line`` naming the originals) and its folder first on the
    include path.  Also the copies' paths -> the originals' names (for the
    dependency file)."""
    front, defines, renamed, copies = [], [], {}, {}
    for n, plan in enumerate(plans):
        defines += plan.defines
        if not plan.rewrites and not plan.edits:
            continue
        where = Path(tmp) / str(n)
        where.mkdir()
        lines_of = {}
        for macro, value in plan.rewrites.items():
            d = plan.scan.defines[macro][0]
            lines_of.setdefault(d.file, {})[d.line] = f"#define {macro} {value}"
        for path, name in plan.scan.folder_files.items():
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
                lines = fh.read().split("\n")
            for i, text in lines_of.get(path, {}).items():
                lines[i] = text + ("\r" if lines[i].endswith("\r") else "")
            for file, i, (start, end), old, new in sorted(plan.edits, reverse=True):
                if file == path:       # right to left: a line's earlier columns hold
                    if lines[i][start:end] != old:
                        raise ValueError(f"{name}:{i + 1}: expected {old!r} at column "
                                         f"{start + 1}")
                    lines[i] = lines[i][:start] + new + lines[i][end:]
            copy = where / os.path.basename(path)
            quoted = name.replace("\\", "\\\\").replace('"', '\\"')
            with open(copy, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
                fh.write(f'#line 1 "{quoted}"\n' + "\n".join(lines))
            renamed[str(copy)] = name
        copies[plan.source] = str(where / os.path.basename(plan.scan.source))
        front += ["-I", plan.scan.folder]
    out = list(args)
    for index, source in zip(cmd.positions, cmd.sources):
        out[index] = copies.get(source, source)
    return front + out + defines, renamed


class LaunchPlanner(CompileStep):
    """The task's step in ``mirecc-nvcc``'s compile (``Task.compile_step()``):
    each CUDA source's plan (its kernels' block shapes and where they come
    from), the shape a plan gives a kernel, the installed head's name, and
    nvcc's command with the plans' decisions."""

    task = TASK
    plan_sources = staticmethod(plan_sources)
    plan_source = staticmethod(plan_source)
    block_of = staticmethod(block_of)
    head_name = staticmethod(head_name)
    rewritten_args = staticmethod(rewritten_args)


STEP = LaunchPlanner()
