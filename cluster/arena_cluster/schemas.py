"""Action schemas are data, never addresses. A submission's schema (and each held-out
environment's) comes with the JSON Schema draft the arena decided for it (`schema_draft`), and is
compiled with that draft's validator class explicitly (never from its own `$schema`) and a
`referencing.Registry` that retrieves nothing: a `$ref`, `$dynamicRef` or `$recursiveRef` to
anything outside the schema (a `file://` path, an `http://` address, …) is unresolvable, never
fetched. jsonschema's default registry would fetch it with urllib.

No schema makes checking a reply raise or stop the trainer: a schema that cannot be applied to an
action (an unresolvable reference, a reference loop that recurses without end, …) makes the reply
invalid with a fixed sentence, so that episode ends `invalid_reply` and the run goes on. The
sentence is fixed: an exception's text could carry what the schema's author chose to put there.

Checks run in a worker process of their own (`_Worker`, this module run as `__main__`), because
Python's `re` has no time bound (a `pattern` such as `^(a+)+$` backtracks for ever on
`"a" * 40 + "!"`, holding the GIL) and a schema deep enough can exhaust a process's stack or
memory. The worker speaks JSON lines on its standard input and output, keeps each schema compiled,
runs with its address space limited to `ADDRESS_SPACE` bytes and without the node's credentials
in its environment. Each reply gets `DEADLINE_S` seconds (a check takes well under a millisecond;
a reply of the model takes seconds to generate): past it the worker is killed and started again
on the next check, and the reply is UNCHECKABLE, as it is when the worker dies. The deadline
starts once the worker said it is ready: a fresh one first starts Python and imports jsonschema,
which can take seconds on a loaded node. It gets `READY_S` for that, past which the check raises
(a worker that cannot start is the node's failure, whatever the schema: none was sent to it yet).
The worker also stops itself (SIGALRM's default action, which needs no GIL) when a check outlives
the deadline by a second, so a trainer killed meanwhile leaves nothing spinning.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource

DRAFTS = {
    "draft4": jsonschema.Draft4Validator,
    "draft6": jsonschema.Draft6Validator,
    "draft7": jsonschema.Draft7Validator,
    "draft2019-09": jsonschema.Draft201909Validator,
    "draft2020-12": jsonschema.Draft202012Validator,
}
UNCHECKABLE = "the action schema cannot be applied to it (a reference outside the schema, or one that never ends)"
# The time one reply's check may take, the worker's round trip included.
DEADLINE_S = 2.0
# The time a fresh worker may take to start and import jsonschema before it says it is ready
# (under a second on an idle machine): generous, so that a loaded node never fails a check.
READY_S = 30.0
# The worker's first line, once its imports are done.
READY_LINE = '{"ready": true}\n'
# The worker's address space: Python and jsonschema need about 100 MB of it.
ADDRESS_SPACE = 1 << 30
# What the worker inherits of the environment: enough to start Python, no credential.
_WORKER_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL")


def _refuse(uri: str):
    """The registry's only way to find a resource it does not hold: none is ever retrieved."""
    raise NoSuchResource(ref=uri)


NO_RETRIEVAL = Registry(retrieve=_refuse)


def draft_refusal(draft) -> str | None:
    """Why `draft` is not one the trainer compiles with; None when it is."""
    if draft is None:
        return "has no schema_draft"
    if draft not in DRAFTS:
        return f"has schema_draft {str(draft)[:40]!r}, not one of {', '.join(DRAFTS)}"
    return None


_ids = itertools.count(1)


def validator(schema, draft: str):
    """`valid(action) -> str | None` (the reason the action is invalid, or None) for `schema`
    under `draft`'s rules, checked by the worker. Raises ValueError for a draft that is not one of
    `DRAFTS`."""
    why = draft_refusal(draft)
    if why:
        raise ValueError(f"the schema {why}")
    key = next(_ids)
    try:
        schema_text = json.dumps(schema)
    except (ValueError, TypeError, RecursionError):  # too deep to be written: no reply can be checked
        schema_text = None

    def valid(action) -> str | None:
        if schema_text is None:
            return UNCHECKABLE
        return _WORKER.check(key, schema_text, draft, action)

    return valid


class _Worker:
    """The checking process, started on first use and again after it was killed or died; one
    check at a time (the episodes of a step check their replies from their own threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        # The schemas the running worker holds compiled, by key.
        self.known: set = set()

    def check(self, key: int, schema_text: str, draft: str, action) -> str | None:
        try:
            line = json.dumps({"id": key, "action": action})
        except (ValueError, TypeError, RecursionError):
            return UNCHECKABLE
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            if key not in self.known:
                line = line[:-1] + f', "draft": {json.dumps(draft)}, "schema": {schema_text}}}'
            answer = self._ask(line)
            if answer is None:
                self._stop()
                return UNCHECKABLE
            self.known.add(key)
        return answer.get("why")

    def _ask(self, line: str) -> dict | None:
        """The worker's answer to one line, or None when it gave none in time."""
        deadline = time.monotonic() + DEADLINE_S
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
            got = self._read_line(deadline)
            return None if got is None else json.loads(got)
        except (OSError, ValueError):
            return None

    def _read_line(self, deadline: float) -> bytes | None:
        """The worker's next line, or None when it ended or gave none by `deadline`."""
        out = self.proc.stdout.fileno()
        got = b""
        while not got.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return None
            chunk = os.read(out, 1 << 16)
            if not chunk:
                return None
            got += chunk
        return got

    def _start(self) -> None:
        env = {k: os.environ[k] for k in _WORKER_ENV if k in os.environ}
        self.proc = subprocess.Popen([sys.executable, "-m", "arena_cluster.schemas"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     cwd=str(Path(__file__).resolve().parent.parent))
        self.known = set()
        try:
            ready = self._read_line(time.monotonic() + READY_S) == READY_LINE.encode()
        except OSError:
            ready = False
        if not ready:
            proc = self.proc
            self._stop()
            how = (f"did not say it was ready within {READY_S:.0f} s" if proc.returncode == -signal.SIGKILL
                   else f"ended with exit code {proc.returncode} before it was ready")
            raise RuntimeError(f"the action schema checker's worker ({sys.executable} -m arena_cluster.schemas) {how}")

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                pipe.close()
        self.proc = None


_WORKER = _Worker()


def _serve() -> None:
    """The worker: one JSON line in (`id`, `action`, and the first time an id comes, its `draft`
    and `schema`), one out (`why`: None when the action is valid)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # The parent starts a check's deadline only from here: the imports above take seconds on a loaded node.
    sys.stdout.write(READY_LINE)
    sys.stdout.flush()
    compiled = {}
    for line in sys.stdin:
        try:
            m = json.loads(line)
            if "schema" in m:
                compiled[m["id"]] = DRAFTS[m["draft"]](m["schema"], registry=NO_RETRIEVAL)
            signal.setitimer(signal.ITIMER_REAL, DEADLINE_S + 1)
            err = jsonschema.exceptions.best_match(compiled[m["id"]].iter_errors(m["action"]))
            why = None if err is None else err.message
        except Exception:  # noqa: BLE001 - unresolvable, recursion, memory, a malformed schema: all the same sentence
            why = UNCHECKABLE
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout.write(json.dumps({"why": why}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
