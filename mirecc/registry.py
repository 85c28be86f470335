"""Where task heads are installed, found with directory listings only.

Kept apart from ``pipeline`` (which loads heads) because the driver asks
"is any head installed?" on every optimised compile, and must answer it
without importing anything heavy.
"""

from __future__ import annotations

import os


class HeadSpec:
    """A head directory: ``<dir>/<name>/spec.yaml``, not yet read."""

    __slots__ = ("name", "directory")

    def __init__(self, name: str, directory: str):
        self.name = name
        self.directory = directory

    def __repr__(self) -> str:
        return f"HeadSpec({self.name!r}, {self.directory!r})"


def default_heads_dirs(config) -> list[str]:
    """The configured directory, then the package's own ``heads``."""
    dirs = [config.heads_dir] if config.heads_dir else []
    package = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package, "heads")  # pip install: heads/ is package data
    source_tree = os.path.join(os.path.dirname(package), "heads")  # editable / checkout
    dirs.append(installed if os.path.isdir(installed) else source_tree)
    return dirs


def find_head_specs(dirs: list[str]) -> list[HeadSpec]:
    specs = []
    for directory in dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isfile(os.path.join(path, "spec.yaml")):
                specs.append(HeadSpec(name, path))
    return specs
