"""A task's part of ``mire run``: what ``Task.run_part()`` returns.

A part adds its options to ``mire run``'s parser, says what it does to one
run (a :class:`Step`: the variables the program runs with, a command it runs
under, one line for each thing done or skipped) and may set something on the
machine for the length of the run, put back when the program ends, also after
a signal (:meth:`RunPart.applied`).  The launcher (:mod:`mirecc.launch.run`)
asks every registered part in the registry's order and runs the program once.

Only the standard library is imported here.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path


class RunError(Exception):
    """A run that cannot be prepared or started: ``mire run`` prints the
    message (which names the file or option) and exits with status 2."""


@dataclass
class Step:
    """What one part does to a run."""
    #: variables the program runs with (a part that keeps the user's own
    #: value of a variable leaves it out)
    env: dict[str, str] = field(default_factory=dict)
    #: a command the program runs under (``numactl ... --``)
    prefix: list[str] = field(default_factory=list)
    #: what is done and what the machine lacks, one line each
    lines: list[str] = field(default_factory=list)


class RunPart:
    """A task's part of ``mire run``.  ``Task.run_part()`` makes one for each
    run, so a part may keep what :meth:`prepare` found for :meth:`applied`;
    each default below is "the part has none"."""

    def add_arguments(self, parser) -> None:
        """Its options on ``mire run``'s parser (an ``argparse`` parser)."""

    def prepare(self, args, command: list[str]) -> Step:
        """What it does to the run of ``command`` (with ``--dry-run`` too, which
        prints the lines and runs nothing); raises :class:`RunError` with the
        problem."""
        return Step()

    def applied(self, args, say):
        """A context manager around the program's run (never with ``--dry-run``):
        what the part sets on the machine, put back when it exits, also after
        a signal; raises :class:`RunError` when it cannot set it.  ``say``
        prints one line."""
        return contextlib.nullcontext()


def restore_leftover(record: Path, restore, what: str, say,
                     record_name: str = "restore record") -> None:
    """Put back what a launcher killed before it could left set: the values
    its ``record`` (JSON) holds, through ``restore(saved) -> problems``;
    ``what`` names them in the one line ``say`` prints.  A record that cannot
    be read or restored is left as it is."""
    if not record.exists():
        return
    try:
        saved = json.loads(record.read_text())
    except (OSError, ValueError) as exc:
        say(f"mire run: {record}: unreadable {record_name} ({exc}); left as it is")
        return
    problems = restore(saved)
    if problems:
        say(f"mire run: could not restore the {what} of an earlier run: {'; '.join(problems)}")
        return
    record.unlink(missing_ok=True)
    say(f"mire run: restored the {what} an earlier run left set ({record})")


def put_back(saved, record: Path, restore, what: str, say) -> None:
    """After the run: put back what a part set (``saved``, through
    ``restore(saved) -> problems``) and drop its ``record``; where that
    fails, one line saying so, the record kept for the next run."""
    problems = restore(saved)
    if problems:
        say(f"mire run: could not restore the {what}: {'; '.join(problems)} "
            f"(the old values are in {record})")
    else:
        record.unlink(missing_ok=True)
