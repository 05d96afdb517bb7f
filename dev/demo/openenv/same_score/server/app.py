"""FastAPI application of the Same Score environment, as `openenv init` lays one out
(openenv-core 0.3.0).

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import SameScoreAction, SameScoreObservation
    from .same_score_environment import SameScoreEnvironment
except ImportError:
    from models import SameScoreAction, SameScoreObservation
    from server.same_score_environment import SameScoreEnvironment

# Several sessions at once: admission opens a fresh one per reset, one after the other.
app = create_app(SameScoreEnvironment, SameScoreAction, SameScoreObservation, env_name="same_score",
                 max_concurrent_envs=8)
