"""FastAPI application for the Tools Echo environment (openenv 0.10.0): actions and observations
are 0.10's `CallToolAction` and `CallToolObservation`, the reset observation is the environment's
own, and `POST /mcp` answers `tools/list` and `tools/call` (OpenEnv's JSON-RPC, each call on a
fresh instance). One session at a time like the demo echo's.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import CallToolAction, CallToolObservation, ToolsEchoResetObservation
    from .tools_echo_environment import ToolsEchoEnvironment
except ImportError:
    from models import CallToolAction, CallToolObservation, ToolsEchoResetObservation
    from server.tools_echo_environment import ToolsEchoEnvironment

app = create_app(
    ToolsEchoEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="tools_echo",
    max_concurrent_envs=1,
    reset_observation_cls=ToolsEchoResetObservation,
)


def main(host: str = "0.0.0.0", port: int = 8000):
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    main(port=parser.parse_args().port)
