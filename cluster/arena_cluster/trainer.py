"""The arena's OpenEnv trainer: one process per run, on one GPU (or, for tests and the local demo,
one CPU slot with a tiny model), started by the node's agent (`arena_cluster.agent`) with the run's
folder (`arena_cluster.rundir`). TRL's `GRPOTrainer` with a `rollout_func` that plays the guide's
episodes: each optimizer step takes the next train task in turn, plays five episodes of it at once
in five fresh sandboxes, and trains on the first four that end with a valid reward (fewer: the step
trains nothing, and its event says why). The run's 14,400 s count from this process's first start;
a step is played only when its task's walls plus the measured update time fit in the time left.

    python -m arena_cluster.trainer RUN_DIR

Environment: `HF_TOKEN` (may start jobs in the sandbox namespace; never sent to a sandbox),
`ARENA_SANDBOX_TOKEN` (the sandbox reader: the only credential a sandbox receives), `ARENA_SANDBOX_NAMESPACE`,
`HF_ENDPOINT` (HF's, or the stand-in's), `ARENA_TRAINER_MODEL` (a local folder holding the model
the assignment names; `tiny` builds and uses the tiny CPU model), `ARENA_TRAINER_MAX_STEPS`
(optional: stop after this many optimizer steps), `TRACKIO_DIR`, `TRACKIO_SPACE_ID` (optional).
Exit 0 when the run ended (its last event says how); non-zero with `failure.txt` otherwise.
"""

from __future__ import annotations

import inspect
import json
import signal
import statistics
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from . import contract
from .episodes import Played, Policy, play
from .evaluation import Evaluation
from .rundir import RunDir
from .sandboxes import Sandboxes
from .settings import SettingError, Settings

TRACKIO_PROJECT = "arena-openenv"
# The update time assumed before the first one is measured (the simulated trainer's too).
FIRST_UPDATE_S = 300
# Metrics the `updating` event carries, under the names TRL logs them (and Trackio stores as
# `train/…`): the domain's `StepMetrics` table (tests/fixtures/metric-names.json), less
# `lora_b_norm`, which the trainer measures itself.
METRICS = ["reward", "reward_std", "loss", "grad_norm", "completions/mean_length", "episodes/step_s",
           "episodes/invalid_replies", "episodes/budget_ends", "episodes/timeouts", "episodes/group_retries"]


class OutOfTime(Exception):
    """The next step does not fit in what is left of the run's time: training is over."""


class Failure(Exception):
    """The run fails with this code and reason."""

    def __init__(self, code: str, why: str):
        super().__init__(f"{code}: {why}")


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


def _validator(schema):
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema)

    def valid(action):
        err = jsonschema.exceptions.best_match(v.iter_errors(action))
        return None if err is None else err.message

    return valid


class Run:
    def __init__(self, rd: RunDir, settings: Settings):
        self.rd = rd
        self.settings = settings
        self.a = rd.assignment
        self.submission = self.a["submission"]
        self.tasks = self.submission["tasks"]
        self.limit_s = int(self.a.get("time_limit_s") or contract.RUN_LIMIT_S)
        self.progress = rd.progress() or {"started_epoch": time.time(), "step_index": 0, "update_s": []}
        self.version = 0
        self.logs: dict = {}
        self.pending: dict = {}
        self.valid = _validator(self.submission["schema"]["action"])
        self.benchmark = self.a.get("benchmark")
        self.group_retries = 0

    # --- the clock ---
    def elapsed_s(self) -> int:
        """Training time used: the held-out phases have an allowance of their own."""
        return int(time.time() - self.progress["started_epoch"] - self.progress.get("eval_s", 0))

    def update_estimate_s(self) -> int:
        times = self.progress["update_s"]
        return int(statistics.mean(times)) + 1 if times else FIRST_UPDATE_S

    def save_progress(self) -> None:
        self.rd.write_progress(self.progress)

    def emit(self, state: str, message: str, **extra) -> None:
        self.rd.emit(state, self.version, message, **extra)

    # --- one step's episodes ---
    def rollout(self, prompts, trainer) -> dict:
        """TRL's `rollout_func`: the next step with a group to train on. Steps whose episodes give
        fewer than four valid rewards train nothing; each is reported and the next task is tried."""
        while True:
            task = contract.step_task(self.tasks, self.progress["step_index"])
            if task is None or not contract.step_fits(self.elapsed_s(), task, self.update_estimate_s(), self.limit_s):
                raise OutOfTime()
            step_no = self.progress["step_index"] + 1
            self.emit("rolling", f"step {step_no}: five episodes of `{task['task_id']}`")
            started = time.monotonic()
            played = self.play_step(task)
            scores = [p.score for p in played]
            self.progress["step_index"] += 1
            # The contract's rule, as its shared cases check it (tests/test_contract.py).
            chosen = contract.training_indices(scores)
            shown = "[" + ", ".join("none" if s is None else f"{s:g}" for s in scores) + "]"
            counts = _ends(played)
            if chosen is None:
                self.save_progress()
                self.emit("updating", f"episodes' rewards in the order they ended: {shown}; fewer than four "
                          f"ended with a valid reward: the step trains nothing ({_words(counts)})", rewards=[],
                          alert="no_update")
                continue
            rollout_s = time.monotonic() - started
            group = [played[i] for i in chosen]
            self.pending = {"rewards": [p.score for p in group], "shown": shown, "rollout_s": rollout_s,
                            "returned": time.monotonic(), "task": task["task_id"]}
            # Logged beside TRL's own metrics through its public hook: `_env_reward` hands them to
            # `log_metric`, one value per step.
            episode_metrics = {"episodes/step_s": rollout_s, "episodes/invalid_replies": counts["invalid_reply"],
                               "episodes/budget_ends": counts["budget"], "episodes/timeouts": counts["timeout"],
                               "episodes/group_retries": self.group_retries}
            return _batch(group, self.policy.eos, episode_metrics)

    def play_step(self, task: dict) -> list:
        """The step's five episodes at once; each one the platform lost is played again once in
        a fresh sandbox (`group_retries`) before the step counts what it has."""
        played = self._play_many(task, contract.EPISODES_PER_STEP)
        lost = [p for p in played if p.end == "sandbox"]
        self.group_retries = len(lost)
        if lost:
            self.emit("rolling", f"{len(lost)} episode(s) of `{task['task_id']}` lost to the platform: played again "
                      "in fresh sandboxes", alert="episode_retried")
            played = [p for p in played if p.end != "sandbox"] + self._play_many(task, len(lost))
        return sorted(played, key=lambda p: p.ended_at)

    def _play_many(self, task: dict, n: int) -> list:
        with ThreadPoolExecutor(n) as pool:
            running = [pool.submit(play, self.policy, self.sandboxes, task, self.submission, self.valid)
                       for _ in range(n)]
            played = []
            for f in as_completed(running):
                p = f.result()
                played.append(p)
                if p.end == "sandbox":
                    self.emit("rolling", f"a sandbox of `{task['task_id']}` never served: {p.why}",
                              alert="sandbox_failed")
                if p.cleanup_error:
                    self.emit("rolling", p.cleanup_error, alert="cleanup_failed")
        return played

    def evaluate(self, phase: str) -> None:
        """The held-out phase, unless the assignment has no benchmark. What keeps it from
        finishing is said on its event; the run goes on (and ends with its evaluation incomplete)."""
        if not self.benchmark:
            return
        ev = Evaluation(self.benchmark, self.progress,
                        lambda message, evaluation: self.emit("evaluating", message, evaluation=evaluation),
                        _validator)
        started = time.time()

        def save():
            self.progress["eval_s"] = self.progress.get("eval_s", 0) + time.time() - started
            self.save_progress()

        try:
            ev.run(phase, self.policy, self.sandboxes, save)
        except Exception as e:  # noqa: BLE001 - the run still trains or ends; its evaluation says why
            traceback.print_exc()
            why = f"the {phase} phase stopped: {type(e).__name__}"
            self.emit("evaluating", f"the held-out evaluation {phase} training stopped",
                      evaluation={"phase": phase, "done": 0, "planned": len(ev.cells), "incomplete": why})
            self.progress.setdefault("evaluation", {})[phase] = {"incomplete": why}
            save()

    # --- after each optimizer step ---
    def on_log(self, logs: dict) -> None:
        if "loss" in logs:
            self.logs = dict(logs)

    def on_save(self, global_step: int) -> None:
        """The step's checkpoint is written: the step counts and is reported with its metrics."""
        if not self.pending:
            return
        self.version = global_step
        self.progress["update_s"] = (self.progress["update_s"] + [time.monotonic() - self.pending["returned"]])[-8:]
        self.progress["policy_version"] = global_step
        self.save_progress()
        metrics = {k: self.logs[k] for k in METRICS if self.logs.get(k) is not None}
        metrics["lora_b_norm"] = _lora_b_norm(self.trainer.model)
        equal = len(set(self.pending["rewards"])) == 1
        trained = ("the four rewards are equal: no signal, the update changed nothing it could learn from"
                   if equal else "the first four trained")
        self.emit("updating", f"step {self.progress['step_index']} of `{self.pending['task']}`: episodes' rewards "
                  f"in the order they ended: {self.pending['shown']}; {trained}",
                  rewards=self.pending["rewards"], metrics=metrics)
        self.pending = {}

    # --- the whole run ---
    def main(self) -> None:
        if self.settings.trainer_vllm:
            raise Failure("RUN_TRAINER_FAILED", "generation with vLLM (colocate) is not built yet; the trainer "
                          "generates with transformers: unset ARENA_TRAINER_VLLM")
        first = self.rd.progress() is None
        self.save_progress()
        device, model_words = _device(), _model_words(self.a, self.settings)
        self.version = int(self.progress.get("policy_version", 0))
        dashboard = None
        if self.settings.trackio_space_id:
            dashboard = f"https://huggingface.co/spaces/{self.settings.trackio_space_id}"
        if first:
            self.emit("loading", f"the trainer started on the {device}; loading {model_words}",
                      trainer={**_versions(), "model": model_words, "device": device, "dashboard": dashboard,
                               "trackio_project": TRACKIO_PROJECT})
        self.sandboxes = Sandboxes(api=self.settings.hf_api(), namespace=self.settings.sandbox_namespace,
                                   reader=self.settings.sandbox_token, run_label=self.rd.run_id)
        if not first:
            # A trainer that was killed left its episodes' sandboxes running.
            self.cleanup()
        model_path = _model_path(self.a, self.settings)
        cap = self.settings.trainer_max_steps or int(self.a["recipe"]["max_steps"])
        try:
            trained = self.train(model_path, device, cap)
        except OutOfTime:
            trained = self.version
        except BaseException:
            self.cleanup()
            raise
        if self.progress["step_index"] > 0:
            # The trained policy, on the same held-out episodes as before training.
            self.evaluate("after")
        if self.progress["step_index"] > 0:
            self.emit("cleanup", f"stopping the run's sandboxes; {self.elapsed_s()} s of {self.limit_s} s used")
        self.cleanup()
        if self.progress["step_index"] == 0:
            task = contract.step_task(self.tasks, 0)
            why = "the submission has no train task" if task is None else (
                f"one step of `{task['task_id']}` needs "
                f"{contract.step_allowance_s(task, self.update_estimate_s())} s and the run has "
                f"{max(self.limit_s - self.elapsed_s(), 0)} s")
            self.emit("failed", f"RUN_STEP_DOES_NOT_FIT: {why}")
            return
        capped = " (the node's step cap)" if trained >= cap else ""
        self.emit("completed", f"{trained} optimizer steps taken{capped} in {self.progress['step_index']} steps "
                  f"played, {self.elapsed_s()} s")

    def train(self, model_path: str, device: str, cap: int) -> int:
        from datasets import Dataset
        from peft import LoraConfig
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        grpo, lora = recipe_arguments(self.a["recipe"], cap, self.settings.trackio_space_id)
        run = self

        class Report(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                run.on_log(logs or {})

            def on_save(self, args, state, control, **kw):
                run.on_save(state.global_step)

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        dtype = "float32" if device == "cpu" else "bfloat16"
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        # The prompts are not read: each step's task is the next train task in turn (`rollout`).
        rows = Dataset.from_list([{"prompt": f"step {i}"} for i in range(cap)])
        args = GRPOConfig(output_dir=str(self.rd.checkpoints), run_name=self.rd.run_id, use_cpu=device == "cpu",
                          bf16=device != "cpu", **grpo)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=_env_reward, args=args,
                              train_dataset=rows, rollout_func=self.rollout, peft_config=LoraConfig(**lora),
                              callbacks=[Report()])
        self.trainer = trainer
        self.policy = Policy(trainer.model, tokenizer)
        # The base policy (the adapter's B matrices are zero) before the first optimizer step.
        self.evaluate("before")
        resume = self.rd.last_checkpoint()
        if resume:
            self.emit("rolling", f"the trainer resumes from its checkpoint after optimizer step "
                      f"{resume.name.split('-')[-1]}", alert="resumed")
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        return int(trainer.state.global_step)

    def cleanup(self) -> None:
        """Stops every sandbox of the run HF still lists as live; what cannot be stopped is said."""
        try:
            left = self.sandboxes.running()
        except Exception as e:  # noqa: BLE001 - reported, the run still ends
            self.emit(self.state_for_note(), f"listing the run's sandboxes failed: {e}", alert="cleanup_failed")
            return
        if not left:
            return
        for job in left:
            try:
                self.sandboxes.cancel(job.id)
            except Exception as e:  # noqa: BLE001
                self.emit(self.state_for_note(), f"canceling sandbox {job.id} failed: {e}", alert="cleanup_failed")

    def state_for_note(self) -> str:
        last = self.rd.last_event()
        return last["state"] if last else "loading"


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


def _ends(played: list) -> dict:
    counts = {"invalid_reply": 0, "budget": 0, "timeout": 0, "sandbox": 0}
    for p in played:
        if p.end == "invalid_reply":
            counts["invalid_reply"] += 1
        elif p.end in ("out_of_tokens", "tool_calls_exhausted"):
            counts["budget"] += 1
        elif p.end in ("timeout", "sandbox"):
            counts[p.end] += 1
    return counts


def _words(counts: dict) -> str:
    names = {"invalid_reply": "an invalid reply", "budget": "a budget", "timeout": "a timeout",
             "sandbox": "a sandbox that never served"}
    parts = [f"{n} ended by {names[k]}" for k, n in counts.items() if n]
    return "; ".join(parts) or "the environment gave no valid reward"


def _versions() -> dict:
    import torch
    import transformers
    import trl

    return {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__}


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _model_words(assignment: dict, settings: Settings) -> str:
    model = assignment["model"]
    named = f"{model['repo']} at {model['revision'][:7]}"
    if settings.tiny:
        return f"a tiny test model of the Qwen3.5 architecture in place of {named}"
    return named


def _model_path(assignment: dict, settings: Settings) -> str:
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
