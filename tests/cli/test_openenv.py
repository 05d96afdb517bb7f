"""Admission agrees with the real `openenv validate --url` (openenv-core 0.3.0 from PyPI, which
dev/test installs beside the tests): on each local image variant, the arena admits the image
exactly when the tool passes its server. The arena dev/test starts serves the fixture images and
has a simulated training cluster connected; it runs the images' echo server in its sandboxes."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "images" / "echo_server.py"
# One account per variant: each gets its one accepted submission of the day.
VARIANTS = {
    "ok": "hf_local_test_alice_7b1f0c",
    "no-mcp": "hf_local_test_bob_91d2aa",
    "no-health": "hf_local_test_dave_c0ffee",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openenv_validate(variant):
    """Whether `openenv validate --url` passes the variant's server."""
    core = os.environ.get("ARENA_TEST_OPENENV_CORE")
    if not core:
        pytest.fail("ARENA_TEST_OPENENV_CORE is not set: run these tests through dev/test, which installs openenv-core")
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), str(port), "--variant", variant])
    try:
        time.sleep(0.8)
        env = dict(os.environ, PYTHONPATH=core)
        r = subprocess.run([sys.executable, f"{core}/bin/openenv", "validate", "--url", f"http://127.0.0.1:{port}"],
                           env=env, capture_output=True, text=True, timeout=120)
        report = json.loads(r.stdout)
        assert report["passed"] == (r.returncode == 0), r.stdout
        return report["passed"]
    finally:
        server.terminate()
        server.wait()


def call(method, url, token, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def admitted(arena_url, variant, token):
    """Whether the arena admits the variant's image (waits for admission's verdict)."""
    sub_id = "agree-%s-%d" % (variant, int(time.time()))
    body = {
        "submission_id": sub_id,
        "name": "Echo " + variant,
        "image": "ghcr.io/test/echo-%s:v1" % variant,
        "schema": {"action": {"type": "object", "properties": {"message": {"type": "string"}},
                              "required": ["message"], "additionalProperties": False},
                   "observation": {"type": "object"}},
        "tasks": [{"task_id": "echo-1", "split": "train"}],
        "example_actions": [{"message": "hello"}, {"message": "done"}],
    }
    status, answer = call("POST", arena_url + "/api/openenv/submissions", token, body)
    assert status == 202, answer
    deadline = time.time() + 90
    while True:
        status, answer = call("GET", arena_url + "/api/openenv/submissions/" + sub_id, token)
        assert status == 200, answer
        if answer["state"] != "validating":
            return answer["state"] == "validated", answer
        assert time.time() < deadline, answer
        time.sleep(0.5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_admission_agrees_with_openenv_validate(arena_url, variant):
    ours, answer = admitted(arena_url, variant, VARIANTS[variant])
    theirs = openenv_validate(variant)
    assert ours == theirs, (variant, answer)
