"""FastAPI application of the Colour Wheel environment, as `openenv init` lays one out
(openenv-core 0.3.0).

Usage: uvicorn server.app:app --host 0.0.0.0 --port 8000
"""

from openenv.core.env_server.http_server import create_app

try:
    from ..models import ColourWheelAction, ColourWheelObservation
    from .colour_wheel_environment import ColourWheelEnvironment
except ImportError:
    from models import ColourWheelAction, ColourWheelObservation
    from server.colour_wheel_environment import ColourWheelEnvironment

# Several sessions at once: admission opens a fresh one per reset, one after the other.
app = create_app(ColourWheelEnvironment, ColourWheelAction, ColourWheelObservation, env_name="colour_wheel",
                 max_concurrent_envs=8)
