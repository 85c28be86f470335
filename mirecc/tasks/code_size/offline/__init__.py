"""The code-size task's offline part: labels (IR instructions and ``.text``
bytes of a module under each pipeline, :mod:`.labels`); the candidate search,
the dataset command and ``mire bench size`` build on it (issue 14)."""
