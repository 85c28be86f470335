"""mirecc: a drop-in clang driver that makes learned compiler decisions.

Kept tiny on purpose: ``mirecc`` starts once per compiled file under make,
and everything imported here is paid on every call.
"""

__version__ = "0.1.0"
