"""The decision tasks: one folder each (its declaration, driver side,
``offline/`` lab), listed once in :data:`mirecc.taskapi.registry.TASK_MODULES`
(``docs/tasks.md``: the interface and how to add one).

Layer 13 of the house (``docs/layout.md``): a task folder may import the layers
up to ``mirecc.launch`` (its run-time part of ``mire run`` subclasses
``mirecc.launch.part.RunPart``) and its own folder; no task imports another.
"""
