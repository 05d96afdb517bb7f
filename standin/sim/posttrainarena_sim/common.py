"""What every simulated program shares: JSON files as the pipeline writes them, the fault switches
the stand-in hands a job, the pace of simulated work, and a seeded draw."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any


def write_json(path: Path, value: Any) -> None:
    """As the pipeline's `io.write_json`: indent 2, sorted keys, a trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def faults() -> dict[str, Any]:
    """The fault switches of this job (`PUT /_standin/jobs` on the stand-in), as it passed them."""
    raw = os.environ.get("STANDIN_JOB_FAULTS", "")
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        value = {}
    # A switch left unset is null: the same as absent.
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else {}


def step_seconds() -> float:
    """How long one simulated step takes (the stand-in's `STANDIN_STAGE_MS`)."""
    try:
        return max(0.0, int(os.environ.get("STANDIN_STEP_MS", "300")) / 1000.0)
    except ValueError:
        return 0.3


def pause(factor: float = 1.0) -> None:
    time.sleep(step_seconds() * factor)


def unit(*parts: str) -> float:
    """A number in [0, 1) drawn from text: the same text, the same number."""
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def hang() -> None:
    """A hung container: the whole job stops, no heartbeat and no log line, until it is killed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.killpg(os.getpgid(0), signal.SIGSTOP)


def die() -> None:
    """A container killed before it could publish anything (a lost node, an OOM kill)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)
