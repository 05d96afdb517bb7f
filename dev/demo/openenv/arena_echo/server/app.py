"""FastAPI application for the Arena Echo environment (as `openenv init arena_echo` generates it,
openenv-core 0.3.0). `ARENA_ECHO_VARIANT` removes what admission must miss: `no-health` drops
`GET /health`, `no-mcp` drops `/mcp`, and `schema-differs` serves another action schema.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import ArenaEchoAction, ArenaEchoObservation, ArenaEchoTextAction
    from .arena_echo_environment import ArenaEchoEnvironment
except ImportError:
    from models import ArenaEchoAction, ArenaEchoObservation, ArenaEchoTextAction
    from server.arena_echo_environment import ArenaEchoEnvironment

VARIANT = os.environ.get("ARENA_ECHO_VARIANT", "ok")

app = create_app(
    ArenaEchoEnvironment,
    ArenaEchoTextAction if VARIANT == "schema-differs" else ArenaEchoAction,
    ArenaEchoObservation,
    env_name="arena_echo",
    max_concurrent_envs=1,
)

DROPPED = {"no-health": "/health", "no-mcp": "/mcp"}.get(VARIANT)
if DROPPED:
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) != DROPPED]
    app.openapi_schema = None


def main(host: str = "0.0.0.0", port: int = 8000):
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    main(port=parser.parse_args().port)
