"""Per-user server: the whole decision pipeline, kept loaded between compiles.

A build runs one short process per translation unit; importing numpy and
onnxruntime and loading the encoder and the heads in each would cost more
than deciding for a small unit.  ``mire serve`` keeps them loaded (as
sccache's daemon keeps its state) and answers on a Unix socket that only its
user can reach.  For each TU it builds the one context (graph, embedding,
loop table), runs the installed heads and returns the result.

Clients (the driver, ``mire embed --server``) send one JSON line and read one
back.  The client side, this module's top half, imports only the standard
library; the driver starts the server when none answers and, when it cannot
be reached, runs the pipeline in its own process.

Requests (one per connection), all with ``"protocol": 2``:

- ``{"kind": "ping"}`` -> ``{"ok": true, "pid": ..., "protocol": 2}``;
- ``{"kind": "pipeline", "request": <TURequest>, "config": {...}, "explain":
  bool, "env": {...}, "version": <pipeline key>}`` -> ``{"ok": true, "result":
  <TUResult>}``, or ``{"ok": false,
  "error": "..."}`` for a head or model the pipeline cannot use;
- ``{"kind": "embed", "model": <dir>, "path": <file>, "cwd", "clang",
  "flags"}`` -> ``{"ok": true, "module": [...], "functions": {...},
  "loops": {...}, "stats": {...}}``.

A reply ``{"ok": false, "refused": "..."}`` means "not this server" (another
protocol, or code that changed since it started): the client falls back.
The server exits after ``idle_timeout`` seconds without requests, and when
mirecc's own code changed under it (an upgrade).
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from hashlib import sha256
from pathlib import Path

PROTOCOL = 2
CONNECT_TIMEOUT = 0.5
#: how long a client waits for a server it started to come up
START_TIMEOUT = 20.0
#: a request's whole round trip (a big module can take a minute)
REQUEST_TIMEOUT = 600.0
#: the client's environment variables a pipeline reads (which graph builder
#: and clang are found, where caches are): set in the server per request
CLIENT_ENVIRONMENT = ("PATH", "HOME", "XDG_CACHE_HOME", "MIRECC_CACHE_DIR",
                      "MIRECC_GRAPH_BUILDER")
#: resident memory the server may keep between requests (MB): above it, it
#: drops what it caches (pipelines, encoder, head sessions) and, if that is
#: not enough, exits after replying (the next compile starts a fresh one)
MAX_RSS_MB = 300
#: seconds without a request after which freed memory goes back to the system
TRIM_AFTER_IDLE = 5.0
#: settings that are paths: sent absolute
PATH_SETTINGS = ("model", "heads_dir", "plugin", "cache_dir", "record", "capture_dir")


def socket_name() -> str:
    """``server-<tag>.sock``, the tag naming this installation of mirecc: two
    installations of one user (a checkout and a CI clone, two virtual
    environments) each get their own server, never one of the other's code."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mirecc/
    return f"server-{sha256(here.encode()).hexdigest()[:12]}.sock"


def socket_path() -> Path:
    """``$XDG_RUNTIME_DIR/mirecc/<socket_name()>``, else
    ``/tmp/mirecc-<uid>/<socket_name()>`` (the directory is made 0700: only
    this user can connect)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    d = Path(base) / "mirecc" if base else Path(f"/tmp/mirecc-{os.getuid()}")
    return d / socket_name()


def _model_dir(model_dir) -> str:
    from mirecc.encoder import SHIPPED_MODEL_DIR  # lazy: embedding requests only
    return str(Path(model_dir).resolve() if model_dir else SHIPPED_MODEL_DIR)


# ------------------------------------------------------------------ client

def request(req: dict, path: Path | None = None, timeout: float = REQUEST_TIMEOUT) -> dict | None:
    """One round trip; ``None`` when no server answers on the socket."""
    path = path or socket_path()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(CONNECT_TIMEOUT)
        s.connect(str(path))
        s.settimeout(timeout)
        s.sendall(json.dumps({"protocol": PROTOCOL, **req}).encode() + b"\n")
        chunks = []
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        s.close()
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return None


def start_server(path: Path | None = None) -> bool:
    """Start a detached server and wait until it answers."""
    path = path or socket_path()
    cmd = [sys.executable, "-m", "mirecc.tu.server", "--socket", str(path)]
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # a daemon: it must not hold the build's directory or write into the
        # TMPDIR of the compile that happened to start it
        env = dict(os.environ, TMPDIR=str(path.parent))
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                         cwd="/", env=env)
    except OSError:
        return False
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ping(path) is not None:
            return True
        time.sleep(0.05)
    return False


def ping(path: Path | None = None) -> dict | None:
    reply = request({"kind": "ping"}, path, timeout=5.0)
    return reply if reply and reply.get("ok") else None


def _round_trip(req: dict, start: bool, path: Path | None, timeout: float) -> dict:
    reply = request(req, path, timeout)
    if reply is None and start and start_server(path):
        reply = request(req, path, timeout)
    if reply is None:
        return {"ok": False, "unavailable": "no server answers on "
                f"{path or socket_path()}"}
    if reply.get("refused"):
        return {"ok": False, "unavailable": reply["refused"]}
    return reply


def run_pipeline(tu_request, config, explain: bool, version: str, start: bool = True,
                 path: Path | None = None, timeout: float = REQUEST_TIMEOUT) -> dict:
    """The pipeline's result for one TU from the server (started if needed):
    ``{"ok": True, "result": ...}``, ``{"ok": False, "error": ...}`` for a
    head or model the pipeline cannot use, or ``{"ok": False,
    "unavailable": reason}`` (run it in process then)."""
    settings = {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in vars(config).items() if k != "source"}
    for key in PATH_SETTINGS:     # the server runs in another directory
        if settings.get(key):
            settings[key] = os.path.abspath(os.path.expanduser(settings[key]))
    env = {k: os.environ[k] for k in CLIENT_ENVIRONMENT if k in os.environ}
    req = {"kind": "pipeline", "request": tu_request.to_dict(), "config": settings,
           "explain": explain, "env": env, "version": version}
    return _round_trip(req, start, path, timeout)


def embed(file: str, model_dir=None, clang: str | None = None, flags: list[str] | None = None,
          start: bool = True, path: Path | None = None) -> dict:
    """Embeddings of ``file`` from the server (started if needed). Returns
    the server's reply: ``{"ok": True, ...}``, ``{"ok": False, "error": ...}``
    for a bad input, or ``{"ok": False, "unavailable": reason}`` when no
    server could be used (embed in-process then)."""
    req = {"kind": "embed", "model": _model_dir(model_dir), "path": os.path.abspath(file),
           "cwd": os.getcwd(), "clang": clang, "flags": flags or []}
    return _round_trip(req, start, path, REQUEST_TIMEOUT)


# ------------------------------------------------------------------ server

def _code_stamp() -> str:
    """mirecc's code as the server loaded it: an upgrade makes it exit."""
    from mirecc.tu.cache import code_stamp  # lazy: server side; the client is stdlib only
    return code_stamp()


def serve(path: Path | None = None, idle_timeout: float = 900.0) -> int:
    """Serve until idle for ``idle_timeout`` seconds. Exit status 0; 1 if
    another server already answers on the socket."""
    path = path or socket_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    # one server per socket: the lock is held for the server's life
    lock = open(path.with_name(path.name + ".lock"), "a+")   # its pid: truncated once held
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"mire serve: a server already runs for {path}", file=sys.stderr)
        return 1
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    # what every request will need, loaded once
    import tempfile

    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401
    stamp = _code_stamp()
    # temporary files in a directory of the server's own: the TMPDIR of the
    # client that started it may be gone long before the server is
    private_tmp = path.parent / f"tmp-{os.getpid()}"
    private_tmp.mkdir(mode=0o700, exist_ok=True)
    tempfile.tempdir = str(private_tmp)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # clean up on mire serve --stop
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp))
    os.replace(tmp, path)          # atomic: replaces a stale socket of a killed server
    inode = os.stat(path).st_ino
    sock.listen(16)
    sock.settimeout(1.0)
    last = time.monotonic()
    trimmed = True
    try:
        while time.monotonic() - last < idle_timeout:
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                if not trimmed and time.monotonic() - last > TRIM_AFTER_IDLE:
                    release_memory()
                    trimmed = True
                continue
            last, trimmed = time.monotonic(), False
            with conn:
                conn.settimeout(30.0)
                try:
                    req = json.loads(conn.makefile("rb").readline(1 << 24))
                except (OSError, ValueError):
                    continue
                reply = _answer(req, stamp)
                try:
                    conn.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    pass
                if reply.get("refused", "").startswith("mirecc changed"):
                    break
                if isinstance(req, dict) and req.get("kind") != "ping" and not bound_memory():
                    break   # over the cap even with nothing cached: a fresh one next time
    finally:
        sock.close()
        try:
            if os.stat(path).st_ino == inode:
                path.unlink()
        except OSError:
            pass
        import shutil  # lazy: server side; the client is stdlib only
        shutil.rmtree(private_tmp, ignore_errors=True)
        lock.close()
    return 0


def rss_mb() -> float:
    """This process's resident memory in MB (Linux: /proc/self/statm)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def release_memory() -> None:
    """Collect garbage and give freed heap pages back to the system
    (glibc's malloc_trim: numpy and onnxruntime free into malloc's arenas,
    which otherwise keep the pages)."""
    # lazy: server side (ctypes); the client is stdlib only
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def drop_caches() -> None:
    """Forget the loaded pipelines, encoders and head sessions (they load again
    on the next request that needs them)."""
    from mirecc.util.caches import drop_all  # lazy: server side; the client is stdlib only

    drop_all()


def bound_memory(cap_mb: float = MAX_RSS_MB) -> bool:
    """After a request: under ``cap_mb``, or brought under it by dropping the
    caches; False when even that is not enough (the server should exit)."""
    if rss_mb() <= cap_mb:
        return True
    release_memory()
    if rss_mb() <= cap_mb:
        return True
    drop_caches()
    release_memory()
    return rss_mb() <= cap_mb


def _answer(req: dict, stamp: str) -> dict:
    if not isinstance(req, dict) or req.get("protocol") != PROTOCOL:
        protocol = req.get("protocol") if isinstance(req, dict) else None
        return {"ok": False, "refused": f"protocol {protocol} (server speaks {PROTOCOL})"}
    kind = req.get("kind")
    if kind == "ping":
        return {"ok": True, "pid": os.getpid(), "protocol": PROTOCOL}
    if _code_stamp() != stamp:
        return {"ok": False, "refused": "mirecc changed since the server started"}
    try:
        if kind == "pipeline":
            return _pipeline(req)
        if kind == "embed":
            return _embed(req)
    except Exception as exc:   # the server must outlive one bad request
        return {"ok": False, "error": f"internal error in the server: "
                                      f"{type(exc).__name__}: {exc}"}
    return {"ok": False, "refused": f"unknown request kind {kind!r}"}


def _pipeline(req: dict) -> dict:
    # lazy: server side: the pipeline, its heads and ONNX Runtime; the client is stdlib only
    from mirecc.taskapi.config import Config
    from mirecc.tu.pipeline import run_in_process
    from mirecc.util.modelfiles import ModelError
    from mirecc.taskapi.api import HeadError
    from mirecc.taskapi.records import TURequest

    settings = dict(req["config"])
    if isinstance(settings.get("prefix"), list):
        settings["prefix"] = tuple(settings["prefix"])
    config = Config(**settings)
    request = TURequest.from_dict(req["request"])
    saved = {k: os.environ.get(k) for k in CLIENT_ENVIRONMENT}
    try:
        for k in CLIENT_ENVIRONMENT:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in (req.get("env") or {}).items()
                           if k in CLIENT_ENVIRONMENT and isinstance(v, str)})
        result = run_in_process(request, config, bool(req.get("explain")),
                                str(req["version"]), where="server")
    except (ModelError, HeadError) as exc:
        return {"ok": False, "error": str(exc)}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"ok": True, "result": result.to_dict()}


def _embed(req: dict) -> dict:
    # lazy: server side: the encoder and ONNX Runtime
    from mirecc.taskapi.context import loaded_encoder
    from mirecc.encoder.runtime import EmbedError

    try:
        emb = loaded_encoder(_model_dir(req.get("model"))).embed_file(
            req["path"], clang=req.get("clang"), flags=req.get("flags") or [],
            cwd=req.get("cwd"))
    except EmbedError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, **emb.to_json()}


def main(argv: list[str] | None = None) -> int:
    import argparse  # lazy: only python -m mirecc.tu.server parses arguments here
    p = argparse.ArgumentParser(prog="mire serve", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p) -> None:
    p.add_argument("--socket", type=Path, help=f"socket path (default: {socket_path()})")
    p.add_argument("--idle-timeout", type=float, default=900.0,
                   help="exit after this many seconds without requests (default: %(default)s)")
    p.add_argument("--stop", action="store_true",
                   help="ask the running servers (the pipeline's and the compile server) to exit")


def run(args) -> int:
    if args.stop:
        reply = ping(args.socket)
        stopped = _stop_compile_server(args.socket or socket_path())
        if reply is None and not stopped:
            print("mire serve: no server is running", file=sys.stderr)
            return 1
        if reply is not None:
            os.kill(int(reply["pid"]), 15)
        return 0
    return serve(args.socket, args.idle_timeout)


def _stop_compile_server(path: Path) -> bool:
    """Stop the compile server beside the pipeline server's socket (the
    compiled client's, :mod:`mirecc.driver.serve`: ``front-<tag>.sock``),
    named by its lock file; True when one was running.  A failed start's
    mark (the client's back-off) goes too: the next call tries again."""
    sock = path.with_name("front-" + path.name.removeprefix("server-"))
    lock = sock.with_name(sock.name + ".lock")
    try:
        sock.with_name(sock.name + ".failed").unlink()
    except OSError:
        pass
    try:
        pid = int(lock.read_text().split()[0])
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"mirecc.driver.serve" not in fh.read():
                return False
        os.kill(pid, 15)
        return True
    except (OSError, ValueError, IndexError):
        return False


if __name__ == "__main__":
    sys.exit(main())
