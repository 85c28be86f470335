"""``mire``: mirecc's tool for everything that is not compiling.

Subcommands: mirecc's own (``bench``, ``corpus``, ``pretrain``, ``export``,
``embed``, ``serve``, ``stats``, ``store``, ``tune``, ``adapt``, ``gates``, ``run``: the
launcher, :mod:`mirecc.launch`), then those the tasks declare
(``Task.commands``: their datasets and training); ``mire bench``'s suites
are ``programs`` and those the tasks declare (``Task.bench``), with the
options each suite's task adds (their modules imported only for ``mire
bench`` itself).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from mirecc.taskapi.registry import tasks


def _suites() -> dict[str, list]:
    """suite name -> the :class:`mirecc.taskapi.api.BenchSuite` the tasks declare."""
    out: dict[str, list] = {}
    for task in tasks().values():
        for suite in task.bench:
            out.setdefault(suite.name, []).append(suite)
    return out


def _bench(args: argparse.Namespace) -> int:
    if args.suite == "encoder":
        from mirecc.cli.judge import run  # lazy: a subcommand's module, as in build_parser

        return run(args)
    if args.suite != "programs":
        candidates = _suites()[args.suite]
        chosen = next((s for s in candidates if s.variant is None
                       or s.variant == getattr(args, "tune_task", None)), candidates[0])
        run, _ = chosen.load()
        return run(args)
    from mirecc.cli.bench import bundled_programs_dir, run_bench  # lazy: as in build_parser

    programs = Path(args.programs) if args.programs else bundled_programs_dir()
    return run_bench(programs, Path(args.out), args.flags.split(), args.compile_repeats,
                     args.run_repeats, args.cc, size_flags=args.size_flags.split(),
                     best_known=args.size_best_known, tune_program=args.tune_program,
                     tune_budget=args.tune_budget, library=args.size_project)


#: subcommands whose module is imported only when they run:
#: (name, module with add_arguments/run, help, description)
LAZY_SUBCOMMANDS = [
    ("pretrain", "mirecc.encoder.train",
     "pretrain the MIREncoder on a corpus (needs torch: pip install .[train])",
     "Pretrain MIREncoder (masked language modelling, graph auto-encoder, IR-graph "
     "matching) with checkpoints, resume and a metrics log. For several processes: "
     "torchrun --nproc-per-node N -m mirecc.encoder.train ..."),
    ("pretrain-feedback", "mirecc.encoder.finetune",
     "train the encoder on compiler feedback: per-function outcomes of a fixed set of "
     "pipelines (needs torch)",
     "Train the encoder (from the shipped weights or random) so that its function vectors "
     "predict, or are near for, the outcome vectors of python -m mirecc.encoder.feedback; "
     "exports the result as an encoder directory."),
    ("export", "mirecc.encoder.export",
     "export a pretrained encoder to ONNX with its manifest (needs torch)",
     "Export model.pt to statements.onnx + graph.onnx (opset 18, dynamic shapes), check "
     "each against torch, copy the tokenizer and write manifest.json."),
    ("embed", "mirecc.cli.embed",
     "embed LLVM IR or a source file with the shipped encoder",
     "Module, function and loop embeddings from the frozen encoder in ONNX Runtime, with "
     "an on-disk statement cache shared by concurrent runs."),
    ("serve", "mirecc.tu.server",
     "run the per-user pipeline server (mirecc and mire embed --server start it; "
     "--stop stops it and the compile server)",
     "Hold the encoder, the task heads and their ONNX sessions loaded and run the "
     "decision pipeline (graph, embedding, heads) for the driver, and embedding "
     "requests, on a Unix socket only this user can reach; exits when idle."),
    ("stats", "mirecc.tu.stats",
     "what mirecc did: TUs seen, decided, applied, cached, and why others were not",
     "Counters kept in the cache directory by every mirecc call, as ccache's "
     "statistics: translation units seen, decided, applied, served from the result "
     "cache, and the calls and TUs skipped, by reason code."),
    ("store", "mirecc.cli.store",
     "the team store of verified results: status, fill, prune, export, import",
     "Code-size winners shared by every build that names the same store (store / "
     "MIRECC_STORE: redis://host:port/db or a shared directory): what it holds, a build "
     "that fills it (store_write), removing what no build can use, and moving entries."),
    ("tune", "mirecc.cli.tune",
     "time the heads' ranked loop candidates on your own benchmark and keep the winners in "
     "a decisions profile",
     "Build the project through mirecc (--build, which must rebuild: make -B), time --run, "
     "then try each loop's candidates in the loop-vectorize head's order, keeping a change "
     "only when the output is the same and the run is faster beyond the noise; writes "
     "mirecc.profile for MIRECC_PROFILE. mire tune --build 'make -B CC=mirecc' --run "
     "'./bench'"),
    ("adapt", "mirecc.cli.adapt",
     "list the adaptive runtime's verdicts: per site, what was tried and kept",
     "Read the adaptive runtime's stores (per user and machine, written by programs "
     "built with adapt_openmp or adapt_loops): per OpenMP region or function in versions "
     "and input-size bucket, the candidates tried, the one kept, its measured speedup "
     "over the program's own, and the invocations and runs it took; --forget drops them."),
    ("gates", "mirecc.learn.gates",
     "tabulate the installed heads' apply gates, calibrated leave one application out",
     "Read each installed head's calibrated gate (metrics.json, written by its training "
     "command): the threshold before and after calibration, the slowest held-out "
     "application and the geomean, the whole sweep; writes docs/results/gates.md."),
    ("run", "mirecc.launch.run",
     "run a program with the NUMA/prefetcher decisions its binary records, and under "
     "a package power cap (RAPL); what it changes is restored when it exits",
     "Apply the NUMA head's decisions recorded in the binary's .mirecc.numa section "
     "(threads, OMP_PLACES/OMP_PROC_BIND, numactl page policy, the prefetcher MSR with "
     "--allow-msr) as far as this machine supports them, and set the long-term power "
     "limit of every RAPL package zone (/sys/class/powercap/intel-rapl:N) for the run; "
     "old values are put back when the program exits or is interrupted; what the "
     "machine lacks is said in one line and skipped. mire run --dry-run -- ./prog args;"
     " mire run --power-cap 65 -- ./prog args"),
]


def _add_lazy(parser: argparse.ArgumentParser, module: str, chosen: bool) -> None:
    """Arguments from ``module.add_arguments``, run by ``module.run``. The
    module (for pretrain and export: torch) is imported only when its
    subcommand is the one being run (``chosen``), so that ``mire embed``
    starts without torch and ``mire --help`` imports nothing heavy."""

    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).run(args)
    parser.set_defaults(func=run)
    if not chosen:
        return
    try:
        importlib.import_module(module).add_arguments(parser)
    except ImportError as exc:   # e.g. no torch: say so, and what to install
        name, why = parser.prog.split()[-1], str(exc)

        def missing(args: argparse.Namespace) -> int:
            print(f"mire {name}: {why}; install the training extras: "
                  "pip install 'mirecc[train]'", file=sys.stderr)
            return 2
        parser.add_argument("rest", nargs=argparse.REMAINDER)
        parser.set_defaults(func=missing)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``mire`` parser; ``argv`` (default: sys.argv[1:]) tells which
    subcommand's heavy module to import for its arguments."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = argparse.ArgumentParser(
        prog="mire", description="mirecc's tool for everything that is not compiling")
    sub = parser.add_subparsers(dest="command", required=True)

    suites = _suites()
    bench = sub.add_parser(
        "bench", help="build the bundled programs with clang and mirecc and show what mirecc "
                      "does to them; or run a task's benchmark",
        description="programs (default): the bundled programs built with clang and with "
                    "mirecc: code size at -Oz, -O3 with the defaults and forced OpenMP "
                    "decisions, one mire tune; outputs checked. "
                    + " ".join(f"{name}: {'; '.join(s.summary for s in declared)}."
                               for name, declared in suites.items())
                    + " encoder: each representation (statistics, IR2Vec, encoders, per "
                      "module or per function) judged on every task's labels as trials "
                      "saved, leave one program out, with resampled intervals.")
    bench.add_argument("suite", nargs="?", default="programs",
                       choices=("programs", "encoder", *suites),
                       help="what to benchmark (default: %(default)s)")
    bench.add_argument("--programs", help="directory of single-file C programs "
                       "(default: the bundled benchmarks/programs)")
    bench.add_argument("--out", default="mirecc-bench", help="where to save bench.md "
                       "and bench.json (programs: and bench.png) (default: %(default)s)")
    bench.add_argument("--flags", default="-O3", help="compile flags (default: %(default)s)")
    bench.add_argument("--compile-repeats", type=int, default=3)
    bench.add_argument("--run-repeats", type=int, default=5)
    bench.add_argument("--cc", help="the plain clang to compare with (default: the "
                       "one mirecc drives)")
    bench.add_argument("--size-flags", default="-Oz",
                       help="programs: compile flags of the code-size part (default: "
                            "%(default)s)")
    bench.add_argument("--size-best-known", type=int, default=-1, metavar="N",
                       help="programs: beside mirecc's default, the smallest object with N "
                            "library candidates built (MIRECC_SIZE_SEARCH=N; -1: the whole "
                            "library; 0: not measured) (default: %(default)s)")
    bench.add_argument("--size-project", default=None, metavar="DIR",
                       help="programs: a zlib source tree built with clang and with mirecc "
                            "in the code-size part (default: the one scripts/setup.sh "
                            "fetches, when there; none: not built)")
    bench.add_argument("--tune-program", default=None, metavar="NAME",
                       help="programs: the program mire tune runs on (default: tri_omp when "
                            "present, else the first; none: no tune)")
    # lazy, as each subcommand's module here: loaded when the parser is built, not on import
    from mirecc.cli.bench import DEFAULT_TUNE_BUDGET
    bench.add_argument("--tune-budget", type=int, default=DEFAULT_TUNE_BUDGET,
                       help="programs: mire tune's --budget (default: %(default)s)")
    bench.set_defaults(func=_bench)
    from mirecc.cli.judge import add_arguments as add_judge_arguments  # lazy: as above
    add_judge_arguments(bench)
    if chosen == "bench":
        # the suites' modules, for their options: only when bench runs
        added = set()
        for declared in suites.values():
            for suite in declared:
                _, add_arguments = suite.load()
                if add_arguments is not None and add_arguments not in added:
                    added.add(add_arguments)
                    add_arguments(bench)

    from mirecc.corpus.cli import add_parser as add_corpus_parser  # lazy: as above
    add_corpus_parser(sub)

    commands = list(LAZY_SUBCOMMANDS) + [tuple(c) for t in tasks().values() for c in t.commands]
    for name, module, help_text, description in commands:
        _add_lazy(sub.add_parser(name, help=help_text, description=description), module,
                  chosen == name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("mire: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
