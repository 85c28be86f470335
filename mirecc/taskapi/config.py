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

from mirecc.taskapi.registry import tasks
from mirecc.taskapi.settings import (Setting, as_bool, as_positive_int, as_prefix, as_store,
                                     as_str, as_timeout)
from mirecc.util.paths import default_cache_dir

CONFIG_FILE_NAME = ".mirecc.yaml"


class ConfigError(Exception):
    """A configuration problem; the message names where it comes from."""


class Config:
    """The effective settings of one mirecc call: one attribute per setting
    (mirecc's own, :data:`CORE_SETTINGS`, and every task's), plus ``source``.

    A plain class rather than a dataclass: it is built on every compile, and
    importing ``dataclasses`` alone would cost more than the rest of start-up.
    """

    def __init__(self, **values):
        fields = {s.key: s.default for s in all_settings()}
        fields["source"] = "defaults"   # where the values came from, for messages
        unknown = set(values) - set(fields)
        if unknown:
            raise TypeError(f"unknown Config fields: {sorted(unknown)}")
        fields.update(values)
        self.__dict__.update(fields)

    def __setattr__(self, name, value):
        raise AttributeError("Config is read-only")

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={v!r}" for n, v in self.__dict__.items())
        return f"Config({body})"

    def resolved_cache_dir(self):
        """The cache directory as a Path."""
        from pathlib import Path  # lazy: ~5 ms that a compile never pays

        return Path(self.cache_root())

    def cache_root(self) -> str:
        """The cache directory as a string (no pathlib: ~5 ms at start-up)."""
        if self.cache_dir:
            return os.path.expanduser(self.cache_dir)
        return default_cache_dir()


CORE_SETTINGS = (
    Setting("cc", "MIRECC_CC", as_str, None,
            "the real C compiler (default: the clang setup configured, else the newest "
            "clang with its OpenMP runtime)"),
    Setting("cxx", "MIRECC_CXX", as_str, None, "the real C++ compiler (default: the "
            "clang++ matching cc)"),
    Setting("prefix", "MIRECC_PREFIX", as_prefix, (),
            "launcher before the compiler, e.g. ccache, distcc"),
    Setting("cache", "MIRECC_CACHE", as_bool, True, "cache per-TU pipeline results"),
    Setting("cache_dir", "MIRECC_CACHE_DIR", as_str, None,
            "where (default: $XDG_CACHE_HOME/mirecc)", relative_path=True),
    Setting("object_cache_mb", "MIRECC_OBJECT_CACHE_MB", as_positive_int, 1024,
            "megabytes of objects a build step chose (code size), kept for rebuilds "
            "(least recently used removed first)"),
    Setting("capture_dir", "MIRECC_CAPTURE_DIR", as_str, None,
            "store every TU's IR (corpus collection)", relative_path=True),
    Setting("timeout", "MIRECC_TIMEOUT", as_timeout, 30.0,
            "seconds the ML path may take per call"),
    Setting("warnings", None, as_bool, True,
            "print the fail-open warning (MIRECC_QUIET=1 turns it off)"),
    Setting("model", "MIRECC_MODEL", as_str, None,
            "encoder model directory (verified manifest; default: the shipped one)",
            relative_path=True),
    Setting("plugin", "MIRECC_PLUGIN", as_str, None,
            "the loop-hints pass plugin to load (default: found or built for the "
            "driven clang)", relative_path=True),
    Setting("heads_dir", "MIRECC_HEADS_DIR", as_str, None,
            "directory of task heads; replaces the shipped ones", relative_path=True),
    Setting("disable", "MIRECC_DISABLE", as_bool, False, "pure pass-through"),
    Setting("record", "MIRECC_RECORD", as_str, None,
            "append one JSON line of decisions per TU to this file", relative_path=True),
    Setting("profile", "MIRECC_PROFILE", as_str, None,
            "decisions profile (mire tune) whose measured decisions replace the heads' "
            "(see mirecc/taskapi/profile.py)", relative_path=True),
    Setting("server", "MIRECC_SERVER", as_bool, True,
            "run the calls something reads in the per-user compile server and the "
            "pipeline in the pipeline server (each started when none answers); false: "
            "both in the calling process"),
    Setting("store", "MIRECC_STORE", as_store, None,
            "the team store of verified results: redis://host:port/db or a shared "
            "directory (see mirecc/store/team.py)"),
    Setting("store_write", "MIRECC_STORE_WRITE", as_bool, False,
            "write what this build verifies to the team store (CI); false: read only"),
    Setting("store_timeout", "MIRECC_STORE_TIMEOUT", as_timeout, 0.25,
            "seconds the team store may take to answer before builds go on without it"),
)
# MIRECC_QUIET=1 is the natural spelling of warnings: false.
ENV_NEGATED = {"MIRECC_QUIET": "warnings"}
# settings whose empty environment value means false, not unset
EMPTY_IS_VALUE = ("cache", "disable", "server", "store_write")


def all_settings() -> tuple:
    """mirecc's own settings and every registered task's (one shared by
    two tasks, as ``adapt_loops``, once)."""
    out = list(CORE_SETTINGS)
    for t in tasks().values():
        out += [s for s in t.settings if not any(s is o for o in out)]
    return tuple(out)


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

    settings = all_settings()
    by_key = {s.key: s for s in settings}
    path = find_config_file(start)
    if path is not None:
        data = _read_file(path)
        for key, value in data.items():
            if key not in by_key:
                known = ", ".join(sorted(by_key))
                raise ConfigError(f"{path}: unknown key '{key}' (known keys: {known})")
            try:
                values[key] = by_key[key].parse(value)
            except ValueError as exc:
                raise ConfigError(f"{path}: bad value for '{key}': {exc}") from None
            # Relative paths in the file are relative to the file, not to the cwd.
            if by_key[key].relative_path:
                p = os.path.expanduser(str(values[key]))
                values[key] = os.path.join(os.path.dirname(os.path.abspath(path)), p)
        sources.append(path)

    for setting in settings:
        var = setting.env
        raw = env.get(var) if var else None
        if raw is None or (raw == "" and setting.key not in EMPTY_IS_VALUE):
            continue
        try:
            values[setting.key] = setting.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"environment variable {var}: bad value: {exc}") from None
        sources.append(var)
    for var, name in ENV_NEGATED.items():
        raw = env.get(var)
        if raw:
            try:
                values[name] = not as_bool(raw)
            except ValueError as exc:
                raise ConfigError(f"environment variable {var}: bad value: {exc}") from None
            sources.append(var)

    return Config(**values, source=", ".join(sources) or "defaults")
