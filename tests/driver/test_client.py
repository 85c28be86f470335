"""The compiled client (client/mirecc_client.c) in front of the Python
driver: the calls it runs alone, the calls it hands to the compile server,
and every way that can fail giving the compile the user asked for.

Each test gets its own runtime directory (its own server, its own rules)
and cache; servers it started are stopped at its end.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CLIENT = BIN / "mirecc"
CLIENTXX = BIN / "mirecc++"
PYTHON_DRIVER = BIN.parent / "libexec" / "mirecc" / "mirecc"
CLANG = "/usr/bin/clang-14"

pytestmark = pytest.mark.skipif(
    not (CLIENT.is_file() and CLIENT.read_bytes()[:4] == b"\x7fELF" and os.access(CLANG, os.X_OK)),
    reason="needs the compiled client (scripts/setup.sh builds it) and clang-14")

SOURCE = "int square(int x) { return x * x; }\nint main(void) { return square(3) - 9; }\n"


def _servers(run: Path, kind: str = "") -> list[int]:
    """The pids of the servers (``front``: compile, ``server``: pipeline)
    under the runtime directory ``run``, from their lock files."""
    pids = []
    for lock in (run / "mirecc").glob(f"{kind}*.lock"):
        try:
            pids.append(int(lock.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:   # a zombie of this test's own start is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture
def home(tmp_path):
    """(work directory, environment): a private runtime directory, cache
    and no heads but the shipped ones; the servers stopped afterwards."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.c").write_text(SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")}
    env.update(XDG_RUNTIME_DIR=str(run), XDG_CACHE_HOME=str(tmp_path / "cache"),
               MIRECC_CC=CLANG, MIRECC_CXX="/usr/bin/clang++-14", LC_ALL="C",
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    yield work, env
    for pid in _servers(run):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


def call(cmd, work, env, **kw):
    return subprocess.run([str(c) for c in cmd], cwd=work, env=env, capture_output=True,
                          text=True, timeout=kw.pop("timeout", 120), **kw)


def verdict(args, work, env) -> str:
    return call([CLIENT, *args], work, dict(env, MIRECC_CLIENT_CLASSIFY="1"), ).stdout.strip()


def warm_rules(work, env, args=("-O2", "-c", "a.c", "-o", "warm.o")):
    """The first call of these settings writes their rules (through the
    Python driver); the second is decided by the client."""
    first = call([CLIENT, *args], work, env)
    assert first.returncode == 0, first.stderr
    assert verdict(list(args), work, env).startswith("plain "), verdict(list(args), work, env)


def one_warning(proc, *words) -> None:
    """The call succeeded and printed exactly one line, naming ``words``."""
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr


def clang_object(work, args, name) -> bytes:
    out = work / name
    subprocess.run([CLANG, *args, "-o", str(out)], cwd=work, check=True)
    return out.read_bytes()


def test_a_call_nothing_reads_is_clangs_own_and_counted(home):
    work, env = home
    env = dict(env, MIRECC_SERVER="0")
    warm_rules(work, env)
    for args, code in ((["-O0", "-c", "a.c"], "not-optimised"), (["-E", "a.c"], "not-compile"),
                       (["-O3", "-c", "a.c"], "no-use"), (["--version"], "not-compile")):
        assert verdict(args, work, env) == f"plain {code}"
    proc = call([CLIENT, "-O3", "-c", "a.c", "-o", "m.o"], work, env)
    assert proc.returncode == 0 and proc.stderr == ""
    assert (work / "m.o").read_bytes() == clang_object(work, ["-O3", "-c", "a.c"], "c.o")
    stats = (Path(env["XDG_CACHE_HOME"]) / "mirecc" / "stats").read_text()
    from mirecc.taskapi.config import Config
    from mirecc.tu import stats as stats_mod
    counted = stats_mod.read(Config(cache_dir=str(Path(env["XDG_CACHE_HOME"]) / "mirecc")))
    assert counted["passthrough.no-use"] >= 1, stats
    assert counted["calls"] >= 2


def test_errors_and_exit_status_are_clangs(home):
    work, env = home
    env = dict(env, MIRECC_SERVER="0")
    warm_rules(work, env)
    (work / "bad.c").write_text("int f(void) { return x; }\n")
    ours = call([CLIENT, "-O3", "-c", "bad.c", "-o", "bad.o"], work, env)
    theirs = call([CLANG, "-O3", "-c", "bad.c", "-o", "bad.o"], work, env)
    assert ours.returncode == theirs.returncode == 1
    assert ours.stderr == theirs.stderr and "use of undeclared identifier" in ours.stderr


def test_a_call_something_reads_runs_in_the_server(home):
    """-Oz: the code-size task reads it; the server's answer is the Python
    driver's, byte for byte, and the second call is served warm."""
    work, env = home
    served = call([CLIENT, "-Oz", "-c", "a.c", "-o", "s.o"], work, env)
    assert served.returncode == 0, served.stderr
    assert served.stderr == ""
    assert verdict(["-Oz", "-c", "a.c", "-o", "s.o"], work, env).startswith("handoff ")
    assert _servers(Path(env["XDG_RUNTIME_DIR"])), "no server was started"
    python = call([PYTHON_DRIVER, "-Oz", "-c", "a.c", "-o", "p.o"], work,
                  dict(env, MIRECC_SERVER="0", MIRECC_CACHE_DIR=str(work / "other-cache")))
    assert python.returncode == 0, python.stderr
    assert (work / "s.o").read_bytes() == (work / "p.o").read_bytes()
    # standard input and a failing compile through the server
    piped = call([CLIENT, "-Oz", "-x", "c", "-c", "-", "-o", "in.o"], work, env, input=SOURCE)
    assert piped.returncode == 0 and (work / "in.o").is_file(), piped.stderr
    (work / "bad.c").write_text("int f(void) { return x; }\n")
    bad = call([CLIENT, "-Oz", "-c", "bad.c", "-o", "bad.o"], work, env)
    assert bad.returncode == 1 and "use of undeclared identifier 'x'" in bad.stderr
    assert "mirecc: warning" not in bad.stderr


def test_the_server_killed_mid_compile(home):
    work, env = home
    proc = call([CLIENT, "-Oz", "-c", "a.c", "-o", "k.o"], work,
                dict(env, MIRECC_DEBUG_FAULT="serve-kill"))
    one_warning(proc, "ended without an answer")
    assert (work / "k.o").read_bytes() == clang_object(work, ["-Oz", "-c", "a.c"], "c.o")


def test_the_socket_removed(home):
    work, env = home
    assert call([CLIENT, "-Oz", "-c", "a.c", "-o", "one.o"], work, env).returncode == 0
    sock = next((Path(env["XDG_RUNTIME_DIR"]) / "mirecc").glob("front-*.sock"))
    sock.unlink()
    proc = call([CLIENT, "-Oz", "-c", "a.c", "-o", "two.o"], work, env)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stderr.splitlines()) <= 1
    assert (work / "two.o").read_bytes() == (work / "one.o").read_bytes()


def test_stale_and_damaged_rules(home):
    work, env = home
    env = dict(env, MIRECC_SERVER="0")
    warm_rules(work, env)
    # a configuration file appears: other settings, so other rules
    (work / ".mirecc.yaml").write_text("size_search: 0\n")
    assert verdict(["-O2", "-c", "a.c"], work, env).startswith("handoff no rules")
    warm_rules(work, env)
    # the same file changed: its rules are refused, then written again
    time.sleep(0.01)
    (work / ".mirecc.yaml").write_text("size_search: 1\n")
    assert "changed" in verdict(["-O2", "-c", "a.c"], work, env)
    warm_rules(work, env)
    assert verdict(["-Oz", "-c", "a.c", "-o", "z.o"], work, env).startswith("handoff ")
    # a damaged file: one warning, the compile as asked
    rules = [p for p in (Path(env["XDG_RUNTIME_DIR"]) / "mirecc").glob("rules-*/*")]
    for path in rules:
        path.write_text("mirecc-rules 1\ntables 0000\n")
    proc = call([CLIENT, "-O2", "-c", "a.c", "-o", "d.o"], work, env)
    assert proc.returncode == 0
    assert len(proc.stderr.splitlines()) == 1 and "flag tables" in proc.stderr
    assert (work / "d.o").read_bytes() == clang_object(work, ["-O2", "-c", "a.c"], "c.o")


def test_client_and_server_of_different_versions(home):
    work, env = home
    proc = call([CLIENT, "-Oz", "-c", "a.c", "-o", "v.o"], work,
                dict(env, MIRECC_DEBUG_CLIENT_VERSION="0.0.0-other"))
    one_warning(proc, "refused", "0.0.0-other")
    assert (work / "v.o").is_file()


def test_a_full_disk_under_the_store(home, tmp_path):
    work, env = home
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                      capture_output=True).returncode != 0:
        pytest.skip("needs to mount a tmpfs (root)")
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={full}/fill", "bs=4k", "count=64"],
                       capture_output=True)
        env = dict(env, MIRECC_CACHE_DIR=str(full / "cache"))
        proc = call([CLIENT, "-Oz", "-c", "a.c", "-o", "f.o"], work, env)
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stderr.splitlines()) <= 1
        assert (work / "f.o").is_file()
        again = call([CLIENT, "-O3", "-c", "a.c", "-o", "g.o"], work, env)
        assert again.returncode == 0 and (work / "g.o").read_bytes() == \
            clang_object(work, ["-O3", "-c", "a.c"], "c.o")
    finally:
        subprocess.run(["umount", str(full)], capture_output=True)


def test_make_j8_on_a_cold_server(home):
    """Eight clients at once, no server yet: one server starts, every object
    is the Python driver's, no warning."""
    work, env = home
    names = [f"u{i}" for i in range(8)]
    for n in names:
        (work / f"{n}.c").write_text(SOURCE.replace("square", f"sq_{n}").replace("main", f"m_{n}"))
    (work / "Makefile").write_text(
        "all: " + " ".join(f"{n}.o" for n in names) + "\n%.o: %.c\n\t$(CC) -Oz -c $< -o $@\n")
    proc = call(["make", "-j8", f"CC={CLIENT}"], work, env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    assert len([p for p in _servers(Path(env["XDG_RUNTIME_DIR"]), "front") if _alive(p)]) == 1
    for n in names:
        expect = call([PYTHON_DRIVER, "-Oz", "-c", f"{n}.c", "-o", f"{n}.p.o"], work,
                      dict(env, MIRECC_SERVER="0", MIRECC_CACHE_DIR=str(work / "c2")))
        assert expect.returncode == 0
        assert (work / f"{n}.o").read_bytes() == (work / f"{n}.p.o").read_bytes()


def test_signals_reach_the_call(home):
    """make stopping a job (SIGTERM) or Ctrl-C stops the call in the server
    and the client dies of the same signal."""
    work, env = home
    assert call([CLIENT, "-Oz", "-c", "a.c", "-o", "w.o"], work, env).returncode == 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        before = set(_children_of_servers(env))
        proc = subprocess.Popen([str(CLIENT), "-Oz", "-c", "a.c", "-o", "h.o"], cwd=work,
                                env=dict(env, MIRECC_DEBUG_FAULT="serve-hang"),
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not (set(_children_of_servers(env)) - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        calls = set(_children_of_servers(env)) - before
        assert calls, "the call never started in the server"
        time.sleep(0.2)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == -sig
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in calls) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in calls)


def _children_of_servers(env) -> list[int]:
    servers = set(_servers(Path(env["XDG_RUNTIME_DIR"]), "front"))
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().split(") ", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in servers:
                out.append(int(entry))
    return out


def _request(sock_path: Path, payload: bytes, fds=(0, 1, 2)) -> str:
    """Send ``payload`` (none: only connect) and read the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(str(sock_path))
    if payload:
        socket.send_fds(s, [payload[:8]], list(fds))
        s.sendall(payload[8:])
        s.shutdown(socket.SHUT_WR)
    out = b""
    while chunk := s.recv(4096):
        out += chunk
    s.close()
    return out.decode()


def _body(argv, cwd, env_entries, version=None):
    from mirecc import __version__
    from mirecc.driver.rules import PROTOCOL

    parts = ["mirecc-client", str(PROTOCOL), version or __version__, "c", str(cwd), "22",
             "argv", str(len(argv)), *argv, "env", str(len(env_entries)), *env_entries,
             "fds", "3", "0", "1", "2"]
    body = b"".join(p.encode() + b"\0" for p in parts)
    return f"{len(body):08x}".encode() + body


def test_the_server_refuses_what_it_should(home):
    """Malformed and oversized requests get an error and run nothing; the
    socket's directory is 0700; a directory open to others is not used."""
    work, env = home
    assert call([CLIENT, "-Oz", "-c", "a.c", "-o", "w.o"], work, env).returncode == 0
    directory = Path(env["XDG_RUNTIME_DIR"]) / "mirecc"
    assert directory.stat().st_mode & 0o777 == 0o700
    sock = next(directory.glob("front-*.sock"))
    marker = work / "ran.o"
    env_entries = [f"{k}={v}" for k, v in env.items()]
    good = _body(["-O0", "-c", "a.c", "-o", str(marker)], work, env_entries)
    # (a bad head is answered before the rest is read: sent alone)
    assert _request(sock, b"zzzzzzzz").startswith("error no length")
    assert _request(sock, b"%08x" % (64 << 20)).startswith("error request of")
    broken = good.replace(b"argv\0", b"argx\0")
    assert _request(sock, broken).startswith("error ")
    assert _request(sock, good[:-20]).startswith("error ")
    assert not marker.exists()
    # the same request well formed runs, to show the ones above could have
    reply = _request(sock, good)
    assert reply.splitlines()[-1] == "exit 0" and marker.is_file(), reply
    # a runtime directory others can enter is refused: the Python driver compiles
    directory.chmod(0o755)
    try:
        proc = call([CLIENT, "-Oz", "-c", "a.c", "-o", "o.o"], work, env)
        assert proc.returncode == 0 and (work / "o.o").is_file()
        assert "0700" in proc.stderr and len(proc.stderr.splitlines()) == 1
    finally:
        directory.chmod(0o700)


@pytest.mark.skipif(os.getuid() != 0, reason="connects as another user: needs root")
def test_the_server_runs_calls_of_its_own_user_only(home):
    """A server whose socket another user can reach (its directory opened
    on purpose) still runs nothing for them: the peer's credentials."""
    import tempfile

    work, env = home
    open_dir = Path(tempfile.mkdtemp(prefix="mirecc-peer-", dir="/tmp"))
    sock = open_dir / "mirecc" / "front-peer.sock"
    server = subprocess.Popen([sys.executable, "-m", "mirecc.driver.serve", "--socket", str(sock),
                               "--idle-timeout", "60"], env=env, cwd="/")
    try:
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in (open_dir, sock.parent):
            p.chmod(0o755)
        sock.chmod(0o777)
        marker = Path(open_dir) / "foreign.o"
        os.chmod(open_dir, 0o777)
        payload = _body(["-O0", "-c", str(work / "a.c"), "-o", str(marker)], "/tmp",
                        [f"{k}={v}" for k, v in env.items()])
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                os.setgid(65534)
                os.setuid(65534)
                # the server answers a stranger before reading a byte: it
                # is told so on connecting (and what it sends is never read)
                os.write(write, _request(sock, b"").encode())
                os.write(write, b"|" + _request(sock, payload).encode())
            except BaseException as exc:
                os.write(write, f"exception {exc!r}".encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as fh:
            reply = fh.read()
        assert reply.startswith("error this server runs calls of uid 0 only"), reply
        assert not marker.exists()
    finally:
        server.terminate()
        server.wait(timeout=30)
        import shutil
        shutil.rmtree(open_dir, ignore_errors=True)


def test_a_runtime_directory_named_but_gone(home, tmp_path):
    """XDG_RUNTIME_DIR set to a directory that is not there (as under sudo):
    the client uses /tmp/mirecc-<uid>, quietly."""
    work, env = home
    env = dict(env, XDG_RUNTIME_DIR=str(tmp_path / "gone"), MIRECC_SERVER="0")
    first = call([CLIENT, "-O2", "-c", "a.c", "-o", "g.o"], work, env)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert verdict(["-O2", "-c", "a.c"], work, env) == "plain no-use"
    assert not (tmp_path / "gone").exists()


def _counters(env) -> dict:
    from mirecc.taskapi.config import Config
    from mirecc.tu import stats as stats_mod
    return stats_mod.read(Config(cache_dir=str(Path(env["XDG_CACHE_HOME"]) / "mirecc")))


def _delta(before: dict, after: dict) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


def _stop_servers(env) -> None:
    for pid in _servers(Path(env["XDG_RUNTIME_DIR"])):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + 10
    while any(_alive(p) for p in _servers(Path(env["XDG_RUNTIME_DIR"]))) \
            and time.time() < deadline:
        time.sleep(0.05)


def test_a_direct_hit_is_served_without_python(home):
    """A rebuild of an unchanged TU whose object mirecc kept: the client
    reads the manifest, checks the files, copies the object and its
    dependency file, and counts it as the driver would; no server starts.
    A changed header is a miss; rules whose pipeline keys are stale are
    written again."""
    work, env = home
    (work / "a.h").write_text("#define K 3\n")
    (work / "a.c").write_text('#include "a.h"\n' + SOURCE.replace("square(3) - 9", "square(K) - 9"))
    for name in ("a.h", "a.c"):     # not written just now (tu/direct.py: TOO_NEW_NS)
        os.utime(work / name, (time.time() - 60, time.time() - 60))
    args = ["-Oz", "-MD", "-c", "a.c", "-o", "a.o"]
    first = call([CLIENT, *args], work, env)        # through the server: kept
    assert first.returncode == 0, first.stderr
    kept, kept_dep = (work / "a.o").read_bytes(), (work / "a.d").read_text()
    _stop_servers(env)
    run = Path(env["XDG_RUNTIME_DIR"])
    (work / "a.o").unlink()
    (work / "a.d").unlink()
    before = _counters(env)
    hit = call([CLIENT, *args], work, env)
    assert hit.returncode == 0 and hit.stderr == "", hit.stderr
    assert not any(_alive(p) for p in _servers(run, "front")), "the call went to a server"
    assert (work / "a.o").read_bytes() == kept
    assert (work / "a.d").read_text() == kept_dep
    client_counts = _delta(before, _counters(env))
    assert client_counts["tus.object"] == 1 and client_counts["tus.direct"] == 1, client_counts
    # the same hit through the Python driver counts the same
    before = _counters(env)
    python = call([CLIENT, *args], work, dict(env, MIRECC_CLIENT="0"))
    assert python.returncode == 0, python.stderr
    assert _delta(before, _counters(env)) == client_counts
    assert (work / "a.o").read_bytes() == kept
    # a header changed: a miss, which the server compiles (and keeps again)
    (work / "a.h").write_text("#define K 4\n")
    os.utime(work / "a.h", (time.time() - 30, time.time() - 30))
    miss = call([CLIENT, *args], work, env)
    assert miss.returncode == 0, miss.stderr
    assert (work / "a.o").read_bytes() == clang_object(work, ["-Oz", "-c", "a.c"], "c.o")
    assert any(_alive(p) for p in _servers(run, "front"))
    _stop_servers(env)
    # rules whose pipeline keys may be stale (a stamp that no longer matches):
    # handed over, and the driver writes them again
    rules = next(p for p in (run / "mirecc").glob("rules-*/*") if "stamp " in p.read_text())
    text = rules.read_text()
    rules.write_text(text.replace("stamp ", "stamp 1", 1))
    again = call([CLIENT, *args], work, env)
    assert again.returncode == 0, again.stderr
    assert any(_alive(p) for p in _servers(run, "front"))
    assert rules.read_text() == text


def test_a_direct_hit_with_nothing_applied_is_the_users_compile(home):
    """A TU a head read and decided nothing for (loop vectorization at -O3,
    no loop): on a rebuild the client finds its manifest and runs the
    user's command as it is, counted as the driver counts the hit."""
    work, env = home
    env = dict(env, MIRECC_APPLY_LOOPS="1")
    os.utime(work / "a.c", (time.time() - 60, time.time() - 60))
    args = ["-O3", "-c", "a.c", "-o", "n.o"]
    first = call([CLIENT, *args], work, env)
    assert first.returncode == 0, first.stderr
    assert verdict(args, work, env) == "handoff a head reads this compile"
    _stop_servers(env)
    before = _counters(env)
    hit = call([CLIENT, *args], work, env)
    assert hit.returncode == 0 and hit.stderr == "", hit.stderr
    assert not any(_alive(p) for p in _servers(Path(env["XDG_RUNTIME_DIR"]), "front"))
    assert (work / "n.o").read_bytes() == clang_object(work, ["-O3", "-c", "a.c"], "c.o")
    counted = _delta(before, _counters(env))
    assert counted["tus.direct"] == 1 and "tus.object" not in counted, counted
    before = _counters(env)
    assert call([CLIENT, *args], work, dict(env, MIRECC_CLIENT="0")).returncode == 0
    assert _delta(before, _counters(env)) == counted


def test_a_server_that_cannot_start_is_left_alone_for_a_while(home):
    """A server that exits as it starts: the call compiles through the
    Python driver with one warning; the next calls do not try to start
    it again (no Python start paid twice per call) until `mire serve
    --stop` or a minute has passed."""
    work, env = home
    bad = dict(env, MIRECC_DEBUG_FAULT="serve-start")
    first = call([CLIENT, "-Oz", "-c", "a.c", "-o", "b1.o"], work, bad)
    one_warning(first, "exited as it started")
    second = call([CLIENT, "-Oz", "-c", "a.c", "-o", "b2.o"], work, bad)
    one_warning(second, "failed to start less than a minute ago")
    expect = clang_object(work, ["-Oz", "-c", "a.c"], "c.o")
    assert (work / "b1.o").read_bytes() == (work / "b2.o").read_bytes() == expect
    call([BIN / "mire", "serve", "--stop"], work, env)     # (none is running: 1)
    third = call([CLIENT, "-Oz", "-c", "a.c", "-o", "b3.o"], work, env)
    assert third.returncode == 0 and third.stderr == "", third.stderr
    assert any(_alive(p) for p in _servers(Path(env["XDG_RUNTIME_DIR"]), "front"))
