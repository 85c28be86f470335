"""What the heads of OpenMP parallel regions share (the OpenMP and NUMA
tasks): which TUs they apply to, and the reasons they give for deciding
nothing that are not one task's own.

Imported when a region head is loaded, never on the driver's path.
"""
from __future__ import annotations

from mirecc.taskapi.onnxhead import OnnxHead

#: the reason codes a region head raises that no one task owns
#: (``mire stats``' ``skip.<code>``)
REASONS = {
    "no-parallel-regions": "no OpenMP parallel regions",
    "other-machine": "the head's labels describe another machine",
}


class RegionHead(OnnxHead):
    """A head over a TU's OpenMP parallel regions (``ctx.regions``): it
    applies to TUs built with ``-fopenmp`` at ``-O1`` and up."""

    def applies_to(self, request) -> bool:
        # lazy: the region reader (re, subprocess); mire stats imports this module for REASONS
        from mirecc.ir.regions import openmp_enabled

        return super().applies_to(request) and openmp_enabled(request.flags) \
            and request.opt_level not in ("0", "")

    def why_not(self, request) -> str:
        from mirecc.ir.regions import openmp_enabled  # lazy: as in applies_to

        if not super().applies_to(request):
            return super().why_not(request)
        if not openmp_enabled(request.flags):
            return "applies to TUs built with -fopenmp"
        return "applies with -O1 and up, not -O0"
