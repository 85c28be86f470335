"""A wider code-size space, measured first: a pass pipeline chosen per function.

Every candidate of the code-size library is one pipeline for the whole
module.  Here the module goes through a common prefix once (-Oz's module
simplification: inlining, IPO and the interleaved function simplification,
as ``opt -print-pipeline-passes`` writes -Oz), then each function gets its
own function-level pipeline from a small set of variants of -Oz's
optimisation pipeline (:func:`function_pipelines`), the smallest machine
code per function is kept, and -Oz's module tail runs once on the result.
The printed pipeline is not quite clang's -Oz (the text leaves out some of
-Oz's pass parameters), so the page gives the split's own -Oz beside
clang's: what choosing per function adds is the difference from it.

Three figures per held-out module, all against clang -Oz:

- **per-function oracle**: each function's smallest machine code over the
  variants (its symbol's size in each variant's object, same inlining in
  all of them, so the functions are the same), plus the bytes outside
  functions as -Oz has them;
- **realized**: the per-function winners linked back into one module and
  built, without and with the machine outliner (functions not won by a
  variant are marked ``optnone`` while that variant runs, their size
  attributes set aside, then restored);
- **the library's oracle** on the same modules (the smallest of -Oz and the
  20 library candidates, from the committed labels).

    .venv/bin/python benchmarks/size_per_function.py [--corpus .work/size-corpus]
        [--packages zlib,bzip2,lua5.4,sqlite3] [--limit N] [--md PAGE]
    .venv/bin/python benchmarks/size_per_function.py --polybench <PolyBench/C 4.2.1 checkout>

With ``--polybench`` the modules are the 30 kernels' sources (never seen by
the library search), their front-end bitcode built at -Oz here, and the
library's oracle is measured on them the way the labels are.

Sizes are deterministic: one build each.  ``.text`` and loadable bytes
(every allocated section) of each object.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirecc.util.elf import object_sizes  # noqa: E402
from mirecc.tasks.code_size.offline.labels import codegen_flags  # noqa: E402

OUTLINER = ["-mllvm", "-enable-machine-outliner"]
SIZE_ATTRS = ("minsize", "optsize")


def oz_parts(opt: str) -> tuple[str, str, str]:
    """(prefix, optimisation function pipeline, tail) of ``default<Oz>`` as
    this opt prints it: prefix + function pipeline + tail is -Oz."""
    text = subprocess.run([opt, "-passes=default<Oz>", "-print-pipeline-passes",
                           "-disable-output", "/dev/null"], capture_output=True, text=True,
                          check=True).stdout.strip()
    start = text.index("function<eager-inv>(float2int")
    depth, end = 0, start
    for i in range(text.index("(", start), len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            end = i + 1
            break
    prefix = text[:start].rstrip(",")
    tail = text[end:].strip(",")
    prefix = re.sub(r"^verify,", "", prefix)
    tail = re.sub(r",verify$", "", tail)
    return prefix, text[start:end], tail


def _inner(fp: str) -> str:
    return fp[fp.index("(") + 1:-1]


def function_pipelines(oz: str, prefix: str) -> dict[str, str]:
    """The per-function variants: -Oz's optimisation pipeline and changes to
    it that can only matter for code size."""
    body = _inner(oz)
    simplify = re.search(r"cgscc\(devirt<4>\(inline<only-mandatory>,inline,function-attrs,"
                         r"(function<eager-inv>\(.*\)),coro-split\)\)", prefix)
    resimplify = _inner(simplify.group(1)) if simplify else ""
    sink = ("simplifycfg<bonus-inst-threshold=1;forward-switch-cond;switch-range-to-icmp;"
            "no-switch-to-lookup;no-keep-loops;hoist-common-insts;sink-common-insts>")
    out = {
        "-Oz": body,
        "no loop rotation": body.replace("loop(loop-rotate,loop-deletion)", "loop(loop-deletion)"),
        "no LICM, no loop sink": body.replace(",loop-mssa(licm)", "").replace(",loop-sink", ""),
        "no unrolling": body.replace(",loop-unroll<O2>", ""),
        "no switch tables": body.replace(";switch-to-lookup;", ";no-switch-to-lookup;"),
        "hoist and sink": f"{body},gvn-hoist,gvn-sink,{sink},instcombine",
        "simplify again": f"{resimplify},{body}" if resimplify else "",
        "cleanup only": f"instcombine,{sink},instcombine",
        "nothing": "",
        "reroll": f"loop(loop-reroll),{body}",
        "merge compares": f"mergeicmps,{body}",
    }
    return {k: v for k, v in out.items() if v or k == "nothing"}


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])}...: {proc.stderr.strip()[-400:]}")


def function_sizes(nm: str, obj: str) -> dict[str, int]:
    out = subprocess.run([nm, "-S", "--defined-only", obj], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "TtW":
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


# ---- the per-function winners linked back: optnone masks in textual IR

_DEFINE = re.compile(r'^define [^@]*@("(?:[^"\\]|\\.)*"|[-\w.$]+)\(.*?\)[^{#]*#(\d+)', re.M)
_GROUP = re.compile(r"^attributes #(\d+) = \{ (.*) \}$", re.M)


def _groups(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _GROUP.finditer(text)}


def _set_groups(text: str, wanted: dict[str, str]) -> str:
    """``text`` with each named function's attribute group replaced by a new
    group holding the attribute text given for it."""
    groups = _groups(text)
    fresh = max((int(g) for g in groups), default=0) + 1
    by_attrs: dict[str, int] = {}
    extra = []

    def sub(m):
        nonlocal fresh
        name = m.group(1).strip('"')
        if name not in wanted:
            return m.group(0)
        attrs = wanted[name]
        if attrs not in by_attrs:
            by_attrs[attrs] = fresh
            extra.append(f"attributes #{fresh} = {{ {attrs} }}")
            fresh += 1
        return m.group(0)[:m.start(2) - m.start(0)] + str(by_attrs[attrs])

    text = _DEFINE.sub(sub, text)
    return text + "\n" + "\n".join(extra) + "\n"


def _masked(attrs: str) -> str:
    words = [w for w in re.findall(r'"[^"]*"(?:="[^"]*")?|\S+', attrs)
             if w not in SIZE_ATTRS + ("noinline", "optnone")]
    return " ".join(["noinline", "optnone", *words])


def link_back(opt: str, prefix_ll: Path, winners: dict[str, str], pipes: dict[str, str],
              tail: str, work: Path) -> Path:
    """The module with each function through its winning pipeline, then the
    tail once."""
    current = prefix_ll
    text = current.read_text()
    originals = {m.group(1).strip('"'): _groups(text)[m.group(2)] for m in _DEFINE.finditer(text)}
    for name, pipe in pipes.items():
        mine = {f for f, w in winners.items() if w == name}
        if not mine or not pipe:
            continue
        text = current.read_text()
        masks = {f: _masked(a) for f, a in originals.items() if f not in mine}
        masked = work / "masked.ll"
        masked.write_text(_set_groups(text, masks))
        out = work / "stage.ll"
        _run([opt, f"-passes=function({pipe})", "-S", str(masked), "-o", str(out)])
        restored = work / "restored.ll"
        text = out.read_text()
        restored.write_text(_set_groups(text, {f: originals[f] for f in masks}))
        current = restored
    final = work / "linked.ll"
    _run([opt, f"-passes={tail}", "-S", str(current), "-o", str(final)])
    return final


def measure_module(m: dict, corpus: Path, cc: str, opt: str, nm: str, parts, pipes,
                   work: Path) -> dict:
    prefix, _oz, tail = parts
    flags = codegen_flags(m["flags"])
    bc = corpus / m["ir"]
    own = work / "own.o"
    _run([cc, *flags, "-w", "-c", "-x", "ir", str(bc), "-o", str(own)])
    row = {"module": m["sha256"], "origin": m["origin"], "path": m["path"],
           "own": object_sizes(str(own))}
    own_fns = function_sizes(nm, str(own))
    prefix_ll = work / "prefix.ll"
    _run([opt, f"-passes={prefix}", "-S", str(bc), "-o", str(prefix_ll)])
    per = {}
    sizes = {}
    for name, pipe in pipes.items():
        ll, obj = work / "v.ll", work / "v.o"
        passes = f"function({pipe}),{tail}" if pipe else tail
        _run([opt, f"-passes={passes}", "-S", str(prefix_ll), "-o", str(ll)])
        _run([cc, *flags, "-w", "-c", "-x", "ir", str(ll), "-Xclang", "-disable-llvm-passes",
              "-o", str(obj)])
        per[name] = object_sizes(str(obj))
        sizes[name] = function_sizes(nm, str(obj))
    base = sizes["-Oz"]
    row["oz_split_equal"] = base == own_fns and per["-Oz"] == row["own"]
    winners, saved = {}, 0
    for fn, size in base.items():
        best, best_name = size, "-Oz"
        for name, s in sizes.items():
            if s.get(fn, size + 1) < best:   # a variant that lost or renamed it: not a choice
                best, best_name = s[fn], name
        winners[fn] = best_name
        saved += size - best
    row["variants"] = per
    row["oracle_text"] = per["-Oz"][1] - saved
    row["winners"] = {k: v for k, v in winners.items() if v != "-Oz"}
    row["module_oracle_text"] = min(t for _, t in per.values())
    linked = link_back(opt, prefix_ll, winners, pipes, tail, work)
    for label, extra in (("realized", []), ("realized_outliner", OUTLINER)):
        obj = work / "r.o"
        _run([cc, *flags, *extra, "-w", "-c", "-x", "ir", str(linked), "-Xclang",
              "-disable-llvm-passes", "-o", str(obj)])
        row[label] = object_sizes(str(obj))
    obj = work / "o.o"
    _run([cc, *flags, *OUTLINER, "-w", "-c", "-x", "ir", str(bc), "-o", str(obj)])
    row["oz_outliner"] = object_sizes(str(obj))
    return row


def library_oracle(labels_dir: Path, shas: set[str], cc: str) -> dict[str, int]:
    """Per module: the smallest ``.text`` of -Oz and the shipped library's
    candidates (the committed labels)."""
    from mirecc.tasks.code_size.offline.cli import library_passes
    from mirecc.tasks.code_size.offline.dataset import Labels
    from mirecc.tasks.code_size.offline.labels import OWN

    table, candidates = Labels(labels_dir).table(), {OWN, *library_passes(cc)}
    best = {}
    for sha in shas:
        sizes = [row["text_bytes"] for p, row in table.get(sha, {}).items()
                 if p in candidates and "text_bytes" in row]
        if sizes:
            best[sha] = min(sizes)
    return best


def polybench_modules(root: Path, cc: str, work: Path) -> list[dict]:
    """The PolyBench/C kernels' front-end bitcode at -Oz, as corpus entries."""
    out = []
    util = root / "utilities"
    for src in sorted(root.glob("*/**/*.c")):
        if src.parent == util or src.name.endswith(".orig.c"):
            continue
        flags = ["-Oz", f"-I{util}", "-DPOLYBENCH_TIME"]
        bc = work / f"{src.stem}.bc"
        _run([cc, *flags, "-w", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
              str(src), "-o", str(bc)])
        out.append({"ir": str(bc), "flags": flags, "origin": "polybench", "path": src.name,
                    "sha256": src.stem})
    return out


def measured_library_oracle(rows: list[dict], modules: list[dict], cc: str,
                            jobs: int) -> dict[str, int]:
    """The library's oracle measured here (modules the labels do not have)."""
    from mirecc.tasks.code_size.offline.cli import library_passes
    from mirecc.tasks.code_size.offline.labels import measure

    lib = library_passes(cc)
    by_sha = {m["sha256"]: m for m in modules}
    compiler = subprocess.run(["which", cc], capture_output=True, text=True).stdout.strip()

    def one(row):
        m = by_sha[row["module"]]
        best = row["own"][1]
        with tempfile.TemporaryDirectory() as work:
            for pipe in lib:
                try:
                    best = min(best, measure(m["ir"], compiler, pipe,
                                             codegen_flags(m["flags"]), work)["text_bytes"])
                except Exception:   # a candidate that fails is no choice
                    continue
        return row["module"], best

    with ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(ROOT / ".work" / "size-corpus"))
    parser.add_argument("--packages", default="zlib,bzip2,lua5.4,sqlite3")
    parser.add_argument("--limit", type=int, default=0, help="at most this many modules")
    parser.add_argument("--cc", default="clang-14")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--labels", default=str(ROOT / "heads" / "code-size" / "labels"))
    parser.add_argument("--polybench", metavar="DIR",
                        help="a PolyBench/C 4.2.1 checkout: its 30 kernels instead of the corpus")
    parser.add_argument("--md", help="write the page here (a .json beside it)")
    parser.add_argument("--render", action="store_true",
                        help="write the page again from the JSON beside --md, building nothing")
    args = parser.parse_args()
    if args.render:
        data = json.loads(Path(args.md).with_suffix(".json").read_text())
        args.__dict__.update(data.get("args", {}))
        lib = data.get("library") or library_oracle(Path(args.labels),
                                                    {r["module"] for r in data["rows"]}, args.cc)
        page = report(data["rows"], data["failed"], lib, data["pipelines"], args)
        Path(args.md).write_text(page)
        print(page)
        return 0
    corpus = Path(args.corpus)
    opt, nm = args.cc.replace("clang", "opt"), args.cc.replace("clang", "llvm-nm")
    wanted = set(args.packages.split(","))
    modules, seen = [], set()
    keep = tempfile.TemporaryDirectory(prefix="size-per-function-")
    if args.polybench:
        modules = polybench_modules(Path(args.polybench), args.cc, Path(keep.name))
        args.packages = "PolyBench/C 4.2.1"
        corpus = Path("/")
    else:
        for line in (corpus / "manifest.jsonl").read_text().splitlines():
            m = json.loads(line)
            if m.get("origin") in wanted and m["sha256"] not in seen and m.get("functions", 1):
                seen.add(m["sha256"])
                modules.append(m)
    if args.limit:
        modules = modules[:args.limit]
    parts = oz_parts(opt)
    pipes = function_pipelines(parts[1], parts[0])
    rows, failed = [], []

    def one(m):
        with tempfile.TemporaryDirectory() as work:
            try:
                return measure_module(m, corpus, args.cc, opt, nm, parts, pipes, Path(work))
            except RuntimeError as exc:
                return {"module": m["sha256"], "path": m["path"], "error": str(exc)}

    with ThreadPoolExecutor(args.jobs) as pool:
        for i, row in enumerate(pool.map(one, modules), 1):
            (failed if "error" in row else rows).append(row)
            print(f"  [{i}/{len(modules)}] {row['path']}: "
                  f"{row.get('error', '')[:120] or 'ok'}", file=sys.stderr)
    if args.polybench:
        lib = measured_library_oracle(rows, modules, args.cc, args.jobs)
    else:
        lib = library_oracle(Path(args.labels), {r["module"] for r in rows}, args.cc)
    page = report(rows, failed, lib, pipes, args)
    print(page)
    if args.md:
        out = Path(args.md)
        out.write_text(page)
        out.with_suffix(".json").write_text(json.dumps(
            {"rows": rows, "failed": failed, "pipelines": pipes, "library": lib,
             "args": {"packages": args.packages, "limit": args.limit, "cc": args.cc,
                      "polybench": bool(args.polybench)}}, indent=1))
    return 0


def report(rows, failed, lib, pipes, args) -> str:
    text_rows = [r for r in rows if r["own"][1]]

    def share(key_fn, subset=None) -> tuple[float, float, int]:
        sub = [r for r in (subset or text_rows) if key_fn(r) is not None]
        own = sum(r["own"][1] for r in sub)
        new = sum(min(key_fn(r), r["own"][1]) for r in sub)
        mean = sum(1 - min(key_fn(r), r["own"][1]) / r["own"][1] for r in sub) / max(len(sub), 1)
        return 100 * mean, 100 * (1 - new / own) if own else 0.0, len(sub)

    lines = ["# Code size: a pipeline per function, measured first", "",
             "Written by `benchmarks/size_per_function.py "
             + ("--polybench <checkout>" if args.polybench else f"--packages {args.packages}")
             + f"{f' --limit {args.limit}' if args.limit else ''}`: {len(text_rows)} held-out "
             f"modules with code ({args.packages}), clang `{args.cc}`; "
             f"{len(failed)} failed. Every figure is the `.text` reduction below clang -Oz, "
             "never larger (the smaller of -Oz and the variant, per module): the mean over "
             "modules and of the total.", "",
             "Prefix: -Oz's module simplification (inlining, IPO, function simplification), "
             "once. Function pipelines after it (each, or one per function):", ""]
    for name, pipe in pipes.items():
        lines.append(f"- **{name}**: `{pipe[:90] + '...' if len(pipe) > 90 else pipe}`")
    equal = sum(1 for r in text_rows if r["oz_split_equal"])
    lines += ["", f"The prefix with -Oz's own function pipeline and tail gives clang -Oz's "
              f"object on {equal} of {len(text_rows)} modules (function by function).", "",
              "| space | mean | total | modules |", "|---|---:|---:|---:|"]
    with_lib = [r for r in text_rows if r["module"] in lib]
    entries = [
        ("opt's -Oz: the prefix, -Oz's function pipeline and its tail",
         lambda r: r["variants"]["-Oz"][1]),
        ("each variant alone, best single (module-level choice among the variants)",
         lambda r: r["module_oracle_text"]),
        ("**per-function oracle** (each function's smallest)", lambda r: r["oracle_text"]),
        ("per-function winners linked back (realized)", lambda r: r["realized"][1]),
        ("-Oz with the machine outliner", lambda r: r["oz_outliner"][1]),
        ("per-function winners linked back, with the machine outliner",
         lambda r: r["realized_outliner"][1]),
    ]
    for label, fn in entries:
        mean, total, n = share(fn)
        lines.append(f"| {label} | {mean:.2f}% | {total:.2f}% | {n} |")
    lines += ["", (f"The library's oracle, measured here on the same {len(with_lib)} modules:"
                   if args.polybench else
                   f"On the {len(with_lib)} of these modules the committed labels cover:"), "",
              "| space | mean | total |", "|---|---:|---:|"]
    both = [("library oracle (best of -Oz and 20 module pipelines)", lambda r: lib[r["module"]]),
            ("per-function winners linked back, with the machine outliner",
             lambda r: r["realized_outliner"][1]),
            ("best of the two", lambda r: min(lib[r["module"]], r["realized_outliner"][1]))]
    for label, fn in both:
        mean, total, _ = share(fn, with_lib)
        lines.append(f"| {label} | {mean:.2f}% | {total:.2f}% |")
    wins: dict[str, int] = {}
    for r in text_rows:
        for w in r["winners"].values():
            wins[w] = wins.get(w, 0) + 1
    lines += ["", "Functions won by a variant other than -Oz's own (ties go to -Oz): " +
              (", ".join(f"{k} {v}" for k, v in sorted(wins.items(), key=lambda kv: -kv[1]))
               or "none") + ".",
              ""]
    by_pkg: dict[str, list] = {}
    for r in text_rows:
        by_pkg.setdefault(r["origin"], []).append(r)
    lines += ["| package | modules | per-function oracle | realized + outliner | "
              "library oracle |", "|---|---:|---:|---:|---:|"]
    for pkg, sub in sorted(by_pkg.items()):
        libsub = [r for r in sub if r["module"] in lib]
        lines.append(f"| {pkg} | {len(sub)} | {share(lambda r: r['oracle_text'], sub)[0]:.2f}% | "
                     f"{share(lambda r: r['realized_outliner'][1], sub)[0]:.2f}% | "
                     + (f"{share(lambda r: lib[r['module']], libsub)[0]:.2f}% |" if libsub
                        else "- |"))
    if failed:
        lines += ["", "Failed: " + "; ".join(f"{f['path']}: {f['error'][:100]}" for f in failed)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
