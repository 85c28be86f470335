"""``mire size-inline-data``: the labels of a per-call-site inlining policy
for size.  For each call site of each corpus module whose callee the module
defines, the object's ``.text`` bytes at the module's level (``-Oz``) with
that site forced inline and with it forced out of line (the pass plugin's
``calls``, passes/plugin/FORMAT.md "Call sites"), every other site left to
LLVM; and the module's own bytes, nothing forced.

    mire corpus build --opt-level=-Oz --out .work/size-corpus --sources debian ...
    mire size-inline-data --corpus .work/size-corpus --out .work/inline-labels

Interactions between sites: a site is labelled one at a time, the others as
LLVM decides them.  That is how a policy's decisions reach a build (a few
sites forced, LLVM's inliner deciding the rest, the object kept only where
it is smaller), it costs two compiles per site and no search, and the
labels are deterministic.  What a whole set of decisions does together is
measured where it is applied, on whole modules.

With ``--per callee``, a label forces every site of one callee at once
(all inline, all out of line): what a per-site label cannot see, a callee
kept out of line everywhere compiled once, one inlined everywhere deleted
(``benchmarks/inline_callee_oracle.py`` measures what such choices save).
Its rows go to ``callees.jsonl`` ({"module", "origin", "callee", "sites":
[its site ids], "own", "inline", "noinline"}) and its modules to
``callee-modules.jsonl``, beside the per-site files.

Layout of the output directory::

    meta.json     machine, compiler, level (written once, checked on resume)
    *.jsonl.gz    a snapshot (``gzip -k``), as committed in heads/code-size/
                  inline-labels: a run there unpacks it and goes on
    sites.jsonl   one line per (module, site): {"module", "origin", "site",
                  "caller", "callee", "own", "inline", "noinline"} (bytes),
                  or {"module", "site", "error"}; appended under a lock, so
                  a rerun resumes where the last one stopped and two runs
                  can share it
    modules.jsonl one line per module done: {"module", "origin", "sites",
                  "own", "seconds"} (a module with no site to label too)

Modules are split by package as the size dataset's (``dataset.HELD_OUT``).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from mirecc.frontend.compiler import clang_major, compiler_version, find_compiler
from mirecc.ir.text import call_sites, disassemble
from mirecc.plugin.build import find_plugin, plugin_args
from mirecc.taskapi.config import load_config
from mirecc.tasks.code_size.build import STEP_TIMEOUT_S, CandidateError, text_bytes
from mirecc.tasks.code_size.offline.dataset import corpus_modules
from mirecc.tasks.code_size.offline.labels import codegen_flags
from mirecc.util.fsutil import append_line_locked, atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
DEFAULT_CORPUS = ROOT / ".work" / "size-corpus"
DEFAULT_OUT = ROOT / ".work" / "inline-labels"


def labelled_sites(ir_text: str) -> list[tuple[str, str, str]]:
    """(site id, caller, callee) of each call site whose callee the module
    defines (a call of a declaration cannot be inlined)."""
    sites = call_sites(ir_text)
    return [(f"{caller}:call{k}", caller, callee) for caller, callees in sites.items()
            for k, callee in enumerate(callees) if callee in sites]


class Compiler:
    """The module's object through clang at its level, with one call site's
    decision when given; its ``.text`` bytes.  A decision the plugin did not
    apply (no such site: the numbering differs) is an error, not a label."""

    def __init__(self, cc: str, plugin_flags):
        self.cc = cc
        self.plugin_flags = plugin_flags      # decisions path -> clang flags

    def text(self, bitcode: str, flags: list[str], workdir: str,
             calls: dict[str, str] | None = None) -> int:
        extra = []
        if calls:
            decisions = os.path.join(workdir, "calls.json")
            Path(decisions).write_text(json.dumps(
                {"version": 1, "modules": {"*": {"calls": calls}}}))
            extra = [*self.plugin_flags(decisions), "-Rpass=mirecc-loophints"]
        obj = os.path.join(workdir, "site.o")
        cmd = [self.cc, *flags, *extra, "-w", "-c", "-x", "ir", bitcode, "-o", obj]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CandidateError(f"clang ran over {STEP_TIMEOUT_S:g} s") from None
        err = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise CandidateError(f"clang failed: {(err.strip().splitlines() or ['?'])[0]}")
        missed = [site for site in (calls or {}) if f"call {site} to " not in err]
        if missed:
            raise CandidateError(f"the plugin did not mark {missed[0]}"
                                 f"{f' and {len(missed) - 1} more' if len(missed) > 1 else ''}")
        return text_bytes(obj)


#: what one label forces: a site, or every site of a callee (files by unit)
UNITS = {"site": ("sites.jsonl", "modules.jsonl"),
         "callee": ("callees.jsonl", "callee-modules.jsonl")}


def sites_by_callee(sites: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Callee -> the ids of its sites among ``sites`` (:func:`labelled_sites`)."""
    out: dict[str, list[str]] = {}
    for site, _, callee in sites:
        out.setdefault(callee, []).append(site)
    return out


def label_units(sites: list[tuple[str, str, str]], unit: str) -> list[tuple[str, dict]]:
    """(the label's key, its row's own fields) of each unit of ``sites``: a
    site (``site``, ``caller``, ``callee``), or a callee (``callee`` and
    ``sites``, its sites' ids, all forced together)."""
    if unit == "site":
        return [(site, {"site": site, "caller": caller, "callee": callee})
                for site, caller, callee in sites]
    return [(callee, {"callee": callee, "sites": ids})
            for callee, ids in sites_by_callee(sites).items()]


def label_module(module, compiler: Compiler, done: set, out: Path, limit: int | None,
                 max_seconds: float | None = None, unit: str = "site") -> dict:
    """Label the units (``unit``: each site, or each callee's sites all at
    once) of ``module`` not in ``done`` (``limit``: at most that many,
    drawn at random, seeded by the module; a module whose own compile takes
    over ``max_seconds`` is skipped: each label costs two); its modules
    file's line."""
    started = time.monotonic()
    flags = codegen_flags(module.flags)
    with tempfile.TemporaryDirectory(prefix="mirecc-inline-") as tmp:
        ir = disassemble(Path(module.path).read_bytes(), str(module.path))
        units = label_units(labelled_sites(ir), unit)
        if limit and len(units) > limit:
            units = sorted(random.Random(module.sha256).sample(units, limit))
        own = compiler.text(str(module.path), flags, tmp)
        seconds = time.monotonic() - started
        if max_seconds and seconds > max_seconds and units:
            return {"module": module.sha256, "origin": module.origin, "sites": 0, "own": own,
                    "seconds": round(seconds, 2),
                    "skipped": f"its compile takes {seconds:.1f} s (over {max_seconds:g})"}
        for key, fields in units:
            if key in done:
                continue
            ids = fields.get("sites", [key])
            row = {"module": module.sha256, "origin": module.origin, **fields, "own": own}
            try:
                for choice in ("inline", "noinline"):
                    row[choice] = compiler.text(str(module.path), flags, tmp,
                                                {site: choice for site in ids})
            except CandidateError as exc:
                row = {"module": module.sha256, unit: key, "error": str(exc)[:300]}
            append_line_locked(out / UNITS[unit][0], json.dumps(row))
    return {"module": module.sha256, "origin": module.origin, "sites": len(units),
            "own": own, "seconds": round(time.monotonic() - started, 2)}


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue          # a line cut by a kill: measured again
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                        help="a corpus built with --opt-level=-Oz (default: %(default)s)")
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="the labels' directory (default: %(default)s)")
    parser.add_argument("--cc", help="the clang (default: the one mirecc drives)")
    parser.add_argument("--split", choices=("train", "test", "all"), default="all",
                        help="the modules of the training packages, the held-out ones, or all")
    parser.add_argument("--modules", type=int, help="at most this many modules")
    parser.add_argument("--sites", type=int, default=60,
                        help="at most this many sites per module, drawn at random, seeded by "
                             "the module (0: all; default: %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=5.0,
                        help="skip a module whose own compile takes longer (default: "
                             "%(default)s s; each site costs two compiles)")
    parser.add_argument("--per", choices=tuple(UNITS), default="site",
                        help="what one label forces: a call site, or every site of one "
                             "callee at once (callees.jsonl; default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="modules labelled at once (default: the cores)")


def run(args: argparse.Namespace) -> int:
    cc = args.cc or find_compiler(load_config(os.getcwd()), cxx=False)
    major = clang_major(cc)
    plugin = find_plugin(major)
    if plugin is None:
        print(f"mire size-inline-data: no pass plugin for LLVM {major} (scripts/setup.sh "
              f"builds it)", file=sys.stderr)
        return 2
    try:
        modules = corpus_modules(Path(args.corpus))
    except ValueError as exc:
        print(f"mire size-inline-data: {exc}", file=sys.stderr)
        return 2
    if args.split != "all":
        modules = [m for m in modules if m.split == args.split]
    modules = modules[:args.modules] if args.modules else modules
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    unit = getattr(args, "per", "site")
    labels_file, modules_file = UNITS[unit]
    for name in (labels_file, modules_file):
        # a committed snapshot (gzip -k of both): resumed from, appended to in plain
        if not (out / name).exists() and (out / f"{name}.gz").is_file():
            atomic_write_bytes(out / name, gzip.decompress((out / f"{name}.gz").read_bytes()))
    meta = {"cc": cc, "cc_version": compiler_version(cc), "machine": platform.machine(),
            "level": "module's own (-Oz)", "corpus": str(args.corpus)}
    if (out / "meta.json").is_file():
        old = json.loads((out / "meta.json").read_text())
        if old.get("cc_version") != meta["cc_version"]:
            print(f"mire size-inline-data: {out} holds labels of {old.get('cc_version')}, not "
                  f"{meta['cc_version']}: give another --out", file=sys.stderr)
            return 2
    else:
        atomic_write_bytes(out / "meta.json", (json.dumps(meta, indent=1) + "\n").encode())
    finished = {r["module"] for r in _read(out / modules_file)}
    done: dict[str, set] = {}
    for r in _read(out / labels_file):
        done.setdefault(r["module"], set()).add(r.get(unit))
    todo = [m for m in modules if m.sha256 not in finished]
    compiler = Compiler(cc, lambda path: plugin_args(major, plugin, path))
    print(f"mire size-inline-data: {len(todo)} of {len(modules)} modules to label "
          f"({len(finished)} done) into {out}", file=sys.stderr)

    def one(module):
        try:
            return label_module(module, compiler, done.get(module.sha256, set()), out,
                                args.sites or None, getattr(args, "max_seconds", None), unit)
        except (CandidateError, OSError, ValueError) as exc:
            return {"module": module.sha256, "origin": module.origin,
                    "error": str(exc)[:300]}

    sites = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool, \
            tqdm(total=len(todo), desc="modules", unit="module", file=sys.stderr,
                 disable=None) as bar:
        for line in pool.map(one, todo):
            append_line_locked(out / modules_file, json.dumps(line))
            sites += line.get("sites", 0)
            bar.set_postfix(sites=sites)
            bar.update()
    print(f"mire size-inline-data: {sites} {unit}s labelled in {len(todo)} modules",
          file=sys.stderr)
    return 0
