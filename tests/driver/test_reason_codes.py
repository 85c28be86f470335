"""Every reason code the package raises or counts is in the one table
(``mirecc.tu.stats.reason_table``), as ccache keeps its statistics in one
place, each code declared once by its owner (a task in ``Task.reasons``)."""
from __future__ import annotations

import re
from pathlib import Path

from mirecc.tu.stats import FALLBACK, PASSTHROUGH, SKIP, reason_table, render

PACKAGE = Path(__import__("mirecc").__file__).resolve().parent


def _used() -> set:
    """Every reason code the package's sources name (outside the table)."""
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "stats.py")
    codes = set(re.findall(r'\bcode="([a-z][a-z-]+)"', text))    # NoDecision, MLFailure
    codes |= set(re.findall(r'add_reason\("([a-z-]+)"', text))  # the pipeline's own
    codes |= set(re.findall(r'"fallback\.([a-z-]+)"', text))
    codes |= set(re.findall(r'fallback_code = "([a-z-]+)"', text))
    codes |= set(re.findall(r'"(ir-failed)"', text))           # MLFailure's IR-run code
    return codes | {"ml-failed"}                                 # and its default


def test_every_code_raised_is_in_the_table():
    used = _used()
    assert len(used) > 15
    table = set(reason_table()["skip."]) | set(FALLBACK)
    assert used <= table, sorted(used - table)


def test_the_table_has_no_code_nothing_uses():
    table = set(reason_table()["skip."]) | set(FALLBACK)
    assert table <= _used(), sorted(table - _used())


def test_stats_print_each_reason_with_its_words():
    out = render({"calls": 2, "skip.no-loops": 1, "fallback.timeout": 1,
                  "passthrough.not-optimised": 1}, "/x/stats")
    assert "no-loops" in out and reason_table()["skip."]["no-loops"] in out
    assert FALLBACK["timeout"] in out and PASSTHROUGH["not-optimised"] in out
    assert set(reason_table()) == {"passthrough.", "skip.", "fallback."}


def test_each_task_declares_its_own_codes():
    """A task's codes are in its declaration, not in the shared table, and a
    code declared twice is an error."""
    from mirecc.taskapi.registry import tasks

    declared = tasks()
    assert "no-loops" in declared["loop-vectorize"].reasons and "no-loops" not in SKIP
    assert "no-nests" in declared["loop-nests"].reasons
    assert "too-small" in declared["code-size"].step_reasons
    skip = reason_table()["skip."]
    for task in declared.values():
        assert set(task.reasons) <= set(skip), task.name
    raised_by_task = {code for task in declared.values() for code in task.reasons}
    assert not raised_by_task & set(SKIP)


def test_a_code_declared_twice_is_an_error(monkeypatch):
    import pytest

    from mirecc.taskapi.registry import tasks

    monkeypatch.setattr(type(tasks()["numa"]), "reasons", {"no-loops": "again"})
    with pytest.raises(RuntimeError, match="'no-loops' of task numa is declared twice"):
        reason_table()
