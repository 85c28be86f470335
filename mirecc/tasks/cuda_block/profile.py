"""CUDA block-shape decisions in a decisions profile (:mod:`mirecc.profile`):

    cuda-block  src/gemm.cu  gemm_kernel@LARGE_DATASET  0b1c2d3e4f5a6b7c  64x4  # 1.10x

target: a kernel's name as written in the source, optionally with an
input-size class ``@MACRO``: the entry then applies only to compiles that
define MACRO (``-DLARGE_DATASET``), and wins over a classless one; digest:
the kernel's function in the device IR; value: the block shape ``XxY``.
``mirecc-nvcc`` applies the entries (:mod:`.launches`).
"""
from __future__ import annotations

import re

from mirecc.profile import ProfileKind

#: threads per block every CUDA GPU since compute capability 2.0 allows
MAX_BLOCK_THREADS = 1024
_KERNEL_TARGET = re.compile(r"[A-Za-z_]\w*(@[A-Za-z_]\w*)?")
_BLOCK_SHAPE = re.compile(r"([1-9]\d{0,4})x([1-9]\d{0,4})")


class BlockKind(ProfileKind):
    front_end = "mirecc-nvcc"
    noun = "kernel"
    target_help = "a kernel name, optionally with an input-size class <kernel>@<MACRO>"

    def check_target(self, target):
        return bool(_KERNEL_TARGET.fullmatch(target))

    def function(self, target):
        return target.partition("@")[0]

    def size_class(self, target):
        return target.partition("@")[2] or None

    def parse_value(self, text):
        shape = _BLOCK_SHAPE.fullmatch(text)
        if not shape:
            raise ValueError("expected a thread-block shape XxY of positive integers "
                             "(e.g. 32x8)")
        x, y = int(shape[1]), int(shape[2])
        if x * y > MAX_BLOCK_THREADS:   # the launch would fail: the output would change
            raise ValueError(f"{x * y} threads per block, more than CUDA's "
                             f"{MAX_BLOCK_THREADS}")
        return {"x": x, "y": y}

    def format_value(self, value):
        return f"{value['x']}x{value['y']}"


KIND = BlockKind()
