"""A tiny corpus directory (manifest.jsonl + ir/aa/<sha>.bc) from C sources,
laid out as ``mire corpus build`` writes it, for the encoder's tests."""

import hashlib
import json
import subprocess
from pathlib import Path

CLANG = "/usr/bin/clang-14"

SOURCES = {
    "a.c": "int sq(int x) { return x * x; }\n"
           "int sum(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += sq(a[i]); return s; }\n",
    "b.c": "double dot(const double *x, const double *y, int n) {\n"
           "  double s = 0; for (int i = 0; i < n; i++) s += x[i] * y[i]; return s; }\n"
           "double twice(const double *x, int n) { return 2 * dot(x, x, n); }\n",
    "c.c": "struct node { int v; struct node *next; };\n"
           "int len(struct node *p) { int n = 0; while (p) { n++; p = p->next; } return n; }\n",
}


def write_corpus(root: Path, sources: dict, record=lambda name: {}) -> list[dict]:
    """Compile each source with clang-14 into the corpus layout under
    ``root``; returns the manifest records (``record(name)`` adds fields),
    which the caller writes (possibly with extra lines) to manifest.jsonl."""
    lines = []
    for name, src in sources.items():
        (root / name).write_text(src)
        bc = root / (name + ".bc")
        subprocess.run([CLANG, "-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                        str(root / name), "-o", str(bc)], check=True)
        blob = bc.read_bytes()
        sha = hashlib.sha256(blob).hexdigest()
        dest = root / "ir" / sha[:2] / f"{sha}.bc"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(blob)
        lines.append({"sha256": sha, "ir": str(dest.relative_to(root)), "origin": name,
                      **record(name)})
    return lines


def write_manifest(root: Path, lines: list[dict]) -> None:
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
