"""The HF stand-in's dataset writes and Jobs API, driven by the real huggingface_hub client: a private
dataset is created (with HF's first commit), filled with upload_folder and create_commit (one that
names a parent commit the branch has left is refused) and read back with the same token; a job is
run, inspected, listed by label, its logs streamed, and cancelled."""

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
    assert files == {".gitattributes", "job-inputs/run-x/job.json", "job-inputs/run-x/tasks/one/task.md",
                     "runs/run-x/score.json"}
    # A commit on a parent the branch has moved past is refused (HF's 412), as the pipeline's
    # leaderboard updates expect.
    with pytest.raises(HfHubHTTPError) as stale:
        api.create_commit(repo_id=repo, repo_type="dataset", token=EVE, commit_message="late", parent_commit=info.oid,
                          operations=[CommitOperationAdd(path_in_repo="late.txt", path_or_fileobj=b"x")])
    assert stale.value.response.status_code == 412
    # Its visibility is a setting.
    api.update_repo_settings(repo, repo_type="dataset", private=False, token=EVE)
    assert api.dataset_info(repo, token=False).private is False
    api.update_repo_settings(repo, repo_type="dataset", private=True, token=EVE)
    path = api.hf_hub_download(repo, "runs/run-x/score.json", repo_type="dataset", token=EVE,
                               cache_dir=str(tmp_path / "cache"))
    assert open(path, "rb").read() == b'{"ok": 1}'
    # Private: anonymous reads and other users' writes are refused.
    with pytest.raises(HfHubHTTPError):
        api.list_repo_files(repo, repo_type="dataset", token=False)
    with pytest.raises(HfHubHTTPError):
        api.create_commit(repo_id=repo, repo_type="dataset", token=BOB, commit_message="no",
                          operations=[CommitOperationAdd(path_in_repo="x", path_or_fileobj=b"x")])


UV_IMAGE = "ghcr.io/astral-sh/uv:python3.12-bookworm"


def test_run_inspect_list_logs_and_cancel_a_job(api):
    import json
    import urllib.request

    label = uuid.uuid4().hex[:10]
    arena = os.environ["ARENA_TEST_URL"]
    # The arena's job script, as a run's job runs it, on a bundle that does not exist.
    job = api.run_job(image=UV_IMAGE, command=["uv", "run", "--python", "3.12", arena + "/arena_job.py", "--bundle-repo",
                                               "benchflow/no-such-runs", "--bundle-revision", "main", "--bundle-path",
                                               "job-inputs/run-none", "--posttrainarena-ref", "main"],
                      namespace="benchflow", token=EVE, flavor="cpu-basic", labels={"pytest": label},
                      secrets={"ARENA_RUN_SECRET": "s3cret"}, timeout="10m")
    assert job.status.stage in ("SCHEDULING", "RUNNING", "ERROR")
    listed = api.list_jobs(namespace="benchflow", token=EVE, labels={"pytest": label})
    assert [j.id for j in listed] == [job.id]
    # The command ran (uv of the simulated image, then the script) and failed: the job ends in ERROR.
    deadline = time.time() + 30
    while api.inspect_job(job_id=job.id, namespace="benchflow", token=EVE).status.stage != "ERROR":
        assert time.time() < deadline, "the job never ended"
        time.sleep(0.2)
    lines = list(api.fetch_job_logs(job_id=job.id, namespace="benchflow", token=EVE))
    assert any("SIMULATED" in line for line in lines), lines
    assert any(line.startswith("[arena-job] error: the run failed") for line in lines), lines
    inspected = api.inspect_job(job_id=job.id, namespace="benchflow", token=EVE)
    assert inspected.secrets == ["ARENA_RUN_SECRET"], "secret values are never shown"
    assert "exit code 1" in inspected.status.message
    # An image the stand-in cannot run errs at once, naming it.
    other = api.run_job(image="ghcr.io/example/trainer:1", command=["train"], namespace="benchflow", token=EVE)
    assert api.inspect_job(job_id=other.id, namespace="benchflow", token=EVE).status.stage == "ERROR"

    # A job that waits in SCHEDULING is cancelled.
    faults = urllib.request.Request(os.environ["ARENA_TEST_HUB_URL"] + "/_standin/jobs", method="PUT",
                                    data=json.dumps({"scheduling_ms": 60000}).encode(),
                                    headers={"content-type": "application/json"})
    urllib.request.urlopen(faults).close()
    slow = api.run_job(image=UV_IMAGE, command=["uv", "run", "x.py"], namespace="benchflow", token=EVE,
                       labels={"pytest": label})
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
    assert set(api.list_repo_files(repo, repo_type="dataset", token=EVE)) == {".gitattributes", "README.md", "submission.yaml"}
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n# never closed\n")
    with pytest.raises(ValueError, match="not closed"):
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=EVE)


def binary(size, seed):
    """Bytes that are not text, reproducibly."""
    import random

    return random.Random(seed).randbytes(size)


def test_binary_and_large_files_travel_through_lfs_with_huggingface_hubs_own_client(api, tmp_path, monkeypatch):
    """upload_folder and hf_hub_download, unchanged, without Xet: preupload routes the binary and
    large files to LFS (basic, and multipart for the 12 MiB one), the tree lists them with `lfs`,
    and each downloads byte for byte through the storage redirect. An inline binary is refused."""
    from huggingface_hub import CommitOperationAdd, constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    repo = "benchflow/lfs-" + uuid.uuid4().hex[:10]
    api.create_repo(repo, repo_type="dataset", private=True, token=EVE)
    files = {
        "envs/office/data.csv": b"item,total\nlunch,12.50\n",
        "envs/office/sheet.xlsx": b"PK\x03\x04" + binary(20_000, 1),
        "envs/office/chart.png": b"\x89PNG\r\n\x1a\n" + binary(30_000, 2),
        "envs/office/table.parquet": b"PAR1" + binary(10_000, 3),
        "envs/office/report.pdf": b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + binary(2 << 20, 4),
        "envs/media/recording.wav": b"RIFF" + binary(12 << 20, 5),
    }
    folder = tmp_path / "collection"
    for path, content in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(content)
    api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=EVE)
    tree = {f.path: f for f in api.list_repo_tree(repo, repo_type="dataset", token=EVE, recursive=True)
            if hasattr(f, "size")}
    import hashlib

    for path, content in files.items():
        assert tree[path].size == len(content), path
        if path.endswith(".csv"):
            assert tree[path].lfs is None, path
        else:
            assert tree[path].lfs is not None and tree[path].lfs.sha256 == hashlib.sha256(content).hexdigest(), path
        got = api.hf_hub_download(repo, path, repo_type="dataset", token=EVE, cache_dir=str(tmp_path / "cache"))
        assert open(got, "rb").read() == content, path
    # The Hub refuses a binary file committed inline; the client sends it through LFS, and a raw
    # commit that carries it inline is refused with the Hub's message.
    import base64
    import json as _json
    import urllib.error
    import urllib.request

    body = "\n".join(_json.dumps(line) for line in (
        {"key": "header", "value": {"summary": "inline"}},
        {"key": "file", "value": {"path": "inline.png", "content": base64.b64encode(binary(999, 6)).decode(),
                                  "encoding": "base64"}},
    )) + "\n"
    req = urllib.request.Request(f"{api.endpoint}/api/datasets/{repo}/commit/main", data=body.encode(), method="POST",
                                 headers={"Authorization": "Bearer " + EVE, "Content-Type": "application/x-ndjson"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 400
    assert "rejected because it contains binary files" in refused.value.read().decode()
    api.create_commit(repo_id=repo, repo_type="dataset", token=EVE, commit_message="through LFS",
                      operations=[CommitOperationAdd(path_in_repo="inline.png", path_or_fileobj=binary(999, 6))])
