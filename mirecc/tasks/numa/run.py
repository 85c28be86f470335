"""The NUMA task's part of ``mire run`` (:class:`NumaPart`, ``Task.run_part()``):
the decisions the binary records, read back and mapped onto this machine by
:mod:`.launch` (threads, ``OMP_PLACES`` / ``OMP_PROC_BIND``, ``numactl``'s
CPU nodes and page policy, and with ``--allow-msr`` the prefetcher mask, put
back after the run, after a signal and by the next run after a launcher
killed outright).  ``--no-numa`` ignores the records; ``--input-size`` picks
the head's per-size decision.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from pathlib import Path

from mirecc.launch.part import RunPart, Step, put_back
from mirecc.tasks.numa.launch import (make_plan, probe, read_records, restore_leftover,
                                      restore_msrs, set_prefetchers)
from mirecc.util.paths import default_cache_dir


def _msr_record() -> Path:
    """Where the prefetcher MSRs' old values wait while a program runs."""
    return Path(os.environ.get("MIRECC_CACHE_DIR") or default_cache_dir()) / "msr-restore.json"


class NumaPart(RunPart):
    """The plan for one run: made by :meth:`prepare`, its prefetcher mask set
    by :meth:`applied`."""

    def __init__(self):
        self.plan = self.machine = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--input-size", choices=("small", "large"),
                            default=os.environ.get("MIRECC_NUMA_INPUT_SIZE", "large"),
                            help="which of the NUMA head's per-size decisions recorded in the "
                                 "binary to apply (default: $MIRECC_NUMA_INPUT_SIZE, else "
                                 "large)")
        parser.add_argument("--allow-msr", action="store_true",
                            help="let the recorded prefetcher mask be written to MSR 0x1A4 "
                                 "(Intel, root, msr module); the old values are restored "
                                 "after the run")
        parser.add_argument("--no-numa", action="store_true",
                            help="ignore the NUMA decisions recorded in the binary")
        # fake machine trees for tests
        parser.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)
        parser.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
        parser.add_argument("--dev-root", default="/dev", help=argparse.SUPPRESS)
        parser.add_argument("--numactl", default=None, help=argparse.SUPPRESS)

    def prepare(self, args, command: list[str]) -> Step:
        if args.no_numa:
            return Step()
        binary = shutil.which(command[0]) or command[0]
        records = read_records(binary) if os.path.isfile(binary) else []
        if not records and not args.dry_run:
            return Step()
        self.machine = probe(Path(args.sys_root), Path(args.proc_root), Path(args.dev_root),
                             args.numactl)
        self.plan = make_plan(records, args.input_size, self.machine, args.allow_msr)
        return Step(self.plan.env, self.plan.prefix, self.plan.lines)

    @contextlib.contextmanager
    def applied(self, args, say):
        """The prefetcher MSRs set for the run and put back after it (first
        those a launcher killed outright left set)."""
        record = _msr_record()
        restore_leftover(record, say)
        mask = self.plan.msr_mask if self.plan is not None else None
        saved = set_prefetchers(self.machine, mask, record) if mask is not None else {}
        try:
            yield
        finally:
            if saved:
                put_back(saved, record, restore_msrs, "prefetcher MSRs", say)
