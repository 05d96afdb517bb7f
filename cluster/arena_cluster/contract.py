"""The episode contract of the guide's "How the model sees your environment", as the arena's
`domain::openenv::episode` (Rust) defines it: that module is the reference and this one follows it
rule for rule. `tests/test_contract.py` replays the cases the Rust tests write to
`tests/fixtures/openenv-episode-cases.json`; both sides must give the same answers.

Pure: the caller brings the clock (milliseconds), the token counts and the action schema's
validator (`valid(action) -> str | None`, the reason an action is invalid, or None).
"""

from __future__ import annotations

import decimal
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

EPISODES_PER_STEP = 5
EPISODES_THAT_TRAIN = 4
# A run whose last this many steps played trained nothing ends (`no_signal`).
NO_UPDATE_STEPS = 5
TOOL_CALL_BURST = 4
RUN_LIMIT_S = 14_400
_CALL = 60_000

Validator = Callable[[Any], "str | None"]

TASK_DEFAULTS = {
    "reset_wall_s": 180,
    "rollout_wall_s": 1800,
    "verifier_wall_s": 120,
    "tool_wall_s": 120,
    "tool_calls_total": 128,
    "tool_calls_per_minute": 60,
    "completion_tokens": 4096,
    "context_tokens": 8192,
}


def task_limits(task: dict) -> dict:
    """A task's limits with the guide's defaults filled in."""
    return {k: task.get(k, v) if task.get(k) is not None else v for k, v in TASK_DEFAULTS.items()}


# --- JSON text exactly as serde_json writes it -------------------------------------------------


def _float_text(x: float) -> str:
    """A float as serde_json writes it: the shortest digits that round-trip, in decimal when the
    value is below 1e16 and at least 1e-5, else `d.ddde-7` / `d.ddde+16` (no leading zeros)."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # The value is 0.ds × 10^kk.
    kk = len(digits) + exp
    neg = "-" if sign else ""
    n = len(ds)
    if 0 <= kk <= 16 and n <= kk:
        return f"{neg}{ds}{'0' * (kk - n)}.0"
    if 0 < kk <= 16:
        return f"{neg}{ds[:kk]}.{ds[kk:]}"
    if -5 < kk <= 0:
        return f"{neg}0.{'0' * -kk}{ds}"
    mantissa = ds[0] + ("." + ds[1:] if n > 1 else "")
    e = kk - 1
    return f"{neg}{mantissa}e{'+' if e > 0 else ''}{e}"


def _string_text(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif o < 0x20:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_text(value: Any) -> str:
    """Compact JSON with the keys sorted, byte for byte what `serde_json::Value::to_string` gives:
    how observations (and the schema in the system message) are shown to the model."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return _string_text(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        # serde_json's map is a BTreeMap: keys in byte order of their UTF-8.
        keys = sorted(value, key=lambda k: k.encode())
        return "{" + ",".join(f"{_string_text(k)}:{json_text(value[k])}" for k in keys) + "}"
    raise TypeError(f"not JSON: {type(value).__name__}")


# --- Replies ------------------------------------------------------------------------------------


def is_reserved(action: Any) -> bool:
    """`{"finish": true}`, or an object whose only field is `action` holding an object."""
    if not isinstance(action, dict) or len(action) != 1:
        return False
    return action.get("finish") is True or isinstance(action.get("action"), dict)


def _strict_json(text: str) -> Any:
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@dataclass(frozen=True)
class Reply:
    """A reply as read: `kind` is `action` (with `action`), `finish`, or `invalid` (with `why`)."""

    kind: str
    action: Any = None
    why: str | None = None


def read_reply(text: str, valid: Validator) -> Reply:
    """Exactly one JSON object and nothing else; the wrapper `{"action": {…}}` is unwrapped."""
    try:
        value = _strict_json(text.strip())
    except (ValueError, RecursionError) as e:
        return Reply("invalid", why=f"not exactly one JSON value: {e}")
    if not isinstance(value, dict):
        return Reply("invalid", why="a JSON value that is not an object")
    if is_reserved(value) and "finish" in value:
        return Reply("finish")
    action = value["action"] if is_reserved(value) else value
    why = valid(action)
    if why is None:
        return Reply("action", action=action)
    return Reply("invalid", why=f"the action does not match the action schema: {why}")


# --- Ends, scores, groups -----------------------------------------------------------------------


@dataclass(frozen=True)
class End:
    """Why an episode ended: `done` (with `reward`), `finished`, `invalid_reply` (with `why`),
    `tool_calls_exhausted`, or `out_of_tokens` (with `why`: what no longer fit)."""

    kind: str
    reward: float | None = None
    why: str | None = None

    def by_itself(self) -> bool:
        return self.kind == "done"


def valid_reward(reward: float | None) -> float | None:
    if reward is None or isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return None
    r = float(reward)
    return r if math.isfinite(r) and 0.0 <= r <= 1.0 else None


def score(end: End, finish_reward: float | None) -> float | None:
    """The environment's own reward when the episode ended by itself, else `finish_action`'s."""
    return valid_reward(end.reward if end.by_itself() else finish_reward)


def training_indices(scores_in_end_order: list) -> list | None:
    """Which episodes train: the first four with a valid reward, in the order they ended; None
    when fewer."""
    chosen = [i for i, s in enumerate(scores_in_end_order) if s is not None][:EPISODES_THAT_TRAIN]
    return chosen if len(chosen) == EPISODES_THAT_TRAIN else None


def training_group(scores_in_end_order: list) -> list | None:
    """The first four valid rewards in the order the episodes ended; None when fewer."""
    chosen = training_indices(scores_in_end_order)
    return None if chosen is None else [scores_in_end_order[i] for i in chosen]


def group_has_signal(group: list) -> bool:
    """Whether a step's training group can teach the policy anything: GRPO's advantage is each
    reward minus the group's mean, so four equal rewards give zero advantages and an update that
    changes nothing, whatever the optimizer reports."""
    return any(r != group[0] for r in group)


def step_trained(scores_in_end_order: list, lost: int) -> bool | None:
    """How a step counts toward `no_signal`, from its episodes' rewards in the order they ended
    (None: no valid reward) and those the platform lost (their sandbox never served, even
    replaced): True it had a training signal (four valid rewards that differ), False it had none
    by its environment's doing (fewer than four valid rewards, or four equal ones), None it trained
    nothing only because the platform lost sandboxes that might have given the rewards it lacked
    (not the participant's: not counted)."""
    group = training_group(scores_in_end_order)
    if group is not None:
        return group_has_signal(group)
    valid = sum(s is not None for s in scores_in_end_order)
    return None if valid + lost >= EPISODES_THAT_TRAIN else False


def no_signal(trained: list) -> bool:
    """Whether a run ends for want of a training signal: `trained` says, for each step played in
    order, how it counts (`step_trained`; None is not counted); the run ends when its last
    NO_UPDATE_STEPS counted steps (since it started or since the last step that trained) all
    trained nothing."""
    counted = [t for t in trained if t is not None]
    return len(counted) >= NO_UPDATE_STEPS and not any(counted[-NO_UPDATE_STEPS:])


# How an episode ended, as a step's events count them (`ends`): each episode under exactly one key.
END_KEYS = ("done", "finished", "invalid_reply", "budget", "timeout", "no_reward", "sandbox")


def end_key(kind: str, score_: float | None) -> str:
    """The `ends` key of an episode that ended by `kind` (an End kind, or the rollout side's
    `timeout` and `sandbox`) with `score_` (`score`: None when no valid reward came). An invalid
    reply, a budget, a wall or a lost sandbox is said as such, whatever `finish_action` then gave;
    an episode that ended by itself (`done`) or by the model's `{"finish": true}` (`finished`)
    without a valid reward is `no_reward`."""
    if kind in ("out_of_tokens", "tool_calls_exhausted"):
        return "budget"
    if kind in ("invalid_reply", "timeout", "sandbox"):
        return kind
    return kind if kind in ("done", "finished") and score_ is not None else "no_reward"


def train_tasks(tasks: list) -> list:
    return [t for t in tasks if t.get("split") == "train"]


def step_task(tasks: list, step: int) -> dict | None:
    train = train_tasks(tasks)
    return train[step % len(train)] if train else None


def step_allowance_s(task: dict, update_s: int) -> int:
    t = task_limits(task)
    return t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"] + update_s


def step_fits(elapsed_s: int, task: dict, update_s: int, limit_s: int) -> bool:
    return elapsed_s + step_allowance_s(task, update_s) <= limit_s


# --- Pacing and budgets -------------------------------------------------------------------------


class Pacer:
    """A bucket of four calls refilled at `tool_calls_per_minute`, and `tool_calls_total` in all."""

    def __init__(self, task: dict, now_ms: int):
        t = task_limits(task)
        self.per_minute = max(t["tool_calls_per_minute"], 1)
        self.left = t["tool_calls_total"]
        self.units = TOOL_CALL_BURST * _CALL
        self.at_ms = now_ms

    def take(self, now_ms: int) -> int | None:
        """When this call may be sent (now or later); None when the total is used up."""
        if self.left == 0:
            return None
        now_ms = max(now_ms, self.at_ms)
        self.units = min(self.units + (now_ms - self.at_ms) * self.per_minute, TOOL_CALL_BURST * _CALL)
        self.at_ms = now_ms
        self.left -= 1
        if self.units >= _CALL:
            self.units -= _CALL
            return now_ms
        wait = -(-(_CALL - self.units) // self.per_minute)
        self.units = self.units + wait * self.per_minute - _CALL
        self.at_ms = now_ms + wait
        return self.at_ms


class Budget:
    def __init__(self, task: dict):
        t = task_limits(task)
        self.completion_left = t["completion_tokens"]
        self.context_left = t["context_tokens"]

    def spend(self, tokens: int, completion: bool, what: str) -> End | None:
        if tokens > self.context_left or (completion and tokens > self.completion_left):
            return End("out_of_tokens", why=what)
        self.context_left -= tokens
        if completion:
            self.completion_left -= tokens
        return None


def system_prompt(action_schema: Any, tools: list | None = None) -> str:
    """What the model is told about the environment: its action schema and, for a tools
    environment, its tools as its `tools/list` answered them (each `{"name", "description",
    "input_schema"}`, the assignment's task `tools`), since a `call_tool` action schema names none."""
    text = (
        "You act in an environment. Reply with exactly one JSON object and nothing else: an action "
        'valid under this JSON Schema, or {"finish": true} to end the episode.\n'
        f"Action schema: {json_text(action_schema)}"
    )
    if tools:
        text += f"\nTools, each called through the action schema: {json_text(list(tools))}"
    return text


@dataclass(frozen=True)
class Call:
    """A tool call a reply makes: the action, sent at `at_ms` (the pacer's time)."""

    action: Any
    at_ms: int


@dataclass
class Episode:
    """One episode as the rollout side plays it (`domain::openenv::episode::Episode`)."""

    task: dict
    messages: list = field(default_factory=list)
    pacer: Pacer | None = None
    budget: Budget | None = None
    ended: End | None = None

    @staticmethod
    def start(task, action_schema, tools, reset_observation, system_tokens, observation_tokens,
              now_ms) -> "Episode":
        """The system message with the schema (and the tools, possibly none), then the reset
        observation as the first user turn."""
        e = Episode(
            task=task,
            messages=[
                {"role": "system", "content": system_prompt(action_schema, tools)},
                {"role": "user", "content": json_text(reset_observation)},
            ],
            pacer=Pacer(task, now_ms),
            budget=Budget(task),
        )
        e.ended = e.budget.spend(system_tokens, False, "the system message") or e.budget.spend(
            observation_tokens, False, "the reset observation"
        )
        return e

    def reply(self, text: str, tokens: int, valid: Validator, now_ms: int) -> "Call | End":
        """The call the reply makes, or how the episode ended."""
        if self.ended is not None:
            return self.ended
        over = self.budget.spend(tokens, True, "the reply")
        if over is not None:
            self.ended = over
            return over
        self.messages.append({"role": "assistant", "content": text})
        r = read_reply(text, valid)
        if r.kind == "finish":
            self.ended = End("finished")
        elif r.kind == "invalid":
            self.ended = End("invalid_reply", why=r.why)
        else:
            at = self.pacer.take(now_ms)
            if at is not None:
                return Call(r.action, at)
            self.ended = End("tool_calls_exhausted")
        return self.ended

    def observe(self, observation: Any, tokens: int, reward: float | None, done: bool) -> End | None:
        if self.ended is not None:
            return self.ended
        if done:
            self.ended = End("done", reward=reward)
        else:
            over = self.budget.spend(tokens, True, "an observation")
            if over is not None:
                self.ended = over
            else:
                self.messages.append({"role": "user", "content": json_text(observation)})
        return self.ended


# --- The server's WebSocket protocol ----------------------------------------------------------


def ws_reset(reset: dict) -> dict:
    """A reset with what chooses the task: `reset_for(task_id)`, or the task API's
    `{"split", "index"}` admission found (the assignment's task `reset`)."""
    return {"type": "reset", "data": reset}


def reset_for(task_id: str) -> dict:
    """How a task is chosen at reset when the environment has no task API: by its id."""
    return {"task_id": task_id}


def task_reset(task: dict) -> dict:
    """The reset data of an assignment's task: its `reset` (as admission played it), else
    `reset_for` its id (a held-out environment's tasks carry none)."""
    reset = task.get("reset")
    return reset if isinstance(reset, dict) else reset_for(task["task_id"])


def task_tools(task: dict) -> list:
    """The tools of an assignment's task's environment (none: not a tools environment)."""
    tools = task.get("tools")
    return list(tools) if isinstance(tools, list) else []


def ws_step(action: Any) -> dict:
    return {"type": "step", "data": action}


@dataclass(frozen=True)
class Observed:
    """An observation message of the server: what it observed, its reward, whether it is done."""

    observation: Any
    reward: float | None
    done: bool


def ws_observation(message: Any) -> Observed | None:
    """The observation message read; None for anything else. The observation's `metadata` is not
    part of it: openenv 0.10 sends it (inside the observation, and beside it as `data.metadata`:
    `{"step": 1}`, or an importer's prompt and task spec, answer included) and the model never
    sees either."""
    if not isinstance(message, dict) or message.get("type") != "observation":
        return None
    data = message.get("data") if isinstance(message.get("data"), dict) else {}
    reward = data.get("reward")
    reward = float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
    done = data.get("done") if isinstance(data.get("done"), bool) else False
    observation = data.get("observation")
    if isinstance(observation, dict):
        observation = {k: v for k, v in observation.items() if k != "metadata"}
    return Observed(observation, reward, done)
