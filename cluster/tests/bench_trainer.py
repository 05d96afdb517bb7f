"""`dev/bench-trainer`: the real agent and trainer on this CPU with the tiny model, against the
arena and stand-in `start_test_stack release real` starts; one run of the demo echo environment
for STEPS optimizer steps. Prints seconds per optimizer step (the five episodes, then the update),
episodes per minute and the trainer's peak memory. A measurement, not a test: it asserts nothing
beyond the run completing."""

import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

from stack import Node, env, events_of, run_of, submit, wait


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


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
