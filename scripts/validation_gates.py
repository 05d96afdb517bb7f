#!/usr/bin/env python3
"""Open Env Arena: the task-quality gates.

    python3 validation_gates.py static PATH
    python3 validation_gates.py collect --plan plan.json --jobs-root DIR

`static` runs the static gates on a collection before you publish it. PATH is a collection root
(the directory that holds `envs/` or `tasks/`), the `envs/` or `tasks/` directory itself, or one
task's directory. The script reads every file under PATH (leaving out `.git/` directories; a
symbolic link is sent as a link, with its target, and never followed) and sends them to the arena's
public check, `POST /api/check`, which runs the structure check and the static gates that
validation runs and stores nothing. No token is ever sent. At most 20,000 files and 32 MiB are sent.
Validation checks the published commit again.

`collect` builds the dynamic gates' results.json from an organizer's job outputs, for
`arena_cli.py gates attach`. It reads, for every task and kind (oracle, noop, band) of the plan, the
trial folders under DIR/gates/TASK/KIND/ (the plan's commands write there): a trial is a directory
holding `result.json` (`{"reward": number or null, "checks": [{"name", "passed"}], "error": text or
null}`), or else BenchFlow's `verifier/reward.json` (`{"reward": 1.0}`) or `verifier/reward.txt`;
an `error.txt` beside them, or a trial without a reward, is an infrastructure error. The arena
judges the trials itself; results.json only carries them, with the plan's hash and policy.

Python 3.9 or later, standard library only. The arena's JSON answer goes to stdout and a readable
summary to stderr.

Environment:
  ARENA_URL      the arena (default https://openenvarena-arena.hf.space); plain http:// only for
                 127.0.0.1, localhost and ::1

Exit status: 0 valid (`"valid": true`: sound, and no gate blocks the collection; rejected tasks are
left out but do not fail it, so read `eligible_tasks`), 1 not valid (or the arena answered an error,
or could not be reached), 2 a usage error (a bad PATH or ARENA_URL, too many files or bytes, or a
plan or jobs root that cannot be read).
"""

import argparse
import base64
import ipaddress
import json
import os
import socket
import stat
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 120
USER_AGENT = "arena-validation-gates/1"
SCOPE = "gates"

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


# @include arena_http.py

# @include report.py

# @include upload.py


KINDS = ("oracle", "noop", "band")


def cmd_static(args):
    report, lines = run_check(args.path, SCOPE)
    if not is_valid(report):
        lines.append("Next: fix every error and blocking finding, then run validation_gates.py static again.")
        summary("\n".join(lines))
        return EXIT_ERROR
    if report.get("eligible_tasks") == 0:
        lines.append("No task is eligible: fix the findings that exclude tasks and run it again.")
    else:
        lines.append("Next: publish the collection and run python3 arena_cli.py validate --file environment.json.")
    summary("\n".join(lines))
    return EXIT_OK


def read_trial(folder):
    """One trial folder: its reward, whether every check passed, and an infrastructure error."""
    def load(name):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None

    error = load("error.txt")
    result = load("result.json")
    if result is not None:
        try:
            data = json.loads(result)
        except ValueError:
            return {"reward": None, "checks_passed": None, "error": "result.json is not JSON"}
        checks = data.get("checks")
        passed = None if not isinstance(checks, list) else all(bool(c.get("passed")) for c in checks)
        reward = data.get("reward")
        error = data.get("error") or error
    else:
        reward, passed = None, None
        raw = load(os.path.join("verifier", "reward.json"))
        if raw is not None:
            try:
                reward = json.loads(raw).get("reward")
            except (ValueError, AttributeError):
                reward = None
        else:
            raw = load(os.path.join("verifier", "reward.txt"))
            try:
                reward = float(raw.strip()) if raw is not None else None
            except ValueError:
                reward = None
    if not isinstance(reward, (int, float)) or isinstance(reward, bool):
        reward = None
    if reward is None and not error:
        error = "no reward"
    return {"reward": None if error else float(reward), "checks_passed": passed, "error": error or None}


def is_trial(folder):
    return any(os.path.exists(os.path.join(folder, f))
               for f in ("result.json", "error.txt", os.path.join("verifier", "reward.json"),
                         os.path.join("verifier", "reward.txt")))


def trials_under(root):
    """Every trial folder under ROOT, in name order (a trial's own subfolders are not trials)."""
    found = []
    for folder, dirs, _ in os.walk(root):
        dirs.sort()
        if folder != root and is_trial(folder):
            found.append(read_trial(folder))
            dirs[:] = []
    return found


def cmd_collect(args):
    try:
        with open(args.plan, encoding="utf-8") as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise CliError("cannot read the plan %s: %s" % (args.plan, e), EXIT_USAGE)
    if not isinstance(plan, dict) or not plan.get("plan_hash") or not isinstance(plan.get("tasks"), list):
        raise CliError("%s is not a plan from arena_cli.py gates plan" % args.plan, EXIT_USAGE)
    if not os.path.isdir(args.jobs_root):
        raise CliError("%s is not a directory" % args.jobs_root, EXIT_USAGE)
    tasks, lines = [], []
    for task in plan["tasks"]:
        name = task["task"]
        entry = {"task": name}
        counts = []
        for kind in KINDS:
            planned = [r for r in task.get("runs", []) if r.get("kind") == kind]
            if not planned:
                entry[kind] = []
                continue
            trials = trials_under(os.path.join(args.jobs_root, "gates", name, kind))
            entry[kind] = trials
            errors = sum(1 for t in trials if t["error"])
            counts.append("%s %d/%d%s" % (kind, len(trials), planned[0].get("trials", 0),
                                         " (%d infrastructure errors)" % errors if errors else ""))
        tasks.append(entry)
        lines.append("  %s: %s" % (name, ", ".join(counts)))
    results = {"schema_version": 1, "plan_hash": plan["plan_hash"], "environment_id": plan.get("environment_id"),
               "policy": plan.get("policy"), "tasks": tasks}
    emit(results)
    summary("\n".join(["Trials found for plan %s:" % plan["plan_hash"][:12]] + lines + [
        "Next (a BenchFlow editor): python3 arena_cli.py gates attach --challenge %s --id %s --file results.json"
        % (plan.get("challenge_id"), plan.get("environment_id"))]))
    return EXIT_OK


def build_parser():
    parser = argparse.ArgumentParser(
        prog="validation_gates.py",
        description="Open Env Arena task-quality gates.",
        epilog="Exit status: 0 valid, 1 not valid or an error answer, 2 a usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("static", help="the static gates, run by the arena's public check (no token, stores nothing)")
    p.add_argument("path", metavar="PATH", help="a collection root, its envs/ (or tasks/) directory, or one task")
    p.set_defaults(func=cmd_static)
    p = sub.add_parser("collect", help="build the dynamic gates' results.json from the plan's job folders")
    p.add_argument("--plan", required=True, help="the plan from arena_cli.py gates plan")
    p.add_argument("--jobs-root", required=True, help="the directory the plan's jobs wrote to")
    p.set_defaults(func=cmd_collect)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as e:
        if e.body is not None:
            emit(e.body)
        sys.stderr.write("error: %s\n" % e)
        return e.status
    except KeyboardInterrupt:
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
