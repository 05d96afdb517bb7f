"""Two arena replicas on one PostgreSQL behind one address, as a multi-replica deployment runs: two
real server processes (the debug build dev/test made) on a database of their own, a TCP proxy that
hands each new connection to the next live replica (so requests alternate, and a relay's WebSocket
reconnects to whichever is alive), and the HF stand-in dev/test started. Sessions, idempotent posts,
the board's rate limit, a launch sent to both, and a run that finishes after the replica holding
its work is killed."""

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import Proxy, hub_url, run_cli, start_server

ROOT = Path(__file__).resolve().parents[2]
RUPERT = "hf_local_test_rupert_3be2d8"
ARENA_BOT = "hf_local_test_arena_bot_5a5a5a"
EVE = "hf_local_test_eve_e11e11"
# dev/test's STANDIN_STAGE_MS, put back after the slower run this module makes.
STAGE_MS = 300
PG = "postgres://postgres@127.0.0.1:5432/"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def request(url, method="GET", body=None, headers=None, form=None):
    data = None
    headers = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=20) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    hub = hub_url()
    work = tmp_path_factory.mktemp("replicas")
    db = "arena_replicas_%s" % uuid.uuid4().hex[:8]
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc", "CREATE DATABASE " + db],
                   check=True, capture_output=True)
    subprocess.run(["bash", "-c", 'source dev/lib.sh && assemble_local_configs "$1"', "_", str(work / "configs")],
                   cwd=ROOT, check=True, capture_output=True)
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "arena-target")
    # Each replica's port is picked as it starts (one picked earlier could be taken meanwhile).
    ports = [0, 0]
    proxy = Proxy(ports)
    address = "http://127.0.0.1:%d" % proxy.port
    servers = {}

    def launch(i, port, out):
        env = {"PATH": os.environ["PATH"], "HOME": str(work), "RUST_LOG": "warn",
               "ARENA_ADDR": "127.0.0.1:%d" % port, "DATABASE_URL": PG + db,
               "ARENA_DATA_DIR": str(work / ("data-%d" % i)), "ARENA_CONFIGS_DIR": str(work / "configs"),
               "ARENA_SITE_ROOT": str(ROOT / "target" / "site"), "ARENA_PUBLIC_URL": address,
               "ARENA_COOKIE_SECURE": "false", "HF_ENDPOINT": hub, "OPENID_PROVIDER_URL": hub,
               "OAUTH_CLIENT_ID": "arena-test", "OAUTH_CLIENT_SECRET": "arena-test-secret",
               "HF_TOKEN": ARENA_BOT, "ARENA_JOBS_NAMESPACE": "benchflow",
               "ARENA_RUNS_DATASET": "benchflow/arena-runs-" + db[-8:], "ARENA_WORKER_TICK_S": "1",
               "ARENA_LEADERBOARD_DATASET": "benchflow/arena-leaderboard-" + db[-8:],
               "ARENA_JOB_SECRET_DAYTONA_API_KEY": "local-simulated-daytona-key", "ARENA_RELAY_HEARTBEAT_S": "1",
               "ARENA_UNSEEN_TOKENS_PER_MINUTE": "5000", "ARENA_VALIDATIONS_PER_HOUR": "5000",
               "GITHUB_API_URL": hub, "GITHUB_RAW_URL": hub + "/raw"}
        return subprocess.Popen([target + "/debug/arena", "serve"], env=env, stdout=out, stderr=out)

    def start(i):
        servers[i], ports[i] = start_server(
            lambda port, out: launch(i, port, out), work / ("server-%d.log" % i), "replica %d" % i,
            up=lambda port: request("http://127.0.0.1:%d/healthz" % port)[0] == 200)

    start(0)
    start(1)
    yield {"address": address, "ports": ports, "servers": servers, "work": work, "hub": hub}
    for p in servers.values():
        p.kill()
        p.wait()
    proxy.close()
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc",
                    "DROP DATABASE %s WITH (FORCE)" % db], capture_output=True)


def direct(replicas, i):
    return "http://127.0.0.1:%d" % replicas["ports"][i]


def test_a_session_made_on_one_replica_is_honoured_by_the_other(replicas):
    address, hub = replicas["address"], replicas["hub"]
    status, headers, _ = request(address + "/auth/login")
    assert status in (302, 303)
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    authorize = urllib.parse.urlsplit(headers["Location"])
    params = dict(urllib.parse.parse_qsl(authorize.query))
    page = request(headers["Location"])[2].decode()
    user = re.search(r'name="user" value="([^"]+)">Sign in as rupert<', page).group(1)
    status, headers, _ = request(hub + "/oauth/authorize", "POST", form=dict(params, user=user))
    assert status in (302, 303)
    callback = headers["Location"]
    assert callback.startswith(address + "/login/callback?")
    # The login started on one replica; the proxy sends the callback to the other.
    status, headers, _ = request(callback, headers={"Cookie": cookie})
    assert status in (302, 303), status
    cookie = (headers.get("Set-Cookie") or cookie).split(";", 1)[0]
    for i in (0, 1):
        status, _, body = request(direct(replicas, i) + "/auth/session", headers={"Cookie": cookie})
        assert status == 200 and json.loads(body)["user"]["name"] == "rupert", body


def test_idempotent_posts_and_the_rate_limit_hold_across_replicas(replicas):
    auth = {"Authorization": "Bearer " + RUPERT}
    agent = {"agent_id": "rupert-replicas", "description": "The agent of rupert: replica checks"}
    for i in (0, 1):
        status, _, body = request(direct(replicas, i) + "/api/agents", "POST", agent, auth)
        assert status in (200, 201), body
    message = {"request_id": "replica-hello", "agent_id": "rupert-replicas", "body": "Hello from a replica test.",
               "refs": [], "broadcast": False}
    ids = set()
    for i in (0, 1, 0):
        status, _, body = request(direct(replicas, i) + "/api/board/messages", "POST", message, auth)
        assert status in (200, 201), body
        ids.add(json.loads(body)["message"]["id"] if "message" in json.loads(body) else json.loads(body)["id"])
    assert len(ids) == 1, "one message, whichever replica got the request"
    # Six posts a minute per identity, counted in the database: the seventh is refused by either.
    answers = []
    for n in range(8):
        body = dict(message, request_id="replica-burst-%d" % n, body="Post %d." % n)
        answers.append(request(direct(replicas, n % 2) + "/api/board/messages", "POST", body, auth)[0])
    assert answers.count(429) == 3 and all(a in (200, 201) for a in answers[:5]), answers


def wait_state(url, run_id, states, deadline_s):
    deadline = time.time() + deadline_s
    while True:
        r = run_cli(["runs", "--challenge", "local-demo", "--run-id", run_id], url)
        assert r.returncode == 0, r.stderr
        state = json.loads(r.stdout)["state"]
        if state in states:
            return state
        assert time.time() < deadline, "still %s: %s" % (state, r.stderr)
        time.sleep(1)


def test_one_launch_from_two_replicas_and_a_run_that_outlives_a_killed_replica(replicas, tmp_path):
    from test_collections import publish

    repo_id, _ = publish(Path(os.environ["ARENA_TEST_HUB_REPOS"]), "good", owner="rupert")
    env_file = tmp_path / "environment.json"
    env_file.write_text(json.dumps({"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset",
                                    "repo_id": repo_id, "revision": "main", "entry_path": "",
                                    "title": "Replica run", "notes": ""}))
    r = run_cli(["submit", "--file", str(env_file)], direct(replicas, 0), token=RUPERT)
    assert r.returncode == 0, r.stderr
    environment_id = json.loads(r.stdout)["environment_id"]
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"request_id": "rupert-replica-run"}))
    launched = []
    # Slower simulated stages, so that the run is still under way when a replica is killed.
    request(replicas["hub"] + "/_standin/jobs", "PUT", {"stage_ms": 1500})
    try:
        run_the_race(replicas, environment_id, run_file, launched)
    finally:
        request(replicas["hub"] + "/_standin/jobs", "PUT", {"stage_ms": STAGE_MS})


def relays(url):
    status, _, body = request(url + "/api/jobs", headers={"Authorization": "Bearer " + EVE})
    assert status == 200, body
    return {r["run_id"]: r["state"] for r in json.loads(body)["relays"]}


def run_the_race(replicas, environment_id, run_file, launched):
    def launch(i):
        launched.append(run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", str(run_file),
                                 "--execute"], direct(replicas, i), token=RUPERT))

    threads = [threading.Thread(target=launch, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in launched), [r.stderr for r in launched]
    run_ids = {json.loads(r.stdout)["run"]["run_id"] for r in launched}
    assert len(run_ids) == 1, "the same request id launches one run, whichever replicas get it"
    run_id = run_ids.pop()
    listed = json.loads(run_cli(["runs", "--challenge", "local-demo"], direct(replicas, 1)).stdout)
    assert [x["run_id"] for x in listed["runs"]] == [run_id]
    # The run's relay is held by one replica (whichever the proxy gave its WebSocket) and seen by both.
    deadline = time.time() + 60
    while run_id not in relays(direct(replicas, 1)):
        assert time.time() < deadline, "the run's relay never connected"
        time.sleep(0.2)
    assert run_id in relays(direct(replicas, 0))
    # Kill the first replica while the run is under way; the other takes its leases over.
    assert wait_state(replicas["address"], run_id, ("running", "scored", "failed"), 90) == "running"
    replicas["servers"][0].send_signal(signal.SIGKILL)
    replicas["servers"][0].wait()
    assert wait_state(direct(replicas, 1), run_id, ("scored", "failed", "canceled"), 240) == "scored"
    jobs = json.loads(run_cli(["jobs"], direct(replicas, 1)).stdout)
    assert json.dumps(jobs).count(run_id) >= 1
