"""The launcher's parts: the tasks register theirs through ``Task.run_part()``,
``mire run`` asks each in the registry's order, runs the program once with
what they give it and puts back what they set; the declarations list their
bench suites, judges and parts without importing any of them."""
import argparse
import contextlib
import subprocess
import sys

from mirecc.launch import run as launcher
from mirecc.launch.part import RunError, RunPart, Step


def test_the_tasks_parts_come_from_their_declarations():
    from mirecc.taskapi.registry import tasks

    taking_part = [name for name, task in tasks().items() if task.has("run_part")]
    assert taking_part == ["opencl-thread-coarsening", "numa"]        # the registry's order
    parts = launcher.parts()
    assert [type(p).__name__ for p in parts] == ["CoarseningPart", "NumaPart"]
    assert all(isinstance(p, RunPart) for p in parts)
    assert launcher.parts()[1] is not parts[1]                         # fresh for each run


def test_declarations_list_suites_judges_and_parts_without_importing_them():
    code = ("import sys; from mirecc.taskapi.registry import tasks\n"
            "for t in tasks().values():\n"
            "    [(s.name, s.summary, s.load) for s in t.bench]\n"
            "    t.has('judged'), t.has('run_part')\n"
            "print(sorted(m for m in sys.modules if '.offline' in m or 'launch' in m\n"
            "             or m.endswith('.run')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


class _Toy(RunPart):
    """A part that sets a variable and a prefix, and holds something for the run."""

    def __init__(self, log):
        self.log = log

    def add_arguments(self, parser):
        parser.add_argument("--toy", default="on")

    def prepare(self, args, command):
        if args.toy == "bad":
            raise RunError("--toy bad: not a toy")
        return Step(env={"TOY": args.toy}, prefix=["env", "TOY_PREFIX=1"],
                    lines=[f"toy: {args.toy}"])

    @contextlib.contextmanager
    def applied(self, args, say):
        self.log.append("set")
        try:
            yield
        finally:
            self.log.append("put back")


def _args(monkeypatch, log, *argv):
    monkeypatch.setattr(launcher, "parts", lambda: [_Toy(log)])
    parser = argparse.ArgumentParser()
    launcher.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_part_gives_the_run_its_variables_prefix_and_lines(monkeypatch, capfd, tmp_path):
    monkeypatch.setenv("MIRECC_CACHE_DIR", str(tmp_path))
    log = []
    show = "import os; print(os.environ['TOY'], os.environ['TOY_PREFIX'])"
    args = _args(monkeypatch, log, "--powercap-root", str(tmp_path / "none"), "--toy", "x",
                 "--", sys.executable, "-c", show)
    assert launcher.run(args) == 0
    out, err = capfd.readouterr()
    assert out == "x 1\n" and err == "mire run: toy: x\n"
    assert log == ["set", "put back"]

    args = _args(monkeypatch, log, "--dry-run", "--power-cap", "65", "--", "prog", "a b")
    assert launcher.run(args) == 0
    out, _ = capfd.readouterr()
    assert out.splitlines() == ["mire run: toy: on",
                                "mire run: would run: TOY=on env TOY_PREFIX=1 prog 'a b'",
                                "mire run: with a package power cap of 65"]
    assert log == ["set", "put back"]                                  # nothing set


def test_a_part_that_refuses_stops_the_run_with_status_2(monkeypatch, capfd):
    log = []
    args = _args(monkeypatch, log, "--toy", "bad", "--", sys.executable, "-c", "print(1)")
    assert launcher.run(args) == 2
    out, err = capfd.readouterr()
    assert out == "" and err == "mire run: --toy bad: not a toy\n" and log == []
