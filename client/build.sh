#!/usr/bin/env bash
# Build the compiled client into an environment and install it as mirecc,
# mirecc++ and mirecc-nvcc (the Python driver scripts pip put there move to
# <env>/libexec/mirecc, where the client runs them).  Run by scripts/setup.sh:
#
#   client/build.sh <environment, e.g. .venv> [C compiler, default cc]
#
# The flag tables come from the driver's own (python -m mirecc.driver.rules
# --header); the socket tag, the version and the protocol from the installed
# mirecc.  libc only: any C compiler builds it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
env="$(cd "$1" && pwd)"
cc="${2:-cc}"
python="$env/bin/python"
drivers="$env/libexec/mirecc"
mkdir -p "$drivers"
for name in mirecc mirecc++ mirecc-nvcc; do
    # a script pip (re)installed: the Python driver, moved beside the client
    if [ -f "$env/bin/$name" ] && [ "$(head -c 2 "$env/bin/$name")" = "#!" ]; then
        mv -f "$env/bin/$name" "$drivers/$name"
    fi
    [ -f "$drivers/$name" ] || { echo "client/build.sh: no Python driver $drivers/$name" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd / && "$python" -m mirecc.driver.rules --header) > "$work/tables.h"
read -r tag version protocol < <(cd / && "$python" -c "
from mirecc import __version__
from mirecc.driver.rules import PROTOCOL
from mirecc.tu.server import socket_name
print(socket_name()[len('server-'):-len('.sock')], __version__, PROTOCOL)")
flags=(-O2 -Wall -Wextra -std=c11 -I "$work"
       -DMIRECC_PYTHON="\"$python\"" -DMIRECC_DRIVERS="\"$drivers\""
       -DMIRECC_TAG="\"$tag\"" -DMIRECC_VERSION="\"$version\"" -DMIRECC_PROTOCOL="$protocol")
# static where the C library's archive is there: no dynamic loader on every
# compile (0.2 ms a call here); else as any program
"$cc" "${flags[@]}" -static "$here/mirecc_client.c" -o "$work/mirecc" 2>/dev/null \
    || "$cc" "${flags[@]}" "$here/mirecc_client.c" -o "$work/mirecc"
install -m 0755 "$work/mirecc" "$env/bin/mirecc.new"
mv -f "$env/bin/mirecc.new" "$env/bin/mirecc"
ln -f "$env/bin/mirecc" "$env/bin/mirecc++.new" && mv -f "$env/bin/mirecc++.new" "$env/bin/mirecc++"
ln -f "$env/bin/mirecc" "$env/bin/mirecc-nvcc.new" && mv -f "$env/bin/mirecc-nvcc.new" "$env/bin/mirecc-nvcc"
