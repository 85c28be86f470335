"""CUDA thread-block shapes per kernel, set through mirecc-nvcc.

For each kernel launch of a CUDA source whose block shape is a compile-time
value the grid follows (:mod:`.launches`: ``<mirecc/launch.h>`` launches,
PolyBench-ACC's ``DIM_THREAD_BLOCK`` defines, and the macro, const or dim3
literal of ordinary CUDA code where every use moves with it, :mod:`.knobs`;
``python -m mirecc.tasks.cuda_block.offline.knobs_report`` tabulates them
for a tree of programs), the task sets the shape a
decisions profile gives (:mod:`.profile`, which ``mire tune`` writes by
trying shapes through mirecc-nvcc's builds) or, with ``apply_cuda_block``,
the head's (:mod:`.head`: a forest over kernel statistics of the device IR,
:mod:`.features`, trained on the labels timed on a lent H100 in
``heads/cuda-block/labels/``; ``mire bench cuda``, :mod:`.offline.bench`).
The front end is ``mirecc-nvcc`` (:mod:`mirecc.driver.nvcc`), which drives
:mod:`.launches`.

This module is the task's declaration: standard library only.
"""
from mirecc.taskapi.api import BenchSuite, Setting, Task, parse_bool


def _cuda_suite():
    """``mire bench cuda``: (run, add_arguments)."""
    from .offline import bench  # lazy: declarations are read on every compile

    return bench.run, bench.add_arguments


class CudaBlock(Task):
    name = "cuda-block"
    summary = ("thread-block shape per CUDA kernel launch, through mirecc-nvcc "
               "(the head's with apply_cuda_block, or a decisions profile's)")
    languages = frozenset({"cuda"})
    # off by default: no GPU has confirmed the head's shapes in a build yet
    applied_when = "apply_cuda_block"
    settings = (Setting("apply_cuda_block", "MIRECC_APPLY_CUDA_BLOCK", parse_bool, False,
                        "set the cuda-block head's first shape on tunable launches "
                        "(default: shown by --explain and recorded only)"),)
    # --mirecc-help prints the head's calibrated gate (mirecc.learn.gates) instead
    measured = ("leave one program out on 85 H100-labelled cases (docs/results/"
                "cuda-block.md): guessing with the calibrated gate (min_gain 0.2) 82% of "
                "the oracle's log gain, none below 0.95x; the fastest of the first 3 "
                "measured 97%")
    bench = (BenchSuite("cuda", _cuda_suite,
                        "CUDA block shapes: the head's rankings against the source's shape, "
                        "a fixed shape, IR2Vec and encoders, leave one program out on the "
                        "H100 labels (needs pip install 'mirecc[train,bench]')"),)

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.cuda_block.head import BlockHead

        return BlockHead

    def profile_kind(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.cuda_block.profile import KIND

        return KIND

    def compile_step(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.cuda_block.launches import STEP

        return STEP

    def judged(self, kinds, out, models):
        from .offline import bench  # lazy: declarations are read on every compile

        return bench.judged(kinds, out, models)


TASKS = (CudaBlock(),)
