"""CUDA thread-block shapes per kernel, set through mirecc-nvcc.

For each kernel launch of a CUDA source whose block shape is a compile-time
value the grid follows (:mod:`.launches`: ``<mirecc/launch.h>`` launches and
PolyBench-ACC's ``DIM_THREAD_BLOCK`` defines), the task sets the shape a
decisions profile gives (:mod:`.profile`; ``mire tune`` does not make CUDA
entries yet).  No head ships: the labels timed on a lent H100 are in
``heads/cuda-block/labels/`` (``docs/cuda.md``).  The front end is
``mirecc-nvcc`` (:mod:`mirecc.nvcc`), which drives :mod:`.launches`.

This module is the task's declaration: standard library only.
"""
from mirecc.tasks.api import Task

TASKS = (
    Task(
        "cuda-block",
        summary="thread-block shape per CUDA kernel launch, through mirecc-nvcc "
                "(decisions profiles; no head ships)",
        languages=("cuda",),
        head=None,
        profile="mirecc.tasks.cuda_block.profile:KIND",
        front_end="mirecc.tasks.cuda_block.launches",
        measured="no head: on a lent H100 the fastest correct shape beats the source's by "
                 "1.39x geomean over 54 PolyBench-ACC cases (docs/cuda.md)",
    ),
)
