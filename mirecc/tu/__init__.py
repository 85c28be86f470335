"""The per-TU path: one call's context (``context``: the
``CompileContext`` the driver makes and every step carries), the compile
from the ML path to the exit status (``compile``), the ML step itself
(``mlpath``), the decision pipeline over the installed heads
(``pipeline``), the result cache and the kept objects (``cache``,
``direct``, ``objcache``), capture, the per-user server, the counters and
reason codes ``mire stats`` shows (``stats``) and what ``--explain`` prints.

Layer 14 of the house (``docs/layout.md``): may import every layer below
it; it reaches a task only through the registry's declarations.
"""
