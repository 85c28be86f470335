"""GNU make's jobserver, as a client: extra job slots for work one compile
can do in parallel (code size's candidates), never more than make allows.

``make -jN`` hands its children a jobserver in ``MAKEFLAGS``:
``--jobserver-auth=R,W`` (two inherited file descriptors of a pipe; also
``--jobserver-fds=R,W`` before GNU make 4.2; before 4.4 only a recursive
recipe, ``+`` or ``$(MAKE)``, inherits them) or ``--jobserver-auth=fifo:PATH``
(a named pipe, GNU make 4.4 and later, which every recipe can open).  The pipe holds one byte per free
job slot; a child already owns one slot (the one it runs in) and may read
more bytes to run more at once, writing each byte back when that work is
done.  Reads here never block: slots that are not free now are not waited
for.  Every byte read is written back, also when the work fails
(``with slots(...)``).  Without a jobserver (no make, ``make -j1``, a
recipe make did not pass it to), the caller's own setting decides.
"""
from __future__ import annotations

import os
import stat

# (no re: under make every compile imports this module, and re with the
# enum module it imports costs ~17 ms)


def parse(makeflags: str):
    """``("fifo", path)``, ``("fds", r, w)`` or None: the last jobserver
    named in ``makeflags`` (make puts the one in effect last)."""
    found = None
    for word in (makeflags or "").split():
        for prefix in ("--jobserver-auth=", "--jobserver-fds="):
            if not word.startswith(prefix):
                continue
            value = word[len(prefix):]
            if value.startswith("fifo:"):
                found = ("fifo", value[5:]) if value[5:] else found
            else:
                r, comma, w = value.partition(",")
                if comma and r.isdigit() and w.isdigit():
                    found = ("fds", int(r), int(w))
    return found


def _parallel(makeflags: str) -> bool:
    """Does ``makeflags`` run several jobs at once (``-jN``, N > 1, or
    ``-j``)?  Variables after ``--`` are not options."""
    for word in makeflags.split(" -- ")[0].split():
        if word[:1] == "-" and word[1:2] != "-" and "j" in word:
            jobs = word[word.index("j") + 1:]
            if jobs != "1" and (jobs == "" or jobs.isdigit()):
                return True
    return False


class Jobserver:
    """The jobserver of ``makeflags`` (default: ``$MAKEFLAGS``), or an
    unusable one (``ok`` False) when there is none or it cannot be reached."""

    def __init__(self, makeflags: str | None = None):
        self.ok, self._r, self._w, self._opened, self._held = False, None, None, [], b""
        spec = parse(os.environ.get("MAKEFLAGS", "") if makeflags is None else makeflags)
        if spec is None:
            return
        try:
            if spec[0] == "fifo":
                fd = os.open(spec[1], os.O_RDWR | os.O_NONBLOCK)
                self._opened.append(fd)
                self._r = self._w = fd
            else:
                _, r, w = spec
                # GNU make before 4.4 passes the pipe to recursive (+) recipes
                # only: elsewhere these numbers may be any file of this
                # process, so both must be the two ends of one pipe
                sr, sw = os.fstat(r), os.fstat(w)
                if not (stat.S_ISFIFO(sr.st_mode) and (sr.st_dev, sr.st_ino)
                        == (sw.st_dev, sw.st_ino) and r != w):
                    return
                self._r, self._w = r, w
            self.ok = True
        except OSError:
            self.close()

    def acquire(self, wanted: int) -> int:
        """Take up to ``wanted`` free slots without waiting; how many."""
        if not self.ok or wanted <= 0:
            return 0
        blocking = os.get_blocking(self._r)
        try:
            os.set_blocking(self._r, False)
            try:
                got = os.read(self._r, wanted)
            except (BlockingIOError, InterruptedError):
                got = b""
            finally:
                os.set_blocking(self._r, blocking)
        except OSError:
            got = b""
        self._held += got
        return len(got)

    def release(self) -> None:
        """Give back every slot taken (the same bytes: make may care)."""
        while self._held:
            try:
                n = os.write(self._w, self._held)
            except InterruptedError:
                continue
            except OSError:
                break                   # make is gone: nothing to give back to
            self._held = self._held[n:]

    def close(self) -> None:
        self.release()
        for fd in self._opened:
            try:
                os.close(fd)
            except OSError:
                pass
        self._opened, self.ok = [], False


class slots:
    """``with slots(wanted, default) as n:`` run ``n`` things at once: 1 plus
    the free jobserver slots taken (at most ``wanted - 1``), or ``default``
    (at most ``wanted``) without a jobserver; the slots go back on exit."""

    def __init__(self, wanted: int, default: int = 1, makeflags: str | None = None):
        self.wanted, self.default, self.makeflags = wanted, default, makeflags
        self.server = None

    def __enter__(self) -> int:
        self.server = Jobserver(self.makeflags)
        if not self.server.ok:
            return max(1, min(self.default, self.wanted))
        return 1 + self.server.acquire(self.wanted - 1)

    def __exit__(self, *exc_info) -> None:
        self.server.close()


class _Idle:
    """The core a make running one job at a time leaves idle: nothing to give back."""
    def close(self) -> None:
        pass


def spare_slot(makeflags: str | None = None):
    """A job slot free now beside the caller's own, for work that may be
    thrown away: a free jobserver slot (taken: ``close()`` gives it back),
    or, under a make that runs one job at a time (``MAKEFLAGS`` without
    ``-jN``, N > 1), the core it leaves idle; None when no slot is known to
    be free (a parallel make with none free or none reachable, and no make:
    ninja, a shell, a script)."""
    if makeflags is None:
        makeflags = os.environ.get("MAKEFLAGS")
    if makeflags is None or (os.cpu_count() or 1) < 2:
        return None
    server = Jobserver(makeflags)
    if server.ok:
        if server.acquire(1):
            return server
        server.close()
        return None
    if _parallel(makeflags):
        return None                  # parallel, no slot to take: its cores are busy
    return _Idle()
