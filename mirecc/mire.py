"""``mire``: mirecc's tool for everything that is not compiling.

Subcommands: ``bench``, ``corpus``, ``pretrain``, ``export``, ``embed``, ``serve``,
``stats``, ``run``, ``omp-data``, ``omp-train``, ``numa-regions``, ``numa-train``, ``tune``, ``size-data``, ``size-search``, ``size-check``, ``size-train``, ``vectorize-data``, ``vectorize-train``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _bench(args: argparse.Namespace) -> int:
    if args.suite == "size":
        from mirecc.tasks.code_size.offline.bench import run
        return run(args)
    if args.suite == "openmp":
        from mirecc.tasks.openmp.offline.train import run_bench
        return run_bench(args)
    if args.suite == "numa":
        from mirecc.tasks.numa.offline.bench import run
        return run(args)
    if args.suite == "vectorize":
        from mirecc.tasks.loop_vectorize.offline.bench import run
        return run(args)
    if args.suite == "tune" and args.tune_task == "openmp":
        from mirecc.tasks.openmp.offline.tune_bench import run
        return run(args)
    if args.suite == "tune":
        from mirecc.tasks.loop_vectorize.offline.tune_bench import run
        return run(args)
    if args.suite != "programs":
        from mirecc.tasks.opencl.offline.cli import run
        return run(args)
    from mirecc.bench import bundled_programs_dir, run_bench

    programs = Path(args.programs) if args.programs else bundled_programs_dir()
    return run_bench(programs, Path(args.out), args.flags.split(), args.compile_repeats,
                     args.run_repeats, args.cc, size_flags=args.size_flags.split(),
                     best_known=args.size_best_known, tune_program=args.tune_program,
                     tune_budget=args.tune_budget)


#: subcommands whose module is imported only when they run:
#: (name, module with add_arguments/run, help, description)
LAZY_SUBCOMMANDS = [
    ("pretrain", "mirecc.encoder.train",
     "pretrain the MIREncoder on a corpus (needs torch: pip install .[train])",
     "Pretrain MIREncoder (masked language modelling, graph auto-encoder, IR-graph "
     "matching) with checkpoints, resume and a metrics log. For several processes: "
     "torchrun --nproc-per-node N -m mirecc.encoder.train ..."),
    ("export", "mirecc.encoder.export",
     "export a pretrained encoder to ONNX with its manifest (needs torch)",
     "Export model.pt to statements.onnx + graph.onnx (opset 18, dynamic shapes), check "
     "each against torch, copy the tokenizer and write manifest.json."),
    ("embed", "mirecc.encoder.embedcli",
     "embed LLVM IR or a source file with the shipped encoder",
     "Module, function and loop embeddings from the frozen encoder in ONNX Runtime, with "
     "an on-disk statement cache shared by concurrent runs."),
    ("serve", "mirecc.server",
     "run the per-user pipeline server (mirecc and mire embed --server start it)",
     "Hold the encoder, the task heads and their ONNX sessions loaded and run the "
     "decision pipeline (graph, embedding, heads) for the driver, and embedding "
     "requests, on a Unix socket only this user can reach; exits when idle."),
    ("stats", "mirecc.stats",
     "what mirecc did: TUs seen, decided, applied, cached, and why others were not",
     "Counters kept in the cache directory by every mirecc call, as ccache's "
     "statistics: translation units seen, decided, applied, served from the result "
     "cache, and the calls and TUs skipped, by reason code."),
    ("run", "mirecc.power",
     "run a program with the NUMA/prefetcher decisions its binary records, and under a "
     "package power cap (RAPL); what it changes is restored when it exits",
     "Apply the NUMA head's decisions recorded in the binary's .mirecc.numa section "
     "(threads, OMP_PLACES/OMP_PROC_BIND, numactl page policy, the prefetcher MSR with "
     "--allow-msr) as far as this machine supports them, and set the long-term power "
     "limit of every RAPL package zone (/sys/class/powercap/intel-rapl:N) for the run; "
     "old values are put back when the program exits or is interrupted; what the machine "
     "lacks is said in one line and skipped. mire run --dry-run -- ./prog args; "
     "mire run --power-cap 65 -- ./prog args"),
    ("vectorize-data", "mirecc.tasks.loop_vectorize.offline.cli",
     "generate loop kernels and time every (VF, IF) of each (the vectorize dataset)",
     "Generate loop kernels of many families, compile each with every (VF, IF) in "
     "{1..64} x {1..16} and with clang's default, check outputs against a scalar "
     "reference, time them pinned with repeats, and write labels (resumable)."),
    ("omp-data", "mirecc.tasks.openmp.offline.cli",
     "time threads x schedule x chunk per OpenMP region (the OpenMP dataset)",
     "Build PolyBench-ACC's OpenMP programs (and generated kernel families) with every "
     "(threads, schedule, chunk) forced on each parallel region through the pass plugin, "
     "time them against the default build with repeats, check outputs, and write labels "
     "(resumable); --summary: the best configuration per region and the oracle."),
    ("omp-train", "mirecc.tasks.openmp.offline.train",
     "judge the OpenMP head leave one application out, and write it (needs scikit-learn)",
     "From the labels of mire omp-data: default, best single configuration and a forest "
     "per feature set (region statistics, IR2Vec, a random-init encoder, mirecc's encoder), "
     "each judged on applications it never saw: speedup, share of the oracle, slowdowns; "
     "--write-head fits one on every region and writes heads/openmp."),
    ("numa-regions", "mirecc.tasks.numa.offline.cli",
     "map the NUMA/prefetcher dataset's regions to their programs' IR",
     "Compile the programs of ../shared/datasets/numa-prefetch/sources as their makefiles "
     "do (-O3 -fopenmp -g) and map each published region (__cere__<file>_<function>_<line>) "
     "to the outlined function of the parallel region at that line; report the regions "
     "that cannot be mapped, with the reason."),
    ("tune", "mirecc.tune",
     "time the heads' ranked loop candidates on your own benchmark and keep the winners in "
     "a decisions profile",
     "Build the project through mirecc (--build, which must rebuild: make -B), time --run, "
     "then try each loop's candidates in the loop-vectorize head's order, keeping a change "
     "only when the output is the same and the run is faster beyond the noise; writes "
     "mirecc.profile for MIRECC_PROFILE. mire tune --build 'make -B CC=mirecc' --run "
     "'./bench'"),
    ("numa-train", "mirecc.tasks.numa.offline.train",
     "fit the NUMA/prefetcher head on the published labels and write heads/numa",
     "Per input size, a forest over the mapped regions' static statistics predicting each "
     "candidate configuration's log speedup over the default (the policy mire bench numa "
     "judges as 'gated forest: statistics'); --write-head writes heads/numa."),
    ("size-data", "mirecc.tasks.code_size.offline.cli",
     "measure the code-size dataset: IR instructions and .text bytes of every corpus "
     "module through -Oz and each library pipeline",
     "For each module of a corpus built at -Oz (mire corpus build --opt-level=-Oz), "
     "build it through clang's -Oz and through every pipeline of the code-size library "
     "(or --pipelines FILE) and record IR instructions and .text bytes (resumable)."),
    ("size-search", "mirecc.tasks.code_size.offline.cli",
     "search the code-size candidate library on training modules",
     "Measure systematic and random variations of -Oz on a sample of training modules "
     "(held-out packages never), then choose greedily the pipelines that together "
     "shrink the most below -Oz; --write-spec puts them into heads/code-size/spec.yaml."),
    ("size-check", "mirecc.tasks.code_size.offline.cli",
     "check that every code-size library pipeline keeps programs' outputs",
     "Build the bundled programs and csmith programs (seeds the corpus never used) "
     "through clang -Oz and each library pipeline, run them and compare their output "
     "with their -O0 build; --write-spec drops every pipeline that changed one."),
    ("size-train", "mirecc.tasks.code_size.offline.train",
     "train the code-size ranker on the training packages' labels (needs scikit-learn)",
     "Judge each feature set the driver computes (instruction counts, the encoder's "
     "embedding) by leave-packages-out cross-validation against the library order, and "
     "ship the best forest as heads/code-size/ranker.onnx, or none if none beats it."),
    ("gates", "mirecc.gates",
     "tabulate the installed heads' apply gates, calibrated leave one application out",
     "Read each installed head's calibrated gate (metrics.json, written by its training "
     "command): the threshold before and after calibration, the slowest held-out "
     "application and the geomean, the whole sweep; writes docs/results/gates.md."),
    ("vectorize-train", "mirecc.tasks.loop_vectorize.offline.train",
     "train the per-loop vectorize head on the vectorize dataset (needs torch)",
     "Embed each kernel's target loop and function with the frozen encoder, train the "
     "(VF, IF) head on the training families, evaluate by family, and write "
     "heads/loop-vectorize."),
]


def _add_lazy(parser: argparse.ArgumentParser, module: str, chosen: bool) -> None:
    """Arguments from ``module.add_arguments``, run by ``module.run``. The
    module (for pretrain and export: torch) is imported only when its
    subcommand is the one being run (``chosen``), so that ``mire embed``
    starts without torch and ``mire --help`` imports nothing heavy."""
    import importlib

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
    parser = argparse.ArgumentParser(prog="mire", description="mirecc's tool for everything that is not compiling")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser(
        "bench", help="build the bundled programs with clang and mirecc and compare; "
                      "or evaluate the OpenCL heads (devmap, coarsening)",
        description="programs (default): the bundled programs built with plain clang and "
                    "with mirecc: code size at -Oz (loadable bytes, never larger, outputs "
                    "checked, best known), -O3 with the defaults (objects checked byte for "
                    "byte) and with the OpenMP head forced, and one short mire tune. "
                    "devmap / coarsening: compare mirecc's embeddings with IR2Vec and the "
                    "prior art on the device-mapping and thread-coarsening datasets, on the "
                    "same folds (needs pip install 'mirecc[train,bench]'). vectorize: "
                    "binaries built by mirecc -O3 (the loop-vectorize head) against clang "
                    "-O3, on the dataset's held-out kernel families or --programs DIR. size: "
                    "rankings of the code-size library on held-out packages, from the "
                    "labels of mire size-data. openmp: the OpenMP head's policies judged "
                    "leave one application out on the labels of mire omp-data "
                    "(--omp-labels). numa: per-region NUMA/placement/prefetcher policies "
                    "judged on the published measurements (leave one program out, 10 "
                    "folds). tune: mire tune's candidates in the head's order vs random, "
                    "replayed on timed held-out loop kernels (--tune-data), or on OpenMP "
                    "regions' configurations (--tune-task openmp, --omp-labels).")
    bench.add_argument("suite", nargs="?", default="programs",
                       choices=("programs", "devmap", "coarsening", "vectorize", "size",
                                "openmp", "numa", "tune"),
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
    bench.add_argument("--tune-program", default=None, metavar="NAME",
                       help="programs: the program mire tune runs on (default: tri_omp when "
                            "present, else the first; none: no tune)")
    from mirecc.bench import DEFAULT_TUNE_BUDGET
    bench.add_argument("--tune-budget", type=int, default=DEFAULT_TUNE_BUDGET,
                       help="programs: mire tune's --budget (default: %(default)s)")
    bench.set_defaults(func=_bench)
    from mirecc.tasks.opencl.offline.cli import add_arguments as add_task_bench_arguments
    add_task_bench_arguments(bench)
    from mirecc.tasks.loop_vectorize.offline.bench import add_arguments as add_vectorize_bench_arguments
    add_vectorize_bench_arguments(bench)
    from mirecc.tasks.code_size.offline.cli import add_bench_arguments as add_size_bench_arguments
    add_size_bench_arguments(bench)
    bench.add_argument("--omp-labels", default=".work/omp-labels",
                       help="openmp: the dataset directory of mire omp-data (default: %(default)s)")
    from mirecc.tasks.numa.offline.bench import add_arguments as add_numa_bench_arguments
    add_numa_bench_arguments(bench)
    from mirecc.tasks.loop_vectorize.offline.tune_bench import add_arguments as add_tune_bench
    add_tune_bench(bench)

    from mirecc.corpus.cli import add_parser as add_corpus_parser
    add_corpus_parser(sub)

    for name, module, help_text, description in LAZY_SUBCOMMANDS:
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
