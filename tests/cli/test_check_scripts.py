"""check_task.py and validation_gates.py: the served local checks, against the arena's public
`POST /api/check` (tests without "scripted" in their name) and against tiny local servers."""

import base64
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CLI

PUBLIC = CLI.parent
CHECK_TASK = PUBLIC / "check_task.py"
GATES = PUBLIC / "validation_gates.py"
COLLECTIONS = Path(__file__).resolve().parents[1] / "fixtures" / "collections"

STRUCTURE_OK = {"valid": True, "tasks": 1, "errors": [], "warnings": [], "task_list": []}


def run_script(script, args, url, extra_env=None, timeout=120):
    env = {"PATH": os.environ.get("PATH", ""), "ARENA_URL": url, "HOME": "/nonexistent"}
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def json_answer(obj, status=200):
    return (status, {"Content-Type": "application/json"}, json.dumps(obj).encode())


def fixture_dir(*parts):
    path = COLLECTIONS.joinpath(*parts)
    if not path.is_dir():
        pytest.fail("missing test fixture %s" % path)
    return path


def first_task(envs):
    tasks = sorted(p for p in envs.iterdir() if p.is_dir())
    assert tasks, "no task directory under %s" % envs
    return tasks[0]


def sent_files(seen):
    return {f["path"]: f for f in seen["body"]["files"]}


@pytest.fixture
def collection(tmp_path):
    """A small collection on disk: a manifest, one task with a link, a linked directory and .git."""
    root = tmp_path / "my-collection"
    task = root / "envs" / "t1"
    (task / "environment").mkdir(parents=True)
    (task / ".git").mkdir()
    (task / ".git" / "config").write_text("[core]\n")
    (root / "submission.yaml").write_text("team_name: t\ntrack: environments\n")
    (task / "task.md").write_text("---\nversion: 1\n---\n## prompt\nDo it.\n")
    (task / "environment" / "Dockerfile").write_bytes(b"FROM debian\n\x00\xff")
    os.symlink("environment/Dockerfile", task / "link")
    os.symlink("environment", task / "linkdir")
    return root


# ---- without the arena ----


def test_scripted_no_token_is_ever_sent(scripted_server, collection, tmp_path):
    home = tmp_path / "home"
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (home / ".cache" / "huggingface" / "token").write_text("hf_saved_token_value")
    for script, answer in ((CHECK_TASK, STRUCTURE_OK), (GATES, dict(STRUCTURE_OK, quality_gates={}))):
        server, url = scripted_server([json_answer(answer)])
        r = run_script(script, ["static", str(collection)] if script == GATES else [str(collection)], url,
                       extra_env={"HF_TOKEN": "hf_secret_token_value", "HOME": str(home)})
        assert r.returncode == 0, r.stderr
        assert len(server.seen) == 1
        assert server.seen[0]["path"] == "/api/check"
        assert not any(k.lower() == "authorization" for k in server.seen[0]["headers"])
        assert "hf_secret_token_value" not in r.stdout + r.stderr


def test_scripted_paths_are_named_from_the_collection_root(scripted_server, collection):
    expected = {"submission.yaml", "envs/t1/task.md", "envs/t1/environment/Dockerfile", "envs/t1/link",
                "envs/t1/linkdir"}
    cases = [
        (collection, expected),
        (collection / "envs", expected),  # the sibling submission.yaml comes along
        (collection / "envs" / "t1", expected - {"submission.yaml"}),
    ]
    for path, paths in cases:
        server, url = scripted_server([json_answer(STRUCTURE_OK)])
        r = run_script(CHECK_TASK, [str(path)], url)
        assert r.returncode == 0, r.stderr
        body = server.seen[0]["body"]
        assert body["scope"] == "structure"
        files = sent_files(server.seen[0])
        assert set(files) == paths, path
        assert base64.b64decode(files["envs/t1/environment/Dockerfile"]["content_b64"]) == b"FROM debian\n\x00\xff"
        assert files["envs/t1/link"]["symlink"] is True
        assert base64.b64decode(files["envs/t1/link"]["content_b64"]) == b"environment/Dockerfile"
        assert files["envs/t1/linkdir"]["symlink"] is True, "a linked directory is sent as a link, not followed"
        assert base64.b64decode(files["envs/t1/linkdir"]["content_b64"]) == b"environment"
        assert files["envs/t1/task.md"]["symlink"] is False
        assert not any(".git" in p.split("/") for p in files)


def test_scripted_a_harbor_tasks_directory_keeps_its_name(scripted_server, tmp_path):
    task = tmp_path / "dataset" / "tasks" / "h1"
    task.mkdir(parents=True)
    (task / "task.toml").write_text("version = '1.0'\n")
    (task / "instruction.md").write_text("Do it.\n")
    for path in (tmp_path / "dataset" / "tasks", task):
        server, url = scripted_server([json_answer(dict(STRUCTURE_OK, quality_gates={}))])
        r = run_script(GATES, ["static", str(path)], url)
        assert r.returncode == 0, r.stderr
        assert server.seen[0]["body"]["scope"] == "gates"
        assert set(sent_files(server.seen[0])) == {"tasks/h1/task.toml", "tasks/h1/instruction.md"}


def test_scripted_exit_status_follows_the_report(scripted_server, collection):
    error = {"code": "S-MISSING-FILE", "task": "t1", "file": "verifier/test.sh", "message": "verifier/test.sh is missing"}
    server, url = scripted_server([json_answer(dict(STRUCTURE_OK, valid=False, errors=[error]))])
    r = run_script(CHECK_TASK, [str(collection)], url)
    assert r.returncode == 1
    assert json.loads(r.stdout)["errors"][0]["code"] == "S-MISSING-FILE"
    assert "S-MISSING-FILE t1 verifier/test.sh: verifier/test.sh is missing" in r.stderr

    rejected = {
        "valid": True, "tasks": 1, "eligible_tasks": 0, "errors": [], "warnings": [],
        "task_list": [{"name": "t1", "status": "rejected", "findings": ["L-IMAGE-COPIES-SOLUTION"]}],
        "quality_gates": {"static": {
            "version": "gates-v4",
            "summary": {"tasks": 1, "blocked": 0, "rejected": 1, "eligible": 0, "needs_controls": 0, "review": 0,
                        "clean": 0, "by_code": {"L-IMAGE-COPIES-SOLUTION": 1}},
            "findings": [{"code": "L-IMAGE-COPIES-SOLUTION", "severity": "reject", "task": "t1",
                          "file": "environment/Dockerfile", "message": "the image copies oracle/"}]}},
    }
    server, url = scripted_server([json_answer(rejected)])
    r = run_script(GATES, ["static", str(collection)], url)
    assert r.returncode == 0, "a rejected task leaves the collection valid: " + r.stderr
    assert "reject L-IMAGE-COPIES-SOLUTION t1 environment/Dockerfile: the image copies oracle/" in r.stderr
    assert "1 rejected" in r.stderr and "Not eligible: t1 (rejected)" in r.stderr

    server, url = scripted_server([json_answer(dict(rejected, valid=False))])
    assert run_script(GATES, ["static", str(collection)], url).returncode == 1


def test_scripted_an_error_answer_exits_1(scripted_server, collection):
    server, url = scripted_server([json_answer({"code": "INVALID_FILES", "message": "a path escapes the root"}, 400)])
    r = run_script(CHECK_TASK, [str(collection)], url)
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "INVALID_FILES"
    assert "INVALID_FILES (HTTP 400): a path escapes the root" in r.stderr


def test_scripted_too_many_bytes_is_refused_before_any_request(scripted_server, tmp_path):
    task = tmp_path / "big"
    task.mkdir()
    (task / "task.md").write_text("---\n---\n")
    with open(task / "data.bin", "wb") as f:
        f.truncate(33 * 1024 * 1024)  # sparse: the size is what counts
    server, url = scripted_server([json_answer(STRUCTURE_OK)])
    for script, args in ((CHECK_TASK, [str(task)]), (GATES, ["static", str(task)])):
        r = run_script(script, args, url)
        assert r.returncode == 2, r.stderr
        assert "32 MiB" in r.stderr
    assert server.seen == []


def test_scripted_too_many_files_is_refused_before_any_request(scripted_server, tmp_path):
    envs = tmp_path / "envs"
    for i in range(21):
        d = envs / ("t%02d" % i)
        d.mkdir(parents=True)
        for j in range(1000):
            (d / str(j)).touch()
    server, url = scripted_server([json_answer(STRUCTURE_OK)])
    r = run_script(CHECK_TASK, [str(envs)], url)
    assert r.returncode == 2, r.stderr
    assert "20000 files" in r.stderr
    assert server.seen == []


def test_scripted_plain_http_is_refused_for_other_hosts(collection):
    for script, args in ((CHECK_TASK, [str(collection)]), (GATES, ["static", str(collection)])):
        r = run_script(script, args, "http://example.com")
        assert r.returncode == 2
        assert "only for 127.0.0.1, localhost and ::1" in r.stderr


def test_scripted_usage_errors_exit_2(tmp_path):
    assert run_script(CHECK_TASK, [str(tmp_path / "nope")], "http://127.0.0.1:9").returncode == 2
    assert run_script(CHECK_TASK, [], "http://127.0.0.1:9").returncode == 2
    assert run_script(GATES, [], "http://127.0.0.1:9").returncode == 2
    r = run_script(GATES, ["collect", "--plan", str(tmp_path / "plan.json"), "--jobs-root", str(tmp_path)],
                   "http://127.0.0.1:9")
    assert r.returncode == 2
    assert "cannot read the plan" in r.stderr


def test_collect_reads_the_trial_folders_of_the_plan(tmp_path):
    plan = {"plan_hash": "ab" * 32, "environment_id": "env-1", "challenge_id": "local-demo",
            "policy": {"controls_reruns": 2, "band_attempts": 2, "no_oracle": "allow"},
            "tasks": [{"task": "t1", "runs": [{"kind": "oracle", "trials": 2}, {"kind": "noop", "trials": 2},
                                              {"kind": "band", "trials": 2}]}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    jobs = tmp_path / "jobs" / "gates" / "t1"

    def trial(kind, name, files):
        d = jobs / kind / name
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)

    trial("oracle", "trial-0", {"result.json": json.dumps({"reward": 1.0, "checks": [{"name": "a", "passed": True}]})})
    trial("oracle", "trial-1", {"result.json": json.dumps({"reward": 1.0, "checks": [{"name": "a", "passed": False}]})})
    trial("noop", "trial-0", {"verifier/reward.json": '{"reward": 0.0}'})
    trial("noop", "trial-1", {"verifier/reward.txt": "0.0\n"})
    trial("band", "trial-0", {"verifier/reward.txt": "1.0"})
    trial("band", "trial-1", {"error.txt": "sandbox start timeout"})
    r = run_script(GATES, ["collect", "--plan", str(tmp_path / "plan.json"), "--jobs-root", str(tmp_path / "jobs")],
                   "http://127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["plan_hash"] == plan["plan_hash"] and out["policy"] == plan["policy"]
    t = out["tasks"][0]
    assert [x["checks_passed"] for x in t["oracle"]] == [True, False]
    assert [x["reward"] for x in t["noop"]] == [0.0, 0.0]
    assert t["band"][0]["reward"] == 1.0 and t["band"][1] == {"reward": None, "checks_passed": None,
                                                             "error": "sandbox start timeout"}
    assert "gates attach" in r.stderr


def test_scripted_network_failure_exits_1(collection):
    r = run_script(CHECK_TASK, [str(collection)], "http://127.0.0.1:9")
    assert r.returncode == 1
    assert "could not reach" in r.stderr


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scripted_the_three_files_share_one_summary():
    cli, check, gates = _load(CLI), _load(CHECK_TASK), _load(GATES)
    assert inspect.getsource(cli.report_lines) == inspect.getsource(check.report_lines)
    assert inspect.getsource(check.report_lines) == inspect.getsource(gates.report_lines)
    for name in ("base_url", "post_check", "collection_layout", "collect_files", "check_body", "run_check"):
        assert inspect.getsource(getattr(check, name)) == inspect.getsource(getattr(gates, name)), name


# ---- against the arena ----


def test_check_task_on_the_good_envs(arena_url):
    r = run_script(CHECK_TASK, [str(fixture_dir("good", "envs"))], arena_url)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["tasks"] == 2
    assert report["errors"] == []
    assert "source" not in report and "fetch" not in report


def test_static_gates_on_the_good_envs_and_collection(arena_url):
    for path in (fixture_dir("good", "envs"), fixture_dir("good")):
        r = run_script(GATES, ["static", str(path)], arena_url)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["valid"] is True
        assert report["tasks"] == 2
        assert report["quality_gates"]["static"]["summary"]["tasks"] == 2
        assert "Static gates" in r.stderr


def test_both_on_a_single_task(arena_url):
    task = first_task(fixture_dir("good", "envs"))
    r = run_script(CHECK_TASK, [str(task)], arena_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"] == 1
    r = run_script(GATES, ["static", str(task)], arena_url)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["tasks"] == 1
    assert [t["name"] for t in report["task_list"]] == [task.name]


def test_a_harbor_dataset_and_one_of_its_tasks(arena_url):
    tasks = fixture_dir("good-harbor", "tasks")
    for path, count in ((tasks, len([p for p in tasks.iterdir() if p.is_dir()])), (first_task(tasks), 1)):
        r = run_script(GATES, ["static", str(path)], arena_url)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["valid"] is True
        assert report["tasks"] == count


def test_static_gates_find_a_dockerfile_that_copies_the_oracle(arena_url):
    r = run_script(GATES, ["static", str(fixture_dir("dockerfile-copies-oracle"))], arena_url)
    assert r.returncode == 0, "a rejected task leaves the collection valid: " + r.stderr
    report = json.loads(r.stdout)
    codes = [f["code"] for f in report["quality_gates"]["static"]["findings"]]
    assert "L-IMAGE-COPIES-SOLUTION" in codes
    assert "L-IMAGE-COPIES-SOLUTION" in r.stderr
