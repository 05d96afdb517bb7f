"""FastAPI application for the Bench Count environment (as `openenv init` generates it,
openenv-core 0.3.0), one session at a time like the demo echo's.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import BenchCountAction, BenchCountObservation
    from .bench_count_environment import BenchCountEnvironment
except ImportError:
    from models import BenchCountAction, BenchCountObservation
    from server.bench_count_environment import BenchCountEnvironment

app = create_app(
    BenchCountEnvironment,
    BenchCountAction,
    BenchCountObservation,
    env_name="bench_count",
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
