"""Data models of the Colour Wheel environment (openenv-core 0.3.0)."""

from typing import List, Literal

from openenv.core.env_server.types import Action, Observation
from pydantic import Field

Colour = Literal["red", "orange", "yellow", "green", "teal", "blue", "violet", "pink"]


class ColourWheelAction(Action):
    """Name the hidden colour."""

    colour: Colour = Field(..., description="A colour of the wheel")


class ColourWheelObservation(Observation):
    """The wheel, and how close the last guess came."""

    wheel: List[str] = Field(default_factory=list, description="The eight colours, in the wheel's order")
    hint: str = Field(default="", description="What to do")
