"""The node's agent: one per GPU node. It keeps the connection to the arena's
`/api/relay/cluster` (the cluster secret as `Authorization: Bearer`), says hello with the node's
free GPUs and sandbox allowance (each run counted as `pool.run_allowance`: ten with prefetching)
and the runs it holds, heartbeats, starts one trainer process (`arena_cluster.trainer`) per
assignment, stops it on `stop`, and carries each run's events to the arena until they are
acknowledged. Everything it holds is on disk under `--home` (a run's folder,
`arena_cluster.rundir`), so an agent killed and started again resends what was not acknowledged,
lists the runs it holds, and starts their trainers again from their last checkpoints.

    python -m arena_cluster.agent --arena https://openenvarena-arena.hf.space --home /var/lib/arena-agent

Environment: `ARENA_CLUSTER_SECRET` (the arena's), and what the trainer needs (`HF_TOKEN`, which
starts sandboxes; `ARENA_SANDBOX_TOKEN`, the only credential a training sandbox receives, and
`ARENA_EVAL_TOKEN`, the only one a held-out sandbox receives, both checked with HF's whoami at
start: each a read token of an account whose only organization is its namespace,
`ARENA_SANDBOX_NAMESPACE` and `ARENA_EVAL_NAMESPACE`, two different ones; `ARENA_TRAINER_MODEL`,
optional `HF_ENDPOINT`, `TRACKIO_SPACE_ID`).
`ARENA_AGENT_GPUS` overrides the GPUs `nvidia-smi -L` lists; `ARENA_AGENT_CPU_SLOTS` lets a node
without a GPU train on its CPU (tests and the local demo, with the tiny model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .pool import run_allowance
from .rundir import RunDir
from .settings import SettingError, Settings

log = logging.getLogger("arena-agent")
# How long a stopped trainer has to cancel its sandboxes before it is killed.
STOP_GRACE_S = 30
# A trainer that exits without ending its run is started again this many times.
RESTARTS = 1


def node_gpus(settings: Settings) -> int:
    if settings.agent_gpus is not None:
        return settings.agent_gpus
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class Trainer:
    """One run's trainer process, started by this agent or found alive from an earlier one."""

    def __init__(self, rd: RunDir, slot: int):
        self.rd = rd
        self.slot = slot
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    def start(self, python: str, env: dict, device_env: dict) -> None:
        log_file = open(self.rd.path / "trainer.log", "ab")
        self.proc = subprocess.Popen(
            [python, "-m", "arena_cluster.trainer", str(self.rd.path)],
            stdout=log_file, stderr=subprocess.STDOUT, env={**env, **device_env},
            cwd=str(Path(__file__).resolve().parent.parent), start_new_session=True,
        )
        self.pid = self.proc.pid
        (self.rd.path / "trainer.pid").write_text(str(self.pid))

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and _pid_alive(self.pid, self.rd.path)

    def exit_code(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def stop(self) -> None:
        if not self.alive() or self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_GRACE_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait()


def _pid_alive(pid: int, run_path: Path) -> bool:
    """Whether `pid` is still this run's trainer (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(run_path).encode() in cmdline


def default_node_id(home: Path) -> str:
    """The node's name when `--node-id` gives none: its home folder's name, in the characters the
    arena takes (letters, digits, `.`, `_`, `-`; at most 64)."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in home.resolve().name)
    return name.strip("-")[:64] or "default"


class Agent:
    def __init__(self, arena: str, secret: str, home: Path, heartbeat_s: float, python: str, settings: Settings,
                 node_id: str | None = None):
        base = arena.rstrip("/")
        self.url = ("wss://" + base[8:] if base.startswith("https://") else "ws://" + base.removeprefix("http://")) \
            + "/api/relay/cluster"
        self.secret = secret
        self.home = home
        # The arena keeps one row per node and assigns each run to a node with a free GPU.
        self.node_id = node_id or default_node_id(home)
        self.heartbeat_s = heartbeat_s
        self.python = python
        self.runs_dir = home / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.gpus = node_gpus(settings)
        self.slots = self.gpus or settings.agent_cpu_slots
        # A run holds a step's sandboxes and, prefetching, the next step's (`pool.run_allowance`):
        # each GPU allows what one run holds, twice a step's five, so that a trainer never waits
        # for the node to start the sandboxes of its next step.
        self.per_run = run_allowance(settings)
        self.sandbox_allowance = settings.agent_sandboxes or self.per_run * self.slots
        self.trainers: dict[str, Trainer] = {}
        self.env = {k: v for k, v in os.environ.items() if k != "ARENA_CLUSTER_SECRET"}
        self.env.setdefault("TRACKIO_DIR", str(home / "trackio"))
        self.env["PYTHONUNBUFFERED"] = "1"
        self._adopt()

    # --- the runs it holds ---
    def held(self) -> list:
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir() and (p / "assignment.json").exists())

    def _adopt(self) -> None:
        """At start: the runs on disk. A live trainer is followed; a run whose trainer is gone is
        started again from its checkpoint (the node's agent restarted, or the node did)."""
        for run_id in self.held():
            rd = RunDir(self.runs_dir / run_id)
            t = Trainer(rd, self._free_slot())
            try:
                t.pid = int((rd.path / "trainer.pid").read_text())
            except (OSError, ValueError):
                t.pid = None
            self.trainers[run_id] = t
            if not rd.ended() and not t.alive():
                last = rd.last_event()
                rd.emit(last["state"] if last else "starting", last["policy_version"] if last else 0,
                        "the node's agent restarted and starts the trainer again from its last checkpoint",
                        alert="trainer_restarted")
                self._start(t)

    def _free_slot(self) -> int:
        busy = {t.slot for t in self.trainers.values() if not t.rd.ended()}
        return next(i for i in range(max(self.slots, len(busy) + 1)) if i not in busy)

    def _start(self, t: Trainer) -> None:
        device = {"CUDA_VISIBLE_DEVICES": str(t.slot)} if self.gpus else {"CUDA_VISIBLE_DEVICES": ""}
        t.start(self.python, self.env, device)
        log.info("trainer of %s started (pid %s)", t.rd.run_id, t.pid)

    def busy(self) -> int:
        return sum(1 for t in self.trainers.values() if not t.rd.ended())

    def free(self, kind: str) -> dict:
        busy = self.busy()
        m = {"kind": kind, "node_id": self.node_id, "gpus": self.slots, "gpus_free": max(self.slots - busy, 0),
             "sandboxes_free": max(self.sandbox_allowance - busy * self.per_run, 0)}
        if kind == "hello":
            m["runs"] = self.held()
        return m

    def supervise(self) -> None:
        """A trainer that exited without ending its run is started again once from its checkpoint,
        then its run fails with the trainer's own reason."""
        for run_id, t in list(self.trainers.items()):
            rd = t.rd
            if t.alive():
                continue
            if rd.ended():
                if not rd.unacked():
                    self.forget(run_id)
                continue
            code = t.exit_code()
            why = rd.failure() or f"RUN_TRAINER_FAILED: the trainer exited with status {code} without ending the run"
            state = self._agent_state(rd)
            restarts = state.get("restarts", 0)
            last = rd.last_event() or {"state": "starting", "policy_version": 0}
            if restarts < RESTARTS and not why.startswith("RUN_STEP_DOES_NOT_FIT"):
                state["restarts"] = restarts + 1
                self._save_agent_state(rd, state)
                (rd.path / "failure.txt").unlink(missing_ok=True)
                rd.emit(last["state"], last["policy_version"],
                        f"the trainer stopped ({why}); it is started again from its last checkpoint",
                        alert="trainer_restarted")
                self._start(t)
            else:
                rd.emit("failed", last["policy_version"], why if why.startswith("RUN_") else f"RUN_TRAINER_FAILED: {why}")

    @staticmethod
    def _agent_state(rd: RunDir) -> dict:
        try:
            return json.loads((rd.path / "agent.json").read_text())
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _save_agent_state(rd: RunDir, state: dict) -> None:
        (rd.path / "agent.json").write_text(json.dumps(state))

    def forget(self, run_id: str) -> None:
        """The run is over for the arena: its folder goes, the trained weights with it."""
        self.trainers.pop(run_id, None)
        path = self.runs_dir / run_id
        done = self.home / "done" / run_id
        done.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(path / "checkpoints", ignore_errors=True)
        shutil.rmtree(done, ignore_errors=True)
        if path.exists():
            os.replace(path, done)

    # --- the arena's messages ---
    def on_assign(self, m: dict) -> list:
        run_id = m.get("run_id", "")
        if not run_id or "/" in run_id or run_id.startswith("."):
            return []
        rd = RunDir(self.runs_dir / run_id)
        if run_id not in self.trainers and not (self.home / "done" / run_id).exists():
            rd.write_assignment(m)
            t = Trainer(rd, self._free_slot())
            self.trainers[run_id] = t
            self._start(t)
        return [{"kind": "accepted", "run_id": run_id}]

    def on_stop(self, m: dict) -> list:
        run_id = m.get("run_id", "")
        t = self.trainers.get(run_id)
        if t is not None:
            t.stop()
            self._cancel_sandboxes(run_id)
        if (self.runs_dir / run_id).exists():
            self.forget(run_id)
        return [{"kind": "stopped", "run_id": run_id}]

    def _cancel_sandboxes(self, run_id: str) -> None:
        """What the stopped trainer did not cancel itself: the run's training and held-out
        sandboxes, in both namespaces, as its own cleanup finds them (`sandboxes.cancel_all`).
        What fails is logged: the arena's sweep and HF's timeout stop them."""
        from .sandboxes import cancel_all, run_sandboxes

        try:
            problems = cancel_all(run_sandboxes(self.settings, run_id))
        except Exception as e:  # noqa: BLE001 - the HF client could not even be made
            problems = [f"{type(e).__name__}: {e}"]
        for why in problems:
            log.warning("canceling the sandboxes of %s: %s", run_id, why)

    def on_ack(self, m: dict) -> None:
        if m.get("of") == "hello":
            log.info("the arena took the hello: this connection holds the node")
        if m.get("of") != "event":
            return
        run_id, seq = m.get("run_id", ""), m.get("seq")
        path = self.runs_dir / run_id
        if not isinstance(seq, int) or not path.is_dir():
            return
        if m.get("error"):
            log.warning("the arena refused event %s of %s: %s", seq, run_id, m["error"])
        RunDir(path).ack(seq)

    # --- the connection ---
    async def run(self) -> None:
        from websockets.asyncio.client import connect

        backoff = 0.1
        while True:
            try:
                async with connect(self.url, additional_headers={"Authorization": f"Bearer {self.secret}"},
                                   proxy=None, max_size=4 << 20) as ws:
                    backoff = 0.1
                    log.info("connected to %s", self.url)
                    await self.session(ws)
            except (OSError, asyncio.TimeoutError) as e:
                log.info("no connection to the arena (%s); again in %.1f s", e, backoff)
            except Exception as e:  # noqa: BLE001 - websockets' closes and refusals: connect again
                log.info("the connection ended (%s); again in %.1f s", e, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def session(self, ws) -> None:
        await ws.send(json.dumps(self.free("hello")))
        sent: set = set()
        beat = time.monotonic()
        while True:
            self.supervise()
            for run_id in self.held():
                for event in RunDir(self.runs_dir / run_id).unacked():
                    if (run_id, event["seq"]) not in sent:
                        await ws.send(json.dumps({"kind": "event", "run_id": run_id, "event": event}))
                        sent.add((run_id, event["seq"]))
            if time.monotonic() - beat >= self.heartbeat_s:
                await ws.send(json.dumps(self.free("heartbeat")))
                beat = time.monotonic()
            try:
                text = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except asyncio.TimeoutError:
                continue
            try:
                m = json.loads(text)
            except ValueError:
                continue
            kind = m.get("kind")
            if kind == "ack":
                self.on_ack(m)
                continue
            if kind == "assign":
                replies = self.on_assign(m)
            elif kind == "stop":
                replies = await asyncio.to_thread(self.on_stop, m)
            else:
                continue
            for r in replies:
                await ws.send(json.dumps(r))


class Refused(Exception):
    """A token HF's whoami does not accept, or did not answer for."""


def whoami(token: str, setting: str, tries: int = 20, endpoint: str | None = None) -> dict:
    """HF's whoami-v2 answer for `token` (the setting `setting`); HF unreachable is tried again
    for a while, then refuses too."""
    import huggingface_hub

    api = huggingface_hub.HfApi(endpoint=endpoint)
    why = "no try"
    for _ in range(tries):
        try:
            return api.whoami(token=token)
        except Exception as e:  # noqa: BLE001 - httpx's and HF's errors alike: said, then tried again
            status = getattr(getattr(e, "response", None), "status_code", None)
            if status in (401, 403):
                raise Refused(f"{setting}: HF does not accept it") from None
            why = f"HF answered {status}" if status else f"{type(e).__name__}: {e}"
        log.info("checking %s: %s; trying again", setting, why)
        time.sleep(1)
    raise Refused(f"{setting}: HF's whoami did not answer ({why})")


def check_readers(settings: Settings, tries: int = 20) -> str | None:
    """Why the two readers may not be used (None: they may): `sandboxes.readers_refusal` on HF's
    whoami-v2 answers for them."""
    from .sandboxes import readers_refusal

    if settings.eval_namespace == settings.sandbox_namespace:
        return readers_refusal({}, {}, settings.sandbox_namespace, settings.eval_namespace)
    try:
        sandbox = whoami(settings.sandbox_token, "ARENA_SANDBOX_TOKEN", tries, settings.hf_endpoint)
        held_out = whoami(settings.eval_token, "ARENA_EVAL_TOKEN", tries, settings.hf_endpoint)
    except Refused as e:
        return str(e)
    return readers_refusal(sandbox, held_out, settings.sandbox_namespace, settings.eval_namespace)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arena", required=True, help="the arena's address, e.g. https://openenvarena-arena.hf.space")
    p.add_argument("--home", required=True, type=Path, help="the agent's folder (its runs, their checkpoints)")
    p.add_argument("--heartbeat-s", type=float, default=5.0)
    p.add_argument("--node-id", default=None,
                   help="this node's name at the arena (default: the --home folder's name); keep it across restarts")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    secret = os.environ.get("ARENA_CLUSTER_SECRET")
    if not secret:
        sys.exit("ARENA_CLUSTER_SECRET is not set: the arena refuses a cluster without it")
    try:
        settings = Settings.read()
    except SettingError as e:
        sys.exit(str(e))
    why = check_readers(settings)
    if why:
        sys.exit(f"the sandboxes' readers must be worth nothing to a participant who receives one, and are not: {why}")
    agent = Agent(args.arena, secret, args.home, args.heartbeat_s, sys.executable, settings, args.node_id)
    asyncio.run(agent.run())


if __name__ == "__main__":
    main()
