#!/usr/bin/env python3
"""Open Env Arena: run the arena's OpenEnv admission on your own machine, before you submit.

    python3 openenv_check.py submission.json --url http://127.0.0.1:8000 [--task TASK_ID]
                             [--arena https://openenvarena-arena.hf.space] [--wait 30] [--json]

Start your image first (`docker run --rm -d -p 8000:8000 ghcr.io/your-name/my-env:v1`), then point
`--url` at it. The checks are admission's, in its order and with its codes, and the first failure
decides a task:

  1. the body: with `--arena URL`, the arena's own `POST /api/openenv/check` (your HF token from
     HF_TOKEN or `hf auth login`; it stores nothing); without, the rules that need no arena
  2. serving: `GET /health` answers 200 (SANDBOX_STARTUP_FAILED; 401/403: OPENENV_ENDPOINT_INVALID)
  3. `openenv validate`'s six criteria (OPENENV_ENDPOINT_INVALID); the real `openenv validate --url
     URL --json` runs too when `openenv` is installed
  4. `/schema`'s `action` and `observation` equal the submission's (IMAGE_SCHEMA_MISMATCH, with the
     JSON pointers that differ)
  5. a task API (openenv 0.10) lists each task (TASK_NOT_LISTED)
  6. `POST /mcp` `tools/list` gives a list the model can be shown (OPENENV_ENDPOINT_INVALID)
  7. the example actions over `/ws`, after a reset with the task, end the episode with `done: true`
     and a reward in [0, 1] (ADMISSION_EPISODE_FAILED, with the transcript)
  8. `finish_action` ends an episode from a fresh reset, and after the first example action
     (FINISH_ACTION_INVALID, with the transcript)
  9. a warning, never a refusal: every task's first observation the same bytes (RESET_IGNORES_TASK)

It stores nothing and spends no slot. Python 3.9 or later, standard library only (plus `openenv`
when installed). Without `--json` the report is printed; with it, the report goes to stderr and a
JSON summary to stdout: {"ok", "tasks": [{"task_id", "code", "message", "evidence"}], "warnings"}.

Exit status: 0 every task passes, 1 a check failed, 2 a usage error (arguments, an unreadable
submission file).
"""

import argparse
import base64
import decimal
import hashlib
import http.client
import importlib.util
import ipaddress
import json
import math
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.parse

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
USER_AGENT = "arena-openenv-check/1"

# Each HTTP read of the server, as `openenv validate` (5 s a call); each episode message at most 60 s.
CALL_S = 5
MESSAGE_S = 60
# An answer or one WebSocket message of the server: a schema or an observation is a few KB.
MAX_ANSWER_BYTES = 1 << 20
# Evidence: an observation in a transcript, a whole transcript, a value in a schema difference.
MAX_OBSERVATION_CHARS = 1024
MAX_EVIDENCE_BYTES = 16 << 10
MAX_VALUE_CHARS = 120
MAX_DIFFERENCES = 8
MAX_LISTED = 20
MAX_SPLITS = 8
MAX_TOOLS = 32
MAX_TOOLS_TEXT = 16 << 10
# The seeds of the two fresh resets the finish check (and the first-observation warning) plays.
FINISH_SEEDS = (1, 2)

# The guide's limits (domain::openenv).
MAX_TASKS = 50
MAX_EXAMPLE_ACTIONS = 16
RESERVED_PORT = 49983
RETIRED_FIELDS = ("space", "space_id", "space_url", "dataset", "dataset_id", "repo_id")
TASK_DEFAULTS = {
    "reset_wall_s": 180, "rollout_wall_s": 1800, "verifier_wall_s": 120, "tool_wall_s": 120,
    "tool_calls_total": 128, "tool_calls_per_minute": 60, "completion_tokens": 4096, "context_tokens": 8192,
    "memory_gib": 2, "cpu_floor_vcpus": 1, "workspace_gib": 10,
}
SUBMISSION_FIELDS = ("submission_id", "name", "image", "schema", "tasks", "example_actions", "finish_action",
                     "server_port", "source")
REQUIRED_FIELDS = ("submission_id", "name", "schema", "tasks", "example_actions")

# What to do next, per code: the sentence the report ends each failure with.
FIX = {
    "SUBMISSION_FORMAT_RETIRED": "Build the environment into an image, publish it on Docker Hub or GHCR and submit "
                                 "its reference as `image`.",
    "CONTRACT_INVALID": "Fix the body as the guide's \"The submission\" and its table of limits say.",
    "ENVIRONMENT_TOO_LARGE_FOR_SANDBOX": "Ask for at most 16 GiB of memory, 2 vCPU and 44 GiB of workspace.",
    "SCHEMA_INVALID": "Give `schema.action` and `schema.observation` as JSON Schema objects, and example and finish "
                      "actions that are JSON objects valid under the action schema and not a reserved shape.",
    "SANDBOX_STARTUP_FAILED": "Start the image as the arena does (`docker run -p 8000:8000 IMAGE`, nothing passed "
                              "in) and read its log: its own ENTRYPOINT/CMD must serve GET /health within 120 s, "
                              "without files, variables or downloads it cannot get.",
    "OPENENV_ENDPOINT_INVALID": "Make `openenv validate --url URL` pass (serve the app OpenEnv's create_app builds), "
                                "answer GET /health to anyone, and list at most 32 tools with names and object "
                                "input schemas.",
    "IMAGE_SCHEMA_MISMATCH": "Copy the `action` and `observation` of your server's GET /schema into the submission's "
                             "`schema`, or rebuild the image from the models the submission describes.",
    "TASK_NOT_LISTED": "Submit task ids your task API lists (POST /{env}/tasks per split), or add the tasks to it.",
    "ADMISSION_EPISODE_FAILED": "Make the example actions, played in order after a reset with the task, end the "
                                "episode with `done: true` and a reward between 0 and 1.",
    "FINISH_ACTION_INVALID": "Make `finish_action` end any episode at once with `done: true` and a reward between 0 "
                             "and 1 (from a fresh reset and after a first action). Leaving it out is no way around "
                             "this: without one, an episode the model stops or fills with invalid replies ends with "
                             "no reward and trains nothing.",
    "RESET_IGNORES_TASK": "Make reset play the task it is given (`task_id`, or your task API's `split` and `index`): "
                          "openenv-core drops reset arguments your reset() does not name.",
}
IGNORES_TASK = ("every task's first observation is byte-identical, across resets with different seeds: the "
                "environment may ignore `task_id`")


class Usage(Exception):
    """Ends the command with exit status 2."""


class Invalid(Exception):
    """A rule's refusal, in the words the report shows."""


class Failure(Exception):
    """A failed check: its code, its sentence and its evidence."""

    def __init__(self, code, message, evidence=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.evidence = evidence


# ---- JSON as the arena reads and writes it -------------------------------------------------------


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _int_or_float(text):
    """An integer as serde_json reads it: within u64 or i64, else a float."""
    value = int(text)
    return value if -(1 << 63) <= value < (1 << 64) else float(text)


def loads(raw):
    """Strict JSON (no NaN or Infinity), integers as serde_json keeps them."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    return json.loads(raw, parse_constant=_no_constant, parse_int=_int_or_float)


def _float_text(x):
    """A float as serde_json writes it: the shortest digits that read back, in positional notation
    from 1e-5 up to below 1e16, else with an exponent (`1e-7`, `1.5e+16`)."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exponent = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(str(d) for d in digits).rstrip("0")
    point = len(digits) + exponent  # the value is 0.TEXT times 10**point
    minus = "-" if sign else ""
    if 0 <= point <= 16 and len(text) <= point:
        return minus + text + "0" * (point - len(text)) + ".0"
    if 0 < point <= 16:
        return minus + text[:point] + "." + text[point:]
    if -5 < point <= 0:
        return minus + "0." + "0" * -point + text
    power = point - 1
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return "%s%se%s%d" % (minus, mantissa, "+" if power > 0 else "", power)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _string_text(s):
    return '"' + "".join(_ESCAPES.get(c) or ("\\u%04x" % ord(c) if ord(c) < 0x20 else c) for c in s) + '"'


def json_text(value):
    """Compact JSON with keys in byte order: what `serde_json::Value::to_string` writes."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return _string_text(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8", "surrogatepass"))
        return "{" + ",".join(_string_text(k) + ":" + json_text(value[k]) for k in keys) + "}"
    raise TypeError("not JSON: %s" % type(value).__name__)


def _kind(value):
    if value is None or isinstance(value, (bool, str, list, dict)):
        return type(value)
    return int if isinstance(value, int) else float


def same(a, b):
    """JSON equality as serde_json's: an integer and a float differ, `true` and `1` differ."""
    if _kind(a) is not _kind(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def cut(text, limit):
    """`text` cut to `limit` characters, with `…` when cut."""
    return text if len(text) <= limit else text[:limit] + "\u2026"


def field(value, *keys):
    """`value[k1][k2]…` as serde_json's index reads it: None where a key or an object is missing."""
    for key in keys:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and 0 <= key < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def display_float(x):
    """A number as Rust's `{}` shows an f64 in a sentence (2 rather than 2.0)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return str(x)


# ---- The body (domain::openenv: parse, check_contract, check_schema_shape) ------------------------


def _uint(value, what, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (maximum is not None and value > maximum):
        raise Invalid("invalid value for `%s`: %s, expected %s" % (
            what, json_text(value), "an integer 0 to %d" % maximum if maximum is not None else "an integer >= 0"))
    return value


def _text(value, what, optional=False):
    if optional and value is None:
        return None
    if not isinstance(value, str):
        raise Invalid("invalid type for `%s`: %s, expected a string" % (what, cut(json_text(value), 40)))
    return value


def _parse_task(value, i):
    if not isinstance(value, dict):
        raise Invalid("`tasks[%d]` is not an object" % i)
    unknown = sorted(set(value) - {"task_id", "split", "image", *TASK_DEFAULTS})
    if unknown:
        raise Invalid("unknown field `%s` in `tasks[%d]`" % (unknown[0], i))
    for name in ("task_id", "split"):
        if name not in value:
            raise Invalid("missing field `%s` in `tasks[%d]`" % (name, i))
    task = {"task_id": _text(value["task_id"], "task_id"), "split": _text(value["split"], "split"),
            "image": _text(value.get("image"), "image", optional=True)}
    for name, default in TASK_DEFAULTS.items():
        task[name] = _uint(value[name], name) if name in value else default
    return task


def parse_body(body):
    """The submission body read as the arena reads it: a retired form is SUBMISSION_FORMAT_RETIRED,
    anything else that is not the guide's body CONTRACT_INVALID. Answers it with the defaults filled."""
    if isinstance(body, dict):
        for name in RETIRED_FIELDS:
            if name in body:
                raise Failure("SUBMISSION_FORMAT_RETIRED", (
                    "`%s` names a Space or a dataset as the image source; that form is retired: build the environment "
                    "into an image, publish it on Docker Hub or GHCR, and submit its reference as `image`") % name)
    try:
        if not isinstance(body, dict):
            raise Invalid("the body is not a JSON object")
        unknown = sorted(set(body) - set(SUBMISSION_FIELDS))
        if unknown:
            raise Invalid("unknown field `%s`" % unknown[0])
        for name in REQUIRED_FIELDS:
            if name not in body:
                raise Invalid("missing field `%s`" % name)
        for name in ("tasks", "example_actions"):
            if not isinstance(body[name], list):
                raise Invalid("invalid type for `%s`: expected a sequence" % name)
        r = {
            "submission_id": _text(body["submission_id"], "submission_id"),
            "name": _text(body["name"], "name"),
            "image": _text(body.get("image"), "image", optional=True),
            "schema": body["schema"],
            "tasks": [_parse_task(t, i) for i, t in enumerate(body["tasks"])],
            "example_actions": body["example_actions"],
            "finish_action": body.get("finish_action"),
            "server_port": None if body.get("server_port") is None
            else _uint(body["server_port"], "server_port", 65535),
            "source": _text(body.get("source"), "source", optional=True),
        }
    except Invalid as e:
        raise Failure("CONTRACT_INVALID", "the submission is not the guide's body: %s" % e) from None
    return r


def _id_ok(value, longest):
    raw = value.encode("utf-8")
    return (1 <= len(raw) <= longest and raw[:1].isalnum() and raw.isascii()
            and all(chr(b).isalnum() or chr(b) in "-_." for b in raw))


def _limits(t):
    return [
        ("reset_wall_s", t["reset_wall_s"], 120, 300),
        ("rollout_wall_s", t["rollout_wall_s"], 1, 3600),
        ("verifier_wall_s", t["verifier_wall_s"], 1, 1800),
        ("tool_wall_s", t["tool_wall_s"], 1, 120),
        ("tool_calls_total", t["tool_calls_total"], 1, 1024),
        ("tool_calls_per_minute", t["tool_calls_per_minute"], 1, 60),
        ("completion_tokens", t["completion_tokens"], 1, 8192),
        ("context_tokens", t["context_tokens"], 1, 16384),
        ("reset_wall_s + rollout_wall_s + verifier_wall_s",
         t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"], 0, 3600),
    ]


def check_contract(r):
    """Every task within the guide's limits (CONTRACT_INVALID), then the sandbox's size
    (ENVIRONMENT_TOO_LARGE_FOR_SANDBOX)."""
    def bad(message):
        raise Failure("CONTRACT_INVALID", message)

    if not _id_ok(r["submission_id"], 64):
        bad("`submission_id` `%s` must be 1 to 64 letters, digits, `-`, `_` or `.`, starting with a letter or digit"
            % r["submission_id"])
    if not r["name"].strip() or len(r["name"]) > 200:
        bad("`name` must be 1 to 200 characters")
    if not 1 <= len(r["tasks"]) <= MAX_TASKS:
        bad("`tasks` holds %d; a submission has 1 to %d" % (len(r["tasks"]), MAX_TASKS))
    if not 1 <= len(r["example_actions"]) <= MAX_EXAMPLE_ACTIONS:
        bad("`example_actions` holds %d; a submission has 1 to %d" % (len(r["example_actions"]), MAX_EXAMPLE_ACTIONS))
    seen = set()
    for t in r["tasks"]:
        if t["task_id"] in seen:
            bad("task id `%s` appears twice; task ids are unique" % t["task_id"])
        seen.add(t["task_id"])
        if not _id_ok(t["task_id"], 128):
            bad("task id `%s` must be 1 to 128 letters, digits, `-`, `_` or `.`" % t["task_id"])
        if t["split"] not in ("train", "eval"):
            bad("task `%s` has split `%s`; a split is `train` or `eval`" % (t["task_id"], t["split"]))
        for name, value, low, high in _limits(t):
            if not low <= value <= high:
                allowed = "at most %d" % high if low <= 1 else "%d to %d" % (low, high)
                bad("task `%s`: `%s` is %d; the limit is %s" % (t["task_id"], name, value, allowed))
        if t["image"] is None and r["image"] is None:
            bad("task `%s` has no image and the submission names none" % t["task_id"])
    if not any(t["split"] == "train" for t in r["tasks"]):
        bad("no task has `split: \"train\"`; at least one task trains")
    if r["server_port"] in (0, RESERVED_PORT):
        bad("`server_port` %d is not allowed (port %d is reserved)" % (r["server_port"], RESERVED_PORT))
    source = r["source"]
    if source is not None and (not source.startswith("https://") or len(source.encode()) > 2048
                               or any(c.isspace() for c in source)):
        bad("`source` must be one `https://` link")
    for t in r["tasks"]:
        for name, most in (("memory_gib", 16), ("cpu_floor_vcpus", 2), ("workspace_gib", 44)):
            if t[name] > most:
                raise Failure("ENVIRONMENT_TOO_LARGE_FOR_SANDBOX", "task `%s`: `%s` is %d; a sandbox has at most %d"
                              % (t["task_id"], name, t[name], most))


def is_reserved(action):
    """`{"finish": true}`, or an object whose only field is `action` holding an object: the
    reserved reply shapes, never an action."""
    if not isinstance(action, dict) or len(action) != 1:
        return False
    return action.get("finish") is True or isinstance(action.get("action"), dict)


def check_schema_shape(r):
    """`schema` holds `action` and `observation` objects; every example and finish action is an
    object and not a reserved shape (SCHEMA_INVALID)."""
    def bad(message):
        raise Failure("SCHEMA_INVALID", message)

    if not isinstance(r["schema"], dict):
        bad("`schema` must be an object with `action` and `observation`")
    for part in ("action", "observation"):
        if not isinstance(r["schema"].get(part), dict):
            bad("`schema.%s` must be a JSON Schema object" % part)
    # Named as a person counts them: example action 1 first, then the finish action.
    actions = [("example action %d" % n, a) for n, a in enumerate(r["example_actions"], start=1)]
    actions += [("`finish_action`", r["finish_action"])] if r["finish_action"] is not None else []
    for name, action in actions:
        if not isinstance(action, dict):
            bad("%s is not a JSON object" % name)
        if is_reserved(action):
            bad("%s takes a reserved shape (`{\"finish\": true}`, or only `action` holding an "
                "object); rename its fields" % name)


# ---- Admission's rules (domain::openenv::admission and ::episode) ----------------------------------

CRITERIA = (
    ("openapi_version_available", "GET /openapi.json: 200 with a string info.version"),
    ("health_endpoint", "GET /health: 200 {\"status\": \"healthy\"}"),
    ("metadata_endpoint", "GET /metadata: a string name and description"),
    ("schema_endpoint", "GET /schema: objects action, observation and state"),
    ("mcp_endpoint", "POST /mcp {}: 200 JSON-RPC 2.0 (an error reply passes)"),
    ("mode_endpoint_consistency",
     "/reset, /step and /state all in the OpenAPI paths (simulation) or none of them (production)"),
)


class Answer:
    """An HTTP answer: its status and its body when it was JSON (else None)."""

    def __init__(self, status, body):
        self.status = status
        self.json = body

    @classmethod
    def of(cls, raw):
        """From a shared case's `{"status", "json"}`, or None for no answer."""
        return None if raw is None else cls(raw["status"], raw.get("json"))


def _ok_json(answer):
    return answer.json if answer is not None and answer.status == 200 else None


def _actual(answer):
    if answer is None:
        return "no answer"
    if answer.json is None:
        return "HTTP %d, not JSON" % answer.status
    return "HTTP %d: %s" % (answer.status, json_text(answer.json)[:200])


def listed(items, noun):
    """A list a server sent, quoted in a sentence (`domain::openenv::evidence::listed`): its first
    items (each cut) within a bound, and how many more were left out."""
    shown, chars = [], 0
    for item in items[:20]:
        item = cut(item, 120)
        chars += len(item) + 2
        if chars > 1000:
            break
        shown.append(item)
    more = len(items) - len(shown)
    return ", ".join(shown) + (" and %d more %s" % (more, noun) if more else "")


def criteria(probe):
    """`openenv validate`'s six criteria from the five reads (`probe`: openapi, health, metadata,
    schema, mcp → Answer or None), in its order: [{id, passed, required, expected, actual}]."""
    openapi = _ok_json(probe.get("openapi"))
    health, metadata = _ok_json(probe.get("health")), _ok_json(probe.get("metadata"))
    schema, mcp = _ok_json(probe.get("schema")), _ok_json(probe.get("mcp"))
    paths = field(openapi, "paths")
    paths = sorted(paths, key=lambda p: p.encode("utf-8", "surrogatepass")) if isinstance(paths, dict) else []
    flags = ("/reset" in paths, "/step" in paths, "/state" in paths)
    mode = bool(paths) and (all(flags) or not any(flags))
    passed = {
        "openapi_version_available": isinstance(field(openapi, "info", "version"), str),
        "health_endpoint": field(health, "status") == "healthy",
        "metadata_endpoint": all(isinstance(field(metadata, k), str) for k in ("name", "description")),
        "schema_endpoint": all(isinstance(field(schema, k), dict) for k in ("action", "observation", "state")),
        "mcp_endpoint": field(mcp, "jsonrpc") == "2.0",
        "mode_endpoint_consistency": mode,
    }
    actual = {
        "openapi_version_available": _actual(probe.get("openapi")),
        "health_endpoint": _actual(probe.get("health")),
        "metadata_endpoint": _actual(probe.get("metadata")),
        "schema_endpoint": _actual(probe.get("schema")),
        "mcp_endpoint": _actual(probe.get("mcp")),
        "mode_endpoint_consistency": "paths: " + listed(paths, "paths"),
    }
    return [{"id": cid, "passed": passed[cid], "required": True, "expected": expected, "actual": actual[cid]}
            for cid, expected in CRITERIA]


_ABSENT = object()


def _pointer_token(key):
    return key.replace("~", "~0").replace("/", "~1")


def _shown(value):
    return "(absent)" if value is _ABSENT else cut(json_text(value), MAX_VALUE_CHARS)


def schema_differences(served, submitted):
    """Where the served `/schema`'s `action` and `observation` differ from the submission's: a list
    of {pointer, served, submitted} (RFC 6901 pointers from the schema's root, `action` first,
    object keys in byte order, arrays index by index) and how many more there are beyond the first
    eight."""
    found = []

    def walk(pointer, a, b):
        # Collecting stops well past what is listed: `more` is then a lower bound, as the arena counts it.
        if len(found) > 10 * MAX_DIFFERENCES:
            return
        if a is not _ABSENT and b is not _ABSENT and same(a, b):
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=lambda k: k.encode("utf-8", "surrogatepass")):
                walk(pointer + "/" + _pointer_token(key), a.get(key, _ABSENT), b.get(key, _ABSENT))
        elif isinstance(a, list) and isinstance(b, list):
            for i in range(max(len(a), len(b))):
                walk("%s/%d" % (pointer, i), a[i] if i < len(a) else _ABSENT, b[i] if i < len(b) else _ABSENT)
        else:
            found.append({"pointer": pointer, "served": _shown(a), "submitted": _shown(b)})

    for part in ("action", "observation"):
        walk("/" + part, served.get(part, _ABSENT) if isinstance(served, dict) else _ABSENT,
             submitted.get(part, _ABSENT) if isinstance(submitted, dict) else _ABSENT)
    return found[:MAX_DIFFERENCES], max(0, len(found) - MAX_DIFFERENCES)


def parse_step(data):
    """An observation message's `data` as admission reads it: (reward or None, done)."""
    if not isinstance(data, dict):
        raise Invalid("invalid type: %s, expected an object with `reward` and `done`" % cut(json_text(data), 80))
    reward, done = data.get("reward"), data.get("done", False)
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        raise Invalid("invalid type for `reward`: %s, expected a number or null" % cut(json_text(reward), 80))
    if not isinstance(done, bool):
        raise Invalid("invalid type for `done`: %s, expected a boolean" % cut(json_text(done), 80))
    return (None if reward is None else float(reward)), done


def _in_unit(reward):
    return reward is not None and 0.0 <= reward <= 1.0


def judge_episode(reset, steps, actions):
    """The example episode: `reset` and `steps` are (reward, done) pairs. It must end with
    `done: true` and a reward in [0, 1] within the actions; answers the terminal reward."""
    if reset[1]:
        raise Invalid("the episode ended at reset, before any action")
    for i, (reward, done) in enumerate(steps, start=1):  # actions counted from 1, as people count
        if done:
            if reward is None:
                raise Invalid("the episode ended after action %d without a reward" % i)
            if not _in_unit(reward):
                raise Invalid("the episode ended after action %d with reward %s, outside [0, 1]"
                              % (i, display_float(reward)))
            return reward
    raise Invalid("the episode did not end after the %d example action(s) (no `done: true`)" % actions)


def judge_finish(after):
    """What the server answered `finish_action` with: it must end the episode with a reward in
    [0, 1]; answers that reward."""
    reward, done = after
    if not done:
        raise Invalid("`finish_action` did not end the episode (no `done: true`)")
    if reward is None:
        raise Invalid("`finish_action` ended the episode without a reward")
    if not _in_unit(reward):
        raise Invalid("`finish_action` ended the episode with reward %s, outside [0, 1]" % display_float(reward))
    return reward


def has_task_api(openapi):
    """Whether the OpenAPI paths hold openenv 0.10's task API (`/list_environments` and `/{env}/tasks`)."""
    paths = field(openapi, "paths")
    return isinstance(paths, dict) and "/list_environments" in paths and any(p.endswith("/tasks") for p in paths)


def _listed_id(spec):
    if not isinstance(spec, dict):
        return None
    value = spec["id"] if "id" in spec else spec.get("task_id")
    return value if isinstance(value, str) else None


def task_reset(splits, task_id):
    """The reset that plays `task_id` from a task API's listing (per split: its name and its
    `{"tasks": [...]}` answer): `{"split", "index"}`, or None when no listed task has that id."""
    for split, listing in splits:
        tasks = field(listing, "tasks")
        if not isinstance(tasks, list):
            continue
        for index, spec in enumerate(tasks):
            if _listed_id(spec) == task_id:
                return {"split": split, "index": index}
    return None


def listed_ids(splits, most):
    """The ids a task API listing names, `id (split)`, at most `most`."""
    out = []
    for split, listing in splits:
        tasks = field(listing, "tasks")
        for spec in tasks if isinstance(tasks, list) else []:
            task_id = _listed_id(spec)
            if task_id is not None:
                out.append("%s (%s)" % (task_id, split))
    return out[:most]


def tool_list(answer):
    """The tools of a tools environment from its `tools/list` answer, as the model is shown them:
    [{name, description, input_schema}]; [] when it lists none. Invalid: a list the model cannot be
    shown."""
    listed = field(answer, "result", "tools")
    if not isinstance(listed, list):
        return []
    if len(listed) > MAX_TOOLS:
        raise Invalid("tools/list lists %d tools; the system message shows at most %d" % (len(listed), MAX_TOOLS))
    tools = []
    for t in listed:
        name = field(t, "name")
        if not isinstance(name, str) or not 1 <= len(name.encode("utf-8", "surrogatepass")) <= 128:
            raise Invalid("a tool without a name (1 to 128 characters)")
        schema = t["inputSchema"] if "inputSchema" in t else t.get("input_schema", {})
        if not isinstance(schema, dict):
            raise Invalid("tool `%s`'s input schema is not a JSON object" % name)
        description = field(t, "description")
        tools.append({"name": name, "description": description if isinstance(description, str) else "",
                      "input_schema": schema})
    size = len(json_text(tools).encode("utf-8", "surrogatepass"))
    if size > MAX_TOOLS_TEXT:
        raise Invalid("the tools' names, descriptions and schemas are %d bytes; at most %d" % (size, MAX_TOOLS_TEXT))
    return tools


def reset_for(task_id):
    """How a task is chosen at reset without a task API: by its id."""
    return {"task_id": task_id}


def seeded(reset, seed):
    return dict(reset, seed=seed)


def fingerprint(observation):
    """SHA-256 of the compact JSON of a first observation (`data.observation` as the server sent it)."""
    return hashlib.sha256(json_text(observation).encode("utf-8", "surrogatepass")).hexdigest()


def ignored_task(first_observations):
    """The tasks that earn RESET_IGNORES_TASK: all of them when there are two or more, each has at
    least two first observations (resets with different seeds), and every one of every task is the
    same (`first_observations`: task id → its first observations' texts or fingerprints); else none."""
    if len(first_observations) < 2 or any(len(texts) < 2 for texts in first_observations.values()):
        return []
    every = {text for texts in first_observations.values() for text in texts}
    return list(first_observations) if len(every) == 1 else []


class Transcript:
    """An episode as the server answered it, bounded: each message's observation shortened, and the
    first messages kept while they hold 16 KiB."""

    def __init__(self):
        self.entries = []
        self.size = 0
        self.truncated = False

    def add(self, sent, observation, reward, done):
        entry = {"sent": sent, "observation": cut(json_text(observation), MAX_OBSERVATION_CHARS), "reward": reward,
                 "done": done}
        size = len(json_text(entry).encode("utf-8", "surrogatepass"))
        if self.truncated or self.size + size > MAX_EVIDENCE_BYTES:
            self.truncated = True
            return
        self.entries.append(entry)
        self.size += size

    def evidence(self):
        return {"transcript": self.entries, "truncated": self.truncated}


# ---- Reads of the participant's server -------------------------------------------------------------


class Server:
    """The participant's server at `url`: HTTP reads of at most 1 MiB, no redirect followed, no
    proxy, no credential sent."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.url = url.rstrip("/")
        self.secure = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.secure else 80)
        self.prefix = parts.path.rstrip("/")
        self.netloc = parts.netloc.rpartition("@")[2]

    def _connect(self, timeout):
        if self.secure:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def read(self, method, path, body=None, timeout=CALL_S):
        """Answer, or None when nothing answered."""
        conn = self._connect(timeout)
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length and length.isdigit() and int(length) > MAX_ANSWER_BYTES:
                return Answer(resp.status, None)
            raw = resp.read(MAX_ANSWER_BYTES + 1)
            if len(raw) > MAX_ANSWER_BYTES:
                return Answer(resp.status, None)
            try:
                return Answer(resp.status, loads(raw))
            except ValueError:
                return Answer(resp.status, None)
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def get(self, path):
        return self.read("GET", path)

    def post(self, path, body):
        return self.read("POST", path, body)


class EpisodeError(Exception):
    """Why an episode over /ws could not go on, in admission's words."""


class WebSocket:
    """A minimal RFC 6455 client for the server's `/ws`: text frames, masked, each message at most 1 MiB."""

    def __init__(self, server, timeout=CALL_S):
        path = server.prefix + "/ws"
        try:
            sock = socket.create_connection((server.host, server.port), timeout=timeout)
            if server.secure:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=server.host)
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nUser-Agent: %s\r\n\r\n"
                          % (path, server.netloc, key, USER_AGENT)).encode())
            head = bytearray()
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk or len(head) > 64 << 10:
                    raise EpisodeError("the server did not open a WebSocket on /ws: it closed the connection")
                head += chunk
        except socket.timeout:
            raise EpisodeError("the server did not open a WebSocket on /ws") from None
        except OSError as e:
            raise EpisodeError("the server did not open a WebSocket on /ws: %s" % e) from None
        head, _, rest = bytes(head).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        expected = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if len(status) < 2 or status[1] != "101":
            sock.close()
            raise EpisodeError("the server did not open a WebSocket on /ws: it answered %s"
                               % (" ".join(status[1:]) or "nothing"))
        if headers.get("sec-websocket-accept") != expected.decode():
            sock.close()
            raise EpisodeError("the server did not open a WebSocket on /ws: a wrong Sec-WebSocket-Accept")
        self.sock = sock
        self.buffer = bytearray(rest)

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, value):
        try:
            self._send_frame(0x1, json.dumps(value).encode())
        except OSError as e:
            raise EpisodeError("the episode's connection failed: %s" % e) from None

    def _take(self, n, deadline):
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EpisodeError("the server did not answer within %d s" % MESSAGE_S)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                raise EpisodeError("the server did not answer within %d s" % MESSAGE_S) from None
            except OSError as e:
                raise EpisodeError("the episode's connection failed: %s" % e) from None
            if not chunk:
                raise EpisodeError("the server closed the episode")
            self.buffer += chunk
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    def receive(self, timeout=MESSAGE_S):
        """The next text message (binary messages, pings and pongs are passed over)."""
        deadline = time.monotonic() + timeout
        parts, size, kind = [], 0, None
        while True:
            b0, b1 = self._take(2, deadline)
            opcode, length = b0 & 0x0F, b1 & 0x7F
            if length == 126:
                length = struct.unpack("!H", self._take(2, deadline))[0]
            elif length == 127:
                length = struct.unpack("!Q", self._take(8, deadline))[0]
            if opcode >= 8 and length > 125:
                raise EpisodeError("the episode's connection failed: a control frame of %d bytes" % length)
            if opcode < 8 and size + length > MAX_ANSWER_BYTES:
                raise EpisodeError("the server sent a message over %d KiB" % (MAX_ANSWER_BYTES >> 10))
            mask = self._take(4, deadline) if b1 & 0x80 else None
            payload = self._take(length, deadline)
            if mask:
                payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise EpisodeError("the server closed the episode")
            if opcode == 0x9:
                try:
                    self._send_frame(0xA, payload)
                except OSError:
                    pass
                continue
            if opcode >= 8:
                continue
            if opcode in (0x1, 0x2):
                parts, size, kind = [], 0, opcode
            parts.append(payload)
            size += length
            if b0 & 0x80:
                if kind == 0x1:
                    try:
                        return b"".join(parts).decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise EpisodeError("not JSON: %s" % e) from None
                parts, size, kind = [], 0, None

    def exchange(self, message):
        """Sends one message of the episode and reads the server's observation message:
        (observation, reward, done)."""
        self.send(message)
        text = self.receive()
        try:
            answer = loads(text)
        except ValueError as e:
            raise EpisodeError("not JSON: %s" % e) from None
        if field(answer, "type") != "observation":
            raise EpisodeError("the server answered %s" % json_text(answer)[:200])
        data = field(answer, "data")
        try:
            reward, done = parse_step(data)
        except Invalid as e:
            raise EpisodeError("an observation the arena cannot read: %s" % e) from None
        return data.get("observation"), reward, done

    def close(self):
        """Ends the session and waits (a second at most) until the server has let go of it, so that
        the next session of a server that holds one at a time is not refused."""
        try:
            self._send_frame(0x8, struct.pack("!H", 1000))
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 1
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                if not self.sock.recv(1 << 16):
                    break
        except OSError:
            pass
        finally:
            self.sock.close()


class Session:
    """One episode over a fresh WebSocket session, written into its transcript as it goes."""

    def __init__(self, server):
        self.socket = WebSocket(server)
        self.transcript = Transcript()

    def reset(self, data):
        """The reset's (observation, (reward, done))."""
        observation, reward, done = self.socket.exchange({"type": "reset", "data": data})
        self.transcript.add(data, observation, reward, done)
        return observation, (reward, done)

    def step(self, action):
        """The step's (reward, done)."""
        observation, reward, done = self.socket.exchange({"type": "step", "data": action})
        self.transcript.add(action, observation, reward, done)
        return reward, done

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.socket.close()


# ---- The checks, in admission's order --------------------------------------------------------------


def printable(text):
    """`text` with its C0 and C1 control characters (other than tab; newlines split lines) and
    DEL escaped as `\\xNN`: what a terminal shows as text and never obeys."""
    return "".join(c if c in "\t\n" or not (ord(c) < 32 or 127 <= ord(c) < 160) else "\\x%02x" % ord(c)
                   for c in text)


class Report:
    """What is printed as the checks go: `ok`, `FAIL`, `skip` lines, with each failure's code,
    evidence and fix."""

    def __init__(self, stream):
        self.stream = stream

    def line(self, text=""):
        # Every line may quote what a server sent: its control characters are shown escaped, so
        # that a server never retitles, clears or rewrites the terminal of whoever checks it.
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def ok(self, what, detail=""):
        self.line("  ok    %s%s" % (what, ": " + detail if detail else ""))

    def skip(self, what, detail):
        self.line("  skip  %s: %s" % (what, detail))

    def fail(self, what, failure):
        self.line("  FAIL  %s: %s %s" % (what, failure.code, failure.message))
        for text in evidence_lines(failure.evidence):
            self.line("        " + text)
        if failure.code in FIX:
            self.line("        fix: " + FIX[failure.code])


def evidence_lines(evidence):
    """Evidence for a reader: a line per transcript message, schema difference or failed check."""
    if not evidence:
        return []
    if "transcript" in evidence:
        lines = ["transcript (what the server answered):"]
        for e in evidence["transcript"]:
            lines.append("  sent %s -> reward %s, done %s, observation %s" % (
                json_text(e["sent"]), json_text(e["reward"]), json_text(e["done"]), e["observation"]))
        return lines + (["  (cut: at most 16 KiB are kept)"] if evidence.get("truncated") else [])
    if "differences" in evidence:
        lines = ["differences (served by the image / in the submission):"]
        lines += ["  %s: %s / %s" % (d["pointer"], d["served"], d["submitted"]) for d in evidence["differences"]]
        return lines + (["  and %d more" % evidence["more"]] if evidence.get("more") else [])
    if "failed_checks" in evidence:
        return ["failed: %s: expected %s; got %s" % (c["id"], c["expected"], c["actual"])
                for c in evidence["failed_checks"]]
    return ["evidence: " + json_text(evidence)]


def read_token():
    """The HF token: HF_TOKEN, else the file `hf auth login` saved; None when there is none."""
    token = os.environ.get("HF_TOKEN", "").strip()
    if token:
        return token
    path = os.environ.get("HF_TOKEN_PATH") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "token")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def arena_check(arena, body, report):
    """The arena's `POST /api/openenv/check` on the body: True when it passed, a Failure when the
    arena refused it, None when it could not be asked (said in the report)."""
    token = read_token()
    if not token:
        report.skip("body (the arena's check)", "no Hugging Face token (set HF_TOKEN or run `hf auth login`)")
        return None
    parts = urllib.parse.urlsplit(arena)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), timeout=60)
    try:
        conn.request("POST", parts.path.rstrip("/") + "/api/openenv/check", body=json.dumps(body).encode(),
                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json",
                              "User-Agent": USER_AGENT})
        resp = conn.getresponse()
        raw = resp.read(MAX_ANSWER_BYTES)
        status = resp.status
    except (OSError, http.client.HTTPException) as e:
        report.skip("body (the arena's check)", "could not reach %s: %s" % (arena, e))
        return None
    finally:
        conn.close()
    try:
        answer = loads(raw)
    except ValueError:
        answer = None
    code, message = field(answer, "code"), field(answer, "message")
    if status == 200:
        images = field(answer, "images") or []
        report.ok("body (the arena's check)", "%s task(s); image(s) %s" % (field(answer, "tasks"), ", ".join(images)))
        return True
    if status == 422 and isinstance(code, str):
        return Failure(code, message or "")
    report.skip("body (the arena's check)", "the arena answered HTTP %d%s" % (
        status, " %s: %s" % (code, message) if code else ""))
    return None


def check_body(body, arena, report):
    """Step 1: the body. Answers the parsed submission, or raises Failure."""
    report.line("The body")
    verdict = arena_check(arena, body, report) if arena else None
    if isinstance(verdict, Failure):
        raise verdict
    r = parse_body(body)
    check_contract(r)
    check_schema_shape(r)
    report.ok("body (the rules that need no arena)",
              "the guide's fields, the task limits, the schema's shape, no reserved action shapes")
    if verdict is None:
        report.skip("body (the rest)", "not checked here: the image references, the schemas compiled as JSON "
                                       "Schema, the example actions validated against the action schema, and the "
                                       "registry's reads%s" % ("" if arena else " (pass --arena URL)"))
    return r


def wait_healthy(server, wait_s):
    """Step 2: GET /health answers 200 within `wait_s`; raises Failure."""
    deadline = time.monotonic() + wait_s
    last = None
    while True:
        answer = server.get("/health")
        last = answer if answer is not None else last
        status = None if answer is None else answer.status
        if status == 200:
            return
        if status in (401, 403):
            raise Failure("OPENENV_ENDPOINT_INVALID", (
                "GET /health answered %d: the server asks for credentials the arena does not have; /health must "
                "answer 200 to anyone") % status)
        if status == 404:
            openapi = server.get("/openapi.json")
            if openapi is not None and openapi.status == 200:
                raise Failure("SANDBOX_STARTUP_FAILED", "the image serves GET /openapi.json but answers GET /health "
                                                        "with 404: it has no health route")
        if time.monotonic() >= deadline:
            if last is None:
                raise Failure("SANDBOX_STARTUP_FAILED", "nothing answered GET /health at %s within %s s (is the server "
                                                        "running? did it exit?)" % (server.url, wait_s))
            raise Failure("SANDBOX_STARTUP_FAILED", "GET /health at %s answered HTTP %d, not 200, for %s s"
                          % (server.url, last.status, wait_s))
        time.sleep(0.25)


def openenv_command():
    """How to run the installed `openenv` CLI, or None."""
    found = shutil.which("openenv")
    if found:
        return [found]
    try:
        spec = importlib.util.find_spec("openenv")
    except (ImportError, ValueError):
        spec = None
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if any(os.path.isdir(os.path.join(d, "cli")) for d in locations):
        return [sys.executable, "-m", "openenv.cli"]
    return None


def run_openenv_validate(url, report):
    """`openenv validate --url URL --json` when openenv is installed: its report, printed; the
    arena's verdict is the six criteria it checks itself."""
    command = openenv_command()
    if command is None:
        report.skip("openenv validate --url", "openenv is not installed here (`pip install openenv==0.10.0`); "
                                              "the six criteria below are the arena's own reading of it")
        return {"ran": False}
    try:
        done = subprocess.run(command + ["validate", "--url", url, "--json"], capture_output=True, text=True,
                              timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        report.skip("openenv validate --url", "could not run %s: %s" % (" ".join(command), e))
        return {"ran": False}
    try:
        result = loads(done.stdout)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        report.skip("openenv validate --url", "it printed no JSON report (exit %d): %s" % (done.returncode, tail[0]))
        return {"ran": True, "passed": None}
    failed = field(result, "summary", "failed_criteria") or [
        c.get("id") for c in result.get("criteria") or [] if isinstance(c, dict) and not c.get("passed")]
    if result.get("passed"):
        report.ok("openenv validate --url", "passed")
    else:
        report.line("  FAIL  openenv validate --url: failed %s" % ", ".join(str(f) for f in failed))
    return {"ran": True, "passed": bool(result.get("passed")), "failed": failed}


def probe(server):
    return {
        "openapi": server.get("/openapi.json"),
        "health": server.get("/health"),
        "metadata": server.get("/metadata"),
        "schema": server.get("/schema"),
        "mcp": server.post("/mcp", {}),
    }


def listed_task(server, task_id):
    """Step 5: the reset that plays `task_id` through the task API; raises Failure."""
    def unreadable(what):
        return Failure("OPENENV_ENDPOINT_INVALID", "its task API lists routes but %s" % what)

    def json_of(answer):
        return answer.json if answer is not None and answer.status == 200 else None

    envs = json_of(server.get("/list_environments"))
    if envs is None:
        raise unreadable("GET /list_environments fails")
    env = field(envs, 0)
    if not (isinstance(env, str) and env and env.isascii() and all(c.isalnum() or c in "_-." for c in env)):
        raise unreadable("GET /list_environments names no environment")
    answer = server.get("/%s/splits" % env)
    if answer is not None and answer.status == 501:
        return reset_for(task_id)
    splits = json_of(answer)
    if splits is None:
        raise unreadable("GET /%s/splits fails" % env)
    names = [s["name"] for s in splits if isinstance(s, dict) and isinstance(s.get("name"), str)] \
        if isinstance(splits, list) else []
    listed = []
    for name in names[:MAX_SPLITS]:
        tasks = json_of(server.post("/%s/tasks" % env, {"split": name}))
        if tasks is None:
            raise unreadable("POST /%s/tasks for split `%s` fails (or answers over 1 MiB)" % (env, name))
        listed.append((name, tasks))
    reset = task_reset(listed, task_id)
    if reset is None:
        shown = listed_ids(listed, MAX_LISTED)
        raise Failure("TASK_NOT_LISTED", "its task API lists no task `%s`; it lists %s" % (task_id, ", ".join(shown)),
                      {"listed": shown})
    return reset


def example_episode(server, reset, actions):
    """Step 7: the example actions after the reset, until `done`; raises Failure with the transcript."""
    try:
        session = Session(server)
    except EpisodeError as e:
        raise Failure("ADMISSION_EPISODE_FAILED", str(e), Transcript().evidence()) from None
    with session:
        try:
            _, first = session.reset(reset)
            steps = []
            for action in actions:
                steps.append(session.step(action))
                if steps[-1][1]:
                    break
            return judge_episode(first, steps, len(actions))
        except (EpisodeError, Invalid) as e:
            raise Failure("ADMISSION_EPISODE_FAILED", str(e), session.transcript.evidence()) from None


def fresh(server, reset, seed):
    """A fresh session reset to the task with `seed`, and its first observation's fingerprint; a
    server that refuses the seed is reset without it (and gives no fingerprint). EpisodeError (with
    the failing session's `transcript`) when neither reset answers."""
    for data in (seeded(reset, seed), reset):
        session = Session(server)
        try:
            observation, _ = session.reset(data)
            return session, fingerprint(observation) if data is not reset else None
        except EpisodeError as e:
            session.socket.close()
            e.transcript = session.transcript
            failure = e
    raise failure


FINISH_ACTION_MISSING = ("the submission has no `finish_action`: an episode the model stops, or ends with an "
                         "invalid reply, then ends with no reward and trains nothing. A finish action that ends "
                         "any episode with its reward so far lets such episodes still count")


def finish_check(server, reset, actions, finish, firsts, rewards):
    """Step 8: `finish_action` from a fresh reset (seed 1), and after the first example action
    (seed 2, unless that action ended the episode); raises Failure with the failing session's
    transcript. Without `finish_action`, the two seeded resets are played for the first-observation
    warning only."""
    for seed in FINISH_SEEDS:
        try:
            session, first = fresh(server, reset, seed)
        except EpisodeError as e:
            if finish is None:
                continue
            transcript = getattr(e, "transcript", None) or Transcript()
            raise Failure("FINISH_ACTION_INVALID", str(e), transcript.evidence()) from None
        with session:
            if first is not None:
                firsts.append(first)
            if finish is None:
                continue
            when = "from a fresh reset" if seed == FINISH_SEEDS[0] else "after the first example action"
            try:
                if seed != FINISH_SEEDS[0] and session.step(actions[0])[1]:
                    continue  # the first example action ended the episode: nothing is left to finish
                after = session.step(finish)
            except EpisodeError as e:
                raise Failure("FINISH_ACTION_INVALID", "`finish_action` %s: %s" % (when, e),
                              session.transcript.evidence()) from None
            try:
                rewards.append(judge_finish(after))
            except Invalid as e:
                raise Failure("FINISH_ACTION_INVALID", "%s: %s" % (when, e), session.transcript.evidence()) from None


def check_server(r, tasks, url, wait_s, report):
    """Steps 2 to 9 for `tasks` against the server at `url`: {task_id: Failure or None}, the
    warnings, and what `openenv validate` said."""
    server = Server(url)
    outcome = {t["task_id"]: None for t in tasks}

    def all_fail(failure):
        for task_id in outcome:
            outcome[task_id] = failure
        return outcome, [], validate

    validate = {"ran": False}
    report.line("The server at %s" % url)
    try:
        wait_healthy(server, wait_s)
    except Failure as f:
        report.fail("serving", f)
        return all_fail(f)
    report.ok("serving", "GET /health answered 200")
    validate = run_openenv_validate(url, report)
    reads = probe(server)
    failed = [c for c in criteria(reads) if not c["passed"]]
    if failed:
        f = Failure("OPENENV_ENDPOINT_INVALID", "openenv validate fails: " + "; ".join(
            "%s (expected %s; got %s)" % (c["id"], c["expected"], c["actual"]) for c in failed),
            {"failed_checks": [{"id": c["id"], "expected": c["expected"], "actual": c["actual"]} for c in failed]})
        report.fail("openenv validate's six criteria", f)
        return all_fail(f)
    report.ok("openenv validate's six criteria")
    served = reads["schema"].json
    differences, more = schema_differences(served, r["schema"])
    if differences:
        parts = sorted({d["pointer"].split("/")[1] for d in differences}, key=("action", "observation").index)
        f = Failure("IMAGE_SCHEMA_MISMATCH", "the image's /schema %s %s from the submission's at %s" % (
            " and ".join("`%s`" % p for p in parts), "differ" if len(parts) > 1 else "differs",
            ", ".join(d["pointer"] for d in differences)
            + (" and %d more" % more if more else "")), {"differences": differences, "more": more})
        report.fail("/schema equals the submission's schema", f)
        return all_fail(f)
    report.ok("/schema equals the submission's schema")
    openapi = reads["openapi"].json
    task_api = has_task_api(openapi)
    listing = server.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    try:
        tools = tool_list(listing.json if listing is not None else None)
        tools_failure = None
    except Invalid as e:
        tools, tools_failure = [], Failure("OPENENV_ENDPOINT_INVALID", "its tools: %s" % e)
    firsts, rewards = {}, []
    for t in tasks:
        task_id = t["task_id"]
        report.line("Task %s" % task_id)
        try:
            if task_api:
                reset = listed_task(server, task_id)
                report.ok("task API", "lists it: reset with %s" % json_text(reset))
            else:
                reset = reset_for(task_id)
                report.skip("task API", "none served: reset with %s" % json_text(reset))
            if tools_failure:
                report.fail("tools", tools_failure)
                raise tools_failure
            report.ok("tools", "%d listed (%s)" % (len(tools), ", ".join(x["name"] for x in tools))
                      if tools else "none listed (not a tools environment)")
            firsts[task_id] = []
            reward = example_episode(server, reset, r["example_actions"])
            rewards.append(reward)
            report.ok("example episode", "ended with reward %s" % display_float(reward))
            finish_check(server, reset, r["example_actions"], r["finish_action"], firsts[task_id], rewards)
            if r["finish_action"] is None:
                report.skip("finish_action", "the submission has none")
            else:
                report.ok("finish_action", "ends an episode from a fresh reset and after the first example action")
        except Failure as f:
            outcome[task_id] = f
            if f is not tools_failure:
                report.fail({"TASK_NOT_LISTED": "task API", "OPENENV_ENDPOINT_INVALID": "task API",
                             "ADMISSION_EPISODE_FAILED": "example episode",
                             "FINISH_ACTION_INVALID": "finish_action"}.get(f.code, "task"), f)
            firsts.pop(task_id, None)
    # Only when every task passed: a task that failed leaves nothing to compare.
    passed = len(firsts) == len(tasks)
    warnings = [{"code": "RESET_IGNORES_TASK", "message": IGNORES_TASK, "task_id": task_id}
                for task_id in ignored_task(firsts if passed else {})]
    # Like the arena's, only a submission whose every task passed is warned.
    return outcome, warnings + (submission_warnings(r, rewards) if passed else []), validate


def submission_warnings(r, rewards):
    """The arena's warnings about the whole submission (`admission::warnings`): no `finish_action`,
    and terminal rewards that never differ across every task's example and finish actions."""
    out = []
    if r["finish_action"] is None:
        out.append({"code": "FINISH_ACTION_MISSING", "message": FINISH_ACTION_MISSING, "task_id": None})
    if len(rewards) >= 2 and all(x == rewards[0] for x in rewards):
        out.append({"code": "REWARD_NEVER_VARIES", "task_id": None, "message": (
            "all %d rewards your example actions and finish actions gave were %s: a reward that never depends on "
            "the action gives the model nothing to learn from (a step whose four rewards are equal has no training "
            "signal, and a run without one is never ranked)" % (len(rewards), display_float(rewards[0])))})
    return out


def usage_url(value, what, loopback_http_only=False):
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise Usage("%s must be an http:// or https:// address, got %r" % (what, value))
    if loopback_http_only and parts.scheme == "http":
        host = parts.hostname.lower()
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise Usage("%s must be https://...; plain http:// is accepted only for 127.0.0.1, localhost and ::1"
                        % what)
    return value.rstrip("/")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="openenv_check.py",
        description="Run the arena's OpenEnv admission against your own running server (stores nothing, "
                    "spends no slot).",
        epilog="Exit status: 0 every task passes, 1 a check failed, 2 a usage error.")
    parser.add_argument("submission", metavar="SUBMISSION.json", help="the body you will submit")
    parser.add_argument("--url", required=True, help="your running server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--task", action="append", metavar="TASK_ID",
                        help="check only this task (repeat for several): the tasks this server's image serves")
    parser.add_argument("--arena", metavar="URL",
                        help="also have the arena check the body (POST URL/api/openenv/check, your HF token)")
    parser.add_argument("--wait", type=float, default=30, metavar="S",
                        help="seconds to wait for GET /health (default 30; the arena waits 120)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout (the report on stderr)")
    args = parser.parse_args(argv)
    report = Report(sys.stderr if args.json else sys.stdout)
    try:
        url = usage_url(args.url, "--url")
        arena = usage_url(args.arena, "--arena", loopback_http_only=True) if args.arena else None
        try:
            with open(args.submission, "rb") as f:
                body = loads(f.read())
        except (OSError, ValueError) as e:
            raise Usage("cannot read %s as JSON: %s" % (args.submission, e))
    except Usage as e:
        sys.stderr.write("openenv_check.py: %s\n" % e)
        return EXIT_USAGE
    summary = {"ok": False, "body": None, "tasks": [], "warnings": [], "openenv_validate": {"ran": False}}
    report.line("openenv_check.py: %s against %s (admission's checks; nothing is stored, no slot is spent)"
                % (args.submission, url))
    try:
        r = check_body(body, arena, report)
    except Failure as f:
        report.fail("body", f)
        summary["body"] = {"code": f.code, "message": f.message}
        return finish(summary, args.json, report)
    tasks = r["tasks"]
    if args.task:
        unknown = [t for t in args.task if t not in {x["task_id"] for x in tasks}]
        if unknown:
            sys.stderr.write("openenv_check.py: the submission has no task %s\n" % ", ".join(unknown))
            return EXIT_USAGE
        tasks = [t for t in tasks if t["task_id"] in args.task]
    outcome, warnings, validate = check_server(r, tasks, url, args.wait, report)
    summary["openenv_validate"] = validate
    summary["tasks"] = [{"task_id": task_id, "code": f.code if f else None, "message": f.message if f else "passed",
                         "evidence": f.evidence if f else None} for task_id, f in outcome.items()]
    summary["warnings"] = warnings
    summary["ok"] = all(f is None for f in outcome.values())
    if warnings:
        report.line("Warnings")
        for w in warnings:
            report.line("  warn  %s%s: %s" % (w["task_id"] + " " if w["task_id"] else "", w["code"], w["message"]))
        if any(w["code"] == "RESET_IGNORES_TASK" for w in warnings):
            report.line("        fix: " + FIX["RESET_IGNORES_TASK"])
    return finish(summary, args.json, report)


def finish(summary, as_json, report):
    failed = [t["task_id"] for t in summary["tasks"] if t["code"]]
    if summary["body"]:
        report.line("Result: the arena would refuse this body at once (%s); nothing else was checked."
                    % summary["body"]["code"])
    elif failed:
        report.line("Result: %d of %d task(s) fail: %s. Admission would reject the submission."
                    % (len(failed), len(summary["tasks"]), ", ".join(failed)))
    else:
        report.line("Result: every task passes admission's checks%s."
                    % (" (with warnings)" if summary["warnings"] else ""))
    if as_json:
        sys.stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    return EXIT_OK if summary["ok"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
