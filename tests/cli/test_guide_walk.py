"""The guide's own commands, walked literally against the local arena: Start here (steps 1 to 10),
Try it first (1 to 4), and the OpenEnv "Submit and follow your run" curl lines, as the served
/AGENTS.md writes them, with its placeholders and the Space's address replaced by local values.

Local equivalents, each where the guide needs the internet, Docker or a person:
- `HF_TOKEN` holds a stand-in user's token instead of a saved browser login;
- the local challenge `local-demo` stands in for `openenv-9b` (whose runs are paused);
- `git clone …/posttrainarena` is replaced by the project's demo task as
  `posttrainarena/starting-kit/template`; the walk then writes `submission.yaml` (step 5's prose);
- `posttrainarena/scripts/run_local.sh` is not run (it needs Docker);
- before `hf upload`, the walk creates DATASET as the quickstart does (step 7 says to);
- Try it first's repository is served by the stand-in at its own commit instead of bcbaffb…;
- `submission.json` for the OpenEnv lines is the guide's example shape with the stand-in's echo
  image; the run it starts is cancelled afterwards by an editor, to free the simulated cluster.
The guide's code blocks split `--challenge` from its value across two lines (a shell would run
`openenv-9b …` as a command); the walk joins them, and that is a fault of the guide's text, not of
the service."""

import json
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import hub_url
from docwalk import DEMO, Walk, sections, stand_in_github_example

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "public" / "AGENTS.md"
USER, TOKEN = "sybil", "hf_local_test_sybil_5d19e7"
EVE = "hf_local_test_eve_e11e11"
PIN = "bcbaffb58a19829d05fa483662c358e6ed5ba353"
SCHEMA = json.loads((ROOT / "dev" / "demo" / "openenv" / "submission.json").read_text())["schema"]


def guide_commands(heading):
    found = [c for h, c in sections(GUIDE.read_text()) if h == heading]
    assert len(found) == 1, "the guide has one section %r" % heading
    out = []
    for line in found[0]:
        # The guide's split `--challenge` / `openenv-9b …`: joined, as its author meant.
        if out and out[-1].endswith("--challenge"):
            out[-1] += " " + line
        else:
            out.append(line)
    return out


def read_json(path, key):
    def read():
        return str(json.loads(Path(path).read_text())[key])
    return read


@pytest.fixture
def walk(arena_url, tmp_path):
    return Walk(tmp_path, arena_url, {"HF_ENDPOINT": hub_url(), "HF_TOKEN": TOKEN}, {
        "HF_USER": USER, "AGENT_ID": USER + "-agent", "openenv-9b": "local-demo", "TITLE": "Guide walk",
        "DATASET": USER + "/" + USER + "-agent-tasks", "TASK_NAME": "expense-report",
        "ENVIRONMENT_ID": read_json(tmp_path / "environment-receipt.json", "environment_id"),
        "RUN_ID": lambda: json.loads((tmp_path / "run-receipt.json").read_text())["run"]["run_id"],
        PIN: stand_in_github_example,
    })


def runs_until_scored(walk, command, deadline_s=180):
    deadline = time.time() + deadline_s
    while True:
        done = walk.run(command)
        state = json.loads(done.stdout)["state"]
        if state in ("scored", "failed", "canceled"):
            return state, done
        assert time.time() < deadline, "still %s: %s" % (state, done.stderr)
        time.sleep(2)


def test_start_here_steps_1_to_10(walk):
    commands = guide_commands("Start here")
    assert sum(c.startswith("python3 arena_cli.py") for c in commands) == 13
    ran = []
    for command in commands:
        if command.startswith("git clone https://github.com/benchflow-ai/posttrainarena"):
            shutil.copytree(DEMO / "envs" / "expense-report", walk.workdir / "posttrainarena/starting-kit/template")
            continue
        if command.startswith("posttrainarena/scripts/run_local.sh"):
            continue
        if command.startswith("hf upload "):
            (walk.workdir / "my-collection" / "submission.yaml").write_text(
                "team_name: %s-agent\ntrack: environments\n" % USER)
            walk.run("hf repos create DATASET --repo-type dataset --public --exist-ok")
        if " runs --challenge " in command and "--run-id" in command:
            state, done = runs_until_scored(walk, command)
            assert state == "scored", done.stderr
            ran.append(command)
            continue
        preflight = " run --challenge " in command and "--execute" not in command
        done = walk.run(command, allowed=(0, 3) if preflight else (0,))
        ran.append(command)
        if " validate " in command:
            assert json.loads(done.stdout)["valid"] is True, done.stderr
        if preflight:
            assert json.loads(done.stdout)["allowed"] is True, "nothing else runs on local-demo now: %s" % done.stderr
        if " result collect " in command:
            answer = json.loads(done.stdout)
            assert answer["status"] == "pending" and answer["run_id"] == walk.line("RUN_ID"), done.stdout
    assert any(" leaderboard " in c for c in ran) and any("--execute" in c for c in ran)
    receipt = json.loads((walk.workdir / "environment-receipt.json").read_text())["environment"]
    assert receipt["repo_id"] == USER + "/" + USER + "-agent-tasks" and receipt["agent_id"] == USER + "-agent"


def test_try_it_first_steps_1_to_4(walk):
    for command in guide_commands("Start here")[:4]:  # step 1 and step 2's registration
        walk.run(command)
    for command in guide_commands("Try it first"):
        preflight = " run --challenge " in command
        done = walk.run(command, allowed=(0, 3) if preflight else (0,))
        if " validate " in command:
            answer = json.loads(done.stdout)
            assert answer["valid"] is True and answer["eligible_tasks"] >= 1, done.stderr
        if preflight:
            answer = json.loads(done.stdout)
            assert answer["checks"] and "max_compute_usd" in answer
    receipt = json.loads((walk.workdir / "environment-receipt.json").read_text())["environment"]
    assert (receipt["repo_type"], receipt["repo_id"], receipt["commit"]) == (
        "github", "benchflow-ai/posttrainarena", stand_in_github_example())


def test_openenv_submit_and_follow_your_run(walk, arena_url):
    (walk.workdir / "submission.json").write_text(json.dumps({
        "submission_id": "my-env-v1", "name": "My environment", "image": "ghcr.io/test/arena-echo:ok",
        "schema": SCHEMA, "tasks": [{"task_id": "echo-1", "split": "train", "rollout_wall_s": 3300}],
        "example_actions": [{"message": "hello"}, {"message": "done"}], "finish_action": {"message": "done"},
    }))
    commands = guide_commands("Submit and follow your run")
    assert len(commands) == 5
    walk.run(commands[0])
    posted = json.loads(walk.run(commands[1]).stdout)
    assert posted["submission_id"] == "my-env-v1" and posted["state"] == "validating", posted
    # Admission starts a sandbox per task and waits up to 120 s for /health (the guide's limit):
    # beside the trainer's and the browser's tests a sandbox starts slower than alone.
    deadline = time.time() + 600
    while True:
        status = json.loads(walk.run(commands[2]).stdout)
        if status["state"] != "validating" and (status["state"] != "validated" or (status.get("run") or {}).get("run_id")):
            break
        assert time.time() < deadline, status
        time.sleep(2)
    assert status["state"] == "validated", json.dumps(status)[:4000]
    run_id = status["run"]["run_id"]
    walk.values["RUN_ID"] = run_id
    run = json.loads(walk.run(commands[3]).stdout)
    assert run["run_id"] == run_id and run["state"] not in ("failed", "cancelled"), run
    events = json.loads(walk.run(commands[4]).stdout)
    assert isinstance(events["events"], list), events
    # Free the simulated cluster for the tests after this one.
    req = urllib.request.Request(arena_url + "/api/openenv/runs/%s/cancel" % run_id, method="POST", data=b"",
                                 headers={"Authorization": "Bearer " + EVE})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
