"""What a function's own vector costs in a build (``Encoder.embed_functions``).

    .venv/bin/python benchmarks/function_embed_speed.py [--files A.c B.c ...]
        [--repeats 5] [--model DIR] [--out docs/results/function-embed-speed.md]

Protocol: each file is compiled to IR as the driver reads it (clang-14
``-O2 -Xclang -disable-llvm-passes``) and its program graph built once
(what the per-TU context holds); then, in this process, with the model
loaded (its load not timed), per round:

- module: ``embed_graph`` (the module's, functions' and loops' vectors pooled
  from one run over the whole graph), statement cache empty;
- functions, cold: ``embed_functions`` for every defined function, each on
  its own part of the graph, statement and function caches empty;
- functions, warm: the same call again with the same digests (the cache
  holds them: a rebuild, or a second decision on the same function);
- one function, warm: one function's vector from the cache (what one
  decision pays).

Median (min-max) of ``--repeats`` rounds, milliseconds, on this machine.
Default files: the bundled ``saxpy.c`` and zlib's ``deflate.c`` and
``inflate.c`` where ``scripts/setup.sh`` fetched zlib (``.work/src/zlib/zlib-*``).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ms(xs):
    return f"{statistics.median(xs) * 1e3:.1f} ({min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f})"


def main(argv=None) -> int:
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.encoder.runtime import Encoder, compile_to_ir
    from mirecc.graph import build_graph
    from mirecc.ir.text import function_digests
    from mirecc.util.fsutil import atomic_write_bytes

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", nargs="*", type=Path)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--model", type=Path, default=SHIPPED_MODEL_DIR)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" /
                   "function-embed-speed.md")
    args = p.parse_args(argv)
    from mirecc.cli.bench import fetched_library

    zlib = fetched_library()
    files = args.files or [ROOT / "benchmarks" / "programs" / "saxpy.c",
                           *([zlib / "deflate.c", zlib / "inflate.c"] if zlib else [])]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fn-embed-") as tmp:
        tmp = Path(tmp)
        for src in files:
            ll = tmp / (src.stem + ".ll")
            compile_to_ir(src, ll, "clang-14", ["-S", "-I", str(src.parent)])
            graph = build_graph(ll)
            digests = function_digests(ll.read_text())
            t = {"module": [], "cold": [], "warm": [], "one": []}
            n = 0
            for r in range(args.repeats):
                enc = Encoder(args.model, cache=tmp / f"cache-{src.stem}-{r}.sqlite")
                t0 = time.perf_counter()
                enc.embed_graph(graph)
                t1 = time.perf_counter()
                enc = Encoder(args.model, cache=tmp / f"cache2-{src.stem}-{r}.sqlite")
                t2 = time.perf_counter()
                got = enc.embed_functions(graph, digests=digests)
                t3 = time.perf_counter()
                enc.embed_functions(graph, digests=digests)
                t4 = time.perf_counter()
                enc.embed_functions(graph, [next(iter(got))], digests=digests)
                t5 = time.perf_counter()
                n = len(got)
                for k, v in zip(t, (t1 - t0, t3 - t2, t4 - t3, t5 - t4)):
                    t[k].append(v)
                print(f"{src.name}: round {r + 1}/{args.repeats}", file=sys.stderr)
            rows.append(f"| {src.name} | {graph.num_nodes} | {n} | {_ms(t['module'])} | "
                        f"{_ms(t['cold'])} | {_ms(t['warm'])} | {_ms(t['one'])} |")
    md = (f"# A function's own vector: what it costs\n\nWritten by "
          f"`benchmarks/function_embed_speed.py` ({platform.processor() or platform.machine()}, "
          f"model `{Path(args.model).name}`; median (min-max) of {args.repeats} rounds, "
          f"milliseconds, in process, model loaded, program graph built). module: the whole "
          f"graph once (module, functions and loops pooled from it), statement cache empty; "
          f"functions cold: every defined function on its own part of the graph, caches "
          f"empty; warm: the same with every function's digest cached; one: one function "
          f"from the cache.\n\n| file | graph nodes | functions | module | functions, cold | "
          f"functions, warm | one function, warm |\n|---|---:|---:|---|---|---|---|\n"
          + "\n".join(rows) + "\n")
    atomic_write_bytes(args.out, md.encode())
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
