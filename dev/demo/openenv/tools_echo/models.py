"""Data models for the Tools Echo environment. Its actions and step observations are openenv
0.10.0's MCP types (`CallToolAction`, `CallToolObservation`: the tool's name, its result, an error),
which name no tool: a client lists the tools with `tools/list` (`POST /mcp`). Only the reset
observation is the environment's own (0.10's `reset_observation` in `/schema`)."""

from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation
from pydantic import Field

__all__ = ["CallToolAction", "CallToolObservation", "ToolsEchoResetObservation"]


class ToolsEchoResetObservation(Observation):
    """Reset observation of the Tools Echo environment - the task and what to do."""

    task_id: str = Field(default="", description="The task this episode plays")
    instructions: str = Field(default="", description="What the episode asks for")
