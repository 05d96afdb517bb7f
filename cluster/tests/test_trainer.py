"""The trainer's loop through TRL's own hooks, on the tiny CPU model with the demo echo
environment in this process (sandboxes that serve it at once, no arena): the training stops
through a callback when the next step does not fit, every trained step is reported with its
metrics whatever `save_steps` is, and the step the rollout cannot fill any more changes nothing.
The next step's sandboxes start before the step's update, a lost sandbox is replaced within its
step, and a run whose steps train nothing ends early and says how its episodes ended."""

import os
import tempfile
from types import SimpleNamespace

import pytest

# Trackio reads its folder when it is imported: a folder of this module's own.
os.environ.setdefault("TRACKIO_DIR", tempfile.mkdtemp(prefix="trackio-tests-"))

from arena_cluster import contract  # noqa: E402
from arena_cluster.rundir import RunDir  # noqa: E402
from arena_cluster.sandboxes import SandboxError  # noqa: E402
from arena_cluster.settings import Settings  # noqa: E402
from arena_cluster.trainer import TRACKIO_PROJECT, Run  # noqa: E402
from echo import ACTION_SCHEMA, TASK, Echo  # noqa: E402

SETTINGS = {"HF_TOKEN": "hf_bot", "ARENA_SANDBOX_TOKEN": "hf_reader", "ARENA_SANDBOX_NAMESPACE": "sandboxes",
            "ARENA_EVAL_TOKEN": "hf_eval_reader", "ARENA_EVAL_NAMESPACE": "held-out", "ARENA_TRAINER_MODEL": "tiny"}
# What a step takes on the fake clock (`FakeRun.elapsed_s`); a step's allowance is 80 s of walls
# plus the measured update (a second or two).
STEP_S = 1000


def assignment(run_id, limit_s):
    tasks = [dict(TASK, task_id="echo-1", task_label="t-1", port=8000),
             dict(TASK, task_id="echo-2", task_label="t-2", port=8000)]
    return {"run_id": run_id, "time_limit_s": limit_s, "model": {"repo": "Qwen/Qwen3.5-9B", "revision": "abcdef0"},
            "recipe": {"learning_rate": 0.01, "lora_r": 4, "lora_alpha": 8, "max_steps": 10},
            "submission": {"schema": {"action": ACTION_SCHEMA}, "schema_draft": "draft2020-12", "tasks": tasks,
                           "finish_action": {"message": "finish"}}}


class Instant:
    """A place whose sandboxes serve the echo environment in this process at once; `lost` (each
    start, 1-based) never serve. Records each start with the trainer's step and version then."""

    namespace, reader = "none", "none"

    def __init__(self, run, lost=()):
        self.run, self.lost = run, set(lost)
        self.started, self.canceled = [], []

    def start(self, task, timeout_s, purpose):
        self.started.append((task["task_label"], self.run.progress.step_index, self.run.version))
        return SimpleNamespace(id=f"job-{len(self.started)}")

    def wait_serving(self, job_id, port, deadline):
        if int(job_id.split("-")[1]) in self.lost:
            raise SandboxError("the image never answered GET /health within its start allowance")
        return "http://in-process"

    def connect(self, url, timeout_s):
        return Echo()

    def cancel(self, job_id):
        self.canceled.append(job_id)

    def running(self):
        return []


class FakeRun(Run):
    """The trainer as it runs, with the demo echo environment in this process in place of
    sandboxes, a clock on which each step played takes STEP_S, and TRL settings a test changes.
    Records each optimizer step's loss and, at each report, whether the step's checkpoint was
    already written and the adapter's weights and optimizer moments."""

    def __init__(self, path, limit_s, overrides=None, scores=None, lost=(), env=None):
        rd = RunDir(path)
        rd.write_assignment(assignment(path.name, limit_s))
        super().__init__(rd, Settings.read(dict(SETTINGS, **(env or {}))))
        self.overrides = overrides or {}
        self.scores = scores or {}  # step played (1-based) -> the score of each of its episodes
        self.lost = lost
        self.losses, self.reported = [], []
        self.on_dashboard = []  # at each report, the steps Trackio has stored

    def elapsed_s(self):
        return STEP_S * self.progress.step_index

    def make_places(self):
        self.place = Instant(self, self.lost)
        return self.place, self.place

    def trainer_arguments(self, cap, device):
        grpo, lora = super().trainer_arguments(cap, device)
        grpo.update(self.overrides)
        return grpo, lora

    def evaluate(self, phase):
        if phase == "before":  # the trainer exists: its loss is followed from here
            step = self.trainer.training_step

            def spy(*args, **kwargs):
                loss = step(*args, **kwargs)
                self.losses.append(float(loss))
                return loss

            self.trainer.training_step = spy
        super().evaluate(phase)

    def play_episode(self, task, lease, n=0):
        p = super().play_episode(task, lease, n)
        if self.progress.step_index + 1 in self.scores:
            p.score = self.scores[self.progress.step_index + 1]
        return p

    def report(self, global_step, logs):
        saved = (self.rd.checkpoints / f"checkpoint-{global_step}").exists()
        super().report(global_step, logs)
        self.reported.append((global_step, saved, self.snapshot()))
        self.on_dashboard.append(stored_steps(self, "loss"))

    def snapshot(self):
        model, optimizer = self.trainer.model, self.trainer.optimizer
        weights = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
        moments = [s["exp_avg"].clone() for s in optimizer.state.values()]
        return weights, moments


def trackio_finished(run):
    import trackio
    from transformers.integrations import TrackioCallback

    callback = next(c for c in run.trainer.callback_handler.callbacks if isinstance(c, TrackioCallback))
    return not callback._initialized and trackio.context_vars.current_run.get() is None


def stored(run, name):
    from trackio.sqlite_storage import SQLiteStorage

    return [v["value"] for v in SQLiteStorage.get_metric_values(TRACKIO_PROJECT, run.rd.run_id, "train/" + name)]


def stored_steps(run, name):
    from trackio.sqlite_storage import SQLiteStorage

    return [v["step"] for v in SQLiteStorage.get_metric_values(TRACKIO_PROJECT, run.rd.run_id, "train/" + name)]


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory):
    """Steps at 0, 1000 and 2000 s fit in 2,500 s; the fourth would not. Checkpoints every two
    steps."""
    run = FakeRun(tmp_path_factory.mktemp("runs") / "oe-three", 2_500, overrides={"save_steps": 2})
    run.main()
    return run


def test_the_training_stops_through_a_callback_when_the_next_step_does_not_fit(three_steps):
    run = three_steps
    events = run.rd.events()
    assert [e["state"] for e in events][-2:] == ["cleanup", "completed"], events
    assert events[-1]["message"].startswith("3 optimizer steps taken in 3 steps played"), events[-1]
    assert run.trainer.state.global_step == 3 and run.version == run.progress.policy_version == 3
    assert trackio_finished(run), "TRL's loop ended through on_train_end: the Trackio run is finished"
    assert len(stored(run, "loss")) == 3


def test_every_trained_step_is_reported_with_its_metrics_whatever_save_steps_is(three_steps):
    run = three_steps
    assert [(step, saved) for step, saved, _ in run.reported] == [(1, False), (2, True), (3, False)], \
        "a step that saves is reported once its checkpoint is written; the others at their log"
    assert sorted(p.name for p in run.rd.checkpoints.glob("checkpoint-*")) == ["checkpoint-2"]
    updating = [e for e in run.rd.events() if e["state"] == "updating"]
    assert [e["policy_version"] for e in updating] == [1, 2, 3]
    assert [e["task_id"] for e in updating] == ["echo-1", "echo-2", "echo-1"]
    for e in updating:
        m = e["metrics"]
        assert {"loss", "grad_norm", "reward", "reward_std", "completions/mean_length", "episodes/step_s",
                "lora_b_norm"} <= set(m), m
        assert abs(m["reward"] - sum(e["rewards"]) / 4) < 1e-6, e
    assert stored(run, "reward") == pytest.approx([e["metrics"]["reward"] for e in updating])
    # A reported step is on the dashboard already: a trainer killed right after its report loses
    # nothing the arena shows (Trackio's own sender writes only every 0.5 s).
    assert run.on_dashboard == [[1], [1, 2], [1, 2, 3]], run.on_dashboard
    rolling = [e for e in run.rd.events() if e["state"] == "rolling"]
    assert [e["task_id"] for e in rolling] == ["echo-1", "echo-2", "echo-1"], rolling


def test_the_first_episode_of_each_step_is_kept_as_the_model_saw_it(three_steps):
    """`conversations.jsonl`: one episode a step (not every episode), its system and user turns
    as the model saw them."""
    kept = three_steps.rd.conversations()
    assert [(c["purpose"], c["step"], c["task_label"]) for c in kept] == [
        ("train", 1, "t-1"), ("train", 2, "t-2"), ("train", 3, "t-1")], kept
    for c in kept:
        assert [m["role"] for m in c["messages"][:3]] == ["system", "user", "assistant"], c
        assert c["messages"][1]["content"].startswith('{"echoed_message":"Arena Echo environment ready!"'), c


def test_the_step_no_attempt_fits_in_any_more_changes_nothing(tmp_path):
    """Step 1 trains; step 2 gives no valid reward (it trains nothing, the guide says) and leaves
    too little time for another: the rollout hands TRL a group that trains nothing, whose optimizer
    step changes no weight and no optimizer moment, is neither logged nor saved, and ends the
    training through the callback."""
    run = FakeRun(tmp_path / "oe-idle", 2_050, scores={2: None})
    run.main()
    events = run.rd.events()
    updating = [e for e in events if e["state"] == "updating"]
    assert [(e["policy_version"], e.get("alert")) for e in updating] == [(1, None), (1, "no_update")], updating
    assert events[-1]["message"].startswith("1 optimizer steps taken in 2 steps played"), events[-1]
    assert run.trainer.state.global_step == 2 and run.progress.policy_version == 1
    assert len(run.losses) == 2 and run.losses[1] == 0.0, run.losses
    (_, _, (weights, moments)), (now_weights, now_moments) = run.reported[0], run.snapshot()
    assert all((weights[n] == now_weights[n]).all() for n in weights), "the idle step moved a weight"
    assert all((a == b).all() for a, b in zip(moments, now_moments)), "the idle step moved an optimizer moment"
    assert sorted(p.name for p in run.rd.checkpoints.glob("checkpoint-*")) == ["checkpoint-1"]
    assert len(stored(run, "reward")) == 1, "the idle step shows nothing on the dashboard"
    assert trackio_finished(run)


class Killed(Exception):
    """What a node's restart does to a trainer mid-step."""


class CrashingRun(FakeRun):
    def __init__(self, path, limit_s, crash_at, **kw):
        super().__init__(path, limit_s, **kw)
        self.crash_at = crash_at

    def play_episode(self, task, lease, n=0):
        if self.progress.step_index + 1 == self.crash_at:
            raise Killed()
        return super().play_episode(task, lease, n)


def test_a_restarted_trainer_trains_again_what_its_checkpoint_does_not_hold(tmp_path):
    """With a checkpoint every two steps, step 3 is reported at its log; the trainer is killed in
    step 4 and started again: it resumes from checkpoint 2, says so, and trains step 3 again."""
    path = tmp_path / "oe-restart"
    with pytest.raises(Killed):
        CrashingRun(path, 4_500, crash_at=4, overrides={"save_steps": 2}).main()
    run = FakeRun(path, 4_500, overrides={"save_steps": 2})
    run.main()
    events = run.rd.events()
    resumed = [e for e in events if e.get("alert") == "resumed"]
    assert [e["message"] for e in resumed] == [
        "the trainer resumes from its checkpoint after optimizer step 2; optimizer steps 3 to 3 are trained again"]
    assert resumed[0]["policy_version"] == 2
    assert [e["policy_version"] for e in events if e["state"] == "updating"] == [1, 2, 3, 3, 4]
    assert events[-1]["message"].startswith("4 optimizer steps taken in 5 steps played"), events[-1]


class KilledBeforeReport(FakeRun):
    """Killed once optimizer step `kill_at`'s checkpoint is written, before its report (the
    report waits for `on_save`)."""

    def __init__(self, path, limit_s, kill_at, **kw):
        super().__init__(path, limit_s, **kw)
        self.kill_at = kill_at

    def report(self, global_step, logs):
        if global_step == self.kill_at:
            raise Killed()
        super().report(global_step, logs)


def test_a_trainer_killed_between_a_checkpoint_and_its_report_reports_that_step_when_restarted(tmp_path):
    """A checkpoint every step: the trainer is killed after checkpoint 2 is written and before
    step 2 is reported. Started again, it reports step 2 (its staged report) and resumes from
    checkpoint 2 without playing or training step 2 a second time."""
    path = tmp_path / "oe-killed-at-save"
    with pytest.raises(Killed):
        KilledBeforeReport(path, 2_500, kill_at=2).main()
    assert (path / "checkpoints" / "checkpoint-2").is_dir() and RunDir(path).staged_report()
    assert [e["policy_version"] for e in RunDir(path).events() if e["state"] == "updating"] == [1]
    run = FakeRun(path, 2_500)
    run.main()
    events = run.rd.events()
    updating = [e for e in events if e["state"] == "updating"]
    assert [e["policy_version"] for e in updating] == [1, 2, 3], updating
    assert updating[1]["message"].startswith("step 2 of `echo-2`") and updating[1]["metrics"]["loss"] is not None
    resumed = [e["message"] for e in events if e.get("alert") == "resumed"]
    assert resumed == ["the trainer resumes from its checkpoint after optimizer step 2"], resumed
    assert [e["message"] for e in events if e["state"] == "rolling" and not e.get("alert")] == [
        "step 1: five episodes of `echo-1`", "step 2: five episodes of `echo-2`", "step 3: five episodes of `echo-1`"]
    assert events[-1]["message"].startswith("3 optimizer steps taken in 3 steps played"), events[-1]
    assert run.rd.staged_report() is None


def test_the_next_steps_sandboxes_start_before_the_update_and_every_one_is_canceled(three_steps):
    """Prefetching (the default): step 2's sandboxes are started while step 1 plays, step 3's as
    step 1's episodes end, before its update; the fourth step's as step 2's end (it then does not
    fit: they are never played). Every sandbox started is canceled."""
    run = three_steps
    started = run.place.started
    assert [(label, step, version) for label, step, version in started] == (
        [("t-1", 0, 0)] * 5 + [("t-2", 0, 0)] * 5 + [("t-1", 1, 0)] * 5 + [("t-2", 2, 1)] * 5), \
        "each step's sandboxes start before the update of the step two before it"
    assert sorted(run.place.canceled) == sorted(f"job-{i}" for i in range(1, 21))
    waits = [e["metrics"]["episodes/sandbox_wait_s"] for e in run.rd.events() if e.get("metrics")]
    assert len(waits) == 3 and all(w < 5 for w in waits), waits


def test_without_prefetching_a_step_starts_its_sandboxes_when_it_starts(tmp_path):
    run = FakeRun(tmp_path / "oe-no-prefetch", 2_500, env={"ARENA_TRAINER_PREFETCH": "0"})
    run.main()
    assert [(step, version) for _, step, version in run.place.started] == \
        [(0, 0)] * 5 + [(1, 1)] * 5 + [(2, 2)] * 5
    assert run.rd.events()[-1]["state"] == "completed"


def test_a_lost_sandbox_is_replaced_within_its_step_and_counted(tmp_path):
    """The second sandbox started never serves: its episode is played in a replacement at once,
    the step trains with `episodes/group_retries` 1, and the event says the sandbox was lost."""
    run = FakeRun(tmp_path / "oe-lost", 1_500, lost=[2])
    run.main()
    events = run.rd.events()
    retried = [e for e in events if e.get("alert") == "episode_retried"]
    assert len(retried) == 1 and "never answered GET /health" in retried[0]["message"], retried
    updating = [e for e in events if e["state"] == "updating"]
    assert updating[0]["metrics"]["episodes/group_retries"] == 1 and len(updating[0]["rewards"]) == 4
    ends = updating[0]["ends"]
    assert sum(ends[k] for k in contract.END_KEYS) == 5 and ends["sandbox"] == 0, ends
    assert [s for s in ends["scores"] if s is not None][:4] == updating[0]["rewards"], ends
    assert "job-2" in run.place.canceled, "the lost sandbox is canceled"
    assert events[-1]["state"] == "completed", events[-1]


def test_a_run_whose_steps_train_nothing_ends_early_and_says_how_its_episodes_ended(tmp_path):
    """Five steps in a row without four valid rewards: the run fails RUN_NO_TRAINING_SIGNAL with
    the ends of those 25 episodes, plays no held-out phase after and takes no step more."""
    run = FakeRun(tmp_path / "oe-no-signal", 20_000, scores={k: None for k in range(1, 11)})
    run.main()
    events = run.rd.events()
    assert run.progress.step_index == contract.NO_UPDATE_STEPS and run.version == 0
    untrained = [e for e in events if e["state"] == "updating"]
    assert [e["alert"] for e in untrained] == ["no_update"] * 5
    assert all(set(e["ends"]) == {*contract.END_KEYS, "scores", "replies"} for e in untrained)
    assert all(sum(e["ends"][k] for k in contract.END_KEYS) == 5 and e["ends"]["scores"] == [None] * 5
               for e in untrained), untrained
    last = events[-1]
    assert [e["state"] for e in events[-2:]] == ["cleanup", "failed"], events[-3:]
    assert last["message"].startswith("RUN_NO_TRAINING_SIGNAL: 5 steps in a row trained nothing: of their 25 "
                                      "episodes, "), last
    assert {k: last["ends"][k] for k in contract.END_KEYS} == \
        {k: sum(e["ends"][k] for e in untrained) for k in contract.END_KEYS}, last
    # The model's own invalid replies, up to three, quoted as they were (cut).
    invalid = sum(e["ends"]["invalid_reply"] for e in untrained)
    assert len(last["ends"]["replies"]) == min(invalid, 3), last
    assert all(len(r) <= 120 for r in last["ends"]["replies"]), last
    assert last["ends"]["no_reward"] + last["ends"]["invalid_reply"] + last["ends"]["budget"] == 25, last
    assert not [e for e in events if e["state"] == "evaluating"]
    assert run.progress.trained == [False] * 5


def test_a_run_whose_rewards_never_differ_ends_early_without_signal(tmp_path):
    """Every episode ends with reward 0 (an environment whose reward never depends on the action):
    each step takes an optimizer step that moves nothing, so none has a training signal, and the
    run fails RUN_NO_TRAINING_SIGNAL after five of them, without its held-out phase after."""
    run = FakeRun(tmp_path / "oe-constant", 20_000, scores={k: 0.0 for k in range(1, 21)})
    run.main()
    events = run.rd.events()
    assert run.progress.step_index == contract.NO_UPDATE_STEPS, run.progress
    assert run.progress.trained == [False] * 5, run.progress
    updating = [e for e in events if e["state"] == "updating"]
    assert len(updating) == 5 and all(e["rewards"] == [0.0] * 4 for e in updating), updating
    assert all("the four rewards are equal: no signal" in e["message"] for e in updating), updating
    last = events[-1]
    assert [e["state"] for e in events[-2:]] == ["cleanup", "failed"], events[-3:]
    assert last["message"].startswith("RUN_NO_TRAINING_SIGNAL: 5 steps in a row trained nothing: of their 25 "
                                      "episodes"), last
    assert sum(last["ends"][k] for k in contract.END_KEYS) == 25, last
    assert not [e for e in events if e["state"] == "evaluating"]


def test_steps_the_platform_spoiled_do_not_count_toward_the_training_signal(tmp_path):
    """Every sandbox is lost, each replacement too: no step trains, but none by the environment's
    doing (`contract.step_trained` is None), so the run is not ended after five of them: it plays
    every step that fits, then fails for its zero optimizer steps, its episodes counted `sandbox`."""
    run = FakeRun(tmp_path / "oe-platform", 7_500, lost=range(1, 1000))
    run.main()
    last = run.rd.events()[-1]
    assert run.progress.step_index > contract.NO_UPDATE_STEPS and run.progress.trained == [], run.progress
    assert last["state"] == "failed" and last["message"].startswith(
        f"RUN_NO_TRAINING_SIGNAL: {run.progress.step_index} step(s) played and no optimizer step taken"), last
    assert last["ends"]["sandbox"] == 5 * run.progress.step_index, last


def test_a_run_that_took_no_optimizer_step_never_completes(tmp_path):
    """Two steps fit, neither trains: the run fails RUN_NO_TRAINING_SIGNAL, not `completed`."""
    run = FakeRun(tmp_path / "oe-no-step", 1_500, scores={1: None, 2: None})
    run.main()
    last = run.rd.events()[-1]
    assert last["state"] == "failed" and last["message"].startswith(
        "RUN_NO_TRAINING_SIGNAL: 2 step(s) played and no optimizer step taken: of their 10 episodes"), last
    assert sum(last["ends"][k] for k in contract.END_KEYS) == 10
