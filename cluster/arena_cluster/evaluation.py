"""The held-out evaluation of a run: every task of the track's benchmark (the assignment's
`benchmark`), `trials` times, with the base policy before the first optimizer step and with the
trained policy after the last. Each episode is played in a fresh sandbox of the held-out image
under the same episode contract, sampling settings and limits as training, and seeded by its
benchmark, task and trial alone, so that before and after see the same draws (the episodes of a
batch are generated together, each row with its own seeded draws: `generation`). Held-out
sandboxes run apart from training's, in the eval namespace, reached with the eval reader
(`sandboxes.run_sandboxes`). An episode lost to
the platform (its sandbox never served, or its connection failed) is played again once in a fresh
sandbox; one still lost is reported without a reward and left out of the score. The arena scores
the records itself (`domain::openenv::evaluation`).

Episodes play `AT_ONCE` at a time, the next cell as soon as one ends. With prefetching on
(`ARENA_TRAINER_PREFETCH`), every cell's sandbox is asked of the run's pool when the phase starts,
so each starts as soon as the run's allowance lets it (while the cells before it play), not when
its cell is reached (`pool`).

A phase has its own allowance (`phase_allowance_s`), not taken from the run's training time. An
episode not started within it is reported without a reward, and the phase says it is incomplete.
Events never name a held-out task: participants read them. Each phase's records are kept in the
run's progress, so a restarted trainer does not play a finished phase again. The tasks' labels are
the arena's opaque ids (`task_label`), used as given. A held-out environment's tasks carry no
`reset` or `tools`: each resets by its id (`contract.reset_for`) and its system message lists no
tool. The conversation of each phase's first episode is handed to `record` (the run's
`conversations.jsonl`, which stays on the node).
"""

from __future__ import annotations

import hashlib
import math
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

from . import contract
from .episodes import play_in
from .pool import Pool
from .runstate import Actions, Progress
from .sandboxes import EVAL_PURPOSE

# Episodes played at once: a step's sandboxes, which the node reserves per run.
AT_ONCE = contract.EPISODES_PER_STEP


@dataclass
class Cell:
    """One planned held-out episode: its environment's actions, task and trial."""

    actions: Actions
    task: dict
    trial: int

    def seed(self, benchmark: str) -> int:
        digest = hashlib.sha256(f"{benchmark}/{self.task['task_id']}/{self.trial}".encode()).digest()
        return int.from_bytes(digest[:4], "big")


@dataclass
class Record:
    """What the arena receives of one episode (`domain::openenv::evaluation::EpisodeRecord`)."""

    task_id: str
    trial: int
    reward: float | None
    replays: int = 0


def cells(benchmark: dict, actions: list) -> list:
    """Every planned episode; `actions[i]` are environment i's (`Assignment.benchmark_actions`)."""
    out = []
    for env, acts in zip(benchmark.get("environments") or [], actions):
        for task in env["tasks"]:
            task = {**task, "image": env["image"], "port": env["port"], "command": env["command"],
                    "env": env.get("env") or {}}
            out.extend(Cell(acts, task, k) for k in range(int(benchmark["trials"])))
    return out


class Evaluation:
    """Plays the phases of one run; `emit(message, evaluation)` reports an `evaluating` event."""

    def __init__(self, benchmark: dict, actions: list, progress: Progress, emit, record=None):
        self.benchmark = benchmark
        self.id = benchmark.get("id", "")
        self.cells = cells(benchmark, actions)
        self.progress = progress.evaluation
        self.emit = emit
        # `record(phase, task, played)`: the phase's first episode, as the model saw it.
        self.record = record

    def done(self, phase: str) -> bool:
        return phase in self.progress

    def run(self, phase: str, policy, pool: Pool, sandboxes, save, ahead: bool = True) -> None:
        """Plays `phase` (`before` or `after`) unless a start of this trainer already did;
        `sandboxes` are the eval namespace's, started by `pool`; `ahead`: every cell's sandbox is
        asked for at once."""
        if self.done(phase):
            return
        planned = len(self.cells)
        words = "before training" if phase == "before" else "after training"
        if not planned:
            why = "the benchmark's environments are not on this arena (a private benchmark without its overlay)"
            self._report(phase, 0, planned, f"no held-out episode {words}: {why}", incomplete=why)
            self.progress[phase] = {"incomplete": why}
            save()
            return
        allowance = int(self.benchmark["phase_allowance_s"])
        deadline = time.monotonic() + allowance
        self._report(phase, 0, planned, f"{planned} held-out episodes {words}, {AT_ONCE} at a time, "
                     f"within {allowance} s")
        # A sandbox asked for ahead may wait for the cells before it: a round of episodes for each
        # allowance's worth of sandboxes.
        hold_s = self._walls() * math.ceil(pool.capacity / AT_ONCE)
        leases = [pool.request(sandboxes, c.task, EVAL_PURPOSE, hold_s) if ahead else None for c in self.cells]
        try:
            with policy.step(min(AT_ONCE, planned)), ThreadPoolExecutor(AT_ONCE) as ex:
                running = [ex.submit(self._cell, i, leases[i], policy, pool, sandboxes, deadline, phase)
                           for i in range(planned)]
                for n, _ in enumerate(as_completed(running), 1):
                    if n % AT_ONCE == 0 and n < planned:
                        self._report(phase, n, planned, f"{n} of {planned} held-out episodes {words}")
                played = [f.result() for f in running]
        finally:
            for lease in leases:
                if lease is not None:
                    pool.release(lease)
        records = [r for r, _ in played]
        lost = sum(1 for r in records if r.reward is None)
        replays = sum(r.replays for r in records)
        late = any(not started for _, started in played)
        why = f"the phase's {allowance} s ran out before every episode started" if late else None
        message = (f"{planned} held-out episodes {words}: {planned - lost} scored, {lost} left out "
                   f"(lost to the platform or not started), {replays} played again in a fresh sandbox")
        self._report(phase, planned, planned, message, records=[asdict(r) for r in records], incomplete=why)
        self.progress[phase] = {"records": len(records)}
        save()

    def _walls(self) -> int:
        limits = [contract.task_limits(c.task) for c in self.cells]
        return max(t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"] for t in limits)

    def _cell(self, i: int, lease, policy, pool: Pool, sandboxes, deadline: float, phase: str) -> tuple:
        """Cell `i`'s record, and whether it started within the phase's allowance. An episode that
        ended without a valid reward for any other reason than the platform (an invalid reply
        with no finish reward, a wall) scores 0: that is the policy's or the environment's doing.
        The first cell's conversation is recorded."""
        cell = self.cells[i]
        if time.monotonic() >= deadline:
            if lease is not None:
                pool.release(lease)
            return Record(cell.task["task_id"], cell.trial, None), False
        lease = lease or pool.request(sandboxes, cell.task, EVAL_PURPOSE)
        p = play_in(pool, lease, policy, cell.task, cell.actions, seed=cell.seed(self.id))
        if i == 0 and self.record:
            self.record(phase, cell.task, p)
        reward = None if p.end == "sandbox" else (p.score if p.score is not None else 0.0)
        return Record(cell.task["task_id"], cell.trial, reward, p.retries), True

    def _report(self, phase, done, planned, message, records=None, incomplete=None) -> None:
        evaluation = {"phase": phase, "done": done, "planned": planned}
        if records:
            evaluation["records"] = records
        if incomplete:
            evaluation["incomplete"] = incomplete
        self.emit(message, evaluation)
