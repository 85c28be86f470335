"""How many bytes forcing inlining decisions can save below clang -Oz at all,
per callee rather than per site: for a random sample of the size corpus's
modules, each module compiled at its level (-Oz) with every call site of one
defined callee forced out of line, and with all of them forced inline (the
pass plugin's call-site decisions, as ``mire size-inline-data`` labels one
site), one callee at a time; the per-callee oracle (the smallest of LLVM's,
all out of line and all inline, per callee); all the callees' better
choices compiled together (what their interactions leave); and greedily,
largest first, each kept only where the module shrinks with it (a set of
choices found by search: a lower bound on the best set).

    .venv/bin/python benchmarks/inline_callee_oracle.py [--modules 40] [--seed 0]
        [--corpus .work/size-corpus] [--out docs/results/inline-callee-oracle.md]

Beside it, the per-site oracle of the labels (``mire size-inline-judge``'s
page): one site at a time.  A callee whose sites are all forced out of line
is compiled once (no copy per caller); one forced inline everywhere can be
deleted when internal: the decisions a per-site label cannot see.  Modules
with fewer than 1024 bytes of .text (not searched by the size task) or more
than ``--max-callees`` defined callees (their compiles dominate) are
skipped and drawn again.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tqdm import tqdm  # noqa: E402

from mirecc.frontend.compiler import clang_major, find_compiler  # noqa: E402
from mirecc.ir.text import disassemble  # noqa: E402
from mirecc.plugin.build import find_plugin, plugin_args  # noqa: E402
from mirecc.taskapi.config import load_config  # noqa: E402
from mirecc.tasks.code_size.build import MIN_TEXT_BYTES, CandidateError  # noqa: E402
from mirecc.tasks.code_size.offline.dataset import corpus_modules  # noqa: E402
from mirecc.tasks.code_size.offline.inline_labels import (Compiler, labelled_sites,  # noqa: E402
                                                           sites_by_callee)
from mirecc.tasks.code_size.offline.labels import codegen_flags  # noqa: E402
from mirecc.util.fsutil import atomic_write_bytes  # noqa: E402

CHOICES = ("noinline", "inline")


def module_oracle(module, compiler: Compiler, max_callees: int) -> dict | None:
    """The module's record, or None when it is skipped."""
    sites = labelled_sites(disassemble(Path(module.path).read_bytes(), str(module.path)))
    by_callee = sites_by_callee(sites)
    if not by_callee or len(by_callee) > max_callees:
        return None
    flags = codegen_flags(module.flags)
    with tempfile.TemporaryDirectory(prefix="mirecc-callee-") as tmp:
        own = compiler.text(str(module.path), flags, tmp)
        if own < MIN_TEXT_BYTES:
            return None
        callees = {}
        for callee, ids in by_callee.items():
            row = {}
            for how in CHOICES:
                try:
                    row[how] = compiler.text(str(module.path), flags, tmp,
                                             {s: how for s in ids})
                except CandidateError:
                    row[how] = None     # a callee that cannot be inlined: LLVM's stands
            callees[callee] = row
        best = {c: min((v, how) for how, v in row.items() if v is not None and v < own)[1]
                for c, row in callees.items()
                if any(v is not None and v < own for v in row.values())}
        together = own
        if best:
            together = compiler.text(str(module.path), flags, tmp,
                                     {s: best[c] for c, ids in by_callee.items() if c in best
                                      for s in ids})
        # greedy: the callees' choices added one at a time, the largest
        # saving first, each kept only when the module is smaller with it
        saved = {c: own - callees[c][how] for c, how in best.items()}
        chosen, greedy = {}, own
        for c in sorted(best, key=lambda c: -saved[c]):
            calls = {s: best[k] for k in [*chosen, c] for s in by_callee[k]}
            size = compiler.text(str(module.path), flags, tmp, calls)
            if size < greedy:
                chosen[c], greedy = best[c], size
    return {"module": module.sha256, "origin": module.origin, "source": module.source,
            "own": own, "sites": len(sites), "callees": len(callees),
            "improved": {c: [best[c], saved[c]] for c in best},
            "oracle": sum(saved.values()), "together": together, "greedy": greedy,
            "greedy_callees": len(chosen)}


def render(records: list[dict], args, seconds: float) -> str:
    own = sum(r["own"] for r in records)
    oracle = sum(r["oracle"] for r in records)
    together = sum(r["own"] - r["together"] for r in records)
    greedy = sum(r["own"] - r["greedy"] for r in records)
    by_how = {how: sum(s for r in records for h, s in r["improved"].values() if h == how)
              for how in CHOICES}
    worse = sum(r["together"] > r["own"] for r in records)
    lines = [
        "# Inlining decisions per callee: what they can save below -Oz", "",
        f"Written by `benchmarks/inline_callee_oracle.py --modules {args.modules} --seed "
        f"{args.seed}` ({time.strftime('%Y-%m-%d')}, {seconds / 60:.0f} min): {len(records)} "
        f"modules drawn at random from the size corpus ({len({r['origin'] for r in records})} "
        f"packages), {sum(r['callees'] for r in records)} defined callees, "
        f"{sum(r['sites'] for r in records)} call sites; clang 14 at each module's level "
        "(-Oz), every site of one callee forced out of line and forced inline (the pass "
        "plugin's call-site decisions), one callee at a time. Bytes: `.text`.", "",
        "| | bytes | % of -Oz's .text |", "|---|---:|---:|",
        f"| -Oz (LLVM's choices) | {own} | |",
        f"| per-callee oracle (the best of LLVM's, all out of line, all inline, per callee) "
        f"| {oracle} | {100 * oracle / own:.2f}% |",
        f"| of it, callees forced out of line | {by_how['noinline']} | "
        f"{100 * by_how['noinline'] / own:.2f}% |",
        f"| of it, callees forced inline | {by_how['inline']} | "
        f"{100 * by_how['inline'] / own:.2f}% |",
        f"| every improving callee's choice compiled together | {together} | "
        f"{100 * together / own:.2f}% |",
        f"| greedy: the choices added largest first, each kept only where the module "
        f"shrinks ({sum(r['greedy_callees'] for r in records)} callees kept) | {greedy} | "
        f"{100 * greedy / own:.2f}% |", "",
        f"Modules where the choices together are larger than -Oz: {worse}. Modules with a "
        f"callee that saves: {sum(bool(r['improved']) for r in records)}.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-callees", type=int, default=80)
    parser.add_argument("--corpus", type=Path, default=REPO / ".work" / "size-corpus")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results" /
                        "inline-callee-oracle.md")
    args = parser.parse_args()
    cc = find_compiler(load_config(str(REPO)), cxx=False)
    major = clang_major(cc)
    plugin = find_plugin(major)
    if plugin is None:
        print(f"inline_callee_oracle: no pass plugin for LLVM {major}", file=sys.stderr)
        return 2
    compiler = Compiler(cc, lambda path: plugin_args(major, plugin, path))
    modules = corpus_modules(args.corpus)
    random.Random(args.seed).shuffle(modules)
    records, started = [], time.monotonic()
    with tqdm(total=args.modules, desc="modules", unit="module", file=sys.stderr,
              disable=None) as bar:
        for module in modules:
            if len(records) >= args.modules:
                break
            try:
                record = module_oracle(module, compiler, args.max_callees)
            except (CandidateError, OSError, ValueError) as exc:
                print(f"inline_callee_oracle: {module.source}: {exc}", file=sys.stderr)
                continue
            if record is not None:
                records.append(record)
                bar.update()
    text = render(records, args, time.monotonic() - started)
    atomic_write_bytes(args.out.absolute(), text.encode())
    atomic_write_bytes(args.out.absolute().with_suffix(".json"),
                       (json.dumps(records, indent=1) + "\n").encode())
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
