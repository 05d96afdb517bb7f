"""The echo environment `openenv init arena_echo` generates (openenv-core 0.3.0), changed where the
arena needs it: the generated episodes never end and their reward grows with the message's length,
so here `reset` takes the task id and an episode ends when the message is `done` (reward 1.0), after
three steps (reward 0.5), or at `finish` (reward 0.0: the demo's finish_action). `ARENA_ECHO_VARIANT`
breaks it the ways admission must catch: `never-ends` (no step is terminal) and `reward-too-high`
(a terminal reward of 1.5)."""

import os
from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import ArenaEchoObservation
except ImportError:
    from models import ArenaEchoObservation

VARIANT = os.environ.get("ARENA_ECHO_VARIANT", "ok")
MAX_STEPS = 3


class ArenaEchoEnvironment(Environment):
    """Echoes each message back; one episode plays one task."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task_id = ""

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> ArenaEchoObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._task_id = task_id or ""
        return ArenaEchoObservation(echoed_message="Arena Echo environment ready!", message_length=0,
                                    task_id=self._task_id, done=False, reward=0.0)

    def step(self, action, timeout_s: Optional[float] = None, **kwargs: Any) -> ArenaEchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        message = getattr(action, "message", None) or getattr(action, "text", "")
        # `finish` is the submission's finish_action: it ends an episode the model did not end by
        # itself and scores nothing, so a malformed reply is never rewarded like a success.
        done = VARIANT != "never-ends" and (message in ("done", "finish") or self._state.step_count >= MAX_STEPS)
        reward = 0.0
        if done and message != "finish":
            reward = 1.5 if VARIANT == "reward-too-high" else (1.0 if message == "done" else 0.5)
        return ArenaEchoObservation(echoed_message=message, message_length=len(message), task_id=self._task_id,
                                    done=done, reward=reward,
                                    metadata={"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state
