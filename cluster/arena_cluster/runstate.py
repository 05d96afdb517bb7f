"""What a trainer holds of its run, read once into dataclasses: the assignment the arena sent
(`Assignment`, refused as a whole when a part the trainer needs is missing) and the progress it
keeps in the run's folder (`Progress`), so a restarted trainer goes on where it was."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from . import contract, schemas


class Failure(Exception):
    """The run fails with this code and reason."""

    def __init__(self, code: str, why: str):
        super().__init__(f"{code}: {why}")


@dataclass(frozen=True)
class Actions:
    """What an environment's replies are read against: its action schema compiled under the draft
    the arena decided (`schema_draft`), and its finish action."""

    schema: Any
    draft: str
    finish_action: Any = None
    valid: Any = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(part: dict, what: str) -> "Actions":
        """From a submission or a held-out environment of the assignment; `what` names it in the
        refusal (never a held-out environment's image or task: participants read failures)."""
        draft = part.get("schema_draft")
        why = schemas.draft_refusal(draft)
        if why:
            raise Failure("RUN_TRAINER_FAILED", f"the assignment's {what} {why}")
        schema = (part.get("schema") or {}).get("action")
        return Actions(schema, draft, part.get("finish_action"), schemas.validator(schema, draft))


@dataclass(frozen=True)
class Assignment:
    run_id: str
    time_limit_s: int
    model_repo: str
    model_revision: str
    recipe: dict
    tasks: list
    actions: Actions
    # The held-out benchmark as the arena sent it (None: the run has none), and each of its
    # environments' actions, in order.
    benchmark: dict | None
    benchmark_actions: list

    @staticmethod
    def read(raw: dict) -> "Assignment":
        submission = raw.get("submission") or {}
        benchmark = raw.get("benchmark") or None
        envs = (benchmark or {}).get("environments") or []
        model = raw.get("model") or {}
        return Assignment(
            run_id=raw.get("run_id", ""),
            time_limit_s=int(raw.get("time_limit_s") or contract.RUN_LIMIT_S),
            model_repo=model.get("repo", "?"),
            model_revision=model.get("revision", "?"),
            recipe=dict(raw.get("recipe") or {}),
            tasks=list(submission.get("tasks") or []),
            actions=Actions.of(submission, "submission"),
            benchmark=benchmark,
            benchmark_actions=[Actions.of(e, f"held-out environment {i + 1}") for i, e in enumerate(envs)],
        )


@dataclass
class Progress:
    """The trainer's clock and counters, kept in `progress.json` after every change."""

    started_epoch: float
    # Steps played (trained or not): the next step plays train task `step_index` in turn.
    step_index: int = 0
    # The last measured update times (s): the step allowance's update part.
    update_s: list = field(default_factory=list)
    # The last steps' measured seconds beyond the contract's allowance (`trainer.Run.extra_s`):
    # the longest wait of a step's episodes for their sandboxes, and the rest of its rollout.
    sandbox_wait_s: list = field(default_factory=list)
    episodes_s: list = field(default_factory=list)
    # Whether each of the last steps played trained (`contract.no_signal`), and how the episodes of
    # the steps since the last that trained ended (`contract.END_KEYS`, summed).
    trained: list = field(default_factory=list)
    untrained_ends: dict = field(default_factory=dict)
    # Up to three of the model's invalid replies in those steps (quoted by a no-signal failure).
    untrained_replies: list = field(default_factory=list)
    # The rewards of the last step without signal, in the order its episodes ended.
    untrained_scores: list = field(default_factory=list)
    # Optimizer steps that trained, as last reported.
    policy_version: int = 0
    # Seconds spent in held-out phases (not counted against the run's training time).
    eval_s: float = 0.0
    # Per held-out phase (`before`, `after`): what it recorded, or why it is incomplete.
    evaluation: dict = field(default_factory=dict)

    @staticmethod
    def read(raw: dict | None) -> "Progress":
        if not raw:
            return Progress(started_epoch=time.time())
        known = {k: raw[k] for k in Progress.__dataclass_fields__ if k in raw}
        return Progress(**known)

    def to_json(self) -> dict:
        return asdict(self)
