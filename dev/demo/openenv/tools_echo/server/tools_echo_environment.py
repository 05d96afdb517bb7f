"""An echo environment of tools (openenv 0.10.0's `MCPEnvironment`, tools served by FastMCP 3):
`echo(message)` answers the message, `finish()` ends the episode. Actions are
`{"type": "call_tool", "tool_name": ..., "arguments": {...}}`.

`MCPEnvironment` answers a tool call with the tool's result and never ends an episode or rewards
it, so `step` (HTTP) and `step_async` (the WebSocket) are overridden after the call: `finish`
ends the episode with reward 1.0, and the third tool call ends it with 0.5 (a call that failed
counts). `reset` takes the arena's `task_id` and returns the environment's own reset observation."""

from typing import Any, Optional
from uuid import uuid4

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import Action, Observation, State

try:
    from ..models import ToolsEchoResetObservation
except ImportError:
    from models import ToolsEchoResetObservation

MAX_CALLS = 3


class ToolsEchoEnvironment(MCPEnvironment):
    """Two tools; one episode plays one task."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        mcp = FastMCP("tools_echo")

        @mcp.tool
        def echo(message: str) -> str:
            """Echo a message back."""
            return message

        @mcp.tool
        def finish() -> str:
            """End the episode with a reward of 1."""
            return "finished"

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._task_id = ""

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> ToolsEchoResetObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._task_id = task_id or ""
        return ToolsEchoResetObservation(
            task_id=self._task_id, done=False, reward=0.0,
            instructions="Call the tool `echo` with a message, or `finish` to end the episode.")

    def _scored(self, action: Action, observation: Observation) -> Observation:
        """The episode's end and reward after a tool call (other actions are left as they are)."""
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            finished = action.tool_name == "finish" and getattr(observation, "error", None) is None
            observation.done = finished or self._state.step_count >= MAX_CALLS
            observation.reward = 1.0 if finished else (0.5 if observation.done else 0.0)
        return observation

    def step(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return self._scored(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return self._scored(action, await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        # The action schema is CallToolAction: nothing else reaches a step.
        return Observation(done=False, reward=0.0, metadata={"error": f"unknown action {type(action).__name__}"})

    @property
    def state(self) -> State:
        return self._state
