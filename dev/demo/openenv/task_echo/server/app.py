"""FastAPI application for the Task Echo environment (openenv 0.10.0). `create_app` serves the
task API under `/task_echo/…` because the environment defines the five task methods; one session
at a time like the demo echo's.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import TaskEchoAction, TaskEchoObservation
    from .task_echo_environment import TaskEchoEnvironment
except ImportError:
    from models import TaskEchoAction, TaskEchoObservation
    from server.task_echo_environment import TaskEchoEnvironment

app = create_app(
    TaskEchoEnvironment,
    TaskEchoAction,
    TaskEchoObservation,
    env_name="task_echo",
    max_concurrent_envs=1,
)


def main(host: str = "0.0.0.0", port: int = 8000):
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    main(port=parser.parse_args().port)
