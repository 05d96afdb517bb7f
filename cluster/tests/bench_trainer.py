"""`dev/bench-trainer`: the real agent and trainer on this CPU with the tiny model, against the
arena and stand-in `start_test_stack release real` starts.

    bench_trainer.py STEPS
        One run of the demo echo environment for STEPS optimizer steps. Prints seconds per optimizer
        step (the five episodes, then the update), episodes per minute and the trainer's peak memory.
    bench_trainer.py --start-s 20 --budget-s 300
        Sandboxes as slow to start as HF's (the stand-in's start delay, START_S), one run with the
        trainer's prefetching on and one with it off (`ARENA_TRAINER_PREFETCH`), the same submission
        and seeds: the held-out phase before training's wall time, then the optimizer steps taken
        and seconds per step within BUDGET_S of training (from its first step); each run is then
        canceled.

A measurement, not a test: it asserts nothing beyond the runs going as planned."""

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

from stack import Node, call, env, events_of, run_events, run_of, sandbox_switches, submit, token, wait


def seconds(a: str, b: str) -> float:
    parse = lambda t: dt.datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(b) - parse(a)).total_seconds()


def main(steps: int) -> None:
    arena = env("ARENA_TEST_URL")
    home = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    node = Node(home, steps)
    node.start()
    node.connected(arena)
    try:
        admitted = wait("admission", submit(arena, "victor", f"bench-{int(time.time())}"), 300)
        run_id = admitted["run"]["run_id"]
        run = wait("the run's end", lambda: (r := run_of(arena, "victor", run_id))["state"] in
                   ("completed", "failed", "cancelled") and r, 3600)
        events = events_of(arena, "victor", run_id)
    finally:
        node.stop()
    assert run["state"] == "completed", (run, events)
    rolling = [e for e in events if e["state"] == "rolling" and not e.get("alert")]
    updated = [e for e in events if e["state"] == "updating"]
    per_step = [seconds(r["at"], u["at"]) for r, u in zip(rolling, updated)]
    loading = next(e for e in events if e["state"] == "loading")
    total = seconds(rolling[0]["at"], updated[-1]["at"])
    episodes = 5 * len(updated)
    # The agent moves the run's folder to done/ once the arena has its last event: either place.
    # (The trainer writes its figures as it exits, just after its last event.)
    folder = wait("the trainer's figures", lambda: next(
        (p for p in (home / "done" / run_id, home / "runs" / run_id) if (p / "stats.json").exists()), None), 60)
    stats = json.loads((folder / "stats.json").read_text())
    step_s = [e["metrics"]["episodes/step_s"] for e in updated if e.get("metrics")]
    print(f"BENCH trainer (tiny model, CPU): {len(updated)} steps played, {run['policy_version']} trained")
    print(f"BENCH seconds per step (rolling → updating): {', '.join(f'{s:.0f}' for s in per_step)}; "
          f"of which the five episodes: {', '.join(f'{s:.0f}' for s in step_s)}")
    print(f"BENCH episodes per minute: {60 * episodes / total:.1f} ({episodes} in {total:.0f} s, sandbox starts "
          "and updates included)")
    print(f"BENCH loading (start to first step): {seconds(loading['at'], rolling[0]['at']):.0f} s; "
          f"trainer peak RSS {stats['peak_rss_mb']:.0f} MB over {stats['seconds']:.0f} s")


class Timeline:
    """When this bench first saw each of a run's events (every 0.2 s, from the node's own folder):
    finer than the events' own second-resolution `at`."""

    def __init__(self, home: Path, run_id: str):
        self.home, self.run_id = home, run_id
        self.seen: dict = {}  # seq -> (seen at, event)

    def poll(self) -> list:
        now = time.monotonic()
        for e in run_events(self.home, self.run_id):
            self.seen.setdefault(e["seq"], (now, e))
        return [e for _, e in sorted(self.seen.values(), key=lambda x: x[1]["seq"])]

    def first(self, check) -> float | None:
        return min((t for t, e in self.seen.values() if check(e)), default=None)

    def last(self, check) -> float | None:
        return max((t for t, e in self.seen.values() if check(e)), default=None)


def delayed_run(arena: str, hub: str, user: str, prefetch: bool, start_s: float, budget_s: float) -> dict:
    """One run with the stand-in's start delay, canceled once BUDGET_S of training has passed."""
    home = Path(tempfile.mkdtemp(prefix="bench-trainer-delay-"))
    node = Node(home, 100, {"ARENA_TRAINER_PREFETCH": "1" if prefetch else "0"})
    node.start()
    try:
        node.connected(arena)
        sandbox_switches(hub, start_s=start_s, never_serve=0)
        admitted = wait("admission", submit(arena, user, f"bench-delay-{user}-{int(time.time())}"), 600)
        run_id = admitted["run"]["run_id"]
        line = Timeline(home, run_id)
        training = wait("the first step", lambda: line.poll() and line.first(lambda e: e["state"] == "rolling"),
                        1800)
        load = []
        while time.monotonic() < training + budget_s:
            events = line.poll()
            assert events[-1]["state"] not in ("completed", "failed", "cancelled"), events[-2:]
            load.append(os.getloadavg()[0])
            time.sleep(0.2)
        status, answer = call("POST", f"{arena}/api/openenv/runs/{run_id}/cancel", token("eve"))
        assert status == 200, answer
        # The next run starts once this one's trainer has stopped and canceled its sandboxes.
        wait("the trainer to stop", lambda: not (home / "runs" / run_id).exists(), 120)
    finally:
        sandbox_switches(hub, start_s=0, never_serve=0)
        node.stop()
    before = lambda e: (e.get("evaluation") or {}).get("phase") == "before"  # noqa: E731
    trained = sorted(t for t, e in line.seen.values() if e["state"] == "updating" and e.get("metrics")
                     and t <= training + budget_s)
    waits = [e["metrics"]["episodes/sandbox_wait_s"] for _, e in line.seen.values()
             if e["state"] == "updating" and e.get("metrics")]
    return {"steps": len(trained), "per_step_s": (trained[-1] - training) / len(trained) if trained else None,
            "held_out_s": line.last(before) - line.first(before),
            "wait_s": sum(waits) / len(waits) if waits else None, "load": sum(load) / len(load)}


def delayed(start_s: float, budget_s: float) -> None:
    arena, hub = env("ARENA_TEST_URL"), env("ARENA_TEST_HUB_URL")
    runs = {"on": delayed_run(arena, hub, "grace", True, start_s, budget_s),
            "off": delayed_run(arena, hub, "heidi", False, start_s, budget_s)}
    for way, r in runs.items():
        print(f"BENCH sandbox start {start_s:g} s, prefetching {way}: {r['steps']} optimizer steps in {budget_s:g} s "
              f"of training, {r['per_step_s']:.1f} s per step (mean episodes/sandbox_wait_s {r['wait_s']:.1f}); "
              f"held-out phase before training {r['held_out_s']:.1f} s; the machine's mean load {r['load']:.1f}")
    on, off = runs["on"], runs["off"]
    print(f"BENCH prefetching: {on['steps'] / max(off['steps'], 1):.2f}x the steps in the same time; held-out "
          f"phase {off['held_out_s'] / on['held_out_s']:.2f}x faster")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("steps", type=int, nargs="?", default=3)
    p.add_argument("--start-s", type=float, help="the stand-in's sandbox start delay: the run played both ways")
    p.add_argument("--budget-s", type=float, default=300)
    args = p.parse_args()
    if args.start_s is None:
        main(args.steps)
    else:
        delayed(args.start_s, args.budget_s)
