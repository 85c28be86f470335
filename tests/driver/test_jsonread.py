"""The JSON reader of the compile path (mirecc.util.jsonread) reads what
json reads, raises where json raises, and imports neither json nor re."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mirecc.util.jsonread import loads

DOCS = ['{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d\\u00e9\\n"}}', " [] \n", '"x"',
        "0", '{"n": NaN, "i": Infinity, "m": -Infinity}', '{"k": "\\ud83d\\ude00"}',
        b'{"k": "\xc3\xa9"}', '{"a": 1, "a": 2}', json.dumps({"deep": [[[{"x": 1}]]] * 3})]
BAD = ['{"a": 1} x', "", '{"a": }', "[1,]", "{'a': 1}", b"\xff{}", "[" * 100_000]


@pytest.mark.parametrize("doc", DOCS)
def test_reads_what_json_reads(doc):
    assert repr(loads(doc)) == repr(json.loads(doc))


@pytest.mark.parametrize("doc", BAD)
def test_raises_where_json_raises(doc):
    with pytest.raises((ValueError, RecursionError)) as theirs:
        json.loads(doc)
    with pytest.raises(type(theirs.value)):
        loads(doc)


def test_imports_neither_json_nor_re():
    code = ("import sys; from mirecc.util.jsonread import loads; "
            "assert loads('{\"a\": [1, {\"b\": null}]}') == {'a': [1, {'b': None}]}; "
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
