"""The pipeline's publish commands, simulated after reference §6.7: `publish-run` writes
`reports/hub_run.json` and uploads the run folder to `runs/{run_id}` of the artifact dataset
(without checkpoints and the task snapshots), `publish-failure` does the same with the redacted
error and the checkpoints (for a resume), `publish-status` only records a status; each updates
the leaderboard dataset (`leaderboard.json`, `runs/{run_id}.json`, `README.md`) with the
pipeline's merge rule, committing on the head it read and retrying on a conflict. A missing
leaderboard dataset is created public, as the pipeline does; the arena creates it private first.

Fault switch: `die_at = "publish"` kills the job before `publish-run` uploads anything."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import SIMULATION
from .common import die, faults, load_json, write_json

REDACTED = ("HF_TOKEN", "DAYTONA_API_KEY", "GLM_API_KEY", "GLM_BASE_URL", "QWEN_API_KEY", "QWEN_BASE_URL",
            "OPENROUTER_API_KEY", "TRL_VLLM_SERVER_BASE_URL", "WANDB_API_KEY")


def api():
    from huggingface_hub import HfApi

    return HfApi(token=os.environ.get("HF_TOKEN"))


def redact(error: str) -> str:
    names = [*REDACTED, *(k for k in os.environ if k.startswith("BENCHFLOW_"))]
    for name in names:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            error = error.replace(value, f"<{name}:redacted>")
    return error[:2000]


def now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def record(run_dir: Path, a, status: str, error: str | None = None) -> dict:
    score_path = run_dir / "reports" / "score.json"
    score = load_json(score_path) if score_path.is_file() else {}
    artifact = getattr(a, "artifact_repo", None)
    return {
        "schema_version": 1, "run_id": a.run_id, "submission_id": a.submission_id, "team_name": a.team_name,
        "status": status, "job_id": getattr(a, "job_id", None), "model": score.get("model"),
        "model_revision": score.get("model_revision"), "final_model": score.get("final_model"),
        "baseline_score": score.get("baseline_score"), "score_after_posttrain": score.get("score_after_posttrain"),
        "delta_score": score.get("delta_score"), "macro_benchmark_delta": None, "benchmark_scores": [],
        "grpo_ran": score.get("grpo_ran"), "grpo_effective_update": score.get("grpo_effective_update"),
        "train_task_count": len(score.get("train_task_ids") or []) or None,
        "eval_task_count": len(score.get("eval_task_ids") or []) or None,
        "artifact_url": f"https://huggingface.co/datasets/{artifact}/tree/main/runs/{a.run_id}" if artifact else None,
        "model_url": None, "error": error, "updated_at": now(),
    }


def _merge(old: dict | None, new: dict) -> dict:
    """A later record never clears an earlier non-null value."""
    merged = dict(old or {})
    merged.update({k: v for k, v in new.items() if v is not None})
    for key in ("run_id", "submission_id", "status"):
        if not merged.get(key):
            raise ValueError(f"leaderboard record missing: {key}")
    return merged


def publish_record(repo_id: str, rec: dict) -> dict:
    from huggingface_hub import CommitOperationAdd, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

    h = api()
    h.create_repo(repo_id, repo_type="dataset", private=False, exist_ok=True)
    for _ in range(4):
        sha = h.repo_info(repo_id, repo_type="dataset").sha
        try:
            board = json.loads(Path(hf_hub_download(repo_id, "leaderboard.json", repo_type="dataset", revision=sha,
                                                    token=os.environ.get("HF_TOKEN"))).read_text())
        except EntryNotFoundError:
            board = []
        by_id = {r["run_id"]: r for r in board}
        by_id[rec["run_id"]] = _merge(by_id.get(rec["run_id"]), rec)
        rows = sorted(by_id.values(), key=lambda r: (r.get("status") != "succeeded", -(r.get("delta_score") or 0), r["run_id"]))
        table = "\n".join(f"| {i + 1} | {r['submission_id']} | {r['status']} | {r.get('baseline_score')} | "
                          f"{r.get('score_after_posttrain')} | {r.get('delta_score')} | {r['run_id']} |" for i, r in enumerate(rows))
        readme = f"---\npretty_name: PostTrain Arena leaderboard\n---\n# PostTrain Arena leaderboard ({SIMULATION})\n\n| Rank | Submission | Status | Baseline | Final | Delta | Run |\n|---|---|---|---|---|---|---|\n{table}\n"
        ops = [CommitOperationAdd("leaderboard.json", json.dumps(rows, indent=2, sort_keys=True).encode()),
               CommitOperationAdd(f"runs/{rec['run_id']}.json", json.dumps(by_id[rec["run_id"]], indent=2, sort_keys=True).encode()),
               CommitOperationAdd("README.md", readme.encode())]
        try:
            info = h.create_commit(repo_id, ops, repo_type="dataset", parent_commit=sha,
                                   commit_message=f"Update PostTrain Arena run {rec['run_id']}")
            return {"repo_id": repo_id, "commit": info.oid, "url": f"https://huggingface.co/datasets/{repo_id}",
                    "record_count": len(rows)}
        except HfHubHTTPError as e:
            if e.response is None or e.response.status_code not in (409, 412):
                raise
    raise RuntimeError("leaderboard update conflicted repeatedly")


def upload(a, run_dir: Path, ignore: list[str], message: str) -> str:
    h = api()
    h.create_repo(a.artifact_repo, repo_type="dataset", private=a.private_artifacts, exist_ok=True)
    h.update_repo_settings(a.artifact_repo, repo_type="dataset", private=a.private_artifacts)
    info = h.upload_folder(repo_id=a.artifact_repo, repo_type="dataset", folder_path=str(run_dir),
                           path_in_repo=f"runs/{a.run_id}", ignore_patterns=ignore, commit_message=message)
    return info.oid


def publish_run(a) -> dict:
    if faults().get("die_at") == "publish":
        die()
    run_dir = Path(a.run_dir)
    score = load_json(run_dir / "reports" / "score.json")
    dry = score.get("baseline_score") is None and score.get("score_after_posttrain") is None
    rec = record(run_dir, a, "dry-run" if dry else "succeeded")
    write_json(run_dir / "reports" / "hub_run.json", rec)
    commit = upload(a, run_dir, ["checkpoints/**", "data/train/**", "data/eval/**"], f"Publish PostTrain Arena run {a.run_id}")
    return {"run": rec, "artifact_commit": commit, "artifact_url": rec["artifact_url"], "model": None,
            "leaderboard": publish_record(a.leaderboard_repo, rec)}


def publish_failure(a) -> dict:
    run_dir = Path(a.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rec = record(run_dir, a, "failed", redact(a.error))
    write_json(run_dir / "reports" / "hub_run.json", rec)
    commit = upload(a, run_dir, ["data/train/**", "data/eval/**"], f"Checkpoint failed PostTrain Arena run {a.run_id}")
    resume = any((run_dir / "checkpoints").glob("*/train_metrics.json")) or (run_dir / "reports" / "plan.json").is_file()
    return {"run": rec, "artifact_commit": commit, "artifact_url": rec["artifact_url"], "resume_available": resume,
            "leaderboard": publish_record(a.leaderboard_repo, rec)}


def publish_status(a) -> dict:
    if a.status not in ("queued", "running"):
        raise ValueError("publish_status supports queued or running")
    return publish_record(a.leaderboard_repo, record(Path(a.run_dir), a, a.status))


def summary_of(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)

