# /// script
# requires-python = ">=3.11"
# dependencies = ["huggingface_hub>=0.36,<2", "websockets>=13,<16"]
# ///
"""Open Env Arena's job script: what one arena run's HF job runs (`uv run --python 3.12
https://ARENA/arena_job.py --bundle-repo … --bundle-revision … --bundle-path job-inputs/RUN
--posttrainarena-ref COMMIT --script-sha256 HASH`). The "Space job script" of the pipeline's
recipe-v2 notes: the pipeline's own `run_hf_job.py` wrapper starts no servers, so this script does
what it does and the setup around it.

In order:
1. checks it is the version the arena launched (`--script-sha256`);
2. downloads the bundle at its commit, restores `runs/{run_id}/**` from the runs dataset when an
   earlier attempt of this job left a checkpoint, and says so to the pipeline with `--resume`;
3. installs the pipeline at the challenge's pinned commit (`uv pip install`);
4. setup: starts TRL's vLLM server on the layout's vLLM GPUs (loopback only) and the model bridge on
   the job's exposed port, learns the bridge's public URL from the job's own status on HF
   (`status.exposeUrls`, `GET /api/jobs/{namespace}/{JOB_ID}`) and hands the pipeline
   `BENCHFLOW_BASE_MODEL`, `BENCHFLOW_ADAPTER_MODEL`, `BENCHFLOW_PROVIDER_BASE_URL`,
   `BENCHFLOW_MODEL_BRIDGE_CONTROL_URL` and `TRL_VLLM_SERVER_BASE_URL`; connects the relay;
5. runs `posttrainarena-train run --config … --run-name RUN [--resume]`, copying its output to the
   job log line by line, reporting each step, each evaluation's pass counts, GRPO's progress and
   TRL's metrics for each optimizer step over the relay, and checkpointing the run folder to the runs dataset at each stage boundary;
   a baseline measurement (`arena.json` purpose `baseline`) instead evaluates the base model on
   every held-out suite and trial with `bench eval run`, as the pipeline's baseline does;
6. publishes with the pipeline's `publish-run`, or `publish-failure` with the error, and exits
   non-zero on failure.

Environment (the arena sets it): `ARENA_URL`, `ARENA_RUN_ID`, `ARENA_JOB_NAMESPACE`; secrets
`ARENA_RUN_SECRET` (the relay), `HF_TOKEN`, `BENCHFLOW_PROVIDER_API_KEY` (the bridge's key, new for
each run) and the recipe's others (`DAYTONA_API_KEY` for Daytona sandboxes). HF sets `JOB_ID`.
No secret value is ever printed."""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

PIPELINE_GIT = "git+https://github.com/benchflow-ai/posttrainarena.git"
PIPELINE_DIR = "pipelines/benchflow-task-posttrain"
STAGES = ("setup", "snapshot", "baseline", "gate", "training", "heldout", "collect")
HEARTBEAT_S = float(os.environ.get("ARENA_HEARTBEAT_S", "15"))
SERVER_WAIT_S = float(os.environ.get("ARENA_SERVER_WAIT_S", "2400"))
TIMEOUT_MARKERS = ("wall-clock budget", "idle timeout", "timed out")


def say(stage: str, text: str) -> None:
    """The script's own log line: `[arena-job] {stage}: …` (the arena reads these as it reads the
    pipeline's `[posttrainarena] {step}: …`)."""
    print(f"[arena-job] {stage}: {text}", flush=True)


class Failure(Exception):
    """A step of the job failed; the message says which and why."""


class Stopped(BaseException):
    """HF stopped the job (a cancel or its timeout sends SIGTERM)."""


def stopped(signum, frame) -> None:
    raise Stopped()


# ---------------------------------------------------------------- the relay


class Relay:
    """The job's line to the arena (`/api/relay/runs/{run}`, a WebSocket): numbered messages, each
    resent until the arena acknowledges it, a heartbeat, and a reconnect with backoff. It never
    blocks the run: when the arena cannot be reached, progress shows in the log only."""

    def __init__(self) -> None:
        base = os.environ.get("ARENA_URL", "").rstrip("/")
        self.run_id = os.environ.get("ARENA_RUN_ID", "")
        self.secret = os.environ.get("ARENA_RUN_SECRET", "")
        self.url = base.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + f"/api/relay/runs/{self.run_id}"
        self.enabled = bool(base and self.run_id and self.secret)
        self.outbox: queue.Queue = queue.Queue()
        self.unacked: dict[int, dict] = {}
        self.seq = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.refused = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        if self.enabled:
            self.thread.start()

    def send(self, kind: str, **fields) -> None:
        if not self.enabled or self.refused:
            return
        self.outbox.put({"kind": kind, **{k: v for k, v in fields.items() if v is not None}})

    def loop(self) -> None:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        backoff = 1.0
        while not (self.stopping.is_set() and self.outbox.empty() and not self.unacked):
            try:
                headers = {"Authorization": f"Bearer {self.secret}"}
                with connect(self.url, additional_headers=headers, open_timeout=10, close_timeout=2) as ws:
                    backoff = 1.0
                    self.session(ws)
            except InvalidStatus as e:
                # The arena refuses this run's secret: the run has ended there. Nothing more to say.
                if e.response.status_code in (401, 403, 404):
                    self.refused = True
                    return
            except Exception:  # noqa: BLE001 - a dropped connection is retried
                pass
            # Ending, and the arena cannot be reached: what is left unsent stays in the log.
            if self.stopping.is_set() or self.stopping.wait(backoff):
                return
            backoff = min(backoff * 2, 30.0)

    def session(self, ws) -> None:
        """One connection: continue the numbering where the arena's last stored message left it,
        resend what it has not acknowledged, then send, beat and read acknowledgements."""
        first = json.loads(ws.recv(timeout=10))
        with self.lock:
            self.seq = max(self.seq, int(first.get("last_seq", 0)))
        for message in list(self.unacked.values()):
            ws.send(json.dumps(message))
        beat = time.monotonic()
        while True:
            try:
                while True:
                    item = self.outbox.get_nowait()
                    with self.lock:
                        self.seq += 1
                        item["seq"] = self.seq
                    self.unacked[item["seq"]] = item
                    ws.send(json.dumps(item))
            except queue.Empty:
                pass
            if time.monotonic() - beat >= HEARTBEAT_S:
                with self.lock:
                    self.seq += 1
                    ws.send(json.dumps({"seq": self.seq, "kind": "heartbeat"}))
                beat = time.monotonic()
            try:
                answer = json.loads(ws.recv(timeout=0.5))
            except TimeoutError:
                answer = None
            if answer is not None:
                if "ack" in answer:
                    self.unacked.pop(int(answer["ack"]), None)
                elif "error" in answer:
                    # A message the arena will never take: drop it rather than resend it forever.
                    self.unacked.pop(int(answer.get("seq", -1)), None)
            if self.stopping.is_set() and self.outbox.empty() and not self.unacked:
                return

    def close(self, wait_s: float = 10.0) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(wait_s)


# ---------------------------------------------------------------- helpers


def run_checked(command: list[str], what: str) -> None:
    say("setup", " ".join(command))
    done = subprocess.run(command)
    if done.returncode:
        raise Failure(f"{what}: {command[0]} exited with {done.returncode}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str, headers: dict | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


class Server:
    """A server process of the job, its output copied to the log with a prefix."""

    def __init__(self, name: str, command: list[str], env: dict) -> None:
        self.name = name
        say("setup", f"starting {name}: {' '.join(command)}")
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.last = ""
        threading.Thread(target=self.copy, daemon=True).start()

    def copy(self) -> None:
        for line in self.process.stdout:
            print(f"[{self.name}] {line}", end="", flush=True)
            if line.strip():
                self.last = line.strip()

    def wait_for(self, url: str) -> None:
        deadline = time.monotonic() + SERVER_WAIT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                time.sleep(0.2)  # the last lines it printed
                raise Failure(f"setup: {self.name} exited with {self.process.returncode} before it answered"
                              + (f": {self.last[:300]}" if self.last else ""))
            if answers(url):
                say("setup", f"{self.name} answers at {url}")
                return
            time.sleep(1)
        raise Failure(f"setup: {self.name} did not answer {url} within {SERVER_WAIT_S:.0f} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def exposed_url(urls: list, port: int, exposed: list) -> str | None:
    """HF's URL for a port names it in its host (`{job}--{port}.hf.jobs`): picked by that, as
    huggingface_hub's sandbox does, never by its place in the list; a job that exposed only this
    port and lists one URL is reached there (a stand-in's loopback URL names no port)."""
    for url in urls:
        host = url.split("://", 1)[-1].split("/", 1)[0]
        if f"--{port}." in host:
            return url.rstrip("/")
    if exposed == [port] and len(urls) == 1:
        return urls[0].rstrip("/")
    return None


def public_url(port: int) -> str:
    """Where sandboxes reach the bridge: the job's own `status.exposeUrls` entry for the port, as
    HF reports it once the job runs (HF sets `JOB_ID` in the job; the namespace comes from the
    arena)."""
    job_id, namespace = os.environ.get("JOB_ID"), os.environ.get("ARENA_JOB_NAMESPACE")
    if not job_id or not namespace:
        raise Failure("setup: JOB_ID or ARENA_JOB_NAMESPACE is not set; the bridge's public URL cannot be learned")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/jobs/{namespace}/{job_id}",
                                     headers={"Authorization": f"Bearer {os.environ.get('HF_TOKEN', '')}"})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=20) as r:
                job = json.load(r)
            url = exposed_url((job.get("status") or {}).get("exposeUrls") or [], port,
                              (job.get("expose") or {}).get("ports") or [])
            if url:
                return url
        except OSError:
            pass
        time.sleep(3)
    raise Failure(f"setup: HF did not report an exposed URL for port {port} of job {job_id}")


# ---------------------------------------------------------------- following the pipeline


def is_timeout(row: dict) -> bool:
    if row.get("error") is None:
        return False
    if row.get("error_category") is not None:
        return str(row["error_category"]) == "timeout"
    return any(m in str(row["error"]).lower() for m in TIMEOUT_MARKERS)


def is_scored(row: dict) -> bool:
    return (row.get("scored") is True and (row.get("error") is None or is_timeout(row))
            and row.get("verifier_error") is None and row.get("valid_llm_trajectory") is True
            and isinstance(row.get("reward"), (int, float)) and not isinstance(row.get("reward"), bool))


def counts(health_path: Path) -> dict | None:
    """An evaluation's pass counts from its health summary: tasks passed, tasks, scored
    timeouts, tasks without a scored row (infrastructure errors)."""
    try:
        rows = json.loads(health_path.read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    by_task: dict[str, dict | None] = {}
    for row in rows:
        if isinstance(row, dict) and "task_id" in row:
            by_task.setdefault(row["task_id"], None)
            if is_scored(row):
                by_task[row["task_id"]] = row
    scored = [r for r in by_task.values() if r is not None]
    return {"passed": sum(1 for r in scored if float(r["reward"]) >= 1.0), "total": len(by_task),
            "timeouts": sum(1 for r in scored if r.get("error") is not None), "errors": len(by_task) - len(scored)}


# What a challenge that keeps a Trackio dashboard adds to the job (the version checked against
# transformers 5.13's TrackioCallback).
TRACKIO = "trackio==0.43.0"

# TRL's numbers the arena keeps, under the names transformers logs them (the domain's
# `TrainMetrics` table, tests/fixtures/metric-names.json).
TRL_METRICS = ["loss", "reward", "reward_std", "grad_norm", "learning_rate", "completions/mean_length",
               "frac_reward_zero_std"]


def trl_metrics(line: str) -> dict | None:
    """TRL's line for one optimizer step, as transformers' ProgressCallback prints it (the `repr`
    of a dict, each float formatted `f"{v:.4g}"` in quotes): the finite numbers the arena keeps,
    or None for any other line (the run's summary has `train_loss`, not `loss`)."""
    start = line.rfind("{'")
    if start < 0 or len(line) > 16384 or "'loss'" not in line:
        return None
    try:
        logs = ast.literal_eval(line[start:].strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(logs, dict) or "loss" not in logs:
        return None
    out = {}
    for key in TRL_METRICS:
        try:
            value = float(logs[key])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(value):
            out[key] = value
    return out or None


def health_of(run_dir: Path, step: str) -> Path:
    """Where the pipeline writes a step's health summary (reference §6.1)."""
    if "." in step:
        stage, suite, trial = step.split(".")
        return run_dir / "results" / f"{stage}-suites" / suite / f"trial-{int(trial[1:]):02d}_health.json"
    return run_dir / "results" / f"{step}_health.json"


class Follower:
    """Reads the pipeline's lines as they come: each step goes to the relay; an evaluation's
    counts follow once its health summary is written (when the next step starts, or the run
    ends); GRPO's progress is the optimizer steps its rollout lines have passed out of those
    `reports/train_sampler.json` plans; every new stage checkpoints the run folder."""

    def __init__(self, relay: Relay, run_dir: Path, checkpoint) -> None:
        self.relay, self.run_dir, self.checkpoint = relay, run_dir, checkpoint
        self.open_eval: str | None = None
        self.stage: str | None = None
        self.global_step = -1
        self.planned: int | None = None

    def line(self, line: str) -> None:
        if "[posttrainarena] " not in line:
            metrics = trl_metrics(line)
            if metrics and self.global_step >= 0:
                # TRL logs optimizer step N + 1 after the rollouts collected at global step N.
                self.relay.send("metrics", stage="training", done=self.global_step + 1, metrics=metrics)
            return
        name = line.split("[posttrainarena] ", 1)[1].split(": ", 1)[0].strip()
        if " " in name:
            return
        if name.startswith("grpo_rollout_"):
            try:
                step = int(name.split("_")[2])
            except (IndexError, ValueError):
                return
            if step != self.global_step:
                self.close_eval()
                if self.global_step < 0:
                    self.relay.send("step", step=name)
                self.global_step = step
                self.relay.send("progress", stage="training", done=step, planned=self.planned_steps())
            return
        self.close_eval()
        if self.global_step >= 0:
            planned = self.planned_steps()
            self.relay.send("progress", stage="training", done=planned or self.global_step + 1, planned=planned)
            self.global_step = -1
        self.relay.send("step", step=name)
        if name.endswith("_eval") or "_eval." in name:
            self.open_eval = name

    def planned_steps(self) -> int | None:
        """The optimizer steps GRPO plans, from the plan it writes before training
        (`jobs/grpo-train/sampler_plan.json`): the `cover` schedule's length, else `max_steps`."""
        if self.planned is None:
            try:
                plan = json.loads((self.run_dir / "jobs" / "grpo-train" / "sampler_plan.json").read_text())
                schedule = plan.get("planned_steps")
                self.planned = len(schedule) if isinstance(schedule, list) else int(plan["max_steps"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                return None
        return self.planned

    def close_eval(self) -> None:
        if self.open_eval:
            c = counts(health_of(self.run_dir, self.open_eval))
            if c is not None:
                self.relay.send("eval", step=self.open_eval, **c)
            self.checkpoint()
            self.open_eval = None

    def end(self) -> None:
        self.close_eval()


class CommandFailed(Exception):
    """A command of the job exited non-zero; the message carries the last error it printed."""


def tee(command: list[str], log_path: Path, env: dict, follower: Follower | None) -> None:
    """Runs a command with its output (stderr merged) copied line by line to the job's log and
    to `log_path`; raises when it fails, with the last `SomeError: …` line it printed (a
    Python traceback's last line: the cause, where the exit status alone says nothing)."""
    last_error = ""
    with log_path.open("a", encoding="utf-8") as log:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in process.stdout:
            print(line, end="", flush=True)
            log.write(line)
            log.flush()
            if follower is not None:
                follower.line(line)
            head = line.split(":", 1)[0]
            if head.endswith(("Error", "Exception")) and head.replace(".", "").replace("_", "").isalnum():
                last_error = line.strip()
        code = process.wait()
    if follower is not None:
        follower.end()
    if code:
        raise CommandFailed(f"{' '.join(command[:2])} exited with {code}" + (f": {last_error}" if last_error else ""))


# ---------------------------------------------------------------- the baseline measurement


def bench_eval_command(config: dict, model: str, tasks_dir: Path, ids: list[str], jobs: Path, result: Path) -> list[str]:
    """`bench eval run` as the pipeline's evaluation runs it (reference §5.1)."""
    h, r = config.get("harness", {}), config.get("runtime", {})
    stem = result.with_suffix("")
    command = ["bench", "eval", "run", "--tasks-dir", str(tasks_dir), "--agent", h.get("agent", "opencode"),
               "--model", model, "--sandbox", r.get("sandbox") or "daytona", "--skill-mode", h.get("skill_mode", "no-skill"),
               "--concurrency", str(h.get("concurrency", 1)), "--usage-tracking", h.get("usage_tracking", "required"),
               "--sandbox-setup-timeout", str(h.get("sandbox_setup_timeout_sec", 300)),
               "--agent-idle-timeout", str(h.get("agent_idle_timeout_sec", 300)),
               "--config-override", json.dumps({"agent": {"timeout_sec": h.get("agent_timeout_sec", 900)}}, separators=(",", ":")),
               "--expected-tasks", str(len(ids)), "--health-summary-out", f"{stem}_health.json",
               "--task-manifest-out", f"{stem}_task_manifest.json", "--run-config-out", f"{stem}_run_config.json",
               "--jobs-dir", str(jobs),
               "--agent-env", "OPENCODE_CONFIG_CONTENT=" + json.dumps({"permission": {
                   "external_directory": {p: "allow" for p in h.get("external_directory_allow", ["/home/user/input/**"])},
                   "bash": {p: "deny" for p in h.get("deny_bash_patterns", ["*<<*"])}}}, separators=(",", ":"))]
    if r.get("sandbox_user", "agent") is not None:
        command += ["--sandbox-user", r.get("sandbox_user", "agent")]
    for t in ids:
        command += ["--include", t]
    return command


def read_ids(path: Path) -> list[str]:
    seen: list[str] = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and line not in seen:
            seen.append(line)
    return seen


def outcomes(rows: list, ids: list[str]) -> dict:
    out = {}
    for t in ids:
        rewards = [float(r["reward"]) for r in rows if isinstance(r, dict) and r.get("task_id") == t and is_scored(r)]
        out[t] = ({"reward": rewards[-1], "passed": rewards[-1] >= 1.0, "infra_error": False} if rewards
                  else {"reward": None, "passed": None, "infra_error": True})
    return out


def baseline(bundle: Path, run_dir: Path, relay: Relay, env: dict, log_path: Path) -> None:
    """The base model alone on every held-out suite and trial: the pipeline has no such mode, so
    the job runs BenchFlow's own commands as the pipeline's baseline stage does and writes
    `reports/eval_task_outcomes.json` (the baseline arm only) and `reports/baseline.json`."""
    config = tomllib.loads((bundle / "config.toml").read_text())
    trials = int(config.get("evaluation", {}).get("trials", 1))
    suites = config["eval_suites"]
    cells, per_trial = [], {}
    follower = Follower(relay, run_dir, lambda: None)
    for i, suite in enumerate(suites):
        ids = read_ids(bundle / suite["task_list"])
        dest = run_dir / "data" / ("eval" if i == 0 else f"eval-{suite['name']}")
        label = "eval" if i == 0 else f"eval-{suite['name']}"
        command = ["bench", "tasks", "snapshot-hf", suite["repo_id"], str(dest), "--path", suite.get("path", "tasks"),
                   "--revision", suite["revision"], "--overwrite", *[x for t in ids for x in ("--include-task", t)]]
        print(f"[posttrainarena] snapshot_{label}_tasks: {' '.join(command)}", flush=True)
        follower.line(f"[posttrainarena] snapshot_{label}_tasks: ")
        tee(command, log_path, env, None)
        for trial in range(1, trials + 1):
            first = i == 0 and trial == 1
            step = "baseline_eval" if first else f"baseline_eval.{suite['name']}.t{trial:02d}"
            jobs = run_dir / "jobs" / ("baseline" if first else f"baseline-suites/{suite['name']}/trial-{trial:02d}")
            result = run_dir / "results" / ("baseline_eval.json" if first else f"baseline_eval-suites/{suite['name']}/trial-{trial:02d}.json")
            result.parent.mkdir(parents=True, exist_ok=True)
            command = bench_eval_command(config, env["BENCHFLOW_BASE_MODEL"], dest, ids, jobs, result)
            line = f"[posttrainarena] {step}: {' '.join(command)}"
            print(line, flush=True)
            follower.line(line)
            code = subprocess.run(command, env=env).returncode
            if code and not (jobs / "summary.json").is_file():
                raise Failure(f"{step}: bench eval run exited with {code} and produced no summary")
            rows = json.loads(health_of(run_dir, step).read_text())["rows"]
            o = outcomes(rows, ids)
            cells.append({"suite": suite["name"], "trial": trial, "stage": step, "jobs_dir": str(jobs), "score": None,
                          "outcomes": o})
            kept = [1.0 if c["passed"] else 0.0 for c in o.values() if not c["infra_error"]]
            per_trial.setdefault(trial, []).extend(kept)
    follower.end()
    report = {"schema_version": 1, "pass_threshold": 1.0, "arms": {"baseline": {"stage": "baseline_eval", "cells": cells},
                                                                    "final": None}}
    reports = run_dir / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "eval_task_outcomes.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    rates = [sum(v) / len(v) for _, v in sorted(per_trial.items()) if v]
    mean = sum(rates) / len(rates) if rates else 0.0
    spread = rates if len(rates) > 1 else next((v for v in per_trial.values() if v), [])
    m = sum(spread) / len(spread) if spread else 0.0
    se = math.sqrt(sum((x - m) ** 2 for x in spread) / (len(spread) - 1) / len(spread)) if len(spread) > 1 else 0.0
    scored = [(c["suite"], t) for c in cells for t, x in c["outcomes"].items() if not x["infra_error"]]
    measured = {"schema_version": 1, "metric": "pass@1", "pass_rate": mean, "stderr": se, "trials": len(rates),
                "per_trial": rates, "tasks": len(set(scored)), "scored_cells": len(scored),
                "infra_error_cells": sum(1 for c in cells for x in c["outcomes"].values() if x["infra_error"])}
    (reports / "baseline.json").write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------- the job


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="arena_job.py")
    p.add_argument("--bundle-repo", required=True)
    p.add_argument("--bundle-revision", required=True)
    p.add_argument("--bundle-path", required=True)
    p.add_argument("--posttrainarena-ref", required=True)
    p.add_argument("--script-sha256")
    return p.parse_args()


class Job:
    """What the job's steps share, filled in as they go; the failure path reads what they got to
    (the manifest once read, the run folder once known)."""

    def __init__(self, args: argparse.Namespace, token: str | None, workspace: Path) -> None:
        self.args, self.token, self.workspace = args, token, workspace
        self.servers: list[Server] = []
        self.manifest: dict = {}
        self.setup: dict = {}
        self.env = dict(os.environ)
        self.bundle = workspace / args.bundle_path
        self.run_dir = self.bundle
        self.run_id = ""
        self.resume = False
        self.log_path = workspace / "job.log"


def fresh_workspace(bundle_path: str) -> Path:
    """The job's folder, emptied. The pipeline's resume compares the run's plan, absolute paths
    included, with the one an earlier attempt wrote: a workspace fixed by the run (not a random
    one) lets it resume."""
    workspace = Path(tempfile.gettempdir()) / f"posttrainarena-job-{hashlib.sha256(bundle_path.encode()).hexdigest()[:12]}"
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(parents=True)
    return workspace


def download(job: Job, snapshot_download) -> None:
    """The bundle at its commit, and `runs/{run_id}/**` from the runs dataset when an earlier
    attempt of this job left a checkpoint there (the pipeline then resumes it)."""
    args = job.args
    say("setup", f"downloading the bundle {args.bundle_repo}@{args.bundle_revision}/{args.bundle_path}")
    snapshot_download(args.bundle_repo, repo_type="dataset", revision=args.bundle_revision,
                      allow_patterns=[f"{args.bundle_path}/**"], local_dir=str(job.workspace), token=job.token)
    job.manifest = json.loads((job.bundle / "job.json").read_text())
    job.setup = json.loads((job.bundle / "arena.json").read_text())
    job.run_id = str(job.manifest["run_id"])
    job.run_dir = job.bundle / "runs" / job.run_id
    try:
        snapshot_download(str(job.manifest["artifact_repo"]), repo_type="dataset",
                          allow_patterns=[f"runs/{job.run_id}/**"], local_dir=str(job.bundle), token=job.token)
    except Exception as e:  # noqa: BLE001 - as the pipeline's wrapper: no state is not an error
        print(f"[posttrainarena] no resumable state restored: {type(e).__name__}: {e}", flush=True)
    job.resume = job.run_dir.is_dir() and any(p.is_file() for p in job.run_dir.rglob("*"))
    if job.resume:
        say("setup", f"restored runs/{job.run_id} from an earlier attempt; the pipeline resumes it")


def install_pipeline(job: Job) -> None:
    """The pipeline at the challenge's pinned commit, and Trackio when the challenge keeps a
    dashboard."""
    ref = job.args.posttrainarena_ref
    # The pipeline's extras bring W&B, not Trackio, which transformers needs for report_to="trackio".
    tracking = [TRACKIO] if job.setup.get("trackio_space") else []
    run_checked(["uv", "pip", "install", "--python", sys.executable, "--torch-backend", "auto",
                 f"posttrainarena-benchflow-pipeline[train,hf] @ {PIPELINE_GIT}@{ref}#subdirectory={PIPELINE_DIR}",
                 *tracking],
                "setup: installing the pipeline")
    job.env["POSTTRAINARENA_PIPELINE_COMMIT"] = ref
    job.env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


def start_servers(job: Job) -> None:
    """TRL's vLLM server on the layout's vLLM GPUs (loopback only) and the model bridge on the
    job's exposed port; once the bridge answers at its public URL, the pipeline's environment
    names them both."""
    ms = job.setup["model_server"]
    vllm_port = free_port()
    job.servers.append(Server("vllm", [
        "posttrainarena-vllm-serve", "--model", ms["model"], "--revision", ms["revision"],
        "--tensor-parallel-size", str(ms["tensor_parallel_size"]), "--data-parallel-size", str(ms["data_parallel_size"]),
        "--max-model-len", str(ms["max_model_len"]), "--host", "127.0.0.1", "--port", str(vllm_port)],
        dict(job.env, CUDA_VISIBLE_DEVICES=",".join(map(str, ms["gpus"])))))
    trl = f"http://127.0.0.1:{vllm_port}"
    job.servers[-1].wait_for(f"{trl}/health/")
    b = job.setup["bridge"]
    job.servers.append(Server("bridge", [
        "posttrainarena-train", "model-bridge", "--upstream-url", trl, "--tokenizer", ms["model"],
        "--tokenizer-revision", ms["revision"], "--api-key-env", "BENCHFLOW_PROVIDER_API_KEY",
        "--max-tokens", str(b["max_tokens"]), "--max-context-tokens", str(b["max_context_tokens"]),
        "--max-logprob-context-tokens", str(b["max_logprob_context_tokens"]), "--host", "0.0.0.0", "--port", str(b["port"])],
        job.env))
    job.servers[-1].wait_for(f"http://127.0.0.1:{b['port']}/health")
    public = public_url(int(b["port"]))
    if not answers(f"{public}/v1/models", {"Authorization": f"Bearer {job.env.get('BENCHFLOW_PROVIDER_API_KEY', '')}"}):
        raise Failure(f"setup: the bridge does not answer at its public URL {public}")
    say("setup", f"the model bridge answers at {public}/v1; sandboxes reach the model there")
    job.env.update(BENCHFLOW_BASE_MODEL=job.setup["base_model_alias"], BENCHFLOW_ADAPTER_MODEL=job.setup["student_model_alias"],
                   BENCHFLOW_PROVIDER_BASE_URL=f"{public}/v1", TRL_VLLM_SERVER_BASE_URL=trl,
                   BENCHFLOW_MODEL_BRIDGE_CONTROL_URL=f"http://127.0.0.1:{b['port']}/v1",
                   CUDA_VISIBLE_DEVICES=",".join(map(str, job.setup["trainer_gpus"])))
    if job.setup.get("trackio_space"):
        # The pipeline reports to Trackio (`report_to = "trackio"`) without naming a Space;
        # trackio reads this variable then, and writes with the job's HF_TOKEN.
        job.env["TRACKIO_SPACE_ID"] = job.setup["trackio_space"]
        say("setup", f"TRL logs to the Trackio Space {job.setup['trackio_space']} too")


class Checkpoints:
    """The run folder so far, to the runs dataset, so that a crashed attempt resumes from it: in
    the background, the newest state once the upload in flight is done, without the task
    snapshots. Each upload holds `syncing`, as the run's final publication does."""

    def __init__(self, job: Job, api) -> None:
        self.job, self.api = job, api
        self.syncing = threading.Lock()
        self.pending = threading.Event()
        threading.Thread(target=self.upload, daemon=True).start()

    def request(self) -> None:
        self.pending.set()

    def upload(self) -> None:
        job = self.job
        while True:
            self.pending.wait()
            self.pending.clear()
            try:
                with self.syncing:
                    self.api.upload_folder(repo_id=job.manifest["artifact_repo"], repo_type="dataset",
                                           folder_path=str(job.run_dir), path_in_repo=f"runs/{job.run_id}",
                                           ignore_patterns=["data/**"],
                                           commit_message=f"Checkpoint running PostTrain Arena run {job.run_id}")
            except Exception as e:  # noqa: BLE001 - a checkpoint is best effort
                say("checkpoint", f"not saved ({type(e).__name__})")


def publish_baseline(job: Job, relay: Relay, checkpoints: Checkpoints) -> None:
    """Measures the base model (`baseline`) and uploads the run folder as it is."""
    baseline(job.bundle, job.run_dir, relay, job.env, job.log_path)
    relay.send("step", step="collect")
    say("collect", f"uploading runs/{job.run_id} to {job.manifest['artifact_repo']}")
    with checkpoints.syncing:
        checkpoints.api.upload_folder(repo_id=job.manifest["artifact_repo"], repo_type="dataset",
                                      folder_path=str(job.run_dir), path_in_repo=f"runs/{job.run_id}",
                                      ignore_patterns=["data/**"],
                                      commit_message=f"Publish Open Env Arena baseline {job.run_id}")


def train_and_publish(job: Job, relay: Relay, checkpoints: Checkpoints, ident: list[str]) -> None:
    """Says the run is running, runs the pipeline (its lines followed onto the relay, each stage
    checkpointed) and publishes it with `publish-run`."""
    manifest = job.manifest
    visibility = ["--public-artifacts" if manifest.get("private_artifacts") is False else "--private-artifacts"]
    status = subprocess.run(["posttrainarena-train", "publish-status", *ident, "--leaderboard-repo",
                             str(manifest["leaderboard_repo"]), "--status", "running"], env=job.env)
    if status.returncode:
        print("[posttrainarena] warning: failed to publish running status; continuing pipeline", flush=True)
    command = ["posttrainarena-train", "run", "--config", str(job.bundle / manifest["config"]), "--run-name", job.run_id]
    if job.resume:
        command.append("--resume")
    say("pipeline", " ".join(command))
    tee(command, job.log_path, job.env, Follower(relay, job.run_dir, checkpoints.request))
    relay.send("step", step="collect")
    (job.run_dir / "reports").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(job.log_path, job.run_dir / "reports" / "hf_job.log")
    with checkpoints.syncing:
        tee(["posttrainarena-train", "publish-run", *ident, "--artifact-repo", str(manifest["artifact_repo"]),
             "--leaderboard-repo", str(manifest["leaderboard_repo"]), *visibility], job.log_path, job.env, None)
    say("collect", "published")


def publish_failure(job: Job, relay: Relay, e: Exception) -> None:
    """Says why the run failed, on the relay and in the log, and publishes the failure with
    `publish-failure` (not for a baseline, nor before the run is known)."""
    error = f"{type(e).__name__}: {e}"
    relay.send("error", detail=error[:2000])
    say("error", f"the run failed: {error[:500]}")
    manifest, run_dir = job.manifest, job.run_dir
    if manifest and run_dir.name == str(manifest.get("run_id")) and setup_purpose(job.bundle) != "baseline":
        (run_dir / "reports").mkdir(parents=True, exist_ok=True)
        if job.log_path.is_file():
            shutil.copyfile(job.log_path, run_dir / "reports" / "hf_job.log")
        subprocess.run(["posttrainarena-train", "publish-failure", "--run-dir", str(run_dir), "--run-id",
                        str(manifest["run_id"]), "--submission-id", str(manifest["submission_id"]), "--team-name",
                        str(manifest["team_name"]), "--artifact-repo", str(manifest["artifact_repo"]),
                        "--leaderboard-repo", str(manifest["leaderboard_repo"]), "--error", error,
                        "--public-artifacts" if manifest.get("private_artifacts") is False else "--private-artifacts"],
                       env=job.env)


def run(job: Job, relay: Relay, snapshot_download, hf_api) -> None:
    """The job's steps in order: download, install, the servers, then the baseline measurement or
    the training run, each published."""
    download(job, snapshot_download)
    install_pipeline(job)
    start_servers(job)
    ident = ["--run-dir", str(job.run_dir), "--run-id", job.run_id, "--submission-id",
             str(job.manifest["submission_id"]), "--team-name", str(job.manifest["team_name"])]
    checkpoints = Checkpoints(job, hf_api(token=job.token))
    if job.setup["purpose"] == "baseline":
        publish_baseline(job, relay, checkpoints)
    else:
        train_and_publish(job, relay, checkpoints, ident)


def main() -> int:
    args = parse_args()
    own = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    if args.script_sha256 and own != args.script_sha256:
        say("setup", f"this script is {own}, not the {args.script_sha256} the arena launched (the arena was redeployed "
                     "between the launch and the job's start); launch the run again")
        return 3
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from huggingface_hub import HfApi, snapshot_download

    signal.signal(signal.SIGTERM, stopped)
    token = os.environ.get("HF_TOKEN")
    relay = Relay()
    relay.send("hello", detail=f"arena_job.py {own[:12]} on job {os.environ.get('JOB_ID', '?')}")
    relay.send("step", step="setup")
    job = Job(args, token, fresh_workspace(args.bundle_path))
    try:
        run(job, relay, snapshot_download, HfApi)
        return 0
    except Stopped:
        say("error", "the job was stopped (SIGTERM): nothing is published")
        return 143
    except Exception as e:  # noqa: BLE001 - any failure is published, then the job fails
        publish_failure(job, relay, e)
        return 1
    finally:
        for server in reversed(job.servers):
            server.stop()
        relay.close()
        shutil.rmtree(job.workspace, ignore_errors=True)


def setup_purpose(bundle: Path) -> str:
    try:
        return json.loads((bundle / "arena.json").read_text()).get("purpose", "collection")
    except (OSError, ValueError):
        return "collection"


if __name__ == "__main__":
    sys.exit(main())
