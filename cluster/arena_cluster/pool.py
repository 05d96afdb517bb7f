"""Sandboxes started ahead of need, so that an episode finds its sandbox serving instead of waiting
the minutes HF Jobs may take to schedule it and pull the participant's image (the guide allows
120 s). The trainer asks for the sandboxes of the steps to come while a step plays and its group
trains, and a held-out phase asks for all of its cells' at once (`trainer.Run.ask_ahead`,
`evaluation.Evaluation.run`); the pool starts them in the order asked, as the run's allowance
lets it.

- **One sandbox, one episode.** A `Lease` is one fresh sandbox, started for one episode and
  canceled when it is released (`release`), whatever happened.
- **Within the allowance.** A run holds at most `capacity` sandboxes at once, started, serving or
  playing: `run_allowance`, which the node's agent also counts per run (`agent`). A released
  sandbox frees its place at once, for the next one asked.
- **A start has an allowance of its own.** A sandbox that does not serve within `start_s`
  (`ARENA_SANDBOX_START_S`) of its start, or whose server exits first, is lost: `Lease.wait` says
  why, and the episode asks for a replacement, which starts before anything else waiting
  (`request(..., first=True)`). The wait is never charged to the participant's walls, which count
  from when the sandbox serves.
- **Nothing left behind.** Pooled sandboxes carry the run's labels like any other, so the run's
  cleanup (`sandboxes.cancel_all`) stops them too; `close` first releases every lease and waits
  for the starts still in flight, so that none is created after the cleanup.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from . import contract
from .sandboxes import SandboxEnded, SandboxError, Sandboxes

# Steps whose sandboxes a run asks for at once when prefetching: the step playing and the next
# one (whose sandboxes start while this one plays), then, as this step's episodes end, the one
# after (its sandboxes start while this step's group trains and the next step plays).
AHEAD_STEPS = 2
# How long `close` waits for each start in flight to return (HF's answer to `run_job`, which its
# client bounds): a start that returns after the close is canceled before `close` returns, so no
# sandbox outlives its run until HF's timeout.
CLOSE_WAIT_S = 120


def run_allowance(settings) -> int:
    """The sandboxes one run holds at most: a step's five, and when prefetching
    (`ARENA_TRAINER_PREFETCH`) the next step's five too, which is what lets the next step's
    sandboxes start while a step plays; fewer when the node allows fewer in all
    (`ARENA_AGENT_SANDBOXES`)."""
    n = contract.EPISODES_PER_STEP * (AHEAD_STEPS if settings.trainer_prefetch else 1)
    return min(n, settings.agent_sandboxes) if settings.agent_sandboxes else n


@dataclass(eq=False)
class Lease:
    """One sandbox for one episode: started in `place` when the pool's allowance lets it, ready
    once its server serves (`url`) or is lost (`error`)."""

    place: Sandboxes
    task: dict
    purpose: str
    # HF stops the job after this long whatever happens: its start, its wait for its episode, the
    # episode's walls.
    timeout_s: int
    job_id: str | None = None
    url: str | None = None
    error: str | None = None
    released: bool = False
    # Whether its job ended by itself (nothing to cancel), and whether its place in the
    # allowance was given back.
    ended: bool = False
    freed: bool = False
    ready: threading.Event = field(default_factory=threading.Event)
    # Set once its start returned (or failed) and, when it was released meanwhile, was canceled.
    settled: threading.Event = field(default_factory=threading.Event)

    def wait(self) -> str:
        """The sandbox's URL once it serves; SandboxError when it was lost."""
        self.ready.wait()
        if self.error is not None:
            raise SandboxError(self.error)
        return self.url

    def fail(self, why: str) -> None:
        self.error = why
        self.ready.set()


class Pool:
    """A run's sandboxes: at most `capacity` at once, started in the order asked for."""

    def __init__(self, capacity: int, start_s: float):
        self.capacity = capacity
        self.start_s = start_s
        self._lock = threading.Lock()
        self._queue: deque = deque()
        self._held: set = set()
        self._starting: list = []
        self.closed = False

    def request(self, place: Sandboxes, task: dict, purpose: str, hold_s: float = 0,
                first: bool = False) -> Lease:
        """A fresh sandbox of `task` for one episode, started as soon as the allowance lets it;
        `first`: before every other request waiting (a lost sandbox's replacement). `hold_s`: how
        long it may wait for its episode once it serves."""
        t = contract.task_limits(task)
        walls = t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"]
        lease = Lease(place, task, purpose, int(self.start_s + hold_s + walls))
        with self._lock:
            if self.closed:
                lease.released = True
                lease.fail("the run's sandboxes are stopped")
                return lease
            (self._queue.appendleft if first else self._queue.append)(lease)
        self._dispatch()
        return lease

    def release(self, lease: Lease) -> str | None:
        """Cancels the lease's sandbox (one not started yet is never started); what could not be
        canceled, in words."""
        with self._lock:
            if lease.released:
                return None
            lease.released = True
            if lease in self._queue:
                self._queue.remove(lease)
                lease.fail("released before it started")
                return None
            if lease.job_id is None:  # its start is in flight: `_bring_up` cancels it
                return None
        return self._cancel(lease)

    def close(self) -> list:
        """Releases every lease, waits for each start in flight to return (`CLOSE_WAIT_S`), the
        sandbox it made canceled at once; what could not be canceled, in words. Nothing is started
        after. It does not wait for a sandbox to serve: only for HF's answer to its start."""
        with self._lock:
            self.closed = True
            leases = list(self._queue) + list(self._held)
            in_flight = [lease for lease in self._held if lease.job_id is None]
        problems = [p for lease in leases if (p := self.release(lease))]
        until = time.monotonic() + CLOSE_WAIT_S
        for lease in in_flight:
            if not lease.settled.wait(max(until - time.monotonic(), 0)):
                problems.append("a sandbox's start had not returned when the run's sandboxes were stopped")
        return problems

    def _dispatch(self) -> None:
        with self._lock:
            while not self.closed and self._queue and len(self._held) < self.capacity:
                lease = self._queue.popleft()
                self._held.add(lease)
                thread = threading.Thread(target=self._bring_up, args=(lease,), daemon=True)
                self._starting = [t for t in self._starting if t.is_alive()] + [thread]
                thread.start()

    def _bring_up(self, lease: Lease) -> None:
        """Starts the lease's sandbox and waits until it serves, within the start allowance."""
        deadline = time.monotonic() + self.start_s
        try:
            job = lease.place.start(lease.task, lease.timeout_s, lease.purpose)
        except Exception as e:  # noqa: BLE001 - HF refused or did not answer: a lost sandbox
            lease.fail(f"HF did not start the sandbox: {type(e).__name__}: {str(e)[:300]}")
            self._free(lease)
            lease.settled.set()
            return
        with self._lock:
            lease.job_id = job.id
            released = lease.released
        if released:
            lease.fail("released before it served")
            self._cancel(lease)
            lease.settled.set()
            return
        lease.settled.set()
        try:
            lease.url = lease.place.wait_serving(job.id, int(lease.task["port"]), deadline)
            lease.ready.set()
        except SandboxEnded as e:
            lease.ended = True
            lease.fail(str(e))
        except SandboxError as e:
            lease.fail(str(e))
        except Exception as e:  # noqa: BLE001 - HF's state could not be read: a lost sandbox
            lease.fail(f"reading the sandbox's state failed: {type(e).__name__}: {str(e)[:300]}")

    def _cancel(self, lease: Lease) -> str | None:
        try:
            if not lease.ended:
                lease.place.cancel(lease.job_id)
            problem = None
        except Exception as e:  # noqa: BLE001 - the run's cleanup stops it; the event says so
            problem = f"canceling sandbox {lease.job_id} failed: {e}"
        self._free(lease)
        return problem

    def _free(self, lease: Lease) -> None:
        with self._lock:
            if lease.freed:
                return
            lease.freed = True
            self._held.discard(lease)
        self._dispatch()
