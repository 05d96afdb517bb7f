"""Data models for the Bench Count environment (laid out as `openenv init` generates them,
openenv-core 0.3.0). The action is the demo echo's, field for field, so that a model that learned to
answer the echo (the tiny CPU model's `{"message": "<word>"}`) also answers here."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class BenchCountAction(Action):
    """Action for the Bench Count environment - one message of the count."""

    message: str = Field(..., description="The next message; `done` ends the count")


class BenchCountObservation(Observation):
    """Observation from the Bench Count environment - the instruction, the last message and its step."""

    instruction: str = Field(default="", description="How many messages to send")
    echoed_message: str = Field(default="", description="The message received")
    step: int = Field(default=0, description="How many messages the episode has received")
    task_id: str = Field(default="", description="The task this episode plays")
