"""mirecc's configuration: built-in defaults < ``.mirecc.yaml`` < environment.

The file is found by walking up from the working directory (as ``.clang-format``
is), or named by ``MIRECC_CONFIG``.  It is read with ``yaml.safe_load`` and
validated key by key: an unknown key or a bad value stops the call with an
error naming the file and the key, because a silently ignored typo in a build
configuration is worse than a loud one.

PyYAML is imported only when a file exists, so calls without a config file
pay nothing for it.
"""

from __future__ import annotations

import os

CONFIG_FILE_NAME = ".mirecc.yaml"



def default_cache_dir() -> str:
    """mirecc's cache directory when none is configured:
    ``$XDG_CACHE_HOME/mirecc``, else ``~/.cache/mirecc``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mirecc")

class ConfigError(Exception):
    """A configuration problem; the message names where it comes from."""


class Config:
    """The effective settings of one mirecc call.

    A plain class rather than a dataclass: it is built on every compile, and
    importing ``dataclasses`` alone would cost more than the rest of start-up.
    """

    # name: default (a comment per field says what it is for)
    DEFAULTS = {
        "cc": None,          # C compiler (name on PATH or path); default: newest clang
        "cxx": None,         # C++ compiler; default: the clang++ matching cc
        "prefix": (),        # launcher put before the compiler, e.g. ("ccache",)
        "cache": True,       # keep per-TU results in the content-addressed cache
        "cache_dir": None,   # default: $XDG_CACHE_HOME/mirecc or ~/.cache/mirecc
        "capture_dir": None,  # store every TU's IR here (corpus collection)
        "timeout": 30.0,     # seconds the ML path may take per call
        "warnings": True,    # print the fail-open warning
        "model": None,       # directory of an encoder model (manifest.json)
        "plugin": None,      # pass plugin to inject decisions with
        "heads_dir": None,   # directory of task heads, instead of the shipped ones
        "disable": False,    # pure pass-through: behave exactly as clang
        "record": None,      # append one JSON line of decisions per TU to this file
        "embed_server": True,  # embed through the per-user server (started if needed)
        "opencl_transfer": None,  # bytes an OpenCL kernel's launch transfers
        "opencl_wgsize": None,    # work-group size of an OpenCL kernel's launch
        "opencl_gpu": None,       # the GPU that thread-coarsening heads decide for
        # apply the loop-vectorize head's factors (default: record them only;
        # measured: the shipped head slows some programs, see the README)
        "apply_loop_decisions": False,
        "source": "defaults",  # where the values came from, for messages
    }
    __slots__ = tuple(DEFAULTS)

    def __init__(self, **values):
        unknown = set(values) - set(self.DEFAULTS)
        if unknown:
            raise TypeError(f"unknown Config fields: {sorted(unknown)}")
        for name, default in self.DEFAULTS.items():
            object.__setattr__(self, name, values.get(name, default))

    def __setattr__(self, name, value):
        raise AttributeError("Config is read-only")

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.DEFAULTS)
        return f"Config({body})"

    def resolved_cache_dir(self):
        from pathlib import Path

        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        return Path(default_cache_dir())


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _as_str(value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError(f"expected a non-empty string, got {value!r}")


def _as_prefix(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        return tuple(shlex.split(value))
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ValueError(f"expected a command string or a list of strings, got {value!r}")


def _as_timeout(value: object) -> float:
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


def _as_positive_int(value: object) -> int:
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


# key in .mirecc.yaml -> (Config field, parser)
FILE_KEYS = {
    "cc": ("cc", _as_str),
    "cxx": ("cxx", _as_str),
    "prefix": ("prefix", _as_prefix),
    "cache": ("cache", _as_bool),
    "cache_dir": ("cache_dir", _as_str),
    "capture_dir": ("capture_dir", _as_str),
    "timeout": ("timeout", _as_timeout),
    "warnings": ("warnings", _as_bool),
    "model": ("model", _as_str),
    "plugin": ("plugin", _as_str),
    "heads_dir": ("heads_dir", _as_str),
    "disable": ("disable", _as_bool),
    "record": ("record", _as_str),
    "embed_server": ("embed_server", _as_bool),
    "opencl_transfer": ("opencl_transfer", _as_positive_int),
    "opencl_wgsize": ("opencl_wgsize", _as_positive_int),
    "opencl_gpu": ("opencl_gpu", _as_str),
    "apply_loop_decisions": ("apply_loop_decisions", _as_bool),
}

# environment variable -> (Config field, parser); environment beats the file.
ENV_KEYS = {
    "MIRECC_CC": ("cc", _as_str),
    "MIRECC_CXX": ("cxx", _as_str),
    "MIRECC_PREFIX": ("prefix", _as_prefix),
    "MIRECC_CACHE": ("cache", _as_bool),
    "MIRECC_CACHE_DIR": ("cache_dir", _as_str),
    "MIRECC_CAPTURE_DIR": ("capture_dir", _as_str),
    "MIRECC_TIMEOUT": ("timeout", _as_timeout),
    "MIRECC_MODEL": ("model", _as_str),
    "MIRECC_PLUGIN": ("plugin", _as_str),
    "MIRECC_HEADS_DIR": ("heads_dir", _as_str),
    "MIRECC_DISABLE": ("disable", _as_bool),
    "MIRECC_RECORD": ("record", _as_str),
    "MIRECC_EMBED_SERVER": ("embed_server", _as_bool),
    "MIRECC_OPENCL_TRANSFER": ("opencl_transfer", _as_positive_int),
    "MIRECC_OPENCL_WGSIZE": ("opencl_wgsize", _as_positive_int),
    "MIRECC_OPENCL_GPU": ("opencl_gpu", _as_str),
    "MIRECC_APPLY_LOOPS": ("apply_loop_decisions", _as_bool),
}
# MIRECC_QUIET=1 is the natural spelling of warnings: false.
ENV_NEGATED = {"MIRECC_QUIET": "warnings"}

assert {f for f, _ in FILE_KEYS.values()} <= set(Config.DEFAULTS)


def find_config_file(start: str | None = None) -> str | None:
    """``MIRECC_CONFIG`` if set, else the nearest ``.mirecc.yaml`` upward."""
    named = os.environ.get("MIRECC_CONFIG")
    if named:
        if not os.path.isfile(named):
            raise ConfigError(f"{named}: MIRECC_CONFIG names a file that does not exist")
        return named
    directory = os.path.realpath(start or os.getcwd())
    while True:
        candidate = os.path.join(directory, CONFIG_FILE_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read_file(path: str) -> dict:
    import yaml  # lazy: only calls with a config file pay for PyYAML

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_one_line_yaml_error(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values, "
                          f"got {type(data).__name__}")
    return data


def _one_line_yaml_error(exc: Exception) -> str:
    """PyYAML's messages span several lines (with a source excerpt and a caret);
    an error of mirecc's is one line: the problem and where it is."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem:
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        context = getattr(exc, "context", None)
        return where + problem + (f" ({context})" if context else "")
    return " ".join(str(exc).split())


def load_config(start: str | None = None, environ: dict | None = None) -> Config:
    """Build the effective configuration; raises ConfigError with file and key."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    sources = []

    path = find_config_file(start)
    if path is not None:
        data = _read_file(path)
        for key, value in data.items():
            if key not in FILE_KEYS:
                known = ", ".join(sorted(FILE_KEYS))
                raise ConfigError(f"{path}: unknown key '{key}' (known keys: {known})")
            name, parse = FILE_KEYS[key]
            try:
                values[name] = parse(value)
            except ValueError as exc:
                raise ConfigError(f"{path}: bad value for '{key}': {exc}") from None
        # Relative paths in the file are relative to the file, not to the cwd.
        for name in ("cache_dir", "capture_dir", "model", "plugin", "heads_dir", "record"):
            if isinstance(values.get(name), str):
                p = os.path.expanduser(str(values[name]))
                values[name] = os.path.join(os.path.dirname(os.path.abspath(path)), p)
        sources.append(path)

    for var, (name, parse) in ENV_KEYS.items():
        raw = env.get(var)
        if raw is None or (raw == "" and name not in ("cache", "disable", "embed_server")):
            continue
        try:
            values[name] = parse(raw)
        except ValueError as exc:
            raise ConfigError(f"environment variable {var}: bad value: {exc}") from None
        sources.append(var)
    for var, name in ENV_NEGATED.items():
        raw = env.get(var)
        if raw:
            try:
                values[name] = not _as_bool(raw)
            except ValueError as exc:
                raise ConfigError(f"environment variable {var}: bad value: {exc}") from None
            sources.append(var)

    return Config(**values, source=", ".join(sources) or "defaults")
