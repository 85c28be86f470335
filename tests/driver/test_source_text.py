"""mirecc.frontend.source: the source-text scanning the OpenCL and CUDA
tasks share."""
from __future__ import annotations

from mirecc.frontend.source import blank, matching, pieces

CODE = '''int a = 1; // a "comment" with { and '
const char *s = "http://x { /* no comment */";
char c = '{', q = '\\'';
/* a block
   comment with "quotes" */ int b;
'''


def test_blank_keeps_offsets_lines_and_quotes():
    out = blank(CODE)
    assert len(out) == len(CODE) and out.count("\n") == CODE.count("\n")
    assert "comment" not in out and "http" not in out and "{" not in out
    assert 'const char *s = "' in out and "int b;" in out
    # a character literal with an escaped quote ends where it ends
    assert "char c = ' ', q = '  ';" in out


def test_blank_one_kind_only():
    comments = blank(CODE, literals=False)
    assert '"http://x { /* no comment */"' in comments     # a string's // and /* stay
    assert "a \"comment\"" not in comments
    literals = blank(CODE, comments=False)
    assert '// a "       " with { and' in literals
    assert "http" not in literals


def test_matching_and_pieces():
    text = "f(a, g(b, c), {d, e}, h[i, j]) + k"
    assert matching(text, 1, "(", ")") == text.index(")", 25) + 1
    assert matching("(unclosed", 0, "(", ")") == -1
    args, at = pieces(text, 2, ")")
    assert [a.strip() for a, _ in args] == ["a", "g(b, c)", "{d, e}", "h[i, j]"]
    assert text[at] == ")" and all(text[o:o + len(a)] == a for a, o in args)
    assert pieces("x, y", 0, ">>>") == ([("x", 0), (" y", 2)], 4)
