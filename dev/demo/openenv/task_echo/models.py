"""Data models for the Task Echo environment (openenv 0.10.0's `openenv.core.env_server.types`).
The observation names the task the episode plays and its prompt; the task's spec, answer included,
travels only in the reset observation's `metadata`, as 0.10's importers put it there."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class TaskEchoAction(Action):
    """Action for the Task Echo environment - the answer to the task's prompt."""

    message: str = Field(..., description="The answer; the task's answer ends the episode")


class TaskEchoObservation(Observation):
    """Observation from the Task Echo environment - the task, its prompt and the last message."""

    task_id: str = Field(default="", description="The task this episode plays")
    prompt: str = Field(default="", description="What the task asks for")
    echoed_message: str = Field(default="", description="The message received")
