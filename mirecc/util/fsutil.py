"""File writes that are safe under ``make -j``: never half-written, never lost
(:func:`atomic_write_bytes`, :class:`FileLock`, the one implementation of
each that mirecc's stores use)."""

from __future__ import annotations

import fcntl
import os

try:
    # CPython's own SHA-256: hashlib's loads OpenSSL first (~4 ms on each
    # compile that reads the cache); the digests are the same
    from _sha256 import sha256
except ImportError:  # another Python
    from hashlib import sha256


def file_identity(path: str) -> str:
    """``real path|size|mtime`` of a tool (a compiler, opt): a reinstalled
    one reads differently; the real path alone when it cannot be read."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}|{st.st_size}|{st.st_mtime_ns}"


def atomic_write_bytes(path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to ``path`` (a str or a Path) so readers see the old
    file or the whole new one.

    The bytes go to a unique temporary file in the same directory, are
    flushed to disk (``durable``: a file whose readers check its content
    need not wait for the disk, ~15 ms), then renamed over ``path`` (rename
    is atomic on POSIX).
    Two processes writing the same content-addressed entry both succeed.
    (os.open with O_EXCL rather than tempfile, whose imports cost ~10 ms of
    a compile that keeps an object.)
    """
    path = os.fspath(path)
    directory, name = os.path.split(path)
    os.makedirs(directory or ".", exist_ok=True)
    while True:
        tmp = os.path.join(directory, f".{name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        try:
            # 0o666 less the umask: a shared cache or corpus stays readable
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def file_sha256(path) -> str:
    """The SHA-256 of the file at ``path`` (hex); OSError when it cannot be read."""
    with open(path, "rb") as fh:
        return sha256(fh.read()).hexdigest()


class FileLock:
    """An exclusive lock on the file ``path`` (made when missing), held inside
    ``with``: one writer at a time across processes (``make -j``), released
    when the block ends or the process dies.  The one lock of mirecc's
    stores (:mod:`mirecc.store.local`) and builds (:func:`build_once`)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._fd = -1

    def __enter__(self) -> "FileLock":
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._fd)          # also releases the lock
        self._fd = -1


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def append_line_locked(path: Path, line: str, fsync: bool = False) -> None:
    """Append one line to ``path`` under an exclusive lock (many writers);
    ``fsync``: on disk before returning (results a rerun resumes from)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            if fsync:
                os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def replace_dir(target: Path, files: dict[str, bytes]) -> Path:
    """Replace ``target`` with a directory holding ``files``, never leaving a
    half-written one behind (a reader sees the old or the new one)."""
    import shutil  # lazy: building only; every compile imports fsutil
    import tempfile
    from pathlib import Path

    target.parent.mkdir(parents=True, exist_ok=True)

    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    tmp.chmod(0o777 & ~_umask())      # mkdtemp makes it 0700; a head is read by every user
    for name, data in files.items():     # a name may name a sub-folder: "labels/meta.json"
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}-old-{os.getpid()}")
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def build_once(target, fresh, steps, product: str, failed):
    """Build ``target`` (a Path) once however many processes ask at the same
    time (``make -j``): under a lock file beside it, unless ``fresh()`` after
    the wait (another process built it), run each command of ``steps(tmp)``
    in a temporary folder beside it, then move ``tmp/product`` onto
    ``target`` atomically.  A command that fails raises ``failed(cmd,
    message)`` (message: its first line naming an error, else its exit
    status); OSError for the folder, the lock or the move."""
    import subprocess  # lazy: building only; every compile imports fsutil
    import tempfile
    from pathlib import Path

    with FileLock(target.parent / f".{target.name}.lock"):
        if fresh():
            return target
        with tempfile.TemporaryDirectory(prefix=f".build-{target.name}-",
                                         dir=target.parent) as tmp:
            for cmd in steps(tmp):
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines()
                             if "error" in ln.lower()]
                    raise failed(cmd, lines[0] if lines else
                                 f"exit status {proc.returncode}")
            os.replace(Path(tmp) / product, target)
    return target
