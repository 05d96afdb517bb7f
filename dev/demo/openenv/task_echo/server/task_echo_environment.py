"""An echo environment with openenv 0.10.0's task API (`TaskProvider`: `list_splits`, `list_tasks`,
`num_tasks`, `get_task`, `get_task_range`), the shape dataset-backed environments take in 0.10.

Splits `train` (`echo-1`: say hi, `echo-2`: say bye) and `test` (`echo-3`: say yes). `reset`
chooses the task the way 0.10's importers do: `split` and `index` together, or a whole
`task_spec`; with neither it plays the first split's task 0, and any other keyword (the arena's
`task_id`) is swallowed. The reset observation names the task (`task_id`) and its prompt, and its
`metadata` holds `{"prompt", "task_spec"}` with the answer: what the arena must keep from the model.
An episode ends when the message is the task's answer (reward 1.0), after three steps (0.5), or at
`finish` (0.0: the submission's finish_action)."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import TaskEchoAction, TaskEchoObservation
except ImportError:
    from models import TaskEchoAction, TaskEchoObservation

SPLITS = {
    "train": [
        {"id": "echo-1", "prompt": "say hi", "answer": "hi"},
        {"id": "echo-2", "prompt": "say bye", "answer": "bye"},
    ],
    "test": [
        {"id": "echo-3", "prompt": "say yes", "answer": "yes"},
    ],
}
MAX_STEPS = 3


class TaskEchoEnvironment(Environment[TaskEchoAction, TaskEchoObservation, State]):
    """Plays one listed task per episode: the answer to its prompt ends it."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task: dict = {}

    # The task API: discovery only, and callable on a fresh instance (the server makes one per call).
    # An unknown split raises KeyError (the server's 500); an index out of range, IndexError (400).

    def list_splits(self) -> list[str]:
        return list(SPLITS)

    def list_tasks(self, split: str) -> list[dict]:
        return [dict(t) for t in SPLITS[split]]

    def num_tasks(self, split: str) -> int:
        return len(SPLITS[split])

    def get_task(self, split: str, index: int) -> dict:
        if index < 0:
            raise IndexError(index)
        return dict(SPLITS[split][index])

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[dict]:
        return [dict(t) for t in SPLITS[split][start:stop]]

    def _observation(self, message: str, done: bool, reward: Optional[float], metadata: dict) -> TaskEchoObservation:
        return TaskEchoObservation(task_id=self._task.get("id", ""), prompt=self._task.get("prompt", ""),
                                   echoed_message=message, done=done, reward=reward, metadata=metadata)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_spec: Optional[dict] = None, split: Optional[str] = None, index: Optional[int] = None,
              **kwargs: Any) -> TaskEchoObservation:
        if task_spec is not None:
            task = dict(task_spec)
        elif split is not None and index is not None:
            task = self.get_task(split, index)
        elif split is not None or index is not None:
            raise ValueError("split and index must be provided together")
        else:
            split, index = next(iter(SPLITS)), 0
            task = self.get_task(split, index)
        self._task = task
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0, split=split, index=index)
        return self._observation("", False, None, {"prompt": task.get("prompt", ""), "task_spec": task})

    def step(self, action: TaskEchoAction, timeout_s: Optional[float] = None,  # type: ignore[override]
             **kwargs: Any) -> TaskEchoObservation:
        self._state.step_count += 1
        message = action.message
        if message == self._task.get("answer"):
            done, reward = True, 1.0
        elif message == "finish":
            # Ends an episode the model did not end by itself and scores nothing.
            done, reward = True, 0.0
        elif self._state.step_count >= MAX_STEPS:
            done, reward = True, 0.5
        else:
            done, reward = False, 0.0
        return self._observation(message, done, reward, {"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state
