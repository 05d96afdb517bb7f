"""What a participant's server can get out of the trainer: its server records every request it
receives and answers `/health` and `/ws` with a redirect to another local address (a trap that
records what reaches it), sets a cookie, and the environment names the trap as a proxy. Nothing
follows the redirect, goes through the proxy or sends the cookie back, and the only credential
the server receives is the sandbox reader. The reader itself is checked as the arena checks it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from arena_cluster.sandboxes import Connection, health, reader_refusal

READER = "hf_reader_only_in_the_sandbox_org"


class Recorder(ThreadingHTTPServer):
    def __init__(self, redirect_to=None):
        self.seen, self.redirect_to = [], redirect_to
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.seen.append({"path": self.path, "headers": dict(self.headers.items())})
                if server.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to + "/stolen")
                    self.send_header("Set-Cookie", "session=stolen; Path=/")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_CONNECT = do_GET

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


@pytest.fixture()
def servers(monkeypatch):
    trap = Recorder()
    hostile = Recorder(redirect_to=trap.url)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, trap.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield trap, hostile
    trap.shutdown()
    hostile.shutdown()


def test_health_follows_no_redirect_takes_no_proxy_and_keeps_no_cookie(servers):
    trap, hostile = servers
    assert health(hostile.url, READER) == 302
    assert health(hostile.url, READER) == 302
    assert trap.seen == [], "a request reached the trap: %s" % json.dumps(trap.seen)
    assert [r["path"] for r in hostile.seen] == ["/health", "/health"]
    assert all(r["headers"].get("Authorization") == "Bearer " + READER for r in hostile.seen), hostile.seen
    assert all("Cookie" not in r["headers"] for r in hostile.seen), hostile.seen


def test_the_episode_socket_follows_no_redirect_and_takes_no_proxy(servers):
    trap, hostile = servers
    with pytest.raises(Exception) as refused:
        Connection(hostile.url, READER, 5)
    assert "302" in str(refused.value), refused.value
    assert trap.seen == [], "a request reached the trap: %s" % json.dumps(trap.seen)
    assert [r["path"] for r in hostile.seen] == ["/ws"]
    assert hostile.seen[0]["headers"].get("Authorization") == "Bearer " + READER


def whoami(role="read", orgs=("arena-sandboxes",)):
    return {"name": "reader", "auth": {"accessToken": {"role": role}}, "orgs": [{"name": o} for o in orgs]}


def test_the_reader_reads_the_sandbox_namespace_and_nothing_else():
    assert reader_refusal(whoami(), "arena-sandboxes") is None
    assert "write token" in reader_refusal(whoami(role="write"), "arena-sandboxes")
    assert "fine-grained" in reader_refusal(whoami(role="fineGrained"), "arena-sandboxes")
    assert "member of benchflow" in reader_refusal(whoami(orgs=("arena-sandboxes", "benchflow")), "arena-sandboxes")
    assert "not a member of arena-sandboxes" in reader_refusal(whoami(orgs=()), "arena-sandboxes")


def test_the_agent_checks_its_reader_with_hfs_whoami():
    """Against the stand-in's whoami-v2, as the agent does before it connects (at the endpoint its
    settings name)."""
    from arena_cluster.agent import check_sandbox_reader
    from stack import SANDBOX_ORG, env, token

    hub = env("ARENA_TEST_HUB_URL")
    assert check_sandbox_reader(token("arena-sandbox"), SANDBOX_ORG, endpoint=hub) is None
    assert "write token" in check_sandbox_reader(token("arena-bot"), SANDBOX_ORG, endpoint=hub)
    assert "does not accept" in check_sandbox_reader("hf_not_a_token_of_anyone", SANDBOX_ORG, tries=1, endpoint=hub)
