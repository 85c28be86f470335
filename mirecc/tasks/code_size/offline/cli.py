"""``mire size-data`` (the labelled dataset) and ``mire size-search`` (the
candidate library), both resumable: labels already measured are kept.

    mire corpus build --opt-level=-Oz --out .work/size-corpus --sources csmith,debian
    mire size-search --corpus .work/size-corpus --out .work/size-labels --write-spec
    mire size-data   --corpus .work/size-corpus --out .work/size-labels
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from mirecc.frontend.compiler import clang_major, find_compiler
from mirecc.taskapi.config import load_config
from mirecc.tasks.code_size.build import OPTION_MARK, candidate_text, opt_beside, option_flags
from mirecc.tasks.code_size.head import parse_library
from mirecc.tasks.code_size.offline.check import check
from mirecc.tasks.code_size.offline.dataset import (Labels, corpus_modules, export, label, sample,
                                                    write_meta)
from mirecc.tasks.code_size.offline.labels import OWN
from mirecc.tasks.code_size.offline.pipelines import (excluding, expand, random_candidates,
                                                      random_ipo_candidates, seed_candidates)
from mirecc.tasks.code_size.offline.search import (greedy_library, pad_library, pipeline_summary,
                                                   reductions)
from mirecc.util.fsutil import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[4]
DEFAULT_CORPUS = ROOT / ".work" / "size-corpus"
DEFAULT_OUT = ROOT / ".work" / "size-labels"
SPEC = ROOT / "heads" / "code-size" / "spec.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                        help="a corpus built with --opt-level=-Oz (default: %(default)s)")
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="labels directory (default: %(default)s)")
    parser.add_argument("--cc", help="the clang to measure with (default: the one mirecc "
                        "drives); opt is taken beside it")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds per tool run; a slower pipeline is an error label")
    parser.add_argument("--split", choices=("train", "test", "all"), default="all",
                        help="which modules (test: the held-out packages)")
    parser.add_argument("--limit", type=int, help="at most this many modules, spread "
                        "over packages (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--export", metavar="DIR",
                        help="size-data: write the labels measured so far under DIR "
                             "(gzipped; heads/code-size/labels is the committed copy) and stop")
    parser.add_argument("--pipelines", help="a file of candidates, one per line, or a library "
                        "report of size-search (library-14-ir.json) (default: the library "
                        "of heads/code-size/spec.yaml for the compiler's LLVM)")
    # size-search only
    parser.add_argument("--objective", choices=("text", "ir"), default="text",
                        help="size-search: choose the library by .text bytes (the driver's "
                             "objective, the spec's library) or by IR instructions (a "
                             "research library: library-<llvm>-ir.json, never the spec) "
                             "(default: %(default)s)")
    parser.add_argument("--random", type=int, default=60,
                        help="size-search: random variations of -Oz besides the systematic "
                             "ones (default: %(default)s)")
    parser.add_argument("--options", "--codegen", dest="options", default="machine-outliner",
                        help="size-search: named options (comma-separated, as in "
                             "mirecc.tasks.code_size.build: machine-outliner, "
                             "inline-threshold=N; '' for none) each candidate is also tried "
                             "with (default: %(default)s)")
    parser.add_argument("--exclude", default="",
                        help="size-search: comma-separated pass names; candidates that run "
                             "any of them are not tried (for example attributor-cgscc, whose "
                             "candidates changed csmith outputs in size-check on LLVM 14)")
    parser.add_argument("--checked", nargs="*", default=None, metavar="CHECK_JSON",
                        help="size-search: size-check reports whose failed candidates are "
                             "never tried again: a pipeline that once changed an output "
                             "leaves the library for good (default: every committed "
                             "heads/code-size/labels/check-<llvm>*.json and the --out "
                             "directory's check-<llvm>.json)")
    parser.add_argument("--random-ipo", type=int, default=0,
                        help="size-search: random variations that also run the attributor "
                             "or change the inliner's threshold (default: %(default)s)")
    parser.add_argument("--library-size", type=int, default=30,
                        help="size-search: pipelines in the library: greedily chosen, then "
                             "the best alone (default: %(default)s)")
    parser.add_argument("--write-spec", action="store_true",
                        help="size-search: write the library into heads/code-size/spec.yaml; "
                             "size-check: drop the pipelines that failed from it")
    parser.add_argument("--csmith", type=int, default=100,
                        help="size-check: csmith programs besides the bundled ones "
                             "(default: %(default)s)")


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """``mire bench size``'s own arguments (mirecc.tasks.code_size.offline.bench)."""
    parser.add_argument("--labels", default=str(DEFAULT_OUT),
                        help="size: the labels of mire size-data (default: %(default)s)")
    parser.add_argument("--size-corpus", default=str(DEFAULT_CORPUS),
                        help="size: the -Oz corpus the labels are of (default: %(default)s)")
    parser.add_argument("--size-features", default="counts,ir2vec,random-init,encoder",
                        help="size: feature sets of the learned rankings "
                             "(default: %(default)s)")
    parser.add_argument("--size-objective", choices=("text", "ir"), default="text",
                        help="size: what rankings learn and verification minimises: .text "
                             "bytes (the driver's) or IR instructions (default: %(default)s)")
    parser.add_argument("--size-library", metavar="FILE",
                        help="size: the candidates judged: a library report of mire "
                             "size-search (library-14-ir.json) or one pipeline per line "
                             "(default: the shipped spec's library)")
    parser.add_argument("--size-repeats", type=int, default=3,
                        help="size: seeds of the random and learned rankings, averaged")


def compiler_of(args) -> str:
    if args.cc:
        return args.cc
    return find_compiler(load_config(), cxx=False)


def _modules(args, split: str):
    modules = [m for m in corpus_modules(Path(args.corpus)) if split == "all"
               or m.split == split]
    return sample(modules, args.limit or len(modules), args.seed)


def named_library(compiler: str) -> list[tuple[str, str]]:
    """[(name, passes)] of the shipped library for ``compiler``'s LLVM."""
    spec = yaml.safe_load(SPEC.read_text())
    return parse_library(spec, SPEC).get(clang_major(compiler), [])


def library_passes(compiler: str) -> list[str]:
    return [passes for _, passes in named_library(compiler)]


def read_pipelines(path: Path) -> list[str]:
    """The candidates of a file: a library report of size-search (JSON) or
    one candidate per line; ValueError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    if Path(path).suffix == ".json":
        try:
            return [entry["pipeline"] for entry in json.loads(text)["library"]]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{path}: not a library report of mire size-search") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def run_data(args: argparse.Namespace) -> int:
    if args.export:
        for path in export(Path(args.out), Path(args.corpus), Path(args.export)):
            print(path)
        return 0
    compiler = compiler_of(args)
    out = Path(args.out)
    write_meta(out, compiler, Path(args.corpus))
    pipelines = (read_pipelines(Path(args.pipelines)) if args.pipelines
                 else library_passes(compiler))
    modules = _modules(args, args.split)
    labels = Labels(out)
    n = label(modules, pipelines, labels, compiler, jobs=args.jobs, timeout=args.timeout,
              desc="size-data")
    print(f"mire size-data: {len(modules)} modules x {len(pipelines) + 1} pipelines "
          f"(-Oz included); measured {n} now; {labels.path}")
    return 0


def run_search(args: argparse.Namespace) -> int:
    if args.objective != "text" and args.write_spec:
        raise ValueError("--write-spec takes the .text library only: the driver keeps the "
                         "smallest object")
    compiler = compiler_of(args)
    out = Path(args.out)
    write_meta(out, compiler, Path(args.corpus))
    modules = _modules(args, "train")
    if not modules:
        print(f"mire size-search: no training modules in {args.corpus}", file=sys.stderr)
        return 2
    oz = expand(opt_beside(compiler), "default<Oz>", str(modules[0].path))
    names = {**seed_candidates(oz), **random_candidates(oz, args.random, args.seed),
             **random_ipo_candidates(oz, args.random_ipo, args.seed)}
    names = excluding(names, [name for name in args.exclude.split(",") if name])
    options = [c for c in args.options.split(",") if c]
    major = clang_major(compiler)
    for option in options:
        try:
            option_flags(option)
        except ValueError as exc:
            raise ValueError(f"--options: {exc}") from None
    # every candidate alone and with each option
    names.update({candidate_text(passes, [option]): candidate_text(name, [option])
                  for option in options for passes, name in list(names.items())})
    reports = (args.checked if args.checked is not None
               else [*sorted((ROOT / "heads" / "code-size" / "labels").glob(f"check-{major}*.json")),
                     out / f"check-{major}.json"])
    failed = failed_candidates(reports)
    candidates = [c for c in names if c not in failed]
    if len(candidates) < len(names):
        print(f"mire size-search: {len(names) - len(candidates)} candidate(s) left out: they "
              f"changed a program's output in size-check ({', '.join(map(str, reports))})")
    labels = Labels(out)
    label(modules, candidates, labels, compiler, jobs=args.jobs, timeout=args.timeout,
          desc="size-search")
    measured = labels.table()
    table = {m.sha256: measured.get(m.sha256, {}) for m in modules}
    text_red, ir_red = reductions(table), reductions(table, "ir_instructions")
    red = text_red if args.objective == "text" else ir_red
    library = pad_library(red, greedy_library(red, candidates, args.library_size),
                          candidates, args.library_size)
    report = {"llvm": major, "objective": args.objective, "modules": len(red),
              "candidates": len(candidates),
              "library": [{**entry, "name": names[entry["pipeline"]],
                           "alone_text": pipeline_summary(text_red, entry["pipeline"]),
                           "alone_ir": pipeline_summary(ir_red, entry["pipeline"])}
                          for entry in library]}
    suffix = "" if args.objective == "text" else f"-{args.objective}"
    report_path = out / f"library-{major}{suffix}.json"
    atomic_write_bytes(report_path, json.dumps(report, indent=2).encode())
    what = ".text bytes" if args.objective == "text" else "IR instructions"
    print(f"mire size-search: {len(candidates)} candidates on {len(red)} training modules "
          f"(LLVM {major}); library of {len(library)} by {what} ({report_path}):")
    for i, entry in enumerate(report["library"], 1):
        alone = entry["alone_text" if args.objective == "text" else "alone_ir"]
        print(f"  {i:2d}. +{100 * entry['gain']:.2f}% (best-of-{i}: "
              f"{100 * entry['covered']:.2f}%), alone {100 * alone['mean']:+.2f}% "
              f"smaller on {100 * alone['smaller']:.0f}%  {entry['name']}")
    if args.write_spec:
        write_spec(major, [(names[e["pipeline"]], e["pipeline"]) for e in library])
        print(f"mire size-search: wrote {len(library)} pipelines for LLVM {major} into {SPEC}")
    return 0


def failed_candidates(reports) -> set[str]:
    """The candidates any of the size-check ``reports`` (paths; missing ones
    skipped) saw change a program's output."""
    failed = set()
    for path in map(Path, reports):
        if path.is_file():
            checked = json.loads(path.read_text())["pipelines"]
            failed.update(p for p, result in checked.items() if result["failed"])
    return failed


SPEC_HEADER = """\
# The code-size task's candidate library: opt -passes= pipelines, with the
# named options each adds to opt or the back end (options), per LLVM major.
# mirecc builds the first of them -- in this order, or in the order the
# ranker predicts for the TU -- at most size_search (K), and only as many as
# their costs (compile time over -Oz's) fit in size_budget, besides the user's
# own -Oz/-Os, and keeps the smallest object.  Written by mire size-search (the
# library), mire size-order (the order: bytes saved per unit of cost, and the
# costs), mire size-check (drops a candidate that changed a program's output)
# and mire size-train (the ranker); the inlining policy (inline_policy, built
# in the first candidate's slot with size_inline) by mire size-inline-judge
# --write-policy; see mirecc/tasks/code_size/offline/.
"""


def write_spec(major: int | None = None, pipelines: list[tuple[str, str]] | None = None,
               ranker: dict | None = None, drop_ranker: bool = False,
               costs: dict[str, float] | None = None, gate: dict | None = None,
               inline_policy: dict | None = None) -> None:
    """Rewrite heads/code-size/spec.yaml with LLVM ``major``'s library
    (``[(name, candidate text)]``) and/or the ``ranker`` section (a new library
    drops a ranker of that major: it ranked other pipelines).  ``costs``
    (name -> cost, ``mire size-order``) are written with the entries; an
    entry kept from the old library keeps its cost; ``gate``: the object gate
    of ``major`` (``mire size-gate``; a new library drops its old one);
    ``inline_policy``: the inlining policy's section (``mire
    size-inline-judge --write-policy``)."""
    spec = yaml.safe_load(SPEC.read_text())
    known = {e["name"]: e["cost"] for e in (spec.get("pipelines") or {}).get(major) or []
             if isinstance(e, dict) and "cost" in e}
    known.update(costs or {})

    def entry(name: str, candidate: str):
        passes, *options = candidate.split(OPTION_MARK)
        if name == passes and not options and name not in known:
            return passes
        return {"name": name, "passes": passes, **({"options": options} if options else {}),
                **({"cost": known[name]} if name in known else {})}

    if pipelines is not None:
        spec["pipelines"][major] = [entry(name, candidate) for name, candidate in pipelines]
        if (spec.get("ranker") or {}).get("llvm") == major:
            drop_ranker = True
        if major in (spec.get("object_gate") or {}):
            del spec["object_gate"][major]
            if not spec["object_gate"]:
                del spec["object_gate"]
    if drop_ranker:
        spec.pop("ranker", None)
    if ranker is not None:
        spec["ranker"] = ranker
    if gate is not None:
        spec.setdefault("object_gate", {})[major] = gate
    if inline_policy is not None:
        spec["inline_policy"] = inline_policy
    text = SPEC_HEADER + yaml.safe_dump(spec, sort_keys=False, width=1 << 30)
    atomic_write_bytes(SPEC, text.encode())


def run_check(args: argparse.Namespace) -> int:
    compiler = compiler_of(args)
    major = clang_major(compiler)
    named = named_library(compiler)
    library = [passes for _, passes in named]
    out = Path(args.out)
    results = check(compiler, library, out / "check-programs", csmith_count=args.csmith,
                    jobs=args.jobs)
    programs = results.pop("_programs")
    atomic_write_bytes(out / f"check-{major}.json", json.dumps(
        {"llvm": major, "programs": programs, "pipelines": results}, indent=2).encode())
    failed = [p for p in library if results[p]["failed"]]
    print(f"mire size-check: {len(library)} library pipelines (LLVM {major}) on "
          f"{len(programs)} programs (outputs against -O0): {len(library) - len(failed)} "
          f"correct on all, {len(failed)} failed")
    name_of = {OWN: OWN, **{passes: name for name, passes in named}}
    for p in [OWN, *failed]:
        for program, why in results[p]["failed"].items():
            print(f"  {name_of[p]}: {program}: {why}")
    if failed and args.write_spec:
        write_spec(major, [(n, p) for n, p in named if p not in failed])
        print(f"mire size-check: dropped {len(failed)} pipeline(s) from {SPEC}")
    return 1 if failed or results[OWN]["failed"] else 0


def run(args: argparse.Namespace) -> int:
    commands = {"size-search": run_search, "size-check": run_check, "size-data": run_data}
    try:
        return commands[args.command](args)
    except ValueError as exc:
        print(f"mire {args.command}: {exc}", file=sys.stderr)
        return 2
