#!/usr/bin/env bash
# Install mirecc and everything it needs on a fresh Debian 12 machine.
#
#   scripts/setup.sh           system packages (when missing) + .venv with mirecc
#   scripts/setup.sh --test    the same, installed editable, plus test tools
#   scripts/setup.sh --corpus  the same as plain, plus what `mire corpus build`
#                              needs to build Debian packages, csmith programs
#
# System packages: clang-14, llvm-14-dev, libomp-14-dev (for -fopenmp),
# cmake, make, dpkg-dev (for `apt-get source` in the real-project benchmark),
# g++ (nvcc's host compiler: mirecc-nvcc runs NVIDIA's nvcc from the pip
# wheels of the `cuda` extra, CUDA 13, which supports GCC 12); pocl-opencl-icd,
# ocl-icd-opencl-dev and opencl-headers (OpenCL on the CPU, for mire run --opencl,
# its benchmark's host programs and tests);
# with --test also libtinfo5 (ProGraML's llvm2graph-10, the graph reference),
# clang-19 and llvm-19-dev, clang-22 and llvm-22-dev, ccache.
# The native graph builder (passes/graph) is built into build/native.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

mode="${1:-}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=()
packages=(clang-14 llvm-14-dev libomp-14-dev cmake make dpkg-dev g++ pocl-opencl-icd
          ocl-icd-opencl-dev opencl-headers)
# clang-19 and llvm-19-dev: the 14-vs-19 statement-overlap test and the
# LLVM 19 graph builder (not libomp-19-dev: it conflicts with libomp-14-dev);
# linux-perf: mire tune samples the run with it (its test skips without it).
# ccache: the launcher (prefix) test; clang-22 and llvm-22-dev: the pass plugin's
# tests on the newest LLVM Debian 12 ships; redis-server, sccache and distcc:
# the team store's and the composition tests (a real server, real tools).
[ "$mode" = "--test" ] && packages+=(libtinfo5 clang-19 llvm-19-dev linux-perf ccache clang-22
                                     llvm-22-dev redis-server sccache distcc)
# autoconf-archive: python3.11's configure.ac (deb12u8) uses its AX_ macros;
# bison and flex: ngspice generates its parsers.
[ "$mode" = "--corpus" ] && packages+=(csmith libcsmith-dev libtool-bin autoconf automake
    libtool pkg-config tcl zlib1g-dev libbz2-dev liblzma-dev libpcre2-dev libssl-dev
    libreadline-dev libzstd-dev liblz4-dev libpng-dev libjpeg-dev autoconf-archive bison flex)
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if [ "$mode" = "--test" ]; then
    # torch (training code and its tests only; the driver never imports it)
    # first: anything that depends on torch installed before it would pull
    # the CUDA wheels; 2.13.0 is a local CPU wheel on these machines.
    .venv/bin/pip install -q torch==2.13.0
    # compat mode: a plain path entry, not an import hook (which costs ~10 ms
    # of start-up on every compile)
    .venv/bin/pip install -q -e ".[test,train,bench,cuda]" --config-settings editable_mode=compat
    # Bytecode now: environments with PYTHONDONTWRITEBYTECODE=1 would otherwise
    # recompile mirecc's modules on every compiler call (~9 ms each).
    .venv/bin/python -m compileall -q mirecc
    # ProGraML 0.3.2 only as the reference in the graph parity tests: its
    # Python package does not import on 3.11, its bundled llvm2graph-10 runs.
    .venv/bin/pip install -q --no-deps programl==0.3.2
elif [ "$mode" = "--corpus" ]; then
    # a developer's mode too: editable (as --test), so that running it after
    # --test keeps the checkout importable instead of freezing a copy of it
    .venv/bin/pip install -q -e . --config-settings editable_mode=compat
    .venv/bin/python -m compileall -q mirecc
else
    .venv/bin/pip install -q ".[cuda,plot,store]"
fi

# zlib's Debian source, into .work/src: the main job's real library (mire bench)
# and tests/driver/test_projects.py (adds a deb-src entry to apt when running as
# root and none exists); both say so and go on without it.
.venv/bin/python benchmarks/real_projects.py --projects zlib --fetch-only >/dev/null \
    || echo "setup: could not fetch zlib's source; mire bench and its test go without it" >&2

# The compilers this installation drives: the clang setup installed with its
# OpenMP runtime (not a newer clang on PATH without one; MIRECC_CC wins).
mkdir -p .venv/etc/mirecc
printf '# written by scripts/setup.sh: the clang mirecc drives unless cc/MIRECC_CC say otherwise\ncc=/usr/bin/clang-14\ncxx=/usr/bin/clang++-14\n' \
    > .venv/etc/mirecc/compilers

# Native ProGraML-schema graph builder and the loop-hints pass plugin against
# LLVM 14 (mirecc-graph-14, mirecc-plugin-14.so).
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native --target mirecc-graph mirecc-graph-lib mirecc-plugin -j2 >/dev/null
if [ "$mode" = "--test" ]; then
    # and against LLVM 19, for IR from newer clangs and the clang 19 plugin tests
    cmake -S . -B build/llvm19 -DCMAKE_BUILD_TYPE=Release -DMIRECC_LLVM_VERSION=19 >/dev/null
    cmake --build build/llvm19 --target mirecc-graph mirecc-graph-lib mirecc-plugin -j2 >/dev/null
else
    # an installed (not editable) mirecc does not look in build/: it builds the
    # plugin for the clang it drives into its per-user cache, now rather than
    # in the first compile
    (cd / && "$repo/.venv/bin/python" -c "from mirecc.frontend.compiler import find_compiler; \
from mirecc.taskapi.config import load_config; from mirecc.plugin.build import clang_major, \
ensure_plugin; ensure_plugin(clang_major(find_compiler(load_config(), cxx=False)))") \
        || echo "setup: could not build the loop-hints plugin; mirecc builds it on first use" >&2
fi
# The compiled client (client/): installed as mirecc, mirecc++ and mirecc-nvcc,
# in front of the Python driver (moved to .venv/libexec/mirecc); built with
# the clang this installation drives (libc only)
client/build.sh .venv /usr/bin/clang-14
# The adaptive OpenMP runtime (runtime/adapt) into the per-user cache, where a
# link with adapt_openmp takes it (built on first use otherwise).
(cd / && "$repo/.venv/bin/python" -c "from mirecc.frontend.compiler import find_compiler; \
from mirecc.taskapi.config import load_config; from mirecc.runtime.build import ensure_runtime; \
ensure_runtime(find_compiler(load_config(), cxx=False))") \
    || echo "setup: could not build the adaptive OpenMP runtime; a link builds it on first use" >&2
# The OpenCL interposer (runtime/opencl), for mire run --opencl.
(cd / && "$repo/.venv/bin/python" -c "from mirecc.frontend.compiler import find_compiler; \
from mirecc.taskapi.config import load_config; from mirecc.runtime.build import ensure_interposer; \
ensure_interposer(find_compiler(load_config(), cxx=False))") \
    || echo "setup: could not build the OpenCL interposer; mire run --opencl builds it" >&2
echo "setup: mirecc installed in $(pwd)/.venv (compiler: $(.venv/bin/mirecc --version | head -1))" >&2
