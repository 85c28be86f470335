"""The loop-kernel families prefix, complex, sad, poly, matvec, bitops, copy and
search: one kernel each builds at -O0 and -O3 with clang-14 and prints the same
checksum."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from mirecc.tasks.loop_vectorize.offline import kernels

CC = "clang-14"
pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason="needs clang-14")

NEW = ["prefix", "complex", "sad", "poly", "matvec", "bitops", "copy", "search"]


def _small(family: str) -> kernels.Kernel:
    """The family's kernel with the fewest loop iterations (quick at -O0)."""
    fseed = kernels._family_seed(0, family)
    ks = kernels.FAMILIES[family](random.Random(fseed), fseed)
    def cost(k):
        p = k.params
        return p.get("n") or p["M"] * p["N"]
    return min(ks, key=lambda k: (cost(k), k.name))


def _checksum(k: kernels.Kernel, tmp, opt: str) -> str:
    src = tmp / f"{k.name}.c"
    src.write_text(k.source)
    exe = tmp / f"{k.name}{opt}"
    p = subprocess.run([CC, opt, "-Wall", "-o", str(exe), str(src)], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr
    r = subprocess.run([str(exe), *k.args], capture_output=True, text=True, timeout=60, check=False,
                       env={**os.environ, "MIRECC_REPS": "2"})
    assert r.returncode == 0, r.stderr
    m = re.search(r"^checksum ([0-9a-f]{16})$", r.stdout, re.MULTILINE)
    assert m, r.stdout
    return m.group(1)


def test_new_families_registered_and_sized():
    assert list(kernels.FAMILIES)[-len(NEW):] == NEW
    ks = kernels.generate(seed=0, families=NEW)
    assert len(ks) == kernels.DEFAULT_PER_FAMILY * len(NEW)
    for fam in NEW:
        fseed = kernels._family_seed(0, fam)
        allk = kernels.FAMILIES[fam](random.Random(fseed), fseed)
        assert len(allk) >= 12 and len({k.name for k in allk}) == len(allk)
        assert len({(k.source, tuple(k.args)) for k in allk}) == len(allk)
    assert any(k.needs_reassoc for k in kernels.generate(seed=0, per_family=1000, families=["matvec"]))


def test_new_families_o0_matches_o3(tmp_path):
    ks = [_small(f) for f in NEW]

    def one(k):
        return k, _checksum(k, tmp_path, "-O0"), _checksum(k, tmp_path, "-O3")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(one, ks))
    for k, o0, o3 in results:
        assert o0 == o3, k.name
