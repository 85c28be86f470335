"""The per-TU path: the ML step of one compile (``mlpath``), the decision
pipeline over the installed heads (``pipeline``), the result cache and the
kept objects (``cache``, ``direct``, ``objcache``), capture, the per-user
server and what ``--explain`` prints.

Layer 13 of the house (``docs/layout.md``): may import every layer below
it; it reaches a task only through the registry's declarations.
"""
