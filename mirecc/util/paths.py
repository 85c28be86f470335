"""Where mirecc keeps its files, and a checkout's directories as keys that
travel write them.  Only ``os`` is imported: the driver's configuration
reads it on every call."""
from __future__ import annotations

import os


def default_cache_dir() -> str:
    """mirecc's cache directory when none is configured:
    ``$XDG_CACHE_HOME/mirecc``, else ``~/.cache/mirecc``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mirecc")


HERE = "<cwd>"
_PREFIX_MAPS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=",
                "-fprofile-prefix-map=", "-fcoverage-prefix-map=")


class Checkout:
    """The directories of a compiler call that belong to its checkout, and
    how a key that travels writes them: relative to the working directory,
    as ccache's ``base_dir`` does.  They are the working directory, a
    directory above it that a prefix map names (``-ffile-prefix-map=/src/lua=.``,
    as Debian's flags give) and the one it shares with an absolute
    ``source`` name (CMake's); never the root."""

    def __init__(self, args: list[str], source: str, cwd: str | None = None):
        self.cwd = cwd = os.path.normpath(cwd or os.getcwd())
        found = {cwd}
        for a in args:
            for flag in _PREFIX_MAPS:
                if a.startswith(flag):
                    old = a[len(flag):].partition("=")[0]
                    if old:
                        found.add(os.path.normpath(os.path.join(cwd, old)))
        if os.path.isabs(source):
            found.add(os.path.commonpath([cwd, os.path.normpath(source)]))
        # the working directory and those above it, never the root
        self.dirs = sorted(((d, HERE + "/.." * cwd[len(d):].count("/")) for d in found
                            if d != "/" and (d == cwd or cwd.startswith(d + "/"))),
                           key=lambda dw: -len(dw[0]))

    def portable(self, text: str) -> str:
        """``text`` with the checkout's directories written relative to the
        working directory, each where a name ends after it (the longest
        first)."""
        for directory, written in self.dirs:
            if directory in text:
                text = _swap(text, directory, written)
        return text

    def here(self, name: str) -> str:
        """A name :meth:`portable` wrote, as a path of this checkout."""
        if name == HERE or name.startswith(HERE + "/"):
            return self.cwd + name[len(HERE):]
        return name


_AFTER_A_NAME = "/=:,; \t\n"


def _swap(text: str, directory: str, written: str) -> str:
    """``text`` with ``directory`` written ``written`` where a name ends
    after it (``/w/lua`` in ``/w/lua/src`` or ``-I/w/lua``, not in
    ``/w/luax``); by hand: ``re`` costs a compile ~8 ms to import."""
    out, at = [], 0
    while (found := text.find(directory, at)) >= 0:
        end = found + len(directory)
        if end == len(text) or text[end] in _AFTER_A_NAME:
            out += [text[at:found], written]
        else:
            out.append(text[at:end])
        at = end
    out.append(text[at:])
    return "".join(out)
