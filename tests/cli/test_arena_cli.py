import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]

HTML_503 = (503, {"Content-Type": "text/html"}, b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>")
JSON_OK = (200, {"Content-Type": "application/json"}, b'{"challenges": []}')


def test_challenges_prints_the_api_json(arena_url):
    r = run_cli(["challenges"], arena_url)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    by_id = {c["id"]: c for c in data["challenges"]}
    assert by_id["openenv-9b"]["health"]["accepting_runs"] is False, "runs are paused"
    assert by_id["local-demo"]["health"]["accepting_runs"] is True, "dev/test serves the local demo too"
    assert r.stderr == "", "a plain listing prints only the JSON"


def test_benchmarks_and_one_benchmark(arena_url):
    r = run_cli(["benchmarks"], arena_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["default"] == "openenv-heldout"
    r = run_cli(["benchmarks", "--benchmark", "openenv-heldout"], arena_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["leaderboards"][0]["challenge_id"] == "openenv-9b"


def test_unknown_benchmark_is_an_error_answer_exit_1(arena_url):
    r = run_cli(["benchmarks", "--benchmark", "nope"], arena_url)
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "BENCHMARK_NOT_FOUND"
    assert "BENCHMARK_NOT_FOUND" in r.stderr


def test_budget(arena_url):
    r = run_cli(["budget"], arena_url)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["cap_usd"] >= data["remaining_usd"] >= 0


def test_usage_errors_exit_2(arena_url):
    assert run_cli([], arena_url).returncode == 2
    assert run_cli(["no-such-command"], arena_url).returncode == 2


def test_plain_http_only_for_loopback():
    r = run_cli(["challenges"], "http://example.com")
    assert r.returncode == 2
    assert "only for 127.0.0.1, localhost and ::1" in r.stderr


def test_network_failure_exits_1():
    r = run_cli(["challenges"], "http://127.0.0.1:9")
    assert r.returncode == 1
    assert "could not reach" in r.stderr


def test_retries_an_html_503_then_succeeds(scripted_server):
    server, url = scripted_server([HTML_503, JSON_OK])
    started = time.monotonic()
    r = run_cli(["challenges"], url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"challenges": []}
    assert len(server.seen) == 2
    assert time.monotonic() - started >= 1.0, "the retry waits a second first"


def test_gives_up_after_three_retries_with_one_line(scripted_server):
    server, url = scripted_server([HTML_503, (502, {}, b"bad gateway"), (504, {}, b""), HTML_503, JSON_OK])
    r = run_cli(["budget"], url)
    assert r.returncode == 1
    assert len(server.seen) == 4, "one try and three retries (after 1, 2 and 4 s)"
    assert r.stderr.strip().count("\n") == 0
    assert "briefly unavailable" in r.stderr
    assert "<html>" not in r.stdout + r.stderr


def test_refuses_redirects_and_keeps_the_token_home(scripted_server):
    target, target_url = scripted_server([JSON_OK])
    server, url = scripted_server([(302, {"Location": target_url + "/api/challenges"}, b"")])
    r = run_cli(["challenges"], url, token="hf_secret_token_value")
    assert r.returncode == 1
    assert "redirect" in r.stderr
    assert target.seen == [], "the redirect was not followed"
    assert "hf_secret_token_value" not in r.stdout + r.stderr


def test_public_reads_send_no_token(scripted_server):
    server, url = scripted_server([JSON_OK])
    r = run_cli(["challenges"], url, token="hf_secret_token_value")
    assert r.returncode == 0, r.stderr
    assert "Authorization" not in server.seen[0]["headers"]


def test_token_sources_in_order(tmp_path):
    import importlib.util
    import os
    from conftest import CLI

    spec = importlib.util.spec_from_file_location("arena_cli", CLI)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    saved = dict(os.environ)
    try:
        for k in ("HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME"):
            os.environ.pop(k, None)
        os.environ["HOME"] = str(tmp_path)
        assert cli.read_token() is None
        default = tmp_path / ".cache" / "huggingface" / "token"
        default.parent.mkdir(parents=True)
        default.write_text("hf_from_default\n")
        assert cli.read_token() == "hf_from_default"
        (tmp_path / "hfhome").mkdir()
        (tmp_path / "hfhome" / "token").write_text("hf_from_hf_home")
        os.environ["HF_HOME"] = str(tmp_path / "hfhome")
        assert cli.read_token() == "hf_from_hf_home"
        (tmp_path / "explicit").write_text("hf_from_path")
        os.environ["HF_TOKEN_PATH"] = str(tmp_path / "explicit")
        assert cli.read_token() == "hf_from_path"
        os.environ["HF_TOKEN"] = "hf_from_env"
        assert cli.read_token() == "hf_from_env"
        os.environ["HF_TOKEN"] = ""
        assert cli.read_token() == "hf_from_path"
        os.environ.pop("HF_TOKEN_PATH")
        os.environ.pop("HF_HOME")
        (tmp_path / ".cache" / "huggingface" / "token").unlink()
        try:
            cli.require_token()
            raise AssertionError("require_token should fail without a token")
        except cli.CliError as e:
            assert e.status == 4
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_served_scripts_are_their_sources_assembled(arena_url):
    """What the arena serves is what dev/assemble_scripts.py makes of scripts/, byte for byte."""
    import hashlib
    import urllib.request

    sys.path.insert(0, str(ROOT / "dev"))
    from assemble_scripts import SCRIPTS, assemble

    for script in SCRIPTS:
        with urllib.request.urlopen(arena_url + "/" + script) as resp:
            served = resp.read()
        want = assemble(script).encode()
        assert hashlib.sha256(served).hexdigest() == hashlib.sha256(want).hexdigest(), script
        assert b"# @include" not in served, script


def test_the_assembly_is_reproducible_and_each_script_stands_alone(tmp_path):
    """Two assemblies are the same bytes; each served file runs from an empty directory with
    nothing of ours beside it."""
    first, second, empty = tmp_path / "a", tmp_path / "b", tmp_path / "empty"
    empty.mkdir()
    for out in (first, second):
        done = subprocess.run([sys.executable, str(ROOT / "dev" / "assemble_scripts.py"), str(out)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(ROOT / "dev"))
    from assemble_scripts import SCRIPTS
    for script in SCRIPTS:
        assert (first / script).read_bytes() == (second / script).read_bytes(), script
        alone = empty / script
        alone.write_bytes((first / script).read_bytes())
        done = subprocess.run([sys.executable, script, "--help"], cwd=empty, capture_output=True, text=True,
                              env={"PATH": os.environ.get("PATH", ""), "HOME": str(empty)})
        assert done.returncode == 0, (script, done.stderr)
        assert "usage:" in done.stdout, script
        alone.unlink()


def test_a_loopback_arena_is_reached_without_the_environments_proxy(scripted_server):
    """On plain HTTP a proxy would read the token: a loopback ARENA_URL bypasses HTTP(S)_PROXY."""
    proxy, proxy_url = scripted_server([JSON_OK])
    server, url = scripted_server([(200, {"Content-Type": "application/json"}, b'{"name": "alice", "editor": false}')])
    env = {"HTTP_PROXY": proxy_url, "http_proxy": proxy_url, "HTTPS_PROXY": proxy_url, "https_proxy": proxy_url}
    r = run_cli(["whoami"], url, token="hf_secret_token_value", extra_env=env)
    assert r.returncode == 0, r.stderr
    assert proxy.seen == [], "nothing went through the proxy"
    assert server.seen[0]["headers"]["Authorization"] == "Bearer hf_secret_token_value"
    localhost = url.replace("127.0.0.1", "localhost")
    server.script.append((200, {"Content-Type": "application/json"}, b'{"name": "alice", "editor": false}'))
    assert run_cli(["whoami"], localhost, token="hf_secret_token_value", extra_env=env).returncode == 0
    assert proxy.seen == []
