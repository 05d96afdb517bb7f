"""BenchFlow's `bench`, simulated: `bench tasks snapshot-hf` downloads the tasks for real (from the
stand-in's datasets, through `huggingface_hub`), `bench eval run` attempts nothing and draws each
task's result from a seeded model, writing the files the pipeline reads (`summary.json` in the
jobs folder, the health summary, the task manifest and the run config), and `bench eval
compare-lift` compares two jobs folders. BenchFlow's own schemas are not public beyond the fields
the pipeline reads (reference §6.3, §9.5); these files hold those fields and say they are simulated.

A cell's result, in order: the job's `script` fault (`{task: {arm: [outcome per trial]}}`, arms
`baseline`, `gate`, `final`; task `*` for every task it does not name), then the seeded model (a base rate per task; the trained policy adds
an effect drawn from what it trained on), then the `timeout` and `infra` faults (`["STEP:TASK"]`).
Outcomes: `pass` (reward 1), `fail` (0), `partial` (0.5, a failure), `timeout` (the agent ran out
of time and the verifier scored it 0: a scored failure) and `infra` (no scored row)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path

from . import SIMULATION
from .common import faults, load_json, pause, unit, write_json

def step_of(health_out: Path) -> str:
    """The pipeline step a health summary belongs to, from where the pipeline puts it:
    `results/baseline_eval_health.json` → `baseline_eval`,
    `results/baseline_eval-suites/tb2/trial-02_health.json` → `baseline_eval.tb2.t02`."""
    parts = health_out.parts
    if len(parts) >= 3 and parts[-3].endswith("-suites"):
        stage = parts[-3][: -len("-suites")]
        trial = parts[-1].split("_health.json")[0].split("-")[-1]
        return f"{stage}.{parts[-2]}.t{int(trial):02d}"
    return health_out.name[: -len("_health.json")]


def arm_of(step: str) -> tuple[str, int]:
    name = step.split(".")[0]
    arm = {"baseline_eval": "baseline", "grpo_gate_eval": "gate", "posttrain_eval": "final", "sft_eval": "final"}.get(
        name, "baseline"
    )
    trial = int(step.rsplit(".t", 1)[1]) if ".t" in step else 1
    return arm, trial


def draw(step: str, task: str, policy: str | None, seed: str) -> str:
    arm, trial = arm_of(step)
    f = faults()
    script = f.get("script") or {}
    if task in script or "*" in script:
        planned = script.get(task, script.get("*", {})).get(arm) or []
        outcome = planned[trial - 1] if trial - 1 < len(planned) else "fail"
    else:
        base = 0.05 + 0.55 * unit("base", task)
        effect = 0.0 if policy is None else -0.04 + 0.16 * unit("effect", policy) + 0.1 * (unit("task", task, policy) - 0.5)
        p = min(1.0, max(0.0, base + effect))
        outcome = "pass" if unit("cell", seed, step, task) < p else "fail"
    key = f"{step}:{task}"
    if key in (f.get("timeout") or []):
        outcome = "timeout"
    if key in (f.get("infra") or []):
        outcome = "infra"
    return outcome


def health_row(task: str, outcome: str, timeout_s: int) -> dict:
    row = {"task_id": task, "scored": True, "error": None, "error_category": None, "verifier_error": None,
           "valid_llm_trajectory": True, "reward": 1.0 if outcome == "pass" else 0.5 if outcome == "partial" else 0.0}
    if outcome == "timeout":
        row.update(error=f"Agent exceeded its wall-clock budget of {timeout_s} s", error_category="timeout")
    elif outcome == "infra":
        row.update(scored=False, reward=None, valid_llm_trajectory=False,
                   error="Sandbox did not start within its setup timeout", error_category="sandbox_setup")
    return row


def endpoint_answers() -> bool:
    """Whether the model endpoint answers as a sandbox would reach it (`GET …/models` with the key)."""
    base = os.environ.get("BENCHFLOW_PROVIDER_BASE_URL", "")
    key = os.environ.get("BENCHFLOW_PROVIDER_API_KEY", "")
    if not base.startswith(("http://", "https://")):
        return False
    request = urllib.request.Request(base.rstrip("/") + "/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status == 200
    except OSError:
        return False


def eval_run(args: argparse.Namespace, *, policy: str | None = None, seed: str = "") -> int:
    """`bench eval run`: exits 1 when any task errored (the summary is written all the same)."""
    jobs = Path(args.jobs_dir)
    step = step_of(Path(args.health_summary_out))
    if not endpoint_answers():
        print(f"bench: {SIMULATION}: the model endpoint BENCHFLOW_PROVIDER_BASE_URL did not answer", file=sys.stderr)
        return 1
    timeout_s = json.loads(args.config_override).get("agent", {}).get("timeout_sec", 900)
    tasks = list(dict.fromkeys(args.include))
    missing = [t for t in tasks if not (Path(args.tasks_dir) / t).is_dir()]
    if missing:
        print(f"bench: tasks not found in {args.tasks_dir}: {', '.join(missing)}", file=sys.stderr)
        return 2
    pause()
    rows = [health_row(t, draw(step, t, policy, seed), timeout_s) for t in tasks]
    jobs.mkdir(parents=True, exist_ok=True)
    for row in rows:
        write_json(jobs / row["task_id"] / "result.json", {"simulated": SIMULATION, **row})
    total = len(rows)
    passed = sum(1 for r in rows if r["scored"] and (r["reward"] or 0) >= 1.0)
    errored = sum(1 for r in rows if not r["scored"])
    scored = total - errored
    write_json(jobs / "summary.json", {
        "simulated": SIMULATION, "model": args.model, "total": total, "passed": passed, "errored": errored,
        "verifier_errored": 0, "telemetry_coverage": scored / total if total else 1.0,
        "score_ratio": passed / total if total else 0.0,
        "score_excl_errors_ratio": passed / scored if scored else 0.0,
    })
    write_json(Path(args.health_summary_out), {
        "simulated": SIMULATION, "rows": rows, "total_rows": total, "scored_rows": scored, "unscored_rows": errored,
        "missing_llm_trajectory": errored, "malformed_llm_trajectory": 0,
    })
    write_json(Path(args.task_manifest_out), {"simulated": SIMULATION, "task_ids": tasks, "tasks_dir": args.tasks_dir})
    write_json(Path(args.run_config_out), {"simulated": SIMULATION, "agent": args.agent, "model": args.model,
                                           "sandbox": args.sandbox, "concurrency": args.concurrency})
    return 1 if errored else 0


def snapshot_hf(repo: str, dest: Path, path: str, revision: str, task_ids: list[str]) -> dict:
    """Downloads the tasks at the revision into `dest/{task}/`; fails on a task the dataset lacks."""
    from huggingface_hub import snapshot_download

    prefix = f"{path.strip('/')}/" if path.strip("/") else ""
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        snapshot_download(repo_id=repo, repo_type="dataset", revision=revision, local_dir=tmp,
                          allow_patterns=[f"{prefix}{t}/**" for t in task_ids], token=os.environ.get("HF_TOKEN"))
        missing = [t for t in task_ids if not (Path(tmp) / prefix / t).is_dir()]
        if missing:
            raise SystemExit(f"bench: {repo}@{revision} has no task {', '.join(missing)} under `{path}`")
        dest.mkdir(parents=True, exist_ok=True)
        for t in task_ids:
            shutil.rmtree(dest / t, ignore_errors=True)
            shutil.move(str(Path(tmp) / prefix / t), str(dest / t))
    marker = {"repo_id": repo, "revision": revision, "path": path, "task_ids": task_ids, "resolved_revision": revision}
    write_json(dest / ".benchflow-source.json", marker)
    return marker


def compare_lift(baseline: Path, trained: Path, out: Path, json_out: Path) -> None:
    b, t = load_json(baseline / "summary.json"), load_json(trained / "summary.json")
    lift = {"simulated": SIMULATION, "baseline": {"passed": b["passed"], "total": b["total"]},
            "trained": {"passed": t["passed"], "total": t["total"]},
            "lift": t["score_ratio"] - b["score_ratio"]}
    write_json(json_out, lift)
    out.write_text(f"# Eval lift ({SIMULATION})\n\n- Baseline: {b['passed']}/{b['total']}\n"
                   f"- Trained: {t['passed']}/{t['total']}\n", encoding="utf-8")


def eval_parser(sub) -> argparse.ArgumentParser:
    run = sub.add_parser("run")
    run.add_argument("--tasks-dir", required=True)
    run.add_argument("--agent", required=True)
    run.add_argument("--model", required=True)
    run.add_argument("--sandbox", required=True)
    run.add_argument("--skill-mode", default="no-skill")
    run.add_argument("--concurrency", type=int, default=1)
    run.add_argument("--usage-tracking", default="required")
    run.add_argument("--sandbox-setup-timeout", type=int, default=300)
    run.add_argument("--agent-idle-timeout", type=int, default=300)
    run.add_argument("--config-override", default="{}")
    run.add_argument("--expected-tasks", type=int, required=True)
    run.add_argument("--health-summary-out", required=True)
    run.add_argument("--task-manifest-out", required=True)
    run.add_argument("--run-config-out", required=True)
    run.add_argument("--jobs-dir", required=True)
    run.add_argument("--agent-env", action="append", default=[])
    run.add_argument("--sandbox-user")
    run.add_argument("--reasoning-effort")
    run.add_argument("--include", action="append", default=[], required=True)
    return run


def parse_eval_run(argv: list[str]) -> argparse.Namespace:
    """The flags of one `bench eval run` command line, as the command itself would read them."""
    parser = argparse.ArgumentParser(prog="bench eval")
    eval_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["run", *argv])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description=f"BenchFlow's bench ({SIMULATION})")
    groups = parser.add_subparsers(dest="group", required=True)
    tasks = groups.add_parser("tasks").add_subparsers(dest="command", required=True)
    snap = tasks.add_parser("snapshot-hf")
    snap.add_argument("repo")
    snap.add_argument("dest")
    snap.add_argument("--path", default="tasks")
    snap.add_argument("--revision", required=True)
    snap.add_argument("--overwrite", action="store_true")
    snap.add_argument("--include-task", action="append", default=[], required=True)
    evals = groups.add_parser("eval").add_subparsers(dest="command", required=True)
    eval_parser(evals)
    lift = evals.add_parser("compare-lift")
    lift.add_argument("--baseline", required=True)
    lift.add_argument("--trained", required=True)
    lift.add_argument("--out", required=True)
    lift.add_argument("--json-out", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.group == "tasks":
        snapshot_hf(args.repo, Path(args.dest), args.path, args.revision, args.include_task)
        return 0
    if args.command == "run":
        return eval_run(args)
    compare_lift(Path(args.baseline), Path(args.trained), Path(args.out), Path(args.json_out))
    return 0
