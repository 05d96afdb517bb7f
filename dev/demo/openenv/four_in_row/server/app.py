"""FastAPI application of the Four in a Row environment, as `openenv init` lays one out
(openenv-core 0.3.0).

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import FourInRowAction, FourInRowObservation
    from .four_in_row_environment import FourInRowEnvironment
except ImportError:
    from models import FourInRowAction, FourInRowObservation
    from server.four_in_row_environment import FourInRowEnvironment

# Several sessions at once: admission opens a fresh one per reset, one after the other.
app = create_app(FourInRowEnvironment, FourInRowAction, FourInRowObservation, env_name="four_in_row",
                 max_concurrent_envs=4)
