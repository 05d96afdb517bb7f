"""Fixtures for the arena_cli.py tests: the real arena (started by dev/test, its URL in
ARENA_TEST_URL) and tiny local servers that misbehave in the ways the CLI must handle."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
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
