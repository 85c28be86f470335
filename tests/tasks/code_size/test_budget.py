"""The code-size budget: each library entry's cost, the candidates that fit
in ``size_budget``, and ``mire size-order`` (costs and the greedy order by
bytes per unit of cost, from labels)."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from test_code_size import CLANG, MIRECC, SOURCE, env_for


def test_the_first_candidates_that_fit_are_chosen():
    from mirecc.tasks.code_size.head import within_budget

    costs = {"a": 0.6, "b": 0.5, "c": 0.3}
    assert within_budget(["a", "b", "c"], costs, 3, 1.0) == ["a"]       # b would pass 1.0
    assert within_budget(["a", "b", "c"], costs, 3, 1.1) == ["a", "b"]
    assert within_budget(["a", "b", "c"], costs, 2, 10) == ["a", "b"]   # K bounds it too
    assert within_budget(["c", "b", "a"], costs, 3, 0.8) == ["c", "b"]
    assert within_budget(["a", "b"], costs, 3, 0.5) == []               # not even the first
    assert within_budget(["x", "y"], {}, 3, 2.0) == ["x", "y"]           # no cost: 1 each


def test_costs_are_read_from_the_spec_and_checked():
    from mirecc.taskapi.api import HeadError
    from mirecc.tasks.code_size.head import library_costs

    spec = {"pipelines": {14: ["default<Oz>", {"name": "n", "passes": "default<Os>",
                                               "cost": 0.7}]}}
    assert library_costs(spec) == {14: {"n": 0.7}}
    for bad in (0, -1, "cheap", True):
        spec["pipelines"][14][1]["cost"] = bad
        with pytest.raises(HeadError, match="cost must be a number > 0"):
            library_costs(spec)


@pytest.mark.parametrize("value,expected", [("1.5", 1.5), (2, 2.0), ("0", 0.0)])
def test_the_budget_setting_parses(value, expected):
    from mirecc.tasks.code_size import _as_budget
    assert _as_budget(value) == expected


@pytest.mark.parametrize("value", ["-1", "lots", "inf", "nan", True])
def test_a_bad_budget_is_refused(value):
    from mirecc.tasks.code_size import _as_budget
    with pytest.raises(ValueError, match="expected a number >= 0"):
        _as_budget(value)


def _spec_with_costs(tmp_path: Path, entries: list[tuple[str, float]]) -> Path:
    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True)
    lines = ["task: code-size", "languages: [c, c++]", "pipelines:", "  14:"]
    for passes, cost in entries:
        lines += [f"  - name: {passes}", f"    passes: {passes}", f"    cost: {cost}"]
    (root / "code-size" / "spec.yaml").write_text("\n".join(lines) + "\n")
    return root


def test_the_budget_decides_how_many_candidates_a_compile_builds(tmp_path):
    """K = 3, costs 0.6 each: a budget of 1.3 builds two, 0.5 none (the
    object is clang's, skipped with its reason), 2 all three."""
    heads = _spec_with_costs(tmp_path, [("default<Oz>", 0.6), ("default<O1>", 0.6),
                                        ("default<O2>", 0.6)])
    (tmp_path / "p.c").write_text(SOURCE)
    subprocess.run([CLANG, "-Os", "-c", "p.c", "-o", "plain.o"], cwd=tmp_path, check=True)
    built = {}
    for budget in (1.3, 0.5, 2):
        (tmp_path / str(budget)).mkdir()
        env = env_for(tmp_path / str(budget), heads, k=3, budget=budget)
        out = subprocess.run([MIRECC, "--explain=json", "-Os", "-c", "p.c", "-o", "ours.o"],
                             cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        verified = data.get("verified", {}).get("code-size")
        built[budget] = 0 if verified is None else verified["built"]
        if budget == 0.5:
            assert verified is None
            assert "size-budget" in json.dumps(data)
            assert (tmp_path / "ours.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    assert built == {1.3: 2, 0.5: 0, 2: 3}


def _write_labels(directory: Path, modules: dict, rows: list[dict], pipelines: dict) -> None:
    directory.mkdir(parents=True)
    for name, lines in (("modules", [{"sha256": m, "split": s} for m, s in modules.items()]),
                        ("labels", rows),
                        ("pipelines", [{"id": i, "pipeline": p} for i, p in pipelines.items()])):
        with gzip.open(directory / f"{name}.jsonl.gz", "wt") as fh:
            fh.write("".join(json.dumps(line) + "\n" for line in lines))


def test_size_order_reads_costs_and_orders_by_bytes_per_cost(tmp_path):
    """Three training modules and one held out: costs are medians of seconds
    over -Oz's; the order takes the most bytes per unit of cost first, then
    what adds the most to it; the held-out module is never read."""
    from mirecc.tasks.code_size.offline.order import (costs, greedy_order, read_labels,
                                                      training_rows)

    pipes = {"pA": "A", "pB": "B", "pC": "C"}
    def row(m, p, text, sec):
        return {"module": m, "pipeline": p, "text_bytes": text, "seconds": sec}
    rows = []
    for m in ("m1", "m2", "m3"):
        rows.append(row(m, "-Oz", 1000, 1.0))
    # A saves 100 on m1 only, cost 1; B saves 60 on m1 and m2, cost 0.5;
    # C saves 100 on m3 only, cost 2
    rows += [row("m1", "pA", 900, 1.0), row("m2", "pA", 1000, 1.0), row("m3", "pA", 1000, 1.0)]
    rows += [row("m1", "pB", 940, 0.5), row("m2", "pB", 940, 0.5), row("m3", "pB", 1000, 0.5)]
    rows += [row("m1", "pC", 1000, 2.0), row("m2", "pC", 1000, 2.0), row("m3", "pC", 900, 2.0)]
    # the held-out module would make C the best by far
    rows += [row("t", "-Oz", 10**6, 1.0), row("t", "pA", 10**6, 1.0),
             row("t", "pB", 10**6, 1.0), row("t", "pC", 1, 1.0)]
    _write_labels(tmp_path / "labels", {"m1": "train", "m2": "train", "m3": "train",
                                        "t": "test"}, rows, pipes)
    splits, table = read_labels(tmp_path / "labels")
    library = ["A", "B", "C"]
    train = training_rows(splits, table, library)
    assert len(train) == 3
    cost = costs(train, library)
    assert cost == [1.0, 0.5, 2.0]
    # B: 120 bytes / 0.5 = 240; then A adds 40 / 1, C adds 100 / 2 = 50: C before A
    assert greedy_order(train, library, cost) == [1, 2, 0]


def test_size_order_names_a_directory_without_labels(tmp_path):
    from mirecc.tasks.code_size.offline.order import read_labels
    with pytest.raises(ValueError, match="no pipelines.jsonl"):
        read_labels(tmp_path)


def test_the_shipped_spec_has_a_cost_for_every_entry():
    """mire size-order --write-spec wrote them (the budget is spent in them)."""
    import yaml

    from mirecc.tasks.code_size.head import library_costs, parse_library
    spec_path = Path(__file__).resolve().parents[3] / "heads" / "code-size" / "spec.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    costs = library_costs(spec)
    for major, entries in parse_library(spec, spec_path).items():
        assert set(costs[major]) == {name for name, _ in entries}


def test_the_installed_library_is_kept_and_follows_the_spec(tmp_path):
    """The build step's library comes from a marshal copy in the cache (no
    YAML parse, no json import per TU); a changed spec is read again, a
    damaged copy too."""
    import os

    from mirecc.taskapi.config import Config
    from mirecc.tasks.code_size.head import installed_library

    heads = _spec_with_costs(tmp_path, [("default<Oz>", 0.6)])
    config = Config(heads_dir=str(heads), cache_dir=str(tmp_path / "cache"))
    assert installed_library(config, 14) == {"default<Oz>": "default<Oz>"}
    kept = list((tmp_path / "cache" / "code-size").glob("library-*.marshal"))
    assert len(kept) == 1
    assert installed_library(config, 14) == {"default<Oz>": "default<Oz>"}   # from the copy
    kept[0].write_bytes(b"\x00damaged")
    assert installed_library(config, 14) == {"default<Oz>": "default<Oz>"}
    spec = heads / "code-size" / "spec.yaml"
    spec.write_text(spec.read_text().replace("default<Oz>", "default<Os>"))
    os.utime(spec, ns=(1, 1))
    assert installed_library(config, 14) == {"default<Os>": "default<Os>"}
    assert installed_library(Config(heads_dir=str(heads), cache=False), 14) \
        == {"default<Os>": "default<Os>"}
