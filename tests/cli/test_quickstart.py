"""README.agent-example.md, the agent quickstart the board's prompts send agents to: it is served,
and every command in its ```sh blocks runs as written against the local arena and the HF stand-in.
The local equivalents: HF_TOKEN set to a stand-in user's token instead of a saved `hf auth login`
(the browser login, `hf auth login --format agent`, is a ```text block the walk does not run); the
local challenge `local-demo` instead of `openenv-9b`; the project's demo collection copied to
my-collection/ instead of tasks built from the starter kit; and for Try it first, a stand-in GitHub
repository benchflow-ai/posttrainarena holding the demo expense-report task at
submissions/team-dogfood, at its own commit instead of bcbaffb…. Starting a run (a ```text block)
is left out: it would spend the test arena's one active run."""

import json
import shutil
import urllib.request
from pathlib import Path

from conftest import hub_url
from docwalk import DEMO, Walk, sections, stand_in_github_example

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "README.agent-example.md"
USER, TOKEN = "quinn", "hf_local_test_quinn_9a71c4"
PIN = "bcbaffb58a19829d05fa483662c358e6ed5ba353"


def receipt_id(workdir):
    def read():
        return json.loads((workdir / "environment-receipt.json").read_text())["environment_id"]
    return read


def test_the_quickstart_is_served_as_in_the_repository(arena_url):
    with urllib.request.urlopen(arena_url + "/README.agent-example.md") as r:
        assert r.status == 200
        assert r.read() == QUICKSTART.read_bytes()


def test_every_quickstart_command_runs_against_the_local_arena(arena_url, tmp_path):
    walk = Walk(tmp_path, arena_url, {"HF_ENDPOINT": hub_url(), "HF_TOKEN": TOKEN}, {
        "HF_USER": USER, "AGENT_ID": USER + "-agent", "openenv-9b": "local-demo", "TITLE": "Quickstart walk",
        "ENVIRONMENT_ID": receipt_id(tmp_path), PIN: stand_in_github_example,
    })
    walked = sections(QUICKSTART.read_text())
    assert [h for h, _ in walked] == [
        "1. Authenticate", "2. Register your agent id", "3. Create your public dataset",
        "4. Build and check the collection", "5. Upload, describe and validate", "6. Submit and preflight",
        "Try it first"]
    receipts = {}
    for heading, commands in walked:
        if heading.startswith("4."):
            # The local equivalent of Start here steps 4 to 6: the project's demo collection.
            shutil.copytree(DEMO, tmp_path / "my-collection")
        for command in commands:
            preflight = " run --challenge " in command
            done = walk.run(command, allowed=(0, 3) if preflight else (0,))
            if command.startswith("hf auth whoami"):
                assert USER in done.stdout
            if "arena_cli.py whoami" in command:
                assert json.loads(done.stdout)["name"] == USER
            if " validate " in command:
                answer = json.loads(done.stdout)
                assert answer["valid"] is True and answer["eligible_tasks"] >= 1, done.stderr
            if " submit " in command:
                receipts[heading] = json.loads((tmp_path / "environment-receipt.json").read_text())["environment"]
                assert (tmp_path / "environment.json.pinned.json").is_file()
            if preflight:
                answer = json.loads(done.stdout)
                assert answer["checks"], "the preflight shows every check"
                assert "max_compute_usd" in answer
    mine, example = receipts["6. Submit and preflight"], receipts["Try it first"]
    assert (mine["repo_type"], mine["repo_id"]) == ("dataset", USER + "/" + USER + "-agent-tasks")
    assert mine["agent_id"] == USER + "-agent" and mine["author"] == USER
    assert (example["repo_type"], example["repo_id"]) == ("github", "benchflow-ai/posttrainarena")
    assert example["commit"] == stand_in_github_example()
    # The dataset was created public in the human's account: an anonymous read sees it.
    with urllib.request.urlopen(hub_url() + "/api/datasets/%s/%s-agent-tasks" % (USER, USER)) as r:
        assert json.loads(r.read())["private"] is False
