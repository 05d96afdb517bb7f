"""Backups as they would fail: a SQLite arena with a backup dataset on the HF stand-in takes an
agent and board posts, snapshots them; it is killed with SIGKILL, its data directory deleted, and
started again: everything older than the last snapshot is back. A run launched after the last
snapshot is found again from its HF job and followed to `scored`, charged once. A corrupt newest
snapshot falls back to the one before; one from a newer schema stops the server, saying so;
PostgreSQL refuses ARENA_BACKUP_REPO. Only what the arena signed with ARENA_BACKUP_KEY is restored:
a snapshot forged by someone who can write the dataset is passed over, named for the editors."""

import gzip
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import free_port, hub_url, run_cli
from test_collections import hub_repos, publish  # noqa: F401 (hub_repos is a fixture)

ROOT = Path(__file__).resolve().parents[2]
RUPERT = "hf_local_test_rupert_3be2d8"
ALICE = "hf_local_test_alice_7b1f0c"
ARENA_BOT = "hf_local_test_arena_bot_5a5a5a"
EVE = "hf_local_test_eve_e11e11"
BACKUP_KEY = "local-test-backup-key-6b6b6b6b6b6b6b6b6b6b6b6b"
TARGET = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "arena-target")


def request(url, method="GET", body=None, token=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class Arena:
    """One arena process on its own data directory, started and killed as a Space restarts."""

    def __init__(self, work, repo, extra=None):
        self.work, self.port, self.proc = work, free_port(), None
        self.url = "http://127.0.0.1:%d" % self.port
        self.env = {"PATH": os.environ["PATH"], "HOME": str(work), "RUST_LOG": "info",
                    "ARENA_ADDR": "127.0.0.1:%d" % self.port, "ARENA_DATA_DIR": str(work / "data"),
                    "ARENA_CONFIGS_DIR": str(work / "configs"), "ARENA_SITE_ROOT": str(ROOT / "target" / "site"),
                    "ARENA_PUBLIC_URL": self.url, "ARENA_COOKIE_SECURE": "false", "HF_ENDPOINT": hub_url(),
                    "HF_TOKEN": ARENA_BOT, "ARENA_BACKUP_REPO": repo, "ARENA_BACKUP_KEY": BACKUP_KEY, "ARENA_BACKUP_EVERY_S": "1",
                    "ARENA_BACKUP_KEEP": "3", "ARENA_WORKER_TICK_S": "1", "GITHUB_API_URL": hub_url(),
                    "GITHUB_RAW_URL": hub_url() + "/raw", "ARENA_UNSEEN_TOKENS_PER_MINUTE": "5000",
                    **(extra or {})}

    def start(self, expect_up=True):
        self.log = self.work / ("server-%s.log" % uuid.uuid4().hex[:6])
        out = open(self.log, "w")
        self.proc = subprocess.Popen([TARGET + "/debug/arena", "serve"], env=self.env, stdout=out, stderr=out)
        for _ in range(120):
            if self.proc.poll() is not None:
                assert not expect_up, self.log.read_text()
                return self.log.read_text()
            try:
                if urllib.request.urlopen(self.url + "/healthz", timeout=2).status == 200:
                    assert expect_up, "it started"
                    return None
            except OSError:
                pass
            time.sleep(0.5)
        pytest.fail("the arena did not start: " + self.log.read_text())

    def kill_and_wipe(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        shutil.rmtree(self.work / "data")

    def backup(self):
        """The backups in full, as an editor reads them."""
        return request(self.url + "/api/version", token=EVE)[1]["backup_details"]

    def settled_snapshot(self):
        """Waits until a snapshot was uploaded and none followed for three turns (so it holds every
        write made before the call); answers the backup status."""
        seen, since = None, time.time()
        for _ in range(240):
            b = self.backup()
            if b["snapshot"] != seen:
                seen, since = b["snapshot"], time.time()
            elif seen and time.time() - since > 3:
                return b
            time.sleep(0.25)
        pytest.fail("no settled snapshot: %s" % self.backup())


@pytest.fixture()
def arena(tmp_path):
    subprocess.run(["bash", "-c", 'source dev/lib.sh && assemble_local_configs "$1"', "_", str(tmp_path / "configs")],
                   cwd=ROOT, check=True, capture_output=True)
    a = Arena(tmp_path, "benchflow/arena-backup-" + uuid.uuid4().hex[:8])
    # The organizer creates the private dataset first: a start that cannot find it stops.
    said = a.start(expect_up=False)
    assert "is not there" in said and "Not starting on an empty database" in said, said
    hub_api().create_repo(a.env["ARENA_BACKUP_REPO"], repo_type="dataset", private=True)
    yield a
    if a.proc and a.proc.poll() is None:
        a.proc.kill()
        a.proc.wait()


def hub_api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_url(), token=ARENA_BOT)


def post(arena, text):
    body = {"request_id": "backup-" + uuid.uuid4().hex[:10], "agent_id": "rupert-backup", "body": text, "refs": [],
            "broadcast": False}
    status, answer = request(arena.url + "/api/board/messages", "POST", body, RUPERT)
    assert status in (200, 201), answer
    return answer


def board(arena):
    return [m["body"] for m in request(arena.url + "/api/board/messages?limit=100")[1]["messages"]]


def snapshot_name(schema, content, key=BACKUP_KEY, stamp=None):
    """A snapshot's path, signed with `key` as the arena signs one (its name, then its bytes)."""
    stamp = stamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signed = "arena-%s-s%d" % (stamp, schema)
    signature = hmac.new(key.encode(), signed.encode() + b"\n" + content, hashlib.sha256).hexdigest()
    return "backups/%s-%s.sqlite.gz" % (signed, signature)


def test_a_killed_and_wiped_space_comes_back_from_its_last_snapshot(arena):
    assert arena.start() is None
    b = arena.backup()
    assert b["repo"].startswith("benchflow/arena-backup-") and b["restored_from"] is None
    # Everyone else sees the health alone: no repository, error or run id.
    public = request(arena.url + "/api/version")[1]
    assert public["backup_details"] is None and set(public["backup"]) == {"state", "at"}, public
    assert request(arena.url + "/api/version", token=RUPERT)[1]["backup_details"] is None
    agent = {"agent_id": "rupert-backup", "description": "The agent of rupert: backup checks"}
    assert request(arena.url + "/api/agents", "POST", agent, RUPERT)[0] in (200, 201)
    for i in range(3):
        post(arena, "Backed-up message %d." % i)
    first = arena.settled_snapshot()
    assert first["last_error"] is None and first["snapshot"].startswith("backups/arena-"), first
    # Nothing changed since: no new snapshot was taken.
    assert arena.backup()["snapshot"] == first["snapshot"]
    arena.kill_and_wipe()
    # The last snapshot is the newest the dataset holds once the arena is dead (on a loaded machine
    # one more may have landed after the settled one: a later write of the arena's own).
    held = [f for f in hub_api().list_repo_files(arena.env["ARENA_BACKUP_REPO"], repo_type="dataset")
            if f.startswith("backups/")]
    last = max(held, key=lambda f: f.split("-")[1])
    assert last.split("-")[1] >= first["snapshot"].split("-")[1], (held, first)
    assert arena.start() is None
    b = arena.backup()
    restored, _, revision = (b["restored_from"] or "").partition("@")
    assert restored in held and restored.split("-")[1] == last.split("-")[1] and revision, (b, held)
    assert {"Backed-up message %d." % i for i in range(3)} <= set(board(arena))
    assert request(arena.url + "/api/discover")[1]["agents_total"] >= 1


def test_a_corrupt_newest_snapshot_falls_back_and_a_newer_schema_stops_the_start(arena):
    assert arena.start() is None
    agent = {"agent_id": "rupert-backup", "description": "The agent of rupert: backup checks"}
    assert request(arena.url + "/api/agents", "POST", agent, RUPERT)[0] in (200, 201)
    post(arena, "Before the corruption.")
    good = arena.settled_snapshot()
    arena.proc.send_signal(signal.SIGKILL)
    arena.proc.wait()
    repo, api = arena.env["ARENA_BACKUP_REPO"], hub_api()
    name = good["snapshot"].split("/")[-1]
    schema = int(name.split("-s")[1].split("-")[0])
    # Newer snapshots the arena did not write: one signed with a guess of the key, and one the
    # arena signed that is corrupt (a disk or a bug, not an attacker).
    forged_bytes = gzip.compress(b"SQLite format 3\0 not a database")
    forged = snapshot_name(schema, forged_bytes, key="a guess of the arena's key, 32 chars")
    corrupt_bytes = gzip.compress(b"not a database")
    corrupt = snapshot_name(schema, corrupt_bytes)
    for path, content in ((forged, forged_bytes), (corrupt, corrupt_bytes)):
        api.upload_file(path_or_fileobj=content, path_in_repo=path, repo_id=repo, repo_type="dataset")
    shutil.rmtree(arena.work / "data")
    assert arena.start() is None
    b = arena.backup()
    assert b["restored_from"].startswith(good["snapshot"] + "@")
    skipped = "\n".join(b["restore_skipped"])
    assert forged + ": its signature is not the arena's" in skipped, skipped
    assert corrupt + ": not a SQLite database" in skipped, skipped
    assert "Before the corruption." in board(arena)
    assert "trying the one before" in arena.log.read_text()
    arena.proc.send_signal(signal.SIGKILL)
    arena.proc.wait()
    # One the arena signed, from a schema this build does not know: the server refuses to start
    # rather than go back.
    newer = snapshot_name(schema + 1000, b"x")
    api.upload_file(path_or_fileobj=b"x", path_in_repo=newer, repo_id=repo, repo_type="dataset")
    shutil.rmtree(arena.work / "data")
    said = arena.start(expect_up=False)
    assert "newer than this build's %d" % schema in said, said


def test_postgresql_refuses_a_backup_repo(arena):
    arena.env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/test"
    said = arena.start(expect_up=False)
    assert "ARENA_BACKUP_REPO backs up the SQLite database" in said and "pg_dump" in said, said


def run_view(arena, run_id):
    return request(arena.url + "/api/challenges/local-demo/runs/" + run_id)


def wait_run(arena, run_id, done, seconds=150):
    deadline = time.time() + seconds
    while True:
        status, run = run_view(arena, run_id)
        if status == 200 and done(run):
            return run
        assert time.time() < deadline, (status, run, arena.log.read_text()[-3000:])
        time.sleep(1)


def ledger(arena, run_id):
    answer = request(arena.url + "/api/arena/jobs")[1]
    return answer["budget"], [r for r in answer["reservations"] if r["run_id"] == run_id]


def test_a_run_launched_after_the_last_snapshot_is_found_again_from_its_job(arena, hub_repos, tmp_path):
    """The whole loss: a collection submitted and snapshotted; the server restarted with its
    snapshots held back, a run launched; SIGKILL while the job runs, the data directory deleted, a
    corrupt snapshot newer than the good one; restarted: the good snapshot is restored, the run is
    taken back from HF's record of its job and followed to `scored`, with one job and one
    reservation, settled once."""
    tag = uuid.uuid4().hex[:8]
    fingerprints = tmp_path / "fingerprints"
    fingerprints.mkdir()
    for source, suite in (("sealed-suite", "openenv-heldout"), ("public-bench", "public-bench")):
        out = subprocess.run([TARGET + "/debug/arena", "fingerprint-suite", "tests/fixtures/heldout/" + source,
                              "--suite", suite] + (["--sealed"] if source == "sealed-suite" else []),
                             cwd=ROOT, check=True, capture_output=True).stdout
        (fingerprints / (suite + ".json")).write_bytes(out)
    arena.env.update({"ARENA_JOBS_NAMESPACE": "benchflow", "ARENA_RUNS_DATASET": "benchflow/arena-runs-" + tag,
                      "ARENA_LEADERBOARD_DATASET": "benchflow/arena-leaderboard-" + tag,
                      "ARENA_JOB_SECRET_DAYTONA_API_KEY": "local-simulated-daytona-key",
                      "ARENA_RELAY_HEARTBEAT_S": "1", "ARENA_FINGERPRINTS_DIR": str(fingerprints)})
    assert arena.start() is None
    repo_id, _ = publish(hub_repos, "good")
    submission = tmp_path / "env.json"
    submission.write_text(json.dumps({"agent_id": None, "challenge_id": "local-demo", "repo_type": "dataset",
                                      "repo_id": repo_id, "revision": "main", "entry_path": "",
                                      "title": "Found again", "notes": ""}))
    r = run_cli(["submit", "--file", str(submission)], arena.url, token=ALICE)
    assert r.returncode == 0, r.stderr
    environment_id = json.loads(r.stdout)["environment_id"]
    good = arena.settled_snapshot()
    budget_before, _ = ledger(arena, "none")

    # Restarted with its snapshots held back: what follows is newer than the last one.
    arena.proc.send_signal(signal.SIGKILL)
    arena.proc.wait()
    arena.env["ARENA_BACKUP_EVERY_S"] = "3600"
    assert arena.start() is None
    request_file = tmp_path / "run.json"
    request_file.write_text(json.dumps({"request_id": "alice-found-again-" + tag}))
    r = run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", str(request_file),
                 "--execute"], arena.url, token=ALICE)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run"]["run_id"]
    launched = wait_run(arena, run_id, lambda run: run.get("job_id"))
    assert arena.backup()["last_ok_at"] is None, "this process uploaded no snapshot: none holds the run"

    arena.kill_and_wipe()
    api = hub_api()
    name = good["snapshot"].split("/")[-1]
    schema = int(name.split("-s")[1].split("-")[0])
    corrupt = snapshot_name(schema, b"junk", key="a guess of the arena's key, 32 chars")
    api.upload_file(path_or_fileobj=b"junk", path_in_repo=corrupt, repo_id=arena.env["ARENA_BACKUP_REPO"],
                    repo_type="dataset")
    arena.env["ARENA_BACKUP_EVERY_S"] = "1"
    assert arena.start() is None
    assert arena.backup()["restored_from"].startswith(good["snapshot"] + "@")
    found = wait_run(arena, run_id, lambda run: run["state"] == "scored")
    assert found["job_id"] == launched["job_id"]
    assert found["environment_id"] == environment_id and found["author"] == "alice"
    assert run_id in arena.backup()["runs_found_again"]
    assert any(e["kind"] == "found again" for e in found["events"]), found["events"]
    # One job for the run on HF, one reservation in the ledger, settled once.
    jobs = [j for j in api.list_jobs(namespace="benchflow") if (j.labels or {}).get("arena-run") == run_id]
    assert len(jobs) == 1, jobs
    budget, reservations = ledger(arena, run_id)
    assert [r["state"] for r in reservations] == ["settled"], reservations
    assert budget["ledger_usd"] == pytest.approx(budget_before["ledger_usd"] + reservations[0]["amount_usd"])
    assert budget["live_reservations"] == 0
    # The same request again is the same run: nothing is launched twice.
    r = run_cli(["run", "--challenge", "local-demo", "--id", environment_id, "--file", str(request_file),
                 "--execute"], arena.url, token=ALICE)
    assert r.returncode == 0 and json.loads(r.stdout)["run"]["run_id"] == run_id, r.stderr
    assert len([j for j in api.list_jobs(namespace="benchflow") if (j.labels or {}).get("arena-run") == run_id]) == 1
