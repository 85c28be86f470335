"""The OpenCL tasks: device mapping (CPU or GPU per kernel, Grewe et al.)
and thread coarsening (a factor per kernel and GPU, Magni et al.), as in
MIREncoder.  They share the kernel listing, the module embedding and an
offline lab built on the same public datasets, so they share this folder.

Driver side: :mod:`.head`.  Offline: :mod:`.offline` (``mire bench devmap``,
``mire bench coarsening``, ``--write-heads``).  Shipped heads:
``heads/devmap-amd``, ``heads/devmap-nvidia``, ``heads/coarsening``.  Both
heads are advisory in the compile: their predictions are shown by
``--explain`` and written to the record file.  Coarsening is applied at run
time instead (OpenCL programs build their kernels from source when they
run): ``mire run --opencl`` (:mod:`.run`) preloads the interposer
(``runtime/opencl``), which asks :mod:`.coarsen` for each program's plan
and confirms each factor on the kernel's own launches.

This module is the tasks' declaration: standard library only.
"""
from mirecc.taskapi.api import BenchSuite, Setting, Task
from mirecc.taskapi.settings import as_positive_int as _as_positive_int
from mirecc.taskapi.settings import as_str as _as_str


def _protocol_suite():
    """``mire bench devmap`` and ``coarsening``: (run, add_arguments)."""
    from .offline import cli  # lazy: declarations are read on every compile

    return cli.run, cli.add_arguments


def _coarsen_check_suite():
    """``mire bench coarsen-check``: (run, add_arguments)."""
    from .offline import coarsen_check  # lazy: declarations are read on every compile

    return coarsen_check.run, coarsen_check.add_arguments


def _run_suite():
    """``mire bench opencl``: (run, add_arguments)."""
    from .offline import run_bench  # lazy: declarations are read on every compile

    return run_bench.run, run_bench.add_arguments


def _device_suite():
    """``mire bench opencl-device``: (run, add_arguments)."""
    from .offline import device_bench  # lazy: declarations are read on every compile

    return device_bench.run, device_bench.add_arguments


class OpenclDeviceMapping(Task):
    name = "opencl-device-mapping"
    summary = "CPU or GPU for an OpenCL module's kernels (advisory)"
    languages = frozenset({"cl"})
    settings = (
          Setting("opencl_transfer", "MIRECC_OPENCL_TRANSFER", _as_positive_int, None,
                  "bytes an OpenCL kernel launch transfers (device mapping; default: "
                  "the head's assumed.transfer)"),
          Setting("opencl_wgsize", "MIRECC_OPENCL_WGSIZE", _as_positive_int, None,
                  "work-group size of the launch (device mapping; default: the head's "
                  "assumed.wgsize)"),
      )
    bench = (BenchSuite("devmap", _protocol_suite,
                        "device mapping: mirecc's embeddings against IR2Vec and the prior art "
                        "on the published dataset, on the same folds (needs pip install "
                        "'mirecc[train,bench]')"),)
    reasons = {
        "no-kernels": "no OpenCL kernels",
    }

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.opencl.head import DeviceMappingHead

        return DeviceMappingHead

    def judged(self, kinds, out, models):
        from .offline import judge  # lazy: declarations are read on every compile

        return judge.judged_devmap(kinds, out, models)


class OpenclThreadCoarsening(Task):
    name = "opencl-thread-coarsening"
    summary = "a thread-coarsening factor for an OpenCL module's kernels per GPU (advisory)"
    languages = frozenset({"cl"})
    settings = (
          Setting("opencl_gpu", "MIRECC_OPENCL_GPU", _as_str, None,
                  "the GPU thread-coarsening decisions are for (one of the head's gpus; "
                  "default: every GPU of the head)"),
      )
    bench = (BenchSuite("coarsening", _protocol_suite,
                        "thread coarsening: mirecc's embeddings against IR2Vec and the prior "
                        "art on the published dataset, on the same folds"),
             BenchSuite("coarsen-check", _coarsen_check_suite,
                        "the plugin's coarsening transform run: every kernel at each factor "
                        "against factor 1 on the same inputs, LLVM 14 and 19"),
             BenchSuite("opencl", _run_suite,
                        "coarsening applied at run time by mire run --opencl on this machine's "
                        "OpenCL platform: programs at factor 1, each factor and adaptive, "
                        "outputs checked (the project's driver; Rodinia gaussian with "
                        "--opencl-rodinia)"),
             BenchSuite("opencl-device", _device_suite,
                        "the OpenCL device confirmed at run time (mire run --opencl "
                        "--opencl-device=confirm) on pocl's two CPU devices: the program's "
                        "own, the other and confirm, run by run, outputs checked"))

    def head_class(self):
        # lazy: declarations are read on every compile
        from mirecc.tasks.opencl.head import ThreadCoarseningHead

        return ThreadCoarseningHead

    def judged(self, kinds, out, models):
        from .offline import judge  # lazy: declarations are read on every compile

        return judge.judged_coarsening(kinds, out, models)

    def run_part(self):
        from .run import CoarseningPart  # lazy: declarations are read on every compile

        return CoarseningPart()


TASKS = (OpenclDeviceMapping(), OpenclThreadCoarsening(),)
