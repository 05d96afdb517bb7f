"""The HF stand-in's dataset writes and Jobs API, driven by the real huggingface_hub client: a private
dataset is created, filled with upload_folder and create_commit and read back with the same token;
a job is run, inspected, listed by label, its logs streamed, and cancelled."""

import os
import time
import uuid

import pytest

os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_HUB_OFFLINE", None)

# eve writes in the benchflow organization (tests/fixtures/hub-users.json); bob writes nowhere.
EVE = "hf_local_test_eve_e11e11"
BOB = "hf_local_test_bob_91d2aa"


@pytest.fixture(scope="module")
def api():
    from huggingface_hub import HfApi

    url = os.environ.get("ARENA_TEST_HUB_URL")
    if not url:
        pytest.fail("ARENA_TEST_HUB_URL is not set: run these tests through dev/test")
    return HfApi(endpoint=url)


def test_create_upload_commit_and_read_back_a_private_dataset(api, tmp_path):
    from huggingface_hub import CommitOperationAdd
    from huggingface_hub.errors import HfHubHTTPError

    repo = "benchflow/writes-" + uuid.uuid4().hex[:10]
    api.create_repo(repo, repo_type="dataset", private=True, token=EVE)
    # Creating it again is fine with exist_ok.
    api.create_repo(repo, repo_type="dataset", private=True, token=EVE, exist_ok=True)
    folder = tmp_path / "bundle"
    (folder / "tasks" / "one").mkdir(parents=True)
    (folder / "tasks" / "one" / "task.md").write_text("## prompt\nDo it.\n")
    (folder / "job.json").write_text('{"run_id": "run-x"}')
    info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=EVE,
                             path_in_repo="job-inputs/run-x")
    assert len(info.oid) == 40
    api.create_commit(repo_id=repo, repo_type="dataset", token=EVE, commit_message="results",
                      operations=[CommitOperationAdd(path_in_repo="runs/run-x/score.json", path_or_fileobj=b'{"ok": 1}')])
    files = set(api.list_repo_files(repo, repo_type="dataset", token=EVE))
    assert files == {"job-inputs/run-x/job.json", "job-inputs/run-x/tasks/one/task.md", "runs/run-x/score.json"}
    path = api.hf_hub_download(repo, "runs/run-x/score.json", repo_type="dataset", token=EVE,
                               cache_dir=str(tmp_path / "cache"))
    assert open(path, "rb").read() == b'{"ok": 1}'
    # Private: anonymous reads and other users' writes are refused.
    with pytest.raises(HfHubHTTPError):
        api.list_repo_files(repo, repo_type="dataset", token=False)
    with pytest.raises(HfHubHTTPError):
        api.create_commit(repo_id=repo, repo_type="dataset", token=BOB, commit_message="no",
                          operations=[CommitOperationAdd(path_in_repo="x", path_or_fileobj=b"x")])


def test_run_inspect_list_logs_and_cancel_a_job(api):
    label = uuid.uuid4().hex[:10]
    job = api.run_job(image="ghcr.io/benchflow-ai/posttrainarena:test", command=["posttrainarena-train", "run"],
                      namespace="benchflow", token=EVE, flavor="cpu-basic", labels={"pytest": label},
                      secrets={"ARENA_RUN_SECRET": "s3cret"}, timeout="10m")
    assert job.status.stage in ("SCHEDULING", "RUNNING", "ERROR")
    listed = api.list_jobs(namespace="benchflow", token=EVE, labels={"pytest": label})
    assert [j.id for j in listed] == [job.id]
    # No bundle: the simulated pipeline says so in its log and the job ends in ERROR.
    deadline = time.time() + 20
    while api.inspect_job(job_id=job.id, namespace="benchflow", token=EVE).status.stage != "ERROR":
        assert time.time() < deadline, "the job never ended"
        time.sleep(0.2)
    lines = list(api.fetch_job_logs(job_id=job.id, namespace="benchflow", token=EVE))
    assert any("SIMULATED" in line for line in lines), lines
    assert any("could not read the bundle" in line for line in lines), lines
    inspected = api.inspect_job(job_id=job.id, namespace="benchflow", token=EVE)
    assert inspected.secrets == ["ARENA_RUN_SECRET"], "secret values are never shown"

    # A job that waits in SCHEDULING is cancelled.
    slow = api.run_job(image="x", command=["true"], namespace="benchflow", token=EVE, labels={"pytest": label})
    api.cancel_job(job_id=slow.id, namespace="benchflow", token=EVE)
    assert api.inspect_job(job_id=slow.id, namespace="benchflow", token=EVE).status.stage == "CANCELED"
    hardware = {h.name: h for h in api.list_jobs_hardware(token=EVE)}
    assert abs(hardware["h200"].unit_cost_usd * 60 - 5.0) < 1e-9


def test_jobs_need_a_member_of_the_namespace(api):
    from huggingface_hub.errors import HfHubHTTPError

    with pytest.raises(HfHubHTTPError):
        api.run_job(image="x", command=["true"], namespace="benchflow", token=BOB)


def test_a_folder_with_a_card_is_uploaded_after_its_yaml_is_checked(api, tmp_path):
    """upload_folder asks /api/validate-yaml about a README.md first, as the `hf upload` of the
    quickstart does; a card whose front matter is not closed is refused before anything is sent."""
    repo = "eve/card-" + uuid.uuid4().hex[:10]
    api.create_repo(repo, repo_type="dataset", token=EVE)
    folder = tmp_path / "collection"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlicense: apache-2.0\ntags:\n  - rl\n---\n# Tasks\n")
    (folder / "submission.yaml").write_text("team_name: t\n")
    api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=EVE)
    assert set(api.list_repo_files(repo, repo_type="dataset", token=EVE)) == {"README.md", "submission.yaml"}
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n# never closed\n")
    with pytest.raises(ValueError, match="not closed"):
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=EVE)
