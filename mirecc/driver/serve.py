"""The compile server: the Python driver kept loaded, one fork per call.

The compiled client (``client/mirecc_client.c``) runs the compiler itself
for a call nothing reads (:mod:`mirecc.driver.rules`); every other call it
hands here, over a Unix socket in the user's own 0700 directory
(``$XDG_RUNTIME_DIR/mirecc`` or ``/tmp/mirecc-<uid>``, as the pipeline
server's): the command, the working directory, the umask, the whole
environment, and, passed as file descriptors, its standard input, output
and error and make's jobserver pipes.  The server checks the peer's
credentials (its own user only), forks, and the child becomes the call: the
descriptors in place, the directory, umask and environment the client's, in
a process group of its own (the client forwards Ctrl-C and make's signals
to it); it runs :func:`mirecc.driver.clang.main` (or ``mirecc-nvcc``'s),
whose compiler runs are children of its own instead of replacing it, and
answers the exit status.  The client's output streams and ``-MD`` files are
the compiler's, written by the compiler; only the Python start-up and the
imports are gone (the ML path's pipeline stays in the pipeline server,
:mod:`mirecc.tu.server`, which keeps the encoder and heads warm).

Request: ``%08x`` (the length) then NUL-terminated strings: ``mirecc-client``,
the protocol (:data:`mirecc.driver.rules.PROTOCOL`), mirecc's version, the
mode (``c``, ``c++``, ``nvcc``), the working directory, the umask (octal),
``argv`` and its count and arguments, ``env`` and its count and
``NAME=value`` strings, ``fds`` and its count and the descriptor numbers
the passed descriptors take (``0``, ``1``, ``2``, then the jobserver's).
Answers, lines: ``pid N`` (the call's process group), then ``exit N`` or
``signal N``; ``retry WHY`` (the server's code is older than mirecc's:
it exits, the client starts a new one); ``refused WHY`` (another protocol or version: the client
falls back to the Python driver) or ``error WHY`` (a malformed, oversized
or foreign request: nothing runs).  A call killed mid-way answers nothing:
the client then compiles through the Python driver.

The server exits after ``idle_timeout`` seconds without calls, and when
mirecc's code changed under it (checked at most every
:data:`STAMP_EVERY` seconds).
"""
from __future__ import annotations

import fcntl
import gc
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from mirecc import __version__
from mirecc.driver.rules import PROTOCOL
from mirecc.util.faults import inject_debug_fault

#: the largest request read (command line and environment); larger: an error
MAX_REQUEST = 4 << 20
#: descriptors a request may pass (0, 1, 2 and a jobserver's two)
MAX_FDS = 8
#: seconds a starting server waits for one that is exiting
LOCK_WAIT = 3.0
#: seconds between two checks that mirecc's code is the one loaded
STAMP_EVERY = 2.0
#: modules a call may import, loaded before the first fork (the ML path's
#: driver side; the pipeline's numpy and ONNX Runtime live in the pipeline
#: server)
PRELOAD = ("json", "subprocess", "shutil", "tempfile", "pathlib", "hashlib", "yaml",
           "mirecc.driver.clang", "mirecc.driver.nvcc", "mirecc.driver.rules",
           "mirecc.tu.compile", "mirecc.tu.mlpath", "mirecc.tu.cache", "mirecc.tu.direct",
           "mirecc.tu.objcache", "mirecc.tu.travel", "mirecc.tu.explain", "mirecc.tu.server",
           "mirecc.tu.pipeline", "mirecc.taskapi.records", "mirecc.store.team",
           "mirecc.util.jobserver", "mirecc.frontend.compilers")


def socket_path() -> Path:
    """Beside the pipeline server's socket: ``front-<tag>.sock``."""
    # lazy: the pipeline server's client half (standard library); one directory, one tag
    from mirecc.tu.server import socket_path as pipeline_socket

    path = pipeline_socket()
    return path.with_name("front-" + path.name.removeprefix("server-"))


def _preload() -> None:
    import importlib  # lazy: the server's start only

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that cannot load is loaded by its call
            pass


def serve(path: Path | None = None, idle_timeout: float = 900.0) -> int:
    """Serve until idle for ``idle_timeout`` seconds: 0; 1 when another
    server answers on the socket."""
    from mirecc.tu.cache import code_stamp  # lazy: the server, not a call's client half

    path = path or socket_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path.parent)
    if st.st_uid != os.getuid():
        print(f"mire serve: {path.parent} belongs to another user", file=sys.stderr)
        return 1
    os.chmod(path.parent, 0o700)
    lock = open(path.with_name(path.name + ".lock"), "a+")   # its pid: truncated once held
    deadline = time.monotonic() + LOCK_WAIT
    while True:     # a server that is exiting (mirecc changed) holds it a moment
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                lock.close()
                return 1
            time.sleep(0.02)
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")     # who serves (mire serve --stop, the tests)
    lock.flush()
    _preload()
    stamp, checked = code_stamp(), time.monotonic()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    sock.bind(str(tmp))
    os.replace(tmp, path)
    inode = os.stat(path).st_ino
    sock.listen(128)
    sock.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)     # children reaped by the kernel
    # what is loaded stays out of the collector's way: a child's collection
    # would otherwise touch (and copy) every page of the parent's objects
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_timeout:
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                if not path.exists() or os.stat(path).st_ino != inode:
                    break       # the socket was removed or replaced: another's turn
                continue
            except InterruptedError:
                continue
            last = time.monotonic()
            if last - checked > STAMP_EVERY:
                checked = last
                if code_stamp() != stamp:
                    _unlink_own(path, inode)    # before the answer: the retry starts anew
                    _answer(conn, "retry mirecc changed since the server started")
                    conn.close()
                    break
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))[1]
            if uid != os.getuid():
                _answer(conn, f"error this server runs calls of uid {os.getuid()} only")
                conn.close()
                continue
            try:
                pid = os.fork()
            except OSError:
                _answer(conn, "refused the server cannot fork")
                conn.close()
                continue
            if pid == 0:
                code = 70
                try:
                    sock.close()
                    lock.close()
                    code = _child(conn)
                finally:
                    os._exit(code)
            conn.close()
    finally:
        sock.close()
        _unlink_own(path, inode)
        lock.close()
    return 0


def _unlink_own(path: Path, inode: int) -> None:
    """Remove the socket when it is still this server's."""
    try:
        if os.stat(path).st_ino == inode:
            path.unlink()
    except OSError:
        pass


def _answer(conn, line: str) -> None:
    try:
        conn.sendall(line.encode("utf-8", "surrogateescape") + b"\n")
    except OSError:
        pass


class BadRequest(Exception):
    pass


def parse_request(data: bytes) -> dict:
    """The request's fields; raises :class:`BadRequest` naming the problem."""
    parts = data.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    else:
        raise BadRequest("a request ends with a NUL")
    it = iter(parts)

    def take() -> str:
        try:
            return next(it).decode("utf-8", "surrogateescape")
        except StopIteration:
            raise BadRequest("the request ends early") from None

    def count() -> int:
        text = take()
        if not text.isdigit() or int(text) > MAX_REQUEST:
            raise BadRequest(f"bad count {text[:20]!r}")
        return int(text)

    if take() != "mirecc-client":
        raise BadRequest("not a mirecc client's request")
    req = {"protocol": take(), "version": take(), "mode": take(), "cwd": take(),
           "umask": take()}
    for section in ("argv", "env", "fds"):
        if take() != section:
            raise BadRequest(f"no {section} section")
        req[section] = [take() for _ in range(count())]
    if next(it, None) is not None:
        raise BadRequest("trailing data")
    if req["mode"] not in ("c", "c++", "nvcc"):
        raise BadRequest(f"unknown mode {req['mode'][:20]!r}")
    try:
        req["umask"] = int(req["umask"], 8)
        req["fds"] = [int(f) for f in req["fds"]]
    except ValueError:
        raise BadRequest("bad umask or descriptor") from None
    if req["fds"][:3] != [0, 1, 2] or len(set(req["fds"])) != len(req["fds"]) \
            or any(f < 0 or f > 1023 for f in req["fds"]):
        raise BadRequest("the descriptors must be 0, 1, 2 and then distinct others")
    if not all("=" in e for e in req["env"]):
        raise BadRequest("an environment entry without '='")
    return req


def _receive(conn) -> tuple[bytes, list[int]]:
    """The request's bytes and the descriptors passed with them."""
    conn.settimeout(10.0)
    head, fds = b"", []
    while len(head) < 8:
        chunk, got, _, _ = socket.recv_fds(conn, 8 - len(head), MAX_FDS)
        if not chunk:
            raise BadRequest("the client closed the connection")
        head += chunk
        fds += got
    try:
        size = int(head, 16)
    except ValueError:
        raise BadRequest("no length") from None
    if size > MAX_REQUEST:
        raise BadRequest(f"request of {size} bytes (at most {MAX_REQUEST})")
    body = bytearray()
    while len(body) < size:
        chunk, got, _, _ = socket.recv_fds(conn, min(size - len(body), 1 << 20), MAX_FDS)
        if not chunk:
            raise BadRequest("the request ends early")
        body += chunk
        fds += got
    return bytes(body), fds


def _child(conn) -> int:
    """One call, in the forked child: its exit status for the server (the
    client gets the call's own)."""
    gc.disable()        # a short life: nothing to collect that exit does not
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                signal.SIGPIPE, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    fds: list[int] = []
    try:
        data, fds = _receive(conn)
        req = parse_request(data)
        if len(fds) != len(req["fds"]):
            raise BadRequest(f"{len(fds)} descriptors passed, {len(req['fds'])} named")
    except (BadRequest, OSError, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        _answer(conn, f"error {exc}")
        return 2
    if req["protocol"] != str(PROTOCOL) or req["version"] != __version__:
        _answer(conn, f"refused the server is mirecc {__version__} protocol {PROTOCOL}, the "
                      f"client {req['version']} protocol {req['protocol']}")
        return 2
    os.setpgid(0, 0)
    # every descriptor out of the way, then each to its number
    conn_fd = fcntl.fcntl(conn.detach(), fcntl.F_DUPFD_CLOEXEC, 256)
    high = []
    for fd in fds:
        high.append(fcntl.fcntl(fd, fcntl.F_DUPFD, 256))
        os.close(fd)
    for fd, target in zip(high, req["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    out = socket.socket(fileno=conn_fd)
    try:
        os.chdir(req["cwd"])
    except OSError as exc:
        _answer(out, f"error cannot enter {req['cwd']}: {exc.strerror}")
        return 2
    os.umask(req["umask"])
    os.environ.clear()
    os.environ.update(e.split("=", 1) for e in req["env"])
    _answer(out, f"pid {os.getpid()}")
    inject_debug_fault("serve")
    code = run_call(req["mode"], req["argv"])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    _answer(out, f"signal {-code}" if code < 0 else f"exit {code}")
    return 0


def run_call(mode: str, argv: list[str]) -> int:
    """The Python driver on ``argv`` in this process, the compiler run as
    its child (not exec'd): the exit status, or minus the signal that
    killed the compiler."""
    from mirecc.frontend import compiler  # lazy: loaded by _preload; named where it is set

    compiler.EXEC_REPLACES = False
    sys.argv = [{"c": "mirecc", "c++": "mirecc++", "nvcc": "mirecc-nvcc"}[mode], *argv]
    try:
        if mode == "nvcc":
            from mirecc.driver.nvcc import main  # lazy: preloaded; one driver per call
            code = main(argv)
        else:
            from mirecc.driver.clang import main  # lazy: as above
            code = main(argv, cxx=mode == "c++")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code


def main(argv: list[str] | None = None) -> int:
    import argparse  # lazy: the command only

    p = argparse.ArgumentParser(prog="python -m mirecc.driver.serve",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", type=Path, help="socket path (default: %(default)s)",
                   default=None)
    p.add_argument("--idle-timeout", type=float, default=900.0)
    args = p.parse_args(argv)
    inject_debug_fault("serve-start")
    return serve(args.socket, args.idle_timeout)


if __name__ == "__main__":
    sys.exit(main())
