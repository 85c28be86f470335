"""A setting's declaration and the parsers of its values.

Standard library only: the driver reads every task's settings on each
optimised compile.  Each parser raises ValueError naming the problem.
"""
from __future__ import annotations


class Setting:
    """A configuration key: ``key`` in ``.mirecc.yaml``, ``env`` in the
    environment (``None``: file only), parsed by ``parse`` (raises
    ValueError with the problem), ``default`` when unset, one line of help."""

    __slots__ = ("key", "env", "parse", "default", "help", "relative_path")

    def __init__(self, key: str, env: str | None, parse, default, help: str,
                 relative_path: bool = False):
        self.key = key
        self.env = env
        self.parse = parse
        self.default = default
        self.help = help
        # a path in the file is relative to the file
        self.relative_path = relative_path


def as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def as_str(value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError(f"expected a non-empty string, got {value!r}")


def as_store(value: object) -> str:
    """A team store: ``redis://``, ``rediss://``, ``unix://`` or
    ``file://`` URL, or a directory path."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected redis://host:port/db or a directory, got {value!r}")
    value = value.strip()
    if "://" in value and not value.startswith(("redis://", "rediss://", "unix://", "file://")):
        raise ValueError(f"expected redis://host:port/db or a directory, got {value!r}")
    return value


def as_prefix(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex  # lazy: shlex loads re (~10 ms); only a launcher given as a string

        return tuple(shlex.split(value))
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ValueError(f"expected a command string or a list of strings, got {value!r}")


def as_timeout(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number of seconds, got {value!r}")
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if not seconds > 0:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    # The deadline is a setitimer() alarm: an infinite or huge value would make
    # it raise OverflowError on every call (and so warn on every compile).
    if not seconds <= MAX_TIMEOUT:  # also catches inf
        raise ValueError(f"expected at most {MAX_TIMEOUT:g} seconds, got {value!r}")
    return seconds


def as_positive_int(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a positive whole number, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise ValueError(f"expected a positive whole number, got {value!r}")
    if number <= 0:
        raise ValueError(f"expected a positive whole number, got {value!r}")
    return number


MAX_TIMEOUT = 1e6  # seconds (11 days): anything longer means "no limit" in practice
