"""The arena's OpenEnv trainer: one process per run, on one GPU (or, for tests and the local demo,
one CPU slot with a tiny model), started by the node's agent (`arena_cluster.agent`) with the run's
folder (`arena_cluster.rundir`). TRL's `GRPOTrainer` with a `rollout_func` that plays the guide's
episodes: each optimizer step takes the next train task in turn, plays five episodes of it at once
in five fresh sandboxes (their turns generated together: `generation`), and trains on the first
four that end with a valid reward (fewer: the step trains nothing, and its event says why). Each
episode's sandbox comes from the run's pool (`pool`), asked for ahead: with prefetching on, the
next step's sandboxes start while a step plays, and the one after's while its group trains
(`Run.ask_ahead`); a sandbox the platform lost is replaced once (`episodes.play_in`). A run whose
last `contract.NO_UPDATE_STEPS` steps trained nothing, or that ends without one optimizer step,
fails `RUN_NO_TRAINING_SIGNAL`, its episodes' ends counted, without its held-out phase after.

The time left. The run's 14,400 s count from this process's first start. A step is played only
when it fits in the time left (`Run.next_fits`), and the training stops through TRL's own
callback flag when the next one would not (`Report`). What a step needs is the contract's rule,
shared with the arena (`contract.step_fits`: the task's walls plus the update, the mean measured
update time or 300 s before the first), plus what the trainer measured beyond it (`Run.extra_s`):
the time its episodes waited for their sandboxes (the walls count from when a sandbox serves) and
the episodes' own time past the walls, each the mean over the last steps measured.

The conversation of the first episode of each step and of each held-out phase is kept in the
run's `conversations.jsonl` for whoever debugs the node (`RunDir.write_conversation`); it is never
sent to the arena.

    python -m arena_cluster.trainer RUN_DIR

Environment: `HF_TOKEN` (may start jobs in the sandbox and eval namespaces; never sent to a
sandbox), `ARENA_SANDBOX_TOKEN` and `ARENA_SANDBOX_NAMESPACE` (training sandboxes: the reader is
the only credential they receive), `ARENA_EVAL_TOKEN` and `ARENA_EVAL_NAMESPACE` (held-out
sandboxes, apart), `HF_ENDPOINT` (HF's, or the stand-in's), `ARENA_TRAINER_MODEL` (a local folder
holding the model the assignment names; `tiny` builds and uses the tiny CPU model),
`ARENA_TRAINER_MAX_STEPS` (optional: stop after this many optimizer steps),
`ARENA_TRAINER_PREFETCH` (`0`: start each step's sandboxes when it starts, as before the pool),
`ARENA_SANDBOX_START_S` (how long a sandbox may take to serve, 120 s), `TRACKIO_DIR`,
`TRACKIO_SPACE_ID` (optional). Generation is transformers' (TRL's `use_vllm=False`).
Exit 0 when the run ended (its last event says how); non-zero with `failure.txt` otherwise.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import signal
import statistics
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback

from . import contract
from .episodes import Played, Policy, Template, play_in
from .evaluation import Evaluation
from .pool import AHEAD_STEPS, Lease, Pool, run_allowance
from .rundir import RunDir
from .runstate import Assignment, Failure, Progress
from .sandboxes import TRAIN_PURPOSE, cancel_all, run_sandboxes
from .settings import SettingError, Settings

TRACKIO_PROJECT = "arena-openenv"
# The update time assumed before the first one is measured (the simulated trainer's too).
FIRST_UPDATE_S = 300
# Metrics the `updating` event carries, under the names TRL logs them (and Trackio stores as
# `train/…`): the domain's `StepMetrics` table (tests/fixtures/metric-names.json), less
# `lora_b_norm`, which the trainer measures itself.
METRICS = ["reward", "reward_std", "loss", "grad_norm", "completions/mean_length", "episodes/step_s",
           "episodes/invalid_replies", "episodes/budget_ends", "episodes/timeouts", "episodes/group_retries",
           "episodes/sandbox_wait_s"]
# How many of the last steps' measured times the estimates average.
MEASURED_STEPS = 8


def recipe_arguments(recipe: dict, max_steps: int, trackio_space_id: str | None = None):
    """GRPOConfig and LoraConfig keyword arguments from the recipe; every name is checked against
    the installed TRL's and peft's own signatures, so a number that would land nowhere refuses."""
    from peft import LoraConfig
    from trl import GRPOConfig

    grpo = {
        "learning_rate": recipe["learning_rate"],
        "max_steps": max_steps,
        "num_generations": contract.EPISODES_THAT_TRAIN,
        "per_device_train_batch_size": contract.EPISODES_THAT_TRAIN,
        "gradient_accumulation_steps": 1,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 1,
        "save_total_limit": 1,
        "report_to": ["trackio"],
        "project": TRACKIO_PROJECT,
        "trackio_space_id": trackio_space_id,
        "trackio_static_space_id": False,
        "max_completion_length": 16_384,
        # The sampling temperature of every episode's turns (`Policy.of_trainer` generates with
        # TRL's generation config): the recipe's, else TRL's default.
        "temperature": float(recipe.get("temperature", 1.0)),
        "seed": 0,
        "disable_tqdm": True,
    }
    lora = {"r": recipe["lora_r"], "lora_alpha": recipe["lora_alpha"], "target_modules": "all-linear",
            "lora_dropout": recipe.get("lora_dropout", 0.0), "task_type": "CAUSAL_LM"}
    for cls, args in ((GRPOConfig, grpo), (LoraConfig, lora)):
        known = inspect.signature(cls).parameters
        unknown = sorted(set(args) - set(known))
        if unknown:
            raise Failure("RUN_TRAINER_FAILED", f"{cls.__name__} of the installed version has no {unknown}")
    return grpo, lora


class Run:
    """One run's trainer: its assignment and progress (read once), the steps it plays, and what
    it reports as TRL's loop goes (`Report`)."""

    def __init__(self, rd: RunDir, settings: Settings):
        self.rd = rd
        self.settings = settings
        self.a = Assignment.read(rd.assignment)
        self.progress = Progress.read(rd.progress())
        self.version = self.progress.policy_version
        # The step TRL trains on now, until it is reported.
        self.pending: Pending | None = None
        # The optimizer step under way trains nothing: no step fits in the time left any more.
        self.idle = False
        self.group_retries = 0
        self.trainer = None
        self.policy: Policy | None = None
        self.places: tuple = ()
        self.pool: Pool | None = None
        # The sandboxes asked for ahead, by the step (its index) they are for.
        self.ahead: dict = {}
        self.cap = 0
        # Episodes' threads report their lost sandboxes as they go.
        self._emitting = threading.Lock()

    # --- the clock ---
    def elapsed_s(self) -> int:
        """Training time used: the held-out phases have an allowance of their own."""
        return int(time.time() - self.progress.started_epoch - self.progress.eval_s)

    def update_estimate_s(self) -> int:
        times = self.progress.update_s
        return int(statistics.mean(times)) + 1 if times else FIRST_UPDATE_S

    def extra_s(self, task: dict) -> int:
        """What a step of `task` was measured to need beyond the contract's allowance: the time
        its episodes waited for their sandboxes, and the episodes' own time past the walls (the
        means over the last steps; nothing before the first)."""
        p = self.progress
        wait = statistics.mean(p.sandbox_wait_s) if p.sandbox_wait_s else 0.0
        past = statistics.mean(p.episodes_s) - contract.step_allowance_s(task, 0) if p.episodes_s else 0.0
        return int(wait + max(past, 0.0))

    def next_task(self) -> dict | None:
        return contract.step_task(self.a.tasks, self.progress.step_index)

    def next_fits(self) -> bool:
        """Whether the next step (its task's walls, an update and what was measured beyond them)
        fits in the time left."""
        task = self.next_task()
        return task is not None and contract.step_fits(self.elapsed_s() + self.extra_s(task), task,
                                                       self.update_estimate_s(), self.a.time_limit_s)

    def may_play(self) -> bool:
        """Whether the next step is played: the run still has a training signal and the step fits."""
        return not contract.no_signal(self.progress.trained) and self.next_fits()

    def save_progress(self) -> None:
        self.rd.write_progress(self.progress.to_json())

    def emit(self, state: str, message: str, **extra) -> None:
        with self._emitting:
            self.rd.emit(state, self.version, message, **extra)

    # --- one optimizer step's episodes ---
    def rollout(self, prompts, trainer) -> dict:
        """TRL's `rollout_func`: the next step with a group to train on. A step whose episodes
        give fewer than four valid rewards trains nothing (the guide): it is reported and the
        next task is played in the same optimizer step. When no step fits any more, the group
        trains nothing (every token masked), `Report` makes this optimizer step change nothing
        and stops the training: TRL's loop ends as it ends, through `on_train_end`."""
        while self.may_play():
            group = self.play_step(self.next_task())
            if group is not None:
                return group
        self.idle = True
        return _idle_batch(self.policy.eos)

    def play_step(self, task: dict) -> dict | None:
        """One step of `task`: its five episodes, then the group of the first four valid rewards
        for TRL, or None when fewer ended with one (reported here)."""
        task_id, k = task["task_id"], self.progress.step_index
        self.emit("rolling", f"step {k + 1}: five episodes of `{task_id}`", task_id=task_id)
        started = time.monotonic()
        # This step's sandboxes (asked for ahead, or now) and, prefetching, the next step's.
        self.ask_ahead(k, 1 + min(self.prefetched(True), AHEAD_STEPS - 1))
        played = self.play_episodes(task, self.ahead.pop(k))
        self.progress.step_index += 1
        self.record_first(played, "train", task, step=self.progress.step_index)
        scores = [p.score for p in played]
        # The contract's rule, as its shared cases check it (tests/test_contract.py).
        chosen = contract.training_indices(scores)
        shown = "[" + ", ".join("none" if s is None else f"{s:g}" for s in scores) + "]"
        ends = _ends(played)
        # What the step's events tell the arena, which words them for the participant: the
        # counts and the rewards in the order the episodes ended.
        told = {**ends, "scores": scores, "replies": _invalid_replies(played)}
        rollout_s, wait_s = time.monotonic() - started, max(p.sandbox_wait_s for p in played)
        self.measure_step(rollout_s, wait_s, contract.step_trained(scores, ends["sandbox"]), told)
        if self.may_play():
            # The next steps' sandboxes start while this step's group trains.
            self.ask_ahead(self.progress.step_index, self.prefetched(chosen is not None))
        if chosen is None:
            self.save_progress()
            self.emit("updating", f"episodes' rewards in the order they ended: {shown}; fewer than four ended with "
                      f"a valid reward: the step trains nothing ({_words(ends)})", rewards=[], alert="no_update",
                      task_id=task_id, ends=told)
            return None
        group = [played[i] for i in chosen]
        self.pending = Pending(task_id, [p.score for p in group], shown, told, time.monotonic())
        # Logged beside TRL's own metrics through its public hook: `_env_reward` hands them to
        # `log_metric`, one value per step.
        metrics = {"episodes/step_s": rollout_s, "episodes/invalid_replies": ends["invalid_reply"],
                   "episodes/budget_ends": ends["budget"], "episodes/timeouts": ends["timeout"],
                   "episodes/group_retries": self.group_retries, "episodes/sandbox_wait_s": wait_s}
        return _batch(group, self.policy.eos, metrics)

    def measure_step(self, rollout_s: float, wait_s: float, trained: bool | None, ends: dict) -> None:
        """What the time left (`extra_s`) and the training signal (`contract.no_signal`) count;
        `trained` as `contract.step_trained` counts the step (None: the platform's, not counted)."""
        p = self.progress
        p.sandbox_wait_s = (p.sandbox_wait_s + [wait_s])[-MEASURED_STEPS:]
        p.episodes_s = (p.episodes_s + [rollout_s - wait_s])[-MEASURED_STEPS:]
        if trained is not None:
            p.trained = (p.trained + [trained])[-contract.NO_UPDATE_STEPS:]
        p.untrained_ends = {} if trained else {k: p.untrained_ends.get(k, 0) + n for k, n in ends.items()
                                               if k in contract.END_KEYS}
        p.untrained_replies = [] if trained else (p.untrained_replies + ends.get("replies", []))[-REPLIES_SHOWN:]
        p.untrained_scores = [] if trained else list(ends.get("scores", []))

    def prefetched(self, trains: bool) -> int:
        """How many steps' sandboxes are asked for ahead of the step under way: AHEAD_STEPS when
        prefetching, fewer when the node's step cap leaves fewer optimizer steps after it
        (`trains`: whether it takes one)."""
        if not self.settings.trainer_prefetch:
            return 0
        return max(min(AHEAD_STEPS, self.cap - self.version - int(trains)), 0)

    def ask_ahead(self, first: int, steps: int) -> None:
        """Asks the pool for the sandboxes of the `steps` steps from step `first`, those not asked
        for yet. A sandbox asked for ahead may wait for the steps before its own and their
        updates: HF's timeout for it counts them."""
        update_s = self.update_estimate_s()
        for k in range(first, first + steps):
            task = contract.step_task(self.a.tasks, k)
            if k in self.ahead or task is None:
                continue
            hold_s = (k - self.progress.step_index + 1) * contract.step_allowance_s(task, update_s)
            self.ahead[k] = [self.pool.request(self.places[0], task, TRAIN_PURPOSE, hold_s)
                             for _ in range(contract.EPISODES_PER_STEP)]

    def drop_ahead(self) -> None:
        """The sandboxes asked for steps that will not be played."""
        for leases in self.ahead.values():
            for lease in leases:
                self.pool.release(lease)
        self.ahead.clear()

    def play_episodes(self, task: dict, leases: list) -> list:
        """The step's episodes at once, each in its own sandbox; one the platform lost is played
        again once in a fresh sandbox (`group_retries`) as soon as it is lost. In the order they
        ended."""
        with self.policy.step(len(leases)), ThreadPoolExecutor(len(leases)) as pool:
            running = [pool.submit(self.play_episode, task, lease, i) for i, lease in enumerate(leases)]
            played = [f.result() for f in running]
        for p in played:
            if p.cleanup_error:
                self.emit("rolling", p.cleanup_error, alert="cleanup_failed", task_id=task["task_id"])
        self.group_retries = sum(p.retries for p in played)
        return sorted(played, key=lambda p: p.ended_at)

    def play_episode(self, task: dict, lease: Lease, n: int = 0) -> Played:
        """One training episode (the step's `n`-th), in a fresh sandbox of the sandbox namespace."""
        return play_in(self.pool, lease, self.policy, task, self.a.actions, seed=self.episode_seed(task, n),
                       on_lost=lambda p, again: self.sandbox_lost(task, p, again))

    def episode_seed(self, task: dict, n: int) -> int:
        """The draws of the step's `n`-th episode: seeded by the run, the step and the episode, so
        that a run can be replayed. The tiny model's runs (tests, the local demo) leave the run out,
        so that the same submission plays the same episodes on every machine; a real run's draws
        differ from another run's of the same submission, as repeats must to measure their spread."""
        base = "tiny" if self.settings.tiny else self.rd.run_id
        key = f"{base}/{task['task_id']}/{self.progress.step_index}/{n}"
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")

    def sandbox_lost(self, task: dict, p: Played, again: bool) -> None:
        task_id = task["task_id"]
        if again:
            self.emit("rolling", f"a sandbox of `{task_id}` was lost ({p.why}): the episode is played again in a "
                      "fresh sandbox", alert="episode_retried", task_id=task_id)
        else:
            self.emit("rolling", f"a sandbox of `{task_id}` was lost again ({p.why}): the episode has no reward",
                      alert="sandbox_failed", task_id=task_id)

    def record_first(self, played: list, purpose: str, task: dict, **extra) -> None:
        """The conversation of the first of `played` (in the order they ended) that got as far as
        its reset, in the run's `conversations.jsonl` (it stays on the node)."""
        first = next((p for p in played if p.messages), None)
        if first is not None:
            self.record(purpose, task, first, **extra)

    def record(self, purpose: str, task: dict, p: Played, **extra) -> None:
        try:
            self.rd.write_conversation(purpose, str(task.get("task_label", "")), p.messages, end=p.end,
                                       score=p.score, **extra)
        except OSError:
            traceback.print_exc()  # a debugging record: the run goes on without it

    def evaluate(self, phase: str) -> None:
        """The held-out phase, in the eval namespace, unless the assignment has no benchmark. What
        keeps it from finishing is said on its event; the run goes on (and ends with its
        evaluation incomplete)."""
        if not self.a.benchmark:
            return
        ev = Evaluation(self.a.benchmark, self.a.benchmark_actions, self.progress,
                        lambda message, evaluation: self.emit("evaluating", message, evaluation=evaluation),
                        lambda phase_, task, p: self.record(f"eval-{phase_}", task, p))
        started = time.time()

        def save():
            self.progress.eval_s += time.time() - started
            self.save_progress()

        try:
            ev.run(phase, self.policy, self.pool, self.places[1], save, self.settings.trainer_prefetch)
        except Exception as e:  # noqa: BLE001 - the run still trains or ends; its evaluation says why
            traceback.print_exc()
            why = f"the {phase} phase stopped: {type(e).__name__}"
            self.emit("evaluating", f"the held-out evaluation {phase} training stopped",
                      evaluation={"phase": phase, "done": 0, "planned": len(ev.cells), "incomplete": why})
            self.progress.evaluation[phase] = {"incomplete": why}
            save()

    # --- after each optimizer step (`Report`) ---
    def measure_update(self) -> None:
        """The update's time: from the group handed to TRL to the end of its optimizer step."""
        if self.pending is not None:
            update_s = time.monotonic() - self.pending.returned
            self.progress.update_s = (self.progress.update_s + [update_s])[-MEASURED_STEPS:]

    def report(self, global_step: int, logs: dict) -> None:
        """The trained step's `updating` event, with the metrics TRL logged for it."""
        if self.pending is None:
            return
        _write_trackio_queue()
        message, fields = self.updating(logs)
        self.pending = None
        self.publish(global_step, message, fields)

    def stage(self, global_step: int, logs: dict) -> None:
        """A step that also saves its checkpoint is reported once the checkpoint is written
        (`Report.on_save`); what that report will say is kept in the run's folder first, so that a
        trainer killed between the two reports the checkpoint's step when it starts again
        (`resume_staged`) instead of training it a second time unreported."""
        if self.pending is None:
            return
        _write_trackio_queue()
        message, fields = self.updating(logs)
        after = dict(self.progress.to_json(), policy_version=global_step)
        self.rd.write_staged_report({"progress": after, "event": {"message": message, **fields}})

    def updating(self, logs: dict) -> tuple:
        p = self.pending
        metrics = {k: logs[k] for k in METRICS if logs.get(k) is not None}
        metrics["lora_b_norm"] = _lora_b_norm(self.trainer.model)
        equal = not contract.group_has_signal(p.rewards)
        still = not equal and metrics.get("grad_norm") == 0
        if still and not p.zeroed and self.progress.trained and self.progress.trained[-1]:
            p.zeroed = True
            # Rewards that differ and still a zero gradient (every token masked, say): the
            # update moved nothing, so the step had no signal either.
            self.progress.trained[-1] = False
        trained = ("the four rewards are equal: no signal, the update changed nothing it could learn from"
                   if equal else "the gradient was zero: no signal, the update moved nothing" if still
                   else "the first four trained")
        message = (f"step {self.progress.step_index} of `{p.task_id}`: episodes' rewards in the order they ended: "
                   f"{p.shown}; {trained}")
        return message, {"rewards": p.rewards, "metrics": metrics, "task_id": p.task_id, "ends": p.ends}

    def publish(self, global_step: int, message: str, fields: dict) -> None:
        self.version = global_step
        self.progress.policy_version = global_step
        self.save_progress()
        self.emit("updating", message, **fields)
        self.rd.clear_staged_report()

    def resume_staged(self, step: int) -> None:
        """At a restart: the report staged for the checkpoint the trainer resumes from is made now
        (the trainer was killed after writing the checkpoint and before reporting it). A report
        staged for a checkpoint that was never completed is dropped: that step is trained again.
        Whether it was reported is read from the events (a kill may fall between the progress
        written and the event), so it is never reported twice nor lost."""
        staged = self.rd.staged_report()
        if staged and staged["progress"].get("policy_version") == step:
            reported = any(e["state"] == "updating" and e.get("metrics") and e["policy_version"] == step
                           for e in self.rd.events())
            if not reported:
                self.progress = Progress.read(staged["progress"])
                event = dict(staged["event"])
                self.publish(step, event.pop("message"), event)
        self.rd.clear_staged_report()

    # --- the whole run ---
    def main(self) -> None:
        first = self.rd.progress() is None
        self.save_progress()
        device, model_words = _device(), _model_words(self.a, self.settings)
        dashboard = None
        if self.settings.trackio_space_id:
            dashboard = f"https://huggingface.co/spaces/{self.settings.trackio_space_id}"
        if first:
            self.emit("loading", f"the trainer started on the {device}; loading {model_words}",
                      trainer={**_versions(), "model": model_words, "device": device, "dashboard": dashboard,
                               "trackio_project": TRACKIO_PROJECT})
        self.places = self.make_places()
        if not first:
            # A trainer that was killed left its episodes' sandboxes running.
            self.cleanup()
        self.pool = Pool(run_allowance(self.settings), self.settings.sandbox_start_s)
        model_path = _model_path(self.a, self.settings)
        self.cap = self.settings.trainer_max_steps or int(self.a.recipe["max_steps"])
        try:
            self.train(model_path, device, self.cap)
        except BaseException:
            self.cleanup()
            raise
        self.finish()

    def make_places(self) -> tuple:
        """The run's training and held-out sandboxes (`sandboxes.run_sandboxes`)."""
        return run_sandboxes(self.settings, self.rd.run_id)

    def trainer_arguments(self, cap: int, device: str) -> tuple:
        """GRPOConfig and LoraConfig keyword arguments for this run."""
        grpo, lora = recipe_arguments(self.a.recipe, cap, self.settings.trackio_space_id)
        grpo.update(output_dir=str(self.rd.checkpoints), run_name=self.rd.run_id, use_cpu=device == "cpu",
                    bf16=device != "cpu")
        return grpo, lora

    def train(self, model_path: str, device: str, cap: int) -> None:
        from datasets import Dataset
        from peft import LoraConfig
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        grpo, lora = self.trainer_arguments(cap, device)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32" if device == "cpu" else "bfloat16")
        # The prompts are not read: each step's task is the next train task in turn (`rollout`).
        rows = Dataset.from_list([{"prompt": f"step {i}"} for i in range(cap)])
        self.trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=_env_reward,
                                   args=GRPOConfig(**grpo), train_dataset=rows, rollout_func=self.rollout,
                                   peft_config=LoraConfig(**lora), callbacks=[Report(self)])
        self.policy = Policy.of_trainer(self.trainer, Template(tokenizer))
        # The base policy (the adapter's B matrices are zero) before the first optimizer step.
        self.evaluate("before")
        resume = self.rd.last_checkpoint()
        step = int(resume.name.split("-")[-1]) if resume else 0
        self.resume_staged(step)
        if resume or self.version > step:
            self.resumed(step)
        if self.may_play():
            self.trainer.train(resume_from_checkpoint=str(resume) if resume else None)

    def resumed(self, step: int) -> None:
        """A restarted trainer goes on from its last checkpoint (step 0: the base model): steps
        reported after it (when a checkpoint is not written every step) are trained again."""
        again = f"; optimizer steps {step + 1} to {self.version} are trained again" if self.version > step else ""
        where = f"its checkpoint after optimizer step {step}" if step else "the base model, without a checkpoint"
        self.version = step
        self.emit("rolling", f"the trainer resumes from {where}{again}", alert="resumed")

    def finish(self) -> None:
        """After training: the held-out phase after (unless the run trained nothing), the cleanup,
        and the run's last event."""
        self.drop_ahead()
        played = self.progress.step_index
        untrained = self.no_training_signal()
        if played and untrained is None:
            # The trained policy, on the same held-out episodes as before training.
            self.evaluate("after")
        if played:
            self.emit("cleanup", f"stopping the run's sandboxes; {self.elapsed_s()} s of {self.a.time_limit_s} s used")
        self.cleanup()
        if not played:
            task = contract.step_task(self.a.tasks, 0)
            why = "the submission has no train task" if task is None else (
                f"one step of `{task['task_id']}` needs "
                f"{contract.step_allowance_s(task, self.update_estimate_s()) + self.extra_s(task)} s and the run "
                f"has {max(self.a.time_limit_s - self.elapsed_s(), 0)} s")
            self.emit("failed", f"RUN_STEP_DOES_NOT_FIT: {why}")
        elif untrained is not None:
            why, ends = untrained
            self.emit("failed", f"RUN_NO_TRAINING_SIGNAL: {why}", ends=ends)
        else:
            capped = " (the node's step cap)" if self.version >= self.cap else ""
            self.emit("completed", f"{self.version} optimizer steps taken{capped} in {played} steps played, "
                      f"{self.elapsed_s()} s")

    def no_training_signal(self) -> tuple | None:
        """Why the run ends without training, and how the episodes of its steps that trained
        nothing ended (`ends`, summed): its last NO_UPDATE_STEPS steps trained nothing
        (`contract.no_signal`), or it played steps and took no optimizer step. None: it trained."""
        p = self.progress
        if contract.no_signal(p.trained):
            head = f"{contract.NO_UPDATE_STEPS} steps in a row trained nothing"
        elif p.step_index and self.version == 0:
            head = f"{p.step_index} step(s) played and no optimizer step taken"
        else:
            return None
        ends = {k: p.untrained_ends.get(k, 0) for k in contract.END_KEYS}
        words = f"{head}: of their {sum(ends.values())} episodes, {_words(ends)}"
        # The rewards of the last of those steps, in the order its episodes ended.
        return words, {**ends, "replies": p.untrained_replies, "scores": p.untrained_scores}

    def cleanup(self) -> None:
        """Stops every sandbox of the run: the pool's (none is started after), then whatever HF
        still lists as live under the run's labels, in both namespaces; what cannot be stopped is
        said."""
        problems = self.pool.close() if self.pool is not None else []
        for why in problems + cancel_all(self.places):
            self.emit(self.state_for_note(), why, alert="cleanup_failed")

    def state_for_note(self) -> str:
        last = self.rd.last_event()
        return last["state"] if last else "loading"


@dataclass
class Pending:
    """The step whose group TRL trains on, until its `updating` event."""

    task_id: str
    rewards: list
    shown: str
    ends: dict
    # When the rollout handed the group to TRL (monotonic): the update's time counts from here.
    returned: float
    # Whether a zero gradient already took the step's signal back (`Run.updating` runs twice for
    # a step that saves its checkpoint).
    zeroed: bool = False


class Report(TrainerCallback):
    """How the run follows TRL's loop, through transformers' callback events only:

    - `on_step_end`: the update's time is measured, and the training stops
      (`control.should_training_stop`) when the next step does not fit in the time left, so TRL
      ends as it always ends (`on_train_end`: the Trackio run is finished);
    - `on_log`: a trained step is reported with the metrics TRL logged for it (`logging_steps=1`),
      whatever `save_steps` is; on a step that also saves its checkpoint, the report waits for
      `on_save`, so that a restarted trainer never trains a reported step again, and is staged
      in the run's folder before the checkpoint is written, so that one killed in between
      reports the checkpoint's step when it starts again (`Run.resume_staged`);
    - the idle step (the rollout found no step that fits: `Run.idle`) changes nothing: its
      gradients are dropped before the optimizer step (`on_pre_optimizer_step`; AdamW skips a
      parameter without a gradient, so neither the weights nor its moments move), it is neither
      logged nor saved, and the training stops."""

    def __init__(self, run: Run):
        self.run = run
        self.logs: dict | None = None

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if self.run.idle:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    p.grad = None

    def on_step_end(self, args, state, control, **kwargs):
        if self.run.idle:
            control.should_log = control.should_save = False
            control.should_training_stop = True
            _forget_step_metrics(self.run.trainer)
            return control
        self.run.measure_update()
        if not self.run.may_play():
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" not in (logs or {}):
            return
        if control.should_save:
            self.logs = dict(logs)
            self.run.stage(state.global_step, self.logs)
        else:
            self.run.report(state.global_step, logs)

    def on_save(self, args, state, control, **kwargs):
        if self.logs is not None:
            self.run.report(state.global_step, self.logs)
            self.logs = None


def _forget_step_metrics(trainer) -> None:
    """TRL keeps a step's metrics (`GRPOTrainer._metrics`) until that step's log; the idle step is
    never logged, and what it left would be merged into the closing summary log
    (`GRPOTrainer.log`, from `Trainer._finalize_training`) and shown on the Trackio dashboard."""
    metrics = getattr(trainer, "_metrics", None)
    if isinstance(metrics, dict) and "train" in metrics:
        metrics["train"].clear()


def _write_trackio_queue() -> None:
    """Writes what Trackio holds queued of the step (TRL's `TrackioCallback` logged it just before
    this report) before the arena hears of the step: Trackio's sender writes every 0.5 s, so a
    trainer killed in between would leave a step the arena shows off the dashboard. Trackio 0.43
    (pinned) has no public flush; its local sender does this, under this lock, at each tick. A run
    sent to a Space (`TRACKIO_SPACE_ID`) is left to Trackio's own sender."""
    from trackio import context_vars

    run = context_vars.current_run.get()
    if run is None or not run._is_local:
        return
    with run._client_lock:
        run._flush_queues_inline()


def _lora_b_norm(model) -> float:
    """The norm of the adapter's B matrices: zero at the start (peft initialises B to zero), and
    moved by every step that changed the weights."""
    import torch

    with torch.no_grad():
        total = sum(float(p.float().pow(2).sum()) for n, p in model.named_parameters() if "lora_B" in n)
    return total ** 0.5


def _env_reward(completions, env_reward, episode_metrics=None, log_metric=None, **kwargs):
    """The reward TRL trains on: the environment's, as the contract scored each episode. The
    step's episode counts come along as an extra field of the rollout (TRL gives each completion
    the same dict) and are logged once through TRL's public `log_metric`."""
    if log_metric is not None and episode_metrics:
        for name, value in episode_metrics[0].items():
            log_metric(name, float(value))
    return list(env_reward)


def _idle_batch(eos: int) -> dict:
    """A group that trains nothing: four one-token episodes, every token masked, equal rewards
    (advantage 0). TRL's loss is then exactly 0 (`(per_token_loss * mask).sum()`)."""
    n = contract.EPISODES_THAT_TRAIN
    return {"prompt_ids": [[eos]] * n, "completion_ids": [[eos]] * n, "logprobs": None, "env_mask": [[0]] * n,
            "env_reward": [0.0] * n, "episode_metrics": {}}


def _batch(group: list, eos: int, episode_metrics: dict) -> dict:
    completions, masks = [], []
    for p in group:
        ids, mask = p.completion_ids, p.mask
        if not ids:  # an episode that ended before the model spoke: nothing of it trains
            ids, mask = [eos], [0]
        completions.append(ids)
        masks.append(mask)
    return {"prompt_ids": [p.prompt_ids for p in group], "completion_ids": completions, "logprobs": None,
            "env_mask": masks, "env_reward": [p.score for p in group], "episode_metrics": episode_metrics}


# The model's own invalid replies a failure quotes at most, each cut to REPLY_CHARS.
REPLIES_SHOWN = 3
REPLY_CHARS = 120


def _invalid_replies(played: list) -> list:
    """Up to REPLIES_SHOWN of the model's replies that ended an episode as invalid, each on one line
    and cut (control characters escaped): what the participant needs to see why."""
    out = []
    for p in played:
        said = [m.get("content", "") for m in p.messages if m.get("role") == "assistant"]
        if p.end == "invalid_reply" and said and len(out) < REPLIES_SHOWN:
            text = "".join(c if c.isprintable() else "\\u%04x" % ord(c) for c in said[-1])
            out.append(text if len(text) <= REPLY_CHARS else text[: REPLY_CHARS - 1] + "…")
    return out


def _ends(played: list) -> dict:
    """How a step's episodes ended, each under one key (`contract.end_key`)."""
    counts = dict.fromkeys(contract.END_KEYS, 0)
    for p in played:
        counts[contract.end_key(p.end, p.score)] += 1
    return counts


# How each `ends` key is said in the trainer's own text (for editors: the arena writes its own).
_END_WORDS = {"done": "ended by the environment with a reward", "finished": "ended by the model's finish with a reward",
              "invalid_reply": "ended by an invalid reply", "budget": "ran out of a token or tool-call budget",
              "timeout": "ran out of their walls",
              "no_reward": "never ended with a valid reward (finish_action gave none)",
              "sandbox": "were lost to the platform (a sandbox that never served, exited or dropped its connection)"}


def _words(counts: dict) -> str:
    parts = [f"{n} {_END_WORDS[k]}" for k, n in counts.items() if n]
    return ", ".join(parts) or "no episode ended"


def _versions() -> dict:
    import torch
    import transformers
    import trl

    return {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__}


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _model_words(assignment: Assignment, settings: Settings) -> str:
    named = f"{assignment.model_repo} at {assignment.model_revision[:7]}"
    if settings.tiny:
        return f"a tiny test model of the Qwen3.5 architecture in place of {named}"
    return named


def _model_path(assignment: Assignment, settings: Settings) -> str:
    """The node's own copy of the model the assignment names (the trainer downloads nothing)."""
    local = settings.trainer_model
    if settings.tiny:
        from . import tiny_model

        return str(tiny_model.build(tiny_model.default_path()))
    if not local or not Path(local).is_dir():
        raise Failure("RUN_TRAINER_FAILED", f"the node has no local copy of {_model_words(assignment, settings)} "
                      "(ARENA_TRAINER_MODEL)")
    return local


def _write_stats(rd: RunDir, started: float) -> None:
    """The trainer's own figures for `dev/bench-trainer`: its peak memory and how long it ran."""
    import resource

    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (rd.path / "stats.json").write_text(json.dumps({"peak_rss_mb": round(peak_kb / 1024, 1),
                                                    "seconds": round(time.monotonic() - started, 1)}))


def main(argv: list) -> int:
    rd = RunDir(Path(argv[1]))
    started = time.monotonic()
    try:
        return _main(rd)
    finally:
        _write_stats(rd, started)


def _main(rd: RunDir) -> int:
    # A stop from the agent: the sandboxes are canceled on the way out (the `finally`s).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        Run(rd, Settings.read()).main()
        return 0
    except SettingError as e:
        rd.write_failure(f"RUN_TRAINER_FAILED: {e}")
        return 1
    except Failure as e:
        rd.write_failure(str(e))
        return 1
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - the agent reports the reason as the run's failure
        traceback.print_exc()
        rd.write_failure(f"RUN_TRAINER_FAILED: {type(e).__name__}: {e}"[:2000])
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
