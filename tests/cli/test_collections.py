"""validate, submit and environments list through arena_cli.py: against tiny scripted servers
(tests with "scripted" in their name) and against the arena reading git repositories the HF
stand-in serves from ARENA_TEST_HUB_REPOS."""

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import run_cli

COLLECTIONS = Path(__file__).resolve().parents[1] / "fixtures" / "collections"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_secret_token_value"


def json_answer(obj, status=200, headers=None):
    return (status, dict({"Content-Type": "application/json"}, **(headers or {})), json.dumps(obj).encode())


def environment(repo_id, revision="main", **over):
    body = {
        "agent_id": None,
        "challenge_id": "openenv-9b",
        "repo_type": "dataset",
        "repo_id": repo_id,
        "revision": revision,
        "entry_path": "",
        "title": "Two clean tasks",
        "notes": "A test collection.",
    }
    body.update(over)
    return body


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return str(path)


def report(valid=True, findings=(), errors=(), warnings=(), repo_id="alice/pack", revision="main"):
    return {
        "valid": valid,
        "challenge_id": "openenv-9b",
        "source": {"repo_type": "dataset", "repo_id": repo_id, "revision": revision, "commit": COMMIT,
                   "entry_path": ""},
        "tasks": 2,
        "eligible_tasks": 2 if valid else 0,
        "errors": list(errors),
        "warnings": list(warnings),
        "task_list": [],
        "quality_gates": {"static": {
            "version": "gates-v4",
            "summary": {"tasks": 2, "blocked": 0, "rejected": 0, "eligible": 2, "needs_controls": 0, "review": 0,
                        "clean": 2, "by_code": {}},
            "findings": list(findings),
            "task_identity": {},
        }},
        "fetch": {},
    }


def submitted(body, existing=False, **over):
    answer = {"environment_id": "env-abc123", "existing": existing, "title": body["title"], "notes": body["notes"],
              "agent_id": body["agent_id"], "pinned": body, "validation": report()}
    answer.update(over)
    return answer


# ---- without the arena ----


def test_scripted_submit_pins_the_commit_then_submits_it(scripted_server, tmp_path):
    body = environment("alice/pack")
    pinned = dict(body, revision=COMMIT)
    server, url = scripted_server([json_answer(report()), json_answer(submitted(pinned), 201)])
    path = write(tmp_path, "environment.json", body)
    r = run_cli(["submit", "--file", path], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "environment.json.pinned.json").read_text()) == pinned
    assert [s["path"] for s in server.seen] == ["/api/environments/validate", "/api/environments"]
    assert server.seen[0]["body"] == body, "validation reads the moving revision"
    assert server.seen[1]["body"] == pinned, "the submission names the commit"
    assert all(s["headers"]["Authorization"] == "Bearer " + TOKEN for s in server.seen)
    assert json.loads(r.stdout)["environment_id"] == "env-abc123"
    assert "environment env-abc123 (new)" in r.stderr
    assert "environment.json.pinned.json" in r.stderr
    assert "run --challenge openenv-9b --id env-abc123" in r.stderr
    assert TOKEN not in r.stdout + r.stderr


def test_scripted_submit_of_a_pinned_file_uses_it_as_it_is(scripted_server, tmp_path):
    pinned = environment("alice/pack", revision=COMMIT)
    server, url = scripted_server([json_answer(report(revision=COMMIT)), json_answer(submitted(pinned))])
    path = write(tmp_path, "environment.json.pinned.json", pinned)
    r = run_cli(["submit", "--file", path], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["environment.json.pinned.json"]
    assert server.seen[1]["body"] == pinned
    assert "already pinned" in r.stderr


def test_scripted_submit_saves_the_pinned_request_also_when_already_a_commit(scripted_server, tmp_path):
    pinned = environment("alice/pack", revision=COMMIT)
    server, url = scripted_server([json_answer(report(revision=COMMIT)), json_answer(submitted(pinned))])
    r = run_cli(["submit", "--file", write(tmp_path, "environment.json", pinned)], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "environment.json.pinned.json").read_text()) == pinned
    assert "saved the request as" in r.stderr


def test_scripted_submit_again_says_the_first_title_was_kept(scripted_server, tmp_path):
    body = environment("alice/pack", title="A new title", agent_id="alice-agent")
    first = submitted(dict(body, revision=COMMIT), existing=True, title="Two clean tasks", agent_id=None)
    server, url = scripted_server([json_answer(report()), json_answer(first)])
    r = run_cli(["submit", "--file", write(tmp_path, "environment.json", body)], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["existing"] is True
    assert "environment env-abc123 (existing)" in r.stderr
    assert "kept the first submission's title, notes and agent" in r.stderr
    assert '"Two clean tasks"' in r.stderr
    assert "were not applied" in r.stderr


def test_scripted_submit_stops_when_validation_fails(scripted_server, tmp_path):
    error = {"code": "S-MISSING-FILE", "task": "t1", "file": "task.md", "message": "task.md is missing"}
    server, url = scripted_server([json_answer(report(valid=False, errors=[error]))])
    r = run_cli(["submit", "--file", write(tmp_path, "environment.json", environment("alice/pack"))], url, token=TOKEN)
    assert r.returncode == 1
    assert len(server.seen) == 1, "nothing was submitted"
    assert not (tmp_path / "environment.json.pinned.json").exists()
    assert json.loads(r.stdout)["valid"] is False
    assert "S-MISSING-FILE t1 task.md: task.md is missing" in r.stderr
    assert "Not submitted" in r.stderr


def test_scripted_submit_refused_as_invalid_prints_the_report(scripted_server, tmp_path):
    block = {"code": "D-PROMPT-NEAR-COPY", "severity": "block", "task": "t2", "file": "task.md",
             "message": "near-copy of a held-out prompt"}
    refused = {"code": "VALIDATION_FAILED", "message": "the collection is not valid at this commit",
               "validation": report(valid=False, findings=[block])}
    server, url = scripted_server([json_answer(report()), json_answer(refused, 422)])
    r = run_cli(["submit", "--file", write(tmp_path, "environment.json", environment("alice/pack"))], url, token=TOKEN)
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "VALIDATION_FAILED"
    assert "VALIDATION_FAILED (HTTP 422)" in r.stderr
    assert "block D-PROMPT-NEAR-COPY t2 task.md: near-copy of a held-out prompt" in r.stderr
    assert len(server.seen) == 2, "a 422 is not retried"


def test_scripted_validate_summary_and_exit_status(scripted_server, tmp_path):
    findings = [{"code": "R-VERIFIER-EXISTS-ONLY", "severity": "review", "task": "t%d" % i,
                 "file": "verifier/test_outputs.py", "message": "only checks that paths exist"} for i in range(25)]
    warning = {"code": "W-CREDIT-MISSING", "field": "metadata.license", "count": 2, "message": "2 tasks lack a license"}
    server, url = scripted_server([json_answer(report(findings=findings, warnings=[warning]))])
    path = write(tmp_path, "environment.json", environment("alice/pack"))
    r = run_cli(["validate", "--file", path], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["valid"] is True
    assert "Valid: 2 tasks, 2 eligible, 0 errors, 1 warning." in r.stderr
    assert "commit " + COMMIT in r.stderr
    assert "W-CREDIT-MISSING metadata.license (2): 2 tasks lack a license" in r.stderr
    assert "Static gates gates-v4: 2 tasks: 0 blocked, 0 rejected, 2 eligible" in r.stderr
    assert r.stderr.count("review R-VERIFIER-EXISTS-ONLY") == 20
    assert "... and 5 more" in r.stderr
    assert "python3 arena_cli.py submit --file " + path in r.stderr
    assert server.seen[0]["headers"]["Authorization"] == "Bearer " + TOKEN
    assert TOKEN not in r.stdout + r.stderr

    error = {"code": "S-MISSING-FILE", "task": "t1", "file": "verifier/test.sh", "message": "missing"}
    server, url = scripted_server([json_answer(report(valid=False, errors=[error]))])
    r = run_cli(["validate", "--file", path], url, token=TOKEN)
    assert r.returncode == 0, "not valid is an answer: it exits 0, the findings on stderr"
    assert "NOT valid" in r.stderr
    assert "S-MISSING-FILE t1 verifier/test.sh: missing" in r.stderr


def test_scripted_github_rate_limit_is_reported_not_retried(scripted_server, tmp_path):
    limited = {"code": "GITHUB_RATE_LIMITED",
               "message": "the Space's GitHub limit (5000 requests an hour) is used up; it resets at 14:00 UTC",
               "retry_after_s": 1800}
    server, url = scripted_server([json_answer(limited, 503, {"Retry-After": "1800"}), json_answer(report())])
    body = environment("benchflow-ai/posttrainarena", repo_type="github")
    started = time.monotonic()
    r = run_cli(["validate", "--file", write(tmp_path, "environment.json", body)], url, token=TOKEN)
    assert r.returncode == 1
    assert len(server.seen) == 1, "sending it again seconds later cannot help"
    # Nor does it wait for the limit's reset (1800 s) before it answers (a loaded machine starts
    # the CLI in a second or two: the bound is far from both).
    assert time.monotonic() - started < 60
    assert "GITHUB_RATE_LIMITED (HTTP 503)" in r.stderr
    assert "5000 requests an hour) is used up; it resets at 14:00 UTC" in r.stderr
    assert "retry after 1800 s" in r.stderr
    assert json.loads(r.stdout)["code"] == "GITHUB_RATE_LIMITED"


def test_scripted_a_spaces_json_502_is_retried_then_named(scripted_server, tmp_path):
    unavailable = json_answer({"code": "SOURCE_UNAVAILABLE", "message": "the Hub did not answer"}, 502)
    path = write(tmp_path, "environment.json", environment("alice/pack"))
    server, url = scripted_server([unavailable, json_answer(report())])
    r = run_cli(["validate", "--file", path], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert len(server.seen) == 2

    server, url = scripted_server([unavailable] * 4)
    r = run_cli(["validate", "--file", path], url, token=TOKEN)
    assert r.returncode == 1
    assert len(server.seen) == 4, "one try and three retries"
    assert "SOURCE_UNAVAILABLE (HTTP 502): the Hub did not answer" in r.stderr


def test_scripted_validate_and_submit_need_a_token(scripted_server, tmp_path):
    server, url = scripted_server([])
    path = write(tmp_path, "environment.json", environment("alice/pack"))
    for command in ("validate", "submit"):
        r = run_cli([command, "--file", path], url)
        assert r.returncode == 4
        assert "No Hugging Face token" in r.stderr
    assert server.seen == []


def test_scripted_a_bad_file_is_a_usage_error(scripted_server, tmp_path):
    server, url = scripted_server([])
    assert run_cli(["validate", "--file", str(tmp_path / "nope.json")], url, token=TOKEN).returncode == 2
    (tmp_path / "bad.json").write_text("{")
    assert run_cli(["submit", "--file", str(tmp_path / "bad.json")], url, token=TOKEN).returncode == 2
    assert server.seen == []


def test_scripted_environments_list_is_a_plain_public_listing(scripted_server):
    server, url = scripted_server([json_answer({"environments": []}), json_answer({"environments": []})])
    r = run_cli(["environments", "list"], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"environments": []}
    assert r.stderr == ""
    r = run_cli(["environments", "list", "--legacy", "--challenge", "openenv-9b"], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert [s["path"] for s in server.seen] == ["/api/environments", "/api/environments?legacy=true&challenge=openenv-9b"]
    assert not any("Authorization" in s["headers"] for s in server.seen)


# ---- against the arena and the stand-in's git repositories ----


@pytest.fixture(scope="module")
def hub_repos():
    path = os.environ.get("ARENA_TEST_HUB_REPOS")
    if not path:
        pytest.skip("ARENA_TEST_HUB_REPOS is not set: the HF stand-in serves no git repositories in this run")
    return Path(path)


@pytest.fixture(scope="module")
def tokens():
    path = os.environ.get("ARENA_TEST_USERS")
    if not path:
        pytest.fail("ARENA_TEST_USERS is not set: run these tests through dev/test")
    with open(path) as f:
        return {u["name"]: u["token"] for u in json.load(f)}


def publish(hub_repos, fixture, owner="alice"):
    """Copies a fixture collection into a new dataset repository the stand-in serves; (repo_id, commit)."""
    source = COLLECTIONS / fixture
    if not source.is_dir():
        pytest.fail("missing test fixture %s" % source)
    name = "%s-%s" % (fixture, uuid.uuid4().hex[:8])
    repo = hub_repos / "datasets" / owner / name
    repo.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, repo, symlinks=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false",
                               *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("symbolic-ref", "HEAD", "refs/heads/main")
    git("add", "-A")
    git("commit", "-q", "-m", "collection")
    return "%s/%s" % (owner, name), git("rev-parse", "HEAD")


def assert_no_token(result, tokens):
    for token in tokens.values():
        assert token not in result.stdout + result.stderr


@pytest.fixture(scope="module")
def good(hub_repos):
    return publish(hub_repos, "good")


def test_validate_a_published_collection(good, arena_url, tokens, tmp_path):
    repo_id, commit = good
    r = run_cli(["validate", "--file", write(tmp_path, "environment.json", environment(repo_id))], arena_url,
                token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["valid"] is True
    assert answer["tasks"] == 2
    assert answer["source"]["commit"] == commit
    assert "Valid: 2 tasks" in r.stderr
    assert "submit --file" in r.stderr
    assert_no_token(r, tokens)


def test_submit_pins_repeats_and_lists(good, arena_url, tokens, tmp_path):
    repo_id, commit = good
    path = write(tmp_path, "environment.json", environment(repo_id))
    r = run_cli(["submit", "--file", path], arena_url, token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    pinned = json.loads((tmp_path / "environment.json.pinned.json").read_text())
    assert pinned == environment(repo_id, revision=commit)
    answer = json.loads(r.stdout)
    env_id = answer["environment_id"]
    assert env_id.startswith("env-")
    assert answer["existing"] is False
    assert answer["pinned"]["revision"] == commit
    assert "environment %s (new)" % env_id in r.stderr
    assert "run --challenge openenv-9b --id " + env_id in r.stderr
    assert_no_token(r, tokens)

    again = write(tmp_path, "again.json", environment(repo_id, title="Another title"))
    r = run_cli(["submit", "--file", again], arena_url, token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["existing"] is True
    assert answer["environment_id"] == env_id
    assert answer["title"] == "Two clean tasks", "the first submission's title is kept"
    assert "environment %s (existing)" % env_id in r.stderr
    assert "kept the first submission's title, notes and agent" in r.stderr

    r = run_cli(["submit", "--file", str(tmp_path / "environment.json.pinned.json")], arena_url, token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["environment_id"] == env_id
    assert not (tmp_path / "environment.json.pinned.json.pinned.json").exists()

    r = run_cli(["environments", "list"], arena_url)
    assert r.returncode == 0, r.stderr
    assert env_id in [e.get("environment_id") for e in json.loads(r.stdout)["environments"]]
    assert r.stderr == ""


def test_validate_needs_a_token(hub_repos, arena_url, tmp_path):
    r = run_cli(["validate", "--file", write(tmp_path, "environment.json", environment("alice/pack"))], arena_url)
    assert r.returncode == 4
    assert "No Hugging Face token" in r.stderr


def test_validate_a_missing_repository(hub_repos, arena_url, tokens, tmp_path):
    body = environment("alice/no-such-collection-%s" % uuid.uuid4().hex[:8])
    r = run_cli(["validate", "--file", write(tmp_path, "environment.json", body)], arena_url, token=tokens["alice"])
    assert r.returncode == 1
    assert "REPO_NOT_FOUND" in r.stderr
    assert json.loads(r.stdout)["code"] == "REPO_NOT_FOUND"


def test_validate_a_collection_with_an_error(hub_repos, arena_url, tokens, tmp_path):
    repo_id, _ = publish(hub_repos, "no-task-md")
    path = write(tmp_path, "environment.json", environment(repo_id))
    r = run_cli(["validate", "--file", path], arena_url, token=tokens["alice"])
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["valid"] is False
    assert "S-MISSING-FILE" in [e["code"] for e in answer["errors"]]
    assert "S-MISSING-FILE" in r.stderr
    assert "NOT valid" in r.stderr

    r = run_cli(["submit", "--file", path], arena_url, token=tokens["alice"])
    assert r.returncode == 1
    assert not (tmp_path / "environment.json.pinned.json").exists()
    assert "Not submitted" in r.stderr
