"""The code-size task's build step: after the user's own object is made,
build each decided candidate from the same bitcode and keep the smallest.

Called by the driver (``Task.verify``) for a split compile only (the
candidates need the front end's bitcode).  Candidates that fail to build
are skipped; the user's object wins ties, so the output is never larger
than the user's level and the choice is the same for the same input.
"""
from __future__ import annotations

from pathlib import Path

from mirecc.fsutil import atomic_write_bytes
from mirecc.tasks.code_size.build import CandidateError, build_candidate, text_bytes


class Verified:
    """What the build step did: ``sizes`` (candidate -> .text bytes, the
    user's own level as ``"-O<level>"``), ``winner`` and ``skipped``
    (candidate -> why)."""

    def __init__(self, sizes: dict, winner: str, skipped: dict):
        self.sizes = sizes
        self.winner = winner
        self.skipped = skipped


def smallest_object(decision, split, extra: list[str], workdir: str, opt_level: str) -> Verified:
    """Build ``decision.value["verify"]``'s pipelines; replace the user's
    object (``split.output``, already made) by the smallest candidate when it
    is strictly smaller."""
    own = f"-O{opt_level}"
    sizes, skipped, paths = {own: text_bytes(split.output)}, {}, {}
    for number, pipeline in enumerate(decision.value["verify"]):
        try:
            path = build_candidate(split, pipeline, extra, workdir, f"size{number}")
            sizes[pipeline] = text_bytes(path)
            paths[pipeline] = path
        except CandidateError as exc:
            skipped[pipeline] = str(exc)
    # the smallest; the user's level first among equals, then library order
    winner = min(sizes, key=lambda name: (sizes[name], name != own))
    if winner != own:
        # a copy renamed over the output: the work directory may be on
        # another file system
        with open(paths[winner], "rb") as fh:
            atomic_write_bytes(Path(split.output), fh.read())
    return Verified(sizes, winner, skipped)
