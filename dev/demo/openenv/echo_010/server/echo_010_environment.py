"""The demo echo environment (dev/demo/openenv/arena_echo) written against openenv 0.10.0, the
release `pip install openenv` gives participants today: `reset` takes the task id, and an episode
ends when the message is `done` (reward 1.0), after three steps (reward 0.5), or at `finish`
(reward 0.0: the submission's finish_action). Every observation after a step carries
`metadata={"step": n}`, which 0.10 sends inside the observation and beside it (0.3.0 never sent
it): the arena must keep it from the model."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import Echo010Action, Echo010Observation
except ImportError:
    from models import Echo010Action, Echo010Observation

MAX_STEPS = 3


class Echo010Environment(Environment[Echo010Action, Echo010Observation, State]):
    """Echoes each message back; one episode plays one task."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task_id = ""

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> Echo010Observation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._task_id = task_id or ""
        return Echo010Observation(echoed_message="Echo 0.10 environment ready!", message_length=0,
                                  task_id=self._task_id, done=False, reward=0.0)

    def step(self, action: Echo010Action, timeout_s: Optional[float] = None,  # type: ignore[override]
             **kwargs: Any) -> Echo010Observation:
        self._state.step_count += 1
        message = action.message
        done = message in ("done", "finish") or self._state.step_count >= MAX_STEPS
        # `finish` ends an episode the model did not end by itself and scores nothing, so a
        # malformed reply is never rewarded like a success.
        reward = 0.0
        if done and message != "finish":
            reward = 1.0 if message == "done" else 0.5
        return Echo010Observation(echoed_message=message, message_length=len(message), task_id=self._task_id,
                                  done=done, reward=reward, metadata={"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state
