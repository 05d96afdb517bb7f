"""Data models of the Same Score environment (openenv-core 0.3.0)."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class SameScoreAction(Action):
    """Say a word."""

    word: str = Field(..., description="Any word")


class SameScoreObservation(Observation):
    """The word said last."""

    said: str = Field(default="", description="The word said last")
