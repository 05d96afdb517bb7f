"""Colour Wheel: a one-move guessing game whose action schema no other demo uses (an enum of
eight colours), for the arena's tests of environments shaped as others write them. Each task hides
one colour of the wheel; the episode ends at the first guess, its reward the guess's closeness on
the wheel (1.0 for the colour itself, 0.75 a neighbour, down to 0.0 opposite): the reward depends
on the action, so a policy that guesses better is rewarded more. Its `finish_action` is a guess
like any other (every step ends the episode)."""

from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import ColourWheelAction, ColourWheelObservation
except ImportError:
    from models import ColourWheelAction, ColourWheelObservation

WHEEL = ["red", "orange", "yellow", "green", "teal", "blue", "violet", "pink"]
# Each task's hidden colour.
HIDDEN = {"wheel-1": "teal", "wheel-2": "orange"}


class ColourWheelEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._hidden = HIDDEN["wheel-1"]
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,  # type: ignore[override]
              task_id: Optional[str] = None, **kwargs: Any) -> ColourWheelObservation:
        self._hidden = HIDDEN.get(task_id or "", HIDDEN["wheel-1"])
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return ColourWheelObservation(wheel=WHEEL, hint="name the hidden colour", done=False, reward=0.0)

    def step(self, action: ColourWheelAction, timeout_s: Optional[float] = None,  # type: ignore[override]
             **kwargs: Any) -> ColourWheelObservation:
        self._state.step_count += 1
        apart = abs(WHEEL.index(action.colour) - WHEEL.index(self._hidden))
        distance = min(apart, len(WHEEL) - apart)
        return ColourWheelObservation(wheel=WHEEL, hint="the game is over", done=True,
                                      reward=1.0 - distance / (len(WHEEL) // 2))

    @property
    def state(self) -> State:
        return self._state
