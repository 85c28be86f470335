"""Test hook for failures no real input can provoke (a bug in mirecc itself,
a hang): ``MIRECC_DEBUG_FAULT=<kind>``.  Documented in the README; never set
in normal use.  Standard library only: the driver asks on every call.

Kinds: ``exception`` or ``hang`` in the ML path; ``driver-config``,
``driver-classify``, ``driver-heads``, ``driver-explain``: an exception at
that step of the driver (the whole-driver guard's tests); ``serve-kill``,
``serve-hang``: the compile server's call killed (SIGKILL) or hanging once
it has answered its process id, ``serve-start``: the compile server exiting
as it starts (the compiled client's fault tests).
"""
from __future__ import annotations

import os
import time

FAULT_ENV = "MIRECC_DEBUG_FAULT"


def inject_debug_fault(where: str) -> None:
    """Raise (or hang) if ``MIRECC_DEBUG_FAULT`` asks for it at ``where``
    (``"ml"`` or a ``driver-<step>``)."""
    fault = os.environ.get(FAULT_ENV)
    if not fault:
        return
    if fault == where or (where == "ml" and fault == "exception"):
        raise RuntimeError(f"fault injected by {FAULT_ENV}={fault}")
    if where == "ml" and fault == "hang":
        time.sleep(3600)
    if where == "serve" and fault == "serve-kill":
        os.kill(os.getpid(), 9)     # SIGKILL (the signal module imports enum: every call pays)
    if where == "serve" and fault == "serve-hang":
        time.sleep(3600)
