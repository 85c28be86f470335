"""Back-end options beyond the code-size library, measured on held-out modules.

Does the candidate space widen with back-end switches that need no new
pass pipeline?  Each held-out corpus module's front-end bitcode goes
through clang's own -Oz and its back end with:

- the machine outliner (the library's option);
- the outliner run again on its own output (``-machine-outliner-reruns=2``);
- every function marked ``noredzone`` first (the outliner leaves functions
  that use the red zone alone; the attribute is what ``-mno-red-zone``
  makes the front end write, added to the IR text here because clang's
  ``-mno-red-zone`` does nothing to IR input), with and without reruns;
- no jump tables (``-fno-jump-tables``) with the outliner.

    .venv/bin/python benchmarks/size_backend_options.py [--corpus .work/size-corpus]
        [--packages zlib,bzip2,lua5.4] [--limit 60] [--md PAGE]

Prints and writes the total ``.text`` and loadable bytes of each variant
against -Oz.  Sizes are deterministic: one build each.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.util.elf import object_sizes  # noqa: E402  (loadable bytes, as shipped)
from mirecc.tasks.code_size.offline.labels import codegen_flags  # noqa: E402

OUTLINER = ["-mllvm", "-enable-machine-outliner"]
RERUNS = ["-mllvm", "-machine-outliner-reruns=2"]
VARIANTS = {              # name: (flags, noredzone IR)
    "-Oz": ([], False),
    "outliner": (OUTLINER, False),
    "outliner, rerun twice": (OUTLINER + RERUNS, False),
    "noredzone, outliner": (OUTLINER, True),
    "noredzone, outliner, rerun twice": (OUTLINER + RERUNS, True),
    "outliner, no jump tables": (OUTLINER + ["-fno-jump-tables"], False),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(ROOT / ".work" / "size-corpus"))
    parser.add_argument("--packages", default="zlib,bzip2,lua5.4")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--cc", default="clang-14")
    parser.add_argument("--md")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    wanted = set(args.packages.split(","))
    modules = [m for m in map(json.loads, (corpus / "manifest.jsonl").read_text().splitlines())
               if m.get("origin") in wanted]
    random.Random(0).shuffle(modules)
    modules = modules[:args.limit]
    dis = args.cc.replace("clang", "llvm-dis")
    totals = {name: [0, 0] for name in VARIANTS}
    measured = 0
    with tempfile.TemporaryDirectory() as work:
        for m in modules:
            bitcode = corpus / m["ir"]
            text_ir = Path(work, "m.ll")
            subprocess.run([dis, str(bitcode), "-o", str(text_ir)], check=True)
            noredzone = Path(work, "noredzone.ll")
            noredzone.write_text(re.sub(r"^(attributes #\d+ = \{ )", r"\1noredzone ",
                                        text_ir.read_text(), flags=re.M))
            row = {}
            for name, (flags, nrz) in VARIANTS.items():
                obj = Path(work, "v.o")
                proc = subprocess.run([args.cc, *codegen_flags(m["flags"]), *flags, "-w", "-c",
                                       "-x", "ir", str(noredzone if nrz else bitcode), "-o",
                                       str(obj)], capture_output=True)
                if proc.returncode != 0:
                    break
                row[name] = object_sizes(str(obj))
            if len(row) != len(VARIANTS):
                continue
            measured += 1
            for name, (loadable, text) in row.items():
                totals[name][0] += text
                totals[name][1] += loadable
    base_text, base_loadable = totals["-Oz"]
    lines = ["# Code size: back-end options beyond the library",
             "",
             f"Written by `benchmarks/size_backend_options.py --packages {args.packages} "
             f"--limit {args.limit}`: {measured} held-out modules of `{corpus.name}` "
             f"({args.packages}), clang `{args.cc}`, each variant one build of the module's "
             "front-end bitcode (sizes are deterministic).",
             "",
             "| variant | .text | change | loadable | change |",
             "|---|---:|---:|---:|---:|"]
    for name, (text, loadable) in totals.items():
        lines.append(f"| {name} | {text:,} | {100 * (text / base_text - 1):+.2f}% | "
                     f"{loadable:,} | {100 * (loadable / base_loadable - 1):+.2f}% |")
    page = "\n".join(lines) + "\n"
    print(page)
    if args.md:
        Path(args.md).write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
