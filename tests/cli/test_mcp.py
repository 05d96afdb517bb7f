"""`/mcp`: the arena as an MCP server, driven with the official MCP Python client (`mcp` 2.3,
through mcp_client.py). Without a token it answers 401 and points at its protected-resource
metadata, which names Hugging Face as the authorization server. With one, the tools walk the
guide's Start here as `walter` on local-demo (whoami, register, validate, submit, preflight, run,
follow it to `scored`, collect, leaderboard) and an OpenEnv submission to `validated`, each answer
equal to what the JSON API answers; a refused call is a tool error with the API's stable code."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from test_collections import publish, tokens  # noqa: F401 (tokens is a fixture)
from test_runs import hub_repos  # noqa: F401 (fixture)

DRIVER = Path(__file__).resolve().parent / "mcp_client.py"
WALTER = "hf_local_test_walter_4a11ce"
OPENENV_DEMO = Path(__file__).resolve().parents[2] / "dev" / "demo" / "openenv" / "submission.json"


def drive(url, steps, token=WALTER, timeout=400):
    client = os.environ.get("ARENA_TEST_MCP_CLIENT")
    if not client or not Path(client, "mcp").is_dir():
        pytest.fail("ARENA_TEST_MCP_CLIENT is not set: run these tests through dev/test, which installs mcp 2.3")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": client, "HOME": "/nonexistent"}
    done = subprocess.run([sys.executable, "-s", str(DRIVER)], input=json.dumps(
        {"url": url + "/mcp", "token": token, "steps": steps}), env=env, capture_output=True, text=True,
        timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def api(method, url, body=None, token=WALTER):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.load(e), e.headers


def without_clock(answer):
    """An answer without the server's clock reading (`now_epoch`), which two reads never share."""
    return {k: v for k, v in answer.items() if k != "now_epoch"}


def rounded(value):
    """Floats to 9 places: a result verified again between two reads may move in its last bits."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def ok(answer):
    assert not answer["is_error"], answer
    return answer["structured"]


def test_without_a_token_it_answers_401_and_names_hugging_face(arena_url):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for token, error in ((None, None), ("hf_not_a_known_token_000", 'error="invalid_token", ')):
        status, body, headers = api("POST", arena_url + "/mcp", hello, token=token)
        assert status == 401, body
        assert body["code"] in ("AUTH_REQUIRED", "INVALID_TOKEN"), body
        challenge = headers["WWW-Authenticate"]
        metadata = arena_url + "/.well-known/oauth-protected-resource/mcp"
        assert challenge == 'Bearer %sresource_metadata="%s"' % (error or "", metadata), challenge
        assert token is None or token not in json.dumps(body)
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        status, doc, _ = api("GET", arena_url + path, token=None)
        assert status == 200, doc
        assert doc["resource"] == arena_url + "/mcp"
        # dev/test's Hugging Face is the stand-in (HF_ENDPOINT, OPENID_PROVIDER_URL).
        assert doc["authorization_servers"] == [os.environ["ARENA_TEST_HUB_URL"]], doc
        assert doc["bearer_methods_supported"] == ["header"]


def test_the_tools_have_schemas_and_the_guides_rules(arena_url):
    out = drive(arena_url, [{"list": True}])
    assert out["server"] == "open-env-arena"
    assert "only when your human asks" in out["instructions"]
    tools = {t["name"]: t for t in out["answers"][0]["tools"]}
    assert len(tools) == 30, sorted(tools)
    for name in ("whoami", "register_agent", "discover", "challenges", "benchmarks", "board_list", "board_post",
                 "validate", "submit", "environments", "run_preflight", "run_start", "runs", "run",
                 "result_collect", "leaderboard", "openenv_check", "openenv_submit", "openenv_submission",
                 "openenv_run", "openenv_run_events", "openenv_leaderboard", "openenv_quota"):
        assert tools[name]["inputSchema"]["type"] == "object", name
        assert tools[name]["outputSchema"]["type"] == "object", name
    assert "Only when your human asked" in tools["board_post"]["description"]
    assert "only after run_preflight allows it" in tools["run_start"]["description"]
    assert tools["whoami"]["annotations"]["readOnlyHint"] is True
    assert tools["run_start"]["annotations"]["readOnlyHint"] is False
    assert tools["run_start"]["inputSchema"]["required"] == ["id", "body"]


def test_the_start_here_flow_answers_as_the_api_does(arena_url, hub_repos):  # noqa: F811
    agent = "walter-agent"
    repo_id, _ = publish(hub_repos, "good", owner="walter")
    environment = {"agent_id": agent, "challenge_id": "local-demo", "repo_type": "dataset", "repo_id": repo_id,
                   "revision": "main", "entry_path": "", "title": "Over MCP", "notes": "Submitted through /mcp."}
    registration = {"agent_id": agent, "description": "The agent of walter: connects over MCP"}
    out = drive(arena_url, [
        {"tool": "whoami"},
        {"tool": "register_agent", "args": {"body": registration}},
        {"tool": "challenge", "args": {"id": "local-demo"}},
        {"tool": "validate", "args": {"body": environment}},
        {"tool": "submit", "args": {"body": environment}},
        {"tool": "whoami"},
    ])
    whoami, registered, challenge, validated, submitted, again_whoami = (ok(a) for a in out["answers"])
    assert whoami["name"] == "walter" and whoami["agents"] == []
    # Registered, the agent is walter's.
    assert again_whoami == api("GET", arena_url + "/api/whoami")[1]
    assert [a["agent_id"] for a in again_whoami["agents"]] == [agent]
    status, again, _ = api("POST", arena_url + "/api/agents", registration)
    assert (status, again["existing"], registered["existing"]) == (200, True, False), again
    assert again["agent"] == registered["agent"] and registered["agent"]["agent_id"] == agent
    assert challenge == api("GET", arena_url + "/api/challenges/local-demo")[1]
    assert validated["valid"] is True, validated
    env_id = submitted["environment_id"]
    request = {"request_id": "walter-mcp-%s" % uuid.uuid4().hex[:8], "environment_id": env_id, "agent_id": agent}
    out = drive(arena_url, [
        {"tool": "environment", "args": {"id": env_id}},
        # Another test's run may hold local-demo's one slot: the preflight says when it is free.
        {"tool": "run_preflight", "args": {"id": "local-demo", "environment_id": env_id},
         "until": {"field": "allowed", "in": [True]}, "timeout": 240},
        {"tool": "run_start", "args": {"id": "local-demo", "body": request}},
        # The same request again answers the same run (idempotent by request_id).
        {"tool": "run_start", "args": {"id": "local-demo", "body": request}},
    ])
    environment_read, preflight, launched, relaunched = (ok(a) for a in out["answers"])
    assert environment_read == api("GET", arena_url + "/api/environments/" + env_id)[1]
    assert preflight["allowed"] is True, preflight
    run_id = launched["run"]["run_id"]
    assert relaunched["run"]["run_id"] == run_id and relaunched["existing"] is True, relaunched
    out = drive(arena_url, [
        {"tool": "run", "args": {"id": "local-demo", "run_id": run_id},
         "until": {"field": "state", "in": ["scored", "failed", "canceled"]}, "timeout": 240},
        {"tool": "result_collect", "args": {"id": "local-demo", "run_id": run_id}},
        {"tool": "result", "args": {"id": "local-demo", "run_id": run_id}},
        {"tool": "leaderboard", "args": {"id": "local-demo"}},
        {"tool": "runs", "args": {"id": "local-demo"}},
    ])
    run, collected, result, board, runs = (ok(a) for a in out["answers"])
    assert run["state"] == "scored", run
    assert without_clock(run) == without_clock(api("GET", arena_url + "/api/challenges/local-demo/runs/" + run_id)[1])
    assert collected["run_id"] == run_id
    assert rounded(result) == rounded(api("GET", arena_url + "/api/challenges/local-demo/runs/%s/result" % run_id)[1])
    assert rounded(board) == rounded(api("GET", arena_url + "/api/challenges/local-demo/leaderboard")[1])
    assert run_id in json.dumps(runs)


def test_an_openenv_submission_reaches_validated(arena_url, tokens):
    demo = json.loads(OPENENV_DEMO.read_text())
    body = {"submission_id": "walter-mcp-%d" % int(time.time()), "name": "Echo over MCP",
            "image": "ghcr.io/test/arena-echo:ok", "schema": demo["schema"],
            "tasks": [{"task_id": "echo-1", "split": "train"}],
            "example_actions": [{"message": "hello"}, {"message": "done"}], "finish_action": {"message": "done"}}
    out = drive(arena_url, [
        {"tool": "openenv_check", "args": {"body": body}},
        {"tool": "openenv_submit", "args": {"body": body}},
        {"tool": "openenv_submission", "args": {"id": body["submission_id"]},
         "until": {"field": "state", "in": ["validated", "rejected"]}, "timeout": 240},
        {"tool": "openenv_quota"},
        {"tool": "openenv_leaderboard", "args": {"by": "account"}},
    ])
    checked, submitted, decided, quota, board = (ok(a) for a in out["answers"])
    assert submitted["state"] == "validating", submitted
    assert decided["state"] == "validated", decided
    # A validated submission's run is assigned by a pass of its own, so it may appear (and move on)
    # between the two reads: the rest of the answer is the same, and the run is waited for.
    deadline = time.time() + 60
    while True:
        direct = api("GET", arena_url + "/api/openenv/submissions/" + body["submission_id"])[1]
        run_id = direct["run"]["run_id"]
        if run_id or time.time() > deadline:
            break
        time.sleep(0.5)
    assert run_id, direct
    assert decided["run"]["run_id"] in (None, run_id), (decided, direct)
    # The run, its place in the queue, the update's time and the seconds until the next slot move
    # between the two reads.
    moving = ("run", "queue", "updated_at")
    for answer in (decided, direct):
        answer["slot"].pop("retry_after_s", None)
    assert {k: v for k, v in decided.items() if k not in moving} == {k: v for k, v in direct.items() if k not in moving}
    assert quota == api("GET", arena_url + "/api/openenv/quota")[1]
    # Either view of this route may answer, so its answer comes under `answer`.
    assert board["answer"]["total"] == api("GET", arena_url + "/api/openenv/leaderboard?by=account")[1]["total"]
    # Its run is not this test's business: cancelled and waited for, so that the cluster is free for
    # the others and no run is going on when the predeploy check looks.
    status, run = api("POST", arena_url + "/api/openenv/runs/%s/cancel" % run_id, {}, token=tokens["eve"])[:2]
    assert status == 200, run
    deadline = time.time() + 240
    while run["state"] not in ("completed", "failed", "cancelled"):
        assert time.time() < deadline, run
        time.sleep(1)
        run = api("GET", arena_url + "/api/openenv/runs/" + run_id)[1]


def test_a_refused_call_is_a_tool_error_with_the_apis_code(arena_url):
    out = drive(arena_url, [
        {"tool": "challenge", "args": {"id": "no-such-challenge"}},
        {"tool": "board_post", "args": {"body": {"request_id": "x", "agent_id": "nobody-agent", "body": "hi",
                                                  "refs": [], "broadcast": False}}},
        {"tool": "run", "args": {"id": "local-demo"}},
        {"tool": "whoami", "args": {"surprise": 1}},
        {"tool": "challenge", "args": {"id": "../../api/whoami"}},
    ])
    missing, post, no_run_id, unknown, traversal = out["answers"]
    status, direct, _ = api("GET", arena_url + "/api/challenges/no-such-challenge")
    assert missing["is_error"] and missing["structured"] == dict(direct, status=status), missing
    assert post["is_error"] and post["structured"]["status"] in (400, 403, 404, 422), post
    assert post["structured"]["code"] == api("POST", arena_url + "/api/board/messages", {
        "request_id": "x", "agent_id": "nobody-agent", "body": "hi", "refs": [], "broadcast": False})[1]["code"]
    for refused, says in ((no_run_id, "needs `run_id`"), (unknown, "takes no argument `surprise`")):
        assert refused["is_error"] and refused["structured"]["code"] == "INVALID_JSON", refused
        assert says in refused["structured"]["message"], refused
    # An id is one path segment: it cannot climb to another route.
    assert traversal["is_error"] and traversal["structured"]["status"] in (400, 404), traversal
