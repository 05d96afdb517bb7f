"""The HF stand-in's dataset routes read with the real huggingface_hub client: a git repository under
ARENA_TEST_HUB_REPOS/datasets/pytest/<unique> is listed, resolved and downloaded back, and its oids are
git's blob ids."""

import os
import subprocess
import uuid
from pathlib import Path

import pytest

# huggingface_hub reads these when it is imported; tests pass token=False, so no token is sent.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_HUB_OFFLINE", None)

GIT_ENV = {
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}

FILES = {
    "README.md": b"# pytest dataset\n",
    "tasks/one/task.md": b"---\nversion: 1\n---\n## prompt\nDo one thing.\n",
    "tasks/one/verifier/test.sh": b"#!/bin/sh\nexit 0\n",
    "tasks/two/task.md": b"---\nversion: 1\n---\n## prompt\nDo another.\n",
    "blob.bin": bytes(range(256)) * 4,
}


def git(repo, *args):
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", "-c", "user.name=pytest", "-c", "user.email=pytest@localhost", "-C", str(repo), *args],
        env=env,
        capture_output=True,
        check=True,
    )
    return out.stdout.decode().strip()


@pytest.fixture(scope="module")
def hub():
    url = os.environ.get("ARENA_TEST_HUB_URL")
    if not url:
        pytest.fail("ARENA_TEST_HUB_URL is not set: run these tests through dev/test")
    return url


@pytest.fixture(scope="module")
def dataset():
    """A dataset repository with `main` (tagged v1) and a `feature/more` branch one commit ahead."""
    root = os.environ.get("ARENA_TEST_HUB_REPOS")
    if not root:
        pytest.fail("ARENA_TEST_HUB_REPOS is not set: run these tests through dev/test")
    name = "ds-" + uuid.uuid4().hex[:12]
    repo = Path(root) / "datasets" / "pytest" / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for path, data in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tasks")
    git(repo, "tag", "v1")
    git(repo, "checkout", "-q", "-b", "feature/more")
    (repo / "tasks/three.md").write_bytes(b"three\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    git(repo, "checkout", "-q", "main")
    return {"repo": repo, "id": f"pytest/{name}", "main": git(repo, "rev-parse", "main")}


def blob_id(repo, path):
    return git(repo, "hash-object", str(repo / path))


def test_list_repo_tree_matches_git(hub, dataset):
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    api = HfApi(endpoint=hub, token=False)
    items = list(
        api.list_repo_tree(dataset["id"], repo_type="dataset", recursive=True, revision=dataset["main"])
    )
    files = {i.path: i for i in items if isinstance(i, RepoFile)}
    folders = {i.path for i in items if isinstance(i, RepoFolder)}
    assert set(files) == set(FILES)
    assert folders == {"tasks", "tasks/one", "tasks/one/verifier", "tasks/two"}
    for path, data in FILES.items():
        assert files[path].blob_id == blob_id(dataset["repo"], path), path
        assert files[path].size == len(data)
    top = {i.path for i in api.list_repo_tree(dataset["id"], repo_type="dataset", revision="v1")}
    assert top == {"README.md", "blob.bin", "tasks"}
    sub = {i.path for i in api.list_repo_tree(dataset["id"], "tasks/one", repo_type="dataset", recursive=True)}
    assert sub == {"tasks/one/task.md", "tasks/one/verifier", "tasks/one/verifier/test.sh"}


def test_dataset_info_and_files(hub, dataset):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub, token=False)
    info = api.dataset_info(dataset["id"], revision="main")
    assert info.sha == dataset["main"]
    assert {s.rfilename for s in info.siblings} == set(FILES)
    more = api.dataset_info(dataset["id"], revision="feature/more")
    assert more.sha == git(dataset["repo"], "rev-parse", "feature/more")
    files = api.list_repo_files(dataset["id"], repo_type="dataset", revision="feature/more")
    assert set(files) == set(FILES) | {"tasks/three.md"}


def test_hf_hub_download_reads_the_bytes(hub, dataset, tmp_path):
    from huggingface_hub import hf_hub_download

    for path, data in FILES.items():
        local = hf_hub_download(
            dataset["id"],
            path,
            repo_type="dataset",
            revision=dataset["main"],
            endpoint=hub,
            cache_dir=tmp_path,
            token=False,
        )
        assert Path(local).read_bytes() == data, path
        # The cache stores blobs by the ETag the stand-in sent: git's blob id.
        assert Path(local).resolve().name == blob_id(dataset["repo"], path)
    branch = hf_hub_download(
        dataset["id"], "tasks/three.md", repo_type="dataset", revision="feature/more", endpoint=hub,
        cache_dir=tmp_path, token=False,
    )
    assert Path(branch).read_bytes() == b"three\n"


def test_missing_things_raise_the_clients_errors(hub, dataset, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=hub, token=False)
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("pytest/no-such-dataset")
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(dataset["id"], revision="no-such-branch")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(
            dataset["id"], "nope.txt", repo_type="dataset", revision="main", endpoint=hub, cache_dir=tmp_path,
            token=False,
        )
    git(dataset["repo"], "config", "standin.visibility", "private")
    try:
        with pytest.raises(RepositoryNotFoundError):
            api.dataset_info(dataset["id"])
    finally:
        git(dataset["repo"], "config", "--unset", "standin.visibility")
