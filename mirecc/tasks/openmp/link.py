"""OpenMP's part of a call that links (``Task.link_step()``): with
``adapt_openmp``, a link with ``-fopenmp`` carries the adaptive runtime."""
from __future__ import annotations

from mirecc.taskapi.api import LinkStep


class AdaptiveRuntime(LinkStep):
    def arguments(self, args, config, compiler):
        """The adaptive runtime's archive (a few kilobytes; it does nothing
        until a site calls it, and the objects' references are weak, so a
        program linked without it runs its own configuration)."""
        if not getattr(config, "adapt_openmp", False) or not any(
                a == "-fopenmp" or a.startswith("-fopenmp=") for a in args):
            return []
        # lazy: shutil and pathlib, for a link that carries the runtime only
        from mirecc.runtime.build import link_arguments

        return link_arguments(compiler, config.resolved_cache_dir())


ADAPT = AdaptiveRuntime()
