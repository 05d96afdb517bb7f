"""Waiting on a run from the CLI (`runs --run-id RUN --wait [--timeout S]`, `result collect
--wait`): it follows the run with backoff, says on stderr how it goes, and exits 0 when the run
scored, 1 when it failed or was canceled, 5 when its timeout ran out first. Against a scripted
server (each exit code) and against the arena (a run followed to scored, then collected)."""

import json
import uuid

from conftest import run_cli
from test_collections import json_answer
from test_runs import alice_collection, hub_repos, write  # noqa: F401 (fixtures)

TOKEN = "hf_local_test_alice_7b1f0c"


def run(state, stage="collect"):
    return json_answer({"run_id": "run-1", "state": state, "stage": stage, "status": "COMPLETED"})


def test_each_ending_has_its_exit_code(scripted_server):
    for state, code in [("scored", 0), ("failed", 1), ("canceled", 1)]:
        server, url = scripted_server([run(state)])
        r = run_cli(["runs", "--challenge", "local-demo", "--run-id", "run-1", "--wait"], url)
        assert r.returncode == code, (state, r.stderr)
        assert json.loads(r.stdout)["state"] == state
        assert "run run-1: %s, stage collect" % state in r.stderr


def test_a_wait_follows_the_run_and_says_each_change(scripted_server):
    not_collected = json_answer({"code": "RESULT_NOT_FOUND", "message": "not collected"}, status=404)
    server, url = scripted_server([run("running", "training"), run("scored"), not_collected])
    r = run_cli(["runs", "--challenge", "local-demo", "--run-id", "run-1", "--wait"], url, timeout=60)
    assert r.returncode == 0, r.stderr
    # The run twice, then (scored) whether its result was collected yet.
    assert [s["path"] for s in server.seen] == ["/api/challenges/local-demo/runs/run-1"] * 2 + [
        "/api/challenges/local-demo/runs/run-1/result"]
    assert "run run-1: running, stage training" in r.stderr and "run run-1: scored" in r.stderr


def test_a_wait_past_its_timeout_exits_5(scripted_server):
    server, url = scripted_server([run("running", "training")] * 3)
    r = run_cli(["runs", "--challenge", "local-demo", "--run-id", "run-1", "--wait", "--timeout", "1"], url)
    assert r.returncode == 5, r.stderr
    assert "did not end within 1 s" in r.stderr


def test_collect_waits_for_the_run_and_collects_only_a_scored_one(scripted_server):
    server, url = scripted_server([run("failed")])
    r = run_cli(["result", "collect", "--challenge", "local-demo", "--run-id", "run-1", "--wait"], url, token=TOKEN)
    assert r.returncode == 1 and "no result to collect" in r.stderr, r.stderr
    assert [s["path"] for s in server.seen] == ["/api/challenges/local-demo/runs/run-1"], "nothing collected"
    result = {"run_id": "run-1", "status": "pending", "baseline_pass_rate": 0.1, "after_pass_rate": 0.2,
              "delta_pp": 10.0, "stderr_pp": 2.0, "trials": 1, "paired_tasks": 3, "infra_error_cells": 0}
    server, url = scripted_server([run("scored"), json_answer(result, 201)])
    r = run_cli(["result", "collect", "--challenge", "local-demo", "--run-id", "run-1", "--wait"], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert server.seen[1]["path"] == "/api/challenges/local-demo/runs/run-1/result"
    r = run_cli(["runs", "--challenge", "local-demo", "--wait"], url)
    assert r.returncode == 2 and "--run-id" in r.stderr


def test_a_run_launched_on_the_arena_is_waited_for_then_collected(arena_url, alice_collection, tmp_path):
    path = write(tmp_path, {"request_id": "alice-wait-%s" % uuid.uuid4().hex[:8]})
    r = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection, "--file", path, "--execute"],
                arena_url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    c = run_cli(["result", "collect", "--challenge", "local-demo", "--run-id", run_id, "--wait", "--timeout", "170"],
                arena_url, token=TOKEN, timeout=200)
    assert c.returncode == 0, c.stderr
    assert "run %s: scored" % run_id in c.stderr
    assert json.loads(c.stdout)["run_id"] == run_id
