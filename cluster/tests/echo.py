"""The demo echo environment (dev/demo/openenv/arena_echo) in this process, for the trainer's
tests and bench: `exchange` answers OpenEnv's messages as a sandbox's WebSocket does, so episodes
play without a sandbox. An episode ends when the message is `done` (reward 1.0), after three steps
(0.5), or at `finish` (0.0, the demo's finish_action)."""

import time

from arena_cluster import contract
from arena_cluster.runstate import Actions

ACTION_SCHEMA = {
    "additionalProperties": False,
    "properties": {"metadata": {"additionalProperties": True, "type": "object"}, "message": {"type": "string"}},
    "required": ["message"],
    "type": "object",
}
ACTIONS = Actions.of({"schema": {"action": ACTION_SCHEMA}, "schema_draft": "draft2020-12",
                      "finish_action": {"message": "finish"}}, "submission")
TASK = {"task_id": "echo-1", "split": "train", "reset_wall_s": 10, "rollout_wall_s": 60, "verifier_wall_s": 10,
        "tool_calls_per_minute": 600, "completion_tokens": 256, "context_tokens": 1024}


class Echo:
    """One episode's connection; `delay_s`: the round trip of a sandbox's WebSocket."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.steps = 0
        self.task_id = ""

    def exchange(self, message: dict) -> contract.Observed:
        time.sleep(self.delay_s)
        if message["type"] == "reset":
            self.task_id = message["data"]["task_id"]
            return contract.Observed(self._seen("Arena Echo environment ready!"), 0.0, False)
        self.steps += 1
        text = message["data"].get("message", "")
        done = text in ("done", "finish") or self.steps >= 3
        reward = 0.0 if not done or text == "finish" else (1.0 if text == "done" else 0.5)
        return contract.Observed(self._seen(text), reward, done)

    def close(self) -> None:
        pass

    def _seen(self, text: str) -> dict:
        return {"echoed_message": text, "message_length": len(text), "task_id": self.task_id}
