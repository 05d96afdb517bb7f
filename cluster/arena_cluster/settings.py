"""What the node's agent and its trainers read from the environment, read once at start into one
object: a setting that is missing or malformed is refused by its name, before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping


class SettingError(ValueError):
    """A setting the node cannot run with, named."""


def _text(env: Mapping[str, str], name: str) -> str:
    value = (env.get(name) or "").strip()
    if not value:
        raise SettingError(f"{name} is not set: the trainer needs it")
    return value


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip()
    if raw not in ("", "0", "1"):
        raise SettingError(f"{name} is `{raw}`: 1 (on) or 0 (off)")
    return default if not raw else raw == "1"


def _count(env: Mapping[str, str], name: str, least: int) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SettingError(f"{name} is `{raw}`, not a whole number") from None
    if value < least:
        raise SettingError(f"{name} is {value}; it must be at least {least}")
    return value


@dataclass(frozen=True)
class Settings:
    # HF: the arena's bot (it starts the sandboxes) and the reader participants' servers see.
    # Tokens never print: a repr (a log line, an assertion) shows the other settings only.
    hf_token: str = field(repr=False)
    hf_endpoint: str | None
    sandbox_token: str = field(repr=False)
    sandbox_namespace: str
    # Held-out episodes run apart: in their own namespace, and the only credential their
    # sandboxes receive is a read token of an account whose only organization it is.
    eval_token: str = field(repr=False)
    eval_namespace: str
    # The trainer: `tiny` (the CPU test model) or the folder of the node's copy of the model.
    trainer_model: str
    trainer_max_steps: int | None
    # Start the next steps' and the held-out cells' sandboxes ahead of need (`pool`), and how long
    # a sandbox may take to serve before it is replaced (the guide's health wait).
    trainer_prefetch: bool
    sandbox_start_s: int
    trackio_space_id: str | None
    # The agent: its GPUs (None: ask nvidia-smi), CPU slots without GPUs, sandboxes at once.
    agent_gpus: int | None
    agent_cpu_slots: int
    agent_sandboxes: int | None

    @staticmethod
    def read(env: Mapping[str, str] = os.environ) -> "Settings":
        return Settings(
            hf_token=_text(env, "HF_TOKEN"),
            hf_endpoint=(env.get("HF_ENDPOINT") or "").strip() or None,
            sandbox_token=_text(env, "ARENA_SANDBOX_TOKEN"),
            sandbox_namespace=_text(env, "ARENA_SANDBOX_NAMESPACE"),
            eval_token=_text(env, "ARENA_EVAL_TOKEN"),
            eval_namespace=_text(env, "ARENA_EVAL_NAMESPACE"),
            trainer_model=_text(env, "ARENA_TRAINER_MODEL"),
            trainer_max_steps=_count(env, "ARENA_TRAINER_MAX_STEPS", 1),
            trainer_prefetch=_switch(env, "ARENA_TRAINER_PREFETCH", True),
            sandbox_start_s=_count(env, "ARENA_SANDBOX_START_S", 1) or 120,
            trackio_space_id=(env.get("TRACKIO_SPACE_ID") or "").strip() or None,
            agent_gpus=_count(env, "ARENA_AGENT_GPUS", 0),
            agent_cpu_slots=_count(env, "ARENA_AGENT_CPU_SLOTS", 0) or 0,
            agent_sandboxes=_count(env, "ARENA_AGENT_SANDBOXES", 1),
        )

    @property
    def tiny(self) -> bool:
        return self.trainer_model == "tiny"

    def hf_api(self):
        import huggingface_hub

        return huggingface_hub.HfApi(endpoint=self.hf_endpoint, token=self.hf_token)
