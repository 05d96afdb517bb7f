"""The real agent and trainer admit and train the OpenEnv release participants build on besides the
demo echo on openenv-core 0.3.0 (which tests/test_end_to_end.py trains, its conversations checked
the same way): the demo's three openenv 0.10 environments (`ghcr.io/arena-demo/{echo-010,task-echo,
tools-echo}:v1`, their bodies in dev/demo/openenv/submission-*.json), against the arena and
stand-in `start_test_stack debug real` starts. Each is submitted by an account of its own, all at
once; the node has one CPU slot, so their runs train one after another (one optimizer step each,
the tiny model). What the model saw is read from each run's `conversations.jsonl` on the node (the first
episode of each step and of each held-out phase):

- no user turn ever shows `metadata` (0.10 sends it in every observation, beside it too);
- the task API environment plays the asked task: the reset observation of an episode of `echo-2`
  (its split `train`, index 1) names `echo-2`, not the split's task 0;
- the tools environment's system message lists its tools, `echo` and `finish`;
- a board game written as upstream's are (dev/demo/openenv/four_in_row: `{"column": c}` moves, no
  finishing action, a reset that ignores the task) is admitted with its RESET_IGNORES_TASK warning
  and trains on its own schema: the tiny model's moves end games with rewards, not invalid replies
  (issue 57's admitted shape, through a real-trainer step);
- two shapes of issue 68, played beside them by accounts of their own: Colour Wheel
  (dev/demo/openenv/colour_wheel: an enum action schema no demo uses, the reward the guess's
  closeness) is admitted and its run completes; Same Score (dev/demo/openenv/same_score: a reward
  of 0.5 whatever the action) is admitted with its REWARD_NEVER_VARIES warning and its step is
  shown without training signal."""

import json
import time

import pytest

from arena_cluster.rundir import RunDir
from stack import Node, demo_submission, env, run_of, submit, wait

STEPS = 1
TOOLS_INTRO = "\nTools, each called through the action schema: "
# Each environment: the account that submits it and its body.
RELEASES = {
    "echo-0.10": ("heidi", "submission-echo-010.json"),
    "task-echo": ("ivan", "submission-task-echo.json"),
    "tools-echo": ("judy", "submission-tools-echo.json"),
    "four-in-row": ("quinn", "four_in_row/submission.json"),
    "colour-wheel": ("walter", "colour_wheel/submission.json"),
}
# Played beside them: an environment whose reward never depends on the action.
UNTRAINABLE = {"same-score": ("sybil", "same_score/submission.json")}


def body(name, submission_id):
    b = demo_submission(submission_id, {**RELEASES, **UNTRAINABLE}[name][1])
    if name == "task-echo":
        # `echo-2` first, so that the one step plays it: the task API's index 1 in `train`, which
        # a reset that chose no task (or swallowed the task id) would never play.
        b["tasks"] = sorted(b["tasks"], key=lambda t: t["task_id"] != "echo-2")
        assert b["tasks"][0] == {"task_id": "echo-2", "split": "train"}, b["tasks"]
    return b


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Each environment's run once it ended: (run, the events the node sent, its node folder's
    assignment and conversations)."""
    arena = env("ARENA_TEST_URL")
    node = Node(tmp_path_factory.mktemp("node"), STEPS)
    node.start()
    try:
        node.connected(arena)
        stamp = int(time.time())
        admitted = {}
        played = {**RELEASES, **UNTRAINABLE}
        for name, (user, _) in played.items():
            submission_id = f"release-{name.replace('.', '')}-{stamp}"
            admitted[name] = submit(arena, user, submission_id, body(name, submission_id))
        runs, answers = {}, {}

        def all_ended():
            for name, check in admitted.items():
                if name not in runs and (a := check()):
                    runs[name], answers[name] = a["run"]["run_id"], a
            return len(runs) == len(played) and all(
                run_of(arena, played[n][0], r)["state"] in ("completed", "failed", "cancelled")
                for n, r in runs.items())

        # Admission of all four, then four runs in turn on the node's one CPU slot: each loads the
        # tiny model, plays the held-out phase before (six episodes), one step (five) and the phase
        # after (six), each episode in a fresh sandbox.
        wait("every run's end", all_ended, 3000)
        out = {}
        for name, run_id in runs.items():
            user = played[name][0]
            # The agent moves the run's folder aside once the arena has every event.
            folder = wait("the run's folder", lambda: (p := node.home / "done" / run_id).is_dir() and p, 120)
            assignment = json.loads((folder / "assignment.json").read_text())
            lines = (folder / "conversations.jsonl").read_text().splitlines()
            out[name] = (run_of(arena, user, run_id), RunDir(folder).events(), assignment,
                         [json.loads(line) for line in lines], answers[name])
        return out
    finally:
        node.stop()


@pytest.mark.parametrize("name", list(RELEASES))
def test_each_release_is_admitted_and_trains_with_an_evaluation_before_and_after(trained, name):
    run, events, _, conversations, _ = trained[name]
    assert run["state"] == "completed" and run["policy_version"] >= 1, (run, events)
    e = run["evaluation"]
    assert e["state"] == "complete" and e["before"] and e["after"], e
    purposes = [c["purpose"] for c in conversations]
    assert purposes[0] == "eval-before" and purposes[-1] == "eval-after" and "train" in purposes, purposes
    assert len(conversations) <= 2 + len([ev for ev in events if ev["state"] == "rolling" and not ev.get("alert")]), \
        "one conversation a step and a phase, not every episode"


@pytest.mark.parametrize("name", list(RELEASES))
def test_no_user_turn_shows_metadata(trained, name):
    """openenv 0.10 puts `metadata` in every observation (`{}` at reset, `{"step": n}` after a step,
    the task spec and its answer in the task API's reset): the reset observation of every kept
    conversation had it."""
    _, _, _, conversations, _ = trained[name]
    users = [m["content"] for c in conversations for m in c["messages"] if m["role"] == "user"]
    assert users and not [u for u in users if '"metadata"' in u or "task_spec" in u], users


def test_the_task_api_environment_plays_the_asked_task(trained):
    _, _, assignment, conversations, _ = trained["task-echo"]
    labels = {t["task_label"]: t for t in assignment["submission"]["tasks"]}
    echo_2 = [c for c in conversations if c["purpose"] == "train" and labels[c["task_label"]]["task_id"] == "echo-2"]
    assert labels and echo_2, conversations
    assert labels[echo_2[0]["task_label"]]["reset"] == {"split": "train", "index": 1}, labels
    for c in echo_2:
        reset_observation = json.loads(c["messages"][1]["content"])
        assert reset_observation["task_id"] == "echo-2" and reset_observation["prompt"] == "say bye", c
        assert '"task_id":"echo-2"' in c["messages"][1]["content"]


def test_the_tools_environment_is_told_its_tools(trained):
    _, _, assignment, conversations, _ = trained["tools-echo"]
    assert [t["name"] for t in assignment["submission"]["tasks"][0]["tools"]] == ["echo", "finish"], assignment
    steps = [c for c in conversations if c["purpose"] == "train"]
    assert steps, conversations
    for c in steps:
        system = c["messages"][0]
        assert system["role"] == "system" and TOOLS_INTRO in system["content"], system
        tools = json.loads(system["content"].split(TOOLS_INTRO, 1)[1])
        assert [t["name"] for t in tools] == ["echo", "finish"], tools
        assert all(set(t) == {"name", "description", "input_schema"} for t in tools), tools
    # The held-out environments are no tools environments: their system messages list none.
    held_out = [c for c in conversations if c["purpose"] != "train"]
    assert held_out and not [c for c in held_out if c["messages"] and TOOLS_INTRO in c["messages"][0]["content"]], \
        held_out


def test_the_board_game_is_admitted_with_its_warning_and_trains_on_its_own_moves(trained):
    run, events, _, conversations, answer = trained["four-in-row"]
    warned = sorted((w["task_id"], w["code"]) for w in answer["report"].get("warnings") or [] if w.get("task_id"))
    assert warned == [("game-1", "RESET_IGNORES_TASK"), ("game-2", "RESET_IGNORES_TASK")], answer["report"]
    steps = [c for c in conversations if c["purpose"] == "train"]
    assert steps, conversations
    for c in steps:
        assert '"column"' in c["messages"][0]["content"] and '"message"' not in c["messages"][0]["content"], c
        assert json.loads(c["messages"][1]["content"])["legal_actions"] == list(range(7)), c
    replies = [m["content"] for c in steps for m in c["messages"] if m["role"] == "assistant"]
    assert any('"column"' in r for r in replies), replies
    # The step that trained: at least four of its five games ended with a reward (a win, a full
    # board or an illegal column). Steps before it may have trained nothing (a game ends at the
    # first reply that is no move): each says so, with its rewards.
    trained = [e for e in events if e["state"] == "updating" and e.get("metrics")]
    assert trained and run["policy_version"] >= 1, events
    assert trained[0]["ends"]["done"] >= 4 and len(trained[0]["rewards"]) == 4, trained[0]
    for e in events:
        if e["state"] == "updating" and not e.get("metrics"):
            assert e["alert"] == "no_update" and len(e["ends"]["scores"]) == 5, e



def test_a_reward_that_never_depends_on_the_action_is_warned_and_its_steps_have_no_signal(trained):
    """Same Score's reward is 0.5 whatever the word: admission warns REWARD_NEVER_VARIES, and its
    step, four equal rewards, is said and shown to have no training signal (its update moved
    nothing), as five such steps in a row would end the run (`test_trainer.py`)."""
    run, events, _, _, answer = trained["same-score"]
    warned = [w["code"] for w in answer["report"].get("warnings") or []]
    assert "REWARD_NEVER_VARIES" in warned, answer["report"]
    steps = [e for e in events if e["state"] == "updating" and e.get("metrics")]
    assert steps and all(e["rewards"] == [0.5] * 4 for e in steps), steps
    assert all("the four rewards are equal: no signal" in e["message"] for e in steps), steps
    assert run["steps"] and not any(s["signal"] for s in run["steps"]), run["steps"]
