"""``mire size-inline-data`` on a one-module corpus, with the real clang 14
and pass plugin: each site whose callee the module defines gets its object's
.text bytes inlined and not inlined; LLVM's own object is one of the two
where the site decides nothing else; a rerun resumes (nothing measured
twice); a call of a declaration is not labelled."""
from __future__ import annotations

import argparse
import json
import subprocess

from mirecc.tasks.code_size.offline import inline_labels
# small() inlined at -Oz, big() kept a call: the plugin tests' program
from tests.plugin.test_call_plugin import PROGRAM



def _corpus(tmp_path, clang):
    corpus = tmp_path / "corpus"
    (corpus / "ir").mkdir(parents=True)
    src = tmp_path / "m.c"
    src.write_text(PROGRAM)
    bc = corpus / "ir" / "m.bc"
    subprocess.run([clang, "-Oz", "-w", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(bc)], check=True)
    (corpus / "manifest.jsonl").write_text(json.dumps(
        {"sha256": "m" * 64, "ir": "ir/m.bc", "origin": "pkg", "path": "m.c",
         "flags": ["-Oz"]}) + "\n")
    return corpus


def test_sites_are_labelled_once_each(tmp_path, llvm_plugin):
    clang, _major, _plugin = llvm_plugin(14)   # this checkout's plugin, built
    corpus = _corpus(tmp_path, clang)
    out = tmp_path / "labels"
    args = argparse.Namespace(corpus=str(corpus), out=str(out), cc=clang, split="all",
                              modules=None, sites=0, max_seconds=None, jobs=1)
    assert inline_labels.run(args) == 0
    rows = [json.loads(l) for l in (out / "sites.jsonl").read_text().splitlines()]
    # main's calls of functions the module defines (printf is a declaration,
    # old() is called through a cast: neither labelled)
    assert [r["site"] for r in rows] == [f"main:call{k}" for k in range(5)]
    assert [r["callee"] for r in rows] == ["small", "big", "big", "big", "apply"]
    small, big = rows[0], rows[1]
    # LLVM inlines small() at -Oz: its own object is the inlined one, and out
    # of line the object holds small() too
    assert small["own"] == small["inline"] < small["noinline"]
    # big() stays a call at -Oz: inlining one of its calls costs bytes
    assert big["own"] == big["noinline"] < big["inline"]
    # resumed: nothing measured twice
    assert inline_labels.run(args) == 0
    assert len((out / "sites.jsonl").read_text().splitlines()) == 5
    assert len((out / "modules.jsonl").read_text().splitlines()) == 1


def test_a_callees_sites_are_labelled_together(tmp_path, llvm_plugin):
    """--per callee: one label per defined callee, all its sites forced at
    once; big()'s three calls all out of line is LLVM's own object (it
    inlines none of them), all inline is larger; a rerun resumes."""
    clang, _major, _plugin = llvm_plugin(14)
    corpus = _corpus(tmp_path, clang)
    out = tmp_path / "labels"
    args = argparse.Namespace(corpus=str(corpus), out=str(out), cc=clang, split="all",
                              modules=None, sites=0, max_seconds=None, jobs=1, per="callee")
    assert inline_labels.run(args) == 0
    rows = {r["callee"]: r for r in map(json.loads, (out / "callees.jsonl").read_text()
                                        .splitlines())}
    assert set(rows) == {"small", "big", "apply"}
    assert rows["big"]["sites"] == ["main:call1", "main:call2", "main:call3"]
    assert rows["big"]["own"] == rows["big"]["noinline"] < rows["big"]["inline"]
    assert not (out / "sites.jsonl").exists()
    assert inline_labels.run(args) == 0
    assert len((out / "callees.jsonl").read_text().splitlines()) == 3
    assert len((out / "callee-modules.jsonl").read_text().splitlines()) == 1
