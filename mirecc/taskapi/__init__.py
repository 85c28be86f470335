"""The task interface: what a task declares and what its head sees.

``api`` (a task's declaration, its commands and bench suites, the errors a
head raises), ``settings`` (a setting and its parsers), ``config`` (every
setting's value for one call), ``registry`` (the one list of task folders,
the installed heads, loading a head), ``records`` (candidates, rankings,
decisions, a TU's request and result), ``context`` (the one per-TU context:
IR, graph, embedding, loop and region tables), ``onnxhead`` (the heads'
shared base) and ``profile`` (decisions profiles and each task's kind of
entry).

Layer 7 of the house (``docs/layout.md``): may import ``mirecc.util``,
``ir``, ``frontend``, ``graph`` and ``encoder``.  The registry names the
task folders and imports their declarations (standard library only); it is
the one place below the tasks that loads them.
"""
