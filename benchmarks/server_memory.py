"""The per-user server's resident memory after a build of many TUs.

    .venv/bin/python benchmarks/server_memory.py [--sources DIR ...] [--levels -O2,-O3]
        [--setting MIRECC_APPLY_LOOPS=1]

Every ``*.c`` file under the source folders (default: the zlib and bzip2
sources that ``benchmarks/real_projects.py --fetch-only`` unpacks into
``.work/src``, and lua5.4's when present) is compiled by ``mirecc LEVEL -c``
at each of ``--levels``
(``-I`` its own folder), one after another, with the shipped heads, the
given settings, a fresh cache and a fresh server of its own (a private
``XDG_RUNTIME_DIR``).  The server's resident set size (``VmRSS``) is read
after the last compile and again after it has been idle for 10 s (when it
gives freed memory back).  TUs that do not compile alone (missing configure
headers) count as failed compiles, not as TUs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def server_pid(runtime: Path) -> int | None:
    out = subprocess.run(["pgrep", "-f", f"mirecc.tu.server --socket {runtime}"],
                         capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="*", type=Path,
                        default=sorted(p for p in (ROOT / ".work" / "src").glob("*/*/")
                                       if p.is_dir()))
    parser.add_argument("--levels", default="-O2,-O3",
                        help="each file is compiled at each of these levels (another TU each)")
    parser.add_argument("--setting", action="append", default=["MIRECC_APPLY_LOOPS=1"])
    args = parser.parse_args()
    levels = args.levels.split(",")
    files = [(f, level) for f in sorted(f for d in args.sources for f in d.rglob("*.c"))
             for level in levels]
    work = Path(tempfile.mkdtemp(prefix="mirecc-rss-"))
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env.update(dict(s.split("=", 1) for s in args.setting))
    env.update(XDG_RUNTIME_DIR=str(runtime), MIRECC_CACHE_DIR=str(work / "cache"),
               MIRECC_QUIET="1")
    ok = failed = 0
    started = time.monotonic()
    for n, (f, level) in enumerate(files, 1):
        proc = subprocess.run([str(BIN / "mirecc"), level, "-w", f"-I{f.parent}", "-c",
                               str(f), "-o", str(work / "x.o")], env=env, capture_output=True)
        ok += proc.returncode == 0
        failed += proc.returncode != 0
        if n % 20 == 0:
            print(f"[{n}/{len(files)}] {time.monotonic() - started:.0f} s", file=sys.stderr)
    pid = server_pid(runtime)
    if pid is None:
        print("no server was started", file=sys.stderr)
        return 1
    after = rss_mb(pid)
    time.sleep(10)
    idle = rss_mb(pid)
    stats = subprocess.run([str(BIN / "mire"), "stats"], env=env, capture_output=True,
                           text=True).stdout
    subprocess.run([str(BIN / "mire"), "serve", "--stop"], env=env, capture_output=True)
    print(f"{ok} TUs compiled ({failed} did not compile alone) with {' '.join(args.setting)} "
          f"{args.levels}: server RSS {after:.0f} MB after the last compile, {idle:.0f} MB "
          f"after 10 s idle")
    print(stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
