"""The docs pages' marked blocks that benchmark commands rewrite (between
``<!-- mire bench TASK: begin -->`` and ``<!-- ... end -->``)."""
from __future__ import annotations

import re
from pathlib import Path

from mirecc.util.fsutil import atomic_write_bytes


def update_page(readme: Path, task: str, markdown: str) -> None:
    """Replace the text between ``<!-- mire bench TASK: begin -->`` and
    ``<!-- mire bench TASK: end -->`` (both must be there)."""
    text = readme.read_text()
    begin, end = f"<!-- mire bench {task}: begin -->", f"<!-- mire bench {task}: end -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme}: no '{begin}' ... '{end}' markers to replace")
    new = pattern.sub(lambda _: f"{begin}\n{markdown}{end}", text)
    atomic_write_bytes(readme, new.encode())
