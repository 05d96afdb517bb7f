"""Admission agrees with the real `openenv validate --url URL --json` (openenv 0.10.0 from PyPI,
what participants validate with today, which dev/test installs beside the tests) on every variant of
the local OpenEnv image: the echo environment openenv-core 0.3.0's `openenv init` generates
(dev/demo/openenv/arena_echo, run on openenv-core 0.3.0 as its image runs it), served by the
stand-in as `ghcr.io/test/arena-echo:VARIANT`. The arena refuses a server the tool fails
(`OPENENV_ENDPOINT_INVALID`, or `SANDBOX_STARTUP_FAILED` when `/health` never answers) and passes
the endpoints of every server the tool passes; the schema and episode variants pass the tool and are
refused for their own reasons. The variants are submitted at once (admission probes them side by
side), each by its own account: every account has one accepted submission a day.

Environments built on openenv 0.10 itself are admitted too: the demo's echo (`echo_010`), its task
API environment (`task_echo`, tasks chosen at reset by split and index) and its tools environment
(`tools_echo`, MCP tools), served as `ghcr.io/arena-demo/{echo-010,task-echo,tools-echo}:v1`, pass
the tool and are `validated` as their demo submissions (dev/demo/openenv/submission-*.json) say."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dev" / "demo" / "openenv"
ECHO_ENV = DEMO / "arena_echo"
SCHEMA = json.loads((DEMO / "submission.json").read_text())["schema"]

# variant: (account, the arena's verdict, its code, error_origin)
VARIANTS = {
    "ok": ("frank", "validated", None, None),
    "no-health": ("grace", "rejected", "SANDBOX_STARTUP_FAILED", "platform"),
    "no-mcp": ("heidi", "rejected", "OPENENV_ENDPOINT_INVALID", "author"),
    "schema-differs": ("ivan", "rejected", "IMAGE_SCHEMA_MISMATCH", "author"),
    "never-ends": ("judy", "rejected", "ADMISSION_EPISODE_FAILED", "author"),
    "reward-too-high": ("mallory", "rejected", "ADMISSION_EPISODE_FAILED", "author"),
}
ENDPOINT_CODES = {"OPENENV_ENDPOINT_INVALID", "SANDBOX_STARTUP_FAILED"}

# The demo's openenv 0.10 environments: image (ghcr.io/arena-demo/NAME:v1, tests/fixtures/images),
# (account, its folder under dev/demo/openenv, its demo submission). Accounts no other test here
# submits with.
OPENENV_010 = {
    "echo-010": ("bob", "echo_010", "submission-echo-010.json"),
    "task-echo": ("carol", "task_echo", "submission-task-echo.json"),
    "tools-echo": ("dave", "tools_echo", "submission-tools-echo.json"),
}


def user_token(name):
    users = json.loads(Path(os.environ["ARENA_TEST_USERS"]).read_text())
    return next(u["token"] for u in users if u["name"] == name)


def token(variant):
    return user_token(VARIANTS[variant][0])


def installed(var, what):
    folder = os.environ.get(var)
    if not folder:
        pytest.fail(f"{var} is not set: run these tests through dev/test, which installs {what}")
    return folder


def openenv_core():
    """openenv-core 0.3.0, which the arena_echo images run on."""
    return installed("ARENA_TEST_OPENENV_CORE", "openenv-core")


def openenv_010():
    """openenv 0.10.0: its `openenv validate`, and the runtime of the demo's 0.10 environments."""
    return installed("ARENA_TEST_OPENENV", "openenv")


def openenv_validate(variant):
    """Whether `openenv validate --url` passes the variant's server, run here as the image runs it
    (on openenv-core 0.3.0)."""
    return validate_server(variant, ECHO_ENV, openenv_core(), {"ARENA_ECHO_VARIANT": variant})


def validate_server(label, folder, runtime, extra_env=None):
    """Whether openenv 0.10's `openenv validate --url URL --json` passes the server of `folder`
    (`uvicorn server.app:app` there, with the OpenEnv release `runtime` on PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=runtime, **(extra_env or {}))

    def launch(port, out):
        return subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)

    def up(port):  # once it serves anything (`no-health` has no /health)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=2).read()
        return True

    with tempfile.TemporaryDirectory() as logs:
        server, port = start_server(launch, Path(logs) / "server.log", f"the {label} server", up=up)
        try:
            # 0.10 prints a text report unless asked for JSON (0.3.0 printed JSON either way).
            tool = openenv_010()
            r = subprocess.run([sys.executable, f"{tool}/bin/openenv", "validate", "--url", f"http://127.0.0.1:{port}",
                                "--json"], env=dict(os.environ, PYTHONPATH=tool), capture_output=True, text=True,
                               timeout=120)
            report = json.loads(r.stdout)
            assert report["passed"] == (r.returncode == 0), r.stdout
            return report["passed"]
        finally:
            server.terminate()
            server.wait()


def call(method, url, tok, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


@pytest.fixture(scope="module")
def verdicts():
    """Every variant submitted at once; the arena's final answer for each."""
    arena_url = os.environ.get("ARENA_TEST_URL")
    if not arena_url:
        pytest.fail("ARENA_TEST_URL is not set: run these tests through dev/test, which starts the arena")
    stamp = int(time.time())
    ids = {}
    for variant in VARIANTS:
        ids[variant] = "agree-%s-%d" % (variant, stamp)
        body = {
            "submission_id": ids[variant],
            "name": "Arena echo " + variant,
            "image": "ghcr.io/test/arena-echo:" + variant,
            "schema": SCHEMA,
            # 3,600 s of walls: three steps fit in the run's time (fewer sandboxes than the defaults' five).
            "tasks": [{"task_id": "echo-1", "split": "train", "rollout_wall_s": 3300}],
            "example_actions": [{"message": "hello"}, {"message": "done"}],
            # Episodes that do not end by themselves are scored through it: each step trains.
            "finish_action": {"message": "done"},
        }
        status, answer = call("POST", arena_url + "/api/openenv/submissions", token(variant), body)
        assert status == 202, (variant, answer)
    # The tool's verdicts while the arena admits, one server at a time (each imports openenv-core
    # and fastmcp: a second or two of CPU, well inside the sandboxes' 120 s health limit).
    theirs = {variant: openenv_validate(variant) for variant in VARIANTS}
    # `no-health` answers 404 from a running app (refused at once, twice: one more fresh sandbox); the
    # others start uvicorn.
    deadline = time.time() + 240
    answers = {}
    while len(answers) < len(VARIANTS):
        for variant in set(VARIANTS) - set(answers):
            status, answer = call("GET", arena_url + "/api/openenv/submissions/" + ids[variant], token(variant))
            assert status == 200, answer
            if answer["state"] != "validating":
                answers[variant] = answer
        assert time.time() < deadline, {v: a["state"] for v, a in answers.items()}
        time.sleep(1)
    return {variant: (answers[variant], theirs[variant]) for variant in VARIANTS}


def test_the_admitted_variant_trains_to_completed(verdicts):
    """The arena hands the admitted submission to the simulated cluster, whose trainer plays its
    episodes against the image's server (a fresh sandbox each) until the run ends."""
    arena_url = os.environ["ARENA_TEST_URL"]
    tok = token("ok")
    sub = verdicts["ok"][0]["submission_id"]
    deadline = time.time() + 420
    while True:
        status, answer = call("GET", arena_url + "/api/openenv/submissions/" + sub, tok)
        run_id = answer["run"]["run_id"]
        if run_id:
            status, run = call("GET", arena_url + "/api/openenv/runs/" + run_id, tok)
            assert status == 200, run
            if run["state"] in ("completed", "failed", "cancelled"):
                break
        assert time.time() < deadline, answer
        time.sleep(2)
    assert (run["state"], run["policy_version"]) == ("completed", 3), run
    status, events = call("GET", arena_url + "/api/openenv/runs/%s/events" % run_id, tok)
    states = [e["state"] for e in events["events"]]
    # The held-out benchmark before the first step and after the last: each phase's start and end.
    assert states == (["starting", "loading", "evaluating", "evaluating"] + ["rolling", "updating"] * 3
                      + ["evaluating", "evaluating", "cleanup", "completed"]), states
    assert run["evaluation"]["state"] == "complete" and run["evaluation"]["simulated"], run["evaluation"]
    # Another account does not see it.
    status, other = call("GET", arena_url + "/api/openenv/runs/" + run_id, token("never-ends"))
    assert (status, other["code"]) == (404, "RUN_NOT_FOUND")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_admission_agrees_with_openenv_validate(verdicts, variant):
    answer, theirs = verdicts[variant]
    _, state, code, origin = VARIANTS[variant]
    errors = answer["report"]["errors"]
    assert (answer["state"], errors[0]["code"] if errors else None, answer["error_origin"]) == (state, code, origin), answer
    ours = not errors or errors[0]["code"] not in ENDPOINT_CODES
    assert ours == theirs, (variant, answer)


@pytest.fixture(scope="module")
def openenv_010_verdicts():
    """The demo's three openenv 0.10 images submitted at once (after the variants, whose run has
    trained by now), each by its own account; the arena's final answer for each, and the tool's
    verdict on its server. Each admitted submission's run is cancelled as soon as the simulated
    cluster is handed it, so the cluster is free for the tests after these."""
    arena_url = os.environ.get("ARENA_TEST_URL")
    if not arena_url:
        pytest.fail("ARENA_TEST_URL is not set: run these tests through dev/test, which starts the arena")
    stamp = int(time.time())
    ids = {}
    for image, (account, _, submission) in OPENENV_010.items():
        body = json.loads((DEMO / submission).read_text())
        ids[image] = body["submission_id"] = "agree-%s-%d" % (image, stamp)
        assert body["image"] == "ghcr.io/arena-demo/%s:v1" % image, body["image"]
        status, answer = call("POST", arena_url + "/api/openenv/submissions", user_token(account), body)
        assert status == 202, (image, answer)
    runtime = openenv_010()
    theirs = {image: validate_server(image, DEMO / folder, runtime) for image, (_, folder, _) in OPENENV_010.items()}
    # Each sandbox starts uvicorn on openenv 0.10 (fastmcp imported: a second or two of CPU); the
    # three submissions hold seven tasks, probed three at a time.
    deadline = time.time() + 600
    answers, cancelled = {}, set()
    while len(answers) < len(OPENENV_010) or any(
            a["state"] == "validated" and image not in cancelled for image, a in answers.items()):
        for image in OPENENV_010:
            if image in cancelled:
                continue
            tok = user_token(OPENENV_010[image][0])
            status, answer = call("GET", arena_url + "/api/openenv/submissions/" + ids[image], tok)
            assert status == 200, answer
            if answer["state"] == "validating":
                continue
            answers[image] = answer
            run_id = (answer.get("run") or {}).get("run_id")
            if answer["state"] == "validated" and run_id:
                status, run = call("POST", arena_url + "/api/openenv/runs/%s/cancel" % run_id, user_token("eve"), {})
                assert status == 200, run
                cancelled.add(image)
        assert time.time() < deadline, {i: (a["state"], i in cancelled) for i, a in answers.items()}
        time.sleep(1)
    return {image: (answers[image], theirs[image]) for image in OPENENV_010}


@pytest.mark.parametrize("image", sorted(OPENENV_010))
def test_openenv_010_environments_are_admitted_as_openenv_validate_passes_them(openenv_010_verdicts, image):
    answer, theirs = openenv_010_verdicts[image]
    assert theirs, f"openenv validate fails the {image} server"
    assert (answer["state"], answer["report"]["errors"], answer["error_origin"]) == ("validated", [], None), answer
