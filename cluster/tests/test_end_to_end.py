"""The real agent and trainer train the demo echo environment end to end, against an arena and
the HF stand-in that dev/test starts without the simulated cluster (`start_test_stack debug real`):
the tiny CPU model of the Qwen3.5 architecture, five fresh sandboxes a step on the stand-in's HF
Jobs, real GRPO steps. The node's agent is killed with SIGKILL mid-run (its trainer with it, as
when a node restarts) and started again: the run resumes from its checkpoint and ends `completed`
with the node's step cap. The metrics in the events are the ones Trackio stored. A second run is
canceled by an organizer while it plays: its trainer stops and no sandbox is left running."""

import math
import os
import time

import pytest

from datetime import datetime

from arena_cluster.rundir import RunDir
from stack import Node, call, env, events_of, live_sandboxes, run_of, sandboxes_by_purpose, submit, token, wait

STEPS = 3
# The demo benchmark's held-out tasks (dev/local-challenge/benchmarks/local-bench.toml), one trial each.
HELD_OUT = ["reply-hello", "reply-done", "reply-echo", "count-1", "count-2", "count-3"]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("node"), STEPS)
    n.start()
    n.connected(env("ARENA_TEST_URL"))
    yield n
    n.stop()


def test_a_submission_trains_for_real_resumes_after_a_crash_and_completes(node):
    arena, hub = env("ARENA_TEST_URL"), env("ARENA_TEST_HUB_URL")
    admitted = wait("admission", submit(arena, "victor", f"real-train-{int(time.time())}"), 300)
    run_id = admitted["run"]["run_id"]
    wait("the first optimizer step", lambda: run_of(arena, "victor", run_id)["policy_version"] >= 1, 900)
    node.crash(run_id)
    node.start()
    node.connected(arena)
    run = wait("the run's end", lambda: (r := run_of(arena, "victor", run_id))["state"] in
               ("completed", "failed", "cancelled") and r, 1500)
    events = events_of(arena, "victor", run_id)
    assert run["state"] == "completed", (run, events)
    assert run["policy_version"] == STEPS, run
    states = [e["state"] for e in events]
    assert states[:3] == ["starting", "loading", "evaluating"] and states[-2:] == ["cleanup", "completed"], states
    assert states[-3] == "evaluating" and states.index("rolling") > 2, states
    # The held-out evaluation before and after: real episodes of the demo benchmark, scored by the
    # arena from the records; the participant sees no held-out task.
    e = run["evaluation"]
    assert e["benchmark"] == "local-bench" and e["state"] == "complete" and not e["simulated"], e
    for phase in ("before", "after"):
        assert e[phase]["episodes"] + e[phase]["lost"] == len(HELD_OUT), e
    assert e["paired_tasks"] > 0 and e["delta_pp"] is not None, e
    assert abs(e["delta_pp"] - 100 * (e["after"]["mean_reward"] - e["before"]["mean_reward"])) < 1e-6, e
    assert [d["domain"] for d in e["domains"]] == ["office and white-collar work", "mathematics and formal reasoning"], e
    shown = str(run) + str(events)
    assert not [t for t in HELD_OUT if t in shown], shown
    assert not [ev for ev in events if "records" in (ev.get("evaluation") or {})], events
    print("evaluation:", {k: e[k] for k in ("before", "after", "delta_pp", "stderr_pp", "replays")})
    places = sandboxes_by_purpose(hub, run_id)
    print("held-out phases (s, from their events):", phase_seconds(events), "sandboxes by place:", places)
    # Held-out sandboxes run apart from training's: in the eval namespace.
    assert set(places) == {"benchflow-sandboxes/openenv-train", "benchflow-eval/openenv-eval"}, places
    loading = events[1]
    assert loading["trainer"]["device"] == "cpu" and loading["trainer"]["trl"] == "1.16.0", loading
    assert "tiny test model" in loading["trainer"]["model"], loading
    alerts = [e["alert"] for e in events if e.get("alert")]
    assert "trainer_restarted" in alerts and "resumed" in alerts, alerts
    trained = [e for e in events if e["state"] == "updating" and e.get("metrics")]
    assert [e["policy_version"] for e in trained] == list(range(1, STEPS + 1)), trained
    for e in trained:
        m = e["metrics"]
        assert len(e["rewards"]) == 4 and all(0 <= r <= 1 for r in e["rewards"]), e
        assert math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]), m
        assert abs(m["reward"] - sum(e["rewards"]) / 4) < 1e-6, e
    # A step whose four rewards differ changes the weights (the adapter's B matrices start at zero).
    signal = [e for e in trained if e["metrics"]["reward_std"] > 0]
    assert signal, f"no step had rewards that differ: {[e['rewards'] for e in trained]}"
    before = 0.0
    for e in trained:
        if e["metrics"]["reward_std"] > 0:
            assert e["metrics"]["lora_b_norm"] != before, f"step {e['policy_version']} changed no weight"
        before = e["metrics"]["lora_b_norm"]
    # What Trackio stored is what the events say.
    os.environ["TRACKIO_DIR"] = str(node.home / "trackio")  # read by trackio when it is imported
    from trackio.sqlite_storage import SQLiteStorage

    for name in ("loss", "grad_norm", "reward", "episodes/step_s"):
        key = "train/" + name
        stored = {v["step"]: v["value"] for v in SQLiteStorage.get_metric_values("arena-openenv", run_id, key)}
        for e in trained:
            assert stored.get(e["policy_version"]) == pytest.approx(e["metrics"][name], rel=1e-6), (name, stored, e)
    assert run["trainer"]["model"] == loading["trainer"]["model"], run
    assert live_sandboxes(hub, run_id) == []
    # The weights never leave the node, and go once the run is over.
    wait("the run's folder to go", lambda: not (node.home / "runs" / run_id).exists(), 60)
    assert not (node.home / "done" / run_id / "checkpoints").exists()
    # Each step's events, as the trainer sent them, name the train task the step plays (the arena
    # builds participants' sentences from it).
    sent = RunDir(node.home / "done" / run_id).events()
    steps = [e for e in sent if e["state"] in ("rolling", "updating")
             and e.get("alert") in (None, "no_update", "episode_retried", "sandbox_failed")]
    assert steps and all(e.get("task_id") in ("echo-1", "echo-2") for e in steps), steps


def test_a_canceled_run_stops_its_trainer_and_its_sandboxes(node):
    arena, hub = env("ARENA_TEST_URL"), env("ARENA_TEST_HUB_URL")
    admitted = wait("admission", submit(arena, "trent", f"real-cancel-{int(time.time())}"), 300)
    run_id = admitted["run"]["run_id"]
    wait("its sandboxes", lambda: live_sandboxes(hub, run_id), 600)
    status, run = call("POST", f"{arena}/api/openenv/runs/{run_id}/cancel", token("eve"))
    assert status == 200 and run["state"] == "cancelled", run
    wait("the trainer to stop", lambda: not (node.home / "runs" / run_id).exists(), 120)
    wait("no sandbox left", lambda: live_sandboxes(hub, run_id) == [], 60)


def phase_seconds(events):
    """Each held-out phase's wall time: from the last event before its first `evaluating` event to
    its last one (the cluster's own timestamps)."""
    at = lambda e: datetime.fromisoformat(e["at"].replace("Z", "+00:00")).timestamp()
    out = {}
    for phase in ("before", "after"):
        idx = [i for i, e in enumerate(events) if (e.get("evaluation") or {}).get("phase") == phase]
        if idx:
            out[phase] = round(at(events[idx[-1]]) - at(events[max(idx[0] - 1, 0)]), 1)
    return out
