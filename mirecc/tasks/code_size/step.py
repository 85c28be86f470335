"""Code size's step in a compile (``Task.compile_step()``): after a split
compile's object is made, candidates built from the front end's bitcode
and the smallest object kept (:mod:`.verify`); before it, the object gate
that lets the IR go unread where no candidate can pay, and the first
candidate built in a free job slot meanwhile (:mod:`.early`)."""
from __future__ import annotations

from mirecc.taskapi.api import CompileStep
from mirecc.tasks.code_size.early import first_candidate, worth_searching


class SizeStep(CompileStep):
    def verify(self, decision, report, split, extra, workdir, config):
        # lazy: dataclasses, pathlib and the candidate builds: only a searched TU pays
        from mirecc.tasks.code_size.verify import smallest_object

        return smallest_object(decision, report, split, extra, workdir, config)

    def gate(self, object_path, config, compiler):
        return worth_searching(object_path, config, compiler)

    def early(self, split, config, workdir):
        return first_candidate(split, config, workdir)


STEP = SizeStep()
