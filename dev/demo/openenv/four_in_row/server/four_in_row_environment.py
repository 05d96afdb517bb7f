"""Four in a Row, a board game as upstream OpenEnv's game environments are written (one client
plays both players, a move is the whole action), with the two shapes that make such an environment
hard to train on, kept on purpose for the arena's tests:

- No move ends the game on request. An episode ends when a player connects four (reward 1.0 to
  the player who moved), the board fills (0.5), or a move into a full or missing column (0.0). A
  `finish_action` such as `{"column": 3}` is only one more move: admission refuses it
  (FINISH_ACTION_INVALID).
- `reset()` names no argument, so openenv-core passes it none: the task id and the seed a reset
  sends are dropped, and every task starts from the same empty board (admission's
  RESET_IGNORES_TASK warning)."""

from typing import Any, List, Optional
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import FourInRowAction, FourInRowObservation
except ImportError:
    from models import FourInRowAction, FourInRowObservation

ROWS, COLUMNS, LINE = 6, 7, 4


def connects(board: List[List[int]], row: int, column: int) -> bool:
    """Whether the disc at (row, column) is part of a line of four of its player's discs."""
    player = board[row][column]
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and board[r][c] == player:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= LINE:
            return True
    return False


class FourInRowEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self.reset()

    def reset(self) -> FourInRowObservation:  # type: ignore[override]
        self._board = [[0] * COLUMNS for _ in range(ROWS)]
        self._to_play = 1
        self._state = State(episode_id=str(uuid4()), step_count=0)
        return self._observation(reward=0.0, done=False)

    def step(self, action: FourInRowAction, timeout_s: Optional[float] = None,  # type: ignore[override]
             **kwargs: Any) -> FourInRowObservation:
        self._state.step_count += 1
        column = action.column
        if not 0 <= column < COLUMNS or self._board[0][column] != 0:
            return self._observation(reward=0.0, done=True)
        row = max(r for r in range(ROWS) if self._board[r][column] == 0)
        self._board[row][column] = self._to_play
        if connects(self._board, row, column):
            return self._observation(reward=1.0, done=True)
        if all(self._board[0]):
            return self._observation(reward=0.5, done=True)
        self._to_play = 3 - self._to_play
        return self._observation(reward=0.0, done=False)

    def _observation(self, reward: float, done: bool) -> FourInRowObservation:
        return FourInRowObservation(board=[list(r) for r in self._board],
                                    legal_actions=[c for c in range(COLUMNS) if self._board[0][c] == 0],
                                    to_play=self._to_play, reward=reward, done=done)

    @property
    def state(self) -> State:
        return self._state
