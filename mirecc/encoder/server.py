"""Per-user embedding server: keeps the encoder loaded between compiles.

A build runs one short process per translation unit; loading onnxruntime
and the model in each costs more than embedding a small unit. ``mire serve``
holds one :class:`~mirecc.encoder.runtime.Encoder` and answers on a Unix
socket that only its user can reach; clients (``mire embed --server``, and
the driver's heads later) send one JSON line and read one back. The client
side imports only the standard library, starts the server when none
answers (as sccache does), and returns ``None`` when it cannot be reached
so that the caller embeds in-process instead.

Protocol (one request per connection): ``{"protocol": 1, "model": <model
dir>, "path": <absolute file>, "cwd": ..., "clang": ..., "flags": [...]}``
-> ``{"ok": true, "module": [...], "functions": {...}, "loops": {...},
"stats": {...}}`` or ``{"ok": false, "error": "..."}``. The server serves
one model directory; a request for another, or a model whose manifest
changed since the server started, is refused (the client falls back), and
the server exits after ``idle_timeout`` seconds without requests.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

PROTOCOL = 1
CONNECT_TIMEOUT = 0.5
#: how long a client waits for a server it started to come up
START_TIMEOUT = 20.0
#: a request's whole round trip (a big module can take a minute)
REQUEST_TIMEOUT = 600.0


def socket_path() -> Path:
    """``$XDG_RUNTIME_DIR/mirecc/embed.sock``, else ``/tmp/mirecc-<uid>/embed.sock``
    (the directory is made 0700: only this user can connect)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    d = Path(base) / "mirecc" if base else Path(f"/tmp/mirecc-{os.getuid()}")
    return d / "embed.sock"


def _model_dir(model_dir) -> str:
    from mirecc.encoder import SHIPPED_MODEL_DIR
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
        s.sendall(json.dumps(req).encode() + b"\n")
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


def start_server(model_dir: str, path: Path | None = None) -> bool:
    """Start a detached server and wait until it answers."""
    path = path or socket_path()
    cmd = [sys.executable, "-m", "mirecc.encoder.server", "--model", model_dir,
           "--socket", str(path)]
    try:
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:
        return False
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ping(path) is not None:
            return True
        time.sleep(0.05)
    return False


def ping(path: Path | None = None) -> dict | None:
    return request({"protocol": PROTOCOL, "ping": True}, path, timeout=5.0)


def embed(file: str, model_dir=None, clang: str | None = None, flags: list[str] | None = None,
          start: bool = True, path: Path | None = None) -> dict:
    """Embeddings of ``file`` from the server (started if needed). Returns
    the server's reply: ``{"ok": True, ...}``, ``{"ok": False, "error": ...}``
    for a bad input, or ``{"ok": False, "unavailable": reason}`` when no
    server could be used (embed in-process then)."""
    model = _model_dir(model_dir)
    req = {"protocol": PROTOCOL, "model": model, "path": os.path.abspath(file),
           "cwd": os.getcwd(), "clang": clang, "flags": flags or []}
    reply = request(req, path)
    if reply is None and start and start_server(model, path):
        reply = request(req, path)
    if reply is None:
        return {"ok": False, "unavailable": "no embedding server answers on "
                f"{path or socket_path()}"}
    if reply.get("refused"):
        return {"ok": False, "unavailable": reply["refused"]}
    return reply


# ------------------------------------------------------------------ server

def _manifest_stamp(model_dir: str) -> tuple:
    st = os.stat(Path(model_dir) / "manifest.json")
    return st.st_mtime_ns, st.st_size, st.st_ino


def serve(model_dir=None, path: Path | None = None, idle_timeout: float = 900.0) -> int:
    """Serve until idle for ``idle_timeout`` seconds. Exit status 0; 1 if
    another server already answers on the socket."""
    import fcntl
    import signal
    from mirecc.encoder.runtime import EmbedError, Encoder
    path = path or socket_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    # one server per socket: the lock is held for the server's life
    lock = open(path.with_name(path.name + ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"mire serve: a server already runs for {path}", file=sys.stderr)
        return 1
    model = _model_dir(model_dir)
    encoder = Encoder(model)
    stamp = _manifest_stamp(model)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # clean up on mire serve --stop
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp))
    os.replace(tmp, path)          # atomic: replaces a stale socket of a killed server
    inode = os.stat(path).st_ino
    sock.listen(16)
    sock.settimeout(1.0)
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_timeout:
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                continue
            last = time.monotonic()
            with conn:
                conn.settimeout(30.0)
                try:
                    req = json.loads(conn.makefile("rb").readline(1 << 20))
                except (OSError, ValueError):
                    continue
                reply = _answer(req, encoder, model, stamp, EmbedError)
                try:
                    conn.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    pass
                if reply.get("refused", "").startswith("the model changed"):
                    break
    finally:
        sock.close()
        try:
            if os.stat(path).st_ino == inode:
                path.unlink()
        except OSError:
            pass
        lock.close()
    return 0


def _answer(req: dict, encoder, model: str, stamp: tuple, EmbedError) -> dict:
    if req.get("protocol") != PROTOCOL:
        return {"ok": False, "refused": f"protocol {req.get('protocol')} (server speaks {PROTOCOL})"}
    if req.get("ping"):
        return {"ok": True, "model": model, "pid": os.getpid()}
    if req.get("model") != model:
        return {"ok": False, "refused": f"the server holds {model}, not {req.get('model')}"}
    try:
        if _manifest_stamp(model) != stamp:
            return {"ok": False, "refused": "the model changed since the server started"}
    except OSError:
        return {"ok": False, "refused": "the model changed since the server started"}
    try:
        emb = encoder.embed_file(req["path"], clang=req.get("clang"), flags=req.get("flags") or [],
                                 cwd=req.get("cwd"))
    except EmbedError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:   # the server must outlive one bad request
        return {"ok": False, "error": f"{req.get('path')}: {type(exc).__name__}: {exc}"}
    return {"ok": True, **emb.to_json()}


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="mire serve", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p) -> None:
    p.add_argument("--model", help="model directory (default: the shipped encoder)")
    p.add_argument("--socket", type=Path, help=f"socket path (default: {socket_path()})")
    p.add_argument("--idle-timeout", type=float, default=900.0,
                   help="exit after this many seconds without requests (default: %(default)s)")
    p.add_argument("--stop", action="store_true", help="ask the running server to exit")


def run(args) -> int:
    if args.stop:
        reply = ping(args.socket)
        if reply is None:
            print("mire serve: no server is running", file=sys.stderr)
            return 1
        os.kill(int(reply["pid"]), 15)
        return 0
    return serve(args.model, args.socket, args.idle_timeout)


if __name__ == "__main__":
    sys.exit(main())
