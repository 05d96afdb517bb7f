#!/usr/bin/env python3
"""Before pushing the Space: is it safe to restart the arena now?

A deploy restarts the process that holds every relay, so this exits 1 while any run's relay is
connected or reconnecting, while any PostTrain HF job is running or scheduling, or while any OpenEnv
run is on the training cluster, and says which; it exits 0 otherwise. A connection that carries no
run (the cluster's idle connection included) does not hold a deploy. It reads the arena's
API (`GET /api/jobs`, BenchFlow editors only), so it works against a deployed Space: ARENA_URL and
the token chain are the CLI's (HF_TOKEN, else the token `hf auth login` saved). When it cannot tell
(no token, not an editor, no answer) it exits 1 too: a deploy is safe only when it is known to be.

Usage: python3 dev/predeploy.py
"""

import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assemble_scripts import assemble  # noqa: E402 (beside this file)

BUSY = {"RUNNING", "SCHEDULING"}


def load_cli():
    """The CLI as the arena serves it, assembled from scripts/."""
    module = types.ModuleType("arena_cli")
    module.__file__ = "arena_cli.py"
    exec(compile(assemble("arena_cli.py"), "arena_cli.py", "exec"), module.__dict__)
    return module


def main():
    cli = load_cli()
    try:
        view = cli.request("GET", "/api/jobs", token=cli.require_token())
    except cli.CliError as e:
        print("predeploy: cannot tell whether a deploy is safe: %s" % e, file=sys.stderr)
        return 1
    holding = []
    for relay in view.get("relays", []):
        holding.append("run %s: relay %s" % (relay.get("run_id"), relay.get("state")))
    for run_id, state in view.get("openenv_runs", []):
        holding.append("OpenEnv run %s: %s" % (run_id, state))
    for job in view.get("jobs", []):
        if job.get("stage") in BUSY:
            what = "run %s" % job["run_id"] if job.get("run_id") else job.get("purpose", "job")
            holding.append("HF job %s (%s): %s" % (job.get("job_id"), what, job.get("stage")))
    if holding:
        print("predeploy: not now; a deploy would cut:\n  " + "\n  ".join(holding), file=sys.stderr)
        return 1
    print("predeploy: no relay is connected, no PostTrain job is running or scheduling and no OpenEnv run is on the cluster; safe to deploy.",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
