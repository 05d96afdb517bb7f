"""`posttrainarena-train run`, simulated: the held-out branch's step order (reference §5.2) with
its step lines (`[posttrainarena] {name}: {command}` on stderr before each command), real task
snapshots from the stand-in's datasets, simulated evaluations and GRPO, and the result files of
§6 under `runs/{run_name}/` (plan, health and eval payloads, the sampler's plan and steps,
`score.json` with `score_v2`, `eval_task_outcomes.json`, `SCORE.md`, provenance) and the GRPO
stage's records (`grpo.py`).

Fault switches (the stand-in's `PUT /_standin/jobs`), by the guide's stage names: `fail_at`
raises there (with `reason`), `hang_at` stops the whole job there, `no_results` ends without the
score files, `mismatch` writes a `score_v2` that disagrees with its cells, `silent_s` keeps the
first baseline evaluation silent that long, `retry_s` has it retry its sandbox that long (a line
each half second, no model work), `log_mib` floods the log during training, `unsampled_task`
and `all_pass_task` shape GRPO's records (`grpo.py`), and the cell faults of `bench` (`script`,
`timeout`, `infra`)."""

from __future__ import annotations

import hashlib
import math
import os
import shlex
import sys
import time
import urllib.request
from argparse import Namespace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import SIMULATION, bench, grpo
from .common import faults, hang, load_json, pause, write_json
from .config import PipelineConfig, plan_view, read_task_ids
from .score import outcomes as cell_outcomes
from .score import score_v2

BENCHFLOW_COMMIT = "2a97db55947d6742b765ad34ddd91d74c20d625f"


def stage_of(step: str) -> str:
    """The guide's stage a step of the pipeline belongs to (as the arena reads its lines)."""
    if step.startswith("snapshot_"):
        return "snapshot"
    if step.startswith("baseline_eval"):
        return "baseline"
    if step == "grpo_gate_eval":
        return "gate"
    if step.startswith("grpo_rollout_"):
        return "training"
    if step.startswith("posttrain_eval"):
        return "heldout"
    return "collect"


_fired: set[str] = set()


def log(name: str, command: list[str]) -> None:
    """The step line the pipeline prints before a command; a stage's `fail_at` or `hang_at`
    fault fires right after the stage's first line, as a failure inside that stage would."""
    print(f"[posttrainarena] {name}: {shlex.join(command)}", file=sys.stderr, flush=True)
    stage, f = stage_of(name), faults()
    if stage in _fired:
        return
    _fired.add(stage)
    if f.get("hang_at") == stage:
        hang()
    if f.get("fail_at") == stage:
        raise RuntimeError(f.get("reason") or f"{stage} failed ({SIMULATION} fault)")


def env(name: str, label: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"Missing {label}: {name}")
    return value


def content_digest(task_dir: Path) -> str:
    """A task's digest over its relative paths and bytes, the task's own name normalised away."""
    h = hashlib.sha256()
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        h.update(path.relative_to(task_dir).as_posix().encode() + b"\0")
        h.update(path.read_bytes().replace(task_dir.name.encode(), b"<task>") + b"\0")
    return h.hexdigest()


class Run:
    def __init__(self, config: PipelineConfig, run_name: str, *, dry_run: bool, resume: bool):
        self.config, self.name, self.dry_run, self.resume = config, run_name, dry_run, resume
        self.root = config.output_root / run_name
        self.train_ids = read_task_ids(config.train_dataset.task_list)
        self.suites = [(s, read_task_ids(s.dataset.task_list)) for s in config.suites]
        eval_ids = [t for _, ids in self.suites for t in ids]
        if not self.train_ids or not eval_ids:
            raise ValueError("Training and eval task lists must both be non-empty")
        overlap = sorted(set(self.train_ids) & set(eval_ids))
        if overlap:
            raise ValueError("Training and eval task IDs must be disjoint; overlap: " + ", ".join(overlap))
        self.faults = faults()
        self.commands: list[dict] = []

    # ---- layout ----
    def p(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def suite_dir(self, index: int, suite_name: str) -> Path:
        return self.p("data", "eval") if index == 0 else self.p("data", f"eval-{suite_name}")

    def cells(self, stage: str) -> list[tuple[int, Any, list[str], int, str, Path, Path]]:
        """Every (suite, trial) cell of a held-out stage in run order, with its step name, jobs
        folder and results file; the primary suite's first trial keeps the legacy names."""
        out = []
        short = stage.split("_")[0]
        for i, (suite, ids) in enumerate(self.suites):
            for trial in range(1, self.config.evaluation.trials + 1):
                if i == 0 and trial == 1:
                    out.append((i, suite, ids, trial, stage, self.p("jobs", short), self.p("results", f"{stage}.json")))
                else:
                    tag = f"trial-{trial:02d}"
                    out.append((i, suite, ids, trial, f"{stage}.{suite.name}.t{trial:02d}",
                                self.p("jobs", f"{short}-suites", suite.name, tag),
                                self.p("results", f"{stage}-suites", suite.name, f"{tag}.json")))
        return out

    # ---- the run ----
    def plan(self) -> dict:
        c = self.config
        return {
            "run_name": self.name, "run_dir": str(self.root), "model": c.model, "model_revision": c.model_revision,
            "benchflow_commit": BENCHFLOW_COMMIT, "simulated": SIMULATION,
            "train_dataset": self.dataset_view(c.train_dataset), "eval_dataset": self.dataset_view(c.eval_dataset),
            "train_task_count": len(self.train_ids), "eval_task_count": len(self.suites[0][1]),
            "train_task_ids": self.train_ids, "eval_task_ids": self.suites[0][1],
            "eval_suites": [{"name": s.name, **self.dataset_view(s.dataset), "task_count": len(ids), "task_ids": ids}
                            for s, ids in self.suites],
            **plan_view(c),
            "stages": ["snapshot_train_tasks", "snapshot_eval_tasks", "validate_task_content_isolation",
                       *(["sync_base_endpoint"] if c.evaluation.sync_base_to_vllm else []), "baseline_eval",
                       "grpo_gate_eval", "conditional_grpo", "sync_grpo_endpoint", "final_eval", "compare_eval_lift",
                       "write_score_report"],
        }

    @staticmethod
    def dataset_view(d) -> dict:
        return {"repo_id": d.repo_id, "revision": d.revision, "task_list": str(d.task_list), "path": d.path}

    def prepare(self) -> None:
        plan_path = self.p("reports", "plan.json")
        current = self.plan()
        if self.resume and self.root.exists():
            if not plan_path.is_file():
                raise RuntimeError("Cannot resume a run without reports/plan.json; use a new run name or restore the original plan")
            existing = load_json(plan_path)
            changed = sorted(k for k in set(existing) | set(current) if existing.get(k) != current.get(k))
            if changed:
                raise RuntimeError("Cannot resume an incompatible run plan; use a new run name or restore the original recipe. Changed fields: " + ", ".join(changed))
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(plan_path, current)
        self.p("train_task_ids.txt").write_text("\n".join(self.train_ids) + "\n")
        self.p("eval_task_ids.txt").write_text("\n".join(self.suites[0][1]) + "\n")

    def snapshot(self, label: str, dataset, ids: list[str], dest: Path) -> None:
        marker = dest / ".benchflow-source.json"
        command = ["bench", "tasks", "snapshot-hf", dataset.repo_id, str(dest), "--path", dataset.path,
                   "--revision", dataset.revision, "--overwrite", *[x for t in ids for x in ("--include-task", t)]]
        log(f"snapshot_{label}_tasks", command)
        self.commands.append({"name": f"snapshot_{label}_tasks", "command": command, "returncode": 0})
        if self.dry_run or (self.resume and marker.is_file()):
            return
        bench.snapshot_hf(dataset.repo_id, dest, dataset.path, dataset.revision, ids)
        write_json(self.p("reports", f"{label}_snapshot_integrity.json"), {
            "schema_version": 1, "label": label, "task_ids": ids,
            "dataset": {"repo_id": dataset.repo_id, "revision": dataset.revision, "path": dataset.path},
            "resolved_revision": dataset.revision,
            "task_sha256": {t: content_digest(dest / t) for t in ids}, "reference_solutions_removed": [],
        })

    def check_servers(self, what: str) -> None:
        """The weight sync's stand-in: TRL's server must answer where the job said it is."""
        url = env(self.config.grpo.vllm_server_base_url_env, "TRL vLLM server endpoint").rstrip("/") + "/health/"
        try:
            with urllib.request.urlopen(url, timeout=10):
                pass
        except OSError as e:
            raise RuntimeError(f"{what}: the TRL vLLM server at {url} did not answer ({e})") from e

    def evaluate(self, step: str, model_role: str, tasks_dir: Path, ids: list[str], jobs: Path, result: Path,
                 *, policy: str | None, logprobs: bool = False) -> dict | None:
        c = self.config
        env_name = c.evaluation.base_model_env if model_role == "base" else c.evaluation.student_model_env
        model = f"${{{env_name}}}" if self.dry_run else os.environ.get(env_name, "")
        if not self.dry_run:
            if not model:
                raise RuntimeError(f"Missing OpenCode served model: {env_name}")
            if "/" not in model:
                raise RuntimeError(f"OpenCode served model from {env_name} must use provider/model format")
            env(c.evaluation.base_url_env, "OpenCode evaluation endpoint")
            env(c.evaluation.api_key_env, "OpenCode evaluation API key")
        health = result.with_name(result.stem + "_health.json")
        command = ["bench", "eval", "run", "--tasks-dir", str(tasks_dir), "--agent", c.harness.agent, "--model", model,
                   "--sandbox", c.sandbox, "--skill-mode", c.harness.skill_mode, "--concurrency", str(c.harness.concurrency),
                   "--usage-tracking", c.harness.usage_tracking, "--sandbox-setup-timeout", str(c.harness.sandbox_setup_timeout_sec),
                   "--agent-idle-timeout", str(c.harness.agent_idle_timeout_sec),
                   "--config-override", '{"agent":{"timeout_sec":%d}}' % c.harness.agent_timeout_sec,
                   "--expected-tasks", str(len(ids)), "--health-summary-out", str(health),
                   "--task-manifest-out", str(result.with_name(result.stem + "_task_manifest.json")),
                   "--run-config-out", str(result.with_name(result.stem + "_run_config.json")), "--jobs-dir", str(jobs),
                   "--agent-env", "OPENCODE_CONFIG_CONTENT={}"]
        if c.runtime.sandbox_user is not None:
            command += ["--sandbox-user", c.runtime.sandbox_user]
        if logprobs:
            command += ["--agent-env", "BENCHFLOW_CAPTURE_TOKEN_LOGPROBS=1"]
        for t in ids:
            command += ["--include", t]
        log(step, command)
        if self.dry_run:
            return None
        if self.resume and result.is_file() and health.is_file():
            return load_json(result)
        args = bench.parse_eval_run(command[3:])
        code = bench.eval_run(args, policy=policy, seed=self.name)
        self.commands.append({"name": step, "command": command, "returncode": code})
        summary_path = jobs / "summary.json"
        if code and not summary_path.is_file():
            raise RuntimeError(f"{step}: bench eval run exited with {code} and produced no summary")
        summary, rows = load_json(summary_path), load_json(health)["rows"]
        tolerated = int(math.ceil(c.harness.max_infra_error_fraction * len(ids)))
        if summary["errored"] + summary["verifier_errored"] > tolerated:
            raise RuntimeError("OpenCode evaluation contains agent or verifier errors"
                               + (f" ({summary['errored']} > {tolerated} tolerated)" if tolerated else ""))
        errored = [t for t in ids if cell_outcomes(rows, [t])[t]["infra_error"]]
        score = summary["passed"] / len(ids) if errored else summary["score_excl_errors_ratio"]
        payload = {"mode": "eval", "harness": c.harness.agent, "model": c.model, "served_model": model,
                   "task_ids": ids, "task_count": len(ids), "score": score, "summary": summary,
                   "health": load_json(health), "jobs_dir": str(jobs), "health_path": str(health),
                   "capture_token_logprobs": logprobs, "policy_sha256": policy or "base"}
        write_json(result, payload)
        return payload

    def heldout(self, stage: str, role: str, policy: str | None) -> list[dict | None]:
        payloads = []
        for i, suite, ids, trial, step, jobs, result in self.cells(stage):
            if stage == "baseline_eval" and i == 0 and trial == 1:
                if self.faults.get("silent_s"):
                    time.sleep(float(self.faults["silent_s"]))
                retry_until = time.monotonic() + float(self.faults.get("retry_s") or 0)
                while time.monotonic() < retry_until:
                    print("[bench] sandbox not ready (SIMULATED); retrying", file=sys.stderr, flush=True)
                    time.sleep(0.5)
            payloads.append(self.evaluate(step, role, self.suite_dir(i, suite.name), ids, jobs, result, policy=policy))
        return payloads

    def grpo(self, policy: str) -> dict:
        adapter = self.p("checkpoints", "grpo-adapter")
        if self.resume and (adapter / "train_metrics.json").is_file():
            return load_json(adapter / "train_metrics.json")
        g = self.config.grpo
        metrics = {**grpo.train(self, log), "policy_sha256": policy}
        write_json(adapter / "adapter_config.json", {"r": g.lora_r, "lora_alpha": g.lora_alpha, "simulated": SIMULATION})
        write_json(adapter / "train_metrics.json", metrics)
        return metrics

    def execute(self) -> dict:
        c = self.config
        self.prepare()
        started = datetime.now(timezone.utc).isoformat()
        self.snapshot("train", c.train_dataset, self.train_ids, self.p("data", "train"))
        for i, (suite, ids) in enumerate(self.suites):
            label = "eval" if i == 0 else f"eval-{suite.name}"
            self.snapshot(label, suite.dataset, ids, self.suite_dir(i, suite.name))
        policy = None
        if not self.dry_run:
            digests = sorted(content_digest(self.p("data", "train", t)) for t in self.train_ids)
            held = {content_digest(self.suite_dir(i, s.name) / t): t for i, (s, ids) in enumerate(self.suites) for t in ids}
            for t in self.train_ids:
                d = content_digest(self.p("data", "train", t))
                if d in held:
                    raise RuntimeError(f"Training and evaluation task packages overlap by canonical content digest: {t} == {held[d]}")
            write_json(self.p("reports", "task_content_isolation.json"), {
                "schema_version": 1, "algorithm": "sha256-relative-files-task-name-normalized",
                "train_task_count": len(self.train_ids), "eval_task_count": len(held), "overlap_count": 0})
            policy = hashlib.sha256("\n".join(digests).encode()).hexdigest()
            self.provenance("running", started)
            if c.evaluation.sync_base_to_vllm:
                self.check_servers("sync_base_endpoint")
                write_json(self.p("results", "base_endpoint_sync.json"), {"reference": c.model, "synced": True,
                                                                           "simulated": SIMULATION})
        baseline = self.heldout("baseline_eval", "base", None)
        gate_ids = self.train_ids[: c.grpo.gate_task_count]
        gate = self.evaluate("grpo_gate_eval", "base", self.p("data", "train"), gate_ids, self.p("jobs", "grpo-gate"),
                             self.p("results", "grpo_gate_eval.json"), policy=None)
        gate_score = gate["score"] if gate else None
        ran = c.grpo.enabled and (self.dry_run or c.grpo.run_policy == "always"
                                  or (gate_score is not None and gate_score >= c.grpo.threshold))
        training = None
        final: list[dict | None] = []
        if ran:
            training = None if self.dry_run else self.grpo(policy)
            if not self.dry_run:
                self.check_servers("sync_grpo_endpoint")
                write_json(self.p("results", "grpo_endpoint_sync.json"), {"checkpoint": str(self.p("checkpoints", "grpo-adapter")),
                                                                           "synced": True, "simulated": SIMULATION})
            final = self.heldout("posttrain_eval", "student", policy)
        if ran:
            lift = ["bench", "eval", "compare-lift", "--baseline", str(self.p("jobs", "baseline")),
                    "--trained", str(self.p("jobs", "posttrain")), "--out", str(self.p("reports", "EVAL_LIFT.md")),
                    "--json-out", str(self.p("reports", "eval_lift.json"))]
            log("compare_eval_lift", lift)
            if not self.dry_run:
                bench.compare_lift(self.p("jobs", "baseline"), self.p("jobs", "posttrain"), self.p("reports", "EVAL_LIFT.md"),
                                   self.p("reports", "eval_lift.json"))
        if self.faults.get("no_results"):
            return {"simulated": SIMULATION, "no_results": True}
        return self.report(baseline, gate_score, ran and not self.dry_run, training, final, started)

    def report(self, baseline, gate_score, grpo_ran, training, final, started) -> dict:
        c = self.config
        cells = self.cells("baseline_eval")
        per_suite = []
        arms: dict[str, Any] = {"baseline": {"stage": "baseline_eval", "cells": []}, "final": None}
        final_cells = self.cells("posttrain_eval") if final else []
        if final:
            arms["final"] = {"stage": "posttrain_eval", "cells": []}
        for i, (suite, ids) in enumerate(self.suites):
            entry = {"name": suite.name, "dataset": self.dataset_view(suite.dataset), "task_ids": ids,
                     "baseline": None, "final": None}
            for key, group, payloads in (("baseline", cells, baseline), ("final", final_cells, final)):
                maps = []
                for (j, _, _, trial, step, jobs, _), payload in zip(group, payloads):
                    if j != i:
                        continue
                    o = cell_outcomes(payload["health"]["rows"], ids) if payload else None
                    arms[key]["cells"].append({"suite": suite.name, "trial": trial, "stage": step, "jobs_dir": str(jobs),
                                               "score": payload["score"] if payload else None, "outcomes": o})
                    if o is not None:
                        maps.append(o)
                entry[key] = maps or None
            per_suite.append(entry)
        v2 = score_v2(per_suite, c.evaluation.trials, "baseline_eval", "posttrain_eval" if final else None)
        if self.faults.get("mismatch") and v2["pooled"]["delta"]:
            v2["pooled"]["delta"]["delta"] += 0.05
        base_score = baseline[0]["score"] if baseline and baseline[0] else None
        after = final[0]["score"] if final and final[0] else base_score
        score = {
            "schema_version": 1, "run_name": self.name, "model": c.model, "model_revision": c.model_revision,
            "final_model": str(self.p("checkpoints", "grpo-merged")) if grpo_ran else c.model,
            "train_task_ids": self.train_ids, "eval_task_ids": self.suites[0][1], "baseline_score": base_score,
            "sft_score": None, "grpo_gate_score": gate_score, "score_after_posttrain": after,
            "delta_score": (after - base_score) if after is not None and base_score is not None else None,
            "grpo_threshold": c.grpo.threshold, "grpo_run_policy": c.grpo.run_policy, "grpo_planned": c.grpo.enabled,
            "grpo_ran": grpo_ran, "grpo_effective_update": True if grpo_ran else None,
            "grpo_training": {"training_recipe": "simulated",
                              "metrics": {k: v for k, v in training.items() if k not in ("task_stats", "sampler")}}
            if training else None,
            "checkpoints": {"sft_adapter": None, "sft_merged": None,
                            "grpo_adapter": str(self.p("checkpoints", "grpo-adapter")) if grpo_ran else None,
                            "grpo_merged": None},
            **plan_view(c), "benchflow_commit": BENCHFLOW_COMMIT,
            "train_dataset": self.dataset_view(c.train_dataset), "eval_dataset": self.dataset_view(c.eval_dataset),
            "commands": self.commands, "score_v2": v2, "simulated": SIMULATION,
        }
        if not self.dry_run:
            write_json(self.p("reports", "eval_task_outcomes.json"), {"schema_version": 1, "pass_threshold": 1.0, "arms": arms})
        write_json(self.p("reports", "score.json"), score)
        self.p("reports", "SCORE.md").write_text(
            f"# Post-Training Score ({SIMULATION})\n\n- Base model: `{c.model}`\n- Baseline score: `{base_score}`\n"
            f"- Final score: `{after}`\n- GRPO ran: `{grpo_ran}`\n", encoding="utf-8")
        self.provenance("complete", started)
        return score

    def provenance(self, status: str, started: str) -> None:
        write_json(self.p("reports", "provenance.json"), {
            "schema_version": 1, "run_name": self.name, "run_dir": str(self.root), "status": status,
            "dry_run": self.dry_run, "written_at": datetime.now(timezone.utc).isoformat(), "started_at": started,
            "pipeline": {"commit": os.environ.get("POSTTRAINARENA_PIPELINE_COMMIT"), "commit_source": "environment"},
            "model": {"id": self.config.model, "revision": self.config.model_revision}, "simulated": SIMULATION})


def run(args: Namespace, config: PipelineConfig) -> dict:
    return Run(config, args.run_name, dry_run=args.dry_run, resume=args.resume).execute()
