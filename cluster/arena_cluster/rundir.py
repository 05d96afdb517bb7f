"""A run's folder on the node, the one place its state lives, so that a killed agent or trainer
loses nothing: `assignment.json` (what the arena sent), `events.jsonl` (every event of the run,
in sequence, as the arena's `/api/relay/cluster` takes them), `acked.json` (the sequences the
arena acknowledged), `progress.json` (the trainer's clock and step counter), `checkpoints/` (the
adapter, optimizer state and step after every optimizer step), `failure.txt` (why a trainer
exited non-zero) and `conversations.jsonl` (what the model saw in a few episodes:
`write_conversation`). The trained weights and the conversations stay here: nothing sends them
anywhere.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

TERMINAL = ("completed", "failed", "cancelled")
# The model's replies are cut to this many characters in `conversations.jsonl`.
REPLY_CHARS = 200


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.run_id = self.path.name

    # --- what the arena sent ---
    @property
    def assignment(self) -> dict:
        return json.loads((self.path / "assignment.json").read_text())

    def write_assignment(self, assignment: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if not (self.path / "assignment.json").exists():
            _write_atomic(self.path / "assignment.json", json.dumps(assignment))

    # --- events ---
    def events(self) -> list:
        # A line cut by a crash mid-write is the end of the file (`emit` drops it before appending).
        return _read_jsonl(self.path / "events.jsonl", stop_at_cut=True)

    def last_event(self) -> dict | None:
        events = self.events()
        return events[-1] if events else None

    def emit(self, state: str, policy_version: int, message: str, **extra) -> dict:
        """Appends the run's next event (sequence after the last one), durably."""
        last = self.last_event()
        event = {"seq": (last["seq"] if last else 0) + 1, "state": state, "policy_version": policy_version,
                 "at": now_rfc3339(), "message": message}
        event.update({k: v for k, v in extra.items() if v is not None})
        self._drop_cut_line()
        with open(self.path / "events.jsonl", "a") as f:
            f.write(json.dumps(event) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return event

    def _drop_cut_line(self) -> None:
        """A line a crash cut short is removed before the next event is written after it."""
        path = self.path / "events.jsonl"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def ended(self) -> bool:
        last = self.last_event()
        return bool(last) and last["state"] in TERMINAL

    # --- acknowledgements ---
    def acked(self) -> set:
        try:
            return set(json.loads((self.path / "acked.json").read_text()))
        except (FileNotFoundError, ValueError):
            return set()

    def ack(self, seq: int) -> None:
        acked = self.acked() | {seq}
        _write_atomic(self.path / "acked.json", json.dumps(sorted(acked)))

    def unacked(self) -> list:
        acked = self.acked()
        return [e for e in self.events() if e["seq"] not in acked]

    # --- the trainer's progress ---
    def progress(self) -> dict | None:
        try:
            return json.loads((self.path / "progress.json").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def write_progress(self, progress: dict) -> None:
        _write_atomic(self.path / "progress.json", json.dumps(progress))

    # --- the report of a step whose checkpoint is being written ---
    def staged_report(self) -> dict | None:
        """`{"progress", "event"}`: what the trainer reports of the step whose checkpoint it is
        writing, kept until the report is made (`Run.stage`)."""
        try:
            return json.loads((self.path / "staged-report.json").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def write_staged_report(self, staged: dict) -> None:
        _write_atomic(self.path / "staged-report.json", json.dumps(staged))

    def clear_staged_report(self) -> None:
        (self.path / "staged-report.json").unlink(missing_ok=True)

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def last_checkpoint(self) -> Path | None:
        found = sorted(self.checkpoints.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
        return found[-1] if found else None

    # --- what the model saw ---
    def write_conversation(self, purpose: str, task_label: str, messages: list, **extra) -> None:
        """Appends one episode's conversation to `conversations.jsonl`, for whoever debugs the node
        (the trainer writes the first episode of each training step and of each held-out phase,
        never every episode): `{"purpose", "task_label", "messages": [{"role", "content"}], …}`
        with the system and user turns as the model saw them and its own replies cut to
        `REPLY_CHARS` characters. It stays on the node: the arena never receives it (held-out
        episodes are in it)."""
        shown = [{"role": m["role"], "content": m["content"] if m["role"] != "assistant" else
                  _cut(m["content"], REPLY_CHARS)} for m in messages]
        line = {"purpose": purpose, "task_label": task_label, "messages": shown}
        line.update({k: v for k, v in extra.items() if v is not None})
        with open(self.path / "conversations.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")

    def conversations(self) -> list:
        # Nothing repairs this file: a line a crash cut short is passed over.
        return _read_jsonl(self.path / "conversations.jsonl", stop_at_cut=False)

    def failure(self) -> str | None:
        try:
            return (self.path / "failure.txt").read_text().strip() or None
        except FileNotFoundError:
            return None

    def write_failure(self, why: str) -> None:
        _write_atomic(self.path / "failure.txt", why)


def _read_jsonl(path: Path, stop_at_cut: bool) -> list:
    """A JSON-lines file's records (none when it is missing); a line that does not parse ends the
    reading (`stop_at_cut`) or is passed over."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            if stop_at_cut:
                break
    return out


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + "…"
