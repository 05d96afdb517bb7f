"""What a participant's server can get out of the trainer: its server records every request it
receives and answers `/health` and `/ws` with a redirect to another local address (a trap that
records what reaches it), sets a cookie, and the environment names the trap as a proxy. Nothing
follows the redirect, goes through the proxy or sends the cookie back, and the only credential
the server receives is the sandbox reader. The reader itself is checked as the arena checks it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from arena_cluster.sandboxes import Connection, health, reader_refusal, readers_refusal

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


def test_held_out_sandboxes_have_a_namespace_and_a_reader_of_their_own():
    sandbox, held_out = whoami(orgs=("arena-sandboxes",)), whoami(orgs=("arena-eval",))
    assert readers_refusal(sandbox, held_out, "arena-sandboxes", "arena-eval") is None
    same = readers_refusal(sandbox, sandbox, "arena-sandboxes", "arena-sandboxes")
    assert "ARENA_EVAL_NAMESPACE is arena-sandboxes, the sandbox namespace" in same
    both = whoami(orgs=("arena-sandboxes", "arena-eval"))
    assert "ARENA_SANDBOX_TOKEN: reader is a member of arena-eval" in readers_refusal(
        both, held_out, "arena-sandboxes", "arena-eval")
    assert readers_refusal(sandbox, whoami(role="write", orgs=("arena-eval",)), "arena-sandboxes",
                           "arena-eval").startswith("ARENA_EVAL_TOKEN: reader's token is a write token")
    assert "ARENA_EVAL_TOKEN: reader is a member of arena-sandboxes" in readers_refusal(
        sandbox, both, "arena-sandboxes", "arena-eval"), "the eval reader reads the eval namespace only"
    assert "ARENA_EVAL_TOKEN: reader is not a member of arena-eval" in readers_refusal(
        sandbox, whoami(orgs=()), "arena-sandboxes", "arena-eval")


def test_the_agent_checks_its_readers_with_hfs_whoami():
    """Against the stand-in's whoami-v2, as the agent does before it connects (at the endpoint its
    settings name)."""
    from arena_cluster.agent import check_readers
    from arena_cluster.settings import Settings
    from stack import EVAL_ORG, SANDBOX_ORG, env, token

    def settings(sandbox_reader, eval_reader, eval_namespace=EVAL_ORG):
        return Settings.read({"HF_TOKEN": token("arena-bot"), "HF_ENDPOINT": env("ARENA_TEST_HUB_URL"),
                              "ARENA_SANDBOX_TOKEN": sandbox_reader, "ARENA_SANDBOX_NAMESPACE": SANDBOX_ORG,
                              "ARENA_EVAL_TOKEN": eval_reader, "ARENA_EVAL_NAMESPACE": eval_namespace,
                              "ARENA_TRAINER_MODEL": "tiny"})

    assert check_readers(settings(token("arena-sandbox"), token("arena-eval"))) is None
    # The arena's bot writes in both namespaces: never a reader.
    assert check_readers(settings(token("arena-bot"), token("arena-eval"))).startswith("ARENA_SANDBOX_TOKEN: arena-bot")
    assert "ARENA_EVAL_TOKEN" in check_readers(settings(token("arena-sandbox"), token("arena-sandbox")))
    assert "a namespace of their own" in check_readers(
        settings(token("arena-sandbox"), token("arena-eval"), SANDBOX_ORG))
    assert "ARENA_SANDBOX_TOKEN: HF does not accept it" == check_readers(
        settings("hf_not_a_token_of_anyone", token("arena-eval")), tries=1)
