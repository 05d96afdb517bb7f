"""GRPO, simulated: the sampler's plan, one rollout line per rollout attempt, TRL's line for each
optimizer step as transformers prints it, and the GRPO stage's records in the jobs folder
(`jobs/grpo-train/`: `sampler_plan.json` before training; `train_task_stats.json`,
`train_sampler.json` and `training_diagnostics.json` after it, the first two also copied to
`reports/`), in the shapes `grpo.py` and `sampler.py` write them. No model: each rollout's reward
is a seeded draw around the task's simulated pass rate.

Fault switches: `unsampled_task` is never drawn by the sampler; `all_pass_task` passes every
rollout (its groups are all-pass)."""

from __future__ import annotations

import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from . import SIMULATION
from .common import faults, pause, unit, write_json

PASS_THRESHOLD = 1.0


def trl_line(logs: dict[str, Any]) -> str:
    """What transformers' ProgressCallback prints for a `Trainer.log` call: the dict's `repr`
    with every float formatted `f"{v:.4g}"` (ints and None as they are)."""
    shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items()}
    return str(shown)


def task_stats(task_ids: list[str], records: list[dict], masked: list[dict], num_generations: int) -> dict:
    """Per-task accounting over every train task, sampled or not, as the pipeline documents
    `sampler.train_task_stats`: rollouts = scored + masked; a group has signal when two of its
    scored rewards differ, is all-pass when every one passes, all-fail when every one is 0, and
    fully masked with none scored."""
    rows: dict[str, dict[str, Any]] = {}
    groups: dict[int, dict[str, Any]] = {}
    for r in records:
        groups.setdefault(r["group_index"], {"task": r["task_id"], "rewards": [], "steps": set()})["rewards"].append(r["reward"])
    for r in masked:
        groups.setdefault(r["group_index"], {"task": r["task_id"], "rewards": [], "steps": set()})
    for t in task_ids:
        mine = [r for r in records if r["task_id"] == t]
        lost = [r for r in masked if r["task_id"] == t]
        rewards = [float(r["reward"]) for r in mine]
        passes = sum(1 for x in rewards if x >= PASS_THRESHOLD)
        own = [g for g in groups.values() if g["task"] == t]
        mean = sum(rewards) / len(rewards) if rewards else None
        rows[t] = {
            "sampled_steps": sorted({r["global_step"] for r in mine + lost}),
            "groups": len(own),
            "rollouts": len(mine) + len(lost),
            "scored_rollouts": len(rewards),
            "passes": passes,
            "pass_rate": passes / len(rewards) if rewards else None,
            "reward_mean": mean,
            "reward_variance": sum((x - mean) ** 2 for x in rewards) / len(rewards) if rewards else None,
            "infra_errors": sum(1 for r in lost if r.get("kind") != "trajectory"),
            "trajectory_errors": sum(1 for r in lost if r.get("kind") == "trajectory"),
            "truncated_rollouts": sum(1 for r in mine if r.get("truncated")),
            "failed_attempts": 0,
            "groups_with_variance": sum(1 for g in own if len(g["rewards"]) >= 2 and max(g["rewards"]) - min(g["rewards"]) > 1e-12),
            "all_pass_groups": sum(1 for g in own if g["rewards"] and min(g["rewards"]) >= PASS_THRESHOLD
                                   and not (len(g["rewards"]) >= 2 and max(g["rewards"]) - min(g["rewards"]) > 1e-12)),
            "all_fail_groups": sum(1 for g in own if g["rewards"] and max(g["rewards"]) <= 0.0
                                   and not (len(g["rewards"]) >= 2 and max(g["rewards"]) - min(g["rewards"]) > 1e-12)),
            "fully_masked_groups": sum(1 for g in own if not g["rewards"]),
        }
    keys = ["groups", "rollouts", "scored_rollouts", "passes", "infra_errors", "trajectory_errors", "truncated_rollouts",
            "failed_attempts", "groups_with_variance", "all_pass_groups", "all_fail_groups", "fully_masked_groups"]
    totals: dict[str, Any] = {k: sum(row[k] for row in rows.values()) for k in keys}
    lost_total = totals["infra_errors"] + totals["trajectory_errors"]
    totals["masked_rollout_fraction"] = lost_total / totals["rollouts"] if totals["rollouts"] else None
    unsampled = [t for t, row in rows.items() if not row["rollouts"]]
    return {"schema_version": 1, "num_generations": num_generations, "pass_threshold": PASS_THRESHOLD,
            "task_count": len(task_ids), "sampled_task_count": len(task_ids) - len(unsampled),
            "unsampled_task_ids": unsampled, "totals": totals, "tasks": rows}


def train(run, log: Callable[[str, list[str]], None]) -> dict:
    """The GRPO stage: `run` is the simulated pipeline's run (its config, train tasks, paths)."""
    c, g = run.config, run.config.grpo
    jobs_dir: Path = run.p("jobs", "grpo-train")
    f = faults()
    n = c.runtime.num_generations
    batch = c.generation_batch
    prompts = max(1, batch // n)
    planned = g.max_steps or max(1, math.ceil(g.num_train_epochs * len(run.train_ids) / prompts))
    plan = {"schema_version": 1, "sampler": g.task_sampler, "seed": g.seed, "collection_size": len(run.train_ids),
            "task_ids": run.train_ids, "prompts_per_step": prompts, "num_generations": n,
            "generation_batch_size": batch, "gradient_accumulation_steps": g.gradient_accumulation_steps,
            "max_steps": g.max_steps, "num_train_epochs": None if g.max_steps else g.num_train_epochs,
            "rollout_failure_policy": g.rollout_failure_policy,
            "description": f"{SIMULATION}: TRL's sampler played as the train tasks in turn",
            "planned_steps": None, "planned_exposures": None}
    write_json(jobs_dir / "sampler_plan.json", plan)
    if c.tracking.report_to == "trackio":
        # What trackio.init prints; the simulation sends nothing anywhere.
        space = os.environ.get("TRACKIO_SPACE_ID")
        print(f"* Trackio project initialized: huggingface ({SIMULATION}: nothing is logged)", flush=True)
        print(f"* Created new run: {run.name}-grpo" + (f" on the Space {space}" if space else " (local only)"), flush=True)
    drawn = [t for t in run.train_ids if t != f.get("unsampled_task")] or run.train_ids
    flood = int(float(f.get("log_mib") or 0) * (1 << 20))
    filler = "[trl] " + "x" * 200
    records: list[dict] = []
    batches: list[dict] = []
    history: list[dict] = []
    group = 0
    for step in range(planned):
        tasks = [drawn[(step * prompts + k) % len(drawn)] for k in range(prompts)]
        rewards: list[float] = []
        for index in range(batch):
            task = tasks[index // n]
            jobs = jobs_dir / f"step-{step:06d}" / "rank-00" / f"rollout-{index:06d}" / "attempt-01"
            log(f"grpo_rollout_{step:06d}_{index:06d}",
                ["bench", "eval", "run", "--tasks-dir", str(run.p("data", "train")), "--agent", c.harness.agent,
                 "--jobs-dir", str(jobs / "jobs"), "--agent-env", "BENCHFLOW_CAPTURE_TOKEN_LOGPROBS=1", "--include", task])
            p = 1.0 if task == f.get("all_pass_task") else min(0.95, 0.15 + 0.6 * unit("base", task) + 0.02 * step)
            reward = 1.0 if unit("rollout", run.name, str(step), str(index)) < p else 0.0
            rewards.append(reward)
            records.append({"task_id": task, "global_step": step, "group_index": group + index // n,
                            "reward": reward, "truncated": False})
        group += prompts
        while flood > 0:
            print(filler, file=sys.stderr)
            flood -= len(filler) + 1
        batches.append({"generation_index": step, "global_step": step, "task_ids": tasks, "rollouts": batch,
                        "masked_rollouts": 0})
        history.append(step_logs(run.name, step, planned, g.learning_rate, rewards, n))
        # TRL logs the step once its update is done: after the rollouts, before the next step's.
        print(trl_line(history[-1]), flush=True)
        history[-1]["step"] = step + 1
        pause(0.5)
    stats = task_stats(run.train_ids, records, [], n)
    sampler = {**plan, "trainer": {"simulated": SIMULATION}, "steps": batches,
               "actual_exposures": {t: sum(b["task_ids"].count(t) for b in batches) for t in run.train_ids},
               "plan_mismatch_steps": None}
    train_loss = statistics.fmean(h["loss"] for h in history)
    summary = {"train_runtime": 0.5 * planned, "train_samples_per_second": 1.0, "train_steps_per_second": 1.0,
               "train_loss": train_loss, "epoch": 1.0}
    print(trl_line(summary), flush=True)
    groups_with_variance = stats["totals"]["groups_with_variance"]
    diagnostics = {
        "training_recipe": {"simulated": SIMULATION, "learning_rate": g.learning_rate, "lora_r": g.lora_r},
        "reward_groups": {"group_count": group, "complete_group_count": group,
                          "nonzero_variance_group_count": groups_with_variance, "incomplete_group_count": 0},
        "lora_b_update": {"available": True, "tensor_count": 8, "nonzero_tensor_count": 8 if groups_with_variance else 0,
                          "nonfinite_tensor_count": 0, "max_abs": 0.001 if groups_with_variance else 0.0},
        "metrics": summary,
        "training_log": [*history, {**summary, "step": planned}],
    }
    write_json(jobs_dir / "train_task_stats.json", stats)
    write_json(jobs_dir / "train_sampler.json", sampler)
    write_json(jobs_dir / "training_diagnostics.json", diagnostics)
    # Branch H copies the first two to reports/ from the merged checkpoint's train_metrics.json.
    write_json(run.p("reports", "train_task_stats.json"), stats)
    write_json(run.p("reports", "train_sampler.json"), sampler)
    return {"simulated": SIMULATION, "global_step": planned, "task_stats": stats, "sampler": sampler,
            "learning_rate": g.learning_rate, "lora_r": g.lora_r, "lora_alpha": g.lora_alpha}


def step_logs(seed: str, step: int, planned: int, learning_rate: float, rewards: list[float], n: int) -> dict:
    """TRL's numbers for one step, in the order GRPOTrainer logs them (a subset of its keys)."""
    groups = [rewards[i:i + n] for i in range(0, len(rewards), n)]
    zero_std = sum(1 for grp in groups if max(grp) == min(grp)) / len(groups)
    mean = statistics.fmean(rewards)
    # TRL's reward_std is the mean over groups of each group's standard deviation.
    spread = statistics.fmean(statistics.stdev(grp) if len(grp) > 1 else 0.0 for grp in groups)
    signal = 1.0 - zero_std
    return {
        "loss": 0.002 + 0.03 * signal * unit("loss", seed, str(step)),
        "grad_norm": signal * (0.2 + 0.5 * unit("grad", seed, str(step))),
        "learning_rate": learning_rate * (1 - step / max(1, planned)),
        "num_tokens": float(512 * len(rewards) * (step + 1)),
        "completions/mean_length": 200.0 + 300.0 * unit("length", seed, str(step)),
        "rewards/verifier_reward/mean": mean,
        "rewards/verifier_reward/std": statistics.stdev(rewards) if len(rewards) > 1 else 0.0,
        "reward": mean,
        "reward_std": spread,
        "frac_reward_zero_std": zero_std,
        "entropy": 0.4 + 0.3 * unit("entropy", seed, str(step)),
        "step_time": 0.5,
        "epoch": (step + 1) / max(1, planned),
    }
