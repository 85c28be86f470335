"""Apply gates calibrated by leave-one-application-out.

A task that can be forced (its ``applied_when`` setting on) applies a
decision only where its head's gate lets it through: a threshold on what
the head promises (``min_gain`` of the trees' quantile, for the forest
heads).  The threshold is calibrated offline, by the task's own training
command: for each candidate threshold, every application (a program, a
kernel family) is held out in turn, the head is trained without it, and
the held-out application runs with the decisions the gate lets through.
A threshold is admissible when no held-out application runs below
:data:`FLOOR` of the compiler's own speed and at least one decision is
applied; the admissible one with the best geomean is shipped.  Where none
is admissible, the head ships with ``refuse_forcing`` in its spec: the
driver then records its decisions and applies none, saying why.

The sweep goes into the head's ``metrics.json`` under ``"gate"`` (the
document :func:`gate_document` makes); ``--mirecc-help`` and ``mire gates``
(the table in ``docs/results/gates.md``) read it from there.
"""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field

import yaml

from mirecc.taskapi.config import load_config
from mirecc.taskapi.registry import default_heads_dirs, tasks

#: no held-out application may run slower than this share of the default
FLOOR = 0.95


@dataclass
class GateRow:
    """One threshold's leave-one-application-out result."""
    threshold: float
    applications: int
    applied: int | None    # applications with a decision applied (None: not recorded)
    geomean: float         # over all applications (not applied: 1.0)
    slowest: float
    below: int             # applications below FLOOR
    per_application: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"threshold": self.threshold, "applications": self.applications,
                "applied": self.applied, "geomean": self.geomean, "slowest": self.slowest,
                f"below_{FLOOR}": self.below, "per_application": self.per_application}


def gate_row(threshold: float, speedups: dict[str, float | None]) -> GateRow:
    """``speedups``: held-out application -> its speedup over the default
    with the decisions this threshold lets through (None: none applied)."""
    values = {name: (1.0 if s is None else float(s)) for name, s in speedups.items()}
    applied = sum(1 for s in speedups.values() if s is not None)
    geo = math.exp(sum(math.log(v) for v in values.values()) / len(values)) if values else 1.0
    return GateRow(threshold=float(threshold), applications=len(values), applied=applied,
                   geomean=geo, slowest=min(values.values(), default=1.0),
                   below=sum(1 for v in values.values() if v < FLOOR),
                   per_application={k: round(v, 4) for k, v in sorted(values.items())})


def calibrate(rows: list[GateRow]) -> GateRow | None:
    """The admissible row (none below FLOOR, something applied) with the
    best geomean, the higher threshold on a tie; None when none is."""
    ok = [r for r in rows if r.below == 0 and (r.applied is None or r.applied > 0)]
    if not ok:
        return None
    return max(ok, key=lambda r: (round(r.geomean, 6), r.threshold))


def gate_document(protocol: str, unit: str, before: float | None, rows: list[GateRow],
                  chosen: GateRow | None, refusal: str | None = None) -> dict:
    """The ``"gate"`` entry of a head's metrics.json.  ``before``: the
    threshold shipped before this calibration (None: not known)."""
    by = {r.threshold: r for r in rows}
    return {
        "protocol": protocol, "unit": unit, "floor": FLOOR,
        "before": None if before is None else float(before),
        "before_row": by[before].record() if before in by else None,
        "chosen": None if chosen is None else chosen.threshold,
        "chosen_row": None if chosen is None else chosen.record(),
        "refuse_forcing": refusal,
        "sweep": [r.record() for r in rows],
    }


def refusal_reason(rows: list[GateRow], unit: str) -> str:
    """Why forcing is refused when :func:`calibrate` found nothing."""
    applied = [r for r in rows if r.applied is None or r.applied > 0]
    if not applied:
        return f"no threshold applied anything to a held-out {unit}"
    best = max(applied, key=lambda r: r.slowest)
    return (f"held out, every threshold that applies something slows a {unit} below "
            f"{FLOOR:.2f}x (at best {best.slowest:.3f}x, threshold {best.threshold:g})")


def describe(gate: dict | None) -> str | None:
    """One sentence for ``--mirecc-help``, from a metrics.json ``"gate"``."""
    if not gate:
        return None
    if gate.get("refuse_forcing"):
        return f"forcing refused: {gate['refuse_forcing']} ({gate['protocol']})"
    row = gate.get("chosen_row")
    if not row:
        return None
    return (f"{gate['protocol']}: {row['geomean']:.3f}x geomean, slowest "
            f"{row['slowest']:.3f}x, {row[f'below_{FLOOR}']} of {row['applications']} "
            f"{gate['unit']}s below {FLOOR:.2f}x"
            + (f", {row['applied']} with a decision applied" if row["applied"] is not None
               else "") + f" (gate {row['threshold']:g})")


# ------------------------------------------------------------ installed heads

def installed_gates(dirs: list[str]) -> dict[str, dict]:
    """task -> the ``"gate"`` of its installed head's metrics.json, for the
    heads in ``dirs`` that have one (unreadable files: left out)."""
    out: dict[str, dict] = {}
    for directory in dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            head = os.path.join(directory, name)
            try:
                with open(os.path.join(head, "spec.yaml")) as f:
                    spec = yaml.safe_load(f) or {}
                with open(os.path.join(head, spec.get("metrics") or "metrics.json")) as f:
                    gate = json.load(f).get("gate")
            except (OSError, ValueError, AttributeError, yaml.YAMLError):
                continue
            if isinstance(gate, dict) and isinstance(spec.get("task"), str):
                out.setdefault(spec["task"], gate)
    return out


# ------------------------------------------------------------------ mire gates

def add_arguments(p) -> None:
    p.add_argument("--heads-dir", default=None,
                   help="the heads to report (default: the installed ones)")
    p.add_argument("--out", default="docs/results/gates.md",
                   help="the page to write (default: %(default)s)")


def _cells(row: dict | None) -> str:
    if not row:
        return "- | - | - | - | -"
    applied = "-" if row["applied"] is None else f"{row['applied']}/{row['applications']}"
    return (f"{row['threshold']:g} | {applied} | {row['geomean']:.3f}x | {row['slowest']:.3f}x | "
            f"{row[f'below_{FLOOR}']}")


def markdown(gates: dict[str, dict], verified: dict[str, str]) -> str:
    lines = [
        "# Apply gates, calibrated leave one application out",
        "",
        "Written by `mire gates` from each installed head's metrics.json (its training",
        "command writes the sweep). A gate lets a decision through when the head",
        "promises more than its threshold; each row holds every application out in",
        "turn (the head trained without it) and runs it with the decisions the gate",
        f"lets through. Admissible: no application below {FLOOR:.2f}x and something",
        "applied; the shipped threshold is the admissible one with the best geomean.",
        "A head with none admissible records its decisions and applies none.",
        "",
        "| task | protocol | | threshold | applied | geomean | slowest | below "
        f"{FLOOR:.2f}x |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for task, gate in sorted(gates.items()):
        before = _cells(gate.get('before_row'))
        lines.append(f"| {task} | {gate['protocol']} | before | {before} |")
        after = ("refused: " + gate["refuse_forcing"]) if gate.get("refuse_forcing") else "after"
        lines.append(f"| | | {after} | {_cells(gate.get('chosen_row'))} |")
    for task, why in sorted(verified.items()):
        lines.append(f"| {task} | {why} | verified | - | - | - | 1.000x | 0 |")
    for task, gate in sorted(gates.items()):
        lines += ["", f"## {task}: the sweep", "",
                  f"| threshold | applied | geomean | slowest | below {FLOOR:.2f}x |",
                  "|---:|---:|---:|---:|---:|"]
        lines += [f"| {_cells(row)} |" for row in gate["sweep"]]
        worst = [row for row in [gate.get("chosen_row")] if row and row.get("per_application")]
        if worst:
            slow = sorted(worst[0]["per_application"].items(), key=lambda kv: kv[1])[:5]
            lines += ["", "Slowest held-out applications at the shipped threshold: "
                      + ", ".join(f"{k} {v:.3f}x" for k, v in slow) + "."]
    return "\n".join(lines) + "\n"


def run(args) -> int:
    # lazy: mirecc --mirecc-help imports this module (installed_gates); only mire gates writes
    from pathlib import Path
    from mirecc.util.fsutil import atomic_write_bytes

    config = load_config()
    dirs = [args.heads_dir] if args.heads_dir else default_heads_dirs(config)
    gates = installed_gates(dirs)
    # tasks that verify every decision by building it have no gate to calibrate
    verified = {t.name: t.measured for t in tasks().values()
                if t.applied_when and t.has("verify") and t.name not in gates}
    if not gates:
        print(f"mire gates: no installed head in {', '.join(dirs)} has a calibrated gate",
              file=sys.stderr)
        return 1
    text = markdown(gates, verified)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, text.encode())
    sys.stdout.write(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0
