"""How much the same C code's statements agree between clang 14 and clang 19.

Compiles each C file with both compilers to textual IR and compares the
statements before normalisation (clang's printed instruction text, metadata
and all) and after ``mirecc.ir.normalise.normalise_statement``.  Two figures
per mode:

- jaccard: |S14 & S19| / |S14 | S19| over the sets of distinct statements;
- covered: the fraction of clang-19 statement *occurrences* whose text is in
  the clang-14 set (what a vocabulary or model built on clang-14 IR would
  have seen).

Usage (from the repository root):

    .venv/bin/python benchmarks/normalisation_overlap.py            # programs + zlib + lua
    .venv/bin/python benchmarks/normalisation_overlap.py --json out.json a.c b.c
    .venv/bin/python benchmarks/normalisation_overlap.py --save-ir /tmp/mirecc-ir   # keep the IR

Default inputs: benchmarks/programs/*.c, and the zlib and lua 5.4 sources
under .work/src when ``scripts/setup.sh --test`` / real_projects fetched them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mirecc.ir.normalise import normalise_statement, split_statements  # noqa: E402

MODES = {
    "O1-disable-llvm-passes": ["-O1", "-Xclang", "-disable-llvm-passes"],
    "O2": ["-O2"],
}


def default_sources() -> list[Path]:
    """The bundled programs plus zlib and lua sources when present."""
    srcs = sorted((ROOT / "benchmarks" / "programs").glob("*.c"))
    work = ROOT / ".work" / "src"
    srcs += sorted(work.glob("zlib/zlib-*/*.c"))
    srcs += sorted(p for p in work.glob("lua5.4/lua5.4-*/src/*.c") if p.name not in ("lua.c", "luac.c"))
    return srcs


def compile_ll(cc: str, src: Path, flags: list[str], out: Path) -> str | None:
    """clang's textual IR for src, or None when it does not compile."""
    # Debian's lua sources include a generated multiarch header: supply it.
    shim = out.parent / "include"
    if not (shim / "lua5.4-deb-multiarch.h").exists():
        shim.mkdir(exist_ok=True)
        (shim / "lua5.4-deb-multiarch.h").write_text('#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n')
    cmd = [cc, *flags, "-S", "-emit-llvm", "-w", "-I", str(src.parent), "-I", str(shim),
           str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return out.read_text()


def overlap(a: list[str], b: list[str]) -> dict:
    """jaccard of the two sets, and the fraction of b's occurrences found in set(a)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return {
        "jaccard": len(sa & sb) / len(union) if union else 1.0,
        "covered": sum(1 for s in b if s in sa) / len(b) if b else 1.0,
        "distinct_14": len(sa), "distinct_19": len(sb),
        "occurrences_14": len(a), "occurrences_19": len(b),
    }


def measure(sources: list[Path], cc14: str, cc19: str, modes: dict[str, list[str]],
            extra: list[str] = (), save_ir: Path | None = None) -> dict:
    """Per mode: raw and normalised overlap, pooled over all sources.

    With save_ir, every .ll that both compilers produced is kept there as
    ``<mode>/<compiler>/<n>-<source stem>.ll`` (the tokenizer's stand-in corpus).
    """
    result: dict = {"sources": len(sources), "compilers": [cc14, cc19], "modes": {}}
    with tempfile.TemporaryDirectory(prefix="mirecc-overlap-") as tmp:
        for mode, flags in modes.items():
            flags = [*flags, *extra]
            jobs = []
            with ThreadPoolExecutor(max_workers=2) as pool:
                for i, src in enumerate(sources):
                    for cc in (cc14, cc19):
                        out = Path(tmp) / f"{i}-{Path(cc).name}.ll"
                        jobs.append(pool.submit(compile_ll, cc, src, flags, out))
            texts = [j.result() for j in jobs]
            raw = {cc14: [], cc19: []}
            used = 0
            per_file = []
            for i, src in enumerate(sources):
                t14, t19 = texts[2 * i], texts[2 * i + 1]
                if t14 is None or t19 is None:
                    continue
                used += 1
                if save_ir is not None:
                    for cc, text in ((cc14, t14), (cc19, t19)):
                        d = save_ir / mode / Path(cc).name
                        d.mkdir(parents=True, exist_ok=True)
                        (d / f"{i:03d}-{src.stem}.ll").write_text(text)
                r14, r19 = list(split_statements(t14)), list(split_statements(t19))
                raw[cc14] += r14
                raw[cc19] += r19
                n14 = [n for n in map(normalise_statement, r14) if n is not None]
                n19 = [n for n in map(normalise_statement, r19) if n is not None]
                per_file.append({"file": str(src.relative_to(ROOT) if src.is_relative_to(ROOT) else src),
                                 "after": overlap(n14, n19)["covered"]})
            norm = {cc: [n for n in map(normalise_statement, raw[cc]) if n is not None] for cc in raw}
            seen14 = set(norm[cc14])
            m = {
                "files": used,
                "before": overlap(raw[cc14], raw[cc19]),
                "after": overlap(norm[cc14], norm[cc19]),
                "worst_files": sorted(per_file, key=lambda d: d["after"])[:3],
                "top_unmatched_19": Counter(s for s in norm[cc19] if s not in seen14).most_common(8),
            }
            result["modes"][mode] = m
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="*", type=Path)
    ap.add_argument("--cc14", default="clang-14")
    ap.add_argument("--cc19", default="clang-19")
    ap.add_argument("-g", action="store_true", help="compile with debug info too")
    ap.add_argument("--json", type=Path, help="write the full result here")
    ap.add_argument("--save-ir", type=Path, help="keep the compiled .ll files in this directory")
    args = ap.parse_args(argv)
    for cc in (args.cc14, args.cc19):
        if not shutil.which(cc):
            print(f"normalisation_overlap: {cc} not found (apt-get install {cc})", file=sys.stderr)
            return 2
    sources = args.sources or default_sources()
    res = measure(sources, args.cc14, args.cc19, MODES, ["-g"] if args.g else [], args.save_ir)
    print(f"{res['sources']} C files, {args.cc14} vs {args.cc19}{' with -g' if args.g else ''}")
    for mode, m in res["modes"].items():
        b, a = m["before"], m["after"]
        print(f"{mode} ({m['files']} files compiled by both):")
        print(f"  before: jaccard {b['jaccard']:.3f}  covered {b['covered']:.3f}  "
              f"distinct {b['distinct_14']}/{b['distinct_19']}  occurrences {b['occurrences_14']}/{b['occurrences_19']}")
        print(f"  after:  jaccard {a['jaccard']:.3f}  covered {a['covered']:.3f}  "
              f"distinct {a['distinct_14']}/{a['distinct_19']}  occurrences {a['occurrences_14']}/{a['occurrences_19']}")
        for s, c in m["top_unmatched_19"][:5]:
            print(f"    {c:6d}  {s[:110]}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
