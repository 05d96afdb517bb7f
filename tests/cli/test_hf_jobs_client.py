"""The HF stand-in's Jobs API read and written with the real huggingface_hub client (2.4.0, the
version these checks were written against): `run_job`, `inspect_job`, `list_jobs` with its label and
stage filters, `fetch_job_logs`, `fetch_job_metrics` and `cancel_job` as the arena's own token
(arena-bot, a writer in `benchflow`); the same reads while the stand-in answers explicit nulls; the
labels HF refuses. Then the bodies the arena sends HF (a run's job and an admission sandbox, read
from `GET /_standin/jobs/bodies`) have the keys and JSON types of the body `run_job` sends for the
same values, so that a body the stand-in takes is one HF takes too."""

import json
import os
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

# huggingface_hub reads these when it is imported.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_HUB_OFFLINE", None)

from huggingface_hub import HfApi  # noqa: E402
from huggingface_hub.errors import HfHubHTTPError  # noqa: E402

from conftest import hub_url, run_cli  # noqa: E402
from test_collections import hub_repos, publish  # noqa: E402,F401 (hub_repos is a fixture)
from test_openenv import SCHEMA, call  # noqa: E402

ARENA_BOT = "hf_local_test_arena_bot_5a5a5a"
# Accounts no other test launches with: a run counts against its environment's day, and admission
# holds an account's daily slot.
OSCAR = "hf_local_test_oscar_f5a197"
PEGGY = "hf_local_test_peggy_2f8a0c"
NAMESPACE = "benchflow"
UV_IMAGE = "ghcr.io/astral-sh/uv:python3.12-bookworm"
STAGES = ("SCHEDULING", "RUNNING", "COMPLETED", "CANCELED", "ERROR", "DELETED")
FINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
RUN_PURPOSES = ("challenge-run", "baseline")
# What HF streams a second for a running job (hf_api.py, `fetch_job_metrics`).
METRIC_KEYS = {"cpu_usage_pct", "cpu_millicores", "memory_used_bytes", "memory_total_bytes", "rx_bps", "tx_bps",
               "gpus", "replica"}


def standin(method, path, body=None, token=None):
    """The stand-in's answer (JSON, or None when empty) to a request of its own routes."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(hub_url() + path, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def bodies():
    return standin("GET", "/_standin/jobs/bodies")


def body_of(job_id):
    found = [b["body"] for b in bodies() if b["id"] == job_id]
    assert len(found) == 1, "the stand-in recorded %d bodies for job %s" % (len(found), job_id)
    return found[0]


def unique():
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def api():
    return HfApi(endpoint=hub_url(), token=ARENA_BOT)


class Started:
    """The jobs a test started; those still live are canceled when it ends."""

    def __init__(self, api):
        self.api, self.ids = api, []

    def run(self, **kw):
        job = self.api.run_job(namespace=NAMESPACE, **kw)
        self.ids.append(job.id)
        return job

    def cancel(self, job_id):
        self.api.cancel_job(job_id=job_id, namespace=NAMESPACE)

    def stop(self, job_id):
        if self.api.inspect_job(job_id=job_id, namespace=NAMESPACE).status.stage not in FINAL:
            self.cancel(job_id)

    def stop_all(self):
        for job_id in self.ids:
            self.stop(job_id)


@pytest.fixture
def jobs(api):
    started = Started(api)
    yield started
    started.stop_all()


def wait_stage(api, job_id, stages, within):
    """The job once it reaches one of `stages`; fails if it ends in another or the time runs out."""
    deadline = time.time() + within
    while True:
        job = api.inspect_job(job_id=job_id, namespace=NAMESPACE)
        if job.status.stage in stages:
            return job
        assert job.status.stage not in FINAL, (job_id, job.status)
        assert time.time() < deadline, "job %s is still %s after %d s" % (job_id, job.status.stage, within)
        time.sleep(0.5)


def listed(api, **filters):
    return [j.id for j in api.list_jobs(namespace=NAMESPACE, **filters)]


# ---- the client's calls ----


def test_a_job_runs_to_completed_and_reads_back(api, jobs):
    uid = unique()
    labels = {"arena-test": "client-check", "arena-test-id": uid}
    command = ["python3", "-c", "print('hello from a job')"]
    job = jobs.run(image=UV_IMAGE, command=command, labels=labels, flavor="cpu-basic", timeout="2m")
    assert len(job.id) > 0 and job.status.stage in ("SCHEDULING", "RUNNING"), job
    assert (job.docker_image, job.space_id, job.command, job.flavor) == (UV_IMAGE, None, command, "cpu-basic")
    assert (job.owner.name, job.owner.type) == (NAMESPACE, "org"), job.owner
    assert {k: job.labels[k] for k in labels} == labels, job.labels
    # run_job names every job it starts: the image and a hash of the command.
    assert job.labels["name"].startswith("uv-python3-12-bookworm-"), job.labels
    assert job.created_at is not None and job.finished_at is None
    assert job.url == "%s/jobs/%s/%s" % (hub_url(), NAMESPACE, job.id)

    done = wait_stage(api, job.id, ("COMPLETED",), 60)
    assert done.started_at is not None and done.finished_at is not None and done.started_at <= done.finished_at
    assert done.durations is not None and done.durations.total_secs is not None, done.durations
    assert (done.expose, done.expose_public, done.status.expose_urls) == (None, None, None), done
    assert "hello from a job" in list(api.fetch_job_logs(job_id=job.id, namespace=NAMESPACE))

    assert job.id in listed(api)
    assert listed(api, labels={"arena-test-id": uid}) == [job.id]
    assert listed(api, labels=labels, status="COMPLETED") == [job.id]
    assert listed(api, labels={"arena-test-id": uid}, status=["SCHEDULING", "RUNNING"]) == []
    assert listed(api, labels={"arena-test-id": uid, "arena-test": "other"}) == []


def test_metrics_stream_while_running_and_cancel_ends_the_job(api, jobs):
    uid = unique()
    job = jobs.run(image=UV_IMAGE, command=["python3", "-c", "import time; time.sleep(8)"],
                   labels={"arena-test-id": uid}, timeout=60)
    wait_stage(api, job.id, ("RUNNING",), 30)
    samples = list(api.fetch_job_metrics(job_id=job.id, namespace=NAMESPACE))
    assert len(samples) == 1, samples
    assert METRIC_KEYS <= set(samples[0]), samples[0]
    assert samples[0]["gpus"] == {}, "cpu-basic has no GPU"

    jobs.cancel(job.id)
    canceled = wait_stage(api, job.id, ("CANCELED",), 15)
    assert canceled.finished_at is not None
    # The stand-in answers 406 once the job has ended, which the client reads as no sample.
    assert list(api.fetch_job_metrics(job_id=job.id, namespace=NAMESPACE)) == []
    assert listed(api, labels={"arena-test-id": uid}, status="CANCELED") == [job.id]


def test_the_stand_in_records_the_body_run_job_sends(api, jobs):
    """Every option the arena uses, as run_job 2.4 serializes it; the job answers `retry`, not
    `attempts`, and no `type` or `status.failureCount`, as HF does."""
    uid = unique()
    command = ["python3", "-c", "import sys; sys.exit(3)"]
    job = jobs.run(image=UV_IMAGE, command=command, env={"ARENA_TEST": "1"}, secrets={"ARENA_TEST_SECRET": "s3cret"},
                   flavor="cpu-basic", timeout=90, attempts=2, labels={"arena-test-id": uid}, expose=[8000],
                   expose_public=[8001])
    assert body_of(job.id) == {
        "command": command,
        "arguments": [],
        "environment": {"ARENA_TEST": "1"},
        "flavor": "cpu-basic",
        "secrets": {"ARENA_TEST_SECRET": "***"},
        "timeoutSeconds": 90,
        "attempts": 2,
        "labels": {"arena-test-id": uid, "name": job.labels["name"]},
        "expose": {"ports": [8000, 8001], "portsPublic": [8001]},
        "dockerImage": UV_IMAGE,
    }
    assert (job.retry, job.expose, job.expose_public) == (1, [8000, 8001], [8001]), job
    # Both attempts exit 3.
    wait_stage(api, job.id, ("ERROR",), 60)
    raw = standin("GET", "/api/jobs/%s/%s" % (NAMESPACE, job.id), token=ARENA_BOT)
    assert "s3cret" not in json.dumps(raw)
    shown = ("attempts" in raw, "type" in raw, "failureCount" in raw["status"], raw.get("retry"))
    assert shown == (False, False, False, 1), raw


def test_reads_parse_while_the_stand_in_answers_nulls(api, jobs):
    uid = unique()
    command = ["python3", "-c", "print('nulls')"]
    before = jobs.run(image=UV_IMAGE, command=command, labels={"arena-test-id": uid})
    standin("PUT", "/_standin/jobs", {"nulls": True})
    try:
        during = jobs.run(image=UV_IMAGE, command=command, labels={"arena-test-id": uid})
        raw = standin("GET", "/api/jobs/%s/%s" % (NAMESPACE, during.id), token=ARENA_BOT)
        # Every optional field that holds nothing is an explicit null (a set field stays set).
        nulls = {"arguments": raw.get("arguments", "absent"), "environment": raw.get("environment", "absent"),
                 "secrets": raw.get("secrets", "absent"), "spaceId": raw.get("spaceId", "absent"),
                 "status.sshUrl": raw["status"].get("sshUrl", "absent"),
                 "status.message": raw["status"].get("message", "absent")}
        assert all(value is None for value in nulls.values()), nulls
        for job_id in (before.id, during.id):
            job = api.inspect_job(job_id=job_id, namespace=NAMESPACE)
            assert (job.id, job.owner.name, job.labels["arena-test-id"], job.command) == (job_id, NAMESPACE, uid, command), job
            assert job.status.stage in STAGES, job.status
        assert sorted(listed(api, labels={"arena-test-id": uid})) == sorted([before.id, during.id])
        assert all(j.status.stage in STAGES for j in api.list_jobs(namespace=NAMESPACE))
        wait_stage(api, during.id, ("COMPLETED",), 60)
        assert "nulls" in list(api.fetch_job_logs(job_id=during.id, namespace=NAMESPACE))
    finally:
        standin("DELETE", "/_standin/jobs")
    assert api.inspect_job(job_id=during.id, namespace=NAMESPACE).labels["arena-test-id"] == uid


@pytest.mark.parametrize("labels", [
    {"arena-request": "a:b.c"},
    {"arena-request": "x" * 101},
    {"arena-request": ""},
    {"arena.request": "ok"},
    {"k" * 101: "ok"},
], ids=["punctuation", "101-char-value", "empty-value", "dotted-key", "101-char-key"])
def test_labels_hf_refuses_are_refused(api, jobs, labels):
    uid = unique()
    with pytest.raises(HfHubHTTPError) as refused:
        jobs.run(image=UV_IMAGE, command=["true"], labels={**labels, "arena-test-id": uid})
    assert refused.value.response.status_code == 400
    assert isinstance(refused.value.response.json()["error"], str), refused.value.response.text
    assert listed(api, labels={"arena-test-id": uid}) == [], "a refused create made no job"


def test_a_label_of_100_characters_is_taken(api, jobs):
    uid = unique()
    job = jobs.run(image=UV_IMAGE, command=["true"], labels={"arena-test-id": uid, "k" * 100: "v" * 100})
    assert job.labels["k" * 100] == "v" * 100


def test_a_job_without_a_command_is_refused(api, jobs):
    with pytest.raises(HfHubHTTPError) as refused:
        jobs.run(image=UV_IMAGE, command=[], labels={"arena-test-id": unique()})
    assert refused.value.response.status_code == 400


# ---- the arena's bodies against the client's ----


def json_type(value):
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null", list: "array",
            dict: "object"}[type(value)]


def shape_diff(theirs, ours, path="body"):
    """Where two JSON values differ in keys or types: objects key by key, arrays by their items' types."""
    if json_type(theirs) != json_type(ours):
        return ["%s: the arena sends %s, run_job %s" % (path, json_type(theirs), json_type(ours))]
    if isinstance(theirs, dict):
        out = []
        for key in sorted(set(theirs) | set(ours)):
            if key not in ours:
                out.append("%s.%s: only the arena sends it" % (path, key))
            elif key not in theirs:
                out.append("%s.%s: only run_job sends it" % (path, key))
            else:
                out += shape_diff(theirs[key], ours[key], "%s.%s" % (path, key))
        return out
    if isinstance(theirs, list) and theirs and ours:
        kinds = [sorted({json_type(x) for x in xs}) for xs in (theirs, ours)]
        if kinds[0] != kinds[1]:
            return ["%s[]: the arena sends %s, run_job %s" % (path, kinds[0], kinds[1])]
    return []


def arena_bodies(purposes):
    return [b for b in bodies() if (b["body"].get("labels") or {}).get("arena-purpose") in purposes]


def wait_for_body(purposes, within):
    deadline = time.time() + within
    while True:
        found = arena_bodies(purposes)
        if found:
            return found[-1]["body"]
        assert time.time() < deadline, "the arena created no job labelled arena-purpose in %s within %d s" % (
            purposes, within)
        time.sleep(1)


@pytest.fixture(scope="module")
def arena_run_body(hub_repos):
    """The body of a run's job: one the arena sent already, or that of a run oscar launches on
    local-demo (followed to its end, so that the arena's one run slot is free again)."""
    found = arena_bodies(RUN_PURPOSES)
    if found:
        yield found[-1]["body"]
        return
    arena_url = os.environ["ARENA_TEST_URL"]
    repo_id, _ = publish(hub_repos, "good", owner="oscar")
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    env_file = tmp / ("env-%s.json" % unique())
    env_file.write_text(json.dumps({"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset",
                                    "repo_id": repo_id, "revision": "main", "entry_path": "",
                                    "title": "Jobs client check", "notes": ""}))
    r = run_cli(["submit", "--file", str(env_file)], arena_url, token=OSCAR)
    assert r.returncode == 0, r.stderr
    environment_id = json.loads(r.stdout)["environment_id"]
    run_file = tmp / ("run-%s.json" % unique())
    run_file.write_text(json.dumps({"request_id": "oscar-jobs-client-%s" % unique()}))
    r = run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", str(run_file), "--execute"],
                arena_url, token=OSCAR)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    try:
        yield wait_for_body(RUN_PURPOSES, 60)
    finally:
        deadline = time.time() + 120
        while True:
            r = run_cli(["runs", "--challenge", "local-demo", "--run-id", run_id], arena_url)
            assert r.returncode == 0, r.stderr
            state = json.loads(r.stdout)["state"]
            if state in ("scored", "failed", "canceled"):
                break
            assert time.time() < deadline, "run %s is still %s" % (run_id, state)
            time.sleep(1)


@pytest.fixture(scope="module")
def admission_body():
    """The body of an admission sandbox: one the arena sent already, or one for peggy's submission of
    the demo's echo environment in its `no-mcp` variant (refused at the endpoint check, so no
    training run follows; its verdict is awaited so that its sandboxes are gone)."""
    found = arena_bodies(("openenv-admission",))
    if found:
        yield found[-1]["body"]
        return
    arena_url = os.environ["ARENA_TEST_URL"]
    submission_id = "jobs-client-%d" % int(time.time())
    body = {"submission_id": submission_id, "name": "Jobs client check", "image": "ghcr.io/test/arena-echo:no-mcp",
            "schema": SCHEMA, "tasks": [{"task_id": "echo-1", "split": "train", "rollout_wall_s": 3300}],
            "example_actions": [{"message": "hello"}, {"message": "done"}], "finish_action": {"message": "done"}}
    status, answer = call("POST", arena_url + "/api/openenv/submissions", PEGGY, body)
    assert status == 202, answer
    try:
        yield wait_for_body(("openenv-admission",), 120)
    finally:
        deadline = time.time() + 240
        while True:
            status, answer = call("GET", arena_url + "/api/openenv/submissions/" + submission_id, PEGGY)
            assert status == 200, answer
            if answer["state"] != "validating":
                break
            assert time.time() < deadline, answer
            time.sleep(1)


def mirror(jobs, theirs):
    """run_job with the values of the arena's body, and the body the stand-in recorded for it. Secret
    values are dummies; every label value and ARENA_URL are changed (same keys, same types) so that
    neither the arena's label lookups nor the job's programs take the copy for the arena's job."""
    uid = unique()
    expose = theirs.get("expose") or {}
    env = dict(theirs.get("environment") or {})
    if "ARENA_URL" in env:
        env["ARENA_URL"] = "http://127.0.0.1:9"
    image = theirs.get("dockerImage") or "https://huggingface.co/spaces/" + theirs["spaceId"]
    try:
        job = jobs.run(image=image, command=theirs.get("command"), env=env,
                       secrets={name: "dummy" for name in theirs.get("secrets") or {}}, flavor=theirs.get("flavor"),
                       timeout=theirs.get("timeoutSeconds"), attempts=theirs.get("attempts"),
                       labels={key: "mirror-" + uid for key in theirs.get("labels") or {}},
                       expose=expose.get("ports"), expose_public=expose.get("portsPublic"))
    except HfHubHTTPError as e:
        pytest.fail("the stand-in refused run_job with the arena's values (%s): %s\n%s" % (
            e.response.status_code, e.response.text, json.dumps(theirs, indent=1)))
    # Only the recorded body matters: the copy need not run (a sandbox image may not, here).
    jobs.stop(job.id)
    ours = body_of(job.id)
    if "name" not in (theirs.get("labels") or {}):
        ours.get("labels", {}).pop("name", None)
    return ours


def assert_same_shape(theirs, ours):
    diff = shape_diff(theirs, ours)
    assert not diff, "\n".join(diff + ["the arena's body:", json.dumps(theirs, indent=1),
                                       "run_job's body:", json.dumps(ours, indent=1)])


def test_a_runs_job_body_has_the_shape_run_job_sends(jobs, arena_run_body):
    assert_same_shape(arena_run_body, mirror(jobs, arena_run_body))


def test_an_admission_sandbox_body_has_the_shape_run_job_sends(jobs, admission_body):
    assert_same_shape(admission_body, mirror(jobs, admission_body))


VICTOR = "hf_local_test_victor_6d1e2f"


def hf_accepts(text):
    return 1 <= len(text) <= 100 and all(c.isascii() and (c.isalnum() or c in "-_") for c in text)


def test_a_run_whose_request_id_hf_refuses_as_a_label_is_scored(hub_repos):
    """A request id with `:` and `.`, longer than 100 characters (the arena takes up to 120): the
    run's job carries labels HF accepts, the run is scored, and every job the arena created has
    HF-valid labels and a non-empty command."""
    arena_url = os.environ["ARENA_TEST_URL"]
    repo_id, _ = publish(hub_repos, "good", owner="victor")
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    env_file = tmp / ("env-%s.json" % unique())
    env_file.write_text(json.dumps({"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset",
                                    "repo_id": repo_id, "revision": "main", "entry_path": "",
                                    "title": "Labels HF accepts", "notes": ""}))
    r = run_cli(["submit", "--file", str(env_file)], arena_url, token=VICTOR)
    assert r.returncode == 0, r.stderr
    environment_id = json.loads(r.stdout)["environment_id"]
    request_id = "victor-" + "x" * 100 + ":1.2"
    assert len(request_id) > 100 and not hf_accepts(request_id)
    run_file = tmp / ("run-%s.json" % unique())
    run_file.write_text(json.dumps({"request_id": request_id}))
    r = run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", str(run_file), "--execute"],
                arena_url, token=VICTOR)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    deadline = time.time() + 240
    while True:
        r = run_cli(["runs", "--challenge", "local-demo", "--run-id", run_id], arena_url)
        assert r.returncode == 0, r.stderr
        view = json.loads(r.stdout)
        if view["state"] in ("scored", "failed", "canceled"):
            break
        assert time.time() < deadline, "run %s is still %s" % (run_id, view["state"])
        time.sleep(2)
    assert view["state"] == "scored", view
    mine = [b["body"] for b in bodies() if b["body"].get("labels", {}).get("arena-run") == run_id]
    assert len(mine) == 1, mine
    assert mine[0]["labels"]["arena-request"] != request_id
    arena_made = [b["body"] for b in bodies() if any(k.startswith("arena-") for k in (b["body"].get("labels") or {}))
                  and "arena-test-id" not in (b["body"].get("labels") or {})]
    for body in arena_made:
        assert body.get("command") and body["command"][0], body
        for k, v in (body.get("labels") or {}).items():
            assert hf_accepts(k) and hf_accepts(v), (k, v)
