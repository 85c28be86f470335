"""Every reason code the package raises or counts is in the one table
(``mirecc.driver.stats.REASONS``), as ccache keeps its statistics in one place."""
from __future__ import annotations

import re
from pathlib import Path

from mirecc.driver.stats import FALLBACK, PASSTHROUGH, REASONS, SKIP, render

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
    assert used <= set(SKIP) | set(FALLBACK), sorted(used - set(SKIP) - set(FALLBACK))


def test_the_table_has_no_code_nothing_uses():
    table = set(SKIP) | set(FALLBACK)
    assert table <= _used(), sorted(table - _used())


def test_stats_print_each_reason_with_its_words():
    out = render({"calls": 2, "skip.no-loops": 1, "fallback.timeout": 1,
                  "passthrough.not-optimised": 1}, "/x/stats")
    assert "no-loops" in out and SKIP["no-loops"] in out
    assert FALLBACK["timeout"] in out and PASSTHROUGH["not-optimised"] in out
    assert set(REASONS) == {"passthrough.", "skip.", "fallback."}
