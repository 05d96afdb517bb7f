"""whoami, agents and the board through arena_cli.py, against the arena and the HF stand-in."""

import json
import os
import uuid

import pytest

from conftest import run_cli


@pytest.fixture(scope="module")
def tokens():
    path = os.environ.get("ARENA_TEST_USERS")
    if not path:
        pytest.fail("ARENA_TEST_USERS is not set: run these tests through dev/test")
    with open(path) as f:
        return {u["name"]: u["token"] for u in json.load(f)}


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(path)


def assert_no_token(result, tokens):
    for token in tokens.values():
        assert token not in result.stdout + result.stderr


def test_huggingface_hub_reads_the_stand_in_whoami(tokens):
    from huggingface_hub import HfApi

    info = HfApi(endpoint=os.environ["ARENA_TEST_HUB_URL"]).whoami(token=tokens["eve"])
    assert info["name"] == "eve"
    assert any(o["name"] == "benchflow" and o["roleInOrg"] == "write" for o in info["orgs"])


def test_whoami(arena_url, tokens):
    r = run_cli(["whoami"], arena_url, token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == "alice"
    assert "The arena sees you as alice" in r.stderr
    assert_no_token(r, tokens)
    eve = run_cli(["whoami"], arena_url, token=tokens["eve"])
    assert json.loads(eve.stdout)["editor"] is True


def test_whoami_without_a_token_exits_4(arena_url):
    r = run_cli(["whoami"], arena_url)
    assert r.returncode == 4
    assert "No Hugging Face token" in r.stderr


def test_whoami_with_a_bad_token_is_an_error_answer(arena_url):
    r = run_cli(["whoami"], arena_url, token="hf_not_valid_here")
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "INVALID_TOKEN"
    assert "hf_not_valid_here" not in r.stdout + r.stderr


def test_token_from_the_hf_home_file(arena_url, tokens, tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text(tokens["bob"] + "\n")
    r = run_cli(["whoami"], arena_url, extra_env={"HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == "bob"


def test_register_agent_discover_and_conflicts(arena_url, tokens, tmp_path):
    agent_id = "alice-" + uuid.uuid4().hex[:8]
    spec = write(tmp_path, "agent.json", {"agent_id": agent_id, "description": "The agent of alice: builds tasks"})
    first = run_cli(["register-agent", "--file", spec], arena_url, token=tokens["alice"])
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["agent"]["owner"] == "alice"
    again = run_cli(["register-agent", "--file", spec], arena_url, token=tokens["alice"])
    assert again.returncode == 0 and json.loads(again.stdout)["existing"] is True
    assert "already registered to you" in again.stderr
    other = run_cli(["register-agent", "--file", spec], arena_url, token=tokens["bob"])
    assert other.returncode == 1
    assert "already registered by another HF user" in other.stderr
    changed = write(tmp_path, "changed.json", {"agent_id": agent_id, "description": "something else"})
    immutable = run_cli(["register-agent", "--file", changed], arena_url, token=tokens["alice"])
    assert json.loads(immutable.stdout)["code"] == "AGENT_IMMUTABLE"
    listed = json.loads(run_cli(["discover"], arena_url).stdout)
    assert {"agent_id": agent_id, "owner": "alice"}.items() <= next(
        a for a in listed["agents"] if a["agent_id"] == agent_id
    ).items()


def test_board_post_is_idempotent_and_listed(arena_url, tokens, tmp_path):
    request_id = "bob-cli-" + uuid.uuid4().hex[:8]
    message = {"request_id": request_id, "agent_id": None, "body": "Hello from the CLI test " + request_id,
               "refs": [], "broadcast": False}
    path = write(tmp_path, "message.json", message)
    first = run_cli(["board", "post", "--file", path], arena_url, token=tokens["bob"])
    assert first.returncode == 0, first.stderr
    posted = json.loads(first.stdout)["message"]
    again = run_cli(["board", "post", "--file", path], arena_url, token=tokens["bob"])
    assert json.loads(again.stdout)["message"]["id"] == posted["id"]
    assert "posted before" in again.stderr
    listed = json.loads(run_cli(["board", "list", "--q", request_id], arena_url).stdout)
    assert [m["id"] for m in listed["messages"]] == [posted["id"]]
    by_author = json.loads(run_cli(["board", "list", "--author", "bob", "--limit", "1"], arena_url).stdout)
    assert len(by_author["messages"]) == 1
    reply = write(tmp_path, "reply.json", {"request_id": request_id + "-re", "body": "a reply", "refs": [posted["id"]]})
    replied = run_cli(["board", "post", "--file", reply], arena_url, token=tokens["bob"])
    assert json.loads(replied.stdout)["message"]["refs"] == [posted["id"]]
    assert_no_token(first, tokens)


def test_board_post_refusals(arena_url, tokens, tmp_path):
    broadcast = write(tmp_path, "b.json", {"request_id": "bob-broadcast-1", "body": "x", "broadcast": True})
    r = run_cli(["board", "post", "--file", broadcast], arena_url, token=tokens["bob"])
    assert r.returncode == 1 and json.loads(r.stdout)["code"] == "INVALID_POST"
    assert run_cli(["board", "post", "--file", str(tmp_path / "missing.json")], arena_url, token=tokens["bob"]).returncode == 2
    broken = write(tmp_path, "broken.json", "{not json")
    assert run_cli(["board", "post", "--file", broken], arena_url, token=tokens["bob"]).returncode == 2
    assert run_cli(["board", "post", "--file", broadcast], arena_url).returncode == 4
