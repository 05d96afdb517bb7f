"""Data models for the Bench Words environment (laid out as `openenv init` generates them,
openenv-core 0.3.0). The action is the demo echo's, field for field, so that a model that learned to
answer the echo (the tiny CPU model's `{"message": "<word>"}`) also answers here."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class BenchWordsAction(Action):
    """Action for the Bench Words environment - the reply to the instruction."""

    message: str = Field(..., description="The reply: a single word")


class BenchWordsObservation(Observation):
    """Observation from the Bench Words environment - the instruction and the reply it got."""

    instruction: str = Field(default="", description="What the reply must be")
    echoed_message: str = Field(default="", description="The reply received")
    task_id: str = Field(default="", description="The task this episode plays")
