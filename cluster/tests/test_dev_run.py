"""`ARENA_CLUSTER=real dev/run`, with nothing else set but a sandbox start delay, completes the demo
submission's run: at least one trained step and a held-out evaluation before and after, and every
sandbox it started canceled by its end. dev/run is started as a person starts
it, in a process group of its own, with only what must differ on a shared test machine: its two
addresses on free loopback ports, its data in a folder of its own, the build it runs
(`ARENA_PROFILE=debug`: the binaries dev/test built, instead of a release build of ten minutes),
and two optimizer steps instead of dev/run's four (`ARENA_TRAINER_MAX_STEPS`, which dev/run
names: tests/test_end_to_end.py trains three, each step checked).
The submission is the one dev/run's own output says to submit, with the token it prints. Then
dev/run's process group is stopped as Ctrl-C would stop it, and no process it started (stand-in,
arena, agent, trainer, sandboxes) is left."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the test's own environment may hold that dev/run (or what it starts) reads: none of it
# reaches dev/run, which is started as with nothing set.
SETTING_PREFIXES = ("ARENA_", "STANDIN_", "HF_", "HUGGINGFACE_", "OPENID_", "OAUTH_", "GITHUB_", "TRACKIO_",
                    "LOCAL_CAP_USD")


# The stand-in's sandbox start delay (`STANDIN_SANDBOX_START_S`).
START_S = 2
# Optimizer steps the run may take (dev/run's `ARENA_TRAINER_MAX_STEPS`, 4 by default).
STEPS = 2
# The namespaces dev/run's sandboxes run in (training's, held-out's), and its arena bot's token.
SANDBOX_NAMESPACES = ("benchflow-sandboxes", "benchflow-eval")
BOT_TOKEN = "hf_local_demo_arena_token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, tok=None, body=None):
    headers = {"Content-Type": "application/json"}
    if tok:
        headers["Authorization"] = "Bearer " + tok
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def processes():
    """Every process: pid -> (state, parent, process group)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(name)] = (fields[0], int(fields[1]), int(fields[2]))
    return out


def started_by(root):
    """`root` and every process it started that is still running under it, and every process of
    its process group."""
    procs = processes()
    children = {}
    for pid, (_, parent, _) in procs.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {root}, [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found | {pid for pid, (_, _, group) in procs.items() if group == root}


def listens(root, address):
    """Whether `root` or a process it started holds the socket listening on `address`
    (`127.0.0.1:PORT`): what answers there is dev/run's, not another test's server that took the
    port before dev/run got to binding it."""
    port = int(address.rsplit(":", 1)[1])
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            f = row.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                sockets.add(f"socket:[{f[9]}]")
    for pid in started_by(root) if sockets else ():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                    return True
            except OSError:
                pass
    return False


def port_taken(said):
    said = said.lower()
    return "address already in use" in said or "addrinuse" in said


class PortTaken(Exception):
    """dev/run's stand-in or arena found its port taken: the port was free when picked, and is
    bound tens of seconds later."""


def running(pids):
    procs = processes()
    return sorted(p for p in pids if p in procs and procs[p][0] != "Z")


def describe(pids):
    out = []
    for p in pids:
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append(f"{p}: {cmdline[:200]}")
    return out


def mentioning(text):
    """Processes whose command line holds `text`."""
    out = []
    for pid in processes():
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return running(out)


def sandboxes(hub, run_id):
    """The run's sandbox jobs HF lists, in both namespaces."""
    out = []
    for ns in SANDBOX_NAMESPACES:
        req = urllib.request.Request(f"{hub}/api/jobs/{ns}?label=arena-run%3D{run_id}&limit=500",
                                     headers={"Authorization": "Bearer " + BOT_TOKEN})
        with urllib.request.urlopen(req, timeout=30) as r:
            out += [j for j in json.load(r) if (j.get("labels") or {}).get("arena-run") == run_id]
    return out


class DevRun:
    """dev/run in a process group of its own, its output in a file."""

    def __init__(self, data: Path):
        self.data = data
        self.arena, self.standin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(SETTING_PREFIXES)}
        # The stand-in's sandboxes start late, as HF's do (a short delay: the pool starts them
        # ahead of need either way).
        env.update(ARENA_CLUSTER="real", ARENA_ADDR=self.arena, STANDIN_ADDR=self.standin,
                   ARENA_DATA_DIR=str(data), ARENA_PROFILE="debug", STANDIN_SANDBOX_START_S=str(START_S),
                   ARENA_TRAINER_MAX_STEPS=str(STEPS))
        self.log_path = data.parent / f"dev-run-{data.name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(ROOT / "dev/run")], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.started = set()

    def output(self):
        return self.log_path.read_text(errors="replace")

    def wait(self, what, check, limit_s, starting=False):
        """`check()`'s value once true; `starting`: while dev/run binds its ports, whose being
        taken meanwhile raises PortTaken."""
        deadline = time.time() + limit_s
        while True:
            if starting and port_taken(self.output()):
                raise PortTaken(self.output()[-4000:])
            value = check()
            if value:
                return value
            assert self.proc.poll() is None, f"dev/run exited ({self.proc.returncode}) before {what}:\n" + \
                self.output()[-4000:]
            assert time.time() < deadline, f"{what}: not within {limit_s} s\n" + self.output()[-4000:]
            # What it started so far (the trainer runs in a session of its own, under the agent).
            self.started |= started_by(self.proc.pid)
            time.sleep(1)

    def stop(self):
        """SIGTERM to dev/run's process group, as a terminal's Ctrl-C signals the whole group."""
        self.started |= started_by(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(60)
        finally:
            self.log.close()

    def kill_left(self):
        """Whatever of it is still running (a failed test's): killed."""
        for pid in running(self.started | started_by(self.proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def shut(dev):
    """Stops dev/run; what it started that still runs a while later (then killed)."""
    dev.stop()
    # What it started has a little while to go (a stopped trainer cancels its sandboxes).
    deadline = time.time() + 30
    while running(dev.started) and time.time() < deadline:
        time.sleep(0.5)
    left = running(dev.started)
    dev.kill_left()
    return left


def test_dev_run_with_the_real_cluster_completes_the_demo_submissions_run(tmp_path):
    started = time.monotonic()
    runs, every, left = [], set(), []
    try:
        # dev/run again, on fresh ports, when one of its two was taken before it bound it.
        for attempt in range(4):
            dev = DevRun(tmp_path / f"data-{attempt}")
            runs.append(dev)
            try:
                # What dev/run prints for the demo submission: the API's base, alice's local token,
                # the file to submit, and the submission's address.
                said = dev.wait("the demo submission's lines", lambda: re.search(
                    r"BASE=(\S+) TOKEN=(\S+)\n.*--data @(\S+) .*\n.*\"\$BASE/submissions/([\w.-]+)\"", dev.output()),
                    600, starting=True)
                base, tok, file, submission_id = said.groups()
                assert base == f"http://{dev.arena}/api/openenv", base
                body = json.loads((ROOT / file).read_text())
                assert body["submission_id"] == submission_id and file == "dev/demo/openenv/submission.json", \
                    said.group(0)

                def connected():
                    if not listens(dev.proc.pid, dev.arena):
                        return False
                    try:
                        return call("GET", base)[1].get("connected")
                    except OSError:
                        return False

                # The arena up, and the node's agent connected to it (submissions wait for a cluster).
                dev.wait("the real agent's connection", connected, 300, starting=True)
                break
            except PortTaken as taken:
                print(f"dev/run's port was taken; again on others:\n{taken}")
                left += shut(runs.pop())
                every |= dev.started
        else:
            pytest.fail("dev/run's ports were taken at each of four starts")
        status, answer = call("POST", base + "/submissions", tok, body)
        assert status == 202, answer

        def admitted():
            s, a = call("GET", f"{base}/submissions/{submission_id}", tok)
            assert s == 200 and a["state"] != "rejected", a
            return a["state"] == "validated" and (a.get("run") or {}).get("run_id")

        run_id = dev.wait("admission", admitted, 600)

        def ended():
            s, r = call("GET", f"{base}/runs/{run_id}", tok)
            assert s == 200, r
            return r["state"] in ("completed", "failed", "cancelled") and r

        run = dev.wait("the run's end", ended, 2400)
        events = call("GET", f"{base}/runs/{run_id}/events", tok)[1]["events"]
        assert run["state"] == "completed" and 1 <= run["policy_version"] <= STEPS, (run, events)
        assert "tiny test model" in run["trainer"]["model"], run
        e = run["evaluation"]
        assert e["state"] == "complete" and not e["simulated"], e
        assert e["before"]["episodes"] > 0 and e["after"]["episodes"] > 0, e
        trained = [ev for ev in events if ev["state"] == "updating" and ev.get("metrics")]
        assert trained, events
        # Every sandbox the run started is canceled by its end: HF's jobs list, as the arena's bot
        # reads it, holds none of them live.
        hub = f"http://{dev.standin}"
        assert sandboxes(hub, run_id), "the run started no sandbox on the stand-in"
        dev.wait("the run's sandboxes canceled", lambda: not [
            j["id"] for j in sandboxes(hub, run_id) if j["status"]["stage"] in ("SCHEDULING", "RUNNING", "UPDATING")], 60)
        run_s = time.monotonic() - started
    finally:
        for d in runs:  # the last one
            left += shut(d)
            every |= d.started
    assert every, "dev/run started nothing"
    assert not left, "left running after dev/run stopped:\n" + "\n".join(describe(left))
    assert not mentioning(str(tmp_path)), describe(mentioning(str(tmp_path)))
    print(f"dev/run to the run's end: {run_s:.0f} s; in all: {time.monotonic() - started:.0f} s")


@pytest.fixture(autouse=True)
def _needs_the_debug_build():
    target = Path(os.environ.get("CARGO_TARGET_DIR") or Path.home() / ".cache/arena-target") / "debug"
    if not (target / "arena").exists():
        pytest.fail(f"no debug build in {target}: dev/test builds it before the trainer's tests")
