"""dev/predeploy.py's exit status: 1 while a relay is connected or reconnecting or a pipeline job runs
or schedules, or when it cannot tell; 0 otherwise. Against tiny scripted servers."""

import json
import subprocess
import sys
from pathlib import Path

from test_collections import json_answer, tokens  # noqa: F401 (tokens is a fixture)

PREDEPLOY = Path(__file__).resolve().parents[2] / "dev" / "predeploy.py"
TOKEN = "hf_secret_token_value"


def run(url, token=TOKEN):
    env = {"PATH": "/usr/bin:/bin", "ARENA_URL": url, "HOME": "/nonexistent"}
    if token:
        env["HF_TOKEN"] = token
    return subprocess.run([sys.executable, str(PREDEPLOY)], env=env, capture_output=True, text=True, timeout=60)


def jobs(relays=(), stages=()):
    return {"relays": list(relays), "budget": {}, "prices_usd_per_hour": {},
            "jobs": [{"job_id": "j%d" % i, "run_id": "run-%d" % i, "purpose": "challenge-run", "stage": s}
                     for i, s in enumerate(stages)]}


def test_quiet_arena_may_deploy(scripted_server):
    server, url = scripted_server([json_answer(jobs(stages=["COMPLETED", "ERROR"]))])
    r = run(url)
    assert r.returncode == 0, r.stderr
    assert server.seen[0]["path"] == "/api/jobs"
    assert server.seen[0]["headers"]["Authorization"] == "Bearer " + TOKEN


def test_a_connected_or_reconnecting_relay_holds_the_deploy(scripted_server):
    for state in ("connected", "reconnecting"):
        server, url = scripted_server([json_answer(jobs(relays=[{"run_id": "run-9", "state": state}]))])
        r = run(url)
        assert r.returncode == 1
        assert "run-9: relay %s" % state in r.stderr


def test_a_running_or_scheduling_job_holds_the_deploy(scripted_server):
    for stage in ("RUNNING", "SCHEDULING"):
        server, url = scripted_server([json_answer(jobs(stages=[stage]))])
        r = run(url)
        assert r.returncode == 1
        assert stage in r.stderr


def test_an_openenv_run_on_the_cluster_holds_the_deploy(scripted_server):
    view = dict(jobs(), openenv_runs=[["oe-1a2b", "rolling"]])
    server, url = scripted_server([json_answer(view)])
    r = run(url)
    assert r.returncode == 1
    assert "OpenEnv run oe-1a2b: rolling" in r.stderr


def test_cannot_tell_is_not_safe(scripted_server):
    server, url = scripted_server([json_answer({"code": "FORBIDDEN", "message": "editors only"}, 403)])
    assert run(url).returncode == 1
    assert run(url, token=None).returncode == 1


def test_against_the_arena_with_an_editors_token(arena_url, tokens):
    # Nothing of this arena's runs is going on while the CLI tests run (the OpenEnv tests wait for
    # their run to end).
    r = run(arena_url, token=tokens["eve"])
    assert r.returncode == 0, r.stderr
    assert run(arena_url, token=tokens["bob"]).returncode == 1, "not an editor: cannot tell"
