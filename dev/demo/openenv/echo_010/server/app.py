"""FastAPI application for the Echo 0.10 environment (as `openenv init` lays it out in openenv
0.10.0), one session at a time like the demo echo's. 0.10's `create_app` also serves the task API
routes (`/list_environments`, `/echo_010/splits`, …): this environment has no tasks to list, so
they answer 501 and the arena resets it by the task's id.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import Echo010Action, Echo010Observation
    from .echo_010_environment import Echo010Environment
except ImportError:
    from models import Echo010Action, Echo010Observation
    from server.echo_010_environment import Echo010Environment

app = create_app(
    Echo010Environment,
    Echo010Action,
    Echo010Observation,
    env_name="echo_010",
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
