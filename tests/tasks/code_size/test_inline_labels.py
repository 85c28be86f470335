"""``mire size-inline-data`` on a one-module corpus, with the real clang 14
and pass plugin: each site whose callee the module defines gets its object's
.text bytes inlined and not inlined; LLVM's own object is one of the two
where the site decides nothing else; a rerun resumes (nothing measured
twice); a call of a declaration is not labelled."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess

import pytest

from mirecc.tasks.code_size.offline import inline_labels

SOURCE = r"""
#include <stdio.h>
static int small(int x) { return x * 3 + 1; }
static int big(int x) {
  int s = 0;
  for (int i = 0; i < x; i++) {
    s += (i * 7) ^ (s >> 3);
    if (s % 11 == 3) s += printf("%d\n", s & 7);
    s -= (s * 5) % 13;
  }
  return s;
}
int api(int a, int b) { return small(a) + big(b) + big(a + b) + big(a - b); }
"""


def test_sites_are_labelled_once_each(tmp_path, llvm_plugin):
    clang, _major, _plugin = llvm_plugin(14)   # this checkout's plugin, built
    corpus = tmp_path / "corpus"
    (corpus / "ir").mkdir(parents=True)
    src = tmp_path / "m.c"
    src.write_text(SOURCE)
    bc = corpus / "ir" / "m.bc"
    subprocess.run([clang, "-Oz", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    (corpus / "manifest.jsonl").write_text(json.dumps(
        {"sha256": "m" * 64, "ir": "ir/m.bc", "origin": "pkg", "path": "m.c",
         "flags": ["-Oz"]}) + "\n")
    out = tmp_path / "labels"
    args = argparse.Namespace(corpus=str(corpus), out=str(out), cc=clang, split="all",
                              modules=None, sites=0, max_seconds=None, jobs=1)
    assert inline_labels.run(args) == 0
    rows = [json.loads(l) for l in (out / "sites.jsonl").read_text().splitlines()]
    # api's four calls (printf is a declaration: not labelled)
    assert [r["site"] for r in rows] == [f"api:call{k}" for k in range(4)]
    assert [r["callee"] for r in rows] == ["small", "big", "big", "big"]
    small, big = rows[0], rows[1]
    # LLVM inlines small() at -Oz: its own object is the inlined one, and out
    # of line the object holds small() too
    assert small["own"] == small["inline"] < small["noinline"]
    # big() stays a call at -Oz: inlining one of its calls costs bytes
    assert big["own"] == big["noinline"] < big["inline"]
    # resumed: nothing measured twice
    assert inline_labels.run(args) == 0
    assert len((out / "sites.jsonl").read_text().splitlines()) == 4
    assert len((out / "modules.jsonl").read_text().splitlines()) == 1
