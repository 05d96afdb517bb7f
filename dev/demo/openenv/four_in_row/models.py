"""Data models of the Four in a Row environment (openenv-core 0.3.0)."""

from typing import List

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class FourInRowAction(Action):
    """Drop a disc of the player to move into a column."""

    column: int = Field(..., description="The column to drop a disc into, 0 to 6")


class FourInRowObservation(Observation):
    """The board after the last move, seen by the player to move next."""

    board: List[List[int]] = Field(default_factory=list,
                                   description="6 rows of 7 cells, top row first: 0 empty, 1 and 2 the players")
    legal_actions: List[int] = Field(default_factory=list, description="The columns that are not full")
    to_play: int = Field(default=1, description="The player who moves next, 1 or 2")
