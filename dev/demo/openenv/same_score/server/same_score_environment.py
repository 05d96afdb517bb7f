"""Same Score: an environment whose reward never depends on the action, as an environment whose
reward function is broken (or not written yet) behaves. Every episode ends at the first word with
reward 0.5, whatever the word: admission admits it (its example episode ends with a reward in
[0, 1]) with a warning that the rewards it saw never differ, and a run of it has no training
signal (four equal rewards each step), so it ends early, `failed` `RUN_NO_TRAINING_SIGNAL`, and is
never ranked."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import SameScoreAction, SameScoreObservation
except ImportError:
    from models import SameScoreAction, SameScoreObservation


class SameScoreEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,  # type: ignore[override]
              task_id: Optional[str] = None, **kwargs: Any) -> SameScoreObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return SameScoreObservation(said="", done=False, reward=0.0)

    def step(self, action: SameScoreAction, timeout_s: Optional[float] = None,  # type: ignore[override]
             **kwargs: Any) -> SameScoreObservation:
        self._state.step_count += 1
        return SameScoreObservation(said=action.word, done=True, reward=0.5)

    @property
    def state(self) -> State:
        return self._state
