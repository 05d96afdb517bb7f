"""A held-out benchmark environment for the local demo (domain: office and white-collar work): each
task asks for a one-word reply (`reply-hello`, `reply-done`, `reply-echo`; the target word is the
suffix) and the episode ends at the first step. The exact word scores 1.0, another word of `WORDS`
0.25 (a well-formed but wrong answer is worth more than none, so rewards spread), anything else
0.0. `finish` is the benchmark's finish_action: it ends the episode and scores nothing, so a
malformed reply is never rewarded like an answer. An unknown task id is said at reset and scores
0.0 at every step."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import BenchWordsObservation
except ImportError:
    from models import BenchWordsObservation

TASKS = {"reply-hello": "hello", "reply-done": "done", "reply-echo": "echo"}
# The single words a reply may be (the tiny model's vocabulary of replies, less `finish`).
WORDS = {"hello", "done", "echo", "again", "world", "ready", "arena", "message", "step", "yes", "no"}


class BenchWordsEnvironment(Environment):
    """Asks for one word; one episode plays one task."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task_id = ""

    def _instruction(self) -> str:
        target = TASKS.get(self._task_id)
        if target is None:
            return f"Unknown task `{self._task_id}`: known tasks are {', '.join(TASKS)}. Nothing scores."
        return f"Reply with the single word `{target}`."

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> BenchWordsObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._task_id = task_id or ""
        return BenchWordsObservation(instruction=self._instruction(), echoed_message="",
                                     task_id=self._task_id, done=False, reward=0.0)

    def step(self, action, timeout_s: Optional[float] = None, **kwargs: Any) -> BenchWordsObservation:  # type: ignore[override]
        self._state.step_count += 1
        message = getattr(action, "message", "")
        target = TASKS.get(self._task_id)
        if target is None or message == "finish":
            reward = 0.0
        elif message == target:
            reward = 1.0
        else:
            reward = 0.25 if message in WORDS else 0.0
        return BenchWordsObservation(instruction=self._instruction(), echoed_message=message,
                                     task_id=self._task_id, done=True, reward=reward,
                                     metadata={"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state
