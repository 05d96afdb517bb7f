"""The organizer commands under the guide's names: `python dev/fingerprint_suite.py SUITE` and
`python dev/check_pipeline_configs.py PATH_TO_CLONE`. The pipeline clone here is a local git
repository whose two commits carry a config loader written for this test, standing in for
posttrainarena: an older one, like the pipeline's main, that does not know `evaluation.trials`,
and a newer one, like its held-out branch, that does."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FINGERPRINT = ROOT / "dev" / "fingerprint_suite.py"
CHECK_CONFIGS = ROOT / "dev" / "check_pipeline_configs.py"
SEALED = ROOT / "tests" / "fixtures" / "heldout" / "sealed-suite"
LOADER = "pipelines/benchflow-task-posttrain/src/posttrainarena/benchflow_pipeline/config.py"
PIN = "bcbaffb58a19829d05fa483662c358e6ed5ba353"


def arena_bin():
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "arena-target")
    path = Path(target) / "debug" / "arena"
    if not path.is_file():
        pytest.fail("no debug arena binary at %s: run through dev/test" % path)
    return str(path)


def run(script, args, **env):
    full = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/nonexistent"), "ARENA_BIN": arena_bin()}
    full.update(env)
    return subprocess.run([sys.executable, str(script), *args], env=full, capture_output=True, text=True, timeout=120)


def git(repo, *args):
    env = {"PATH": os.environ.get("PATH", ""), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(repo)}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_fingerprint_suite_writes_a_private_suite_into_the_overlay(tmp_path):
    overlay = tmp_path / "overlay"
    r = run(FINGERPRINT, ["openenv-heldout", "--source", str(SEALED)], ARENA_PRIVATE_OVERLAY=str(overlay))
    assert r.returncode == 0, r.stderr
    written = json.loads((overlay / "fingerprints" / "openenv-heldout.json").read_text())
    direct = subprocess.run([arena_bin(), "fingerprint-suite", str(SEALED), "--suite", "openenv-heldout", "--sealed"],
                            capture_output=True, text=True, check=True)
    # The suite's [meta] says it is sealed; the script passes that on.
    assert written == json.loads(direct.stdout)
    assert written["suite"] == "openenv-heldout" and written["sealed"] is True
    assert len(written["tasks"]) == 6


def test_fingerprint_suite_reads_the_pinned_revision_not_the_checkout(tmp_path):
    repo = tmp_path / "suite-repo"
    shutil.copytree(SEALED, repo)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "pinned")
    pinned = git(repo, "rev-parse", "HEAD")
    shutil.rmtree(repo / "envs" / "sealed-bond-yield")
    git(repo, "commit", "-q", "-am", "later")
    at_pin = run(FINGERPRINT, ["openenv-heldout", "--source", str(repo), "--revision", pinned, "--out", "-"])
    head = run(FINGERPRINT, ["openenv-heldout", "--source", str(repo), "--out", "-"])
    assert at_pin.returncode == 0 and head.returncode == 0, at_pin.stderr + head.stderr
    assert len(json.loads(at_pin.stdout)["tasks"]) == 6
    assert len(json.loads(head.stdout)["tasks"]) == 5
    assert git(repo, "worktree", "list").count("\n") == 0, "the worktree is removed afterwards"


def test_fingerprint_suite_says_where_a_private_fingerprint_goes(tmp_path):
    r = run(FINGERPRINT, ["openenv-heldout", "--source", str(SEALED)])
    assert r.returncode != 0 and "ARENA_PRIVATE_OVERLAY" in r.stderr
    r = run(FINGERPRINT, ["no-such-suite", "--source", str(SEALED)])
    assert r.returncode != 0 and "no suite no-such-suite" in r.stderr


OLD_LOADER = '''"""Config loader of an older pipeline: its evaluation table knows no trials."""
import os, tomllib
KNOWN_EVAL = {"sync_base_to_vllm"}
def load_config(path):
    data = tomllib.loads(open(path).read())
    for table in ("harness", "evaluation"):
        if table not in data:
            raise ValueError("Missing required [%s] table" % table)
    unknown = sorted(set(data["evaluation"]) - KNOWN_EVAL)
    if unknown:
        raise TypeError("EvaluationConfig.__init__() got an unexpected keyword argument '%s'" % unknown[0])
    base = os.path.dirname(path)
    for entry in [data["train_dataset"], *data["eval_suites"]]:
        if not os.path.isfile(os.path.join(base, entry["task_list"])):
            raise ValueError("task_list does not exist: %s" % entry["task_list"])
    return data
'''
NEW_LOADER = OLD_LOADER.replace('{"sync_base_to_vllm"}', '{"sync_base_to_vllm", "trials"}')


@pytest.fixture
def pipeline_clone(tmp_path):
    repo = tmp_path / "posttrainarena"
    (repo / LOADER).parent.mkdir(parents=True)
    git(repo.parent, "init", "-q", str(repo))
    commits = {}
    for name, text in (("old", OLD_LOADER), ("new", NEW_LOADER)):
        (repo / LOADER).write_text(text)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", name)
        commits[name] = git(repo, "rev-parse", "HEAD")
    return repo, commits


def configs_pinned_to(tmp_path, commit):
    """The registry dev/run serves (configs/ and the local demo), every challenge pinned to `commit`."""
    configs = tmp_path / ("configs-" + commit[:7])
    shutil.copytree(ROOT / "configs", configs)
    for sub in ("challenges", "methods", "suites", "fixture/task-lists"):
        (configs / sub).mkdir(parents=True, exist_ok=True)
        for f in (ROOT / "dev" / "local-challenge" / sub).iterdir():
            shutil.copy(f, configs / sub / f.name)
    for challenge in (configs / "challenges").iterdir():
        challenge.write_text(challenge.read_text().replace(PIN, commit))
    return configs


def test_check_pipeline_configs_loads_with_the_pinned_pipeline(tmp_path, pipeline_clone):
    repo, commits = pipeline_clone
    ok = run(CHECK_CONFIGS, [str(repo), "--configs-dir", str(configs_pinned_to(tmp_path, commits["new"]))])
    assert ok.returncode == 0, ok.stderr
    assert "local-demo: loaded by the config loader of pipeline commit %s" % commits["new"] in ok.stderr
    # The private suite's dataset and tasks are in the overlay, which is not here.
    assert "openenv-9b: not loaded (held-out suite `openenv-heldout` names no dataset" in ok.stderr
    # A recipe that needs a newer pipeline fails at the older pin, naming the loader's reason.
    old = run(CHECK_CONFIGS, [str(repo), "--configs-dir", str(configs_pinned_to(tmp_path, commits["old"]))])
    assert old.returncode == 1
    assert "refused it: TypeError: EvaluationConfig.__init__() got an unexpected keyword argument 'trials'" in old.stderr
    assert git(repo, "worktree", "list").count("\n") == 0, "the worktrees are removed afterwards"


def test_check_pipeline_configs_refuses_a_clone_without_the_pin(tmp_path, pipeline_clone):
    repo, _ = pipeline_clone
    r = run(CHECK_CONFIGS, [str(repo), "--configs-dir", str(configs_pinned_to(tmp_path, PIN))])
    assert r.returncode == 1
    assert "does not hold the pinned pipeline commit %s" % PIN in r.stderr
    # Without a clone it checks and composes the registry only.
    plain = run(CHECK_CONFIGS, [])
    assert plain.returncode == 0 and "# openenv-9b (" in plain.stdout
