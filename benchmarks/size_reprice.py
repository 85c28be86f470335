"""The code-size defaults re-priced beside the inlining policy: the same
packages built by ``benchmarks/code_size.py`` at several size budgets, with
the policy's candidate (``MIRECC_SIZE_INLINE=1``) and without, each against
plain clang -Oz; bytes saved per second of build added, so that the default
can be the setting that gives the most bytes per second.

    .venv/bin/python benchmarks/size_reprice.py --polybench <PolyBenchC-4.2.1> \\
        [--projects expat,pcre2,zlib,bzip2,polybench] [--configs 1,1i,2,2i] \\
        [--work DIR] [--reuse] [--md docs/results/code-size-reprice.md]

A config is a budget, ``i`` after it with the policy (``1i``: budget 1 with
the policy's candidate first).  Each runs ``code_size.py`` once (a fresh
copy of each package per side, mirecc with an emptied cache: every
candidate really built), writing ``WORK/reprice/<config>.json``;
``--reuse`` takes a config's JSON from an earlier run of the same commit.

Measured per config, summed over the packages: the objects' ``.text`` and
loadable bytes, the linked libraries' and programs' loadable bytes (what
a user ships), each against clang's; the build's wall time (configure and
make, one sample per side: code_size.py's protocol; the machine's drift is
about 15%), and bytes shipped saved per second of build over clang's.
Code size is deterministic; the seconds are not.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mirecc.util.fsutil import atomic_write_bytes  # noqa: E402

DEFAULT_PROJECTS = "expat,pcre2,zlib,bzip2,polybench"
DEFAULT_CONFIGS = "1,1i,2,2i"


def parse_config(text: str) -> tuple[float, bool]:
    inline = text.endswith("i")
    return float(text[:-1] if inline else text), inline


def commit() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def run_config(config: str, args, out: Path) -> dict:
    budget, inline = parse_config(config)
    if args.reuse and out.is_file():
        data = json.loads(out.read_text())
        if data.get("revision", "").split("+")[0] == commit() and \
                data.get("budget") == budget and bool(data.get("inline")) == inline:
            print(f"size_reprice: {config}: reusing {out}", file=sys.stderr)
            return data
    cmd = [sys.executable, str(REPO / "benchmarks" / "code_size.py"), "--projects",
           args.projects, "--budget", f"{budget:g}", "--out", str(out),
           "--work", str(args.work), *(["--inline"] if inline else []),
           *(["--polybench", str(args.polybench)] if args.polybench else [])]
    print(f"size_reprice: {config}: {' '.join(cmd)}", file=sys.stderr)
    started = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    if not out.is_file():
        raise SystemExit(f"size_reprice: {config}: code_size.py wrote no {out} "
                         f"(exit status {proc.returncode})")
    print(f"size_reprice: {config}: {time.monotonic() - started:.0f} s, exit status "
          f"{proc.returncode}", file=sys.stderr)
    return json.loads(out.read_text())


def summary(config: str, data: dict) -> dict:
    budget, inline = parse_config(config)
    results = data["results"]
    total = data["total"]

    def seconds(side: str) -> float:
        return sum((r["sides"].get(side) or {}).get("build_s") or 0.0 for r in results)

    def counter(name: str) -> int:
        return sum(((r["sides"].get("mirecc") or {}).get("counters") or {}).get(name, 0)
                   for r in results)

    clang_s, mirecc_s = seconds("clang"), seconds("mirecc")
    saved = total["shipped_clang"] - total["shipped_mirecc"]
    return {"config": config, "budget": budget, "inline": inline,
            "text": (total["text_clang"], total["text_mirecc"]),
            "loadable": (total["loadable_clang"], total["loadable_mirecc"]),
            "shipped": (total["shipped_clang"], total["shipped_mirecc"]),
            "seconds": (clang_s, mirecc_s),
            "per_second": saved / (mirecc_s - clang_s) if mirecc_s > clang_s else None,
            "policy_built": counter("verified.code-size.inline-policy"),
            "policy_kept": counter("verified.code-size.inline-policy-kept"),
            "tests_ok": all(r.get("ok") for r in results),
            "larger_objects": sum(len(r.get("larger_objects", [])) for r in results),
            "projects": [r["project"] for r in results], "revision": data.get("revision"),
            "machine": data.get("machine")}


def change(a: int, b: int) -> str:
    return f"{100 * (b / a - 1):+.2f}%" if a else "-"


def render(rows: list[dict], command: str) -> str:
    m = rows[0]["machine"] or {}
    lines = [
        f"# Code-size defaults re-priced beside the inlining policy", "",
        f"Written by `{command}` ({time.strftime('%Y-%m-%d')}), mirecc {rows[0]['revision']}; "
        f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; {m.get('compiler', '?')}, -Oz. "
        f"Packages: {', '.join(rows[0]['projects'])}; each config one build per side "
        "(benchmarks/code_size.py: a fresh copy, mirecc with an emptied cache), against plain "
        "clang. Bytes: summed over the packages, deterministic. Seconds: configure and make, "
        "one sample per side (drift here about 15%). `policy`: its candidate (the call sites "
        "it forces, an -Oz compile) built first where it forces any, in the budget's first "
        "slot.", "",
        "| budget | policy | objects' .text | objects' loadable | shipped (libraries, programs) "
        "| build s clang / mirecc | shipped bytes saved per added second | policy built (kept) "
        "| objects larger | tests |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for r in rows:
        (ta, tb), (la, lb), (sa, sb) = r["text"], r["loadable"], r["shipped"]
        ca, cb = r["seconds"]
        per = f"{r['per_second']:.0f}" if r["per_second"] is not None else "-"
        lines.append(f"| {r['budget']:g} | {'on' if r['inline'] else 'off'} | {change(ta, tb)} | "
                     f"{change(la, lb)} | {change(sa, sb)} | {ca:.0f} / {cb:.0f} "
                     f"({cb / ca:.2f}x) | {per} | "
                     f"{r['policy_built']} ({r['policy_kept']}) | {r['larger_objects']} | "
                     f"{'pass' if r['tests_ok'] else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", default=DEFAULT_PROJECTS)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS,
                        help="budgets, each with i for the policy (default: %(default)s)")
    parser.add_argument("--polybench", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=REPO / ".work" / "reprice")
    parser.add_argument("--reuse", action="store_true",
                        help="take a config's JSON from an earlier run of this commit")
    parser.add_argument("--md", type=Path, default=REPO / "docs" / "results" /
                        "code-size-reprice.md")
    args = parser.parse_args()
    args.work = args.work.absolute()
    (args.work / "reprice").mkdir(parents=True, exist_ok=True)
    rows = []
    for config in [c.strip() for c in args.configs.split(",") if c.strip()]:
        data = run_config(config, args, args.work / "reprice" / f"{config}.json")
        rows.append(summary(config, data))
    command = "benchmarks/size_reprice.py " + " ".join(sys.argv[1:])
    text = render(rows, command)
    atomic_write_bytes(args.md.absolute(), text.encode())
    atomic_write_bytes(args.md.absolute().with_suffix(".json"),
                       (json.dumps(rows, indent=1) + "\n").encode())
    print(text)
    return 0 if all(r["tests_ok"] and not r["larger_objects"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
