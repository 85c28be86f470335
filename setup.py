"""The metadata is in setup.cfg; the packages are found here: every package
under mirecc/ (so a new task folder needs no line), plus the folders mapped
into the package as data (setup.cfg's package_dir: the shipped heads, the
pass plugin's sources, the bundled programs)."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["mirecc", "mirecc.*"])
      + ["mirecc.heads", "mirecc.passplugin", "mirecc.programs",
                                                    "mirecc.runtimesrc"])
