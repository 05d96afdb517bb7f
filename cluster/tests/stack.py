"""What the trainer's end-to-end test and `dev/bench-trainer` share: the arena and stand-in that
`start_test_stack debug real` starts (ARENA_TEST_*), the node's agent as an operator starts it, and
a demo echo submission."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The organization participants' sandboxes run in (the stand-in's `users::SANDBOX_ORG`), and the
# one held-out sandboxes run in, apart (its only member besides the arena's bot is `arena-eval`).
SANDBOX_ORG = "benchflow-sandboxes"
EVAL_ORG = "benchflow-eval"
SCHEMA = json.loads((ROOT / "dev/demo/openenv/submission.json").read_text())["schema"]


def env(name):
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set: run this through dev/test or dev/bench-trainer, which start the arena")
    return value


def token(name):
    users = json.loads(Path(env("ARENA_TEST_USERS")).read_text())
    return next(u["token"] for u in users if u["name"] == name)


def call(method, url, tok, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def wait(what, check, limit_s):
    deadline = time.time() + limit_s
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"{what}: not within {limit_s} s"
        time.sleep(1)


class Node:
    """The agent as an operator starts it, in its own process group."""

    def __init__(self, home: Path, steps: int, settings: dict | None = None):
        self.home = home
        self.steps = steps
        # Settings of the node's own beyond the defaults (ARENA_TRAINER_PREFETCH, …). Sandboxes here
        # start on this machine's own cores, ten at once when prefetching, beside the other test
        # groups: a start allowance the machine's load cannot run past.
        self.settings = {"ARENA_SANDBOX_START_S": "300", **(settings or {})}
        self.proc = None

    def start(self):
        e = dict(os.environ, ARENA_CLUSTER_SECRET=env("ARENA_TEST_CLUSTER_SECRET"), HF_TOKEN=token("arena-bot"),
                 ARENA_SANDBOX_TOKEN=token("arena-sandbox"), ARENA_SANDBOX_NAMESPACE=SANDBOX_ORG,
                 ARENA_EVAL_TOKEN=token("arena-eval"), ARENA_EVAL_NAMESPACE=EVAL_ORG,
                 HF_ENDPOINT=env("ARENA_TEST_HUB_URL"),
                 ARENA_TRAINER_MODEL="tiny", ARENA_AGENT_CPU_SLOTS="1", ARENA_TRAINER_MAX_STEPS=str(self.steps),
                 TRACKIO_DIR=str(self.home / "trackio"), PYTHONPATH=str(ROOT / "cluster"), **self.settings)
        e.pop("TRACKIO_SPACE_ID", None)
        self.log = open(self.home / "agent.log", "ab")
        # Where this start's lines begin: `connected` waits for this agent's own connection.
        self.log_from = self.log.tell()
        self.proc = subprocess.Popen([sys.executable, "-m", "arena_cluster.agent", "--arena", env("ARENA_TEST_URL"),
                                      "--home", str(self.home), "--heartbeat-s", "1"],
                                     env=e, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def connected(self, arena):
        """Waits until the arena took this agent's hello (it refuses submissions without a
        connection). After a crash the arena may still count the killed agent's connection for a
        moment: only the new agent's own line says the new one holds the node."""
        def up():
            log = (self.home / "agent.log").read_bytes()
            assert self.proc.poll() is None, log[-3000:].decode(errors="replace")
            if b"the arena took the hello" not in log[self.log_from:]:
                return False
            with urllib.request.urlopen(arena + "/api/openenv", timeout=10) as r:
                return json.load(r).get("connected")

        wait("the agent's connection", up, 60)

    def crash(self, run_id):
        """SIGKILL to the agent and to the trainer: what a node's restart does to both."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        pid = int((self.home / "runs" / run_id / "trainer.pid").read_text())
        os.killpg(pid, signal.SIGKILL)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()


def demo_submission(submission_id, name="submission.json"):
    """A demo submission's body (dev/demo/openenv/NAME) under a fresh id."""
    return dict(json.loads((ROOT / "dev/demo/openenv" / name).read_text()), submission_id=submission_id)


def submit(arena, user, submission_id, body=None):
    """Submits `body` (by default the demo echo on openenv-core 0.3.0, `ghcr.io/test/arena-echo:ok`)
    as `user`; a check that answers the admitted submission once it is validated with a run."""
    body = body or {
        "submission_id": submission_id, "name": "Echo, trained for real", "image": "ghcr.io/test/arena-echo:ok",
        "schema": SCHEMA, "tasks": [{"task_id": "echo-1", "split": "train"}, {"task_id": "echo-2", "split": "train"}],
        "example_actions": [{"message": "hello"}, {"message": "done"}], "finish_action": {"message": "finish"}}
    assert body["submission_id"] == submission_id, body
    status, answer = call("POST", arena + "/api/openenv/submissions", token(user), body)
    assert status == 202, answer

    def admitted():
        s, a = call("GET", f"{arena}/api/openenv/submissions/{submission_id}", token(user))
        assert s == 200 and a["state"] != "rejected", a
        return a if a["state"] == "validated" and a["run"] and a["run"]["run_id"] else None

    return admitted


def run_of(arena, user, run_id):
    status, run = call("GET", f"{arena}/api/openenv/runs/{run_id}", token(user))
    assert status == 200, run
    return run


def events_of(arena, user, run_id):
    status, events = call("GET", f"{arena}/api/openenv/runs/{run_id}/events", token(user))
    assert status == 200, events
    return events["events"]


def jobs_of(hub, run_id, namespace):
    """The run's jobs HF lists in `namespace`, as the arena's bot sees them."""
    # HF's filter is `label=key=value`; a page holds 50 jobs unless `limit` says more.
    req = urllib.request.Request(f"{hub}/api/jobs/{namespace}?label=arena-run%3D{run_id}&limit=500",
                                 headers={"Authorization": "Bearer " + token("arena-bot")})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [j for j in json.load(r) if (j.get("labels") or {}).get("arena-run") == run_id]


def live_sandboxes(hub, run_id):
    """The run's sandboxes still live, in both namespaces."""
    return [j["id"] for ns in (SANDBOX_ORG, EVAL_ORG) for j in jobs_of(hub, run_id, ns)
            if j["status"]["stage"] in ("SCHEDULING", "RUNNING", "UPDATING")]


def sandboxes_by_purpose(hub, run_id):
    """Every sandbox HF ever started for the run (live or not), counted by namespace and purpose
    label: training's in the sandbox namespace, held-out ones in the eval namespace."""
    counts = {}
    for ns in (SANDBOX_ORG, EVAL_ORG):
        for j in jobs_of(hub, run_id, ns):
            key = f"{ns}/{(j.get('labels') or {}).get('arena-purpose', '?')}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def sandbox_switches(hub, **switches):
    """The stand-in's sandbox switches (`start_s`: seconds every sandbox stays SCHEDULING before its
    command starts; `never_serve`: how many of the next sandboxes never start), set when given."""
    req = urllib.request.Request(f"{hub}/_standin/sandboxes", method="PUT" if switches else "GET",
                                 data=json.dumps(switches).encode() if switches else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def run_events(home: Path, run_id: str) -> list:
    """The run's events as the node's trainer wrote them (its folder moves to done/ at the end)."""
    from arena_cluster.rundir import RunDir

    for folder in (home / "runs" / run_id, home / "done" / run_id):
        if (folder / "events.jsonl").exists():
            return RunDir(folder).events()
    return []
