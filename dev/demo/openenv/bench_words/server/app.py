"""FastAPI application for the Bench Words environment (as `openenv init` generates it,
openenv-core 0.3.0), one session at a time like the demo echo's.

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import BenchWordsAction, BenchWordsObservation
    from .bench_words_environment import BenchWordsEnvironment
except ImportError:
    from models import BenchWordsAction, BenchWordsObservation
    from server.bench_words_environment import BenchWordsEnvironment

app = create_app(
    BenchWordsEnvironment,
    BenchWordsAction,
    BenchWordsObservation,
    env_name="bench_words",
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
