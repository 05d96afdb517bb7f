"""A held-out benchmark environment for the local demo (domain: mathematics and formal reasoning):
task `count-N` (N = 1, 2, 3) asks for exactly N messages, the last one `done`. The message `done` at
step k ends the episode with reward 1.0 if k == N, else 0.0; four steps without `done` end it with
0.0, so every episode ends. `finish` is the benchmark's finish_action: it ends the episode and
scores nothing, so a malformed reply is never rewarded like an answer. An unknown task id is said
at reset and every step ends with 0.0."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import BenchCountObservation
except ImportError:
    from models import BenchCountObservation

TASKS = {"count-1": 1, "count-2": 2, "count-3": 3}
MAX_STEPS = 4


class BenchCountEnvironment(Environment):
    """Counts the messages of an episode; one episode plays one task."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task_id = ""

    def _instruction(self) -> str:
        n = TASKS.get(self._task_id)
        if n is None:
            return f"Unknown task `{self._task_id}`: known tasks are {', '.join(TASKS)}. Nothing scores."
        return f"Send exactly {n} message{'s' if n > 1 else ''}, the last one being the single word `done`."

    def _observation(self, message: str, done: bool, reward: float) -> BenchCountObservation:
        return BenchCountObservation(instruction=self._instruction(), echoed_message=message,
                                     step=self._state.step_count, task_id=self._task_id, done=done,
                                     reward=reward, metadata={"step": self._state.step_count})

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> BenchCountObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._task_id = task_id or ""
        return self._observation("", False, 0.0)

    def step(self, action, timeout_s: Optional[float] = None, **kwargs: Any) -> BenchCountObservation:  # type: ignore[override]
        self._state.step_count += 1
        message = getattr(action, "message", "")
        n = TASKS.get(self._task_id)
        if n is None or message == "finish":
            return self._observation(message, True, 0.0)
        if message == "done":
            return self._observation(message, True, 1.0 if self._state.step_count == n else 0.0)
        return self._observation(message, self._state.step_count >= MAX_STEPS, 0.0)

    @property
    def state(self) -> State:
        return self._state
