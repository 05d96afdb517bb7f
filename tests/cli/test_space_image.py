"""The Space's image without Docker: `dev/space-image assemble` writes the tree the Dockerfile copies
into the image, and `dev/space-image serve` starts it in an empty directory as the Space would:
SPACE_HOST and the OAuth variables set, a fresh data directory standing in for /data, and the private
overlay read at start from the private dataset ARENA_PRIVATE_REPO names, through the HF API (here the
stand-in) with the Space's token. The test build (debug, already built by dev/test) stands in for
the release build the Dockerfile makes."""

import json
import os
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import free_port, hub_url, start_server

ROOT = Path(__file__).resolve().parents[2]
SPACE_IMAGE = ROOT / "dev" / "space-image"
SEALED = ROOT / "tests" / "fixtures" / "heldout" / "sealed-suite"
ARENA_BOT = "hf_local_test_arena_bot_5a5a5a"
SPACE_HOST = "openenvarena-arena.hf.space"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url, redirects=True):
    opener = urllib.request.build_opener() if redirects else urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    dest = tmp_path_factory.mktemp("space")
    done = subprocess.run([str(SPACE_IMAGE), "assemble", str(dest), "--debug", "--prebuilt"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return dest


@pytest.fixture(scope="module")
def private_repo(tmp_path_factory):
    """The private overlay as a private dataset of the organization: the held-out suite's task list
    and its fingerprint (made from the fixtures' sealed suite)."""
    from huggingface_hub import HfApi

    folder = tmp_path_factory.mktemp("overlay")
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "arena-target")
    fp = subprocess.run([target + "/debug/arena", "fingerprint-suite", str(SEALED), "--suite", "openenv-heldout",
                         "--sealed"], capture_output=True, text=True, check=True).stdout
    (folder / "fingerprints").mkdir()
    (folder / "fingerprints" / "openenv-heldout.json").write_text(fp)
    (folder / "suites" / "openenv-heldout").mkdir(parents=True)
    names = sorted(p.name for p in (SEALED / "envs").iterdir())
    (folder / "suites" / "openenv-heldout" / "tasks.txt").write_text("\n".join(names) + "\n")
    repo = "benchflow/arena-private-" + uuid.uuid4().hex[:8]
    api = HfApi(endpoint=hub_url())
    api.create_repo(repo, repo_type="dataset", private=True, token=ARENA_BOT)
    info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", token=ARENA_BOT)
    return repo, info.oid, names


def space_env(port, repo, **extra):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "RUST_LOG": "warn",
           "ARENA_ADDR": "127.0.0.1:%d" % port, "SPACE_HOST": SPACE_HOST,
           "OPENID_PROVIDER_URL": hub_url(), "OAUTH_CLIENT_ID": "arena-test", "OAUTH_CLIENT_SECRET": "arena-test-secret",
           "OAUTH_SCOPES": "openid profile", "HF_ENDPOINT": hub_url(), "HF_TOKEN": ARENA_BOT,
           "ARENA_PRIVATE_REPO": repo}
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def start(dest, env):
    return subprocess.Popen([str(SPACE_IMAGE), "serve", str(dest)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_the_image_tree_holds_the_server_the_site_and_the_published_registry(image):
    app = image / "app"
    assert os.access(app / "arena", os.X_OK)
    # Every page's wasm module (app/src/page_modules.rs), precompressed.
    modules = ("arena", "page_board", "page_arena", "page_collection", "page_run", "page_submit")
    for name in modules:
        assert (app / "site" / "pkg" / f"{name}_bg.wasm.br").is_file(), name
        assert (app / "site" / "pkg" / f"{name}.js.br").is_file(), name
    for path in ("site/pkg/arena_bg.wasm", "site/pkg/arena_bg.wasm.br", "site/AGENTS.md", "site/arena_cli.py",
                 "site/README.agent-example.md", "configs/challenges/openenv-9b.toml"):
        assert (app / path).is_file(), path
    # Only what is published: no local demo challenge, no private overlay, no database.
    assert not (app / "configs" / "challenges" / "local-demo.toml").exists()
    assert sorted(p.name for p in app.iterdir()) == ["arena", "configs", "site"]


def test_the_space_starts_from_the_image_and_reads_its_private_overlay(image, private_repo, tmp_path):
    repo, revision, names = private_repo
    server, port = start_server(
        lambda port, out: subprocess.Popen([str(SPACE_IMAGE), "serve", str(image)], env=space_env(port, repo),
                                           stdout=out, stderr=out),
        tmp_path / "space.log", "the Space", up=lambda port: get("http://127.0.0.1:%d/healthz" % port)[0] == 200)
    url = "http://127.0.0.1:%d" % port
    try:
        status, _, body = get(url + "/api/version")
        assert status == 200
        version = json.loads(body)
        assert version["private_overlay"] == {"repo": repo, "revision": revision}
        # The private suite's fingerprint came with the overlay: nothing is unchecked.
        assert version["heldout_unchecked"] == []
        overlay = image / "data" / "private-overlay"
        assert (overlay / "fingerprints" / "openenv-heldout.json").is_file()
        assert (overlay / "suites" / "openenv-heldout" / "tasks.txt").read_text().split() == names
        assert (image / "data" / "arena.sqlite").is_file()
        # Sign-in comes back to the Space's public address.
        status, headers, _ = get(url + "/auth/login", redirects=False)
        assert status in (302, 303), status
        location = headers["Location"]
        assert location.startswith(hub_url() + "/oauth/authorize?")
        assert "redirect_uri=https%3A%2F%2F" + SPACE_HOST + "%2Flogin%2Fcallback" in location
        for path in ("/README.agent-example.md", "/arena_cli.py", "/AGENTS.md", "/"):
            assert get(url + path)[0] == 200, path
    finally:
        server.terminate()
        server.wait(timeout=20)
    # Nothing the Space wrote went outside its data directory and its empty working directory.
    assert sorted(p.name for p in image.iterdir()) == ["app", "data", "home"]


@pytest.mark.parametrize("case", ["missing", "no-token"])
def test_the_space_refuses_to_start_without_its_private_overlay(image, private_repo, case, tmp_path):
    repo = private_repo[0] if case == "no-token" else "benchflow/no-such-overlay"
    env = space_env(free_port(), repo, HF_TOKEN=None if case == "no-token" else ARENA_BOT,
                    ARENA_DATA_DIR=None)
    server = start(image, env)
    out, err = server.communicate(timeout=60)
    assert server.returncode != 0
    assert "ARENA_PRIVATE_REPO" in err and repo in err
    assert ARENA_BOT not in err + out, "the token is never printed"
