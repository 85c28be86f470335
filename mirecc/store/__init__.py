"""What mirecc stores, named by what it holds, over one implementation.

``kinds`` declares every kind once (pipeline results, kept objects,
direct-mode manifests, search winners, run-time verdicts, embedding caches
in this user's cache; winners, travelling entries, verdicts and profile
entries in the team store): its place, layout and size limit, or that it
has none; ``mire stats`` and ``mire store status`` list them with their
sizes.  ``local`` is the one folder of keyed entries (atomic writes,
size limit, least-recently-used eviction) under each of them and under a
shared directory; the team store's backends (``backends``: the interface
and ``open_backend``) are a shared directory (``shared``) or a Redis server
(``redisdb``: ``redis://host:port/db``), and ``team`` checks what comes back
(versioned entries, the tools that made them) and counts it; ``mire store``.
The owners of the kinds stay where their keys are made (``tu.cache``,
``tu.objcache``, ``tu.direct``, ``tu.travel``, ``tasks.code_size.winners``,
``runtime.store``, ``encoder.stmtcache``) and read and write through them.

Layer 2 of the house (``docs/layout.md``): may import ``mirecc.util`` and the
standard library (and the ``redis`` client, loaded only for a Redis store).
"""
