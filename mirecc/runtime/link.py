"""The adaptive runtime in a program's link: the link step of each task
whose objects call it (``adapt_openmp``'s parallel regions, ``adapt_loops``'
function versions).

Standard library and :mod:`mirecc.taskapi.api` only: the tasks' declarations
import it, and they are read on every compile.
"""
from __future__ import annotations

from mirecc.taskapi.api import LinkStep


class AdaptiveRuntime(LinkStep):
    """With the setting ``setting`` on, a call that links (and has one of
    ``needs_flags``, when given) carries the adaptive runtime's archive: a
    few kilobytes that do nothing until a site calls them; the objects'
    references are weak, so a program linked without it runs its own
    configuration.  A link without the setting pays nothing."""

    def __init__(self, setting: str, needs_flags: tuple = ()):
        self.setting = setting
        self.needs_flags = needs_flags

    def active(self, config) -> bool:
        return bool(getattr(config, self.setting, False))

    def arguments(self, args, config, compiler):
        # asked only when the step is active (mirecc.driver.clang._link_arguments)
        if self.needs_flags and not any(a == f or a.startswith(f + "=")
                                        for a in args for f in self.needs_flags):
            return []
        # lazy: shutil and pathlib, for a link that carries the runtime only
        from mirecc.runtime.build import link_arguments

        return link_arguments(compiler, config.resolved_cache_dir())
