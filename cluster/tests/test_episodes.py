"""An episode against environments as openenv 0.10 serves them, on the tiny CPU model (no
sandbox): the reset sends what the assignment's task says (the task API's split and index), the
system message lists a tools environment's tools, and no observation's `metadata` (0.10 sends it
inside each observation and beside it, an answer among it) reaches the model. The conversation
the model saw is kept on the outcome."""

import json

import pytest

from arena_cluster import contract, tiny_model
from arena_cluster.episodes import Policy, Template, episode
from arena_cluster.runstate import Actions
from echo import ACTIONS, TASK

TOOLS = [{"name": "echo", "description": "Echo a message back.",
          "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
         {"name": "finish", "description": "End the episode with a reward of 1.", "input_schema": {"type": "object"}}]


class Wire010:
    """One episode's connection to a 0.10 server, speaking its raw messages: each answer goes
    through `contract.ws_observation` as `sandboxes.Connection.exchange` reads it. The reset
    observation's metadata holds the task spec and its answer; every step's holds the step,
    inside the observation and beside it."""

    def __init__(self):
        self.sent = []
        self.steps = 0

    def exchange(self, message: dict) -> contract.Observed:
        self.sent.append(message)
        if message["type"] == "reset":
            spec = {"id": "echo-2", "prompt": "say bye", "answer": "bye"}
            answer = {"observation": {"metadata": {"task_spec": spec, "prompt": "say bye"}, "task_id": spec["id"],
                                      "prompt": spec["prompt"]}, "reward": None, "done": False,
                      "metadata": {"task_spec": spec, "prompt": "say bye"}}
        else:
            self.steps += 1
            done = self.steps >= 3
            answer = {"observation": {"metadata": {"step": self.steps}, "echoed": "x"},
                      "reward": 0.5 if done else 0.0, "done": done, "metadata": {"step": self.steps}}
        return contract.ws_observation(json.loads(json.dumps({"type": "observation", "data": answer})))


@pytest.fixture(scope="module")
def policy():
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    path = tiny_model.build(tiny_model.default_path())
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    tok = AutoTokenizer.from_pretrained(path)
    config = GenerationConfig(max_new_tokens=64, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                              pad_token_id=tok.pad_token_id, eos_token_id=[tok.eos_token_id])
    return Policy.of_model(model, Template(tok), config)


def play(policy, task, actions, seed):
    wire = Wire010()
    with policy.live():
        played = episode(policy, wire, task, actions, seed=seed)
    return wire, played


def test_a_task_api_environment_plays_the_asked_task_and_its_metadata_is_never_shown(policy):
    task = dict(TASK, task_id="echo-2", reset={"split": "train", "index": 1}, tools=[])
    stepped = 0
    for seed in range(4):
        wire, played = play(policy, task, ACTIONS, seed)
        assert wire.sent[0] == {"type": "reset", "data": {"split": "train", "index": 1}}
        roles = [m["role"] for m in played.messages]
        assert roles[:2] == ["system", "user"] and played.messages[0]["content"] == contract.system_prompt(
            ACTIONS.schema), played.messages
        assert played.messages[1]["content"] == '{"prompt":"say bye","task_id":"echo-2"}'
        users = [m["content"] for m in played.messages if m["role"] == "user"]
        assert not [u for u in users if "metadata" in u or "task_spec" in u or "answer" in u], users
        stepped += len(users) > 1
    assert stepped, "some episode saw an observation after a step"


def test_a_held_out_task_resets_by_its_id(policy):
    wire, _ = play(policy, dict(TASK, task_id="count-1"), ACTIONS, 7)
    assert wire.sent[0] == {"type": "reset", "data": {"task_id": "count-1"}}


def test_a_tools_environment_is_told_its_tools(policy):
    schema = {"type": "object", "required": ["tool_name"], "additionalProperties": False,
              "properties": {"type": {"const": "call_tool"}, "tool_name": {"type": "string"},
                             "arguments": {"type": "object"}}}
    actions = Actions.of({"schema": {"action": schema}, "schema_draft": "draft2020-12",
                          "finish_action": {"type": "call_tool", "tool_name": "finish", "arguments": {}}}, "submission")
    wire, played = play(policy, dict(TASK, tools=TOOLS), actions, 3)
    assert wire.sent[0] == {"type": "reset", "data": {"task_id": "echo-1"}}, "no `reset`: by the task's id"
    system = played.messages[0]["content"]
    assert system == contract.system_prompt(schema, TOOLS)
    assert system.endswith("\nTools, each called through the action schema: " + contract.json_text(TOOLS))
