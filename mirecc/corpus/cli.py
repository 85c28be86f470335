"""``mire corpus build``, ``report``, ``filter`` and ``pack``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

SOURCES = ("debian", "csmith", "opencl", "kernels")
DEFAULT_OUT = Path(__file__).resolve().parents[2] / ".work" / "corpus"


def _progress():
    try:
        # lazy (and optional): mire's parser imports this module; keep its start-up
        from tqdm import tqdm
    except ImportError:
        return None

    def make(**kw):
        return tqdm(file=sys.stderr, disable=None, mininterval=2, **kw)
    return make


def _interrupt_on_signals() -> None:
    """SIGTERM, and SIGINT even in a background job (where the shell ignores
    it), raise KeyboardInterrupt so that running builds are killed as a group
    and state files stay consistent."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_build(args: argparse.Namespace) -> int:
    _interrupt_on_signals()
    # lazy, as every import below: mire's parser imports this module; keep its start-up
    from mirecc.corpus.evalfilter import EvalFilter
    from mirecc.corpus.report import build_report, format_table
    from mirecc.corpus.store import Corpus, State

    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    bad = [s for s in sources if s not in SOURCES]
    if bad:
        print(f"mire corpus: unknown source(s) {', '.join(bad)}; choose from "
              f"{', '.join(SOURCES)}", file=sys.stderr)
        return 2
    ev = None if args.no_eval_filter else EvalFilter(
        [Path(d) for d in args.eval_dirs] if args.eval_dirs else None)
    corpus = Corpus(Path(args.out), ev)
    if args.redo:
        for source in sources:
            state = State(corpus.root, source)
            for key in args.redo.split(","):
                if state.is_done(key):
                    state.forget(key)
    progress = _progress()
    timings = {}
    for source in sources:
        t0 = time.monotonic()
        if source == "debian":
            from mirecc.corpus.debian import DEFAULT_PACKAGES, build_packages  # lazy: as above
            pkgs = args.packages.split(",") if args.packages else DEFAULT_PACKAGES
            build_packages(corpus, pkgs, jobs=args.jobs, timeout=args.package_timeout,
                           flags=args.opt_level,
                           progress=progress)
        elif source == "csmith":
            from mirecc.corpus.csmith import build_csmith  # lazy: as above
            build_csmith(corpus, args.csmith_count, seed=args.seed, jobs=args.jobs,
                         opt_level=args.opt_level,
                         progress=progress)
        elif source == "opencl":
            from mirecc.corpus.opencl import DEFAULT_CL_PACKAGES, build_opencl  # lazy: as above
            pkgs = args.cl_packages.split(",") if args.cl_packages else DEFAULT_CL_PACKAGES
            build_opencl(corpus, pkgs, jobs=args.jobs, progress=progress)
        elif source == "kernels":
            from mirecc.corpus.kernels import build_kernels  # lazy: as above
            build_kernels(corpus, args.kernel_count, seed=args.seed, jobs=args.jobs,
                          progress=progress)
        timings[source] = round(time.monotonic() - t0, 1)
        print(f"mire corpus: {source} took {timings[source]} s", file=sys.stderr)
    report = build_report(corpus.root, {"last_run_seconds": timings})
    print(format_table(report))
    print(f"report: {corpus.root / 'report.json'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    # lazy: mire's parser imports this module; keep its start-up
    from mirecc.corpus.report import build_report, format_table
    report = build_report(Path(args.out))
    print(format_table(report))
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    # lazy: mire's parser imports this module; keep its start-up
    from mirecc.corpus.evalfilter import EvalFilter
    from mirecc.corpus.store import Corpus
    ev = EvalFilter([Path(d) for d in args.eval_dirs] if args.eval_dirs else None)
    n = Corpus(Path(args.out), ev).refilter(progress=_progress())
    print(f"mire corpus: {n} module(s) dropped as copies of {ev.files} evaluation kernel "
          f"file(s)")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    # lazy: mire's parser imports this module; keep its start-up
    from mirecc.encoder.data import CorpusIndex
    from mirecc.encoder.pack import build_pack
    from mirecc.ir import tokenizer as tokmod
    index = CorpusIndex(args.corpus)
    if not len(index):
        sys.exit(f"mire corpus pack: {args.corpus}: no modules (run mire corpus build)")
    summary = build_pack(index, tokmod.load(), args.out, args.max_nodes, args.max_statements,
                         jobs=args.jobs)
    print(json.dumps(summary, indent=1, sort_keys=True))
    print(f"wrote {args.out} ({summary['bytes'] / 2**20:.1f} MiB)")
    return 0


def add_parser(sub) -> None:
    corpus = sub.add_parser("corpus", help="build the pretraining IR corpus",
                            description="Build a deduplicated IR corpus from Debian source "
                                        "packages, csmith, OpenCL kernels and generated "
                                        "loop kernels.")
    csub = corpus.add_subparsers(dest="corpus_command", required=True)
    b = csub.add_parser("build", help="build (or resume building) the corpus")
    b.add_argument("--out", default=str(DEFAULT_OUT), help="corpus directory "
                   "(default: %(default)s)")
    b.add_argument("--sources", default=",".join(SOURCES),
                   help="comma-separated: debian,csmith,opencl,kernels (default: all)")
    b.add_argument("--packages", help="Debian source packages (default: the built-in list)")
    b.add_argument("--cl-packages", help="Debian source packages to take .cl files from")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    b.add_argument("--package-timeout", type=float, default=1200,
                   help="seconds per Debian package, fetch and build (default: %(default)s)")
    b.add_argument("--csmith-count", type=int, default=300)
    b.add_argument("--kernel-count", type=int, default=1000,
                   help="generated loop-kernel programs (default: %(default)s)")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--opt-level", default="-O2", choices=["-O1", "-O2", "-O3", "-Os", "-Oz"],
                   help="the level Debian packages and csmith programs are compiled at "
                        "(their front-end IR carries it; the code-size dataset uses -Oz)")
    b.add_argument("--redo", help="comma-separated items (packages) to build again even "
                   "if their state says done")
    b.add_argument("--eval-dirs", nargs="*", help="directories of evaluation .ll files "
                   "whose copies are dropped (default: ../shared/datasets kernels)")
    b.add_argument("--no-eval-filter", action="store_true")
    b.set_defaults(func=cmd_build)
    r = csub.add_parser("report", help="recount an existing corpus")
    r.add_argument("--out", default=str(DEFAULT_OUT))
    r.set_defaults(func=cmd_report)
    f = csub.add_parser("filter", help="re-apply the evaluation-kernel filter to a corpus")
    f.add_argument("--out", default=str(DEFAULT_OUT))
    f.add_argument("--eval-dirs", nargs="*")
    f.set_defaults(func=cmd_filter)
    k = csub.add_parser("pack", help="the encoded corpus, large modules cut into per-function "
                                     "pieces, in one compact file (mire pretrain --pack)")
    k.add_argument("--corpus", default=".work/corpus")
    k.add_argument("--out", default=".work/corpus.pack.npz")
    k.add_argument("--max-nodes", type=int, default=6000, help="nodes per piece")
    k.add_argument("--max-statements", type=int, default=768,
                   help="distinct statements per piece")
    k.add_argument("--jobs", type=int, default=0, help="processes (0: one per core)")
    k.set_defaults(func=cmd_pack)
