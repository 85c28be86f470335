"""Where ordinary CUDA programs keep their block shapes, compile only.

    python -m mirecc.tasks.cuda_block.offline.knobs_report TREE... [--md FILE]

Each folder directly under a TREE is a program; each of its ``.cu`` files is
a translation unit, compiled with ``-c`` twice, by nvcc and by mirecc-nvcc
(no decisions profile, ``apply_cuda_block`` off: the source's shapes kept),
with ``-I`` for the file's folder, the program's folder and a ``util``,
``common`` or ``include`` folder of TREE or the program.  Its launches are
planned as mirecc-nvcc plans them (:mod:`..launches`, :mod:`..knobs`); the
table gives per program the launches found, those tunable by knob kind,
those refused by reason, and whether mirecc-nvcc's objects are
byte-identical to nvcc's (nvcc's temporary-file names blanked).  One
compile at a time.  No GPU is used: nothing is run, nothing is timed.
"""
from __future__ import annotations

import argparse
import collections
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from mirecc.frontend import nvcc as front
from mirecc.frontend import knobs
from mirecc.frontend.launches import scan_source
from mirecc.tasks.cuda_block import launches

INCLUDE_FOLDERS = ("util", "common", "include")
#: what :func:`compare` says of a .cu file that built
BUILT = ("identical", "differ", "nvcc differs from itself")


def flags_for(cu: Path, program: Path, tree: Path, extra=()) -> list[str]:
    dirs = [cu.parent, program]
    for root in (tree, program):
        dirs += [root / d for d in INCLUDE_FOLDERS if (root / d).is_dir()]
    out = list(extra)
    for d in dict.fromkeys(dirs):
        out += ["-I", str(d)]
    return out


def plan_of(cu: Path, flags: list[str]):
    cmd = front.parse([*flags, "-c", str(cu)])
    return launches.plan_source(scan_source(str(cu), cmd), cmd)


def compare(cu: Path, flags: list[str], nvcc: str, mirecc_nvcc: str, work: Path) -> str:
    """"identical", "differ", "nvcc differs from itself" (a second nvcc
    object differs from the first too), or why it did not build (the first
    error)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MIRECC_PROFILE", "MIRECC_RECORD", "MIRECC_APPLY_CUDA_BLOCK")}
    env["MIRECC_APPLY_CUDA_BLOCK"] = "0"
    objects = []
    for n, tool in enumerate((nvcc, mirecc_nvcc, nvcc)):
        if n == 2 and objects[0] == objects[1]:
            break
        out = work / f"{n}.o"
        proc = subprocess.run([tool, *flags, "-c", str(cu), "-o", str(out)], cwd=cu.parent,
                              capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode:
            errors = [ln for ln in proc.stderr.splitlines() if "error" in ln] or ["no message"]
            return ("mirecc-nvcc fails: " if n == 1 else "nvcc fails: ") + " ".join(
                os.path.relpath(errors[0], str(cu.parent)).split())[:100]
        objects.append(front.normalised_object(out))
    if objects[0] == objects[1]:
        return "identical"
    return "nvcc differs from itself" if objects[2] != objects[0] else "differ"


def survey(tree: Path, compile_: bool = True, extra=()) -> list[dict]:
    """One row per translation unit: its launches, tunable or refused
    (``extra``: flags for every compile, e.g. a toolkit compatibility -D)."""
    nvcc = front.find_nvcc()
    mirecc_nvcc = str(Path(sys.executable).with_name("mirecc-nvcc"))
    rows = []
    programs = sorted(p for p in tree.iterdir() if p.is_dir() and any(p.rglob("*.cu")))
    with tempfile.TemporaryDirectory(prefix="mire-knobs-") as tmp:
        for program in programs:
            for cu in sorted(program.rglob("*.cu")):
                flags = flags_for(cu, program, tree, extra)
                row = {"tree": tree.name, "program": program.name,
                       "file": str(cu.relative_to(program)), "launches": []}
                try:
                    plan = plan_of(cu, flags)
                    for name, block in plan.blocks.items():
                        if block.code == "no-launch":
                            continue
                        row["launches"].append({
                            "kernel": name, "kind": block.tunable,
                            "refused": None if block.tunable else (block.code or "polybench"),
                            "shape": "x".join(block.default),
                            "shapes": ["%dx%d" % s for s in block.knob.shapes()]
                            if block.knob is not None else [],
                            "note": block.note})
                except Exception as exc:  # noqa: BLE001 - the report goes on
                    row["error"] = f"{type(exc).__name__}: {exc}"
                if compile_ and nvcc:
                    row["object"] = compare(cu, flags, nvcc, mirecc_nvcc, Path(tmp))
                rows.append(row)
                print(f"{program.name}/{row['file']}: {len(row['launches'])} launches, "
                      f"{row.get('object', '-')}", file=sys.stderr, flush=True)
    return rows


def _kind(launch: dict) -> str:
    return knobs.KINDS.get(launch["kind"], launch["kind"]) if launch["kind"] else ""


def _totals(rows: list[dict], label: str) -> str:
    launches_all = [lc for r in rows for lc in r["launches"]]
    tunable = [lc for lc in launches_all if lc["kind"]]
    objects = collections.Counter(r.get("object") if r.get("object") in BUILT
                                  else "not built" for r in rows)
    built = sum(objects[k] for k in BUILT)
    unstable = objects["nvcc differs from itself"]
    return (f"| {label} | {len({r['program'] for r in rows})} | {len(rows)} | "
            f"{len(launches_all)} | {len(tunable)} | " + " | ".join(
                str(sum(lc["kind"] == k for lc in launches_all)) for k in knobs.KINDS)
            + f" | {len(launches_all) - len(tunable)} | {objects['identical']} of {built} "
            f"built" + (f", {objects['differ']} differ" if objects["differ"] else "")
            + (f", {unstable} where nvcc's own two objects differ" if unstable else "")
            + f" ({objects['not built']} .cu files did not build alone) |")


def render(rows: list[dict], trees: list[Path], command: str) -> str:
    nvcc = front.find_nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout \
        if nvcc else ""
    release = re.search(r"release [\d.]+, V[\d.]+", version)
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    kinds = list(knobs.KINDS)
    out = [
        "# Block-shape knobs in CUDA programs mirecc's labels never saw (compile only)",
        "",
        "Written by `python -m mirecc.tasks.cuda_block.offline.knobs_report`; do not edit.",
        "",
        f"- command: `{command}`",
        "- trees: " + ", ".join(f"`{t.name}`" for t in trees),
        f"- machine: {platform.system()} {platform.machine()}, {os.cpu_count()} cores"
        + (f", {cpu}" if cpu else "") + "; no GPU: nothing was run or timed",
        f"- nvcc: {release[0] if release else 'not found'} "
        f"(`{nvcc}`), each .cu compiled with `-c`, `-I` its folder, its program's "
        f"folder and a util/common/include folder, and the command's --flag",
        "- object: mirecc-nvcc with no profile and apply_cuda_block off (the source's "
        "shapes kept) against nvcc, nvcc's temporary names blanked",
        "",
        "A launch is one kernel launched in a translation unit (a kernel launched in a "
        "file that two .cu files include counts in both). Tunable: the knob that sets "
        "its block and every use of it move together (mirecc/frontend/knobs.py); "
        "kinds: " + ", ".join(f"`{k}` {v}" for k, v in knobs.KINDS.items()) + ".",
        "",
    ]
    launches_all = [lc for r in rows for lc in r["launches"]]
    reasons = collections.Counter(lc["refused"] for lc in launches_all if lc["refused"])
    out += ["## Totals", "",
            "| tree | programs | .cu files | launches | tunable | " +
            " | ".join(knobs.KINDS.values()) + " | refused | identical objects |",
            "|---|---:|---:|---:|---:|" + "---:|" * len(kinds) + "---:|---|"]
    names = list(dict.fromkeys(r["tree"] for r in rows))
    for name in names:
        out.append(_totals([r for r in rows if r["tree"] == name], name))
    if len(names) > 1:
        out.append(_totals([{**r, "program": (r["tree"], r["program"])} for r in rows], "all"))
    out += ["", "Refused, by reason:", "", "| reason | launches |", "|---|---:|"]
    out += [f"| {code} | {n} |" for code, n in reasons.most_common()]
    out += ["", "## Per program", "",
            "| program | launches | tunable (kinds) | refused (reasons) | objects |",
            "|---|---:|---|---|---|"]
    for tree, program in dict.fromkeys((r["tree"], r["program"]) for r in rows):
        mine = [r for r in rows if (r["tree"], r["program"]) == (tree, program)]
        ls = [lc for r in mine for lc in r["launches"]]
        kc = collections.Counter(_kind(lc) for lc in ls if lc["kind"])
        rc = collections.Counter(lc["refused"] for lc in ls if lc["refused"])
        ob = collections.Counter(r.get("object", "-") if r.get("object") in BUILT
                                 else "not built" for r in mine)
        out.append(f"| {program} | {len(ls)} | "
                   f"{sum(kc.values())}" + (f" ({', '.join(f'{k} {n}' for k, n in kc.items())})"
                                            if kc else "")
                   + f" | {sum(rc.values())}" + (
                       f" ({', '.join(f'{k} {n}' for k, n in rc.most_common())})" if rc else "")
                   + " | " + ", ".join(f"{n} {k}" for k, n in sorted(ob.items())) + " |")
    out += ["", "## Per launch", "",
            "| program | file | kernel | shape | tunable / refused | why, or the knob "
            "(and the shapes it may take) |", "|---|---|---|---|---|---|"]
    for r in rows:
        for lc in r["launches"]:
            note = lc["note"].replace("advisory: not tunable: ", "").replace("|", "\\|")
            if lc["shapes"]:
                note += f" [{', '.join(lc['shapes'])}]"
            out.append(f"| {r['program']} | {r['file']} | {lc['kernel']} | {lc['shape']} | "
                       f"{_kind(lc) or lc['refused']} | {note} |")
    failed = [r for r in rows if r.get("object") not in (*BUILT, None)]
    if failed:
        out += ["", "## .cu files that did not build alone", "", "| program | file | why |",
                "|---|---|---|"]
        out += [f"| {r['program']} | {r['file']} | {r['object'].replace('|', '/')} |"
                for r in failed]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mirecc.tasks.cuda_block.offline.knobs_report",
        description="Tabulate where CUDA programs set their block shapes and whether "
                    "mirecc-nvcc may change them (compile only).")
    ap.add_argument("trees", type=Path, nargs="+", metavar="TREE",
                    help="a folder of programs (one folder each)")
    ap.add_argument("--md", type=Path, help="write the report here (else stdout)")
    ap.add_argument("--no-compile", action="store_true",
                    help="plan only: do not compare the objects with nvcc's")
    ap.add_argument("--flag", action="append", default=[], metavar="FLAG",
                    help="a flag for every compile (repeatable), e.g. "
                         "--flag=-DcudaThreadSynchronize=cudaDeviceSynchronize for code "
                         "older than CUDA 12")
    args = ap.parse_args(argv)
    for tree in args.trees:
        if not tree.is_dir():
            ap.error(f"{tree}: not a folder")
    rows = [row for tree in args.trees
            for row in survey(tree.resolve(), compile_=not args.no_compile, extra=args.flag)]
    chosen = os.environ.get("MIRECC_NVCC")      # the nvcc both sides use
    command = (f"MIRECC_NVCC={chosen} " if chosen else "") + \
        "python -m mirecc.tasks.cuda_block.offline.knobs_report " + " ".join(
            argv if argv is not None else sys.argv[1:])
    text = render(rows, [t.resolve() for t in args.trees], command)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
