"""The trainer's loop through TRL's own hooks, on the tiny CPU model with the demo echo
environment in this process (no sandboxes, no arena): the training stops through a callback when
the next step does not fit, every trained step is reported with its metrics whatever `save_steps`
is, and the step the rollout cannot fill any more changes nothing."""

import os
import tempfile
import time
from types import SimpleNamespace

import pytest

# Trackio reads its folder when it is imported: a folder of this module's own.
os.environ.setdefault("TRACKIO_DIR", tempfile.mkdtemp(prefix="trackio-tests-"))

from arena_cluster.episodes import episode  # noqa: E402
from arena_cluster.rundir import RunDir  # noqa: E402
from arena_cluster.settings import Settings  # noqa: E402
from arena_cluster.trainer import TRACKIO_PROJECT, Run  # noqa: E402
from echo import ACTION_SCHEMA, TASK, Echo  # noqa: E402

SETTINGS = {"HF_TOKEN": "hf_bot", "ARENA_SANDBOX_TOKEN": "hf_reader", "ARENA_SANDBOX_NAMESPACE": "sandboxes",
            "ARENA_EVAL_TOKEN": "hf_eval_reader", "ARENA_EVAL_NAMESPACE": "held-out", "ARENA_TRAINER_MODEL": "tiny"}
# What a step takes on the fake clock (`FakeRun.elapsed_s`); a step's allowance is 80 s of walls
# plus the measured update (a second or two).
STEP_S = 1000


def assignment(run_id, limit_s):
    tasks = [dict(TASK, task_id="echo-1", task_label="t-1"), dict(TASK, task_id="echo-2", task_label="t-2")]
    return {"run_id": run_id, "time_limit_s": limit_s, "model": {"repo": "Qwen/Qwen3.5-9B", "revision": "abcdef0"},
            "recipe": {"learning_rate": 0.01, "lora_r": 4, "lora_alpha": 8, "max_steps": 10},
            "submission": {"schema": {"action": ACTION_SCHEMA}, "schema_draft": "draft2020-12", "tasks": tasks,
                           "finish_action": {"message": "finish"}}}


class FakeRun(Run):
    """The trainer as it runs, with the demo echo environment in this process in place of
    sandboxes, a clock on which each step played takes STEP_S, and TRL settings a test changes.
    Records each optimizer step's loss and, at each report, whether the step's checkpoint was
    already written and the adapter's weights and optimizer moments."""

    def __init__(self, path, limit_s, overrides=None, scores=None):
        rd = RunDir(path)
        rd.write_assignment(assignment(path.name, limit_s))
        super().__init__(rd, Settings.read(SETTINGS))
        self.overrides = overrides or {}
        self.scores = scores or {}  # step played (1-based) -> the score of each of its episodes
        self.losses, self.reported = [], []
        self.on_dashboard = []  # at each report, the steps Trackio has stored

    def elapsed_s(self):
        return STEP_S * self.progress.step_index

    def make_places(self):
        nothing = SimpleNamespace(namespace="none", running=lambda: [])
        return nothing, nothing

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

    def play_episode(self, task):
        with self.policy.live():
            p = episode(self.policy, Echo(), task, self.a.actions)
        if self.progress.step_index + 1 in self.scores:
            p.score = self.scores[self.progress.step_index + 1]
        p.ended_at = time.monotonic()
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

    def play_episode(self, task):
        if self.progress.step_index + 1 == self.crash_at:
            raise Killed()
        return super().play_episode(task)


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
