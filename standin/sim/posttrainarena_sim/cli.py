"""`posttrainarena-train`, simulated: the subcommands and flags of reference §3 (argparse, so a
missing or unknown flag exits 2 with argparse's own message). `validate`, `plan`, `run`, the
three publish commands and `model-bridge` are simulated; the others parse their flags and say
they are not simulated. Results are JSON on stdout; step lines go to stderr."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import SIMULATION
from .config import load_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posttrainarena-train")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("validate", "plan", "run"):
        c = sub.add_parser(name)
        c.add_argument("--config", type=Path, required=True)
        if name != "validate":
            c.add_argument("--run-name")
        if name == "run":
            c.add_argument("--dry-run", action="store_true")
            c.add_argument("--resume", action="store_true")
    prepare = sub.add_parser("prepare-submission")
    for flag in ("--entry", "--base-config", "--out"):
        prepare.add_argument(flag, type=Path, required=True)
    prepare.add_argument("--dataset-repo", required=True)
    prepare.add_argument("--dataset-revision")
    prepare.add_argument("--upload", action="store_true")
    vis = prepare.add_mutually_exclusive_group()
    vis.add_argument("--private", dest="private", action="store_true")
    vis.add_argument("--public", dest="private", action="store_false")
    submit = sub.add_parser("hf-job-submit")
    submit.add_argument("--config", type=Path, required=True)
    submit.add_argument("--bundle-dir", type=Path, required=True)
    for flag in ("--run-id", "--submission-id", "--team-name", "--artifact-repo", "--leaderboard-repo"):
        submit.add_argument(flag, required=True)
    submit.add_argument("--model-repo")
    submit.add_argument("--public-model", action="store_true")
    submit.add_argument("--benchmarks", type=Path)
    submit.add_argument("--posttrainarena-ref")
    submit.add_argument("--flavor", default="h100")
    submit.add_argument("--namespace")
    submit.add_argument("--timeout", default="6h")
    submit.add_argument("--secret-env", action="append")
    submit.add_argument("--pipeline-dry-run", action="store_true")
    submit.add_argument("--launcher-dry-run", action="store_true")
    artifacts(submit)
    submit.add_argument("--wait", action="store_true")
    status = sub.add_parser("hf-job-status")
    status.add_argument("--job-id", required=True)
    status.add_argument("--namespace")
    run = sub.add_parser("publish-run")
    publish_args(run)
    run.add_argument("--model-repo")
    run.add_argument("--public-model", action="store_true")
    run.add_argument("--model-create-pr", action="store_true")
    artifacts(run)
    failure = sub.add_parser("publish-failure")
    publish_args(failure)
    failure.add_argument("--error", required=True)
    artifacts(failure)
    ps = sub.add_parser("publish-status")
    ps.add_argument("--run-dir", type=Path, required=True)
    for flag in ("--run-id", "--submission-id", "--team-name", "--leaderboard-repo"):
        ps.add_argument(flag, required=True)
    ps.add_argument("--job-id")
    ps.add_argument("--status", choices=("queued", "running"), required=True)
    deploy = sub.add_parser("deploy-leaderboard")
    deploy.add_argument("--space-repo", required=True)
    deploy.add_argument("--leaderboard-repo", required=True)
    deploy.add_argument("--private", action="store_true")
    benchmarks = sub.add_parser("benchmarks")
    benchmarks.add_argument("--config", type=Path, required=True)
    benchmarks.add_argument("--run-dir", type=Path, required=True)
    benchmarks.add_argument("--manifest", type=Path, required=True)
    benchmarks.add_argument("--dry-run", action="store_true")
    serve = sub.add_parser("openenv-serve")
    serve.add_argument("--tasks-dir", type=Path, required=True)
    serve.add_argument("--include-task", action="append", default=[])
    serve.add_argument("--environment", choices=("docker", "daytona"), default="docker")
    serve.add_argument("--sandbox-user", default="agent")
    serve.add_argument("--jobs-dir", type=Path, default=Path("jobs/openenv"))
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    from .servers import bridge_parser

    bridge_parser(sub)
    return parser


def publish_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", type=Path, required=True)
    for flag in ("--run-id", "--submission-id", "--team-name", "--artifact-repo", "--leaderboard-repo"):
        p.add_argument(flag, required=True)
    p.add_argument("--job-id")


def artifacts(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--private-artifacts", dest="private_artifacts", action="store_true", default=True)
    group.add_argument("--public-artifacts", dest="private_artifacts", action="store_false")


def emit(value) -> int:
    print(json.dumps(value, indent=2, sort_keys=True, default=str), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        load_config(args.config)
        return emit({"config": str(args.config.resolve()), "valid": True})
    if args.command in ("plan", "run"):
        from datetime import datetime, timezone

        from .run import Run

        name = args.run_name or datetime.now(timezone.utc).strftime("run-%Y%m%dT%H%M%SZ")
        run = Run(load_config(args.config), name, dry_run=getattr(args, "dry_run", False), resume=getattr(args, "resume", False))
        if args.command == "plan":
            return emit(run.plan())
        print(f"[posttrainarena] {SIMULATION}: no model is served or trained", file=sys.stderr, flush=True)
        return emit(run.execute())
    if args.command in ("publish-run", "publish-failure", "publish-status"):
        from . import publish

        action = {"publish-run": publish.publish_run, "publish-failure": publish.publish_failure,
                  "publish-status": publish.publish_status}[args.command]
        return emit(action(args))
    if args.command == "model-bridge":
        from .servers import bridge_main

        return bridge_main(args)
    print(f"posttrainarena-train {args.command}: not simulated on the local stand-in", file=sys.stderr)
    return 1
