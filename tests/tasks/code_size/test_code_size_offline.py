"""The code-size task's offline side: pipeline texts as trees, the labelled
dataset (resumable), the greedy library and the correctness check, on
modules and programs this test makes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

CLANG = "/usr/bin/clang-14"
OPT = "/usr/lib/llvm-14/bin/opt"

needs_llvm = pytest.mark.skipif(not (os.access(CLANG, os.X_OK) and os.access(OPT, os.X_OK)),
                                reason="needs clang-14 and opt-14")

SOURCES = {
    "a.c": "int sq(int x) { return x * x; }\n"
           "int sum(int *v, int n) { int s = 0; for (int i = 0; i < n; i++) s += sq(v[i]);"
           " return s; }\n",
    "b.c": "static int twice(int x) { return 2 * x; }\n"
           "int f(int a, int b) { return twice(a) + twice(b); }\n",
}


def test_pipeline_text_round_trips_and_passes_come_out():
    from mirecc.tasks.code_size.offline.pipelines import bases, parse, text, without

    pipeline = ("verify,function<eager-inv>(sroa,simplifycfg<keep-loops;no-sink>),"
                "cgscc(devirt<4>(inline,function(jump-threading))),loop-mssa(licm),globaldce")
    assert text(parse(pipeline)) == pipeline
    assert "jump-threading" in bases(parse(pipeline))
    # the adaptor left empty by the removal goes too
    assert text(without(parse(pipeline), "jump-threading")) == (
        "verify,function<eager-inv>(sroa,simplifycfg<keep-loops;no-sink>),"
        "cgscc(devirt<4>(inline)),loop-mssa(licm),globaldce")
    assert text(without(parse("function(licm),gvn"), "licm")) == "gvn"
    with pytest.raises(ValueError, match="unclosed"):
        parse("function(sroa")


@needs_llvm
def test_every_search_candidate_runs_through_opt(tmp_path):
    """The search's systematic and random candidates, the attributor and
    inliner-threshold ones included, are pipelines and options opt 14 takes."""
    from mirecc.tasks.code_size.build import parse_candidate
    from mirecc.tasks.code_size.offline.pipelines import (excluding, expand,
                                                          random_candidates,
                                                          random_ipo_candidates,
                                                          seed_candidates)

    (tmp_path / "b.c").write_text(SOURCES["b.c"])
    subprocess.run([CLANG, "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    "b.c", "-o", "b.bc"], cwd=tmp_path, check=True)
    oz = expand(OPT, "default<Oz>", str(tmp_path / "b.bc"))
    candidates = {**seed_candidates(oz), **random_candidates(oz, 5, 1),
                  **random_ipo_candidates(oz, 12, 1)}
    assert len(random_ipo_candidates(oz, 12, 1)) == 12
    assert len(set(candidates.values())) == len(candidates)     # the spec's names are unique
    assert any("attributor" in c for c in candidates)
    assert any("@inline-threshold=" in c for c in candidates)
    failed = []
    for candidate in candidates:
        passes, opt_flags, _ = parse_candidate(candidate)
        run = subprocess.run([OPT, f"-passes={passes}", *opt_flags, str(tmp_path / "b.bc"),
                              "-o", os.devnull], capture_output=True, text=True)
        if run.returncode:
            failed.append((candidates[candidate], run.stderr[:200]))
    assert not failed
    kept = excluding(candidates, ["attributor-cgscc"])
    assert kept and all("attributor-cgscc" not in c for c in kept)
    assert any("attributor," in c for c in kept)        # the module attributor stays


def test_greedy_library_takes_what_adds_most_given_the_rest():
    from mirecc.tasks.code_size.offline.search import greedy_library

    red = {"m1": {"A": 0.10, "B": 0.09, "C": 0.0},
           "m2": {"A": 0.00, "B": 0.09, "C": 0.05},
           "m3": {"A": -0.2, "B": 0.0, "C": 0.06}}
    library = greedy_library(red, ["A", "B", "C"], size=3)
    # B alone covers most; then C adds m3 (0.06) while A adds only 0.01 on m1
    assert [e["pipeline"] for e in library] == ["B", "C", "A"]
    assert library[0]["gain"] == pytest.approx(0.18 / 3)
    assert library[-1]["covered"] == pytest.approx((0.10 + 0.09 + 0.06) / 3)
    # nothing left that helps: it stops
    assert greedy_library({"m": {"A": -0.1}}, ["A"], size=3) == []


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A two-module corpus as ``mire corpus build --opt-level=-Oz`` lays it out."""
    root = tmp_path / "corpus"
    lines = []
    for name, text in SOURCES.items():
        (tmp_path / name).write_text(text)
        bc = root / "ir" / f"{name}.bc"
        bc.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([CLANG, "-Oz", "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                        str(tmp_path / name), "-o", str(bc)], check=True)
        lines.append(json.dumps({"sha256": name * 8, "ir": f"ir/{name}.bc",
                                 "origin": "pkg-" + name, "path": name,
                                 "flags": ["-Oz", "-fPIC"]}))
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return root


@needs_llvm
def test_labels_are_measured_once_and_resumed(corpus, tmp_path):
    from mirecc.tasks.code_size.build import text_bytes
    from mirecc.tasks.code_size.offline.dataset import Labels, corpus_modules, label
    from mirecc.tasks.code_size.offline.labels import OWN

    modules = corpus_modules(corpus)
    assert [m.origin for m in modules] == ["pkg-a.c", "pkg-b.c"]
    out = tmp_path / "labels"
    pipelines = ["default<O1>", "no-such-pass"]
    assert label(modules, pipelines, Labels(out), CLANG, jobs=2) == 6
    table = Labels(out).table()
    # clang's own -Oz is the object clang -Oz -fPIC makes
    subprocess.run([CLANG, "-Oz", "-fPIC", "-c", str(tmp_path / "b.c"), "-o",
                    str(tmp_path / "b.o")], check=True)
    assert table["b.c" * 8][OWN]["text_bytes"] == text_bytes(str(tmp_path / "b.o"))
    assert table["a.c" * 8]["default<O1>"]["ir_instructions"] > 0
    assert "no-such-pass" in table["a.c" * 8]["no-such-pass"]["error"]
    # a rerun measures nothing; a new pipeline only itself
    assert label(modules, pipelines, Labels(out), CLANG) == 0
    assert label(modules, pipelines + ["default<Os>"], Labels(out), CLANG) == 2
    # a line cut by a crash is measured again
    with open(out / "labels.jsonl", "a") as fh:
        fh.write('{"module": "a.c')
    assert len(Labels(out).rows) == 8
    # the committed copy: the same rows, and the modules' packages
    import gzip

    from mirecc.tasks.code_size.offline.dataset import export
    export(out, corpus, tmp_path / "export")
    rows = gzip.decompress((tmp_path / "export" / "labels.jsonl.gz").read_bytes()).splitlines()
    assert sorted(json.loads(r)["pipeline"] for r in rows) == sorted(
        r["pipeline"] for r in Labels(out).rows.values())
    origins = gzip.decompress((tmp_path / "export" / "modules.jsonl.gz").read_bytes())
    assert {json.loads(m)["origin"] for m in origins.splitlines()} == {"pkg-a.c", "pkg-b.c"}


def test_a_corpus_without_manifest_is_a_clear_error(tmp_path):
    from mirecc.tasks.code_size.offline.dataset import corpus_modules

    with pytest.raises(ValueError, match="no corpus manifest"):
        corpus_modules(tmp_path)
    (tmp_path / "manifest.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match="manifest.jsonl:1: not a corpus manifest line"):
        corpus_modules(tmp_path)


@needs_llvm
def test_the_check_fails_a_pipeline_that_cannot_build_and_passes_a_good_one(tmp_path):
    from mirecc.tasks.code_size.offline.check import PROGRAMS, check

    results = check(CLANG, ["default<Os>", "no-such-pass"], tmp_path, csmith_count=0)
    programs = results.pop("_programs")
    assert len(programs) == len(list(PROGRAMS.glob("*.c")))
    assert results["default<Os>"] == {"passed": len(programs), "failed": {}}
    assert results["-Oz"]["passed"] == len(programs)
    assert set(results["no-such-pass"]["failed"]) == set(programs)


class FakeModule:
    def __init__(self, sha256: str, origin: str):
        self.sha256, self.origin, self.split = sha256, origin, "train"


def label_rows(own: int, sizes: list, seconds: float = 1.0) -> dict:
    from mirecc.tasks.code_size.offline.labels import OWN

    rows = {OWN: {"text_bytes": own, "ir_instructions": own, "seconds": seconds}}
    for i, size in enumerate(sizes):
        rows[f"p{i}"] = ({"error": "failed", "seconds": seconds} if size is None else
                         {"text_bytes": size, "ir_instructions": size, "seconds": seconds})
    return rows


def test_judging_a_ranking_verified_and_alone():
    """Verified: the smallest of -Oz and the first K, never larger; alone
    (K = 1): the first pipeline even when larger; a failed build is never
    kept; a module missing a pipeline's label is left out."""
    import numpy as np

    from mirecc.tasks.code_size.offline.rank import Table, judge

    labels = {"a": label_rows(100, [90, 110]), "b": label_rows(100, [120, None]),
              "c": label_rows(200, [100])}
    modules = [FakeModule(s, "pkg") for s in "abc"]
    table = Table(labels, modules, ["p0", "p1"])
    assert [m.sha256 for m in table.modules] == ["a", "b"]
    first = np.array([[0, 1], [0, 1]])
    k1 = judge(table, first, 1)
    assert k1["alone"]["text_mean"] == pytest.approx((0.10 - 0.20) / 2)
    assert k1["alone"]["larger"] == 0.5
    assert k1["verified"]["text_mean"] == pytest.approx(0.05)
    assert k1["verified"]["larger"] == 0 and k1["verified"]["improved"] == 0.5
    assert k1["compile_time_ratio"] == pytest.approx(2.0)
    second_first = np.array([[1, 0], [1, 0]])
    assert judge(table, second_first, 1)["verified"]["text_mean"] == 0
    assert judge(table, second_first, 2)["verified"]["text_mean"] == pytest.approx(0.05)
    assert judge(table, second_first, 2)["compile_time_ratio"] == pytest.approx(3.0)


def test_folds_never_split_a_package():
    from mirecc.tasks.code_size.offline.rank import Table
    from mirecc.tasks.code_size.offline.train import package_folds

    origins = ["x"] * 5 + ["y"] * 3 + ["z"] * 2 + ["w"]
    modules = [FakeModule(f"m{i}", o) for i, o in enumerate(origins)]
    table = Table({m.sha256: label_rows(10, [9]) for m in modules}, modules, ["p0"])
    folds = package_folds(table, 3)
    assert sorted(i for f in folds for i in f) == list(range(len(origins)))
    for fold in folds:
        assert len(fold)            # the largest package alone, the others shared
        for origin in {origins[i] for i in fold}:
            assert {i for i, o in enumerate(origins) if o == origin} <= set(fold)


def test_the_library_is_padded_with_the_best_alone():
    from mirecc.tasks.code_size.offline.search import greedy_library, pad_library

    red = {"m1": {"A": 0.10, "B": 0.02, "C": -0.5, "D": 0.01},
           "m2": {"A": 0.10, "B": 0.00, "C": 0.0, "D": 0.03}}
    greedy = greedy_library(red, list("ABCD"), size=3)
    assert [e["pipeline"] for e in greedy] == ["A"]        # nothing adds to A
    padded = pad_library(red, greedy, list("ABCD"), size=3)
    assert [e["pipeline"] for e in padded] == ["A", "D", "B"]
    assert padded[-1]["gain"] == 0.0


def test_the_ir_objective_keeps_the_fewest_instructions():
    """With objective ir, verification keeps the candidate of fewest IR
    instructions even when its object is larger, and the fixed orders
    learn from IR reductions."""
    import numpy as np

    from mirecc.tasks.code_size.offline.labels import OWN
    from mirecc.tasks.code_size.offline.rank import Table, judge, static_order

    rows = {OWN: {"text_bytes": 100, "ir_instructions": 100, "seconds": 1.0},
            "p0": {"text_bytes": 90, "ir_instructions": 100, "seconds": 1.0},
            "p1": {"text_bytes": 105, "ir_instructions": 80, "seconds": 1.0}}
    modules = [FakeModule("a", "pkg")]
    both = np.array([[0, 1]])
    by_text = judge(Table({"a": rows}, modules, ["p0", "p1"]), both, 2)["verified"]
    assert (by_text["text_mean"], by_text["ir_mean"]) == pytest.approx((0.10, 0.0))
    table = Table({"a": rows}, modules, ["p0", "p1"], objective="ir")
    by_ir = judge(table, both, 2)["verified"]
    assert (by_ir["text_mean"], by_ir["ir_mean"]) == pytest.approx((-0.05, 0.20))
    assert by_ir["ir_improved"] == 1 and by_ir["larger"] == 1
    assert list(static_order(table, "best")) == [1, 0]
    with pytest.raises(ValueError, match="objective 'size'"):
        Table({"a": rows}, modules, ["p0"], objective="size")


def test_candidate_files_are_library_reports_or_lines(tmp_path):
    from mirecc.tasks.code_size.offline.cli import read_pipelines

    report = tmp_path / "library-14-ir.json"
    report.write_text(json.dumps({"library": [{"pipeline": "default<Oz>"},
                                              {"pipeline": "default<Os> @machine-outliner"}]}))
    assert read_pipelines(report) == ["default<Oz>", "default<Os> @machine-outliner"]
    lines = tmp_path / "p.txt"
    lines.write_text("default<Oz>\n\n  default<O1>  \n")
    assert read_pipelines(lines) == ["default<Oz>", "default<O1>"]
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json: not a library report"):
        read_pipelines(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="missing.txt: cannot read"):
        read_pipelines(tmp_path / "missing.txt")


def test_a_budget_builds_the_candidates_that_fit_and_skips_small_modules():
    """budget_curve: per module the first candidates of its order whose costs
    fit; none for a module under min_text bytes; the share is of the
    reference bytes."""
    import numpy as np

    from mirecc.tasks.code_size.offline.bench import budget_curve
    from mirecc.tasks.code_size.offline.rank import Table

    labels = {"a": label_rows(2000, [1900, 1800]), "b": label_rows(100, [50, 40])}
    table = Table(labels, [FakeModule(s, "pkg") for s in "ab"], ["p0", "p1"])
    order = np.array([[0, 1], [0, 1]])
    cost = np.array([0.6, 0.6])
    one = budget_curve(table, order, cost, 1.0, min_text=1000, reference=200.0)
    assert one["mean_k"] == 0.5 and one["bytes"] == pytest.approx(100) \
        and one["share"] == pytest.approx(0.5)
    two = budget_curve(table, order, cost, 1.2, min_text=1000, reference=200.0)
    assert two["mean_k"] == 1.0 and two["share"] == pytest.approx(1.0)
    assert budget_curve(table, order, cost, 0.5, 1000, 200.0)["bytes"] == 0
    # module b is searched once the threshold allows it
    assert budget_curve(table, order, cost, 1.2, 0, 260.0)["bytes"] == pytest.approx(260)


def test_nearest_modules_rank_by_their_results_and_the_contrastive_embedding_learns():
    """Two kinds of module (features far apart) whose best pipelines
    differ: the nearest training modules' results rank a new module's own
    kind's pipeline first, in the standardised features and in the embedding
    trained contrastively on the results."""
    import numpy as np

    pytest.importorskip("torch")
    from mirecc.tasks.code_size.offline.rank import (Table, contrastive_embedding,
                                                     neighbour_scores, orders_from_scores,
                                                     standardise)

    rng = np.random.default_rng(0)
    labels, feats = {}, []
    for i in range(40):
        kind = i % 2
        labels[f"m{i}"] = label_rows(1000, [900, 1000] if kind == 0 else [1000, 850])
        feats.append(rng.normal(size=6) + (5.0 if kind else -5.0))
    table = Table(labels, [FakeModule(f"m{i}", "pkg") for i in range(40)], ["p0", "p1"])
    X = np.array(feats)
    new = np.array([rng.normal(size=6) - 5.0, rng.normal(size=6) + 5.0])   # kind 0, kind 1
    plain = standardise(X, new)
    assert orders_from_scores(neighbour_scores(plain[0], table, plain[1]))[:, 0].tolist() \
        == [0, 1]
    learned = contrastive_embedding(X, table, new, steps=100)
    assert learned[0].shape == (40, 32) and learned[1].shape == (2, 32)
    assert orders_from_scores(neighbour_scores(learned[0], table, learned[1]))[:, 0].tolist() \
        == [0, 1]
