"""The run's pool of sandboxes, against a place that plays HF Jobs in this process: at most its
allowance at once, in the order asked (a replacement first), a start that does not serve within
its allowance lost, and nothing left or started after the pool is closed."""

import contextlib
import threading
import time
from types import SimpleNamespace

import pytest

from arena_cluster.episodes import play_in
from arena_cluster.pool import Pool, run_allowance
from arena_cluster.sandboxes import SandboxError, Sandboxes
from arena_cluster.settings import Settings

TASK = {"task_id": "echo-1", "task_label": "t-1", "port": 8000, "image": "x", "command": ["serve"],
        "reset_wall_s": 10, "rollout_wall_s": 60, "verifier_wall_s": 10}


class Place:
    """Sandboxes that serve once `serving` is set (or never: `never`); `start_s` per start."""

    namespace, reader = "none", "none"

    def __init__(self, start_s=0.0, never=()):
        self.start_s, self.never = start_s, set(never)
        self.serving = threading.Event()
        self.started, self.canceled = [], []
        self.lock = threading.Lock()

    def start(self, task, timeout_s, purpose):
        time.sleep(self.start_s)
        with self.lock:
            self.started.append(task["task_id"])
            return SimpleNamespace(id=f"{task['task_id']}#{len(self.started)}")

    def wait_serving(self, job_id, port, deadline):
        while not self.serving.wait(0.01):
            if job_id in self.canceled:
                raise SandboxError("the sandbox ended CANCELED before serving")
            if time.monotonic() > deadline or job_id in self.never:
                raise SandboxError("HF gave no URL for the sandbox's port 8000 within its start allowance")
        return f"http://{job_id}"

    def cancel(self, job_id):
        self.canceled.append(job_id)


def until(check, limit_s=15.0):
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.01)


def test_a_run_holds_at_most_its_allowance_and_a_replacement_starts_first():
    place, pool = Place(), Pool(capacity=3, start_s=30)
    leases = [pool.request(place, dict(TASK, task_id=f"cell-{i}"), "openenv-eval") for i in range(5)]
    until(lambda: len(place.started) == 3)
    time.sleep(0.1)
    assert sorted(place.started) == ["cell-0", "cell-1", "cell-2"], "three at once, the first asked"
    replacement = pool.request(place, dict(TASK, task_id="again"), "openenv-eval", first=True)
    assert pool.release(leases[0]) is None
    until(lambda: len(place.started) == 4)
    assert place.started[3] == "again", "a replacement starts before the requests waiting"
    assert place.canceled == [leases[0].job_id]
    place.serving.set()
    assert leases[1].wait() == f"http://{leases[1].job_id}" and replacement.wait() == "http://again#4"
    for lease in (leases[1], replacement):
        pool.release(lease)
    until(lambda: len(place.started) == 6)
    assert sorted(place.started[4:]) == ["cell-3", "cell-4"]
    for lease in leases[2:]:
        assert lease.wait().startswith("http://cell-")
        pool.release(lease)
    assert len(place.canceled) == 6


class NoPolicy:
    """Enough of a policy for episodes that never reach their reset."""

    def live(self):
        return contextlib.nullcontext()


def test_a_lost_sandbox_is_replaced_before_the_sandboxes_waiting_in_a_full_pool():
    """`play_in` asks for the replacement before it gives the lost sandbox's place back, so the
    place goes to the replacement, not to the next sandbox waiting (here `b`)."""
    place, pool = Place(), Pool(capacity=1, start_s=0.2)
    lost = pool.request(place, dict(TASK, task_id="a"), "openenv-eval")
    waiting = pool.request(place, dict(TASK, task_id="b"), "openenv-eval")
    out = []
    thread = threading.Thread(target=lambda: out.append(play_in(pool, lost, NoPolicy(), dict(TASK, task_id="a"),
                                                                actions=None)), daemon=True)
    thread.start()
    thread.join(15)  # about 0.5 s; a replacement queued behind `b` would never come
    assert out, f"the replacement waited behind the sandbox waiting in the pool (started: {place.started})"
    assert (out[0].end, out[0].retries) == ("sandbox", 1), out[0]
    until(lambda: len(place.started) == 3)
    assert place.started == ["a", "a", "b"], "the replacement took the lost sandbox's place"
    pool.release(waiting)


def test_a_sandbox_that_does_not_serve_within_its_start_allowance_is_lost():
    place, pool = Place(), Pool(capacity=2, start_s=0.3)
    started = time.monotonic()  # before the request: its start (and allowance) may begin at once
    lease = pool.request(place, TASK, "openenv-train")
    with pytest.raises(SandboxError, match="within its start allowance"):
        lease.wait()
    # The upper bound is a hang bound, with room for a loaded machine.
    assert 0.25 < time.monotonic() - started < 10
    assert pool.release(lease) is None and place.canceled == ["echo-1#1"]


def test_the_job_timeout_covers_the_start_the_wait_for_its_episode_and_the_walls():
    place, pool = Place(), Pool(capacity=1, start_s=120)
    assert pool.request(place, TASK, "openenv-train", hold_s=400).timeout_s == 120 + 400 + 80


def test_a_closed_pool_cancels_everything_and_starts_nothing_more():
    """Closing while a start is in flight: the sandbox it creates is canceled when HF answers;
    those waiting are never started; a request after closing is refused."""
    place, pool = Place(start_s=0.3), Pool(capacity=2, start_s=30)
    leases = [pool.request(place, dict(TASK, task_id=f"s-{i}"), "openenv-train") for i in range(4)]
    time.sleep(0.05)  # the first two are being started
    assert pool.close() == []
    assert sorted(place.started) == ["s-0", "s-1"]
    assert sorted(place.canceled) == sorted(lease.job_id for lease in leases[:2])
    for lease in leases:
        with pytest.raises(SandboxError):
            lease.wait()
    late = pool.request(place, TASK, "openenv-train")
    with pytest.raises(SandboxError, match="stopped"):
        late.wait()
    time.sleep(0.4)
    assert len(place.started) == 2


def test_a_sandbox_hf_refuses_to_start_is_lost_and_frees_its_place():
    class Refusing(Place):
        def start(self, task, timeout_s, purpose):
            raise RuntimeError("HF answered 429")

    place, pool = Refusing(), Pool(capacity=1, start_s=30)
    first, second = pool.request(place, TASK, "openenv-train"), pool.request(place, TASK, "openenv-train")
    for lease in (first, second):
        with pytest.raises(SandboxError, match="HF did not start the sandbox: RuntimeError: HF answered 429"):
            lease.wait()


def test_a_run_holds_two_steps_of_sandboxes_when_prefetching():
    base = {"HF_TOKEN": "a", "ARENA_SANDBOX_TOKEN": "b", "ARENA_SANDBOX_NAMESPACE": "s", "ARENA_EVAL_TOKEN": "c",
            "ARENA_EVAL_NAMESPACE": "e", "ARENA_TRAINER_MODEL": "tiny"}
    assert run_allowance(Settings.read(base)) == 10
    assert run_allowance(Settings.read(dict(base, ARENA_TRAINER_PREFETCH="0"))) == 5
    assert run_allowance(Settings.read(dict(base, ARENA_AGENT_SANDBOXES="8"))) == 8


class Jobs:
    """HF's Jobs API for one job: its stages in turn (one per `inspect_job`), its log lines."""

    def __init__(self, stages, message=None, logs=()):
        self.stages, self.message, self.logs = list(stages), message, list(logs)
        self.inspected = 0

    def inspect_job(self, job_id, namespace):
        self.inspected += 1
        stage = self.stages[min(self.inspected, len(self.stages)) - 1]
        status = SimpleNamespace(stage=stage, message=self.message if stage == "ERROR" else None,
                                 expose_urls=["http://127.0.0.1:9"] if stage == "RUNNING" else [])
        return SimpleNamespace(id=job_id, status=status)

    def fetch_job_logs(self, job_id, namespace, tail=None):
        return iter(self.logs)


def test_a_server_that_exits_is_seen_at_once_with_its_exit_and_last_lines_without_credentials():
    """The server started (RUNNING, its URL given) and exited while /health was asked: the wait
    stops within about a second, not at the deadline, and says the exit, its message and the last
    five lines of its log, every credential of the cluster written ***."""
    lines = [f"line {i}" for i in range(8)] + ["token hf_bot_secret and hf_reader_secret", ""]
    api = Jobs(["RUNNING", "RUNNING", "ERROR"], message="the command exited (exit status: 1) hf_bot_secret",
               logs=lines)
    place = Sandboxes(api, "sandboxes", "hf_reader_secret", "oe-1",
                      secrets=("hf_bot_secret", "hf_reader_secret", "hf_eval_secret"))
    started = time.monotonic()
    with pytest.raises(SandboxError) as lost:
        place.wait_serving("job-1", 8000, time.monotonic() + 60)
    assert time.monotonic() - started < 15, "seen at the deadline (60 s), not at once (about 2.5 s)"
    why = str(lost.value)
    assert why == ("the server exited before serving (ERROR: the command exited (exit status: 1) ***); its last "
                   "lines: line 4 | line 5 | line 6 | line 7 | token *** and ***"), why


def test_an_exited_servers_log_is_cut_to_its_last_characters():
    api = Jobs(["ERROR"], logs=["x" * 400, "y" * 400])
    why = Sandboxes(api, "sandboxes", "r", "oe-1").exited("job-1", "ERROR", None)
    assert why.startswith("the server exited before serving (ERROR); its last lines: …")
    assert why.endswith("y" * 400) and len(why.split("its last lines: ")[1]) == 501


def test_a_start_that_returns_after_the_close_is_canceled_before_the_close_returns():
    """HF answers a start late (here 1.5 s, past the close): the close waits for that answer and
    cancels the sandbox it made, so none outlives its run until HF's timeout."""
    place, pool = Place(start_s=1.5), Pool(capacity=1, start_s=30)
    lease = pool.request(place, TASK, "openenv-train")
    time.sleep(0.05)  # its start is in flight
    assert pool.close() == []
    assert place.started == [TASK["task_id"]] and place.canceled == [lease.job_id], (place.started, place.canceled)
    with pytest.raises(SandboxError):
        lease.wait()
