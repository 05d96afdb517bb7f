"""Fixtures for the arena_cli.py tests: the real arena (started by dev/test, its URL in
ARENA_TEST_URL) and tiny local servers that misbehave in the ways the CLI must handle; and how a
test starts a server process of its own on a free port (`start_server`), beside the other groups'
servers that take free ports all the time."""

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# The served CLI as the build assembles it into the site (from scripts/: dev/assemble_scripts.py).
CLI = Path(__file__).resolve().parents[2] / "target" / "site" / "arena_cli.py"


@pytest.fixture
def arena_url():
    url = os.environ.get("ARENA_TEST_URL")
    if not url:
        pytest.fail("ARENA_TEST_URL is not set: run these tests through dev/test, which starts the arena")
    return url


def hub_url():
    """The HF stand-in dev/test started."""
    url = os.environ.get("ARENA_TEST_HUB_URL")
    if not url:
        pytest.fail("ARENA_TEST_HUB_URL is not set: run these tests through dev/test")
    return url


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(said):
    """Whether a server's output says its port was taken (Rust's, uvicorn's, Python's words)."""
    said = said.lower()
    return "address already in use" in said or "addrinuse" in said


def _descendants(pid):
    """`pid` and every process it started that still runs under it."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path("/proc/%s/stat" % name).read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(name))
    found, todo = {pid}, [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


def listens(pid, port):
    """Whether process `pid`, or one it started, holds the socket listening on loopback `port`:
    what answers there is that server, not another test's that took the port."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                sockets.add("socket:[%s]" % f[9])
    if not sockets:
        return False
    for p in _descendants(pid):
        try:
            fds = os.listdir("/proc/%d/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (p, fd)) in sockets:
                    return True
            except OSError:
                pass
    return False


def stop_process(proc):
    """Kills a server and, when it leads a process group of its own, everything in that group."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def start_server(launch, log, what, up=None, limit_s=120, may_exit=False, attempts=5):
    """Starts a server on a free loopback port and waits until it is up; answers (process, port).

    `launch(port, out)` starts its process with `out` (the file `log`, written afresh) as its
    output. It is up once its own process, or one it started, listens on the port and `up(port)`
    (when given) is true: another test's server that took the port and answers there does not
    count. The port is free when probed and bound only when the server gets that far (seconds of
    imports or migrations later), so a start whose process exits saying the port was taken is
    made again on a fresh one. Any other exit, or no start within `limit_s`, fails the test with
    the server's log; with `may_exit`, an exit is answered instead (the caller expects it)."""
    for _ in range(attempts):
        port = free_port()
        with open(log, "wb") as out:
            proc = launch(port, out)
        deadline = time.monotonic() + limit_s
        while True:
            if proc.poll() is not None:
                said = Path(log).read_text(errors="replace")
                if port_taken(said):
                    break
                if may_exit:
                    return proc, port
                pytest.fail("%s exited (%s) before it was up:\n%s" % (what, proc.returncode, said[-4000:]))
            try:
                if listens(proc.pid, port) and (up is None or up(port)):
                    return proc, port
            except OSError:
                pass
            if time.monotonic() > deadline:
                stop_process(proc)
                said = Path(log).read_text(errors="replace")
                pytest.fail("%s was not up within %d s:\n%s" % (what, limit_s, said[-4000:]))
            time.sleep(0.2)
    said = Path(log).read_text(errors="replace")
    pytest.fail("%s: its port was taken by another process %d times in a row:\n%s" % (what, attempts, said[-4000:]))


def reserve_port(port):
    """A socket bound to loopback `port` and never listening: connections there are refused (as
    when nothing serves), and no other process can take the port while it is held (no
    SO_REUSEADDR). None when the port is already taken."""
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", port))
    except OSError:
        held.close()
        return None
    return held


class Proxy:
    """Round-robin TCP proxy on a port of its own: each accepted connection goes to the next of
    `backends` (ports, changed at will) that accepts."""

    def __init__(self, backends):
        self.backends, self.turn = backends, 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.connect, args=(client,), daemon=True).start()

    def connect(self, client):
        for _ in range(len(self.backends)):
            port = self.backends[self.turn % len(self.backends)]
            self.turn += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
            upstream.settimeout(None)
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
            _pipe(client, upstream)
            return
        client.close()

    def close(self):
        self.sock.close()


def _pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def run_cli(args, url, token=None, home=None, extra_env=None, timeout=60):
    env = {"PATH": os.environ.get("PATH", ""), "ARENA_URL": url, "HOME": str(home or "/nonexistent")}
    if token is not None:
        env["HF_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, str(CLI), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of the server's script, and
    records each request's path, headers and (for a POST) its JSON body."""

    def do_GET(self):
        self.answer({"path": self.path, "headers": dict(self.headers)})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        self.answer({"path": self.path, "headers": dict(self.headers), "body": body})

    def answer(self, seen):
        self.server.seen.append(seen)
        status, headers, body = self.server.script.pop(0) if self.server.script else (500, {}, b"script ended")
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted_server():
    servers = []

    def start(script):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        server.script = list(script)
        server.seen = []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, "http://127.0.0.1:%d" % server.server_address[1]

    yield start
    for s in servers:
        s.shutdown()
