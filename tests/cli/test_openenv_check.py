"""openenv_check.py, the arena's OpenEnv admission on a participant's machine: its rules give the
answers the Rust domain gives (the shared cases `domain::openenv::admission` writes to
tests/fixtures/openenv-admission-cases.json, and hand-written cases of the same rules), and the
script, run as a participant runs it, against the standard-library echo server's variants
(tests/fixtures/images/echo_server.py). No arena is needed here: the side-by-side comparison with the
arena's admission is tests/cli/test_openenv_shapes.py."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import reserve_port, start_server

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "openenv_check.py"
FIXTURES = ROOT / "tests" / "fixtures"
ECHO_SERVER = FIXTURES / "images" / "echo_server.py"
CASES = FIXTURES / "openenv-admission-cases.json"
TOKEN = "hf_participant_secret_7e7e7e"


def load_script():
    spec = importlib.util.spec_from_file_location("openenv_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


oc = load_script()


def shared_cases():
    if not CASES.exists():
        pytest.skip("tests/fixtures/openenv-admission-cases.json does not exist yet: the Rust domain's tests "
                    "(domain::openenv::admission) write it; until then only the hand-written cases run")
    return json.loads(CASES.read_text())


# ---- the shared cases, as the Rust domain answers them ----


def test_shared_limits():
    limits = shared_cases()["limits"]
    assert (limits["max_differences"], limits["max_value_chars"], limits["max_observation_chars"],
            limits["max_evidence_bytes"]) == (oc.MAX_DIFFERENCES, oc.MAX_VALUE_CHARS, oc.MAX_OBSERVATION_CHARS,
                                              oc.MAX_EVIDENCE_BYTES)
    assert oc.schema_differences({"action": {}}, {})[0][0]["submitted"] == limits["absent"]


def test_shared_criteria():
    for case in shared_cases()["criteria"]:
        probe = {k: oc.Answer.of(v) for k, v in case["probe"].items()}
        failed = [c["id"] for c in oc.criteria(probe) if not c["passed"]]
        assert failed == case["failed"], case


def test_shared_schema_differences():
    for case in shared_cases()["schema_diff"]:
        differences, more = oc.schema_differences(case["served"], case["submitted"])
        assert (differences, more) == (case["differences"], case["more"]), case


def step(raw):
    return oc.parse_step(raw)


def test_shared_episodes():
    for case in shared_cases()["episodes"]:
        try:
            reward = oc.judge_episode(step(case["reset"]), [step(s) for s in case["steps"]], case["actions"])
        except oc.Invalid:
            reward = None
        assert reward == case["reward"], case


def test_shared_finish():
    for case in shared_cases()["finish"]:
        try:
            reward = oc.judge_finish(step(case["step"]))
        except oc.Invalid:
            reward = None
        assert reward == case["reward"], case


def test_shared_warnings():
    for case in shared_cases()["warnings"]:
        assert sorted(oc.ignored_task(case["tasks"])) == sorted(case["warned"]), case


# ---- hand-written cases of the same rules ----


def test_json_text_is_serde_jsons_as_the_episode_cases_spell_it():
    cases = json.loads((FIXTURES / "openenv-episode-cases.json").read_text())["json_text"]
    assert cases
    for case in cases:
        assert oc.json_text(case["value"]) == case["text"], case["text"]
    assert oc.json_text(oc.loads("[1, 1.0, 18446744073709551616]")) == "[1,1.0,1.8446744073709552e+19]"


def answer(v, status=200):
    return oc.Answer(status, v)


def echo_probe():
    return {
        "openapi": answer({"info": {"version": "1.0.0"},
                           "paths": {"/reset": {}, "/step": {}, "/state": {}, "/health": {}}}),
        "health": answer({"status": "healthy"}),
        "metadata": answer({"name": "echo_env", "description": "Echo"}),
        "schema": answer({"action": {}, "observation": {}, "state": {}}),
        "mcp": answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "no MCP"}}),
    }


def failed(**changes):
    probe = dict(echo_probe(), **changes)
    return [c["id"] for c in oc.criteria(probe) if not c["passed"]]


def test_the_six_criteria_as_the_domain_reads_them():
    assert failed() == []
    assert [c["id"] for c in oc.criteria(echo_probe())] == [
        "openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint",
        "mode_endpoint_consistency"]
    assert failed(health=None) == ["health_endpoint"]
    assert failed(health=answer({"status": "starting"})) == ["health_endpoint"]
    assert failed(mcp=answer(None, 404)) == ["mcp_endpoint"]
    assert failed(schema=answer({"action": {}, "observation": {}})) == ["schema_endpoint"]
    assert failed(metadata=answer({"name": "x"})) == ["metadata_endpoint"]
    assert failed(openapi=answer({"info": {"version": "1"}, "paths": {"/reset": {}, "/health": {}}})) == [
        "mode_endpoint_consistency"]
    assert failed(openapi=answer({"info": {"version": "1"}, "paths": {"/health": {}}})) == [], "production mode"
    assert failed(openapi=answer({"info": {"version": 1}, "paths": {"/health": {}}})) == ["openapi_version_available"]
    assert failed(openapi=answer({"info": {"version": "1"}, "paths": {}})) == ["mode_endpoint_consistency"]
    # No OpenAPI at all fails the version and, without paths, the mode.
    assert failed(openapi=None) == ["openapi_version_available", "mode_endpoint_consistency"]
    by_id = {c["id"]: c for c in oc.criteria(dict(echo_probe(), health=None, mcp=answer(None, 404),
                                                  metadata=answer({"d": "x" * 500})))}
    assert by_id["health_endpoint"]["actual"] == "no answer"
    assert by_id["mcp_endpoint"]["actual"] == "HTTP 404, not JSON"
    assert by_id["metadata_endpoint"]["actual"] == "HTTP 200: " + ('{"d":"' + "x" * 500)[:200]
    assert by_id["mode_endpoint_consistency"]["actual"] == "paths: /health, /reset, /state, /step"


ECHO_ACTION = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


def test_a_schema_one_description_apart_is_named_by_its_pointer():
    served = {"action": ECHO_ACTION, "observation": {"type": "object"}, "state": {}}
    described = json.loads(json.dumps(ECHO_ACTION))
    described["properties"]["message"]["description"] = "What to echo"
    differences, more = oc.schema_differences(served, {"action": described, "observation": {"type": "object"}})
    assert (differences, more) == ([{"pointer": "/action/properties/message/description", "served": "(absent)",
                                     "submitted": '"What to echo"'}], 0)
    assert oc.schema_differences(served, {"action": ECHO_ACTION, "observation": {"type": "object"}}) == ([], 0)


def test_schema_differences_walk_action_first_keys_in_byte_order_arrays_by_index():
    served = {"action": {"b": 1, "a/x": [1, 2, 3], "m~": True, "Z": 1.0},
              "observation": {"enum": ["a"], "x": {"y": None}}}
    submitted = {"action": {"b": 1.0, "a/x": [1, 5], "m~": 1, "Z": 1.0, "c": "new"},
                 "observation": {"enum": ["a", "b"], "x": []}}
    differences, more = oc.schema_differences(served, submitted)
    assert differences == [
        {"pointer": "/action/a~1x/1", "served": "2", "submitted": "5"},
        {"pointer": "/action/a~1x/2", "served": "3", "submitted": "(absent)"},
        {"pointer": "/action/b", "served": "1", "submitted": "1.0"},
        {"pointer": "/action/c", "served": "(absent)", "submitted": '"new"'},
        {"pointer": "/action/m~0", "served": "true", "submitted": "1"},
        {"pointer": "/observation/enum/1", "served": "(absent)", "submitted": '"b"'},
        {"pointer": "/observation/x", "served": '{"y":null}', "submitted": "[]"},
    ], "keys in byte order (`Z` before `a/x` before `b`); an integer and a float differ; `true` and `1` differ"
    assert more == 0
    # A part missing on one side is one difference at its own pointer.
    assert oc.schema_differences({"action": {}}, {"action": {}, "observation": {"type": "object"}}) == (
        [{"pointer": "/observation", "served": "(absent)", "submitted": '{"type":"object"}'}], 0)


def test_schema_differences_are_bounded():
    served = {"action": {"k%02d" % i: i for i in range(12)}, "observation": {"description": "x" * 300}}
    submitted = {"action": {}, "observation": {"description": "y" * 300}}
    differences, more = oc.schema_differences(served, submitted)
    assert len(differences) == 8 and more == 5
    assert [d["pointer"] for d in differences] == ["/action/k%02d" % i for i in range(8)]
    long = oc.schema_differences({"action": {"d": "x" * 300}}, {"action": {"d": "é" * 300}})[0][0]
    assert long["served"] == '"' + "x" * 119 + "\u2026" and long["submitted"] == '"' + "é" * 119 + "\u2026"


def test_the_example_episode_ends_with_a_reward_in_zero_to_one():
    start = (None, False)
    assert oc.judge_episode(start, [(0.0, False), (1.0, True)], 2) == 1.0
    assert oc.judge_episode(start, [(0.0, True)], 2) == 0.0
    for steps, why in (([(0.5, False)], "did not end after the 1 example action(s)"),
                       ([(1.5, True)], "with reward 1.5, outside [0, 1]"),
                       ([(2.0, True)], "after action 1 with reward 2, outside [0, 1]"),
                       ([(None, True)], "without a reward"),
                       ([(-0.5, True)], "outside [0, 1]")):
        with pytest.raises(oc.Invalid, match=why.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                           .replace(")", r"\)")):
            oc.judge_episode(start, steps, 1)
    with pytest.raises(oc.Invalid, match="ended at reset"):
        oc.judge_episode((None, True), [], 1)


def test_finish_action_must_end_the_episode_with_a_reward_in_zero_to_one():
    assert oc.judge_finish((0.0, True)) == 0.0
    assert oc.judge_finish((1, True)) == 1
    for after, why in (((0.0, False), "did not end"), ((None, True), "without a reward"),
                       ((2.0, True), "reward 2, outside")):
        with pytest.raises(oc.Invalid, match=why):
            oc.judge_finish(after)


def test_an_observation_message_is_read_as_the_arena_reads_it():
    assert oc.parse_step({"observation": {}, "reward": 1, "done": True}) == (1.0, True)
    assert oc.parse_step({"observation": {}}) == (None, False)
    for bad in ({"reward": "0.5"}, {"reward": True}, {"done": "yes"}, {"done": None}, None, []):
        with pytest.raises(oc.Invalid):
            oc.parse_step(bad)


def test_a_task_api_chooses_a_task_by_its_listed_id():
    assert oc.has_task_api({"paths": {"/list_environments": {}, "/{env_name}/tasks": {}, "/reset": {}}})
    assert not oc.has_task_api({"paths": {"/reset": {}}}) and not oc.has_task_api(None)
    splits = [("train", {"tasks": [{"id": "echo-1", "answer": "hi"}, {"id": "echo-2"}, {"id": 7, "task_id": "x"}]}),
              ("test", {"tasks": [{"task_id": "echo-3"}]})]
    assert oc.task_reset(splits, "echo-2") == {"split": "train", "index": 1}
    assert oc.task_reset(splits, "echo-3") == {"split": "test", "index": 0}
    assert oc.task_reset(splits, "x") is None, "an `id` that is not a string is no id, whatever `task_id` says"
    assert oc.task_reset(splits, "nope") is None
    assert oc.listed_ids(splits, 2) == ["echo-1 (train)", "echo-2 (train)"]
    assert oc.listed_ids(splits, 20) == ["echo-1 (train)", "echo-2 (train)", "echo-3 (test)"]


def test_a_tools_list_in_either_spelling_and_within_bounds():
    listing = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}, "outputSchema": {}},
        {"name": "submit", "input_schema": {"type": "object", "properties": {"c": {}}}}]}}
    tools = oc.tool_list(listing)
    assert tools[0] == {"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}}
    assert tools[1]["description"] == ""
    assert oc.tool_list({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "no MCP"}}) == []
    assert oc.tool_list(None) == []
    for bad in ({"result": {"tools": [{"name": "t%d" % i} for i in range(40)]}},
                {"result": {"tools": [{"name": "t", "description": "x" * oc.MAX_TOOLS_TEXT}]}},
                {"result": {"tools": [{"description": "no name"}]}},
                {"result": {"tools": [{"name": "t", "inputSchema": None}]}}):
        with pytest.raises(oc.Invalid):
            oc.tool_list(bad)


def test_the_reserved_shapes():
    assert oc.is_reserved({"finish": True}) and oc.is_reserved({"action": {"a": 1}})
    for plain in ({"finish": False}, {"action": {"a": 1}, "note": "x"}, {"action": "move"}, {"finish": 1}, [], "x"):
        assert not oc.is_reserved(plain), plain


def test_every_task_the_same_first_observation_is_warned_of():
    same = {"a": ["x", "x", "x"], "b": ["x", "x", "x"]}
    assert oc.ignored_task(same) == ["a", "b"]
    assert oc.ignored_task({"a": ["x", "x", "x"]}) == [], "one task: nothing to compare"
    assert oc.ignored_task({"a": ["x", "y", "x"], "b": ["x", "x", "x"]}) == [], "the seeds change it"
    assert oc.ignored_task({"a": ["x"], "b": ["y"]}) == [], "the task changes it"
    assert oc.ignored_task({"a": ["x", "x"], "b": ["x"]}) == [], "a task with one first observation only"
    # The fingerprint is of the observation as the server sent it, in the arena's JSON text.
    assert oc.fingerprint({"b": [0], "a": 1.0}) == oc.fingerprint({"a": 1.0, "b": [0]})
    assert oc.fingerprint({"board": [0], "metadata": {"episode": 1}}) != oc.fingerprint({"board": [0]})
    assert oc.fingerprint({"board": [0]}) != oc.fingerprint({"board": [1]})


def test_a_transcript_is_bounded():
    t = oc.Transcript()
    t.add({"task_id": "a"}, {"text": "x" * 5000}, None, False)
    assert t.entries[0]["observation"] == ('{"text":"' + "x" * 5000)[:1024] + "\u2026"
    for i in range(40):
        t.add({"message": "m%d" % i}, {"text": "y" * 2000}, 0.0, False)
    evidence = t.evidence()
    assert evidence["truncated"] is True
    assert sum(len(oc.json_text(e).encode()) for e in evidence["transcript"]) <= 16 << 10
    assert 10 < len(evidence["transcript"]) < 20
    assert evidence["transcript"][1] == {"sent": {"message": "m0"}, "observation": ('{"text":"' + "y" * 2000)[:1024]
                                         + "\u2026", "reward": 0.0, "done": False}


BODY = {
    "submission_id": "echo-local-1", "name": "Echo", "image": "ghcr.io/test/echo-ok:v1",
    "schema": {"action": ECHO_ACTION | {"additionalProperties": False}, "observation": {"type": "object"}},
    "tasks": [{"task_id": "echo-1", "split": "train"}, {"task_id": "echo-2", "split": "train"}],
    "example_actions": [{"message": "hello"}, {"message": "done"}],
    "finish_action": {"message": "done"},
}


def refused(body):
    try:
        r = oc.parse_body(body)
        oc.check_contract(r)
        oc.check_schema_shape(r)
    except oc.Failure as f:
        return f.code, f.message
    return None


def changed(**fields):
    body = json.loads(json.dumps(BODY))
    body.update(fields)
    return body


def test_the_body_rules_that_need_no_arena():
    assert refused(BODY) is None
    r = oc.parse_body(BODY)
    assert r["tasks"][0]["reset_wall_s"] == 180 and r["tasks"][0]["tool_calls_per_minute"] == 60
    assert refused(changed(space="a/b"))[0] == "SUBMISSION_FORMAT_RETIRED"
    cases = {
        "CONTRACT_INVALID": [
            changed(extra=1), changed(tasks=[]), changed(example_actions=[{"message": "a"}] * 17),
            changed(tasks=[{"task_id": "a", "split": "train", "reset_wall_s": 100}]),
            changed(tasks=[{"task_id": "a", "split": "train", "rollout_wall_s": 3500}]),
            changed(tasks=[{"task_id": "a", "split": "train", "reset_wall_s": 180.0}]),
            changed(tasks=[{"task_id": "a", "split": "eval"}]),
            changed(tasks=[{"task_id": "a", "split": "train"}, {"task_id": "a", "split": "train"}]),
            changed(tasks=[{"task_id": "-a", "split": "train"}]),
            changed(submission_id="a b"), changed(name=" "), changed(image=None), changed(server_port=49983),
            changed(source="http://x"), changed(tasks=[{"task_id": "a", "split": "train", "colour": 1}]),
        ],
        "ENVIRONMENT_TOO_LARGE_FOR_SANDBOX": [changed(tasks=[{"task_id": "a", "split": "train", "memory_gib": 17}])],
        "SCHEMA_INVALID": [
            changed(schema={"action": {}}), changed(example_actions=[{"finish": True}]),
            changed(finish_action={"action": {"message": "done"}}), changed(example_actions=["done"]),
        ],
    }
    for code, bodies in cases.items():
        for body in bodies:
            assert (refused(body) or (None,))[0] == code, body
    del_schema = changed()
    del del_schema["schema"]
    assert refused(del_schema) == ("CONTRACT_INVALID", "the submission is not the guide's body: missing field `schema`")
    assert refused(changed(tasks=[{"task_id": "a", "split": "train", "rollout_wall_s": 3500}]))[1] == (
        "task `a`: `reset_wall_s + rollout_wall_s + verifier_wall_s` is 3800; the limit is at most 3600")


# ---- the script, as a participant runs it ----


class EchoServer:
    """echo_server.py with one of its variants on a free loopback port, listening once made."""

    def __init__(self, variant, log):
        self.process, self.port = start_server(
            lambda port, out: subprocess.Popen([sys.executable, str(ECHO_SERVER), str(port), "--variant", variant],
                                               cwd=ECHO_SERVER.parent, stdout=out, stderr=subprocess.STDOUT),
            log, "echo_server.py --variant " + variant)
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.process.terminate()
        self.process.wait()


@pytest.fixture
def echo(tmp_path):
    started = []

    def start(variant):
        server = EchoServer(variant, tmp_path / ("echo-%d-%s.log" % (len(started), variant)))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def check(tmp_path, body, url, *args, env=None, python=sys.executable):
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(body))
    run_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    run_env.update(env or {})
    done = subprocess.run([python, str(SCRIPT), str(path), "--url", url, "--json", *args],
                          capture_output=True, text=True, timeout=120, env=run_env)
    summary = json.loads(done.stdout) if done.stdout.strip() else None
    return done, summary


def codes(summary):
    return {t["task_id"]: t["code"] for t in summary["tasks"]}


def test_the_echo_server_passes_every_check(tmp_path, echo):
    server = echo("ok")
    done, summary = check(tmp_path, BODY, server.url)
    assert done.returncode == 0, done.stderr
    assert summary["ok"] is True and codes(summary) == {"echo-1": None, "echo-2": None}
    assert [w for w in summary["warnings"] if w["code"] == "RESET_IGNORES_TASK"] == [], "each task's reset names its task"
    assert summary["openenv_validate"] == {"ran": False}
    for line in ("ok    serving", "ok    openenv validate's six criteria", "ok    /schema equals",
                 "ok    example episode", "ok    finish_action",
                 "skip  openenv validate --url: openenv is not installed",
                 "skip  body (the rest): not checked here"):
        assert line in done.stderr, line
    # One task only, by --task.
    done, summary = check(tmp_path, BODY, server.url, "--task", "echo-2")
    assert done.returncode == 0 and codes(summary) == {"echo-2": None}


# The oldest Python the guide promises the script runs on, as this machine's pyenv has it.
PYTHON_3_9 = Path.home() / ".pyenv/versions/3.9.18/bin/python3"


def test_the_script_runs_on_python_3_9(tmp_path, echo):
    assert PYTHON_3_9.exists(), f"no Python 3.9 at {PYTHON_3_9} (pyenv install 3.9)"
    server = echo("ok")
    done, summary = check(tmp_path, BODY, server.url, python=str(PYTHON_3_9))
    assert done.returncode == 0 and summary["ok"] is True, done.stderr
    broken = echo("reward-2")
    done, summary = check(tmp_path, BODY, broken.url, python=str(PYTHON_3_9))
    assert done.returncode == 1 and set(codes(summary).values()) == {"ADMISSION_EPISODE_FAILED"}, done.stderr


def test_each_broken_variant_fails_with_admissions_code(tmp_path, echo):
    expected = {
        "no-mcp": "OPENENV_ENDPOINT_INVALID",
        "health-401": "OPENENV_ENDPOINT_INVALID",
        "no-health": "SANDBOX_STARTUP_FAILED",
        "never-ends": "ADMISSION_EPISODE_FAILED",
        "reward-too-high": "ADMISSION_EPISODE_FAILED",
        "huge-observation": "ADMISSION_EPISODE_FAILED",
        "redirects": "SANDBOX_STARTUP_FAILED",
    }
    for variant, code in expected.items():
        server = echo(variant)
        done, summary = check(tmp_path, BODY, server.url, "--wait", "1")
        assert done.returncode == 1, (variant, done.stderr)
        assert set(codes(summary).values()) == {code}, (variant, summary)
        assert "fix: " in done.stderr, variant
    server = echo("no-mcp")
    summary = check(tmp_path, BODY, server.url)[1]
    evidence = summary["tasks"][0]["evidence"]
    assert [c["id"] for c in evidence["failed_checks"]] == ["mcp_endpoint"]
    assert evidence["failed_checks"][0]["actual"].startswith("HTTP 404")
    server = echo("huge-observation")
    summary = check(tmp_path, BODY, server.url)[1]
    assert "over 1024 KiB" in summary["tasks"][0]["message"]
    server = echo("reward-too-high")
    task = check(tmp_path, BODY, server.url)[1]["tasks"][0]
    assert [e["reward"] for e in task["evidence"]["transcript"]] == [None, 0.5, 1.5]
    assert task["evidence"]["transcript"][0]["sent"] == {"task_id": "echo-1"}


def test_nothing_serving_is_a_startup_failure(tmp_path):
    # A port held by a socket that never listens: refused, and no other process can serve there.
    held = reserve_port(0)
    url = "http://127.0.0.1:%d" % held.getsockname()[1]
    started = time.time()
    with held:
        done, summary = check(tmp_path, BODY, url, "--wait", "1")
    # --wait 1 is kept to: the default (30 s) would take longer than this bound, roomy for a loaded machine.
    assert done.returncode == 1 and time.time() - started < 25
    assert set(codes(summary).values()) == {"SANDBOX_STARTUP_FAILED"}
    assert "nothing answered GET /health at %s" % url in summary["tasks"][0]["message"]


def test_a_task_api_must_list_the_task(tmp_path, echo):
    server = echo("task-api")
    body = changed(schema={"action": ECHO_ACTION | {"additionalProperties": False}, "observation": {"type": "object"}},
                   tasks=[{"task_id": "echo-2", "split": "train"}, {"task_id": "echo-9", "split": "train"}],
                   example_actions=[{"message": "bye"}], finish_action=None)
    done, summary = check(tmp_path, body, server.url)
    assert done.returncode == 1
    assert codes(summary) == {"echo-2": None, "echo-9": "TASK_NOT_LISTED"}
    assert summary["tasks"][1]["evidence"] == {"listed": ["echo-1 (train)", "echo-2 (train)", "echo-3 (test)"]}
    assert 'reset with {"index":1,"split":"train"}' in done.stderr


def test_a_finish_action_that_is_only_another_move_is_refused(tmp_path, echo):
    server = echo("ok")
    # `hello` is a move like any other: it never ends an episode.
    done, summary = check(tmp_path, changed(finish_action={"message": "hello"}), server.url)
    assert done.returncode == 1
    task = summary["tasks"][0]
    assert task["code"] == "FINISH_ACTION_INVALID" and task["message"].startswith("from a fresh reset")
    assert [e["sent"] for e in task["evidence"]["transcript"]] == [{"task_id": "echo-1", "seed": 1},
                                                                    {"message": "hello"}]
    # Ended by the first example action, the second session has nothing left to finish.
    done, summary = check(tmp_path, changed(example_actions=[{"message": "done"}], finish_action={"message": "done"}),
                          server.url)
    assert done.returncode == 0, done.stderr


def test_a_tools_environment_that_never_ends(tmp_path, echo):
    server = echo("tools-endless")
    tools = json.loads((ROOT / "dev" / "demo" / "openenv" / "submission-tools-echo.json").read_text())["schema"]
    body = changed(schema=tools, tasks=[{"task_id": "echo-1", "split": "train"}], finish_action=None,
                   example_actions=[{"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}}])
    done, summary = check(tmp_path, body, server.url)
    assert done.returncode == 1
    assert codes(summary) == {"echo-1": "ADMISSION_EPISODE_FAILED"}
    assert "2 listed (echo_message, echo_with_length)" in done.stderr
    assert [e["done"] for e in summary["tasks"][0]["evidence"]["transcript"]] == [False, False]


def test_the_participants_token_goes_to_the_arena_only(tmp_path, echo, scripted_server):
    """With --arena, the body goes to the arena's check with the HF token; the participant's own
    server (here one that quotes any credential it receives) is sent none."""
    server = echo("leaks-token")
    refusal = {"code": "SCHEMA_INVALID", "message": "example action 1 does not match the action schema"}
    arena, arena_url = scripted_server([(422, {"Content-Type": "application/json"}, json.dumps(refusal).encode())])
    done, summary = check(tmp_path, BODY, server.url, "--arena", arena_url, env={"HF_TOKEN": TOKEN})
    assert done.returncode == 1
    assert summary["body"] == refusal and summary["tasks"] == []
    assert arena.seen[0]["path"] == "/api/openenv/check"
    assert arena.seen[0]["headers"]["Authorization"] == "Bearer " + TOKEN
    assert arena.seen[0]["body"] == BODY
    accepted = {"tasks": 2, "images": ["ghcr.io/test/echo-ok:v1"]}
    arena, arena_url = scripted_server([(200, {"Content-Type": "application/json"}, json.dumps(accepted).encode())])
    done, summary = check(tmp_path, BODY, server.url, "--arena", arena_url, env={"HF_TOKEN": TOKEN})
    assert "ok    body (the arena's check): 2 task(s)" in done.stderr
    assert codes(summary) == {"echo-1": "ADMISSION_EPISODE_FAILED", "echo-2": "ADMISSION_EPISODE_FAILED"}
    transcript = summary["tasks"][0]["evidence"]["transcript"]
    assert all(json.loads(e["observation"])["authorization"] is None for e in transcript)
    assert TOKEN not in done.stdout + done.stderr


def test_usage_errors_exit_2(tmp_path):
    path = tmp_path / "submission.json"
    path.write_text("{not json")
    for args in ([str(path), "--url", "http://127.0.0.1:9"],
                 [str(tmp_path / "nope.json"), "--url", "http://127.0.0.1:9"],
                 [str(SCRIPT), "--url", "ftp://x"], []):
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
        assert done.returncode == 2, (args, done.stderr)
    path.write_text(json.dumps(BODY))
    done = subprocess.run([sys.executable, str(SCRIPT), str(path), "--url", "http://127.0.0.1:9", "--arena",
                           "http://example.com"], capture_output=True, text=True)
    assert done.returncode == 2 and "only for 127.0.0.1, localhost and ::1" in done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), str(path), "--url", "http://127.0.0.1:9", "--task", "nope"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no task nope" in done.stderr


def test_a_body_the_arena_would_refuse_at_once_stops_there(tmp_path):
    done, summary = check(tmp_path, changed(example_actions=[{"finish": True}]), "http://127.0.0.1:9")
    assert done.returncode == 1
    assert summary["body"]["code"] == "SCHEMA_INVALID" and summary["tasks"] == []


def test_openenv_validate_runs_when_openenv_is_installed(tmp_path, echo):
    tool = os.environ.get("ARENA_TEST_OPENENV") or str(Path.home() / ".cache" / "arena-openenv")
    if not (Path(tool) / "bin" / "openenv").exists():
        pytest.skip("openenv 0.10.0 is not installed (dev/test installs it into ~/.cache/arena-openenv)")
    server = echo("ok")
    done, summary = check(tmp_path, BODY, server.url, env={"PATH": "%s/bin:/usr/bin:/bin" % tool, "PYTHONPATH": tool})
    assert done.returncode == 0, done.stderr
    assert summary["openenv_validate"]["ran"] is True and summary["openenv_validate"]["passed"] is True, summary
    assert "ok    openenv validate --url: passed" in done.stderr


def test_the_served_script_runs_alone(tmp_path):
    """What the site serves (dev/assemble_scripts.py's output) runs from an empty folder."""
    sys.path.insert(0, str(ROOT / "dev"))
    from assemble_scripts import SCRIPTS, assemble

    assert "openenv_check.py" in SCRIPTS
    alone = tmp_path / "openenv_check.py"
    alone.write_text(assemble("openenv_check.py"))
    done = subprocess.run([sys.executable, alone.name, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)})
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_nothing_a_server_sent_reaches_the_terminal_raw():
    """A server's strings (an OpenAPI path, an observation) may hold escape sequences that retitle,
    clear or rewrite the participant's terminal: every line the script prints shows them escaped."""
    import io

    out = io.StringIO()
    hostile = "/reset\x1b]0;pwned\x07\x1b[2J\rFAKE: every task passes\x9b31m"
    failure = oc.Failure("OPENENV_ENDPOINT_INVALID", "openenv validate fails: paths: " + hostile,
                         {"transcript": [{"sent": {"message": "x"}, "reward": None, "done": False,
                                          "observation": hostile}]})
    oc.Report(out).fail("openenv validate's six criteria", failure)
    printed = out.getvalue()
    assert not [c for c in printed if (ord(c) < 32 and c not in "\n\t") or 127 <= ord(c) < 160], repr(printed)
    assert "\\x1b]0;pwned\\x07" in printed and "\\x0dFAKE" in printed, printed


def test_a_servers_long_lists_are_quoted_within_bounds_as_the_arena_quotes_them():
    paths = ["/%s/%d" % ("p" * 40, i) for i in range(18_000)]
    said = oc.listed(paths, "paths")
    shown = said.split(" and ")[0].split(", ")
    assert len(said) <= 1100 and said.endswith(" and %d more paths" % (18_000 - len(shown))), said
    assert oc.listed(["/a", "/b"], "paths") == "/a, /b"
