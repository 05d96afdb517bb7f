"""The real agent and trainer train the demo echo environment end to end, against an arena and
the HF stand-in that dev/test starts without the simulated cluster (`start_test_stack debug real`):
the tiny CPU model of the Qwen3.5 architecture, five fresh sandboxes a step on the stand-in's HF
Jobs, real GRPO steps. One run carries most of what a real run must show, as training it is the
cost: its sandboxes are as slow to start as HF's (the stand-in's start delay, `START_S`), and each
step's start before the update of the step two before it ends (the trainer's pool prefetching);
the node's agent is killed with SIGKILL mid-run (its trainer with it, as when a node restarts)
and started again, and the next sandbox created after never serves: the run resumes from its
checkpoint, replaces that sandbox within its step, and ends `completed` with the node's step cap.
The metrics in the events are the ones Trackio stored. A second run is canceled by an organizer
while it plays: its trainer stops and no sandbox is left running."""

import json
import math
import os
import time

import pytest

from datetime import datetime

from arena_cluster.rundir import RunDir
from stack import (SANDBOX_ORG, Node, call, env, events_of, jobs_of, live_sandboxes, run_events, run_of,
                   sandbox_switches, sandboxes_by_purpose, submit, token, wait)

STEPS = 3
# The stand-in's start delay (a sandbox's server starts this long after its job), and the
# trainer's start allowance: a sandbox here also takes its server's own start, up to a minute or
# more for ten at once on this machine's two loaded cores. The one that never serves is replaced
# when the allowance runs out.
START_S = 4.0
ALLOWANCE_S = 90
# The demo benchmark's held-out tasks (dev/local-challenge/benchmarks/local-bench.toml), one trial each.
HELD_OUT = ["reply-hello", "reply-done", "reply-echo", "count-1", "count-2", "count-3"]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("node"), STEPS, {"ARENA_SANDBOX_START_S": str(ALLOWANCE_S)})
    n.start()
    n.connected(env("ARENA_TEST_URL"))
    yield n
    n.stop()


def test_a_submission_trains_for_real_resumes_after_a_crash_and_completes(node):
    arena, hub = env("ARENA_TEST_URL"), env("ARENA_TEST_HUB_URL")
    assert sandbox_switches(hub, start_s=START_S, never_serve=0) == {"start_s": START_S, "never_serve": 0}
    try:
        admitted = wait("admission", submit(arena, "victor", f"real-train-{int(time.time())}"), 300)
        run_id = admitted["run"]["run_id"]

        def first_update():
            return next((e for e in run_events(node.home, run_id) if e["state"] == "updating" and e.get("metrics")),
                        None)

        deadline = time.time() + 900
        while (update := first_update()) is None:
            assert time.time() < deadline, "the first optimizer step: not within 900 s"
            time.sleep(0.2)
        # Before step 1's update was reported, step 2 had its sandboxes (started while step 1
        # played; step 3's start as step 1's episodes end): without the pool a step's five
        # started only once the update before it was over. Read from HF's creation times and the
        # event's time (both to the second, so a sandbox created in the update's second is not
        # counted), not sampled while the run goes: a loaded machine samples slowly.
        created = sorted(at(j["createdAt"]) for j in jobs_of(hub, run_id, SANDBOX_ORG)
                         if (j.get("labels") or {}).get("arena-purpose") == "openenv-train")
        before_update = sum(1 for t in created if t < at(update["at"]))
        assert before_update >= 2 * 5, (before_update, update["at"], created)
        wait("the arena's record of it", lambda: run_of(arena, "victor", run_id)["policy_version"] >= 1, 120)
        node.crash(run_id)
        # The next sandbox created (the restarted trainer's first) never serves.
        sandbox_switches(hub, never_serve=1)
        node.start()
        node.connected(arena)
        run = wait("the run's end", lambda: (r := run_of(arena, "victor", run_id))["state"] in
                   ("completed", "failed", "cancelled") and r, 1500)
    finally:
        sandbox_switches(hub, start_s=0, never_serve=0)
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
    # The sandbox that never served was replaced within its step, which still trained.
    sent = run_events(node.home, run_id)
    retried = [e for e in sent if e.get("alert") == "episode_retried"]
    assert retried and "within its start allowance" in retried[0]["message"], retried
    assert any(e["metrics"]["episodes/group_retries"] >= 1 for e in trained), [e["metrics"] for e in trained]
    assert all(e["metrics"]["episodes/sandbox_wait_s"] >= 0 for e in trained), [e["metrics"] for e in trained]
    assert all(len(e["ends"]["scores"]) == 5 for e in trained), [e["ends"] for e in trained]
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
    # What the model saw (the first episode of each step and of each held-out phase, kept on the
    # node): openenv-core 0.3's observations, no `metadata` in any user turn (the other releases'
    # environments: tests/test_openenv_releases.py).
    lines = (node.home / "done" / run_id / "conversations.jsonl").read_text().splitlines()
    conversations = [json.loads(line) for line in lines]
    purposes = [c["purpose"] for c in conversations]
    assert purposes[0] == "eval-before" and purposes[-1] == "eval-after" and "train" in purposes, purposes
    users = [m["content"] for c in conversations for m in c["messages"] if m["role"] == "user"]
    assert users and not [u for u in users if '"metadata"' in u], users
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


def at(rfc3339):
    """An RFC 3339 time (`2026-12-02T01:55:00Z`), as seconds since the epoch."""
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def phase_seconds(events):
    """Each held-out phase's wall time: from the last event before its first `evaluating` event to
    its last one (the cluster's own timestamps)."""
    out = {}
    for phase in ("before", "after"):
        idx = [i for i, e in enumerate(events) if (e.get("evaluation") or {}).get("phase") == phase]
        if idx:
            out[phase] = round(at(events[idx[-1]]["at"]) - at(events[max(idx[0] - 1, 0)]["at"]), 1)
    return out


def test_two_agents_are_two_nodes_of_one_arena(tmp_path):
    """Two real agents against one arena (issue 70): each is a node of its own, named by its home
    folder (no --node-id), with its GPUs, and the organizers' capacity view lists both."""
    # One sandbox each, fewer than a run's step needs: the arena assigns them no run, so that no
    # other test's submission trains on an agent this test stops.
    agents = [Node(tmp_path / name, steps=1, settings={"ARENA_AGENT_SANDBOXES": "1"})
              for name in ("gpu-node-a", "gpu-node-b")]
    try:
        for a in agents:
            a.home.mkdir()
            a.start()
            a.connected(env("ARENA_TEST_URL"))

        def both():
            status, view = call("GET", env("ARENA_TEST_URL") + "/api/openenv/capacity", token("eve"))
            assert status == 200, view
            nodes = {n["node_id"]: n for n in view["nodes"]}
            ours = [nodes.get(name) for name in ("gpu-node-a", "gpu-node-b")]
            return all(n and n["connected"] and n["gpus"] == 1 for n in ours) and view

        view = wait("both nodes in the capacity view", both, 60)
        status, public = call("GET", env("ARENA_TEST_URL") + "/api/openenv", token("alice"))
        assert status == 200 and public["cluster"]["nodes_connected"] >= 2, public
        status, refused = call("GET", env("ARENA_TEST_URL") + "/api/openenv/capacity", token("alice"))
        assert (status, refused["code"]) == (403, "FORBIDDEN"), view
    finally:
        for a in agents:
            a.stop()
