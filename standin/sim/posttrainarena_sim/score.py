"""The held-out score as `reference/pipeline.md` §7 states it (the held-out branch's `heldout.py`):
cells from health rows, per-suite arms, the paired Δ with its task-clustered standard error, and
suites pooled as strata. The arena recomputes the same numbers in Rust (`domain::score`) and
refuses a report that differs, so this simulated writer and that checker are two independent
readings of one rule."""

from __future__ import annotations

import math
from typing import Any, Iterable

PASS_THRESHOLD = 1.0
Z95 = 1.959963984540054
TIMEOUT_MARKERS = ("wall-clock budget", "idle timeout", "timed out")
STDERR_METHOD = (
    "Per suite: SE(delta) = sqrt(s_d^2 / n), s_d^2 the sample variance over paired tasks of d_i = mean over "
    "trials of pass@1 after minus before (task-clustered, paired; includes task and trial variation). Pooled: "
    "suites as strata, SE = sqrt(sum_s (n_s/N)^2 SE_s^2). Infra-error cells are excluded, not scored 0. "
    "ci95 = delta +/- 1.96 SE."
)


def is_timeout(row: dict) -> bool:
    if row.get("error") is None:
        return False
    if row.get("error_category") is not None:
        return str(row["error_category"]) == "timeout"
    text = str(row["error"]).lower()
    return any(marker in text for marker in TIMEOUT_MARKERS)


def is_scored(row: dict) -> bool:
    """A row the verifier scored: a timeout with a verifier result counts; any other error does not."""
    return (
        row.get("scored") is True
        and (row.get("error") is None or is_timeout(row))
        and row.get("verifier_error") is None
        and row.get("valid_llm_trajectory") is True
    )


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def outcomes(rows: list, task_ids: Iterable[str]) -> dict[str, dict]:
    """Each task's outcome in one evaluation: the last scored row's reward, else an infra error."""
    result = {}
    for task in task_ids:
        rewards = [
            float(r["reward"])
            for r in rows
            if isinstance(r, dict) and r.get("task_id") == task and is_scored(r) and _number(r.get("reward"))
        ]
        if rewards:
            result[task] = {"reward": rewards[-1], "passed": rewards[-1] >= PASS_THRESHOLD, "infra_error": False}
        else:
            result[task] = {"reward": None, "passed": None, "infra_error": True}
    return result


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _var(xs: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _interval(estimate: float | None, se: float | None) -> list[float] | None:
    return None if estimate is None or se is None else [estimate - Z95 * se, estimate + Z95 * se]


def _tasks(task_ids: list[str], trials: list[dict]) -> dict[str, dict]:
    """Per task: scored trials, mean pass, pass variance over trials, mean reward."""
    out = {}
    for task in task_ids:
        cells = [t[task] for t in trials if not t[task]["infra_error"]]
        passes = [1.0 if c["passed"] else 0.0 for c in cells]
        out[task] = {
            "k": len(cells),
            "mean": _mean(passes),
            "var": _var(passes),
            "reward": _mean([float(c["reward"]) for c in cells]),
        }
    return out


def arm(task_ids: list[str], trials: list[dict]) -> dict:
    per = _tasks(task_ids, trials)
    scored = [t for t in task_ids if per[t]["k"]]
    means = [per[t]["mean"] for t in scored]
    v = _var(means)
    rate = _mean(means)
    se = math.sqrt(v / len(means)) if v is not None else None
    by_trial = []
    for trial in trials:
        kept = [trial[t] for t in task_ids if not trial[t]["infra_error"]]
        by_trial.append(_mean([1.0 if c["passed"] else 0.0 for c in kept]))
    return {
        "task_count": len(task_ids),
        "scored_task_count": len(scored),
        "unscored_task_ids": [t for t in task_ids if not per[t]["k"]],
        "cells": len(task_ids) * len(trials),
        "infra_error_cells": sum(1 for trial in trials for t in task_ids if trial[t]["infra_error"]),
        "pass_rate": rate,
        "stderr": se,
        "ci95": _interval(rate, se),
        "mean_reward": _mean([per[t]["reward"] for t in scored]),
        "trial_pass_rates": by_trial,
    }


def delta(task_ids: list[str], baseline: list[dict], final: list[dict]) -> dict:
    before, after = _tasks(task_ids, baseline), _tasks(task_ids, final)
    paired = [t for t in task_ids if before[t]["k"] and after[t]["k"]]
    d = [after[t]["mean"] - before[t]["mean"] for t in paired]
    n = len(paired)
    total = _var(d)
    se = math.sqrt(total / n) if total is not None else None
    trial = None
    if n and all(before[t]["var"] is not None and after[t]["var"] is not None for t in paired):
        trial = sum(before[t]["var"] / before[t]["k"] + after[t]["var"] / after[t]["k"] for t in paired) / n
    est = _mean(d)
    return {
        "paired_task_count": n,
        "excluded_task_ids": [t for t in task_ids if t not in paired],
        "baseline_pass_rate": _mean([before[t]["mean"] for t in paired]),
        "final_pass_rate": _mean([after[t]["mean"] for t in paired]),
        "delta": est,
        "stderr": se,
        "ci95": _interval(est, se),
        "variance_components": {
            "total": total,
            "trial": trial,
            "task": max(0.0, total - trial) if total is not None and trial is not None else None,
        },
        "stderr_fixed_tasks": math.sqrt(trial / n) if trial is not None else None,
    }


def _strata(parts: list[tuple[int, Any, Any]]) -> tuple[Any, Any]:
    """(n_s, estimate_s, se_s) over suites, each task weighing the same; suites of n_s = 0 dropped."""
    parts = [p for p in parts if p[0] > 0]
    n = sum(p[0] for p in parts)
    if not n or any(p[1] is None for p in parts):
        return None, None
    estimate = sum(k * e for k, e, _ in parts) / n
    if any(p[2] is None for p in parts):
        return estimate, None
    return estimate, math.sqrt(sum((k / n) ** 2 * s**2 for k, _, s in parts))


def _pooled_arm(arms: list[dict]) -> dict:
    rate, se = _strata([(a["scored_task_count"], a["pass_rate"], a["stderr"]) for a in arms])
    return {
        "task_count": sum(a["task_count"] for a in arms),
        "scored_task_count": sum(a["scored_task_count"] for a in arms),
        "cells": sum(a["cells"] for a in arms),
        "infra_error_cells": sum(a["infra_error_cells"] for a in arms),
        "pass_rate": rate,
        "stderr": se,
        "ci95": _interval(rate, se),
    }


def _pooled_delta(ds: list[dict]) -> dict:
    est, se = _strata([(d["paired_task_count"], d["delta"], d["stderr"]) for d in ds])
    return {
        "paired_task_count": sum(d["paired_task_count"] for d in ds),
        "baseline_pass_rate": _strata([(d["paired_task_count"], d["baseline_pass_rate"], None) for d in ds])[0],
        "final_pass_rate": _strata([(d["paired_task_count"], d["final_pass_rate"], None) for d in ds])[0],
        "delta": est,
        "stderr": se,
        "ci95": _interval(est, se),
    }


def score_v2(suites: list[dict], trials: int, baseline_stage: str, final_stage: str | None) -> dict:
    """`suites`: per suite in order, `name`, `dataset`, `task_ids` and per-trial outcome maps for
    `baseline` and `final` (None when that arm has none)."""
    rows = []
    for s in suites:
        ids = list(s["task_ids"])
        b, f = s.get("baseline"), s.get("final")
        rows.append(
            {
                "name": s["name"],
                "dataset": s["dataset"],
                "task_count": len(ids),
                "baseline": arm(ids, b) if b else None,
                "final": arm(ids, f) if f else None,
                "delta": delta(ids, b, f) if b and f else None,
            }
        )

    def pooled(key: str, make) -> Any:
        blocks = [r[key] for r in rows]
        return make(blocks) if blocks and all(x is not None for x in blocks) else None

    return {
        "schema_version": 2,
        "metric": "pass@1",
        "pass_threshold": PASS_THRESHOLD,
        "trials": trials,
        "primary_suite": rows[0]["name"] if rows else None,
        "baseline_stage": baseline_stage,
        "final_stage": final_stage,
        "suites": rows,
        "pooled": {
            "task_count": sum(r["task_count"] for r in rows),
            "baseline": pooled("baseline", _pooled_arm),
            "final": pooled("final", _pooled_arm),
            "delta": pooled("delta", _pooled_delta),
        },
        "stderr_method": STDERR_METHOD,
    }
