"""Data models for the Echo 0.10 environment, laid out as `openenv init` lays them out in openenv
0.10.0 (`openenv.core.env_server.types`): the demo echo's action and observation, field for field.
0.10 sends each observation's `metadata` with it (`{}` at reset, `{"step": n}` after a step)."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class Echo010Action(Action):
    """Action for the Echo 0.10 environment - just a message to echo."""

    message: str = Field(..., description="Message to echo back")


class Echo010Observation(Observation):
    """Observation from the Echo 0.10 environment - the echoed message."""

    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, description="Length of the echoed message")
    task_id: str = Field(default="", description="The task this episode plays")
