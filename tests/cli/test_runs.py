"""run, runs, jobs and budget through arena_cli.py: the preflight against the arena dev/test starts
(its registry includes the simulated local-demo challenge), and the launch's answers against tiny
scripted servers."""

import json
import os
import uuid
from pathlib import Path

import pytest

from conftest import run_cli
from test_collections import hub_repos, json_answer, publish  # noqa: F401 (hub_repos is a fixture)

ALICE = "hf_local_test_alice_7b1f0c"
BOB = "hf_local_test_bob_91d2aa"
TOKEN = "hf_secret_token_value"


def preflight(allowed):
    checks = [{"name": "challenge open", "ok": allowed, "detail": "d"},
              {"name": "signed in", "ok": True, "detail": "as alice"},
              {"name": "author or editor", "ok": None if not allowed else True, "detail": "d"}]
    return {"allowed": allowed, "checks": checks, "max_compute_usd": 2.5, "eligible_tasks": 2,
            "excluded_task_count": 0}


def run_answer(existing=False):
    return {"existing": existing, "launched": True,
            "run": {"run_id": "run-1", "state": "queued", "job_id": "job1", "status": "SCHEDULING",
                    "max_compute_usd": 2.5}}


def write(tmp_path, obj):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(obj))
    return str(path)


# ---- against the arena ----


@pytest.fixture(scope="module")
def alice_collection(hub_repos):
    """A collection alice submitted to local-demo."""
    arena_url = os.environ["ARENA_TEST_URL"]
    repo_id, _ = publish(hub_repos, "good")
    body = {"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset", "repo_id": repo_id,
            "revision": "main", "entry_path": "", "title": "CLI runs", "notes": ""}
    path = Path(os.environ.get("TMPDIR", "/tmp")) / ("env-%s.json" % uuid.uuid4().hex[:8])
    path.write_text(json.dumps(body))
    r = run_cli(["submit", "--file", str(path)], arena_url, token=ALICE)
    assert r.returncode == 0, r.stderr
    assert "python3 arena_cli.py run --challenge local-demo --id env-" in r.stderr
    return json.loads(r.stdout)["environment_id"]


def test_preflight_allowed_prints_every_check(arena_url, alice_collection):
    r = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection], arena_url, token=ALICE)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["allowed"] is True
    assert len(answer["checks"]) == 9
    assert r.stderr.count("  ok   ") == 9, r.stderr
    assert "max_compute_usd: $2.50" in r.stderr


def test_preflight_not_allowed_exits_3_with_fail_and_skip(arena_url, alice_collection):
    r = run_cli(["run", "--challenge", "openenv-9b", "--id", alice_collection, "--dry-run"], arena_url, token=ALICE)
    assert r.returncode == 3, r.stderr
    assert "FAIL challenge open: runs are paused" in r.stderr
    assert "none quoted" in r.stderr
    assert "stop here and tell your human" in r.stderr
    bob = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection], arena_url, token=BOB)
    assert bob.returncode == 3
    assert "FAIL author or editor" in bob.stderr


def test_run_needs_a_token(arena_url, alice_collection):
    r = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection], arena_url)
    assert r.returncode == 4


def test_runs_jobs_and_budget_read_the_ledger(arena_url):
    r = run_cli(["runs", "--challenge", "local-demo"], arena_url)
    assert r.returncode == 0, r.stderr
    assert "runs" in json.loads(r.stdout)
    r = run_cli(["jobs"], arena_url)
    assert r.returncode == 0 and "reservations" in json.loads(r.stdout)
    r = run_cli(["budget"], arena_url)
    assert r.returncode == 0 and "Cap $" in r.stderr


# ---- scripted ----


def test_scripted_execute_posts_the_file_and_says_how_to_watch(scripted_server, tmp_path):
    server, url = scripted_server([json_answer(run_answer(), 201)])
    path = write(tmp_path, {"request_id": "alice-run-001", "agent_id": "alice-agent"})
    r = run_cli(["run", "--challenge", "local-demo", "--id", "env-1", "--file", path, "--execute"], url, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert server.seen[0]["path"] == "/api/challenges/local-demo/runs"
    assert server.seen[0]["body"] == {"request_id": "alice-run-001", "environment_id": "env-1", "agent_id": "alice-agent"}
    assert "runs --challenge local-demo --run-id run-1" in r.stderr


def test_scripted_a_persistent_503_is_retried_identically_three_times(scripted_server, tmp_path):
    unknown = json_answer({"code": "LAUNCH_UNKNOWN", "message": "HF did not answer", "launched": "unknown",
                           "retry_with_same_request_id": True, "run_id": "run-1"}, 503)
    server, url = scripted_server([unknown] * 4)
    path = write(tmp_path, {"request_id": "alice-run-001"})
    r = run_cli(["run", "--challenge", "local-demo", "--id", "env-1", "--file", path, "--execute"], url,
                token=TOKEN, timeout=30)
    assert r.returncode == 1
    assert len(server.seen) == 4
    assert all(s["body"] == server.seen[0]["body"] for s in server.seen), "the identical request each time"
    assert "persistent" in r.stderr and "Never change the request id" in r.stderr


def test_scripted_a_definite_failure_is_not_retried(scripted_server, tmp_path):
    failed = json_answer({"code": "LAUNCH_FAILED", "message": "no prepaid credit; tell an organizer",
                          "launched": False, "retry_with_same_request_id": False, "run_id": "run-1"}, 502)
    server, url = scripted_server([failed])
    path = write(tmp_path, {"request_id": "alice-run-001"})
    r = run_cli(["run", "--challenge", "local-demo", "--id", "env-1", "--file", path, "--execute"], url, token=TOKEN)
    assert r.returncode == 1
    assert len(server.seen) == 1
    assert "Nothing was launched" in r.stderr


def test_scripted_a_refusal_says_nothing_was_launched(scripted_server, tmp_path):
    refused = json_answer({"code": "DAILY_RUN_LIMIT", "message": "no counted run in the last 24 hours: …",
                           "retry_after_s": 3600}, 429)
    server, url = scripted_server([refused])
    r = run_cli(["run", "--challenge", "c", "--id", "env-1", "--file", write(tmp_path, {"request_id": "r-00000001"}),
                 "--execute"], url, token=TOKEN)
    assert r.returncode == 1
    assert "refused the run" in r.stderr and "3600" in r.stderr


def test_scripted_execute_needs_a_request_id(scripted_server, tmp_path):
    server, url = scripted_server([])
    r = run_cli(["run", "--challenge", "c", "--id", "env-1", "--file", write(tmp_path, {}), "--execute"], url,
                token=TOKEN)
    assert r.returncode == 2
    assert server.seen == []


def followed_to_its_end(arena_url, run_id, seconds):
    """`runs --run-id` until the run has ended (or `seconds` passed); answers its last output."""
    import time

    deadline = time.time() + seconds
    while True:
        r = run_cli(["runs", "--challenge", "local-demo", "--run-id", run_id], arena_url)
        assert r.returncode == 0, r.stderr
        if json.loads(r.stdout)["state"] in ("scored", "failed", "canceled"):
            return r
        assert time.time() < deadline, r.stderr
        time.sleep(1)


def test_a_run_launched_with_the_cli_is_followed_to_scored(arena_url, alice_collection, tmp_path):
    path = write(tmp_path, {"request_id": "alice-cli-run-%s" % uuid.uuid4().hex[:8]})
    r = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection, "--file", path, "--execute"],
                arena_url, token=ALICE)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    again = run_cli(["run", "--challenge", "local-demo", "--id", alice_collection, "--file", path, "--execute"],
                    arena_url, token=ALICE)
    assert again.returncode == 0 and json.loads(again.stdout)["run"]["run_id"] == run_id
    assert "was launched before" in again.stderr
    r = followed_to_its_end(arena_url, run_id, 90)
    assert json.loads(r.stdout)["state"] == "scored", r.stderr
    assert "baseline  done" in r.stderr and "passed" in r.stderr
    assert "result collect" in r.stderr
    # TRL's steps, logged as the run trained: the newest of those planned.
    assert "GRPO: 10 step(s) logged of 10 planned; at step 10: loss " in r.stderr, r.stderr
    # Once collected, the summary says what training learned from each task.
    c = run_cli(["result", "collect", "--challenge", "local-demo", "--run-id", run_id], arena_url, token=ALICE)
    assert c.returncode == 0, c.stderr
    signal = json.loads(c.stdout)["training"]
    assert "Training: %s" % signal["summary"] in c.stderr
    r = run_cli(["runs", "--challenge", "local-demo", "--run-id", run_id], arena_url)
    assert "Training: %s" % signal["summary"] in r.stderr
    assert all("  %s: " % t["task"] in r.stderr for t in signal["tasks"]), r.stderr
    listed = json.loads(run_cli(["runs", "--challenge", "local-demo"], arena_url).stdout)
    assert any(x["run_id"] == run_id and x["request_key"].startswith("alice-cli-run-") for x in listed["runs"])


EVE = "hf_local_test_eve_e11e11"


def test_an_editor_measures_the_baseline_with_the_cli(arena_url, tmp_path):
    """Runs after the run above (one job at a time): launch as an editor, follow it, collect it, and
    the challenge's baseline is the measurement."""
    import time

    path = write(tmp_path, {"request_id": "eve-baseline-%s" % uuid.uuid4().hex[:8]})
    refused = run_cli(["baseline", "launch", "--challenge", "local-demo", "--file", path], arena_url, token=ALICE)
    assert refused.returncode != 0 and "FORBIDDEN" in refused.stdout + refused.stderr
    r = run_cli(["baseline", "launch", "--challenge", "local-demo", "--file", path], arena_url, token=EVE)
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)["run"]
    assert run["purpose"] == "baseline" and run["environment_id"] is None
    assert "baseline collect --challenge local-demo --run-id %s" % run["run_id"] in r.stderr
    deadline = time.time() + 90
    while True:
        state = json.loads(run_cli(["runs", "--challenge", "local-demo", "--run-id", run["run_id"]], arena_url).stdout)["state"]
        if state in ("scored", "failed", "canceled"):
            break
        assert time.time() < deadline
        time.sleep(1)
    assert state == "scored"
    c = run_cli(["baseline", "collect", "--challenge", "local-demo", "--run-id", run["run_id"]], arena_url, token=EVE)
    assert c.returncode == 0, c.stderr
    measured = json.loads(c.stdout)
    assert "the challenge's baseline is now" in c.stderr
    g = run_cli(["baseline", "get", "--challenge", "local-demo"], arena_url)
    assert g.returncode == 0, g.stderr
    answer = json.loads(g.stdout)
    assert answer["baseline"]["run_id"] == run["run_id"]
    assert abs(answer["baseline"]["reference"]["pass_rate_pct"] - 100 * measured["pass_rate"]) < 1e-9
    assert "%.1f%%" % (100 * measured["pass_rate"]) in g.stderr


def test_a_collection_with_binary_and_large_files_runs_and_its_mirror_holds_every_byte(arena_url, tmp_path,
                                                                                       monkeypatch):
    """Office and media tasks ship spreadsheets, images, tables, documents and recordings, and
    `hf upload` stores them in LFS: uploaded so with huggingface_hub's own client (no Xet), the
    collection validates, its run reaches `scored` on local-demo, and the run's mirror in the runs
    dataset holds every one of those files byte for byte."""
    import random
    import shutil

    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    rand = random.Random(38)
    added = {
        "envs/expense-report/environment/assets/sheet.xlsx": b"PK\x03\x04" + rand.randbytes(40_000),
        "envs/expense-report/environment/assets/chart.png": b"\x89PNG\r\n\x1a\n" + rand.randbytes(60_000),
        "envs/expense-report/environment/assets/table.parquet": b"PAR1" + rand.randbytes(20_000),
        "envs/expense-report/environment/assets/report.pdf": b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + rand.randbytes(2 << 20),
        "envs/expense-report/environment/assets/recording.wav": b"RIFF" + rand.randbytes(11 << 20),
    }
    folder = tmp_path / "collection"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "collections" / "good", folder)
    for path, content in added.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(content)
    hub = HfApi(endpoint=os.environ["ARENA_TEST_HUB_URL"])
    repo = "alice/office-media-" + uuid.uuid4().hex[:8]
    hub.create_repo(repo, repo_type="dataset", token=ALICE)
    hub.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=ALICE)
    tree = {f.path: f for f in hub.list_repo_tree(repo, repo_type="dataset", token=ALICE, recursive=True)
            if hasattr(f, "size")}
    assert all(tree[p].lfs is not None for p in added), "huggingface_hub stored them in LFS"

    body = write(tmp_path, {"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset", "repo_id": repo,
                            "revision": "main", "entry_path": "", "title": "Office and media", "notes": ""})
    r = run_cli(["submit", "--file", body], arena_url, token=ALICE)
    assert r.returncode == 0, r.stderr
    environment_id = json.loads(r.stdout)["environment_id"]
    path = write(tmp_path, {"request_id": "alice-lfs-run-%s" % uuid.uuid4().hex[:8]})
    r = run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", path, "--execute"],
                arena_url, token=ALICE)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    r = followed_to_its_end(arena_url, run_id, 180)
    assert json.loads(r.stdout)["state"] == "scored", r.stderr
    arena_bot = "hf_local_test_arena_bot_5a5a5a"
    for p, content in added.items():
        got = hub.hf_hub_download("benchflow/arena-runs", "collections/%s/%s" % (run_id, p), repo_type="dataset",
                                  token=arena_bot, cache_dir=str(tmp_path / "cache"))
        assert open(got, "rb").read() == content, p
