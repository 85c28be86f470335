"""``mire adapt --store``: a store directory or one store file (as
MIRECC_ADAPT_STORE names it); a path that is not there is an error naming it."""
from __future__ import annotations

import argparse

from mirecc.cli import adapt

# one line of a real store (a PolyBench kernel in three versions, decided)
LINE = ("e0ce5167b47ee7d1\t4\tatax.c kernel_atax\t1\tdefault\t20\t20\t20\t20\t0.002\t2e-05\t1\t"
        "8x2+8x1+8x1\t1\tdefault:5:0:0:0:0.000141,0.000118,0.000126,0.000149,0.000169;"
        "16x1+16x1+16x1:4:1:0:9:0.000116,0.000129,0.000136,0.000137;"
        "8x2+8x1+8x1:4:1:0:13:0.000161,0.000143,0.000138,0.000163\t0.1\t1")


def args(**kw) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    adapt.add_arguments(p)
    return p.parse_args([a for k, v in kw.items() for a in (f"--{k}", str(v))])


def test_a_store_file_is_listed_as_its_directory_is(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MIRECC_ADAPT_STORE", raising=False)
    store = tmp_path / "atax.store.txt"
    store.write_text("# mirecc-adapt 1 machine=c1-23a2b7b3-pnone\n" + LINE + "\n")
    assert adapt.run(args(store=store)) == 0
    by_file = capsys.readouterr().out
    assert "atax.c kernel_atax" in by_file and "no adaptive sites" not in by_file
    assert adapt.run(args(store=tmp_path)) == 0
    assert capsys.readouterr().out == by_file


def test_a_missing_store_is_an_error_naming_it(tmp_path, capsys):
    assert adapt.run(args(store=tmp_path / "nowhere.txt")) == 2
    assert "nowhere.txt: no such file or directory" in capsys.readouterr().err
