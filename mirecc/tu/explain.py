"""``mirecc --explain``: what was seen in each translation unit, and why each
decision was (or was not) made.  Text for people, JSON for tools; both are
built from the same dictionary so they cannot disagree."""

from __future__ import annotations

import json
import sys

from mirecc import __version__


def explanation(*, compiler: str, invocation_kind: str, reason: str,
                reports: list, fallback: str | None, skipped: list[str],
                compiler_chosen: str = "", verified: dict | None = None) -> dict:
    """The explanation of one mirecc call as plain data; ``verified``: task ->
    what its build step did (``CompileStep.verify``), for a split compile."""
    units = []
    for r in reports:
        summary = r.result.summary
        units.append({
            "source": r.source,
            "language": r.language,
            "opt_level": r.opt_level,
            "ir": {"sha256": r.bitcode_sha256, "bytes": r.bitcode_bytes},
            "cache": r.cache,
            "computed": r.where,
            "captured": r.captured,
            "seen": summary.to_dict() if summary else None,
            "decisions": [d.to_dict() for d in r.result.decisions],
            "no_decision_reasons": list(r.result.no_decision_reasons),
            "reason_codes": list(r.result.reason_codes),
        })
    return {
        "mirecc_version": __version__,
        "compiler": compiler,
        "compiler_chosen": compiler_chosen,   # where the choice of compiler came from
        "invocation": invocation_kind,
        "reason": reason,
        "translation_units": units,
        "skipped": skipped,          # sources mirecc did not look at, with why
        "fallback": fallback,        # why the ML path gave up, if it did
        # task -> candidates built and measured after the compile (code size)
        "verified": {task: v.to_dict() for task, v in (verified or {}).items()},
    }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _value(value) -> str:
    """A decision's value for people: {'vectorize.width': 8, ...} reads
    'vectorize.width 8, ...'; a list of named entries (a function's
    versions) their names; an empty one (the compiler's own choice) '-'."""
    def short(v):
        if isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v):
            return ", ".join(str(x["name"]) for x in v)
        return v

    if isinstance(value, dict):
        return ", ".join(f"{k} {short(v)}" for k, v in value.items()) or "-"
    return str(value)


def _state(d: dict) -> str:
    """A decision's state for people."""
    if d["applied"]:
        return "applied"
    if d.get("same_as_compiler"):
        return "same as the compiler's choice (the object did not change)"
    # advisory decisions are predictions recorded for the user (--explain,
    # the record file); nothing in the compile changes
    return "recorded" if d.get("advisory") else "not applied"


def _decision_line(d: dict) -> str:
    """One decision: task, site, chosen value, the compiler's own, state and why.
    A confidence only where a model scored the choice."""
    default = f"; compiler's own: {_value(d['default'])}" if d["default"] else ""
    confidence = (f", confidence {d['confidence']:.2f}"
                  if isinstance(d.get("confidence"), (int, float)) else "")
    return (f"    {d['task']} {d['target']}: {_value(d['value'])}{default}; "
            f"{_state(d)}{confidence}: {d['reason']}")


def render_text(data: dict, verbose: bool = False) -> str:
    """The explanation for people: per TU, the decisions first (one line
    each), then why heads decided nothing, then what was seen (per function
    and loop only when ``verbose``)."""
    lines = [f"mirecc {data['mirecc_version']} --explain (compiler: {data['compiler']})"]
    if data.get("compiler_chosen"):
        lines.append(f"  compiler chosen: {data['compiler_chosen']}")
    if data["fallback"]:
        lines.append(f"  ML path failed: {data['fallback']}")
        lines.append("  => compiled exactly as asked, without mirecc decisions")
    if not data["translation_units"]:
        lines.append(f"  nothing to decide: {data['reason']}")
    for skipped in data["skipped"]:
        lines.append(f"  skipped {skipped}")
    for tu in data["translation_units"]:
        applied = sum(1 for d in tu["decisions"] if d["applied"])
        lines.append(f"{tu['source']} ({tu['language']}, -O{tu['opt_level']}): "
                     f"{_plural(len(tu['decisions']), 'decision')}, {applied} applied")
        for d in tu["decisions"]:
            lines.append(_decision_line(d))
        for code, why in zip(tu.get("reason_codes") or [""] * len(tu["no_decision_reasons"]),
                             tu["no_decision_reasons"]):
            lines.append(f"    why: [{code}] {why}" if code else f"    why: {why}")
        lines.append(f"  IR: {tu['ir']['bytes']} bytes of bitcode, "
                     f"sha256 {tu['ir']['sha256'][:16]}, cache {tu['cache']}"
                     + (f", captured as {tu['captured']}" if tu["captured"] else ""))
        seen = tu["seen"]
        if seen:
            lines.append(f"  seen: {_plural(len(seen['functions']), 'function')}, "
                         f"{_plural(seen['loops'], 'loop')}, "
                         f"{_plural(seen['instructions'], 'instruction')}"
                         + ("" if verbose or not seen["functions"]
                            else " (--explain=verbose lists them)"))
            for fn in seen["functions"] if verbose else ():
                lines.append(f"    {fn['name']}: {_plural(fn['instructions'], 'instruction')}, "
                             f"{_plural(len(fn['loops']), 'loop')}")
                for loop in fn["loops"]:
                    where = f", line {loop['line']}" if loop["line"] else ""
                    lines.append(f"      loop {loop['id']} (depth {loop['depth']}, "
                                 f"{_plural(loop['blocks'], 'block')}{where})")
    for task, v in data.get("verified", {}).items():
        lines.extend(_verified_lines(task, v))
    return "\n".join(lines) + "\n"


def _verified_lines(task: str, v: dict) -> list[str]:
    """A verifying task's candidates with their sizes, the kept one marked."""
    how = v.get("note") or (
        ("a compile of the same code (its static or shared copy) knew the winner: "
         if v.get("from_twin") else "the winner cache knew the winner: ")
        + ("nothing built" if not v["built"] else "built it alone")
        if v.get("from_cache") else f"built {_plural(v['built'], 'candidate')}")
    # sizes first: pipeline names can be long
    lines = [f"  {task}: {how}; shipped bytes (every allocated section, and what the link "
             f"adds for it: PLT, GOT, .eh_frame_hdr; decides), .text bytes (* kept):"]
    own_size = v["sizes"].get(v["own"])
    text = v.get("text") or {}
    for name, size in sorted(v["sizes"].items(), key=lambda kv: (kv[1], kv[0] != v["own"])):
        change = f"{100 * (size - own_size) / own_size:+.1f}%" \
            if own_size and name != v["own"] else ""
        mark = "*" if name == v["winner"] else " "
        label = f"{name} (your level)" if name == v["own"] else name
        code = f"{text[name]:>10,}" if name in text else f"{'-':>10}"
        lines.append(f"   {mark} {size:>10,} {change:>7} {code}  {label}")
    for name, why in v["skipped"].items():
        # the build step's reasons: "not built: <why>" (chosen not to), else a failure
        status, _, rest = why.partition(": ")
        status, why = (status, rest) if status == "not built" else ("failed", why)
        lines.append(f"     {status:>10} {'':>7}  {name}: {why}")
    return lines


def render(data: dict, fmt: str) -> str:
    """``fmt``: "json", "text" or "verbose" (text with every function and loop)."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return render_text(data, verbose=fmt == "verbose")


def show(ctx, reason: str, to_stderr: bool, kind: str | None = None) -> None:
    """Print the explanation of the call ``ctx`` (a
    :class:`mirecc.tu.context.CompileContext`) in its ``--explain`` format:
    on stderr where the compiler writes its result on stdout."""
    text = render(explanation(compiler=ctx.compiler, compiler_chosen=ctx.chosen,
                              invocation_kind=kind or ctx.inv.kind, reason=reason,
                              reports=ctx.reports, fallback=ctx.fallback,
                              skipped=ctx.skipped, verified=ctx.verified), ctx.explain)
    stream = sys.stderr if to_stderr else sys.stdout
    stream.write(text)
    stream.flush()
