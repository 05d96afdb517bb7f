"""Action schemas are data, never addresses: the test plays a participant whose schema points
outside itself, at a file on the node and at a local HTTP server, and replies with JSON. Neither
is read or asked; the reply is invalid with a fixed sentence and only that episode ends. A schema
made to hang or exhaust the checker (a pattern that backtracks for ever, reference loops, deep
nesting) ends its reply invalid within a bounded time, and the trainer's process goes on."""

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from arena_cluster import schemas, tiny_model
from arena_cluster.episodes import Template, episode
from arena_cluster.runstate import Actions, Assignment, Failure
from echo import TASK, Echo

# Every file opened and every socket connected while `watching` holds (Python's audit events:
# `open` for builtins.open, io.open and os.open, `socket.connect`, `urllib.Request`).
SEEN: list = []
watching = threading.Event()


def _audit(event, args):
    if watching.is_set() and event in ("open", "socket.connect", "urllib.Request"):
        SEEN.append((event, str(args[0]) if args else ""))


sys.addaudithook(_audit)


class Recorder(ThreadingHTTPServer):
    def __init__(self):
        self.seen = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.seen.append(self.path)
                body = b'{"type": "string"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model.build(tiny_model.default_path()))


class Scripted:
    """A policy that replies the same JSON every turn."""

    def __init__(self, tokenizer, reply: str):
        self.template = Template(tokenizer)
        self.reply = self.template.encode(reply) + [tokenizer.eos_token_id]
        self.eos = tokenizer.eos_token_id

    def turns_over(self):
        pass

    def generate(self, ids, max_new_tokens, seed=None):
        return list(self.reply)

    def text(self, ids):
        return self.template.tokenizer.decode([i for i in ids if i != self.eos])


def attacks(secret, url):
    """Per draft, its keywords that point outside the schema."""
    file_ref, http_ref = f"file://{secret}#/nope", f"{url}/schema.json"
    out = []
    for draft in schemas.DRAFTS:
        out += [(draft, {"$ref": file_ref}), (draft, {"properties": {"message": {"$ref": http_ref}}})]
    out += [("draft2020-12", {"$dynamicRef": file_ref}), ("draft2020-12", {"$dynamicRef": http_ref}),
            ("draft2019-09", {"$recursiveRef": file_ref})]
    return out


def test_a_schema_that_points_outside_itself_reads_nothing_and_ends_its_episode_invalid(tokenizer, tmp_path):
    secret = tmp_path / "some-secret.json"
    secret.write_text('{"type": "object"}')
    server = Recorder()
    url = "http://127.0.0.1:%d" % server.server_address[1]
    policy = Scripted(tokenizer, '{"message": "hello"}')
    try:
        for draft, schema in attacks(secret, url):
            actions = Actions.of({"schema": {"action": schema}, "schema_draft": draft,
                                  "finish_action": {"message": "finish"}}, "submission")
            watching.set()
            try:
                played = episode(policy, Echo(), TASK, actions)
            finally:
                watching.clear()
            assert played.end == "invalid_reply", (draft, schema, played)
            assert played.why == f"the action does not match the action schema: {schemas.UNCHECKABLE}", played.why
            assert str(secret) not in str(SEEN) and "connect" not in str(SEEN), (draft, schema, SEEN)
            assert played.score == 0.0, "the finish action still scores the episode"
    finally:
        server.shutdown()
    assert server.seen == [], "the local server got a request"


def test_a_schema_that_recurses_without_end_ends_its_episode_not_the_run(tokenizer):
    loop = {"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/a"}}}
    for draft in ("draft4", "draft7", "draft2020-12"):
        valid = schemas.validator(loop, draft)
        assert valid({"message": "x"}) == schemas.UNCHECKABLE
    played = episode(Scripted(tokenizer, '{"message": "hello"}'), Echo(), TASK,
                     Actions.of({"schema": {"action": loop}, "schema_draft": "draft7"}, "submission"))
    assert played.end == "invalid_reply" and played.score is None


def test_each_draft_is_its_own_rules():
    """`exclusiveMinimum` is a boolean beside `minimum` in draft 4 and a number after it."""
    assert schemas.validator({"minimum": 1, "exclusiveMinimum": True}, "draft4")(1) is not None
    assert schemas.validator({"exclusiveMinimum": 1}, "draft7")(1) is not None
    assert schemas.validator({"exclusiveMinimum": 1}, "draft7")(2) is None
    # A schema's own `$schema` does not choose: the arena's draft does.
    own = {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": 1}
    assert schemas.validator(own, "draft2020-12")(1) is not None


def assignment(submission_draft="draft2020-12", env_draft="draft7"):
    schema = {"action": {"type": "object"}}
    env = {"image": "x@sha256:" + "0" * 64, "port": 8000, "command": [], "schema": schema, "tasks": []}
    if env_draft is not None:
        env["schema_draft"] = env_draft
    submission = {"schema": schema, "tasks": [TASK]}
    if submission_draft is not None:
        submission["schema_draft"] = submission_draft
    return {"run_id": "oe-1", "model": {"repo": "m", "revision": "r"}, "recipe": {}, "submission": submission,
            "benchmark": {"id": "b", "trials": 1, "phase_allowance_s": 600, "environments": [env]}}


def test_an_assignment_without_a_draft_is_refused_by_name():
    a = Assignment.read(assignment())
    assert (a.actions.draft, a.benchmark_actions[0].draft) == ("draft2020-12", "draft7")
    with pytest.raises(Failure, match="RUN_TRAINER_FAILED: the assignment's submission has no schema_draft"):
        Assignment.read(assignment(submission_draft=None))
    with pytest.raises(Failure, match="the assignment's held-out environment 1 has no schema_draft"):
        Assignment.read(assignment(env_draft=None))
    with pytest.raises(Failure, match="has schema_draft 'draft3', not one of draft4, draft6"):
        Assignment.read(assignment(submission_draft="draft3"))


def nested(depth):
    schema = {"type": "object"}
    for _ in range(depth):
        schema = {"allOf": [schema]}
    return schema


HOSTILE = {
    "a pattern that backtracks for ever": (
        {"type": "object", "properties": {"message": {"type": "string", "pattern": "^(a+)+$"}}},
        {"message": "a" * 40 + "!"}),
    "a $ref loop beside unevaluatedProperties": (
        {"type": "object", "$ref": "#", "unevaluatedProperties": False}, {"message": "x"}),
    "a $dynamicRef loop": ({"$dynamicAnchor": "a", "$dynamicRef": "#a", "unevaluatedProperties": False},
                           {"message": "x"}),
    "a schema nested 2,000 deep": (nested(2000), {"message": "x"}),
    "a schema nested 100,000 deep": (nested(100_000), {"message": "x"}),
}
REQUIRED = {"type": "object", "required": ["message"]}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_schema_ends_its_reply_invalid_in_bounded_time_and_the_trainer_goes_on(name):
    schema, action = HOSTILE[name]
    # A worker running (the previous case's was killed), so that its start is not timed below.
    assert schemas.validator(REQUIRED, "draft2020-12")({"message": "x"}) is None
    started = time.monotonic()
    assert schemas.validator(schema, "draft2020-12")(action) == schemas.UNCHECKABLE
    assert time.monotonic() - started < schemas.DEADLINE_S + 1.5, "the check was not cut at its deadline"
    # The checks that follow are answered (by a worker started again if it was killed).
    assert schemas.validator(REQUIRED, "draft2020-12")({}) == "'message' is a required property"
    assert schemas.validator(REQUIRED, "draft2020-12")({"message": "x"}) is None


def test_a_deep_schema_that_ends_is_still_checked():
    schema, action = {"type": "string"}, "x"
    for _ in range(450):
        schema, action = {"properties": {"a": schema}}, {"a": action}
    valid = schemas.validator(schema, "draft2020-12")
    assert valid(action) is None
    assert valid({"a": 1}) is None and valid(7) is None, "only objects are held to properties"


def test_a_backtracking_pattern_ends_its_episode_invalid_not_the_run(tokenizer):
    schema = HOSTILE["a pattern that backtracks for ever"][0]
    actions = Actions.of({"schema": {"action": schema}, "schema_draft": "draft2020-12",
                          "finish_action": {"message": "finish"}}, "submission")
    played = episode(Scripted(tokenizer, '{"message": "' + "a" * 40 + '!"}'), Echo(), TASK, actions)
    assert played.end == "invalid_reply" and played.why.endswith(schemas.UNCHECKABLE), played.why
    assert played.score == 0.0, "the finish action still scores the episode"


def test_a_worker_that_dies_mid_check_makes_that_reply_invalid_and_is_started_again():
    valid = schemas.validator(HOSTILE["a pattern that backtracks for ever"][0], "draft2020-12")
    schemas.validator(REQUIRED, "draft2020-12")({})  # a worker running
    worker = schemas._WORKER.proc
    threading.Timer(0.3, worker.kill).start()
    started = time.monotonic()
    assert valid({"message": "a" * 40 + "!"}) == schemas.UNCHECKABLE
    # An answer given up at the deadline comes DEADLINE_S after `started` at the earliest; the
    # kill comes at 0.3 s, and all the rest is slack for a loaded machine.
    assert time.monotonic() - started < schemas.DEADLINE_S, "a dead worker is seen at once, not at the deadline"
    assert schemas.validator(REQUIRED, "draft2020-12")({"message": "x"}) is None
    assert schemas._WORKER.proc.pid != worker.pid


def test_the_worker_holds_no_credential_and_a_bounded_address_space(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_of_the_node")
    schemas._WORKER._stop()
    assert schemas.validator(REQUIRED, "draft2020-12")({"message": "x"}) is None
    pid = schemas._WORKER.proc.pid
    assert b"hf_secret_of_the_node" not in open(f"/proc/{pid}/environ", "rb").read()
    limits = open(f"/proc/{pid}/limits").read()
    line = next(x for x in limits.splitlines() if x.startswith("Max address space"))
    assert str(schemas.ADDRESS_SPACE) in line, line


def test_a_worker_that_cannot_start_fails_the_check_clearly(monkeypatch):
    schemas._WORKER._stop()
    monkeypatch.setattr(schemas.sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="worker .* ended with exit code 1 before it was ready"):
        schemas.validator(REQUIRED, "draft2020-12")({"message": "x"})
    monkeypatch.undo()
    assert schemas.validator(REQUIRED, "draft2020-12")({"message": "x"}) is None
