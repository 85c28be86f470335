"""``mire run``: the run-time launcher, a layer the tasks register their run-time
parts with.

``part`` (what a task's part of a run is: :class:`~mirecc.launch.part.RunPart`,
its options, the variables and the command prefix it gives the program, the
lines it prints, what it sets on the machine for the run and puts back;
``RunError``), ``powercap`` (package power caps through Linux RAPL for one
run, put back after it, after a signal and by the next run after a launcher
killed outright; the program run with signals forwarded) and ``run`` (``mire
run`` itself: the common options, every registered part asked in the
registry's order, the program run once, what it prints and its exit status).
A task takes part through ``Task.run_part()``; the launcher reaches the parts
through the registry only and names no task.

Layer 12 of the house (``docs/layout.md``): may import the layers up to
``mirecc.corpus``; below the tasks, whose parts subclass its ``RunPart``.
"""
