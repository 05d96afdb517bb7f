"""The trainer's episode contract answers every shared case as the arena's Rust reference does
(`domain/src/openenv/episode/cases.rs` writes them)."""

import json
from pathlib import Path

import pytest

from arena_cluster import contract, schemas

CASES = json.loads(
    (Path(__file__).resolve().parents[2] / "tests/fixtures/openenv-episode-cases.json").read_text()
)


def validator(schema):
    """The trainer's own validator, under the draft Rust's `jsonschema::validator_for` takes for a
    schema without `$schema`."""
    return schemas.validator(schema, "draft2020-12")


def end_json(end):
    if end is None:
        return None
    out = {"kind": end.kind}
    if end.kind == "done":
        out["reward"] = end.reward
    if end.kind == "out_of_tokens":
        out["why"] = end.why
    return out


def test_the_constants_agree():
    c = CASES["constants"]
    assert (c["episodes_per_step"], c["episodes_that_train"], c["tool_call_burst"], c["run_limit_s"]) == (
        contract.EPISODES_PER_STEP, contract.EPISODES_THAT_TRAIN, contract.TOOL_CALL_BURST, contract.RUN_LIMIT_S)


@pytest.mark.parametrize("case", CASES["json_text"], ids=lambda c: c["text"][:40])
def test_observations_are_the_same_json_text(case):
    assert contract.json_text(case["value"]) == case["text"]


@pytest.mark.parametrize("case", CASES["system_prompt"])
def test_the_system_message_is_the_same(case):
    assert contract.system_prompt(case["schema"], case["tools"]) == case["text"]


def test_the_cases_cover_a_tools_environment_and_openenv_010_observations():
    """The rules 0.10 brought are among the cases replayed: a system message with tools, an
    episode of a tools environment, observations carrying `metadata`, the task API's reset."""
    assert any(c["tools"] for c in CASES["system_prompt"])
    assert any(c["tools"] for c in CASES["episodes"])
    assert any("metadata" in ((c["message"].get("data") or {}).get("observation") or {})
               for c in CASES["ws"]["messages"])
    assert "task_api_reset" in CASES["ws"]


@pytest.mark.parametrize("case", CASES["replies"], ids=lambda c: repr(c["text"])[:40])
def test_each_reply_is_read_the_same(case):
    got = contract.read_reply(case["text"], validator(case["schema"]))
    want = case["expect"]
    assert got.kind == want["kind"], (case, got)
    if want["kind"] == "action":
        assert got.action == want["action"]


@pytest.mark.parametrize("case", CASES["pacing"], ids=lambda c: json.dumps(c["task"]))
def test_calls_are_paced_the_same(case):
    p = contract.Pacer(case["task"], case["start_ms"])
    for now, at in case["takes"]:
        assert p.take(now) == at, (now, at)


@pytest.mark.parametrize("case", CASES["episodes"], ids=lambda c: json.dumps(c["task"]))
def test_each_episode_plays_the_same(case):
    valid = validator(case["schema"])
    e = contract.Episode.start(case["task"], case["schema"], case["tools"], case["reset"], case["system_tokens"],
                               case["observation_tokens"], 0)
    assert end_json(e.ended) == case["started"]
    for step in case["steps"]:
        if "reply" in step:
            turn = e.reply(step["reply"], step["tokens"], valid, step["now_ms"])
            if "call" in step["expect"]:
                assert turn == contract.Call(step["expect"]["call"], step["expect"]["at_ms"])
            else:
                assert isinstance(turn, contract.End) and end_json(turn) == step["expect"]["end"]
        else:
            end = e.observe(step["observe"], step["tokens"], step["reward"], step["done"])
            assert end_json(end) == step["expect"]["end"]
    assert e.messages == case["messages"]


def test_scores_are_the_same():
    for case in CASES["scores"]:
        end = contract.End(case["end"]["kind"], reward=case["end"].get("reward"), why=case["end"].get("why"))
        assert contract.score(end, case["finish_reward"]) == case["score"], case


def test_groups_are_the_same():
    for case in CASES["groups"]:
        assert contract.training_group(case["scores"]) == case["group"], case


def test_steps_take_the_same_tasks_and_fit_the_same():
    s = CASES["steps"]
    for o in s["order"]:
        tasks = [t for t in s["tasks"] if t["split"] == "eval"] if o.get("only_eval") else s["tasks"]
        t = contract.step_task(tasks, o["step"])
        assert (t["task_id"] if t else None) == o["task_id"], o
    for f in s["fits"]:
        assert contract.step_allowance_s(f["task"], f["update_s"]) == f["allowance_s"], f
        assert contract.step_fits(f["elapsed_s"], f["task"], f["update_s"], f["limit_s"]) == f["fits"], f


def test_the_ws_messages_are_the_same():
    w = CASES["ws"]
    assert contract.ws_reset(contract.reset_for("echo-1")) == w["reset"]
    assert contract.ws_reset({"split": "train", "index": 1}) == w["task_api_reset"]
    assert contract.ws_step({"message": "a"}) == w["step"]
    for case in w["messages"]:
        got = contract.ws_observation(case["message"])
        assert ([got.observation, got.reward, got.done] if got else None) == case["observation"], case


def test_a_task_resets_and_lists_its_tools_as_the_assignment_says():
    """The assignment's task `reset` (its id, or the task API's split and index) and `tools`; a
    held-out environment's tasks carry neither: reset by id, no tools."""
    api = {"task_id": "echo-2", "reset": {"split": "train", "index": 1}, "tools": [{"name": "echo"}]}
    assert contract.ws_reset(contract.task_reset(api)) == CASES["ws"]["task_api_reset"]
    assert contract.task_tools(api) == [{"name": "echo"}]
    held_out = {"task_id": "echo-1"}
    assert contract.ws_reset(contract.task_reset(held_out)) == CASES["ws"]["reset"]
    assert contract.task_tools(held_out) == []


def test_the_step_metrics_are_the_domains_table():
    """The `updating` event's metrics keep the names TRL logs them under: the domain's
    `StepMetrics` table (tests/fixtures/metric-names.json), the trainer's own `lora_b_norm` aside."""
    from arena_cluster.trainer import METRICS

    names = json.loads((Path(__file__).resolve().parents[2] / "tests/fixtures/metric-names.json").read_text())
    assert METRICS + ["lora_b_norm"] == [n for n in names["openenv"] if n != "lora_b_norm"] + ["lora_b_norm"]


def test_a_run_without_a_training_signal_ends_the_same():
    """`no_signal`: the cases the Rust domain writes under `no_signal`, and its constant."""
    assert CASES["constants"]["no_update_steps"] == contract.NO_UPDATE_STEPS
    assert CASES["no_signal"], "the shared cases hold no_signal cases"
    for case in CASES["no_signal"]:
        assert contract.no_signal(case["trained"]) == case["ends"], case
    assert CASES["step_trained"], "the shared cases hold step_trained cases"
    for case in CASES["step_trained"]:
        assert contract.step_trained(case["scores"], case["lost"]) == case["trained"], case


def test_every_end_is_counted_under_exactly_one_key():
    """How a step's `ends` count an episode: by how it ended, then by whether a valid reward came."""
    kinds = ["done", "finished", "invalid_reply", "tool_calls_exhausted", "out_of_tokens", "timeout", "sandbox"]
    got = {(kind, score): contract.end_key(kind, score) for kind in kinds for score in (None, 0.5)}
    assert got == {
        ("done", None): "no_reward", ("done", 0.5): "done",
        ("finished", None): "no_reward", ("finished", 0.5): "finished",
        ("invalid_reply", None): "invalid_reply", ("invalid_reply", 0.5): "invalid_reply",
        ("tool_calls_exhausted", None): "budget", ("tool_calls_exhausted", 0.5): "budget",
        ("out_of_tokens", None): "budget", ("out_of_tokens", 0.5): "budget",
        ("timeout", None): "timeout", ("timeout", 0.5): "timeout",
        ("sandbox", None): "sandbox", ("sandbox", 0.5): "sandbox",
    }
    assert set(got.values()) == set(contract.END_KEYS)
